// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Reaches CUDA driver API functions through the runtime's entry-point query, so nothing
// links libcuda and a machine without the driver still loads the program.
#pragma once

#include <cuda.h>  // driver API types only; no driver function is called directly
#include <cuda_runtime_api.h>

#include <string>

namespace gpucmp::detail {

/// The driver function `symbol` as of ABI `cuda_version` (e.g. 12000), or nullptr with
/// `why` saying what was missing.
inline void* driver_entry_point(const char* symbol, unsigned cuda_version, std::string& why) noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t code = cudaGetDriverEntryPointByVersion(symbol, &fn, cuda_version, cudaEnableDefault, &found);
#else
  (void)cuda_version;
  const cudaError_t code = cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &found);
#endif
  if (code != cudaSuccess) {
    cudaGetLastError();
    why = std::string("cannot query driver entry point ") + symbol + ": " + cudaGetErrorName(code);
    return nullptr;
  }
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    why = std::string("driver has no ") + symbol + " (entry-point query result " + std::to_string(int(found)) + ")";
    return nullptr;
  }
  return fn;
}

/// "CUDA_ERROR_NOT_SUPPORTED" for a driver result, through the driver's own cuGetErrorName when reachable.
inline std::string driver_error_name(CUresult result) {
  using get_error_name_fn = CUresult(CUDAAPI*)(CUresult, const char**);
  std::string why;
  static auto* get_name = reinterpret_cast<get_error_name_fn>(driver_entry_point("cuGetErrorName", 6000, why));
  const char* name = nullptr;
  if (get_name != nullptr && get_name(result, &name) == CUDA_SUCCESS && name != nullptr) return name;
  return "CUresult " + std::to_string(int(result));
}

}  // namespace gpucmp::detail
