// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Data-parallel training (training/data_parallel.cuh) over every visible GPU: the replicas'
// weights stay identical bit for bit (they take the same step on the same averaged
// gradients), each replica's loss falls, the engine times the step; on one GPU the
// data-parallel step matches a plain training step; the gradient buckets cover every gradient
// once, and all-reduces that overlap the backward pass train as one after it does.
#include "catch.hpp"
#include "search_pace.hpp"

#include <gpucmp/measure/engine.hpp>
#include <gpucmp/training/data_parallel.cuh>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

gpucmp::network_definition small_cnn() {
  gpucmp::network_definition def("dp_cnn", {3, 16, 16});
  auto x = def.conv(def.input(), {16, 3, 1, 1, true}, "stem");
  x = def.conv(x, {16, 3, 1, 1, true}, "block", x);
  def.linear(def.global_average_pool(x), 10, "fc");
  def.init_random(5);
  return def;
}

// ||a - b|| / ||b|| over one parameter's values.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    diff += (double(a[j]) - b[j]) * (double(a[j]) - b[j]);
    norm += double(b[j]) * b[j];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

gpucmp::training_options options() {
  gpucmp::training_options o;
  o.batch = 16;
  o.dtype = gpucmp::numerics::fp16;
  o.sgd.learning_rate = 0.05f;
  return gpucmp_test::paced(o);
}

}  // namespace

TEST_CASE("data-parallel replicas keep identical weights, their losses fall, and the engine times the step",
          "[gpu][multigpu][training][data_parallel]") {
  const gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
  gpucmp::engine eng;
  gpucmp::data_parallel_training dp(small_cnn(), options(), group);
  INFO(dp.name());
  std::vector<float> first(std::size_t(dp.ranks())), last(std::size_t(dp.ranks()));
  for (int k = 0; k < 30; ++k) {
    dp(eng.stream());
    REQUIRE(cudaStreamSynchronize(eng.stream()) == cudaSuccess);
    for (int r = 0; r < dp.ranks(); ++r) {
      REQUIRE(cudaSetDevice(group.device(r)) == cudaSuccess);
      (k == 0 ? first : last)[std::size_t(r)] = dp.replica(r).loss(group.stream(r));
    }
    REQUIRE(cudaSetDevice(group.device(0)) == cudaSuccess);
  }
  for (int r = 0; r < dp.ranks(); ++r) {
    INFO("replica " << r << ": loss " << first[std::size_t(r)] << " -> " << last[std::size_t(r)]);
    CHECK(last[std::size_t(r)] < first[std::size_t(r)]);
  }
  REQUIRE(cudaSetDevice(group.device(0)) == cudaSuccess);
  const auto reference = dp.replica(0).parameters(group.stream(0));
  for (int r = 1; r < dp.ranks(); ++r) {
    REQUIRE(cudaSetDevice(group.device(r)) == cudaSuccess);
    const auto mine = dp.replica(r).parameters(group.stream(r));
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (mine[i].name.find("running") != std::string::npos) continue;  // per GPU, as DDP keeps them
      INFO("replica " << r << ": " << mine[i].name);
      CHECK(mine[i].values == reference[i].values);
    }
  }
  REQUIRE(cudaSetDevice(group.device(0)) == cudaSuccess);
  const gpucmp::measurement m = eng.measure(dp, gpucmp::mode::hot);
  CHECK(m.ok());
  CHECK(dp.work().items == 16.0 * dp.ranks());
}

TEST_CASE("on one GPU a data-parallel step is a plain training step", "[gpu][multigpu][training][data_parallel]") {
  const gpucmp::communicator_group one(std::vector<int>{0});
  gpucmp::engine eng;
  gpucmp::data_parallel_training dp(small_cnn(), options(), one);
  gpucmp::training_network plain(small_cnn(), options(), eng.stream());
  for (int k = 0; k < 3; ++k) {
    dp(eng.stream());
    plain.step(eng.stream());
  }
  REQUIRE(cudaStreamSynchronize(eng.stream()) == cudaSuccess);
  const auto a = dp.replica(0).parameters(one.stream(0));
  const auto b = plain.parameters(eng.stream());
  REQUIRE(a.size() == b.size());
  // Each build searches its own algorithms; equal-speed choices may sum in another order.
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(relative_difference(a[i].values, b[i].values) <= 1e-3);
  }
}

TEST_CASE("data-parallel buckets cover every gradient once, and all-reduces overlapping the backward pass train as one after it",
          "[gpu][multigpu][training][data_parallel]") {
  const gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
  gpucmp::engine eng;
  gpucmp::data_parallel_training overlapped(small_cnn(), options(), group, 1);  // a bucket per piece that finishes gradients
  gpucmp::data_parallel_training after(small_cnn(), options(), group, 0);       // one bucket after the backward pass
  CHECK(overlapped.buckets().size() > 2);
  CHECK(after.buckets().size() == 1);
  // Every element of both gradient arrays in exactly one bucket.
  const gpucmp::training_network::gradient_arrays g = overlapped.replica(0).gradient_storage();
  std::vector<int> filters(g.filter_count, 0), rest(g.rest_count, 0);
  for (const gpucmp::gradient_bucket& b : overlapped.buckets()) {
    for (const gpucmp::gradient_span& s : b.spans) {
      REQUIRE(s.offset + s.count <= (s.filters ? filters : rest).size());
      for (std::size_t i = 0; i < s.count; ++i) ++(s.filters ? filters : rest)[s.offset + i];
    }
  }
  CHECK(std::count(filters.begin(), filters.end(), 1) == std::ptrdiff_t(filters.size()));
  CHECK(std::count(rest.begin(), rest.end(), 1) == std::ptrdiff_t(rest.size()));
  for (int k = 0; k < 3; ++k) {
    overlapped(eng.stream());
    after(eng.stream());
  }
  REQUIRE(cudaStreamSynchronize(eng.stream()) == cudaSuccess);
  REQUIRE(cudaSetDevice(group.device(0)) == cudaSuccess);
  const auto a = overlapped.replica(0).parameters(group.stream(0));
  const auto b = after.replica(0).parameters(group.stream(0));
  REQUIRE(a.size() == b.size());
  // Two builds, each with its own searched algorithms (as in the test above).
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(relative_difference(a[i].values, b[i].values) <= 1e-3);
  }
  // The communication streams join a CUDA graph of the whole step.
  CHECK(eng.measure(overlapped, gpucmp::mode::graph).ok());
}
