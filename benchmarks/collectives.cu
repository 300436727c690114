// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NCCL collectives over every visible GPU in one process, as nccl-tests measures them
// (multigpu/nccl_collective.cuh): each call verified on every rank before it is timed, timed
// by the engine across ranks (forked from and joined to its stream), in hot mode and as a
// CUDA graph. Names:
//   <collective>/nccl/<type>/<bytes>/<in_place|out_of_place>/<mode>
// with bytes as nccl-tests' -b/-e sizes (the whole array for all-gather, reduce-scatter and
// all-to-all); counters algbw_GBps and busbw_GBps (nccl-tests' factors; n/a, not written,
// with one rank) and ranks.
//   collectives [--collectives=all_reduce,...] [--types=fp32] [--min_bytes=8] [--max_bytes=8589934592]
//               [--factor=2] [--placements=out_of_place,in_place] [benchmark flags]
// A size that does not fit is a typed out-of-memory row; the rows before it stay.
#include "program_flags.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/multigpu/collective_math.hpp>
#include <gpucmp/multigpu/communicator.hpp>
#include <gpucmp/multigpu/nccl_collective.cuh>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct settings {
  std::vector<gpucmp::collective> collectives{gpucmp::collective::all_reduce, gpucmp::collective::all_gather,
                                              gpucmp::collective::reduce_scatter};
  std::vector<gpucmp::nccl_dtype> types{gpucmp::nccl_dtype::fp32};
  std::size_t min_bytes = 8, max_bytes = std::size_t{8} << 30, factor = 2;
  std::vector<bool> in_place{false, true};
};

settings& config() {
  static settings s;
  return s;
}

// The process's group (built on first use, when a benchmark runs on a GPU).
const gpucmp::communicator_group& group() {
  static const gpucmp::communicator_group g = gpucmp::communicator_group::all_visible();
  return g;
}

void run_collective(gpucmp::state& st, gpucmp::collective c, gpucmp::nccl_dtype t, std::size_t bytes, bool in_place) {
  gpucmp::nccl_collective_options o;
  o.in_place = in_place;
  gpucmp::nccl_collective op(group(), c, bytes, t, o);
  gpucmp::require_passed(op.name(), op.verify(st.stream()));
  st.set_work(op.work());
  st.add_note(std::to_string(group().ranks()) + " rank(s), every output element checked");
  st.run(op);
  const gpucmp::measurement* m = st.result();
  if (m == nullptr || !m->ok()) return;
  const gpucmp::collective_rates rates = gpucmp::rates_for(op.size(), m->gpu.median);
  auto& counters = st.gbench().counters;
  counters["ranks"] = group().ranks();
  counters["algbw_GBps"] = rates.algbw / 1e9;
  if (std::isfinite(rates.busbw)) counters["busbw_GBps"] = rates.busbw / 1e9;  // n/a with one rank
  gpucmp::require_passed(op.name() + " after timing", op.verify(st.stream()));
}

void register_all() {
  for (gpucmp::collective c : config().collectives)
    for (gpucmp::nccl_dtype t : config().types)
      for (std::size_t bytes : gpucmp::size_sweep(config().min_bytes, config().max_bytes, config().factor))
        for (bool in_place : config().in_place) {
          if (in_place && (c == gpucmp::collective::all_to_all || c == gpucmp::collective::send_recv)) continue;
          const std::string name = std::string(gpucmp::to_string(c)) + "/nccl/" + gpucmp::to_string(t) + "/" + std::to_string(bytes) +
                                   "/" + (in_place ? "in_place" : "out_of_place");
          gpucmp::register_benchmark(name, [c, t, bytes, in_place](gpucmp::state& st) { run_collective(st, c, t, bytes, in_place); },
                                     {gpucmp::mode::hot, gpucmp::mode::graph});
        }
}

void parse_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) { return gpucmp_bench::flag_value(argv[i], flag); };
    if (const char* v = value("--collectives=")) {
      config().collectives.clear();
      for (const auto& c : gpucmp_bench::split_list(v)) config().collectives.push_back(gpucmp::parse_collective(c));
    } else if (const char* v = value("--types=")) {
      config().types.clear();
      for (const auto& t : gpucmp_bench::split_list(v)) config().types.push_back(gpucmp::parse_nccl_dtype(t));
    } else if (const char* v = value("--min_bytes=")) {
      config().min_bytes = std::stoull(v);
    } else if (const char* v = value("--max_bytes=")) {
      config().max_bytes = std::stoull(v);
    } else if (const char* v = value("--factor=")) {
      config().factor = std::stoull(v);
    } else if (const char* v = value("--placements=")) {
      config().in_place.clear();
      for (const auto& p : gpucmp_bench::split_list(v)) {
        if (p != "in_place" && p != "out_of_place") throw gpucmp::invalid_argument("collectives: unknown placement '" + p + "'");
        config().in_place.push_back(p == "in_place");
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  gpucmp::size_sweep(config().min_bytes, config().max_bytes, config().factor);  // a bad sweep is refused now
}

}  // namespace

int main(int argc, char** argv) {
  try {
    parse_flags(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectives: %s\n", e.what());
    return 2;
  }
  register_all();
  return gpucmp::benchmark_main(argc, argv);
}
