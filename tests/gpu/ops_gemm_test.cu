// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuBLASLt GEMMs: every precision this GPU supports is verified against the FP64 references
// (CPU for small problems, GPU for large ones), transposes, leading dimensions and batches
// included; a corrupted output is caught by both references; run_on takes the caller's
// operands; bad input gets typed errors.
#include "catch.hpp"
#include "search_pace.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/ops/gemm.cuh>
#include <gpucmp/cuda/stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>

namespace {

bool supported_here(gpucmp::numerics t) {
  const auto d = gpucmp::query_current_device();
  return d.cc_major * 10 + d.cc_minor >= gpucmp::minimum_compute_capability(t);
}

bool needs_tn(gpucmp::numerics t) {
  return t == gpucmp::numerics::fp8_e4m3 || t == gpucmp::numerics::fp8_e5m2 || t == gpucmp::numerics::int8;
}

const gpucmp::numerics all_dtypes[] = {
    gpucmp::numerics::fp64, gpucmp::numerics::fp32,       gpucmp::numerics::tf32,
    gpucmp::numerics::fp16, gpucmp::numerics::fp16_acc16, gpucmp::numerics::bf16,
    gpucmp::numerics::fp8_e4m3, gpucmp::numerics::fp8_e5m2, gpucmp::numerics::int8};

// Writes `value` over output element (i, j) of batch 0.
template <class C>
void corrupt(gpucmp::gemm& g, std::int64_t i, std::int64_t j, double value) {
  const C bad = gpucmp::from_double<C>(value);
  const std::int64_t ldc = g.problem().ldc_or_tight();
  REQUIRE(cudaMemcpy(static_cast<C*>(g.d()) + i + j * ldc, &bad, sizeof(C), cudaMemcpyHostToDevice) == cudaSuccess);
}

}  // namespace

TEST_CASE("every GEMM precision passes verification on the CPU and the GPU reference", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  for (gpucmp::numerics t : all_dtypes) {
    if (!supported_here(t)) {
      WARN("skipping " << gpucmp::to_string(t) << ": not supported on this GPU");
      continue;
    }
    for (std::int64_t size : {96, 1024}) {  // 96: CPU reference of every output; 1024: GPU rows and columns
      gpucmp::gemm_problem p;
      p.m = size;
      p.n = size + 32;
      p.k = size / 2 + 16;
      p.transpose_a = needs_tn(t);
      p.dtype = t;
      INFO(gpucmp::to_string(t) << " " << p.shape_name());
      gpucmp::gemm g(p, gpucmp_test::paced(gpucmp::gemm_options{}), s.get());
      gpucmp::choose_algorithm(g);
      const gpucmp::verification v = g.verify(s.get());
      INFO(v.summary());
      CHECK(v.passed());
      CHECK(v.checked >= std::size_t(size <= 96 ? p.m * p.n : 16 * p.n));
      CHECK(v.method.find(size <= 96 ? "CPU" : "GPU") != std::string::npos);
      CHECK(g.algorithm().id >= 0);
      CHECK(g.algorithm().chosen_by == gpucmp::algorithm_choice::search);
      CHECK(!g.search_log().empty());
      CHECK(g.algorithm().searched_seconds > 0);
    }
  }
}

TEST_CASE("transposes, leading dimensions and batches are verified", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (std::int64_t batch : {1, 3}) {
        for (std::int64_t size : {40, 520}) {
          gpucmp::gemm_problem p;
          p.m = size + 8;
          p.n = size;
          p.k = size + 24;
          p.transpose_a = ta;
          p.transpose_b = tb;
          p.lda = p.a_rows() + 8;
          p.ldb = p.b_rows() + 16;
          p.ldc = p.m + 8;
          p.batch = batch;
          p.dtype = gpucmp::numerics::fp16;
          INFO(p.shape_name());
          gpucmp::gemm g(p, gpucmp_test::paced(gpucmp::gemm_options{}), s.get());
          gpucmp::choose_algorithm(g);
          const gpucmp::verification v = g.verify(s.get());
          INFO(v.summary());
          CHECK(v.passed());
        }
      }
    }
  }
}

TEST_CASE("a corrupted output element fails verification and is located", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  for (std::int64_t size : {64, 2048}) {
    gpucmp::gemm_problem p;
    p.m = p.n = p.k = size;
    p.dtype = gpucmp::numerics::fp32;
    gpucmp::gemm g(p, gpucmp_test::paced(gpucmp::gemm_options{}), s.get());
    gpucmp::choose_algorithm(g);
    REQUIRE(g.verify(s.get()).passed());
    corrupt<float>(g, 0, 5, 1e3);  // row 0 is always among the checked rows
    const gpucmp::verification v = g.check_output(s.get());
    CHECK_FALSE(v.passed());
    CHECK(v.failed == 1);
    CHECK(v.worst_where == "batch 0, row 0, column 5");
    CHECK_THROWS_AS(gpucmp::require_passed(g.name(), v), gpucmp::verification_failed);
    // An output that is off by a few units of its last place is still correct.
    REQUIRE(g.verify(s.get()).passed());
  }
}

TEST_CASE("the heuristic choice records its algorithm without timing candidates", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  gpucmp::gemm_problem p;
  p.m = 35;
  p.n = 8457;
  p.k = 2560;
  p.dtype = gpucmp::numerics::fp16;
  gpucmp::gemm_options o;
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::gemm g(p, o, s.get());
  gpucmp::choose_algorithm(g);
  CHECK(g.search_log().empty());
  CHECK(g.algorithm().heuristic_rank == 0);
  CHECK(g.algorithm().describe().find("heuristic") != std::string::npos);
  CHECK(g.verify(s.get()).passed());
}

namespace {

// How many of a search's candidates carry `marker` in their description; checks that each of
// them ran, or says why not.
std::size_t candidates_marked(const gpucmp::gemm& g, const char* marker) {
  std::size_t n = 0;
  for (const auto& c : g.search_log()) {
    if (c.description.find(marker) == std::string::npos) continue;
    ++n;
    INFO(c.description << ": " << c.failure);
    CHECK((c.seconds > 0 || !c.failure.empty()));
  }
  return n;
}

}  // namespace

TEST_CASE("a skinny GEMM's search also times split-K variants; a large one's does not", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  auto variants = [](const gpucmp::gemm& g) { return candidates_marked(g, "split-K variant"); };
  // Shapes whose leading candidates cuBLASLt lets split K on the H200 (its TF32 Hopper kernels
  // at 4096x128x4096 take no split-K setting: no variant there, which is fine).
  struct shape {
    std::int64_t m, n, k;
    gpucmp::numerics dtype;
  };
  for (const shape& sh : {shape{4096, 128, 4096, gpucmp::numerics::fp16}, shape{35, 8457, 2560, gpucmp::numerics::tf32}}) {
    gpucmp::gemm_problem skinny;
    skinny.m = sh.m;
    skinny.n = sh.n;
    skinny.k = sh.k;
    skinny.dtype = sh.dtype;
    INFO(skinny.shape_name() << " " << gpucmp::to_string(sh.dtype));
    gpucmp::gemm g(skinny, gpucmp_test::paced(gpucmp::gemm_options{}), s.get());
    gpucmp::choose_algorithm(g);
    CHECK(variants(g) > 0);
    CHECK(g.verify(s.get()).passed());
    gpucmp::gemm_options off;
    off.split_k_variants = false;
    CHECK(variants(gpucmp_test::chosen(gpucmp::gemm(skinny, gpucmp_test::paced(off), s.get()))) == 0);
  }
  gpucmp::gemm_problem large;  // 16.8 M outputs: many waves of tiles already
  large.m = large.n = 4096;
  large.k = 256;
  large.dtype = gpucmp::numerics::fp16;
  CHECK(variants(gpucmp_test::chosen(gpucmp::gemm(large, gpucmp_test::paced(gpucmp::gemm_options{}), s.get()))) == 0);
}

TEST_CASE("a search asked for neighbours of the heuristic's first candidates times each new configuration", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  auto variants = [](const gpucmp::gemm& g) { return candidates_marked(g, "config variant"); };
  // The settings before " ws ": algorithm, tile, stages, split-K, reduction, swizzle, custom, cluster.
  auto settings = [](const std::string& description) { return description.substr(0, description.find(" ws ")); };
  for (gpucmp::numerics dtype : {gpucmp::numerics::fp16, gpucmp::numerics::tf32}) {
    gpucmp::gemm_problem p;
    p.m = p.n = 4096;
    p.k = 1024;
    p.dtype = dtype;
    INFO(gpucmp::to_string(dtype));
    gpucmp::gemm_options on;
    on.config_variants = true;
    gpucmp::gemm g(p, gpucmp_test::paced(on), s.get());
    gpucmp::choose_algorithm(g);
    CHECK(variants(g) > 0);
    std::set<std::string> seen;
    std::size_t timed = 0;
    for (const auto& c : g.search_log()) {
      INFO(c.description);
      CHECK(seen.insert(settings(c.description)).second);  // no configuration timed twice
      if (c.description.find("config variant") != std::string::npos && c.seconds > 0) ++timed;
    }
    CHECK(timed > 0);
    CHECK(g.verify(s.get()).passed());
    CHECK(variants(gpucmp_test::chosen(gpucmp::gemm(p, gpucmp_test::paced(gpucmp::gemm_options{}), s.get()))) == 0);  // off by default
  }
}

TEST_CASE("misaligned operands get staged candidates that verify; aligned ones get none", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  auto staged = [](const gpucmp::gemm& g) { return candidates_marked(g, "staged aligned"); };
  struct shape {
    std::int64_t m, n, k;
    bool transpose_a;
    gpucmp::numerics dtype;
    const char* operands;
    std::int64_t batch;
  };
  // DeepBench's misaligned FP16 5124x9124x2560 and 35x8457x2560 at smaller n and k (M padded:
  // A and C staged); K padded to 256 with zeros in a batch of 2 (A and B staged: nonzero
  // padding would change every output); FP64 7x9x11 stages all three and is checked on the
  // CPU, every output, in a batch of 3.
  for (const shape& sh : {shape{5124, 512, 256, true, gpucmp::numerics::fp16, "A, C", 1},
                          shape{35, 1000, 512, false, gpucmp::numerics::tf32, "A, C", 1},
                          shape{256, 384, 250, false, gpucmp::numerics::bf16, "A, B", 2},
                          shape{7, 9, 11, false, gpucmp::numerics::fp64, "A, B, C", 3}}) {
    gpucmp::gemm_problem p;
    p.m = sh.m;
    p.n = sh.n;
    p.k = sh.k;
    p.transpose_a = sh.transpose_a;
    p.dtype = sh.dtype;
    p.batch = sh.batch;
    INFO(p.shape_name() << " " << gpucmp::to_string(sh.dtype));
    REQUIRE(gpucmp::staging_plan(p).operands() == sh.operands);
    gpucmp::gemm_options only;
    only.staging = gpucmp::operand_staging::only;  // the staged path must run, and verify
    gpucmp::gemm forced(p, gpucmp_test::paced(only), s.get());
    gpucmp::choose_algorithm(forced);
    CHECK(forced.algorithm().staged == sh.operands);
    CHECK_FALSE(forced.algorithm().staged_as.empty());  // each of these runs padded
    CHECK(staged(forced) == forced.search_log().size());
    CHECK(forced.verify(s.get()).passed());
    gpucmp::gemm searched(p, gpucmp_test::paced(gpucmp::gemm_options{}), s.get());  // default: both kinds compete
    gpucmp::choose_algorithm(searched);
    CHECK(staged(searched) > 0);
    CHECK(staged(searched) < searched.search_log().size());
    CHECK(searched.verify(s.get()).passed());
    gpucmp::gemm_options off;
    off.staging = gpucmp::operand_staging::off;
    CHECK(staged(gpucmp_test::chosen(gpucmp::gemm(p, gpucmp_test::paced(off), s.get()))) == 0);
  }
  gpucmp::gemm_problem aligned;  // nothing to stage: "only" leaves the plain candidates
  aligned.m = aligned.n = 1024;
  aligned.k = 256;
  aligned.dtype = gpucmp::numerics::fp16;
  gpucmp::gemm_options only;
  only.staging = gpucmp::operand_staging::only;
  gpucmp::gemm plain(aligned, gpucmp_test::paced(only), s.get());
  gpucmp::choose_algorithm(plain);
  CHECK(staged(plain) == 0);
  CHECK(plain.algorithm().staged.empty());
}

TEST_CASE("the search times its close contenders again and keeps the fastest median", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  gpucmp::gemm_problem p;  // many near-equal candidates of one kernel family
  p.m = p.n = p.k = 4096;
  p.dtype = gpucmp::numerics::bf16;
  gpucmp::gemm_options o;
  o.search.duel_contenders = 0;  // the re-timing alone; the duel has its own test
  o = gpucmp_test::paced(o);
  gpucmp::gemm g(p, o, s.get());
  gpucmp::choose_algorithm(g);
  std::size_t retimed = 0;
  double fastest = std::numeric_limits<double>::infinity(), fastest_median = fastest;
  for (const auto& c : g.search_log()) {
    INFO(c.description << ": " << c.seconds << " s, " << c.timings << " timings; " << c.failure);
    if (c.timings > 1) {
      ++retimed;
      CHECK(c.timings == 1 + o.search.refine_rounds);
      if (c.failure.empty()) fastest_median = std::min(fastest_median, c.seconds);
    }
    if (c.failure.empty() && c.timings > 0) fastest = std::min(fastest, c.seconds);
  }
  // Whether several candidates come within the margin depends on the GPU; at most the limit do.
  CHECK(retimed <= std::size_t(o.search.refine_contenders));
  CHECK(retimed != 1);  // a lone contender is not timed again
  // The choice (none failed verification): the contenders' lowest median when there were
  // contenders (a candidate timed once does not beat it), else the lowest time.
  CHECK(g.algorithm().searched_seconds == (retimed > 0 ? fastest_median : fastest));
  CHECK(g.verify(s.get()).passed());
}

TEST_CASE("the closest long candidates duel in sustained spells, and cuBLASLt's choice keeps a lead of under 1 %", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  gpucmp::gemm_problem p;  // 1.4 ms per call on an H200: long enough to duel
  p.m = p.n = p.k = 8192;
  p.dtype = gpucmp::numerics::bf16;
  const gpucmp::gemm_options o = gpucmp_test::paced(gpucmp::gemm_options{});
  gpucmp::gemm g(p, o, s.get());
  gpucmp::choose_algorithm(g);
  std::size_t duelists = 0;
  double best_sustained = std::numeric_limits<double>::infinity();
  for (const auto& c : g.search_log()) {
    INFO(c.description << ": " << c.seconds << " s, " << c.timings << " timings, " << c.duel_timings
                       << " in the duel; " << c.failure);
    if (c.duel_timings > 0) {
      ++duelists;
      CHECK(c.duel_timings <= o.search.duel_timings);  // half of each of two spells
      if (c.failure.empty()) best_sustained = std::min(best_sustained, c.seconds);
    }
  }
  // Whether a second candidate comes within the margin depends on the GPU; never one alone.
  // cuBLASLt's first choice (candidate 0) may join as the incumbent.
  CHECK(duelists <= std::size_t(o.search.duel_contenders) + 1);
  CHECK(duelists != 1);
  REQUIRE(o.search.duel_incumbent_lead == 0.01);
  const gpucmp::candidate_time& incumbent = g.search_log().front();
  if (duelists > 0) {
    const double chosen = g.algorithm().searched_seconds;
    if (g.algorithm().heuristic_rank == 0 && incumbent.duel_timings > 0 && chosen != best_sustained) {
      CHECK(chosen == incumbent.seconds);  // kept: the best led by 1 % or less
      CHECK(best_sustained * (1 + o.search.duel_incumbent_lead) >= incumbent.seconds);
    } else {
      CHECK(chosen == best_sustained);
    }
  }
  CHECK(g.verify(s.get()).passed());
}

TEST_CASE("run_on runs the chosen algorithm on the caller's operands, staged or not", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  for (gpucmp::operand_staging staging : {gpucmp::operand_staging::off, gpucmp::operand_staging::only}) {
    gpucmp::gemm_problem p;  // M = 5124 is misaligned: "only" stages A and C
    p.m = 5124;
    p.n = 512;
    p.k = 256;
    p.transpose_a = true;
    p.dtype = gpucmp::numerics::fp16;
    gpucmp::gemm_options options;
    options.staging = staging;
    gpucmp::gemm g(p, gpucmp_test::paced(options), s.get());
    gpucmp::choose_algorithm(g);
    INFO(g.algorithm().describe());
    CHECK(g.algorithm().staged.empty() == (staging == gpucmp::operand_staging::off));
    REQUIRE(g.verify(s.get()).passed());
    // The caller's copies of A and B, and its own D: the result lands there, not in g.d().
    const std::size_t a_bytes = std::size_t(p.m * p.k) * 2, b_bytes = std::size_t(p.k * p.n) * 2,
                      d_bytes = std::size_t(p.m * p.n) * 2;
    gpucmp::device_buffer<unsigned char> a(a_bytes, gpucmp::initial_fill::uninitialized()),
        b(b_bytes, gpucmp::initial_fill::uninitialized()), d(d_bytes, gpucmp::initial_fill::poison());
    REQUIRE(cudaMemcpy(a.data(), g.a(), a_bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(b.data(), g.b(), b_bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
    REQUIRE(cudaMemset(g.d(), 0xFF, d_bytes) == cudaSuccess);  // NaN: the check fails unless D is copied back
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
    g.run_on(a.data(), b.data(), d.data(), s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    CHECK_FALSE(g.check_output(s.get()).passed());  // its own D untouched
    REQUIRE(cudaMemcpy(g.d(), d.data(), d_bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
    CHECK(g.check_output(s.get()).passed());
    // A different A through run_on gives a product the operation's own A does not.
    REQUIRE(cudaMemset(a.data(), 0, a_bytes) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
    g.run_on(a.data(), b.data(), d.data(), s.get());
    REQUIRE(cudaMemcpy(g.d(), d.data(), d_bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
    CHECK_FALSE(g.check_output(s.get()).passed());
    CHECK_THROWS_AS(g.run_on(nullptr, b.data(), d.data(), s.get()), gpucmp::invalid_argument);
  }
}

TEST_CASE("bad GEMMs get typed errors that say what is wrong", "[gpu][ops][gemm]") {
  gpucmp::stream s;
  gpucmp::gemm_problem empty;
  CHECK_THROWS_WITH(gpucmp::gemm(empty, {}, s.get()), GPUCMP_CONTAINS("m, n and k must be positive"));

  gpucmp::gemm_problem huge;
  huge.m = huge.n = huge.k = 400000;  // 3 x 320 GB of FP16
  huge.dtype = gpucmp::numerics::fp16;
  try {
    gpucmp::gemm g(huge, {}, s.get());
    FAIL("a 400000^3 GEMM fit in memory");
  } catch (const gpucmp::out_of_memory& e) {
    CHECK(e.requested_bytes() > e.free_bytes());
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("gemm/cublaslt/fp16/400000x400000x400000") && GPUCMP_CONTAINS("free of"));
  }

  if (supported_here(gpucmp::numerics::fp8_e4m3)) {
    gpucmp::gemm_problem nn;
    nn.m = nn.n = nn.k = 256;
    nn.dtype = gpucmp::numerics::fp8_e4m3;
    CHECK_THROWS_AS(gpucmp::gemm(nn, {}, s.get()), gpucmp::unsupported);
    CHECK_THROWS_WITH(gpucmp::gemm(nn, {}, s.get()), GPUCMP_CONTAINS("_tn"));
  } else {
    gpucmp::gemm_problem fp8;
    fp8.m = fp8.n = fp8.k = 256;
    fp8.transpose_a = true;
    fp8.dtype = gpucmp::numerics::fp8_e4m3;
    CHECK_THROWS_WITH(gpucmp::gemm(fp8, {}, s.get()), GPUCMP_CONTAINS("fp8_e4m3 needs sm_89+"));
  }
  // The stream and device are still usable after all of that.
  gpucmp::gemm_problem ok;
  ok.m = ok.n = ok.k = 128;
  gpucmp::gemm g(ok, gpucmp_test::paced(gpucmp::gemm_options{}), s.get());
  gpucmp::choose_algorithm(g);
  CHECK(g.verify(s.get()).passed());
}
