// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Spec comparisons from the database, like the comparison articles' tables but with dense
// figures, sources and confidence — and the articles' wrong figures flagged.
#pragma once

#include "model.hpp"
#include "render.hpp"

#include <gpucmp/specs/specs.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_report {

/// The GPUs named by keys or device names; throws input_error naming an unknown one.
inline std::vector<gpucmp::gpu_profile> resolve_gpus(const std::vector<std::string>& names) {
  std::vector<gpucmp::gpu_profile> gpus;
  for (const auto& n : names) {
    auto g = gpucmp::find_spec_by_key(n);
    if (!g) g = gpucmp::find_spec_by_device_name(n);
    if (!g) throw input_error("unknown GPU '" + n + "' (see docs/gpu-database.md for the keys)");
    gpus.push_back(*g);
  }
  return gpus;
}

inline std::string render_specs_markdown(const std::vector<gpucmp::gpu_profile>& gpus, bool with_errata) {
  std::ostringstream md;
  const auto& rows = gpucmp::specs_data::gpus;
  auto row_of = [&](const gpucmp::gpu_profile& g) -> const gpucmp::gpu_spec& {
    for (const auto& s : rows)
      if (g.key == s.key) return s;
    return rows[0];
  };
  // Datasheet figures as printed (59.35, 989.5, 132), not rounded.
  auto value = [](double v, const char* unit) {
    if (!std::isfinite(v)) return std::string("—");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf) + unit;
  };
  md << "# GPU specifications (dense tensor peaks, no sparsity)\n\n| |";
  for (const auto& g : gpus) md << " " << g.name << (g.trust == gpucmp::confidence::low ? " ⚠" : "") << " |";
  const bool ratio = gpus.size() == 2;
  if (ratio) md << " " << gpus[0].key << " / " << gpus[1].key << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i < gpus.size() + (ratio ? 1 : 0); ++i) md << "---|";
  md << "\n";
  auto line = [&](const std::string& field, auto text_of, auto number_of) {
    md << "| " << field << " |";
    for (const auto& g : gpus) md << " " << text_of(g) << " |";
    if (ratio) {
      const double a = number_of(gpus[0]), b = number_of(gpus[1]);
      md << " " << (std::isfinite(a) && std::isfinite(b) && b > 0 ? "×" + fixed(a / b, 2) : "") << " |";
    }
    md << "\n";
  };
  auto none = [](const gpucmp::gpu_profile&) { return NAN; };
  line("architecture", [](const auto& g) { return g.architecture; }, none);
  line("compute capability", [](const auto& g) { return std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor); }, none);
  line("SMs", [&](const auto& g) { return value(g.sm_count, ""); }, [](const auto& g) { return g.sm_count; });
  line("memory", [&](const auto& g) { return value(g.memory_gb, " GB ") + row_of(g).memory_type; },
       [](const auto& g) { return g.memory_gb; });
  line("bandwidth", [&](const auto& g) { return value(g.memory_bandwidth_gbs, " GB/s"); },
       [](const auto& g) { return g.memory_bandwidth_gbs; });
  line("L2", [&](const auto& g) { return value(g.l2_mb, " MB"); }, [](const auto& g) { return g.l2_mb; });
  const std::pair<gpucmp::precision, const char*> peaks[] = {
      {gpucmp::precision::fp64, "FP64 TFLOP/s"}, {gpucmp::precision::fp32, "FP32 TFLOP/s"},
      {gpucmp::precision::tf32, "TF32 tensor TFLOP/s"}, {gpucmp::precision::fp16, "FP16 tensor TFLOP/s"},
      {gpucmp::precision::bf16, "BF16 tensor TFLOP/s"}, {gpucmp::precision::fp8, "FP8 tensor TFLOP/s"},
      {gpucmp::precision::int8, "INT8 tensor TOP/s"}};
  for (const auto& [p, label] : peaks) {
    const auto idx = static_cast<std::size_t>(p);
    line(label, [&](const auto& g) { return value(g.peak_tflops[idx], ""); }, [&](const auto& g) { return g.peak_tflops[idx]; });
  }
  line("TDP", [&](const auto& g) { return value(g.tdp_w, " W"); }, [](const auto& g) { return g.tdp_w; });
  line("MIG instances", [&](const auto& g) { return value(row_of(g).mig_instances, ""); }, none);
  line("NVLink", [&](const auto& g) { return row_of(g).nvlink_gbs > 0 ? value(row_of(g).nvlink_gbs, " GB/s") : "none"; }, none);
  line("PCIe", [&](const auto& g) { return "Gen" + value(row_of(g).pcie_gen, ""); }, none);
  line("confidence", [](const auto& g) { return std::string(gpucmp::to_string(g.trust)); }, none);
  line("sources", [](const auto& g) { return g.sources; }, none);
  md << "\n— = no authoritative figure, or no such unit. Sources: docs/gpu-database.md.\n";
  if (with_errata) {
    md << "\n## What the comparison articles got wrong\n\n| article | GPU | figure | article says | correct | verdict |\n"
          "|---|---|---|---|---|---|\n";
    std::size_t count = 0;
    for (const auto& g : gpus) {
      for (const auto& e : gpucmp::errata_for(g.key)) {
        md << "| " << e.article << " | " << g.name << " | " << e.field << " | ⚠ " << e.claimed << " | " << e.correct << " | "
           << e.verdict << " |\n";
        ++count;
      }
    }
    if (count == 0) md << "| | | | none for these GPUs | | |\n";
  }
  return md.str();
}

}  // namespace gpucmp_report
