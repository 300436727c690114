// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuBLAS and cuDNN status codes become typed gpucmp errors naming the call (host only: the
// mapping needs the libraries' status strings, not a GPU).
#include "catch.hpp"

#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/cudnn_status.hpp>

#include <string>

TEST_CASE("cuBLAS statuses map to typed errors", "[ops][errors]") {
  CHECK_NOTHROW(gpucmp::detail::check_cublas(CUBLAS_STATUS_SUCCESS, "x"));
  CHECK_THROWS_AS(gpucmp::detail::check_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul"), gpucmp::unsupported);
  CHECK_THROWS_WITH(gpucmp::detail::check_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul"),
                    GPUCMP_CONTAINS("unsupported: cublasLtMatmul: cuBLAS CUBLAS_STATUS_NOT_SUPPORTED"));
  CHECK_THROWS_AS(gpucmp::detail::check_cublas(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtCreate"), gpucmp::out_of_memory);
  CHECK_THROWS_AS(gpucmp::detail::check_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul"), gpucmp::library_error);
  CHECK_THROWS_WITH(gpucmp::detail::check_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul"),
                    GPUCMP_CONTAINS("CUBLAS_STATUS_INVALID_VALUE") && GPUCMP_CONTAINS("in cublasLtMatmul"));
}

TEST_CASE("cuDNN statuses map to typed errors", "[ops][errors]") {
  CHECK_NOTHROW(gpucmp::detail::check_cudnn(CUDNN_STATUS_SUCCESS, "x"));
  CHECK_THROWS_AS(gpucmp::detail::check_cudnn(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, "cudnnBackendFinalize"), gpucmp::unsupported);
  CHECK_THROWS_AS(gpucmp::detail::check_cudnn(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "plan"),
                  gpucmp::out_of_memory);
  CHECK_THROWS_AS(gpucmp::detail::check_cudnn(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor"), gpucmp::library_error);
  CHECK_THROWS_WITH(gpucmp::detail::check_cudnn(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor"),
                    GPUCMP_CONTAINS("CUDNN_STATUS_BAD_PARAM") && GPUCMP_CONTAINS("cudnnSetTensor4dDescriptor"));
}
