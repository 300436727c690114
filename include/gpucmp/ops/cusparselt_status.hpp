// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuSPARSELt status codes turned into gpucmp's typed errors: allocation failures become
// out_of_memory, "not supported" (a precision, shape or GPU cuSPARSELt does not take) becomes
// unsupported, the rest a library_error that names the call and the status.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>
#include <cusparseLt.h>

#include <string>

namespace gpucmp {

namespace detail {

inline void check_cusparselt(cusparseStatus_t status, const std::string& what) {
  if (status == CUSPARSE_STATUS_SUCCESS) return;
  const char* name = cusparseLtGetErrorName(status);
  const char* text = cusparseLtGetErrorString(status);
  const std::string status_name = name != nullptr ? name : "status " + std::to_string(int(status));
  if (status == CUSPARSE_STATUS_ALLOC_FAILED || status == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES) {
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
    throw out_of_memory(0, free_bytes, total_bytes, what + " (cuSPARSELt " + status_name + ")");
  }
  if (status == CUSPARSE_STATUS_NOT_SUPPORTED || status == CUSPARSE_STATUS_ARCH_MISMATCH) {
    throw unsupported(what + ": cuSPARSELt " + status_name);
  }
  throw library_error("cuSPARSELt error " + status_name + " (" + (text != nullptr ? text : "") + ") in " + what);
}

}  // namespace detail
}  // namespace gpucmp

/// Evaluates a cuSPARSELt call once and throws a gpucmp error naming it when it fails.
#define GPUCMP_CUSPARSELT_CHECK(expr) ::gpucmp::detail::check_cusparselt((expr), #expr)
