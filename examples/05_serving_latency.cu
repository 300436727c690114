// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 5: serving latency. One request is a verified FP16 GEMM the size of a transformer
// projection at 256 tokens (8192 x 256 x 8192). Requests arrive back to back (closed loop),
// at a fixed rate, or as a Poisson process, at a share of what the GPU can serve; the table
// gives each pattern's latency distribution (due -> seen complete) next to the GPU's own time.
// Prints markdown; exits 77 without a GPU.
#include <gpucmp/core.hpp>
#include <gpucmp/ops/gemm.cuh>

#include <cstdio>

int main() {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::printf("no CUDA device: %s\n", why.c_str());
    return 77;
  }
  try {
    gpucmp::stream s;
    gpucmp::gemm_problem p;
    p.m = 8192;
    p.n = 256;
    p.k = 8192;
    p.dtype = gpucmp::numerics::fp16;
    gpucmp::gemm request(p, {}, s.get());
    gpucmp::prepare_verified(request);  // the searched algorithm, its output checked

    gpucmp::serving_options closed;
    closed.requests = 2000;
    const gpucmp::serving_result base = gpucmp::serve(request, closed);
    const double capacity = 1.0 / base.service.p50;  // requests per second the GPU can serve

    std::printf("# Serving latency: %s on %s\n\n", request.name().c_str(), gpucmp::query_current_device().name.c_str());
    std::printf("Capacity (1 / median GPU time): %.0f requests/s. Latency = due -> seen complete by the host.\n\n", capacity);
    std::printf("| pattern | offered /s | achieved /s | GPU time p50 µs | latency p50 µs | p90 | p99 | p99.9 | max | jitter p99/p50 |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    auto row = [](const char* name, const gpucmp::serving_result& r) {
      std::printf("| %s | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", name, r.offered_per_s,
                  r.achieved_per_s, r.service.p50 * 1e6, r.latency.p50 * 1e6, r.latency.p90 * 1e6, r.latency.p99 * 1e6,
                  r.latency.p999 * 1e6, r.latency.max * 1e6, r.latency.jitter);
    };
    row("closed loop", base);
    for (double load : {0.5, 0.9}) {
      for (auto pattern : {gpucmp::arrival_pattern::fixed_rate, gpucmp::arrival_pattern::poisson}) {
        gpucmp::serving_options o;
        o.pattern = pattern;
        o.rate_per_s = load * capacity;
        o.requests = 2000;
        char name[64];
        std::snprintf(name, sizeof name, "%s at %.0f%% load", gpucmp::to_string(pattern), load * 100);
        row(name, gpucmp::serve(request, o));
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "05_serving_latency: %s\n", e.what());
    return 1;
  }
}
