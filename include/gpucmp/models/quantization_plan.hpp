// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How a CNN runs quantized, layer by layer, before anything is on the GPU: every activation
// tensor's scale from the calibration (models/calibration.hpp), every convolution's weights
// quantized per output channel, the per-channel dequantize scales its epilogue multiplies the
// sums by (models/quantized_conv.cuh), and the precision each convolution runs in. A layer
// starts in the quantized format; the network moves it to FP16 where cuDNN cannot run it
// quantized or runs it slower (the 3-channel stem in INT8 took 6x FP16's time on an H100),
// and the plan's report says which precision each layer ran in and why. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/batch_norm_folding.hpp>
#include <gpucmp/models/calibration.hpp>
#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/ops/numerics.hpp>

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes a quantized network takes: FP8 E4M3 and INT8 (activations and weights).
inline constexpr numerics quantized_network_numerics[] = {numerics::fp8_e4m3, numerics::int8};

/// The name under which a calibration holds tensor `t` of `def`: "input" for the input, else
/// the name of the layer that writes it.
inline std::string calibration_tensor_name(const network_definition& def, tensor_ref t) {
  if (t.id == def.input().id) return "input";
  for (const layer_definition& l : def.layers()) {
    if (l.output.id == t.id) return l.name;
  }
  throw invalid_argument(def.name() + ": tensor " + std::to_string(t.id) + " is written by no layer");
}

/// Every tensor a quantized network stores in the quantized format, by calibration name: the
/// input, and the output of every convolution and pooling layer up to the global average
/// pool (which, like the linear layer after it, runs in FP16 on dequantized values).
inline std::vector<std::string> calibration_tensors(const network_definition& def) {
  std::vector<std::string> names{"input"};
  for (const layer_definition& l : def.layers()) {
    if (l.kind == layer_kind::conv || l.kind == layer_kind::max_pool || l.kind == layer_kind::average_pool) {
      names.push_back(l.name);
    }
  }
  return names;
}

/// One convolution of a quantized network.
struct quantized_layer {
  std::string name;                     ///< the definition's layer name
  numerics precision = numerics::int8;  ///< what it runs in: the network's format, or fp16
  std::string reason;                   ///< why it runs in it ("calibrated", or why FP16)
  double input_scale = 1;               ///< x: real = stored * scale
  double output_scale = 1;              ///< y
  double residual_scale = 1;            ///< z (with a residual)
  std::vector<double> weight_scales;    ///< per output channel
  std::vector<float> dequantize;        ///< per output channel: input_scale * weight_scales[k]
};

/// A network's quantization, made on the host from its definition and a calibration.
/// A max pool's output keeps its input's scale (a max rounds nothing).
class quantization_plan {
 public:
  /// Scales every quantized tensor by its calibrated range (range / the format's largest
  /// value: 448 for FP8 E4M3, 127 for INT8) and every convolution's weights by their
  /// per-channel ranges. Throws unsupported for a format other than quantized_network_numerics,
  /// invalid_argument naming the tensor the calibration has no range for.
  quantization_plan(const network_definition& def, const calibration_table& calibration, numerics format)
      : m_definition(&def), m_format(format) {
    require_numerics(format, quantized_network_numerics, "a quantized network");
    const double largest = format_largest();
    std::function<double(tensor_ref)> scale_of = [&](tensor_ref t) {
      // A max pool only selects values: its output keeps its input's scale (and runs on the
      // stored values with no rounding).
      for (const layer_definition& l : def.layers()) {
        if (l.output.id == t.id && l.kind == layer_kind::max_pool) return scale_of(l.input);
      }
      const std::string name = calibration_tensor_name(def, t);
      const auto found = calibration.ranges.find(name);
      if (found == calibration.ranges.end()) {
        throw invalid_argument(def.name() + ": the calibration has no range for tensor '" + name + "'");
      }
      return quantization_scale(found->second, largest);
    };
    for (const layer_definition& l : def.layers()) {
      if (l.kind != layer_kind::conv) continue;
      quantized_layer q;
      q.name = l.name;
      q.precision = format;
      q.reason = "calibrated";
      q.input_scale = scale_of(l.input);
      q.output_scale = scale_of(l.output);
      if (l.residual.valid()) q.residual_scale = scale_of(l.residual);
      const std::int64_t k = l.conv.out_channels;
      const std::vector<double> ranges = per_channel_amax(l.weight, k, std::int64_t(l.weight.size()) / k);
      for (double r : ranges) {
        q.weight_scales.push_back(quantization_scale(r, largest));
        q.dequantize.push_back(float(q.input_scale * q.weight_scales.back()));
      }
      m_layers.push_back(std::move(q));
    }
  }

  /// The format the quantized layers run in.
  numerics format() const noexcept { return m_format; }
  /// Every convolution, in the definition's order.
  const std::vector<quantized_layer>& layers() const noexcept { return m_layers; }
  /// Convolution `name`; throws invalid_argument when there is none.
  const quantized_layer& layer(const std::string& name) const { return m_layers.at(index_of(name)); }

  /// Runs convolution `name` in FP16 from now on, for `reason` (kept in the report); its
  /// input is dequantized before it and its output quantized after it, at the same scales.
  void fall_back(const std::string& name, const std::string& reason) {
    quantized_layer& q = m_layers.at(index_of(name));
    q.precision = numerics::fp16;
    q.reason = reason;
  }

  /// Convolution `name`'s weights in the format, K x R x S x C (NHWC filters), one byte each
  /// (an INT8 value, or an FP8 E4M3 bit pattern): round to nearest of w / its channel's
  /// scale, within the format's range by construction.
  std::vector<std::uint8_t> quantized_weights(const std::string& name) const {
    const quantized_layer& q = layer(name);
    const layer_definition& l = definition_layer(name);
    const std::int64_t k = l.conv.out_channels, r = l.conv.kernel, c = std::int64_t(l.weight.size()) / (k * r * r);
    const std::vector<float> krsc = kcrs_to_krsc(l.weight, k, c, r, r);
    std::vector<std::uint8_t> out(krsc.size());
    const std::size_t per_channel = krsc.size() / std::size_t(k);
    for (std::size_t i = 0; i < krsc.size(); ++i) {
      const double v = double(krsc[i]) / q.weight_scales[i / per_channel];
      if (m_format == numerics::int8) {
        out[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::clamp(std::nearbyint(v), -127.0, 127.0)));
      } else {
        out[i] = __nv_fp8_e4m3(float(v)).__x;
      }
    }
    return out;
  }

  /// The per-layer precision report: one row per convolution, its precision and why, and its
  /// scales (Markdown).
  std::string report() const {
    std::ostringstream out;
    out.precision(4);
    out << "| layer | precision | why | x scale | y scale | weight scales (min-max) |\n|---|---|---|---|---|---|\n";
    for (const quantized_layer& q : m_layers) {
      const auto [low, high] = std::minmax_element(q.weight_scales.begin(), q.weight_scales.end());
      out << "| " << q.name << " | " << to_string(q.precision) << " | " << q.reason << " | " << q.input_scale << " | "
          << q.output_scale << " | " << *low << "-" << *high << " |\n";
    }
    return out.str();
  }

 private:
  double format_largest() const noexcept { return element_info_of(types_of(m_format).input).largest; }
  std::size_t index_of(const std::string& name) const {
    for (std::size_t i = 0; i < m_layers.size(); ++i) {
      if (m_layers[i].name == name) return i;
    }
    throw invalid_argument(m_definition->name() + ": no convolution '" + name + "' in the quantization plan");
  }
  const layer_definition& definition_layer(const std::string& name) const {
    for (const layer_definition& l : m_definition->layers()) {
      if (l.name == name) return l;
    }
    throw invalid_argument(m_definition->name() + ": no layer '" + name + "'");
  }

  const network_definition* m_definition;  // outlives the plan
  numerics m_format;
  std::vector<quantized_layer> m_layers;
};

}  // namespace gpucmp
