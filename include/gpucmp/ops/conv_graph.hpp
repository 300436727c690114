// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One convolution problem described for cuDNN: its tensors in the problem's layout and
// precision, under fixed uids, and the pass. As a cudnn-frontend graph (add_convolution) for
// ops/conv.cuh's plain passes and models/fused_conv.cuh's bias, residual and ReLU epilogue;
// with cudnn-frontend's operation builders (add_convolution_operations) for what the graph API
// cannot express (ops/cudnn_graph.hpp): a pass that adds to its output (beta 1) and a forward
// pass with batch norm's statistics in its epilogue (gen-stats in FP32 math). Both describe a
// problem to cuDNN the same way, as ops/cudnn_legacy.hpp does for the legacy API. Host
// compilation passes only (ops/cudnn_graph.hpp says why).
#pragma once

#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_graph.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace gpucmp::detail {

/// The uids of a convolution graph's tensors, as the variant pack binds them.
namespace conv_uid {
constexpr std::int64_t x = 1;         ///< x (dx backward-data)
constexpr std::int64_t w = 2;         ///< w (dw backward-filter)
constexpr std::int64_t y = 3;         ///< y (dy backward)
constexpr std::int64_t sum = 4;       ///< per-channel sum of y (statistics)
constexpr std::int64_t squares = 5;   ///< per-channel sum of y^2 (statistics)
constexpr std::int64_t bias = 7;      ///< a fused layer's per-channel bias
constexpr std::int64_t residual = 8;  ///< a fused layer's z
constexpr std::int64_t accumulator = 9;     ///< a quantized layer's FP32 or INT32 sums (its unfused path)
constexpr std::int64_t dequantize = 10;     ///< a quantized layer's per-channel scale of the sums
constexpr std::int64_t residual_scale = 11;  ///< a quantized layer's scale of z
constexpr std::int64_t output_scale = 12;    ///< a quantized layer's 1 / (y's scale)
}  // namespace conv_uid

/// The uid under which pass `d` writes its output (x, w or y as the pass names them).
inline std::int64_t conv_output_uid(conv_direction d) noexcept {
  return d == conv_direction::forward ? conv_uid::y : d == conv_direction::backward_data ? conv_uid::x : conv_uid::w;
}

}  // namespace gpucmp::detail

// What follows uses cudnn-frontend's types.
#if GPUCMP_CUDNN_FRONTEND_VISIBLE

namespace gpucmp::detail {

/// cudnn-frontend's tag of an element type.
inline cudnn_frontend::DataType_t frontend_data_type(element_type t) {
  using cudnn_frontend::DataType_t;
  switch (t) {
    case element_type::fp64: return DataType_t::DOUBLE;
    case element_type::fp32: return DataType_t::FLOAT;
    case element_type::fp16: return DataType_t::HALF;
    case element_type::bf16: return DataType_t::BFLOAT16;
    case element_type::fp8_e4m3: return DataType_t::FP8_E4M3;
    case element_type::fp8_e5m2: return DataType_t::FP8_E5M2;
    case element_type::int8: return DataType_t::INT8;
    case element_type::int32: return DataType_t::INT32;
  }
  throw invalid_argument("conv_graph: element_type value " + std::to_string(int(t)) + " has no cuDNN type");
}

/// The element type of p's tensor `uid`: x the input's, w the weight's, y (and a fused
/// layer's bias and residual) the output's, whichever pass reads or writes them.
inline element_type conv_tensor_type(const conv_problem& p, std::int64_t uid) noexcept {
  const tensor_types& types = types_of(p.dtype);
  return uid == conv_uid::x ? types.input : uid == conv_uid::w ? types.weight : types.output;
}

/// A non-virtual tensor of `p` (its type conv_tensor_type): dims in NCHW order of the dimensions, strides of
/// p's layout (layout_strides).
inline std::shared_ptr<cudnn_frontend::graph::Tensor_attributes> conv_tensor(cudnn_frontend::graph::Graph& g,
                                                                            const conv_problem& p, std::int64_t uid,
                                                                            const char* name,
                                                                            const std::vector<std::int64_t>& dims) {
  return g.tensor(cudnn_frontend::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(dims)
                      .set_stride(layout_strides(p.layout, dims[1], dims[2], dims[3]))
                      .set_data_type(frontend_data_type(conv_tensor_type(p, uid))));
}

/// Dimensions of p's x, w and y.
inline std::vector<std::int64_t> conv_x_dims(const conv_problem& p) { return {p.n, p.c, p.h, p.w}; }
inline std::vector<std::int64_t> conv_w_dims(const conv_problem& p) { return {p.k, p.c / p.groups, p.r, p.s}; }  ///< see conv_x_dims
inline std::vector<std::int64_t> conv_y_dims(const conv_problem& p) { return {p.n, p.k, p.p(), p.q()}; }  ///< see conv_x_dims

/// Adds pass `d` of `p` to `g`: its two inputs as tensors (uids conv_uid::x, w, y as the pass
/// names them) and the convolution node, FP32 compute and intermediates. Returns the pass's
/// output with its dimensions and strides set: virtual (an FP32 intermediate) until the caller
/// marks it an output (conv_output) or feeds it to another node.
inline std::shared_ptr<cudnn_frontend::graph::Tensor_attributes> add_convolution(cudnn_frontend::graph::Graph& g,
                                                                                const conv_problem& p, conv_direction d) {
  namespace fe = cudnn_frontend;
  g.set_io_data_type(frontend_data_type(types_of(p.dtype).input))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(frontend_data_type(types_of(p.dtype).accumulate));
  const std::vector<std::int64_t> padding{p.pad_h, p.pad_w}, stride{p.stride_h, p.stride_w},
      dilation{p.dilation_h, p.dilation_w};
  std::shared_ptr<fe::graph::Tensor_attributes> out;
  std::vector<std::int64_t> out_dims;
  switch (d) {
    case conv_direction::forward:
      out = g.conv_fprop(conv_tensor(g, p, conv_uid::x, "x", conv_x_dims(p)), conv_tensor(g, p, conv_uid::w, "w", conv_w_dims(p)),
                         fe::graph::Conv_fprop_attributes().set_name("fprop").set_padding(padding).set_stride(stride).set_dilation(
                             dilation));
      out_dims = conv_y_dims(p);
      break;
    case conv_direction::backward_data:
      out = g.conv_dgrad(conv_tensor(g, p, conv_uid::y, "dy", conv_y_dims(p)), conv_tensor(g, p, conv_uid::w, "w", conv_w_dims(p)),
                         fe::graph::Conv_dgrad_attributes().set_name("dgrad").set_padding(padding).set_stride(stride).set_dilation(
                             dilation));
      out_dims = conv_x_dims(p);
      break;
    case conv_direction::backward_filter:
      out = g.conv_wgrad(conv_tensor(g, p, conv_uid::y, "dy", conv_y_dims(p)), conv_tensor(g, p, conv_uid::x, "x", conv_x_dims(p)),
                         fe::graph::Conv_wgrad_attributes().set_name("wgrad").set_padding(padding).set_stride(stride).set_dilation(
                             dilation));
      out_dims = conv_w_dims(p);
      break;
  }
  out->set_dim(out_dims).set_stride(layout_strides(p.layout, out_dims[1], out_dims[2], out_dims[3]));
  return out;
}

/// Marks `t` (dimensions and strides set) as an output of `g` under `uid`, of uid's type.
inline void conv_output(const std::shared_ptr<cudnn_frontend::graph::Tensor_attributes>& t, const conv_problem& p,
                        std::int64_t uid) {
  t->set_output(true).set_uid(uid).set_data_type(frontend_data_type(conv_tensor_type(p, uid)));
}

/// A non-virtual tensor for cudnn-frontend's operation builders (as conv_tensor).
inline cudnn_frontend::Tensor conv_builder_tensor(std::int64_t uid, cudnn_frontend::DataType_t type,
                                                  const std::vector<std::int64_t>& dims,
                                                  const std::vector<std::int64_t>& strides) {
  return cudnn_frontend::TensorBuilder()
      .setDim(std::int64_t(dims.size()), dims.data())
      .setStride(std::int64_t(strides.size()), strides.data())
      .setId(uid)
      .setAlignment(16)
      .setDataType(type)
      .build();
}

/// Pass `d` of `p` with cudnn-frontend's operation builders into `ops`: x, w and y (conv_uid,
/// as the pass names them), adding its result to what its output holds when `accumulate`
/// (beta 1, in FP32 before the output is rounded), and with `statistics` (forward) gen-stats of
/// y in FP32 math into sum and squares (FP32, one per channel). Throws what the builders throw
/// (cudnn_frontend::cudnnException) when cuDNN refuses an operation.
inline void add_convolution_operations(cudnn_operations& ops, const conv_problem& p, conv_direction d, bool accumulate,
                                       bool statistics) {
  namespace fe = cudnn_frontend;
  auto tensor = [&](std::int64_t uid, const std::vector<std::int64_t>& dims) {
    return conv_builder_tensor(uid, frontend_data_type(conv_tensor_type(p, uid)), dims,
                               layout_strides(p.layout, dims[1], dims[2], dims[3]));
  };
  const fe::Tensor x = tensor(conv_uid::x, conv_x_dims(p)), w = tensor(conv_uid::w, conv_w_dims(p)),
                   y = tensor(conv_uid::y, conv_y_dims(p));
  const std::int64_t padding[] = {p.pad_h, p.pad_w}, stride[] = {p.stride_h, p.stride_w},
                     dilation[] = {p.dilation_h, p.dilation_w};
  const fe::ConvDesc convolution = fe::ConvDescBuilder()
                                       .setComputeType(frontend_data_type(types_of(p.dtype).accumulate))
                                       .setMathMode(fe::ConvolutionMode_t::CROSS_CORRELATION)
                                       .setSpatialDimCount(2)
                                       .setSpatialStride(2, stride)
                                       .setPrePadding(2, padding)
                                       .setPostPadding(2, padding)
                                       .setDilation(2, dilation)
                                       .build();
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  switch (d) {
    case conv_direction::forward:
      ops.operations.push_back(fe::OperationBuilder(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
                                   .setxDesc(x).setwDesc(w).setyDesc(y).setcDesc(convolution).setAlpha(alpha).setBeta(beta)
                                   .build());
      break;
    case conv_direction::backward_data:
      ops.operations.push_back(fe::OperationBuilder(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR)
                                   .setdxDesc(x).setwDesc(w).setdyDesc(y).setcDesc(convolution).setAlpha(alpha).setBeta(beta)
                                   .build());
      break;
    case conv_direction::backward_filter:
      ops.operations.push_back(fe::OperationBuilder(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR)
                                   .setxDesc(x).setdwDesc(w).setdyDesc(y).setcDesc(convolution).setAlpha(alpha).setBeta(beta)
                                   .build());
      break;
  }
  ops.uids = {conv_uid::x, conv_uid::w, conv_uid::y};
  if (statistics) {
    const std::vector<std::int64_t> dims{1, p.k, 1, 1}, strides{p.k, 1, p.k, p.k};
    ops.operations.push_back(fe::OperationBuilder(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR)
                                 .setxDesc(y)
                                 .setComputeType(CUDNN_DATA_FLOAT)
                                 .setGenStatsMode(CUDNN_GENSTATS_SUM_SQSUM)
                                 .setSumDesc(conv_builder_tensor(conv_uid::sum, fe::DataType_t::FLOAT, dims, strides))
                                 .setSqSumDesc(conv_builder_tensor(conv_uid::squares, fe::DataType_t::FLOAT, dims, strides))
                                 .build());
    ops.uids.push_back(conv_uid::sum);
    ops.uids.push_back(conv_uid::squares);
  }
}
}  // namespace gpucmp::detail

#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE
