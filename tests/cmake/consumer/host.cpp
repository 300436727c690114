// Host-only use of the engine: times a device-to-device copy, with events and with per-kernel
// timestamps (kernel mode); no nvcc involved.
#include <gpucmp/core.hpp>
#include <gpucmp/measure/kernel_trace.hpp>

#include <cstdio>

int main() {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  try {
  gpucmp::device_buffer<float> in(1 << 24), out(1 << 24, gpucmp::initial_fill::uninitialized());
  gpucmp::engine eng;
  auto copy = [&](cudaStream_t s) {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(out.data(), in.data(), in.bytes(), cudaMemcpyDeviceToDevice, s));
  };
  for (auto mode : {gpucmp::mode::hot, gpucmp::mode::kernel}) {
    const gpucmp::measurement m = eng.measure(copy, mode);
    std::printf("copy of %zu MiB, %s mode: median %.2f us, %.0f GB/s (%zu samples, noise %.2f%%)\n", in.bytes() >> 20,
                gpucmp::to_string(mode), m.gpu.median * 1e6, 2.0 * in.bytes() / m.gpu.median * 1e-9, m.gpu.count,
                100 * m.gpu.relative_noise);
    if (m.kernels && !m.kernels->kernels.empty()) std::printf("  traced: %s\n", m.kernels->kernels.front().name.c_str());
  }
  return 0;
  } catch (const gpucmp::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
