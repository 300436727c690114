// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 2: the same kernel as Google Benchmark benchmarks, once as a function and once as
// a fixture whose buffers are made in SetUp. Run with the usual flags, e.g.
//   02_gbench_kernel --benchmark_format=json --benchmark_out=saxpy.json
#include <gpucmp/bench.hpp>

__global__ void saxpy(std::size_t n, float a, const float* x, float* y) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static void launch_saxpy(cudaStream_t s, std::size_t n, const float* x, float* y) {
  saxpy<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(n, 2.0f, x, y);
}

// As a function: buffers are allocated before st.run(), outside the timed path.
static void saxpy_function(gpucmp::state& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  gpucmp::device_buffer<float> x(n), y(n);
  st.add_flops(2.0 * n);
  st.add_bytes_read(2.0 * n * sizeof(float));
  st.add_bytes_written(1.0 * n * sizeof(float));
  st.run([&](cudaStream_t s) { launch_saxpy(s, n, x.data(), y.data()); });
}
GPUCMP_BENCHMARK(saxpy_function, gpucmp::mode::cold, gpucmp::mode::hot)->RangeMultiplier(16)->Range(1 << 16, 1 << 28);

// As a fixture: SetUp/TearDown own the buffers.
class saxpy_buffers : public benchmark::Fixture {
 public:
  using benchmark::Fixture::SetUp;  // keep the State& overloads visible (nvcc warning #611)
  using benchmark::Fixture::TearDown;
  void SetUp(const benchmark::State& gb) override {
    x = gpucmp::device_buffer<float>(static_cast<std::size_t>(gb.range(0)));
    y = gpucmp::device_buffer<float>(static_cast<std::size_t>(gb.range(0)));
  }
  void TearDown(const benchmark::State&) override {
    x = {};
    y = {};
  }

 protected:
  gpucmp::device_buffer<float> x, y;
};

GPUCMP_BENCHMARK_DEFINE_F(saxpy_buffers, saxpy)(gpucmp::state& st) {
  st.add_flops(2.0 * x.size());
  st.add_bytes_read(2.0 * x.bytes());
  st.add_bytes_written(1.0 * y.bytes());
  st.run([&](cudaStream_t s) { launch_saxpy(s, x.size(), x.data(), y.data()); });
}
GPUCMP_BENCHMARK_REGISTER_F(saxpy_buffers, saxpy, gpucmp::mode::graph)->Arg(1 << 24);

GPUCMP_BENCHMARK_MAIN()
