// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A 2-D convolution problem (cuDNN's cross-correlation), with output size, exact FLOP counts
// for forward, backward-data and backward-filter, the fewest bytes each must move, and
// validation that names what is wrong. Host-only: the cuDNN wrapper that runs it is separate.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/specs_types.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// Which pass of a convolution.
enum class conv_direction {
  forward,          ///< y = conv(x, w)
  backward_data,    ///< dx from dy and w
  backward_filter,  ///< dw from x and dy
};

/// "fwd", "bwd_data", "bwd_filter".
inline const char* to_string(conv_direction d) noexcept {
  switch (d) {
    case conv_direction::forward: return "fwd";
    case conv_direction::backward_data: return "bwd_data";
    case conv_direction::backward_filter: return "bwd_filter";
  }
  return "unknown";
}

/// Tensor memory layout.
enum class conv_layout {
  nchw,  ///< channels outside the spatial dimensions
  nhwc,  ///< channels innermost (what tensor cores prefer)
};

/// "nchw", "nhwc".
inline const char* to_string(conv_layout l) noexcept { return l == conv_layout::nchw ? "nchw" : "nhwc"; }

/// The numerics a cuDNN convolution runs here: one floating type for x, w and y, FP32
/// accumulate (FP8 and INT8 convolutions need scales and an INT32 output: the quantized
/// inference issue adds them).
inline constexpr numerics conv_numerics[] = {numerics::fp32, numerics::tf32, numerics::fp16, numerics::bf16};

/// Element strides of a 4-D tensor's dimensions N, C, H, W (a filter's K, C, R, S) with C
/// channels of H x W in `layout`: NHWC {HWC, 1, WC, C}, NCHW {CHW, HW, W, 1}.
inline std::vector<std::int64_t> layout_strides(conv_layout layout, std::int64_t c, std::int64_t h, std::int64_t w) {
  return layout == conv_layout::nhwc ? std::vector<std::int64_t>{h * w * c, 1, w * c, c}
                                     : std::vector<std::int64_t>{c * h * w, h * w, w, 1};
}

/// The conv_layout named "nhwc" or "nchw"; throws invalid_argument otherwise.
inline conv_layout parse_conv_layout(const std::string& text) {
  for (conv_layout l : {conv_layout::nhwc, conv_layout::nchw}) {
    if (text == to_string(l)) return l;
  }
  throw invalid_argument("unknown layout '" + text + "' (nhwc, nchw)");
}

/// The rounding a correct convolution of precision `t` may show against a double reference
/// of the same inputs. `transform_algorithm`: Winograd and FFT algorithms compute in a
/// transformed basis and lose a few bits more per term, in the tensors' own precision.
/// Tensor cores (TF32, FP16, BF16) add into their FP32 accumulators truncating twice, when
/// they align the addends' significands and when they normalise the sum (Fasi, Higham,
/// Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", 2021): up to two FP32
/// units per addition, where FP32's FMA path rounds to nearest (half a unit). Half a unit
/// held to 8 sigma until weight gradients summed 127 thousand to 8 million products
/// (ResNet-50 at batches near 2600 on the H200, 2026-12-02): outputs came out up to 1.23x over it.
inline tolerance conv_tolerance(numerics t, bool transform_algorithm = false) noexcept {
  const tensor_types& types = types_of(t);
  const bool tensor_cores = peak_precision(t) != precision::fp32;
  tolerance tol;
  tol.output_eps = unit_roundoff(types.output);
  tol.accumulate_eps = (tensor_cores ? 4 : 1) * unit_roundoff(types.accumulate);
  if (tf32_products(t)) tol.input_eps = 2 * std::ldexp(1.0, -10);
  // Outputs near zero round to the output type's subnormal grid; FP32's is below any sum here.
  if (element_bytes(types.output) < 4) tol.output_abs = element_info_of(types.output).smallest_subnormal / 2;
  if (transform_algorithm) {
    // FFT and Winograd work in the tensors' precision (TF32 inputs for TF32); their transforms
    // add a few roundings per term.
    tol.transform_eps = t == numerics::fp32 ? std::ldexp(1.0, -16) : types.input == element_type::bf16 ? std::ldexp(1.0, -4) : std::ldexp(1.0, -7);
  }
  return tol;
}

/// One convolution: input N x C x H x W, K filters of (C / groups) x R x S.
struct conv_problem {
  std::int64_t n = 0;  ///< batch
  std::int64_t c = 0;  ///< input channels
  std::int64_t h = 0;  ///< input height
  std::int64_t w = 0;  ///< input width
  std::int64_t k = 0;  ///< output channels
  std::int64_t r = 0;  ///< filter height
  std::int64_t s = 0;  ///< filter width
  std::int64_t pad_h = 0, pad_w = 0;            ///< zero padding
  std::int64_t stride_h = 1, stride_w = 1;      ///< strides
  std::int64_t dilation_h = 1, dilation_w = 1;  ///< dilations
  std::int64_t groups = 1;                      ///< channel groups (C and K divisible by it)
  conv_layout layout = conv_layout::nhwc;       ///< memory layout of x, y, w
  numerics dtype = numerics::fp16;          ///< tensor and accumulator types (one of conv_numerics)

  /// Output height P.
  std::int64_t p() const noexcept { return (h + 2 * pad_h - dilation_h * (r - 1) - 1) / stride_h + 1; }
  /// Output width Q.
  std::int64_t q() const noexcept { return (w + 2 * pad_w - dilation_w * (s - 1) - 1) / stride_w + 1; }

  /// Throws invalid_argument naming the first impossible field, unsupported when dtype is
  /// not one of conv_numerics.
  void validate() const {
    require_numerics(dtype, conv_numerics, "a convolution");
    validate_geometry();
  }

  /// validate() without the precision: for layers with their own recipes (a quantized
  /// convolution takes fp8_e4m3 and int8, models/quantized_conv.cuh).
  void validate_geometry() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("conv_problem: " + what);
    };
    require(n > 0 && c > 0 && h > 0 && w > 0 && k > 0 && r > 0 && s > 0,
            "n, c, h, w, k, r and s must be positive");
    require(pad_h >= 0 && pad_w >= 0, "padding must be >= 0");
    require(stride_h >= 1 && stride_w >= 1, "strides must be >= 1");
    require(dilation_h >= 1 && dilation_w >= 1, "dilations must be >= 1");
    require(groups >= 1 && c % groups == 0 && k % groups == 0,
            "groups (" + std::to_string(groups) + ") must divide c (" + std::to_string(c) + ") and k (" +
                std::to_string(k) + ")");
    require(h + 2 * pad_h >= dilation_h * (r - 1) + 1 && w + 2 * pad_w >= dilation_w * (s - 1) + 1,
            "the " + std::to_string(r) + "x" + std::to_string(s) + " filter is larger than the padded " +
                std::to_string(h) + "x" + std::to_string(w) + " input");
  }

  /// 2 N K P Q (C / groups) R S: one multiply and one add per filter tap, the same for all
  /// three directions (direct-convolution count; Winograd or FFT algorithms do fewer).
  double flops() const noexcept {
    return 2.0 * double(n) * double(k) * double(p()) * double(q()) * double(c / groups) * double(r) * double(s);
  }
  /// Elements of the input x, the output y and the filters w.
  double x_elements() const noexcept { return double(n) * double(c) * double(h) * double(w); }
  double y_elements() const noexcept { return double(n) * double(k) * double(p()) * double(q()); }  ///< see x_elements
  double w_elements() const noexcept { return double(k) * double(c / groups) * double(r) * double(s); }  ///< see x_elements
  /// Bytes of x, y and w in their types (types_of(dtype): input, output, weight).
  double x_bytes() const noexcept { return x_elements() * double(element_bytes(types_of(dtype).input)); }
  double y_bytes() const noexcept { return y_elements() * double(element_bytes(types_of(dtype).output)); }  ///< see x_bytes
  double w_bytes() const noexcept { return w_elements() * double(element_bytes(types_of(dtype).weight)); }  ///< see x_bytes

  /// The fewest bytes a pass must move: each operand read once, the result written once.
  double min_bytes(conv_direction d) const noexcept {
    static_cast<void>(d);  // every pass reads two of x, w, y and writes the third
    return x_bytes() + w_bytes() + y_bytes();
  }

  /// Terms summed into one output of pass `d` (forward: C/groups R S; backward-data: at most
  /// K/groups R S; backward-filter: N P Q).
  double reduction_length(conv_direction d) const noexcept {
    switch (d) {
      case conv_direction::forward: return double(c / groups) * double(r) * double(s);
      case conv_direction::backward_data: return double(k / groups) * double(r) * double(s);
      case conv_direction::backward_filter: return double(n) * double(p()) * double(q());
    }
    return 0;
  }

  /// "n32_c64_h56_w56_k64_r3_s3_p1_u1" (u = stride, as cuDNN's naming; d and g only when not 1).
  std::string shape_name() const {
    std::string s_name = "n" + std::to_string(n) + "_c" + std::to_string(c) + "_h" + std::to_string(h) + "_w" +
                         std::to_string(w) + "_k" + std::to_string(k) + "_r" + std::to_string(r) + "_s" +
                         std::to_string(s) + "_p" + std::to_string(pad_h) + "_u" + std::to_string(stride_h);
    if (pad_w != pad_h) s_name += "_pw" + std::to_string(pad_w);
    if (stride_w != stride_h) s_name += "_uw" + std::to_string(stride_w);
    if (dilation_h != 1 || dilation_w != 1) s_name += "_d" + std::to_string(dilation_h);
    if (groups != 1) s_name += "_g" + std::to_string(groups);
    return s_name;
  }
  /// Its parameters as a result row's axes: n, c, h, w, k, r, s, padding, strides,
  /// dilations, groups, layout, dtype.
  std::vector<axis> axes() const {
    std::vector<axis> a;
    for (const auto& [axis_name, value] : {std::pair{"n", n}, {"c", c}, {"h", h}, {"w", w}, {"k", k}, {"r", r}, {"s", s},
                                           {"pad_h", pad_h}, {"pad_w", pad_w}, {"stride_h", stride_h}, {"stride_w", stride_w},
                                           {"dilation_h", dilation_h}, {"dilation_w", dilation_w}, {"groups", groups}}) {
      a.push_back(axis::of(axis_name, double(value)));
    }
    a.push_back(axis::of("layout", to_string(layout)));
    a.push_back(axis::of("dtype", to_string(dtype)));
    return a;
  }
};

}  // namespace gpucmp
