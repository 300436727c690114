// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Kernel mode on a library call: a cuBLAS BF16 GEMM (FP32 accumulate), verified against a
// double-precision reference on sampled elements, then measured in kernel mode (CUPTI
// timestamps, with its breakdown) and in graph mode (events).
//   gemm_kernel_mode [--size N] [--out DIR]   measure; prints a table, writes DIR/gemm_kernel_mode.json
//   gemm_kernel_mode --plain COUNT [--size N] launch the GEMM COUNT times, synchronizing after each,
//                                             with no tracing: for Nsight Compute, which cannot profile
//                                             a process that traces with CUPTI itself
#include <gpucmp/core.hpp>
#include <gpucmp/measure/kernel_trace.hpp>

#include "cublas_gemm.hpp"
#include "program_flags.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>


int main(int argc, char** argv) {
  int size = 8192, plain = 0;
  std::string out_dir;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--size" && i + 1 < argc) {
        size = int(gpucmp_bench::whole_number(argv[++i], 1, 1 << 16, "gemm_kernel_mode", "--size"));
      } else if (arg == "--plain" && i + 1 < argc) {
        plain = int(gpucmp_bench::whole_number(argv[++i], 1, 1 << 20, "gemm_kernel_mode", "--plain"));
      } else if (arg == "--out" && i + 1 < argc) {
        out_dir = argv[++i];
      } else {
        std::fprintf(stderr, "usage: %s [--size N] [--out DIR] | --plain COUNT [--size N]\n", argv[0]);
        return 1;
      }
    }
  } catch (const gpucmp::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  try {
    gpucmp::stream stream;
    gpucmp_bench::square_gemm<__nv_bfloat16> gemm(size);
    gemm.verify(stream.get());
    if (plain > 0) {
      for (int i = 0; i < plain; ++i) {
        gemm(stream.get());
        stream.synchronize();
      }
      std::printf("launched %d verified BF16 GEMMs of %d^3\n", plain, size);
      return 0;
    }
    gpucmp::engine eng;
    const auto kernel = eng.measure(gemm, gpucmp::mode::kernel);
    const auto graph = eng.measure(gemm, gpucmp::mode::graph);
    const auto& k = *kernel.kernels;
    std::ostringstream md;
    md << "BF16 GEMM " << size << "^3 (cuBLAS, FP32 accumulate, verified) on " << eng.device().name << "\n\n";
    md << "| measure | median us | TFLOP/s | samples |\n|---|---|---|---|\n";
    auto row = [&](const char* what, double s, std::size_t n) {
      char line[160];
      std::snprintf(line, sizeof line, "| %s | %.2f | %.1f | %zu |\n", what, s * 1e6, gemm.work(gpucmp::precision::bf16).flops / s * 1e-12, n);
      md << line;
    };
    row("kernel mode: busy (sum of kernel durations)", kernel.gpu.median, kernel.gpu.count);
    row("kernel mode: span", k.span.median, k.span.count);
    row("kernel mode: event time while tracing", k.traced_event.median, k.traced_event.count);
    row("graph mode (events)", graph.gpu.median, graph.gpu.count);
    md << "\nKernels per GEMM:\n\n| kernel | per launch | median us | share |\n|---|---|---|---|\n";
    for (const auto& s : k.kernels) {
      char line[512];
      std::snprintf(line, sizeof line, "| `%s` | %g | %.2f | %.1f%% |\n", s.name.c_str(), s.per_launch, s.median_s * 1e6,
                    100 * s.share);
      md << line;
    }
    std::printf("%s", md.str().c_str());
    if (!out_dir.empty()) {
      std::ofstream json(out_dir + "/gemm_kernel_mode.json");
      json.precision(9);
      json << "{\"gpu\": \"" << eng.device().name << "\", \"size\": " << size << ", \"kernel_busy_median_s\": "
           << kernel.gpu.median << ", \"kernel_busy_min_s\": " << kernel.gpu.min << ", \"kernel_span_median_s\": "
           << k.span.median << ", \"traced_event_median_s\": " << k.traced_event.median
           << ", \"graph_median_s\": " << graph.gpu.median << ", \"kernel_names\": [";
      for (std::size_t i = 0; i < k.kernels.size(); ++i) json << (i ? ", " : "") << "\"" << k.kernels[i].name << "\"";
      json << "]}\n";
      std::ofstream(out_dir + "/gemm_kernel_mode.md") << md.str();
      if (!json) throw std::runtime_error("cannot write " + out_dir + "/gemm_kernel_mode.json");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
