// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 6: throughput under concurrency. N copies of a workload, each with its own buffers
// on its own stream, launched together: aggregate throughput against one copy, and how much
// slower each launch gets. A small GEMM (batch-16 projection) leaves most SMs idle, so copies
// overlap; an 8192^3 GEMM fills the GPU, so they only queue. This is the trade MIG partitions
// and multi-model serving make. Prints markdown; exits 77 without a GPU.
#include <gpucmp/core.hpp>
#include <gpucmp/ops/gemm.cuh>

#include <cstdio>
#include <memory>

int main() {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::printf("no CUDA device: %s\n", why.c_str());
    return 77;
  }
  try {
    std::printf("# Throughput under concurrency on %s\n\n", gpucmp::query_current_device().name.c_str());
    for (std::int64_t size : {std::int64_t{16}, std::int64_t{8192}}) {
      gpucmp::gemm_problem p;
      p.m = p.k = 4096;
      p.n = size;
      if (size == 8192) p.m = p.k = 8192;
      p.dtype = gpucmp::numerics::fp16;
      // One verified GEMM per stream; the heuristic's choice, so every copy runs the same kernel.
      auto make = [&](std::size_t) {
        gpucmp::gemm_options o;
        o.choice = gpucmp::algorithm_choice::heuristic;
        auto g = std::make_shared<gpucmp::gemm>(p, o);
        gpucmp::prepare_verified(*g);  // the heuristic's choice (its options), its output checked
        return [g](cudaStream_t s) { (*g)(s); };
      };
      const std::size_t launches = size == 8192 ? 40 : 400;
      std::printf("## %s, %zu launches per stream\n\n", ("gemm/cublaslt/fp16/" + p.shape_name()).c_str(), launches);
      std::printf("| streams | aggregate launches/s | × one stream | per-launch p50 µs | p99 µs |\n|---|---|---|---|---|\n");
      double one = 0;
      for (std::size_t streams : {1, 2, 4, 8}) {
        const gpucmp::concurrency_result r = gpucmp::run_concurrent(make, streams, launches);
        if (streams == 1) one = r.aggregate_per_s;
        std::printf("| %zu | %.0f | %.2f | %.1f | %.1f |\n", streams, r.aggregate_per_s, r.aggregate_per_s / one,
                    r.all_launches.p50 * 1e6, r.all_launches.p99 * 1e6);
      }
      std::printf("\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "06_concurrency: %s\n", e.what());
    return 1;
  }
}
