// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The fused multi-tensor SGD step (training/sgd.cuh) against the reference rule
// (training/sgd.hpp) run on the host over the same steps: tensors of 1, 1,000 and 300,000
// elements (one and several chunks) with FP16 gradients scaled by a dynamic loss scale and an
// FP16 model copy, a skipped step that changes nothing, and the step as a CUDA-graph replay.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/training/loss_scale.cuh>
#include <gpucmp/training/sgd.cuh>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

std::vector<float> random_values(std::size_t n, std::uint64_t stream, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * float(2 * gpucmp::unit_interval(gpucmp::random_bits(stream, i)) - 1);
  return v;
}

// One tensor on both sides: the device's buffers and the host's reference copies.
struct parameter {
  std::vector<float> master, momentum;
  gpucmp::device_buffer<float> master_d, momentum_d;
  gpucmp::device_buffer<__half> gradient_d, model_d;
  explicit parameter(std::size_t n, std::uint64_t seed)
      : master(random_values(n, seed, 1.0f)), momentum(n, 0.0f), master_d(n, gpucmp::initial_fill::uninitialized()),
        momentum_d(n, gpucmp::initial_fill::poison()), gradient_d(n, gpucmp::initial_fill::uninitialized()),
        model_d(n, gpucmp::initial_fill::poison()) {
    master_d.copy_from_host(master);
  }
  gpucmp::optimizer_tensor<__half, __half> tensor() {
    return {master_d.data(), gradient_d.data(), momentum_d.data(), model_d.data(), master.size()};
  }
};

}  // namespace

TEST_CASE("the fused SGD step matches the reference rule on every tensor, skips a flagged step, and replays in a graph",
          "[gpu][training][sgd]") {
  gpucmp::stream s;
  gpucmp::sgd_options o;
  o.learning_rate = 0.05f;
  o.momentum = 0.9f;
  o.weight_decay = 1e-3f;
  std::vector<parameter> params;
  params.reserve(3);
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) params.emplace_back(n, 100 + n);
  std::vector<gpucmp::optimizer_tensor<__half, __half>> tensors;
  for (auto& p : params) tensors.push_back(p.tensor());
  gpucmp::multi_tensor_sgd<__half, __half> sgd(tensors, o, s.get());
  CHECK(sgd.chunk_count() == 1 + 1 + (300000 + sgd.chunk_elements - 1) / sgd.chunk_elements);

  gpucmp::loss_scale_options lo;
  lo.initial_scale = 256;
  gpucmp::dynamic_loss_scale scale(lo, s.get());
  // The step as one graph: check the gradients, update, advance the loss scale.
  const gpucmp::graph g = gpucmp::capture_graph(s.get(), [&](cudaStream_t c) {
    for (auto& p : params) scale.check(p.gradient_d.data(), p.master.size(), c);
    sgd.step(c, scale.scale(), scale.skip_step());
    scale.update(c);
  });
  gpucmp::graph_exec step(g.get());

  bool first = true;
  for (int k = 0; k < 6; ++k) {
    const bool overflow = k == 2;  // one step with an infinite gradient: nothing may move
    const float current_scale = scale.read(s.get()).scale;
    for (std::size_t t = 0; t < params.size(); ++t) {
      parameter& p = params[t];
      const std::vector<float> unscaled = random_values(p.master.size(), 1000 * std::uint64_t(k) + t, 0.1f);
      std::vector<__half> scaled(unscaled.size());
      for (std::size_t i = 0; i < unscaled.size(); ++i) scaled[i] = __float2half(unscaled[i] * current_scale);
      if (overflow && t == 1) scaled[17] = __float2half(std::numeric_limits<float>::infinity());
      p.gradient_d.copy_from_host(scaled);
      if (!overflow) {  // the host takes the step the device should take, from the same FP16 gradients
        for (std::size_t i = 0; i < unscaled.size(); ++i) {
          gpucmp::sgd_update_reference(p.master[i], __half2float(scaled[i]) / current_scale, p.momentum[i], first, o);
        }
      }
    }
    step.launch(s.get());
    if (!overflow) first = false;
  }
  CHECK(sgd.steps_taken(s.get()) == 5);
  const gpucmp::loss_scale_state ls = scale.read(s.get());
  CHECK(ls.skipped_steps == 1);
  CHECK(ls.scale == 128);
  for (std::size_t t = 0; t < params.size(); ++t) {
    parameter& p = params[t];
    INFO("tensor " << t << " of " << p.master.size());
    const std::vector<float> master = p.master_d.to_host(), momentum = p.momentum_d.to_host();
    const std::vector<__half> model = p.model_d.to_host();
    double worst_master = 0, worst_momentum = 0, worst_copy = 0;
    for (std::size_t i = 0; i < master.size(); ++i) {
      worst_master = std::max(worst_master, double(std::fabs(master[i] - p.master[i])));
      worst_momentum = std::max(worst_momentum, double(std::fabs(momentum[i] - p.momentum[i])));
      worst_copy = std::max(worst_copy, double(std::fabs(__half2float(model[i]) - __half2float(__float2half(master[i])))));
    }
    // FP32 on both sides; the device may fuse multiply-adds, so a few units of the last place.
    CHECK(worst_master <= 1e-6);
    CHECK(worst_momentum <= 1e-6);
    CHECK(worst_copy == 0);  // the FP16 copy is the master rounded, every element written
  }
}

TEST_CASE("a bad optimizer table is refused with what is wrong", "[gpu][training][sgd]") {
  gpucmp::stream s;
  gpucmp::device_buffer<float> w(10), g(10);
  gpucmp::sgd_options o;
  CHECK_THROWS_WITH((gpucmp::multi_tensor_sgd<float, float>({}, o, s.get())), GPUCMP_CONTAINS("no tensors"));
  CHECK_THROWS_WITH((gpucmp::multi_tensor_sgd<float, float>({{w.data(), g.data(), nullptr, nullptr, 10}}, o, s.get())),
                    GPUCMP_CONTAINS("tensor 0 has no momentum buffer"));
  o.momentum = 0;
  gpucmp::multi_tensor_sgd<float, float> plain({{w.data(), g.data(), nullptr, nullptr, 10}}, o, s.get());
  CHECK(plain.chunk_count() == 1);
}
