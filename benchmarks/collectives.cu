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
//
// One process per GPU (built with gpucmp::mpi), on one node or across nodes:
//   mpirun -np 2 collectives --mpi [--mpi_samples=30] [--mpi_batch=20] [flags as above]
// Rank 0's device is the process's local rank on its node; rank 0 prints and writes the
// results, the others stay silent. Every process takes the same launches (make_lockstep:
// --mpi_samples samples of --mpi_batch calls after 5 warm-up calls), a check that fails on
// any rank fails on all, and the rates come from the slowest rank's median (a collective
// ends when its last rank does).
#include "program_flags.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/multigpu/collective_math.hpp>
#include <gpucmp/multigpu/communicator.hpp>
#include <gpucmp/multigpu/nccl_collective.cuh>
#if GPUCMP_WITH_MPI
#include <gpucmp/multigpu/mpi_world.hpp>
#endif

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
  std::vector<gpucmp::element_type> types{gpucmp::element_type::fp32};
  std::size_t min_bytes = 8, max_bytes = std::size_t{8} << 30, factor = 2;
  std::vector<bool> in_place{false, true};
  bool mpi = false;                          // one process per GPU (--mpi)
  std::size_t mpi_samples = 30, mpi_batch = 20;  // the lockstep under MPI
};

settings& config() {
  static settings s;
  return s;
}

gpucmp::communicator_group make_group() {
#if GPUCMP_WITH_MPI
  if (config().mpi) return gpucmp::communicator_group_from_mpi(MPI_COMM_WORLD);
#endif
  return gpucmp::communicator_group::all_visible();
}

// The process's group (built on first use, when a benchmark runs on a GPU).
const gpucmp::communicator_group& group() {
  static const gpucmp::communicator_group g = make_group();
  return g;
}

// Checks every output of this process's ranks; under MPI a failure on any rank fails all.
void require_verified(gpucmp::nccl_collective& op, cudaStream_t stream, const std::string& what) {
  const gpucmp::verification v = op.verify(stream);
#if GPUCMP_WITH_MPI
  if (config().mpi && !gpucmp::all_ranks_agree(v.passed(), MPI_COMM_WORLD) && v.passed()) {
    throw gpucmp::error(what + ": another rank's outputs failed the check (see its error)");
  }
#endif
  gpucmp::require_passed(what, v);
}

// The median the rates come from: this process's, or under MPI the slowest rank's (NaN when
// any rank has none).
double median_for_rates(const gpucmp::measurement* m) {
  const double mine = m != nullptr && m->ok() ? m->gpu.median : -1.0;
#if GPUCMP_WITH_MPI
  if (config().mpi) {
    const bool all = gpucmp::all_ranks_agree(mine >= 0, MPI_COMM_WORLD);
    const double slowest = gpucmp::max_over_ranks(mine, MPI_COMM_WORLD);
    return all ? slowest : NAN;
  }
#endif
  return mine >= 0 ? mine : NAN;
}

void run_collective(gpucmp::state& st, gpucmp::collective c, gpucmp::element_type t, std::size_t bytes, bool in_place) {
  st.set_axis("collective", gpucmp::to_string(c));
  st.set_axis("dtype", gpucmp::to_string(t));
  st.set_axis("bytes", double(bytes));
  st.set_axis("in_place", in_place ? 1.0 : 0.0);
  st.set_axis("ranks", double(group().ranks()));
  st.set_sweep_axis("bytes");
  st.set_provider("NCCL");
  int nccl_version = 0;
  GPUCMP_NCCL_CHECK(ncclGetVersion(&nccl_version));
  st.add_library("nccl", std::to_string(nccl_version));
  gpucmp::nccl_collective_options o;
  o.in_place = in_place;
  gpucmp::nccl_collective op(group(), c, bytes, t, o);
  require_verified(op, st.stream(), op.name());
  st.set_work(op.work());
  std::string note = std::to_string(group().ranks()) + " rank(s), every output element checked";
  if (config().mpi) {
    gpucmp::make_lockstep(st.options(), config().mpi_samples, config().mpi_batch);
    note += "; one process per GPU (MPI), the slowest rank's median";
  }
  st.add_note(note);
  st.run(op);
  const double median = median_for_rates(st.result());
  if (!std::isfinite(median)) return;
  const gpucmp::collective_rates rates = gpucmp::rates_for(op.size(), median);
  auto& counters = st.gbench().counters;
  counters["ranks"] = group().ranks();
  counters["algbw_GBps"] = rates.algbw / 1e9;
  if (std::isfinite(rates.busbw)) counters["busbw_GBps"] = rates.busbw / 1e9;  // n/a with one rank
  require_verified(op, st.stream(), op.name() + " after timing");
}

void register_all() {
  for (gpucmp::collective c : config().collectives)
    for (gpucmp::element_type t : config().types)
      for (std::size_t bytes : gpucmp::size_sweep(config().min_bytes, config().max_bytes, config().factor))
        for (bool in_place : config().in_place) {
          if (in_place && (c == gpucmp::collective::all_to_all || c == gpucmp::collective::send_recv)) continue;
          const std::string name = std::string(gpucmp::to_string(c)) + "/nccl/" + gpucmp::to_string(t) + "/" + std::to_string(bytes) +
                                   "/" + (in_place ? "in_place" : "out_of_place");
          gpucmp::register_benchmark(name, [c, t, bytes, in_place](gpucmp::state& st) { run_collective(st, c, t, bytes, in_place); },
                                     {gpucmp::mode::hot, gpucmp::mode::graph});
        }
}

// Message sizes up to 1 TiB: far past any GPU's memory, so the sweep's own checks decide.
constexpr long long max_message_bytes = 1LL << 40;

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
      for (const auto& t : gpucmp_bench::split_list(v)) config().types.push_back(gpucmp::parse_element_type(t));
    } else if (const char* v = value("--min_bytes=")) {
      config().min_bytes =
          std::size_t(gpucmp_bench::whole_number(v, 1, max_message_bytes, "collectives", "--min_bytes"));
    } else if (const char* v = value("--max_bytes=")) {
      config().max_bytes =
          std::size_t(gpucmp_bench::whole_number(v, 1, max_message_bytes, "collectives", "--max_bytes"));
    } else if (const char* v = value("--factor=")) {
      config().factor = std::size_t(gpucmp_bench::whole_number(v, 2, 1 << 20, "collectives", "--factor"));
    } else if (arg == "--mpi") {
      config().mpi = true;
    } else if (const char* v = value("--mpi_samples=")) {
      config().mpi_samples = std::size_t(gpucmp_bench::whole_number(v, 1, 1 << 20, "collectives", "--mpi_samples"));
    } else if (const char* v = value("--mpi_batch=")) {
      config().mpi_batch = std::size_t(gpucmp_bench::whole_number(v, 1, 1 << 20, "collectives", "--mpi_batch"));
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
  if (!config().mpi) {
    register_all();
    return gpucmp::benchmark_main(argc, argv);
  }
#if GPUCMP_WITH_MPI
  try {
    gpucmp::mpi_session mpi(&argc, &argv);
    const gpucmp::rank_placement p = gpucmp::placement_in(MPI_COMM_WORLD);
    // Rank 0 reports; the others run the same benchmarks silently and write no files.
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
      const bool output_file = std::strncmp(argv[i], "--benchmark_out", 15) == 0 || std::strncmp(argv[i], "--gpucmp_kernels_out", 20) == 0;
      if (p.rank == 0 || !output_file) args.push_back(argv[i]);
    }
    if (p.rank != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) std::fprintf(stderr, "collectives: rank %d prints too\n", p.rank);
    int count = int(args.size());
    args.push_back(nullptr);  // argv[argc]
    register_all();
    return gpucmp::benchmark_main(count, args.data());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectives: %s\n", e.what());
    return 1;
  }
#else
  std::fprintf(stderr, "collectives: --mpi is unsupported: built without gpucmp::mpi (MPI not found at configure time)\n");
  return 2;
#endif
}
