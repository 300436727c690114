// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 1: time your own kernel with the measurement engine directly (no Google Benchmark).
// The engine returns a plain record; this program decides how to print it.
#include <gpucmp/core.hpp>

#include <cstdio>

__global__ void saxpy(std::size_t n, float a, const float* x, float* y) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  try {
    const std::size_t n = std::size_t{1} << 26;  // 256 MiB per vector: far larger than L2
    gpucmp::device_buffer<float> x(n), y(n);      // random contents, never zeros
    gpucmp::engine eng;

    const gpucmp::measurement m = eng.measure(
        [&](cudaStream_t s) {
          saxpy<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(n, 2.0f, x.data(), y.data());
        },
        gpucmp::mode::hot);

    gpucmp::work w;
    w.bytes_read = 2.0 * n * sizeof(float);
    w.bytes_written = 1.0 * n * sizeof(float);
    const gpucmp::rates r = gpucmp::rates_for(w, m.gpu.median);
    std::printf("%s: saxpy over %zu floats, %s mode\n", eng.device().name.c_str(), n, gpucmp::to_string(m.timing_mode));
    std::printf("  median %.2f us  (min %.2f, p90 %.2f, noise %.2f%%, %zu samples x %zu launches, %s)\n",
                m.gpu.median * 1e6, m.gpu.min * 1e6, m.gpu.p90 * 1e6, 100 * m.gpu.relative_noise, m.gpu.count, m.batch,
                gpucmp::to_string(m.stopped_by));
    std::printf("  %.0f GB/s (bytes read + written)\n", r.bytes_per_s * 1e-9);
    for (const auto& warning : m.warnings) std::printf("  warning: %s\n", warning.c_str());
    return 0;
  } catch (const gpucmp::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
