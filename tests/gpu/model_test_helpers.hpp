// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Helpers the model tests share (one definition, so that CI can compile a test program's
// CUDA files as one translation unit: GPUCMP_UNITY_TESTS): library handles owned by the test,
// random values in [-1, 1) from gpucmp's counter-based generator, FP32 values widened to FP64.
#pragma once

#include "catch.hpp"

#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cublasLt.h>
#include <cudnn.h>

#include <cstdint>
#include <vector>

namespace gpucmp_test {

using cudnn_handle = gpucmp::detail::unique_handle<cudnnHandle_t, cudnnDestroy>;
using cublaslt_handle = gpucmp::detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;

inline cudnn_handle make_cudnn_handle() {
  cudnnHandle_t h = nullptr;
  REQUIRE(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS);
  return cudnn_handle(h);
}

inline cublaslt_handle make_cublaslt_handle() {
  cublasLtHandle_t h = nullptr;
  REQUIRE(cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS);
  return cublaslt_handle(h);
}

/// `count` values in [-1, 1), the `seed`'s stream.
inline std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = float(2 * gpucmp::unit_interval(gpucmp::random_bits(seed, i)) - 1);
  return v;
}

inline std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace gpucmp_test
