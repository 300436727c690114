// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuBLAS / cuBLASLt status codes turned into gpucmp's typed errors: allocation failures
// become out_of_memory, "not supported" becomes unsupported, the rest a library_error that
// names the call and the status.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

namespace gpucmp {

namespace detail {

inline void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const std::string name = cublasLtGetStatusName(status);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
    throw out_of_memory(0, free_bytes, total_bytes, what + " (cuBLAS " + name + ")");
  }
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH) {
    throw unsupported(what + ": cuBLAS " + name);
  }
  throw library_error("cuBLAS error " + name + " (" + cublasLtGetStatusString(status) + ") in " + what);
}

}  // namespace detail
}  // namespace gpucmp

/// Evaluates a cuBLAS/cuBLASLt call once and throws a gpucmp error naming it when it fails.
#define GPUCMP_CUBLAS_CHECK(expr) ::gpucmp::detail::check_cublas((expr), #expr)
