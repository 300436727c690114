// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NCCL collectives over every visible GPU (multigpu/nccl_collective.cuh): every collective in
// place and out of place, in each element type, at sizes from one element up, verified
// against the exact result on every rank; a corrupted element is caught and located; the
// engine times a collective in hot and graph modes; a world joined through a unique id (each
// process's part under MPI) verifies and times in lockstep; bad groups and calls are refused.
// On one GPU everything runs with n = 1 and busbw is n/a.
#include "catch.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/multigpu/nccl_collective.cuh>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

TEST_CASE("every collective verifies on every rank, in place and out of place, in each type", "[gpu][multigpu][nccl]") {
  const gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
  gpucmp::stream s;
  INFO(group.ranks() << " rank(s)");
  for (gpucmp::collective c : gpucmp::all_collectives())
  for (gpucmp::element_type t : {gpucmp::element_type::fp32, gpucmp::element_type::fp16, gpucmp::element_type::bf16, gpucmp::element_type::int32})
  for (std::size_t bytes : {std::size_t{8}, std::size_t{4096 + 12}, std::size_t{1} << 22})
  for (bool in_place : {false, true}) {
    if (in_place && (c == gpucmp::collective::all_to_all || c == gpucmp::collective::send_recv)) continue;
    gpucmp::nccl_collective_options o;
    o.in_place = in_place;
    gpucmp::nccl_collective op(group, c, bytes, t, o);
    INFO(op.name());
    const gpucmp::verification v = op.verify(s.get());
    INFO(v.summary());
    CHECK(v.passed());
    CHECK(v.checked >= std::size_t(op.size().output_elements()));
    if (group.ranks() == 1) CHECK(std::isnan(op.bus_factor()));  // busbw is n/a with one rank
  }
}

TEST_CASE("a corrupted collective output is caught and located", "[gpu][multigpu][nccl]") {
  const gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
  gpucmp::stream s;
  gpucmp::nccl_collective op(group, gpucmp::collective::all_reduce, 4096, gpucmp::element_type::fp32);
  REQUIRE(op.verify(s.get()).passed());
  op(s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  const float wrong = 1e6f;
  REQUIRE(cudaMemcpy(static_cast<float*>(op.output_of(group.local_ranks() - 1)) + 17, &wrong, sizeof wrong, cudaMemcpyHostToDevice) ==
          cudaSuccess);
  const gpucmp::verification bad = op.check_outputs();
  CHECK(bad.failed == 1);
  CHECK_THAT(bad.worst_where, GPUCMP_CONTAINS("rank " + std::to_string(group.ranks() - 1) + ", element 17"));
}

TEST_CASE("the engine times a collective across ranks in hot and graph modes", "[gpu][multigpu][nccl]") {
  const gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
  gpucmp::engine eng;
  gpucmp::nccl_collective op(group, gpucmp::collective::all_reduce, std::size_t{64} << 20, gpucmp::element_type::fp32);
  REQUIRE(op.verify(eng.stream()).passed());
  gpucmp::measure_options o;
  o.min_samples = 5;
  o.min_gpu_time_s = 0.01;
  for (gpucmp::mode m : {gpucmp::mode::hot, gpucmp::mode::graph}) {
    const gpucmp::measurement r = eng.measure(op, m, o);
    INFO(gpucmp::to_string(m) << ": " << r.gpu.median * 1e6 << " us");
    CHECK(r.ok());
    CHECK(r.gpu.median > 0);
    const gpucmp::collective_rates rates = gpucmp::rates_for(op.size(), r.gpu.median);
    CHECK(rates.algbw > 1e9);  // 64 MiB: more than 1 GB/s on any GPU
  }
  REQUIRE(op.verify(eng.stream()).passed());  // still right after being timed
}

TEST_CASE("bad groups and calls are refused by name", "[gpu][multigpu][nccl][api_error]") {
  CHECK_THROWS_AS(gpucmp::communicator_group(std::vector<int>{}), gpucmp::invalid_argument);
  CHECK_THROWS_WITH(gpucmp::communicator_group(std::vector<int>{0, 0}), GPUCMP_CONTAINS("device 0 twice"));
  CHECK_THROWS_WITH(gpucmp::communicator_group(std::vector<int>{99}), GPUCMP_CONTAINS("device 99 is not one of"));
  const gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
  gpucmp::nccl_collective_options in_place;
  in_place.in_place = true;
  CHECK_THROWS_WITH(gpucmp::nccl_collective(group, gpucmp::collective::all_to_all, 4096, gpucmp::element_type::fp32, in_place),
                    GPUCMP_CONTAINS("no in-place all_to_all"));
  CHECK_THROWS_WITH(gpucmp::parse_element_type("fp8"), GPUCMP_CONTAINS("unknown element type 'fp8'"));
  // A type of the vocabulary that the collectives' data check has no rule for is refused by name.
  CHECK_THROWS_AS(gpucmp::nccl_collective(group, gpucmp::collective::all_reduce, 4096, gpucmp::element_type::fp8_e4m3),
                  gpucmp::unsupported);
}

TEST_CASE("a world joined through a unique id: every collective verifies, and lockstep timing takes its exact count",
          "[gpu][multigpu][nccl][mpi]") {
  // What each process does under MPI (multigpu/mpi_world.hpp), with one process: ranks 0 ..
  // n-1 of a world of n, joined through an id, in one NCCL group.
  int visible = 0;
  REQUIRE(cudaGetDeviceCount(&visible) == cudaSuccess);
  std::vector<int> devices;
  for (int d = 0; d < visible; ++d) devices.push_back(d);
  ncclUniqueId id{};
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const gpucmp::communicator_group group(id, visible, 0, devices);
  CHECK(group.ranks() == visible);
  CHECK(group.local_ranks() == visible);
  CHECK(group.single_process());
  CHECK(group.rank(group.local_ranks() - 1) == visible - 1);
  gpucmp::engine eng;
  for (gpucmp::collective c : gpucmp::all_collectives()) {
    gpucmp::nccl_collective op(group, c, std::size_t{1} << 20, gpucmp::element_type::fp32);
    INFO(op.name());
    CHECK(op.verify(eng.stream()).passed());
  }
  gpucmp::nccl_collective op(group, gpucmp::collective::all_reduce, std::size_t{16} << 20, gpucmp::element_type::fp32);
  gpucmp::measure_options o;
  gpucmp::make_lockstep(o, 12, 4);
  for (gpucmp::mode m : {gpucmp::mode::hot, gpucmp::mode::graph}) {
    const gpucmp::measurement r = eng.measure(op, m, o);
    INFO(gpucmp::to_string(m));
    REQUIRE(r.ok());
    CHECK(r.gpu_s.size() == 12);  // every process takes the same launches
    CHECK(r.batch == 4);
    CHECK(r.warmup_launches == 5);
    CHECK(r.launches == 48);
    CHECK(r.stopped_by == gpucmp::stop_reason::max_samples);
  }
  CHECK(op.verify(eng.stream()).passed());
  // Ranks outside the world are refused before NCCL is asked.
  CHECK_THROWS_WITH(gpucmp::communicator_group(id, 1, 1, std::vector<int>{0}), GPUCMP_CONTAINS("are not in a world of 1"));
  CHECK_THROWS_AS(gpucmp::communicator_group(id, 2, -1, std::vector<int>{0}), gpucmp::invalid_argument);
  CHECK_THROWS_WITH(group.device(visible), GPUCMP_CONTAINS("local rank"));
}
