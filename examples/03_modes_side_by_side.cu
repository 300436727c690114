// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 3: one kernel in cold, hot and graph mode side by side. A read of a buffer that
// fits in L2 is served from L2 in hot and graph mode and from DRAM in cold mode; a read of a
// buffer far larger than L2 costs about the same in every mode.
#include <gpucmp/core.hpp>
#include <gpucmp/kernels/read.cuh>

#include <cstdio>

int main() {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  try {
    gpucmp::engine eng;
    const gpucmp::device_info& d = eng.device();
    const int blocks = 2 * d.sm_count;
    gpucmp::device_buffer<float> partial(static_cast<std::size_t>(blocks), gpucmp::initial_fill::uninitialized());
    std::printf("%s, L2 %.0f MiB\n\n", d.name.c_str(), d.l2_bytes / 1048576.0);
    std::printf("| buffer | mode | median us | min us | p90 us | noise %% | batch | GB/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const std::size_t bytes : {d.l2_bytes / 4, 16 * d.l2_bytes}) {
      const std::size_t floats = bytes / sizeof(float) / 4 * 4;
      gpucmp::device_buffer<float> in(floats);
      auto read = [&](cudaStream_t s) {
        gpucmp::kernels::launch_read_sum(s, reinterpret_cast<const float4*>(in.data()), floats / 4, partial.data(), blocks);
      };
      for (auto m : {gpucmp::mode::cold, gpucmp::mode::hot, gpucmp::mode::graph}) {
        const gpucmp::measurement r = eng.measure(read, m);
        std::printf("| %.1f MiB | %s | %.2f | %.2f | %.2f | %.2f | %zu | %.0f |\n", in.bytes() / 1048576.0,
                    gpucmp::to_string(m), r.gpu.median * 1e6, r.gpu.min * 1e6, r.gpu.p90 * 1e6,
                    100 * r.gpu.relative_noise, r.batch, in.bytes() / r.gpu.median * 1e-9);
      }
    }
    return 0;
  } catch (const gpucmp::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
