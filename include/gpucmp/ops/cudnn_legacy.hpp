// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The descriptors of cuDNN's legacy convolution API for one conv_problem, and the element
// type and math type each precision asks for. Shared by ops/conv.cuh (the verified
// convolution) and models/fused_conv.cuh (a network's fused layers), so both describe a
// problem to cuDNN the same way.
#pragma once

#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_status.hpp>

#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <string>

namespace gpucmp::detail {

/// cuDNN's tag of an element type.
inline cudnnDataType_t cudnn_data_type(element_type t) noexcept {
  switch (t) {
    case element_type::fp64: return CUDNN_DATA_DOUBLE;
    case element_type::fp32: return CUDNN_DATA_FLOAT;
    case element_type::fp16: return CUDNN_DATA_HALF;
    case element_type::bf16: return CUDNN_DATA_BFLOAT16;
    case element_type::fp8_e4m3: return CUDNN_DATA_FP8_E4M3;
    case element_type::fp8_e5m2: return CUDNN_DATA_FP8_E5M2;
    case element_type::int8: return CUDNN_DATA_INT8;
    case element_type::int32: return CUDNN_DATA_INT32;
  }
  return CUDNN_DATA_FLOAT;  // not reached: every value has its case
}

/// cuDNN's 4-D tensor format for a layout.
inline cudnnTensorFormat_t cudnn_format(conv_layout layout) noexcept {
  return layout == conv_layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

/// The math a precision asks of the legacy API: FP32 forbids tensor cores (FMA), TF32 is
/// cuDNN's default for FP32 data, FP16 and BF16 ask for tensor ops (with the default, the
/// legacy heuristic offers FP16 algorithms without them; docs/results/h200-models.md, "The stem").
inline cudnnMathType_t cudnn_requested_math(numerics t) noexcept {
  if (peak_precision(t) == precision::fp32) return CUDNN_FMA_MATH;
  return tf32_products(t) ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
}

/// Input, output and filter descriptors and the convolution descriptor of one problem, in
/// its layout and precision, with the precision's requested math.
struct legacy_conv_descriptors {
  unique_handle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> x, y;
  unique_handle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor> w;
  unique_handle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor> conv;
};

/// Builds p's legacy descriptors. Throws unsupported when a size does not fit cuDNN's int
/// sizes, library_error when cuDNN's output size differs from p's (naming `what`).
inline legacy_conv_descriptors make_legacy_conv_descriptors(const conv_problem& p, const std::string& what) {
  auto narrow = [&](std::int64_t v, const char* name) {
    if (v > std::numeric_limits<int>::max()) {
      throw unsupported(std::string("cuDNN's 4-D descriptors take int sizes; ") + name + " is too large in " + what);
    }
    return int(v);
  };
  const cudnnTensorFormat_t format = cudnn_format(p.layout);
  const tensor_types& types = types_of(p.dtype);
  legacy_conv_descriptors d;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  GPUCMP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
  d.x = decltype(d.x)(x);
  GPUCMP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
  d.y = decltype(d.y)(y);
  cudnnFilterDescriptor_t w = nullptr;
  GPUCMP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
  d.w = decltype(d.w)(w);
  cudnnConvolutionDescriptor_t c = nullptr;
  GPUCMP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c));
  d.conv = decltype(d.conv)(c);
  GPUCMP_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(x, format, cudnn_data_type(types.input), narrow(p.n, "n"), narrow(p.c, "c"), narrow(p.h, "h"), narrow(p.w, "w")));
  GPUCMP_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, cudnn_data_type(types.weight), format, narrow(p.k, "k"), narrow(p.c / p.groups, "c"), narrow(p.r, "r"),
                                                narrow(p.s, "s")));
  GPUCMP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c, int(p.pad_h), int(p.pad_w), int(p.stride_h), int(p.stride_w),
                                                     int(p.dilation_h), int(p.dilation_w), CUDNN_CROSS_CORRELATION,
                                                     cudnn_data_type(types.accumulate)));
  GPUCMP_CUDNN_CHECK(cudnnSetConvolutionGroupCount(c, int(p.groups)));
  GPUCMP_CUDNN_CHECK(cudnnSetConvolutionMathType(c, cudnn_requested_math(p.dtype)));
  int n = 0, k = 0, pp = 0, q = 0;
  GPUCMP_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &k, &pp, &q));
  if (n != p.n || k != p.k || pp != p.p() || q != p.q()) {
    throw library_error("cuDNN's output size " + std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(pp) + "x" +
                        std::to_string(q) + " differs from conv_problem's for " + what);
  }
  GPUCMP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, format, cudnn_data_type(types.output), n, k, pp, q));
  return d;
}

}  // namespace gpucmp::detail
