// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Every registration macro and call of the Google Benchmark adapter, fixtures included, so
// scripts/gbench-compat.sh can build it against each Google Benchmark version and list what
// it registered (--benchmark_list_tests=true); without a GPU a run skips every benchmark
// and exits 77.
#include <gpucmp/bench.hpp>

#include <cuda_runtime_api.h>

namespace {

void plain(gpucmp::state& st) {
  gpucmp::device_buffer<float> x(static_cast<std::size_t>(st.range(0)));
  st.add_bytes_written(static_cast<double>(x.bytes()));
  st.run([&](cudaStream_t s) { GPUCMP_CUDA_CHECK(cudaMemsetAsync(x.data(), 0, x.bytes(), s)); });
}

struct buffers : benchmark::Fixture {
  using benchmark::Fixture::SetUp;
  using benchmark::Fixture::TearDown;
  void SetUp(const benchmark::State& gb) override { data = gpucmp::device_buffer<float>(gb.range(0)); }
  void TearDown(const benchmark::State&) override { data = {}; }
  gpucmp::device_buffer<float> data;
};

void two_args(gpucmp::detail::gbench_registration* b) { b->Args({1, 2}); }

}  // namespace

GPUCMP_BENCHMARK(plain, gpucmp::mode::cold, gpucmp::mode::hot, gpucmp::mode::graph)->Arg(1 << 10)->Range(1 << 12, 1 << 14);
GPUCMP_BENCHMARK(plain)->DenseRange(64, 128, 64)->ArgName("floats")->Unit(benchmark::kMillisecond)->Repetitions(1);

GPUCMP_BENCHMARK_DEFINE_F(buffers, memset)(gpucmp::state& st) {
  st.add_bytes_written(static_cast<double>(data.bytes()));
  st.run([&](cudaStream_t s) { GPUCMP_CUDA_CHECK(cudaMemsetAsync(data.data(), 0, data.bytes(), s)); });
}
GPUCMP_BENCHMARK_REGISTER_F(buffers, memset, gpucmp::mode::cold, gpucmp::mode::hot)->Arg(1 << 16);
GPUCMP_BENCHMARK_REGISTER_F(buffers, memset)->ArgsProduct({{1 << 8, 1 << 9}})->RangeMultiplier(4);

static const bool registered = [] {
  gpucmp::register_benchmark_as("named/exactly/eager", gpucmp::mode::hot, plain)->Arg(256)->NoHold();
  gpucmp::register_benchmark("applied", [](gpucmp::state& st) { st.skip("two arguments are enough to list"); })
      ->Apply(two_args)
      ->ArgNames({"a", "b"});
  gpucmp::register_benchmark("ranged", plain)->Ranges({{1, 8}})->Options(gpucmp::measure_options{});
  return true;
}();

GPUCMP_BENCHMARK_MAIN()
