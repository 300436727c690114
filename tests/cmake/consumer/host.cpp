// Host-only use of the engine: times a device-to-device copy; no nvcc involved.
#include <gpucmp/core.hpp>

#include <cstdio>

int main() {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  gpucmp::device_buffer<float> in(1 << 24), out(1 << 24, gpucmp::initial_fill::uninitialized());
  gpucmp::engine eng;
  const gpucmp::measurement m = eng.measure(
      [&](cudaStream_t s) { GPUCMP_CUDA_CHECK(cudaMemcpyAsync(out.data(), in.data(), in.bytes(), cudaMemcpyDeviceToDevice, s)); },
      gpucmp::mode::hot);
  std::printf("copy of %zu MiB: median %.2f us, %.0f GB/s (%zu samples, noise %.2f%%)\n", in.bytes() >> 20,
              m.gpu.median * 1e6, 2.0 * in.bytes() / m.gpu.median * 1e-9, m.gpu.count, 100 * m.gpu.relative_noise);
  return 0;
}
