// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuDNN status codes turned into gpucmp's typed errors: allocation failures become
// out_of_memory, "not supported" becomes unsupported, the rest a library_error naming the
// call and the status (with cuDNN's own last error message, which often says why).
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

namespace gpucmp::detail {

inline void check_cudnn(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string name = cudnnGetErrorString(status);
  char detail_message[512] = {};
  cudnnGetLastErrorString(detail_message, sizeof detail_message);
  const std::string why = detail_message[0] != '\0' ? std::string(": ") + detail_message : std::string();
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
    throw out_of_memory(0, free_bytes, total_bytes, what + " (cuDNN " + name + ")");
  }
  if (status / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) {  // the 3000 family
    throw unsupported(what + ": cuDNN " + name + why);
  }
  throw library_error("cuDNN error " + name + " in " + what + why);
}

}  // namespace gpucmp::detail

/// Evaluates a cuDNN call once and throws a gpucmp error naming it when it fails.
#define GPUCMP_CUDNN_CHECK(expr) ::gpucmp::detail::check_cudnn((expr), #expr)
