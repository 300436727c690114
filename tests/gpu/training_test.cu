// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Dynamic loss scaling on the device (training/loss_scale.cuh) against the host state
// machine it implements (training/loss_scale.hpp): the same scale, tracker and skipped
// steps over a long random run of clean and overflowing steps, in eager launches and
// replayed from one CUDA graph; the gradient check finds a single infinity or NaN in FP32,
// FP16 and BF16 gradients and nothing in finite ones.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/training/loss_scale.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

// Writes `value` over element i of a device array.
template <class T>
void poke(T* device, std::size_t i, float value) {
  const T v = T(value);
  REQUIRE(cudaMemcpy(device + i, &v, sizeof v, cudaMemcpyHostToDevice) == cudaSuccess);
}

std::int32_t flag_of(const gpucmp::dynamic_loss_scale& s) {
  std::int32_t flag = -1;
  REQUIRE(cudaMemcpy(&flag, s.skip_step(), sizeof flag, cudaMemcpyDeviceToHost) == cudaSuccess);
  return flag;
}

template <class T>
void check_finds_non_finite(const char* type) {
  INFO(type);
  gpucmp::stream s;
  gpucmp::dynamic_loss_scale scale({}, s.get());
  const std::size_t n = (std::size_t{1} << 20) + 37;  // more than one grid's stride, not a multiple of it
  gpucmp::device_buffer<T> g(n, gpucmp::initial_fill::random(7));
  scale.check(g.data(), n, s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  CHECK(flag_of(scale) == 0);  // random finite values
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    for (std::size_t where : {std::size_t{0}, n / 2, n - 1}) {
      INFO(bad << " at " << where);
      gpucmp::device_buffer<T> h(n, gpucmp::initial_fill::random(8));
      poke(h.data(), where, bad);
      scale.check(h.data(), n, s.get());
      scale.update(s.get());  // closes the step: counted as skipped, the flag cleared
      REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
      CHECK(flag_of(scale) == 0);
    }
  }
  const gpucmp::loss_scale_state after = scale.read(s.get());
  CHECK(after.steps == 9);
  CHECK(after.skipped_steps == 9);
  CHECK(after.scale == 65536.0f / 512.0f);  // backed off nine times
}

}  // namespace

TEST_CASE("the gradient check finds one infinity or NaN in FP32, FP16 and BF16 gradients, and nothing in finite ones",
          "[gpu][training][loss_scale]") {
  check_finds_non_finite<float>("fp32");
  check_finds_non_finite<__half>("fp16");
  check_finds_non_finite<__nv_bfloat16>("bf16");
}

TEST_CASE("the device's loss scale follows the host state machine over 3000 random steps, eager and in a CUDA graph",
          "[gpu][training][loss_scale]") {
  gpucmp::loss_scale_options o;
  o.initial_scale = 4096;
  o.growth_interval = 7;  // many growths and backoffs in a short run
  gpucmp::stream s;
  // One gradient per step: finite, or an infinity in about one step of ten.
  const int steps = 3000;
  std::vector<float> gradients(steps);
  for (int i = 0; i < steps; ++i) {
    gradients[std::size_t(i)] = gpucmp::random_bits(11, std::uint64_t(i)) % 10 == 0 ? std::numeric_limits<float>::infinity() : 0.5f;
  }
  gpucmp::device_buffer<float> all(gradients.size(), gpucmp::initial_fill::uninitialized());
  all.copy_from_host(gradients);

  gpucmp::loss_scale_state expected = gpucmp::initial_loss_scale(o);
  gpucmp::dynamic_loss_scale eager(o, s.get());
  for (int i = 0; i < steps; ++i) {
    gpucmp::update_loss_scale(expected, std::isinf(gradients[std::size_t(i)]), o);
    eager.check(all.data() + i, 1, s.get());
    eager.update(s.get());
    if (i % 500 == 499) {  // the state is the host's at points along the way, not only at the end
      const gpucmp::loss_scale_state got = eager.read(s.get());
      INFO("step " << i);
      CHECK(got.scale == expected.scale);
      CHECK(got.growth_tracker == expected.growth_tracker);
      CHECK(got.skipped_steps == expected.skipped_steps);
    }
  }
  const gpucmp::loss_scale_state got = eager.read(s.get());
  CHECK(got.steps == steps);
  CHECK(got.skipped_steps == expected.skipped_steps);
  CHECK(expected.skipped_steps > 200);  // the run did exercise both branches
  CHECK(got.scale == expected.scale);

  // The same run as replays of one captured step (check + update) reading a moving window:
  // the state machine needs no host synchronisation, so a whole step can live in a graph.
  gpucmp::dynamic_loss_scale replayed(o, s.get());
  gpucmp::device_buffer<float> window(1, gpucmp::initial_fill::uninitialized());
  const gpucmp::graph g = gpucmp::capture_graph(s.get(), [&](cudaStream_t c) {
    replayed.check(window.data(), 1, c);
    replayed.update(c);
  });
  gpucmp::graph_exec step(g.get());
  for (int i = 0; i < steps; ++i) {
    REQUIRE(cudaMemcpyAsync(window.data(), all.data() + i, sizeof(float), cudaMemcpyDeviceToDevice, s.get()) == cudaSuccess);
    step.launch(s.get());
  }
  const gpucmp::loss_scale_state from_graph = replayed.read(s.get());
  CHECK(from_graph.steps == steps);
  CHECK(from_graph.skipped_steps == expected.skipped_steps);
  CHECK(from_graph.scale == expected.scale);
  CHECK(from_graph.growth_tracker == expected.growth_tracker);
}
