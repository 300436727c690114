// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A whole training step (training/training_network.cuh) against an FP64 host reference of
// the same network built from training/reference_layers.hpp: every parameter's gradient, the
// running statistics and the weights after one SGD step, on a small network with every layer
// kind and both kinds of gradient accumulation (a tensor read as input and residual by one
// layer, and by two layers). Then: the loss falls over steps in every precision, a CUDA
// graph of the step replays eager's results bit for bit, FP16 loss scaling skips
// overflowing steps and recovers, and bad batches are refused.
#include "catch.hpp"
#include "model_test_helpers.hpp"
#include "search_pace.hpp"

#include <gpucmp/cuda/stream.hpp>
#if GPUCMP_TEST_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>
#endif
#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/training/reference_layers.hpp>
#include <gpucmp/training/step_trace.hpp>
#include <gpucmp/training/training_network.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace {

namespace ref = gpucmp::reference;

// 3x12x12 -> conv a (8, 3x3, ReLU) -> max pool 3/2/1 -> conv b (8, 3x3, + its input, ReLU)
// -> conv c (16, 1x1 stride 2, no ReLU: a downsample) and conv d (16, 3x3 stride 2, + c, ReLU)
// -> average pool 2/1 -> global average pool -> linear 5.
gpucmp::network_definition every_layer_kind() {
  gpucmp::network_definition def("every_layer_kind", {3, 12, 12});
  auto x = def.conv(def.input(), {8, 3, 1, 1, true}, "a");
  x = def.max_pool(x, 3, 2, 1, "pool");
  x = def.conv(x, {8, 3, 1, 1, true}, "b", x);
  const auto shortcut = def.conv(x, {16, 1, 2, 0, false}, "c");
  x = def.conv(x, {16, 3, 2, 1, true}, "d", shortcut);
  x = def.average_pool(x, 2, 1, 0, "avg");
  def.linear(def.global_average_pool(x, "gap"), 5, "fc");
  def.init_random(3, 1.0);
  return def;
}

struct host_step {
  double loss = 0;
  std::map<std::string, std::vector<double>> gradients, running;
};

using gpucmp_test::as_double;

// One training step's loss, parameter gradients and running statistics in FP64.
host_step reference_step(const gpucmp::network_definition& def, const std::map<std::string, gpucmp::named_tensor>& params,
                         const std::vector<float>& images, const std::vector<std::int32_t>& labels, std::int64_t batch) {
  host_step out;
  const auto& layers = def.layers();
  std::vector<ref::tensor> t(layers.size() + 1), pre(layers.size()), conv_out(layers.size()), grad(layers.size() + 1);
  std::vector<ref::batch_norm_saved> saved(layers.size());
  const auto& in = def.shape(def.input());
  t[0] = ref::tensor(batch, in.c, in.h, in.w);
  for (std::size_t i = 0; i < images.size(); ++i) t[0].v[i] = images[i];
  auto weight = [&](const std::string& name, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    ref::tensor r(n, c, h, w);
    r.v = as_double(params.at(name).values);
    return r;
  };
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    const ref::tensor& x = t[std::size_t(l.input.id)];
    const ref::conv_geometry g{l.kind == gpucmp::layer_kind::conv ? l.conv.stride : l.pool_stride,
                               l.kind == gpucmp::layer_kind::conv ? l.conv.pad : l.pool_pad};
    switch (l.kind) {
      case gpucmp::layer_kind::conv: {
        const std::int64_t k = l.conv.out_channels, r = l.conv.kernel;
        conv_out[i] = ref::conv_forward(x, weight(l.name + ".weight", k, x.c, r, r), g);
        std::vector<double> rm(std::size_t(k), 0.0), rv(std::size_t(k), 1.0);
        pre[i] = ref::batch_norm_train_forward(conv_out[i], as_double(params.at(l.name + ".bn.weight").values),
                                               as_double(params.at(l.name + ".bn.bias").values), 1e-5, 0.1, rm, rv, saved[i]);
        out.running[l.name + ".bn.running_mean"] = rm;
        out.running[l.name + ".bn.running_var"] = rv;
        if (l.residual.valid())
          for (std::size_t e = 0; e < pre[i].v.size(); ++e) pre[i].v[e] += t[std::size_t(l.residual.id)].v[e];
        t[i + 1] = l.conv.relu ? ref::relu_forward(pre[i]) : pre[i];
        break;
      }
      case gpucmp::layer_kind::max_pool: t[i + 1] = ref::max_pool_forward(x, l.pool_kernel, g); break;
      case gpucmp::layer_kind::average_pool: t[i + 1] = ref::average_pool_forward(x, l.pool_kernel, g); break;
      case gpucmp::layer_kind::global_average_pool: t[i + 1] = ref::global_average_pool_forward(x); break;
      case gpucmp::layer_kind::linear:
        t[i + 1] = ref::linear_forward(x, weight(l.name + ".weight", l.out_features, x.c * x.h * x.w, 1, 1),
                                       as_double(params.at(l.name + ".bias").values));
        break;
      default: FAIL("unexpected layer kind");
    }
  }
  std::vector<std::int64_t> labels64(labels.begin(), labels.end());
  out.loss = ref::softmax_cross_entropy(t.back(), labels64, grad.back());
  for (std::size_t i = 0; i + 1 < t.size(); ++i) {
    if (!grad[i].v.empty()) continue;
    grad[i] = ref::tensor(t[i].n, t[i].c, t[i].h, t[i].w);
  }
  auto add = [](ref::tensor& into, const ref::tensor& g) {
    for (std::size_t e = 0; e < g.v.size(); ++e) into.v[e] += g.v[e];
  };
  for (std::size_t i = layers.size(); i-- > 0;) {
    const auto& l = layers[i];
    const std::size_t xi = std::size_t(l.input.id);
    const ref::tensor& x = t[xi];
    const ref::tensor& dy = grad[i + 1];
    const ref::conv_geometry g{l.kind == gpucmp::layer_kind::conv ? l.conv.stride : l.pool_stride,
                               l.kind == gpucmp::layer_kind::conv ? l.conv.pad : l.pool_pad};
    switch (l.kind) {
      case gpucmp::layer_kind::conv: {
        const std::int64_t k = l.conv.out_channels, r = l.conv.kernel;
        const ref::tensor dpre = l.conv.relu ? ref::relu_backward(dy, pre[i]) : dy;
        if (l.residual.valid()) add(grad[std::size_t(l.residual.id)], dpre);
        std::vector<double> dgamma, dbeta;
        const ref::tensor dc = ref::batch_norm_backward(dpre, conv_out[i], as_double(params.at(l.name + ".bn.weight").values), saved[i],
                                                        dgamma, dbeta);
        const ref::tensor w = weight(l.name + ".weight", k, x.c, r, r);
        out.gradients[l.name + ".weight"] = ref::conv_backward_weight(x, dc, w, g).v;
        out.gradients[l.name + ".bn.weight"] = dgamma;
        out.gradients[l.name + ".bn.bias"] = dbeta;
        if (xi != 0) add(grad[xi], ref::conv_backward_data(dc, w, x, g));
        break;
      }
      case gpucmp::layer_kind::max_pool: add(grad[xi], ref::max_pool_backward(dy, x, l.pool_kernel, g)); break;
      case gpucmp::layer_kind::average_pool: add(grad[xi], ref::average_pool_backward(dy, x, l.pool_kernel, g)); break;
      case gpucmp::layer_kind::global_average_pool: add(grad[xi], ref::global_average_pool_backward(dy, x)); break;
      case gpucmp::layer_kind::linear: {
        ref::tensor dw;
        std::vector<double> db;
        const ref::tensor w = weight(l.name + ".weight", l.out_features, x.c * x.h * x.w, 1, 1);
        add(grad[xi], ref::linear_backward(dy, x, w, dw, db));
        out.gradients[l.name + ".weight"] = dw.v;
        out.gradients[l.name + ".bias"] = db;
        break;
      }
      default: break;
    }
  }
  return out;
}

std::map<std::string, gpucmp::named_tensor> by_name(const std::vector<gpucmp::named_tensor>& v) {
  std::map<std::string, gpucmp::named_tensor> m;
  for (const auto& t : v) m[t.name] = t;
  return m;
}

// ||got - want|| / ||want||.
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

gpucmp::training_options small_options(gpucmp::numerics dtype, std::int64_t batch = 4) {
  gpucmp::training_options o;
  o.batch = batch;
  o.dtype = dtype;
  o.sgd.learning_rate = 0.05f;
  return gpucmp_test::paced(o);
}

using gpucmp_test::random_values;

// The four-image batch the whole-network tests run, set on `net`, and the FP64 reference of
// one step from the network's own parameters and the images as it stores them (rounded to
// its type).
struct reference_case {
  std::map<std::string, gpucmp::named_tensor> params;
  host_step want;
};
reference_case set_batch_and_reference(gpucmp::training_network& net, const gpucmp::network_definition& def, cudaStream_t stream) {
  const std::vector<float> images = random_values(std::size_t(4 * 3 * 12 * 12), 9);
  const std::vector<std::int32_t> labels{0, 3, 4, 1};
  net.set_batch(images, labels, stream);
  reference_case r;
  r.params = by_name(net.parameters(stream));
  const auto stored = by_name(net.batch_tensors(stream));
  r.want = reference_step(def, r.params, stored.at("images").values, labels, 4);
  return r;
}

}  // namespace

TEST_CASE("a training step's gradients, statistics and updated weights match an FP64 reference of the whole network",
          "[gpu][training][training_network]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = every_layer_kind();
  for (gpucmp::conv_layout layout : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw})
  for (gpucmp::numerics dtype : {gpucmp::numerics::fp32, gpucmp::numerics::tf32, gpucmp::numerics::fp16, gpucmp::numerics::bf16})
  // The second gradient parts of b's input and of c's (b and c read a tensor another read
  // first) added by the data-gradient pass itself, and by a kernel.
  for (bool in_conv : {true, false}) {
    gpucmp::training_options o = small_options(dtype);
    o.layout = layout;
    o.accumulate_in_conv = in_conv;
    o.loss_scale.initial_scale = 1024;  // FP16: no overflow in this comparison (the skip has its own test)
    gpucmp::training_network net(def, o, s.get());
    std::string checks;
    for (const auto& l : net.layers()) {
      for (const auto& c : l.checks) checks += l.name + ": " + c + "\n";
      if (l.name == "b" || l.name == "c") CHECK((l.data_gradient.find("adding in place") != std::string::npos) == in_conv);
      if (l.name == "d") CHECK(l.data_gradient.find("adding in place") == std::string::npos);
    }
    INFO(net.name() << (in_conv ? "" : ", second parts added by a kernel") << "\n" << checks);
    const reference_case r = set_batch_and_reference(net, def, s.get());
    const auto& params = r.params;
    const host_step& want = r.want;

    net.forward_backward(s.get());
    CHECK(net.loss(s.get()) == Approx(want.loss).epsilon(dtype == gpucmp::numerics::fp32 ? 1e-5 : 2e-2));
    // FP32 within 1e-4 per tensor (the issue's bound against PyTorch); the others track it.
    // FP16 and BF16 store every activation in 16 bits: a pre-activation within rounding of 0
    // can land on the other side of a ReLU (or a max-pool tie) than in FP64, a discrete change
    // that moves every gradient upstream by a few percent (the likely cause). On the H200
    // (2026-12-02) both reached 4.5e-2 (d.weight; the same in both layouts and both ways of
    // adding second gradient parts), while TF32, whose products round as FP16's do but whose
    // tensors stay FP32, stayed at 7e-4. Each layer is verified on its own (the checks above).
    const double bound = dtype == gpucmp::numerics::fp32 ? 1e-4 : dtype == gpucmp::numerics::tf32 ? 2e-2 : 6e-2;
    const auto got = by_name(net.gradients(s.get()));
    REQUIRE(got.size() == want.gradients.size());
    for (const auto& [name, values] : want.gradients) {
      const double error = relative_error(got.at(name).values, values);
      INFO(name << ": relative error " << error);
      CHECK(error <= bound);
    }
    const auto after_forward = by_name(net.parameters(s.get()));
    for (const auto& [name, values] : want.running) {
      INFO(name);
      CHECK(relative_error(after_forward.at(name).values, values) <= (dtype == gpucmp::numerics::fp32 ? 1e-5 : bound));
    }

    // One SGD step from the initial weights changes p by -lr (g + wd p) (the momentum buffer
    // starts at that d): the update, compared as the gradients are.
    net.reset(s.get());
    net.step(s.get());
    const auto updated = by_name(net.parameters(s.get()));
    for (const auto& [name, g] : want.gradients) {
      const std::vector<float>& p = params.at(name).values;
      const std::vector<float>& after = updated.at(name).values;
      std::vector<float> change(p.size());
      std::vector<double> expected(p.size());
      for (std::size_t i = 0; i < p.size(); ++i) {
        change[i] = float(double(after[i]) - double(p[i]));
        expected[i] = -double(o.sgd.learning_rate) * (g[i] + double(o.sgd.weight_decay) * p[i]);
      }
      const double error = relative_error(change, expected);
      INFO(name << ": one step's update, relative error " << error);
      CHECK(error <= bound + (dtype == gpucmp::numerics::fp32 ? 1e-4 : 0.0));  // FP32 masters round each update
    }
  }
}

TEST_CASE("with batch norm's statistics from the convolutions' epilogues, a step's gradients still match the FP64 reference",
          "[gpu][training][training_network]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = every_layer_kind();
  for (gpucmp::numerics dtype : {gpucmp::numerics::fp16, gpucmp::numerics::bf16}) {
    gpucmp::training_options o = small_options(dtype);
    o.statistics_in_conv = gpucmp::conv_statistics::always;
    o.loss_scale.initial_scale = 1024;
    gpucmp::training_network net(def, o, s.get());
    int fused = 0;
    std::string checks;
    for (const auto& l : net.layers()) {
      if (l.forward.find("statistics in its epilogue") != std::string::npos) ++fused;
      if (l.kind == "conv") CHECK(l.batch_norm.rfind("gpucmp kernels", 0) == 0);  // cuDNN's persistent kernels take no statistics
      const bool fused_forward = l.forward.find("statistics in its epilogue") != std::string::npos;
      CHECK(fused_forward == (l.batch_norm.find("statistics from the convolution") != std::string::npos));
      for (const auto& c : l.checks) checks += l.name + ": " + c + "\n";
    }
    INFO(net.name() << "\n" << checks);
    CHECK(fused > 0);  // cuDNN fuses gen-stats on sm_80+ (at least one of the four convolutions)
    const host_step want = set_batch_and_reference(net, def, s.get()).want;
    net.forward_backward(s.get());
    const auto got = by_name(net.gradients(s.get()));
    for (const auto& [name, values] : want.gradients) {
      const double error = relative_error(got.at(name).values, values);
      INFO(name << ": relative error " << error);
      CHECK(error <= 6e-2);  // the bound of the whole-network test for FP16 and BF16
    }
    const auto after = by_name(net.parameters(s.get()));
    for (const auto& [name, values] : want.running) {
      INFO(name);
      CHECK(relative_error(after.at(name).values, values) <= 6e-2);
    }
  }
}

TEST_CASE("the loss falls over 30 steps in every precision, and a graph of the step replays eager's results",
          "[gpu][training][training_network]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = every_layer_kind();
  for (gpucmp::numerics dtype : {gpucmp::numerics::fp32, gpucmp::numerics::tf32, gpucmp::numerics::fp16, gpucmp::numerics::bf16}) {
    gpucmp::training_network net(def, small_options(dtype, 16), s.get());
    INFO(net.name());
    std::vector<float> eager;
    for (int k = 0; k < 30; ++k) {
      net.step(s.get());
      eager.push_back(net.loss(s.get()));
    }
    INFO("loss " << eager.front() << " -> " << eager.back());
    CHECK(std::isfinite(eager.back()));
    CHECK(eager.back() < 0.8 * eager.front());
    const auto eager_params = net.parameters(s.get());
    net.reset(s.get());
    gpucmp::graph_exec g = net.capture(s.get());
    std::vector<float> replayed;
    for (int k = 0; k < 30; ++k) {
      g.launch(s.get());
      replayed.push_back(net.loss(s.get()));
    }
    // The same kernels in the same order. Bit for bit unless an algorithm sums in a varying
    // order (cuDNN flags some weight-gradient algorithms nondeterministic): then within 1e-3.
    double worst = 0;
    for (std::size_t k = 0; k < eager.size(); ++k) worst = std::max(worst, std::fabs(double(replayed[k]) - eager[k]) / eager[k]);
    INFO("graph vs eager: " << (replayed == eager ? "bit-identical" : "differ") << ", worst relative loss difference " << worst);
    CHECK(worst <= 1e-3);
    const auto graph_params = net.parameters(s.get());
    for (std::size_t i = 0; i < eager_params.size(); ++i) {
      std::vector<double> want(eager_params[i].values.begin(), eager_params[i].values.end());
      INFO(eager_params[i].name);
      CHECK(relative_error(graph_params[i].values, want) <= 1e-3);
    }
    CHECK(net.loss_scale(s.get()).skipped_steps == 0);
  }
}

TEST_CASE("FP16 loss scaling skips overflowing steps, backs off, and trains on", "[gpu][training][training_network]") {
  gpucmp::stream s;
  gpucmp::training_options o = small_options(gpucmp::numerics::fp16, 16);
  o.loss_scale.initial_scale = 0x1p40f;  // the logits' gradient overflows FP16 until the scale is ~2^20
  gpucmp::training_network net(every_layer_kind(), o, s.get());
  const auto before = net.parameters(s.get());
  net.step(s.get());
  const gpucmp::loss_scale_state first = net.loss_scale(s.get());
  CHECK(first.skipped_steps == 1);
  CHECK(first.scale == 0x1p39f);
  const auto after = net.parameters(s.get());
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (before[i].name.find("running") != std::string::npos) continue;  // the forward pass ran
    CHECK(after[i].values == before[i].values);  // a skipped step changes no weight
  }
  std::vector<float> losses;
  for (int k = 0; k < 60; ++k) {
    net.step(s.get());
    losses.push_back(net.loss(s.get()));
  }
  const gpucmp::loss_scale_state last = net.loss_scale(s.get());
  INFO("skipped " << last.skipped_steps << ", scale " << last.scale << ", loss " << losses.front() << " -> " << losses.back());
  CHECK(last.skipped_steps > 1);
  CHECK(last.skipped_steps < 40);
  CHECK(last.scale < 0x1p30f);
  CHECK(losses.back() < losses.front());
}

#if GPUCMP_TEST_KERNEL_MODE
TEST_CASE("a step traced in kernel mode names every piece, its kernels add up to the step, and reset() undoes it",
          "[gpu][training][training_network][cupti]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = every_layer_kind();
  gpucmp::training_network net(def, small_options(gpucmp::numerics::fp16), s.get());
  net.step(s.get());
  const float first_loss = net.loss(s.get());
  net.reset(s.get());
  const auto tracer = gpucmp::make_activity_tracer();
  const gpucmp::network_trace t = net.trace_step(*tracer, s.get(), 5);
  CHECK(t.passes == 5);
  CHECK(t.dropped_records == 0);
  // Forward: conv and batch norm per conv layer (4), max pool, average pool, global average
  // pool, linear; the loss; backward; the optimizer last.
  REQUIRE(t.layers.size() > 14);
  CHECK(t.layers.front().layer == "conv forward: a");
  CHECK(t.layers[1].layer == "batch norm forward: a");
  CHECK(t.layers.back().layer.rfind("optimizer: ", 0) == 0);
  double sum = 0;
  for (const auto& piece : t.layers) {
    INFO(piece.layer);
    CHECK(piece.layer.find(": ") != std::string::npos);
    if (piece.layer.rfind("conv forward", 0) == 0 || piece.layer.rfind("weight gradient", 0) == 0) CHECK(piece.busy_s > 0);
    sum += piece.busy_s;
  }
  CHECK(sum == Approx(t.busy_s).epsilon(0.05));
  const auto parts = gpucmp::times_by_part(t);
  std::map<std::string, std::size_t> pieces;
  for (const auto& p : parts) pieces[p.part] = p.pieces;
  CHECK(pieces["conv forward"] == 4);
  CHECK(pieces["batch norm forward"] == 4);
  CHECK(pieces["batch norm backward"] == 4);
  CHECK(pieces["weight gradient"] == 4);
  CHECK(pieces["data gradient"] == 3);  // conv a reads the images: no data gradient
  CHECK(pieces["loss"] == 1);
  CHECK(pieces["optimizer"] == 1);
  // The traced steps trained the network; reset() brings back the first step's loss.
  net.reset(s.get());
  net.step(s.get());
  CHECK(net.loss(s.get()) == Approx(first_loss).epsilon(1e-6));
}
#endif

TEST_CASE("a training network refuses bad batches, definitions and options by name", "[gpu][training][training_network][api_error]") {
  gpucmp::stream s;
  gpucmp::training_network net(every_layer_kind(), small_options(gpucmp::numerics::fp32), s.get());
  CHECK_THROWS_WITH(net.set_batch(std::vector<float>(5), {0, 1, 2, 3}, s.get()), GPUCMP_CONTAINS("5 image values"));
  CHECK_THROWS_WITH(net.set_batch(random_values(4 * 3 * 12 * 12, 1), {0, 1, 2, 9}, s.get()), GPUCMP_CONTAINS("label 3 is 9"));
  CHECK_THROWS_WITH(net.set_batch(random_values(4 * 3 * 12 * 12, 1), {0, 1}, s.get()), GPUCMP_CONTAINS("2 labels"));
  CHECK_THROWS_AS(gpucmp::training_network(every_layer_kind(), small_options(gpucmp::numerics::fp32, 1), s.get()),
                  gpucmp::invalid_argument);
  gpucmp::network_definition no_classifier("no_classifier", {3, 8, 8});
  no_classifier.global_average_pool(no_classifier.conv(no_classifier.input(), {4, 3, 1, 1, true}));
  CHECK_THROWS_WITH(gpucmp::training_network(no_classifier, small_options(gpucmp::numerics::fp32), s.get()),
                    GPUCMP_CONTAINS("linear layer last"));
  gpucmp::training_options huge = small_options(gpucmp::numerics::fp16, std::int64_t{1} << 40);
  CHECK_THROWS_AS(gpucmp::training_network(every_layer_kind(), huge, s.get()), gpucmp::out_of_memory);
}

TEST_CASE("a user's CNN learns a random teacher's labels: its loss falls on a fixed synthetic task",
          "[gpu][training][training_network][user_network]") {
  gpucmp::stream s;
  auto cnn = [](std::uint64_t seed) {
    gpucmp::network_definition def("user_cnn", {3, 16, 16});
    auto x = def.conv(def.input(), {16, 3, 1, 1, true}, "stem");
    x = def.conv(x, {16, 3, 1, 1, true}, "block", x);
    x = def.conv(x, {32, 3, 2, 1, true}, "down");
    def.linear(def.global_average_pool(x), 6, "fc");
    def.init_random(seed);
    return def;
  };
  const std::int64_t batch = 64;
  const std::vector<float> images = random_values(std::size_t(batch * 3 * 16 * 16), 77);
  // The teacher: the same shape with other weights, run by the inference network; its logits
  // centred over the batch so the labels spread over the classes.
  gpucmp::network_options teacher_options;
  teacher_options.batch = batch;
  teacher_options.dtype = gpucmp::numerics::fp32;
  gpucmp::network teacher(cnn(99), gpucmp_test::paced(teacher_options), s.get());
  teacher.set_input(images, s.get());
  teacher(s.get());
  const std::vector<float> logits = teacher.output(s.get());
  std::vector<double> mean(6, 0.0);
  for (std::int64_t n = 0; n < batch; ++n)
    for (int c = 0; c < 6; ++c) mean[std::size_t(c)] += logits[std::size_t(n * 6 + c)] / double(batch);
  std::vector<std::int32_t> labels;
  std::vector<int> per_class(6, 0);
  for (std::int64_t n = 0; n < batch; ++n) {
    int best = 0;
    for (int c = 1; c < 6; ++c) {
      if (logits[std::size_t(n * 6 + c)] - mean[std::size_t(c)] > logits[std::size_t(n * 6 + best)] - mean[std::size_t(best)]) best = c;
    }
    labels.push_back(best);
    ++per_class[std::size_t(best)];
  }
  CHECK(std::count_if(per_class.begin(), per_class.end(), [](int n) { return n > 0; }) >= 3);  // a real task, not one class
  for (gpucmp::numerics dtype : {gpucmp::numerics::fp16, gpucmp::numerics::fp32}) {
    gpucmp::training_network student(cnn(1), small_options(dtype, batch), s.get());
    INFO(student.name());
    student.set_batch(images, labels, s.get());
    std::vector<float> losses;
    for (int k = 0; k < 150; ++k) {
      student.step(s.get());
      losses.push_back(student.loss(s.get()));
    }
    INFO("loss " << losses.front() << " -> " << losses.back());
    CHECK(losses.back() < 0.5 * losses.front());
  }
}
