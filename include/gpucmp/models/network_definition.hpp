// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What a CNN is, independent of batch, precision and device: layers in execution order with
// their shapes (checked as they are added) and their FP32 parameters on the host, batch norms
// already folded. gpucmp::network (models/network.cuh) turns a definition into something that
// runs. Host-only.
//
//   gpucmp::network_definition def("tiny", {3, 32, 32});
//   auto x = def.conv(def.input(), {32, 3, 1, 1, true});  // out_channels, kernel, stride, pad, relu
//   x = def.max_pool(x, 2, 2);
//   x = def.linear(def.global_average_pool(x), 10);
//   def.init_random(1);
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/ops/conv_problem.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The shape of one image's tensor (C x H x W; a flat vector is C x 1 x 1).
struct image_shape {
  std::int64_t c = 0, h = 1, w = 1;
  std::int64_t elements() const noexcept { return c * h * w; }  ///< values per image
  bool operator==(const image_shape& o) const noexcept { return c == o.c && h == o.h && w == o.w; }
  /// "64x56x56".
  std::string text() const { return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w); }
};

/// A tensor of a definition (an index into its tensor list).
struct tensor_ref {
  int id = -1;
  bool valid() const noexcept { return id >= 0; }  ///< false for "none"
};

/// A convolution layer's settings (square kernel; bias and batch norm folded into the bias).
struct conv_spec {
  std::int64_t out_channels = 0;  ///< K
  std::int64_t kernel = 1;        ///< R = S
  std::int64_t stride = 1;        ///< in both dimensions
  std::int64_t pad = 0;           ///< zero padding in both dimensions
  bool relu = true;               ///< ReLU after the bias (and after the residual add)
};

/// What a layer does.
enum class layer_kind { conv, max_pool, average_pool, global_average_pool, linear, softmax };

/// "conv", "max_pool", ...
inline const char* to_string(layer_kind k) noexcept {
  switch (k) {
    case layer_kind::conv: return "conv";
    case layer_kind::max_pool: return "max_pool";
    case layer_kind::average_pool: return "average_pool";
    case layer_kind::global_average_pool: return "global_average_pool";
    case layer_kind::linear: return "linear";
    case layer_kind::softmax: return "softmax";
  }
  return "unknown";
}

/// One layer of a definition.
struct layer_definition {
  layer_kind kind = layer_kind::conv;
  std::string name;              ///< unique within the definition
  tensor_ref input, residual;    ///< residual: conv only, added before the ReLU
  tensor_ref output;
  conv_spec conv;                ///< conv only
  std::int64_t pool_kernel = 0, pool_stride = 1, pool_pad = 0;  ///< pooling only
  std::int64_t out_features = 0; ///< linear only
  std::vector<float> weight;     ///< conv: K x C x R x S (torch's order); linear: out x in
  std::vector<float> bias;       ///< conv: K; linear: out
};

/// A CNN's layers and parameters.
class network_definition {
 public:
  /// An empty network named `name` whose input images are `input`.
  network_definition(std::string name, image_shape input) : m_name(std::move(name)) {
    if (input.c <= 0 || input.h <= 0 || input.w <= 0) throw invalid_argument("network_definition: input shape must be positive");
    m_shapes.push_back(input);
  }

  /// The network's name ("resnet50").
  const std::string& name() const noexcept { return m_name; }
  /// The input tensor.
  tensor_ref input() const noexcept { return {0}; }
  /// The last layer's output (the input while there are no layers).
  tensor_ref output() const noexcept { return {int(m_shapes.size()) - 1}; }
  /// The shape of `t` per image.
  const image_shape& shape(tensor_ref t) const {
    if (t.id < 0 || std::size_t(t.id) >= m_shapes.size()) throw invalid_argument(m_name + ": no tensor " + std::to_string(t.id));
    return m_shapes[std::size_t(t.id)];
  }
  /// Every layer in execution order.
  const std::vector<layer_definition>& layers() const noexcept { return m_layers; }
  /// Layer `name` (for loading its parameters); throws invalid_argument when there is none.
  layer_definition& layer(const std::string& name) {
    for (auto& l : m_layers) {
      if (l.name == name) return l;
    }
    throw invalid_argument(m_name + ": no layer named '" + name + "'");
  }

  /// y = act(conv(x) + bias [+ residual]); `residual` must have the output's shape.
  tensor_ref conv(tensor_ref x, const conv_spec& spec, const std::string& name = "", tensor_ref residual = {}) {
    const image_shape& in = image_input(x, "conv");
    if (spec.out_channels <= 0 || spec.kernel <= 0 || spec.stride <= 0 || spec.pad < 0) {
      throw invalid_argument(m_name + ": conv '" + name + "': out_channels, kernel and stride must be positive, pad >= 0");
    }
    if (in.h + 2 * spec.pad < spec.kernel || in.w + 2 * spec.pad < spec.kernel) {
      throw invalid_argument(m_name + ": conv '" + name + "': the " + std::to_string(spec.kernel) + "x" +
                             std::to_string(spec.kernel) + " kernel is larger than the padded " + in.text() + " input");
    }
    const image_shape out{spec.out_channels, (in.h + 2 * spec.pad - spec.kernel) / spec.stride + 1,
                          (in.w + 2 * spec.pad - spec.kernel) / spec.stride + 1};
    if (residual.valid() && !(shape(residual) == out)) {
      throw invalid_argument(m_name + ": conv '" + name + "': residual is " + shape(residual).text() + ", the output " + out.text());
    }
    layer_definition l;
    l.kind = layer_kind::conv;
    l.conv = spec;
    l.residual = residual;
    l.weight.assign(std::size_t(spec.out_channels * in.c * spec.kernel * spec.kernel), 0.0f);
    l.bias.assign(std::size_t(spec.out_channels), 0.0f);
    return add(std::move(l), x, out, name);
  }

  /// Max pooling over kernel x kernel windows.
  tensor_ref max_pool(tensor_ref x, std::int64_t kernel, std::int64_t stride, std::int64_t pad = 0, const std::string& name = "") {
    return pool(layer_kind::max_pool, x, kernel, stride, pad, name);
  }
  /// Average pooling (padding counted as zeros, torch's default).
  tensor_ref average_pool(tensor_ref x, std::int64_t kernel, std::int64_t stride, std::int64_t pad = 0,
                          const std::string& name = "") {
    return pool(layer_kind::average_pool, x, kernel, stride, pad, name);
  }
  /// The mean over H and W of every channel: C x H x W -> C x 1 x 1.
  tensor_ref global_average_pool(tensor_ref x, const std::string& name = "") {
    const image_shape& in = image_input(x, "global_average_pool");
    layer_definition l;
    l.kind = layer_kind::global_average_pool;
    return add(std::move(l), x, {in.c, 1, 1}, name);
  }
  /// Fully connected: a C x 1 x 1 input -> out_features x 1 x 1 (FP32 from here on).
  tensor_ref linear(tensor_ref x, std::int64_t out_features, const std::string& name = "") {
    const image_shape& in = shape(x);
    if (in.h != 1 || in.w != 1) {
      throw invalid_argument(m_name + ": linear '" + name + "' needs a flat input (C x 1 x 1), got " + in.text() +
                             "; add global_average_pool first");
    }
    if (out_features <= 0) throw invalid_argument(m_name + ": linear '" + name + "': out_features must be positive");
    if (float_from(x)) throw invalid_argument(m_name + ": linear '" + name + "' follows a linear or softmax layer (unsupported)");
    layer_definition l;
    l.kind = layer_kind::linear;
    l.out_features = out_features;
    l.weight.assign(std::size_t(out_features * in.c), 0.0f);
    l.bias.assign(std::size_t(out_features), 0.0f);
    return add(std::move(l), x, {out_features, 1, 1}, name);
  }
  /// Softmax over the channels of a linear layer's output.
  tensor_ref softmax(tensor_ref x, const std::string& name = "") {
    if (!float_from(x)) throw invalid_argument(m_name + ": softmax '" + name + "' must follow a linear layer");
    layer_definition l;
    l.kind = layer_kind::softmax;
    return add(std::move(l), x, shape(x), name);
  }

  /// True when tensor `t` is FP32 whatever the network's precision (a linear or softmax output).
  bool float_from(tensor_ref t) const {
    for (const auto& l : m_layers) {
      if (l.output.id == t.id) return l.kind == layer_kind::linear || l.kind == layer_kind::softmax;
    }
    return false;
  }

  /// Deterministic random parameters: He-uniform filters (variance 2 / fan-in, which keeps
  /// ReLU activations at scale), biases uniform in +-0.1, and linear layers as torch
  /// initialises them (+-1/sqrt(in)). A convolution that ends a residual branch is scaled by
  /// `residual_branch_scale` so the residual stream grows slowly over many blocks, as
  /// trained networks' last batch norms do (torch's zero_init_residual takes this to 0).
  void init_random(std::uint64_t seed, double residual_branch_scale = 0.25) {
    std::uint64_t stream = seed * 1000003;
    for (auto& l : m_layers) {
      if (l.kind != layer_kind::conv && l.kind != layer_kind::linear) continue;
      const double fan_in = double(l.weight.size()) / double(l.bias.size());
      double bound = l.kind == layer_kind::conv ? std::sqrt(6.0 / fan_in) : 1.0 / std::sqrt(fan_in);
      if (l.kind == layer_kind::conv && l.residual.valid()) bound *= residual_branch_scale;
      const double bias_bound = l.kind == layer_kind::conv ? 0.1 : 1.0 / std::sqrt(fan_in);
      ++stream;
      for (std::size_t i = 0; i < l.weight.size(); ++i) l.weight[i] = float(bound * (2 * unit_interval(random_bits(stream, i)) - 1));
      ++stream;
      for (std::size_t i = 0; i < l.bias.size(); ++i) l.bias[i] = float(bias_bound * (2 * unit_interval(random_bits(stream, i)) - 1));
    }
  }

  /// Learned values (filters, biases, linear weights) after folding.
  std::int64_t parameter_count() const noexcept {
    std::int64_t n = 0;
    for (const auto& l : m_layers) n += std::int64_t(l.weight.size() + l.bias.size());
    return n;
  }
  /// Multiply-adds of the convolutions and linear layers per image.
  double macs_per_image() const {
    double macs = 0;
    for (const auto& l : m_layers) {
      if (l.kind == layer_kind::conv) macs += double(l.weight.size()) * double(shape(l.output).h * shape(l.output).w);
      if (l.kind == layer_kind::linear) macs += double(l.weight.size());
    }
    return macs;
  }

 private:
  const image_shape& image_input(tensor_ref x, const char* what) const {
    if (float_from(x)) throw invalid_argument(m_name + ": " + what + " cannot follow a linear or softmax layer");
    return shape(x);
  }

  tensor_ref pool(layer_kind kind, tensor_ref x, std::int64_t kernel, std::int64_t stride, std::int64_t pad, const std::string& name) {
    const image_shape& in = image_input(x, to_string(kind));
    if (kernel < 1 || stride < 1 || pad < 0 || 2 * pad > kernel) {
      throw invalid_argument(m_name + ": " + to_string(kind) + " '" + name +
                             "': kernel and stride must be >= 1 and padding at most half the kernel");
    }
    if (in.h + 2 * pad < kernel || in.w + 2 * pad < kernel) {
      throw invalid_argument(m_name + ": " + to_string(kind) + " '" + name + "': the window is larger than the padded " + in.text() + " input");
    }
    layer_definition l;
    l.kind = kind;
    l.pool_kernel = kernel;
    l.pool_stride = stride;
    l.pool_pad = pad;
    return add(std::move(l), x, {in.c, (in.h + 2 * pad - kernel) / stride + 1, (in.w + 2 * pad - kernel) / stride + 1}, name);
  }

  tensor_ref add(layer_definition l, tensor_ref x, image_shape out, const std::string& name) {
    shape(x);  // throws for an unknown tensor
    l.name = name.empty() ? std::string(to_string(l.kind)) + std::to_string(m_layers.size()) : name;
    for (const auto& other : m_layers) {
      if (other.name == l.name) throw invalid_argument(m_name + ": two layers are named '" + l.name + "'");
    }
    l.input = x;
    l.output = {int(m_shapes.size())};
    m_shapes.push_back(out);
    m_layers.push_back(std::move(l));
    return m_layers.back().output;
  }

  std::string m_name;
  std::vector<image_shape> m_shapes;  // tensor id -> shape; 0 is the input
  std::vector<layer_definition> m_layers;
};

/// The convolution problem of conv layer `l` of `def` at `batch`, in `dtype` and `layout`.
inline conv_problem conv_problem_for(const network_definition& def, const layer_definition& l, std::int64_t batch, numerics dtype,
                                     conv_layout layout) {
  const image_shape& in = def.shape(l.input);
  conv_problem p;
  p.n = batch;
  p.c = in.c;
  p.h = in.h;
  p.w = in.w;
  p.k = l.conv.out_channels;
  p.r = p.s = l.conv.kernel;
  p.pad_h = p.pad_w = l.conv.pad;
  p.stride_h = p.stride_w = l.conv.stride;
  p.layout = layout;
  p.dtype = dtype;
  return p;
}

}  // namespace gpucmp
