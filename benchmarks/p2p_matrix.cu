// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The P2P matrix (multigpu/peer_copy.cuh): for every ordered pair of visible GPUs, copies
// through cudaMemcpyPeerAsync and through a kernel over peer access, one way and both ways,
// at a small size (latency) and a large one (bandwidth), each verified before it is timed.
// Names: p2p/<method>/<from>_<to>/<bytes>/<one_way|both_ways>/hot. With one GPU there is no
// pair: the program says so. --matrix_out writes the large one-way copies as a matrix of GB/s
// (markdown), whether peer access is on for each pair, and how each pair is connected (NVML:
// NVLinks and their version, directly or through NVSwitch, or the PCIe path).
//   p2p_matrix [--sizes=4096,1073741824] [--matrix_out=p2p.md] [benchmark flags]
#include "program_flags.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/multigpu/peer_copy.cuh>
#include <gpucmp/multigpu/topology.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

struct settings {
  std::vector<std::size_t> sizes{4096, std::size_t{1} << 30};
  std::string matrix_out;
};

settings& config() {
  static settings s;
  return s;
}

// GB/s of each large one-way copy, by method and pair, for the matrix.
std::map<std::pair<std::string, std::pair<int, int>>, double>& bandwidths() {
  static std::map<std::pair<std::string, std::pair<int, int>>, double> m;
  return m;
}

void run_copy(gpucmp::state& st, int from, int to, std::size_t bytes, gpucmp::peer_method method, bool both) {
  // The row's axes: the report's heat map reads its pairs and sizes from them.
  st.set_axis("method", gpucmp::to_string(method));
  st.set_axis("from", from);
  st.set_axis("to", to);
  st.set_axis("direction", both ? "both_ways" : "one_way");
  st.set_axis("bytes", double(bytes));
  st.set_sweep_axis("bytes");
  st.set_provider(method == gpucmp::peer_method::memcpy_peer ? "CUDA runtime" : "gpucmp kernel");
  gpucmp::peer_copy copy(from, to, bytes, method, both);
  gpucmp::require_passed(copy.name(), copy.verify(st.stream()));
  st.set_work(copy.work());
  st.run(copy);
  const gpucmp::measurement* m = st.result();
  if (m != nullptr && m->ok() && !both && bytes == config().sizes.back()) {
    bandwidths()[{gpucmp::to_string(method), {from, to}}] = copy.work().bytes_read / m->gpu.median / 1e9;
  }
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void register_all(int devices) {
  for (int a = 0; a < devices; ++a)
    for (int b = 0; b < devices; ++b) {
      if (a == b) continue;
      for (gpucmp::peer_method method : {gpucmp::peer_method::memcpy_peer, gpucmp::peer_method::copy_kernel})
        for (std::size_t bytes : config().sizes)
          for (bool both : {false, true}) {
            const std::string name = std::string("p2p/") + gpucmp::to_string(method) + "/" + std::to_string(a) + "_" + std::to_string(b) +
                                     "/" + std::to_string(bytes) + "/" + (both ? "both_ways" : "one_way");
            gpucmp::register_benchmark(name, [a, b, bytes, method, both](gpucmp::state& st) { run_copy(st, a, b, bytes, method, both); },
                                       {gpucmp::mode::hot});
          }
    }
}

void write_matrix(int devices) {
  if (config().matrix_out.empty()) return;
  std::ofstream out(config().matrix_out);
  out << "# P2P matrix: one-way copies of " << config().sizes.back() << " bytes, GB/s (row: from, column: to)\n\n";
  if (devices < 2) {
    out << "one GPU: no pair to copy between\n";
    return;
  }
  // The connections first: the bandwidths below read against them.
  out << "\n## connections (NVML)\n\n";
  try {
    std::vector<gpucmp::device_info> infos;
    for (int d = 0; d < devices; ++d) infos.push_back(gpucmp::query_device(d));
    const gpucmp::gpu_topology t = gpucmp::read_gpu_topology(infos);
    out << "| from \\ to |";
    for (int b = 0; b < devices; ++b) out << " " << b << " |";
    out << "\n|---|";
    for (int b = 0; b < devices; ++b) out << "---|";
    out << "\n";
    for (int a = 0; a < devices; ++a) {
      out << "| " << a << " (" << t.bus_ids[std::size_t(a)] << ") |";
      for (int b = 0; b < devices; ++b) out << " " << (a == b ? std::string("–") : t.pairs[std::size_t(a)][std::size_t(b)].text()) << " |";
      out << "\n";
    }
  } catch (const gpucmp::error& e) {
    out << "unknown: " << e.what() << "\n";
  }
  for (const char* method : {"memcpy_peer", "copy_kernel"}) {
    out << "\n## " << method << "\n\n| from \\ to |";
    for (int b = 0; b < devices; ++b) out << " " << b << " |";
    out << "\n|---|";
    for (int b = 0; b < devices; ++b) out << "---|";
    out << "\n";
    for (int a = 0; a < devices; ++a) {
      out << "| " << a << " |";
      for (int b = 0; b < devices; ++b) {
        const auto found = bandwidths().find({method, {a, b}});
        if (a == b) {
          out << " – |";
        } else if (found != bandwidths().end()) {
          char cell[32];
          std::snprintf(cell, sizeof cell, " %.1f |", found->second);
          out << cell;
        } else {
          out << " " << (gpucmp::query_peer_access(a, b).possible ? "not measured" : "peer access off") << " |";
        }
      }
      out << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int kept = 1;
  try {
    for (int i = 1; i < argc; ++i) {
      if (const char* v = gpucmp_bench::flag_value(argv[i], "--sizes=")) {
        config().sizes.clear();
        for (const auto& s : gpucmp_bench::split_list(v)) {
          const long long bytes = gpucmp_bench::whole_number(s, 16, 1LL << 40, "p2p_matrix", "--sizes");
          if (bytes % 16 != 0) throw gpucmp::invalid_argument("p2p_matrix: sizes must be positive multiples of 16, got " + s);
          config().sizes.push_back(std::size_t(bytes));
        }
      } else if (const char* v = gpucmp_bench::flag_value(argv[i], "--matrix_out=")) {
        config().matrix_out = v;
      } else {
        argv[kept++] = argv[i];
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "p2p_matrix: %s\n", e.what());
    return 2;
  }
  const int devices = device_count();
  if (devices == 0) {
    std::printf("p2p_matrix: no CUDA device\n");
    return gpucmp::exit_no_device;
  }
  if (devices == 1) {
    std::printf("p2p_matrix: one GPU: no pair to copy between\n");
    write_matrix(devices);
    return 0;
  }
  register_all(devices);
  const int status = gpucmp::benchmark_main(kept, argv);
  write_matrix(devices);
  return status;
}
