// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 7: the comparison articles' ResNet-50 table, done correctly. For batch 16, 32 and 64
// (the articles' batches) it builds ResNet-50 v1.5, verifies every layer, times the forward
// pass as a replayed CUDA graph with events after warm-up, and projects the time onto an
// A100 80GB SXM and an L20 layer by layer (each layer's measured time scaled on the roofline
// of the target's datasheet, models/network.cuh + projection.hpp); the first batch that no
// longer fits each GPU's memory is the OOM cell, from the network's memory plan.
//   07_resnet50_table [fp16|bf16|tf32|fp32] [BATCH...]   (default batches: 16 32 64)
// Prints markdown; exits 77 without a GPU, 1 on an error (a bad batch is named).
#include <gpucmp/specs/device_specs.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/network_memory.hpp>
#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/specs/projection.hpp>
#include <gpucmp/specs/specs.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// Sum over layers of each layer's projection (a layer that was not timed, such as pooling, is
// projected from its bytes at the target's bandwidth with the default efficiency).
double project_network(const gpucmp::network& net, const gpucmp::gpu_profile& here, const gpucmp::gpu_profile& target) {
  double seconds = 0;
  for (const gpucmp::layer_report& l : net.layers()) {
    gpucmp::work w;
    w.flops = l.flops;
    w.bytes_read = l.bytes;
    w.arithmetic = l.flops > 0 ? gpucmp::peak_precision(net.options().dtype) : gpucmp::precision::none;
    if (l.searched_seconds > 0) {
      const gpucmp::projection p = gpucmp::project(w, l.searched_seconds, here, target);
      if (p.status != gpucmp::projection_status::projected) return -1;
      seconds += p.seconds;
    } else {
      seconds += l.bytes / (target.bandwidth_bytes_per_s() * gpucmp::efficiency{}.memory);
    }
  }
  return seconds;
}

std::string cell(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", ms);
  return ms > 0 ? text : "n/a";
}

}  // namespace

int main(int argc, char** argv) {
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::printf("07_resnet50_table: %s\n", why.c_str());
    return 77;
  }
  try {
    const gpucmp::numerics dtype = argc > 1 ? gpucmp::parse_numerics(argv[1]) : gpucmp::numerics::fp16;
    std::vector<std::int64_t> batches;
    for (int i = 2; i < argc; ++i) {
      char* end = nullptr;
      const long long b = std::strtoll(argv[i], &end, 10);
      if (end == argv[i] || *end != '\0' || b < 1) throw gpucmp::invalid_argument(std::string("batch '") + argv[i] + "' is not a positive integer");
      batches.push_back(b);
    }
    if (batches.empty()) batches = {16, 32, 64};  // the articles' batches
    const gpucmp::network_definition def = gpucmp::resnet50_random(1);
    gpucmp::engine eng;
    const gpucmp::gpu_profile here = gpucmp::spec_for_device(gpucmp::facts_of(eng.device()));
    const gpucmp::gpu_profile a100 = *gpucmp::find_spec_by_key("a100_80gb_sxm");
    const gpucmp::gpu_profile l20 = *gpucmp::find_spec_by_key("l20");
    std::printf("ResNet-50 v1.5 inference, %s, on %s: every layer verified against an FP64 reference, then the forward\n"
                "pass timed as a replayed CUDA graph with CUDA events after warm-up (median). A100 and L20 columns are\n"
                "projections: each layer's measured time moved along the roofline of the target's datasheet.\n\n",
                gpucmp::to_string(dtype), eng.device().name.c_str());
    std::printf("| batch | ms on this GPU | images/s | ms projected on %s | ms projected on %s |\n|---|---|---|---|---|\n",
                a100.name.c_str(), l20.name.c_str());
    for (std::int64_t batch : batches) {
      gpucmp::network_options o;
      o.batch = batch;
      o.dtype = dtype;
      gpucmp::network net(def, o, eng.stream());
      const gpucmp::measurement m = eng.measure(net, gpucmp::mode::graph);
      if (!m.ok()) throw gpucmp::error("measurement failed: " + m.message);
      auto fits = [&](const gpucmp::gpu_profile& g, double ms) {
        const double needed = double(gpucmp::plan_network_memory(def, batch, dtype).total(gpucmp::network_workspace_reserve));
        return needed > g.memory_gb * 1e9 ? std::string("OOM") : cell(ms);
      };
      std::printf("| %lld | %.2f | %.0f | %s | %s |\n", static_cast<long long>(batch), m.gpu.median * 1e3, double(batch) / m.gpu.median,
                  fits(a100, project_network(net, here, a100) * 1e3).c_str(), fits(l20, project_network(net, here, l20) * 1e3).c_str());
    }
    // The OOM cell: the first batch that does not fit, here and on each projected GPU.
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    std::printf("\nLargest batch that fits (parameters + activations after buffer reuse + %zu MiB workspace): this GPU %lld "
                "(%.1f GiB free), %s %lld, %s %lld; one more is a typed out-of-memory result.\n",
                gpucmp::network_workspace_reserve >> 20,
                static_cast<long long>(gpucmp::largest_batch_that_fits(def, dtype, free_bytes)), double(free_bytes) / (1ull << 30),
                a100.name.c_str(), static_cast<long long>(gpucmp::largest_batch_that_fits(def, dtype, std::size_t(a100.memory_gb * 1e9))),
                l20.name.c_str(), static_cast<long long>(gpucmp::largest_batch_that_fits(def, dtype, std::size_t(l20.memory_gb * 1e9))));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "07_resnet50_table: %s\n", e.what());
    return 1;
  }
}
