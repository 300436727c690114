// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// run_verified, the one call a benchmark of a library operation makes: on a GEMM and a
// convolution whose sizes no fast kernel is aligned to, it runs the algorithm an explicit
// search chooses (not the heuristic's first choice), verified, with its work declared, and
// writes the search to the search log.
#include "catch.hpp"
#include "gbench_capture.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/io/json.hpp>
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/gemm.cuh>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

gpucmp::gemm_problem unaligned_gemm() {
  gpucmp::gemm_problem p;
  p.m = 4095;
  p.n = 4097;
  p.k = 4093;
  p.dtype = gpucmp::numerics::fp16;
  return p;
}

gpucmp::conv_problem unaligned_conv() {
  gpucmp::conv_problem p;
  p.n = 6;
  p.c = 37;
  p.k = 35;
  p.h = p.w = 29;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.dtype = gpucmp::numerics::fp16;
  return p;
}

// What the benchmark body saw of its operation after run_verified.
struct seen_algorithm {
  std::string described;
  gpucmp::algorithm_choice chosen_by = gpucmp::algorithm_choice::heuristic;
  double searched_seconds = 0;
  double flops = 0;
};

template <class Operation>
seen_algorithm seen(const Operation& op) {
  return {op.algorithm().describe(), op.algorithm().chosen_by, op.algorithm().searched_seconds, op.work().flops};
}

// The same problem searched explicitly, outside any benchmark.
template <class Operation, class Problem>
seen_algorithm searched_explicitly(const Problem& problem) {
  Operation op(problem, {});
  gpucmp::search(op, gpucmp::shared_engine());
  return seen(op);
}

}  // namespace

TEST_CASE("run_verified runs, on an unaligned GEMM and convolution, the algorithm an explicit search chooses", "[gpu][gbench][ops]") {
  const std::string log_path = "gpucmp_verified_run_search_log.jsonl";
  std::remove(log_path.c_str());
  struct restore_flag {  // the flag and the typed rows are process-wide
    bool typed = gpucmp::detail::typed_rows_enabled();
    ~restore_flag() {
      gpucmp::detail::flags_everywhere().search_log.clear();
      gpucmp::detail::typed_rows_enabled() = typed;
    }
  } restore;
  gpucmp::detail::flags_everywhere().search_log = log_path;
  gpucmp::detail::typed_rows_enabled() = true;
  const std::size_t rows_before = gpucmp::detail::pending_rows().size();
  seen_algorithm gemm_run, conv_run;
  gpucmp::register_benchmark(
      "verified_run_gemm",
      [&](gpucmp::state& st) {
        gpucmp::gemm op(unaligned_gemm(), {}, st.stream());
        gpucmp::run_verified(st, op);
        gemm_run = seen(op);
      },
      {gpucmp::mode::hot});
  gpucmp::register_benchmark(
      "verified_run_conv",
      [&](gpucmp::state& st) {
        gpucmp::conv op(unaligned_conv(), {}, st.stream());
        gpucmp::run_verified(st, op);
        conv_run = seen(op);
      },
      {gpucmp::mode::hot});
  const auto runs = gpucmp_test::run_matching("^verified_run_(gemm|conv)/");
  REQUIRE(runs.size() == 2);
  for (const auto& [name, r] : runs) {
    INFO(name << ": " << r.error);
    CHECK(r.error.empty());
    CHECK_THAT(r.label, GPUCMP_CONTAINS("(search: heuristic rank"));
    CHECK_THAT(r.label, GPUCMP_CONTAINS("verified "));
    CHECK(r.counters.count("TFLOP/s") == 1);  // the work was declared
  }
  CHECK(gemm_run.flops == unaligned_gemm().flops());
  CHECK(conv_run.flops == unaligned_conv().flops());

  // Each typed row says what was measured, from the operation itself.
  std::vector<gpucmp::result_row> rows;
  for (std::size_t i = rows_before; i < gpucmp::detail::pending_rows().size(); ++i) rows.push_back(gpucmp::detail::pending_rows()[i].row);
  REQUIRE(rows.size() == 2);
  for (const gpucmp::result_row& row : rows) {
    const gpucmp::row_description& d = row.described;
    const bool gemm = d.provider == "cuBLASLt";
    INFO(d.provider);
    CHECK((gemm || d.provider == "cuDNN"));
    CHECK(d.algorithm == (gemm ? gemm_run.described : conv_run.described));
    REQUIRE(d.find("dtype") != nullptr);
    CHECK(d.find("dtype")->text == "fp16");
    CHECK(*d.find(gemm ? "m" : "c")->number == (gemm ? 4095.0 : 37.0));
    REQUIRE(d.verification.has_value());
    CHECK(d.verification->checked > 0);
    CHECK(d.verification->failed == 0);
    REQUIRE(d.search.has_value());
    CHECK(d.search->wall_s > 0);
    CHECK(d.search->candidates.size() >= 2);
    REQUIRE_FALSE(d.libraries.empty());
    CHECK(d.libraries.front().first == (gemm ? "cublasLt" : "cudnn"));
    CHECK(std::stod(d.libraries.front().second) > 0);
  }

  // An explicit search of the same problems: the same algorithm, or one that timed within 5 %
  // of it (two searches of candidates that tie may rank them either way).
  const seen_algorithm gemm_explicit = searched_explicitly<gpucmp::gemm>(unaligned_gemm());
  const seen_algorithm conv_explicit = searched_explicitly<gpucmp::conv>(unaligned_conv());
  for (const auto& [run, explicit_search] : {std::pair{gemm_run, gemm_explicit}, std::pair{conv_run, conv_explicit}}) {
    INFO("run_verified: " << run.described << " (" << run.searched_seconds * 1e6 << " us); explicit search: "
                          << explicit_search.described << " (" << explicit_search.searched_seconds * 1e6 << " us)");
    CHECK(run.chosen_by == gpucmp::algorithm_choice::search);
    CHECK((run.described == explicit_search.described ||
           std::fabs(run.searched_seconds - explicit_search.searched_seconds) <= 0.05 * explicit_search.searched_seconds));
  }

  // The search log: one line per search, the chosen algorithm, the search's wall time, every candidate.
  std::ifstream log(log_path);
  std::vector<gpucmp::detail::json> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(gpucmp::detail::parse_json(line));
  REQUIRE(lines.size() == 2);
  for (const gpucmp::detail::json& line : lines) {
    const std::string chosen = line.find("chosen")->string();
    CHECK((chosen == gemm_run.described || chosen == conv_run.described));
    CHECK(line.find("search_wall_s")->number() > 0);
    CHECK(line.find("candidates")->items().size() >= 2);
    CHECK_THAT(line.find("benchmark")->string(), GPUCMP_CONTAINS("verified_run_"));
  }
  std::remove(log_path.c_str());
}
