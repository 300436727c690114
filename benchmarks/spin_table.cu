// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The spin-kernel table: how close each timing method gets to a kernel of known duration.
// Kernels spin for 2 / 10 / 100 / 1000 us on %globaltimer; each is read with one event pair
// around one launch (what naive harnesses do), with gpucmp's cold, hot and graph modes, and
// (when built with CUPTI) with kernel mode, whose traced event time shows the tracing overhead.
//   spin_table [--out DIR]    prints a markdown table; with --out also writes
//                             DIR/spin_table.json and DIR/spin_table.md
#include <gpucmp/core.hpp>
#include <gpucmp/kernels/spin.cuh>
#if GPUCMP_WITH_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>
#endif

#include <stdexcept>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

__global__ void empty_kernel() {}

// The stream's kernel-to-kernel gap: per-launch time of an empty kernel in a batch.
struct gaps {
  double hot_s;
  double graph_s;
};

gaps measure_gaps(gpucmp::engine& eng) {
  auto empty = [](cudaStream_t s) {
    empty_kernel<<<1, 1, 0, s>>>();
    GPUCMP_CUDA_CHECK_LAST("empty_kernel<<<1, 1>>>");
  };
  return {eng.measure(empty, gpucmp::mode::hot).gpu.median, eng.measure(empty, gpucmp::mode::graph).gpu.median};
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file) throw std::runtime_error("cannot write " + path);
}

// One event pair around one launch, after a short warm-up: the reading naive harnesses report.
gpucmp::summary naive_reading(gpucmp::engine& eng, double nominal_s) {
  for (int i = 0; i < 3; ++i) gpucmp::kernels::launch_spin(eng.stream(), nominal_s);
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(eng.stream()));
  gpucmp::event start, stop;
  std::vector<double> samples;
  for (int i = 0; i < 50; ++i) {
    start.record(eng.stream());
    gpucmp::kernels::launch_spin(eng.stream(), nominal_s);
    stop.record(eng.stream());
    stop.synchronize();
    samples.push_back(gpucmp::elapsed_s(start, stop));
  }
  return gpucmp::summarize(samples);
}

struct row {
  double nominal_s;
  gpucmp::summary naive;
  gpucmp::measurement cold, hot, graph, kernel;  // kernel: status unsupported without CUPTI
};

std::string cell(double measured_s, double nominal_s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f (%+.1f%%)", measured_s * 1e6, 100.0 * (measured_s / nominal_s - 1.0));
  return buf;
}

std::string markdown(const gpucmp::device_info& d, const std::vector<row>& rows, const gaps& gap) {
  std::ostringstream md;
  md << "Spin kernels on " << d.name << " (" << d.sm_count << " SMs, driver " << gpucmp::cuda_version_string(d.driver_version)
     << ", runtime " << gpucmp::cuda_version_string(d.runtime_version) << "): median us per launch (excess over nominal)\n\n";
  md << "| nominal us | naive: 1 event pair, 1 launch | cold | hot | graph | kernel (CUPTI) | hot batch | graph batch |\n";
  md << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    md << "| " << r.nominal_s * 1e6 << " | " << cell(r.naive.median, r.nominal_s) << " | "
       << cell(r.cold.gpu.median, r.nominal_s) << " | " << cell(r.hot.gpu.median, r.nominal_s) << " | "
       << cell(r.graph.gpu.median, r.nominal_s) << " | "
       << (r.kernel.ok() ? cell(r.kernel.gpu.median, r.nominal_s) : gpucmp::to_string(r.kernel.status)) << " | "
       << r.hot.batch << " | " << r.graph.batch << " |\n";
  }
  if (!rows.empty() && rows.front().kernel.ok()) {
    md << "\nTracing overhead: event-timed µs per launch in hot mode, untraced and while kernel mode traces "
          "(same batching):\n\n| nominal us | hot | hot while tracing | overhead |\n|---|---|---|---|\n";
    for (const auto& r : rows) {
      const double traced = r.kernel.kernels->traced_event.median;
      char line[160];
      std::snprintf(line, sizeof line, "| %g | %.2f | %.2f | %+.2f us |\n", r.nominal_s * 1e6, r.hot.gpu.median * 1e6,
                    traced * 1e6, (traced - r.hot.gpu.median) * 1e6);
      md << line;
    }
  } else if (!rows.empty()) {
    md << "\nKernel mode: " << rows.front().kernel.message << "\n";
  }
  char line[200];
  std::snprintf(line, sizeof line,
                "\nStream kernel-to-kernel gap (per-launch time of an empty kernel): %.2f us in hot mode, %.2f us in "
                "graph mode.\n",
                gap.hot_s * 1e6, gap.graph_s * 1e6);
  md << line;
  return md.str();
}

void write_summary(std::ostream& js, const char* key, const gpucmp::summary& s) {
  js << "\"" << key << "\": {\"median_s\": " << s.median << ", \"mean_s\": " << s.mean << ", \"min_s\": " << s.min
     << ", \"max_s\": " << s.max << ", \"p10_s\": " << s.p10 << ", \"p90_s\": " << s.p90 << ", \"p99_s\": " << s.p99
     << ", \"relative_noise\": " << s.relative_noise << ", \"samples\": " << s.count << "}";
}

void write_measurement(std::ostream& js, const char* key, const gpucmp::measurement& m) {
  js << "\"" << key << "\": {\"batch\": " << m.batch << ", \"launches\": " << m.launches << ", \"stream_held\": "
     << (m.stream_held ? "true" : "false") << ", \"stopped_by\": \"" << gpucmp::to_string(m.stopped_by) << "\", ";
  write_summary(js, "gpu", m.gpu);
  js << "}";
}

std::string json(const gpucmp::device_info& d, const std::vector<row>& rows, const gaps& gap) {
  std::ostringstream js;
  js.precision(9);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  js << "{\n  \"benchmark\": \"spin_table\",\n  \"gpucmp_version\": \"" << gpucmp::version_string << "\",\n  \"date\": \""
     << date << "\",\n  \"gpu\": {\"name\": \"" << d.name << "\", \"uuid\": \"" << d.uuid
     << "\", \"compute_capability\": \"" << d.compute_capability() << "\", \"sm_count\": " << d.sm_count
     << ", \"l2_bytes\": " << d.l2_bytes << ", \"sm_clock_max_mhz\": " << d.sm_clock_max_hz * 1e-6
     << ", \"cuda_driver\": \"" << gpucmp::cuda_version_string(d.driver_version) << "\", \"cuda_runtime\": \""
     << gpucmp::cuda_version_string(d.runtime_version) << "\"},\n  \"empty_kernel_gap_s\": {\"hot\": " << gap.hot_s
     << ", \"graph\": " << gap.graph_s << "},\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    js << "    {\"nominal_s\": " << r.nominal_s << ", ";
    write_summary(js, "naive", r.naive);
    js << ", ";
    write_measurement(js, "cold", r.cold);
    js << ", ";
    write_measurement(js, "hot", r.hot);
    js << ", ";
    write_measurement(js, "graph", r.graph);
    if (r.kernel.ok()) {
      js << ", ";
      write_measurement(js, "kernel", r.kernel);
      js << ", \"kernel_traced_event_median_s\": " << r.kernel.kernels->traced_event.median;
    }
    js << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  js << "  ]\n}\n";
  return js.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--out DIR]\n", argv[0]);
      return 1;
    }
  }
  if (const std::string why = gpucmp::no_device_reason(); !why.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 77;
  }
  try {
    gpucmp::engine eng;
    std::vector<row> rows;
    for (const double nominal_s : {2e-6, 10e-6, 100e-6, 1e-3}) {
      auto spin = [nominal_s](cudaStream_t s) { gpucmp::kernels::launch_spin(s, nominal_s); };
      row r{nominal_s,
            naive_reading(eng, nominal_s),
            eng.measure(spin, gpucmp::mode::cold),
            eng.measure(spin, gpucmp::mode::hot),
            eng.measure(spin, gpucmp::mode::graph),
            eng.try_measure(spin, gpucmp::mode::kernel)};
      if (r.kernel.status == gpucmp::result_status::failed) throw gpucmp::error(r.kernel.message);
      rows.push_back(std::move(r));
    }
    const gaps gap = measure_gaps(eng);
    const std::string table = markdown(eng.device(), rows, gap);
    if (!out_dir.empty()) {
      write_file(out_dir + "/spin_table.json", json(eng.device(), rows, gap));
      write_file(out_dir + "/spin_table.md", table);
    }
    std::printf("%s", table.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
