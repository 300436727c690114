// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Host tests of what "correct" means for the operations (tolerances, the verification
// record, its failure message) and of the bundled shape lists.
#include "catch.hpp"

#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/gemm_problem.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/ops/workload_shapes.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

TEST_CASE("INT8 GEMMs must be exact; the other precisions get growing bounds", "[ops][verification]") {
  using gpucmp::numerics;
  const double ref = 10.0, l2 = 3.0, k = 4096;
  CHECK(gpucmp::gemm_tolerance(numerics::int8).bound(ref, l2, k) < 1e-200);
  const double fp64 = gpucmp::gemm_tolerance(numerics::fp64).bound(ref, l2, k);
  const double fp32 = gpucmp::gemm_tolerance(numerics::fp32).bound(ref, l2, k);
  const double tf32 = gpucmp::gemm_tolerance(numerics::tf32).bound(ref, l2, k);
  const double fp16 = gpucmp::gemm_tolerance(numerics::fp16).bound(ref, l2, k);
  const double acc16 = gpucmp::gemm_tolerance(numerics::fp16_acc16).bound(ref, l2, k);
  const double bf16 = gpucmp::gemm_tolerance(numerics::bf16).bound(ref, l2, k);
  CHECK(fp64 < fp32);
  CHECK(fp32 < fp16);
  CHECK(fp16 < bf16);
  CHECK(fp16 < acc16);
  CHECK(fp32 < tf32);
  // Tight enough to catch a wrong answer: a 1% error of a typical output fails in FP32 and FP16.
  CHECK(fp32 < 0.01 * ref);
  CHECK(fp16 < 0.01 * ref);
  // The accumulation term grows with sqrt(terms), not linearly.
  const gpucmp::tolerance acc = gpucmp::gemm_tolerance(numerics::fp16_acc16);
  const double grow = (acc.bound(0, 1, 4 * k) - 1e-300) / (acc.bound(0, 1, k) - 1e-300);
  CHECK(grow == Approx(2.0).epsilon(1e-6));
}

TEST_CASE("transform convolution algorithms get a looser bound than direct ones", "[ops][verification]") {
  for (auto t : {gpucmp::numerics::fp32, gpucmp::numerics::tf32, gpucmp::numerics::fp16, gpucmp::numerics::bf16}) {
    CHECK(gpucmp::conv_tolerance(t, true).bound(1, 1, 576) > gpucmp::conv_tolerance(t, false).bound(1, 1, 576));
  }
}

TEST_CASE("FP16 results rounded to subnormals get an absolute allowance, normal ones none", "[ops][verification]") {
  const gpucmp::tolerance fp16 = gpucmp::conv_tolerance(gpucmp::numerics::fp16);
  // 1.144e-5 lies among FP16's subnormals (spacing 2^-24): rounding it can miss by 2^-25,
  // far more than 2^-11 of its value, and no l2 term covers a reduction of tiny products.
  const double tiny = 1.144e-5;
  CHECK(fp16.bound(tiny, 0.0, 49) >= std::ldexp(1.0, -25));
  CHECK(std::ldexp(1.0, -11) * tiny < std::ldexp(1.0, -25));
  // For normal values the absolute term is negligible against the relative one.
  CHECK(fp16.bound(1.0, 0.0, 49) == Approx(std::ldexp(1.0, -11)).epsilon(1e-4));
  // FP32 keeps no absolute term.
  CHECK(gpucmp::conv_tolerance(gpucmp::numerics::fp32).output_abs == 0.0);
}

TEST_CASE("tensor-core convolutions get two FP32 units per addition, FP32's FMA path half of one", "[ops][verification]") {
  using gpucmp::numerics;
  CHECK(gpucmp::conv_tolerance(numerics::fp32).accumulate_eps == std::ldexp(1.0, -24));
  for (numerics t : {numerics::tf32, numerics::fp16, numerics::bf16}) CHECK(gpucmp::conv_tolerance(t).accumulate_eps == std::ldexp(1.0, -22));
  // The H200's weight gradients near batch 2600, products of values in [-1, 1] (l2 about
  // sqrt(terms / 9)): a 3x3 with 64 channels at batch 2548 (8 million terms) and a 1x1 with
  // 1024 at 2588 (127 thousand). Their outliers pass; an error of 1 % of the output does not.
  const gpucmp::tolerance fp16 = gpucmp::conv_tolerance(numerics::fp16);
  struct seen {
    double terms, got, reference;
  };
  for (const seen& s : {seen{2548.0 * 56 * 56, 3278, 3281.549}, seen{2588.0 * 7 * 7, -268.5, -268.6724}}) {
    const double l2 = std::sqrt(s.terms / 9), bound = fp16.bound(s.reference, l2, s.terms);
    INFO(s.terms << " terms: bound " << bound);
    CHECK(std::fabs(s.got - s.reference) <= bound);
    CHECK(0.01 * std::fabs(s.reference) > bound);
  }
}

TEST_CASE("an accumulating pass may round its own result before adding the prior, and no more", "[ops][verification]") {
  // The kind of failure seen on the H200 (backward-data at batch 2628, FP16: 0.01123047 against
  // 0.01158925): the pass's own result near 2 cancels a prior near -2, and an epilogue that
  // rounds its own result to FP16 first misses by up to half an FP16 step of 2.
  const gpucmp::tolerance fp16 = gpucmp::conv_tolerance(gpucmp::numerics::fp16);
  const double own = 2.0 + std::ldexp(1.0, -10);  // half an FP16 step of 2 away from the grid
  const double prior = -1.98841, reference = own + prior, l2 = 1e-3, terms = 64;
  const double rounded_first = 2.0 + prior;  // own rounded to FP16 (ties to even), then added
  CHECK(std::fabs(rounded_first - reference) > fp16.bound(reference, l2, terms));  // the plain bound rejects it
  CHECK(std::fabs(rounded_first - reference) <= fp16.bound_added(reference, own, l2, terms));
  // Two roundings of own are still an error.
  CHECK(2 * std::ldexp(1.0, -9) > fp16.bound_added(reference, own, l2, terms));
  // With nothing to add to, the bounds agree.
  CHECK(fp16.bound_added(reference, 0.0, l2, terms) == fp16.bound(reference, l2, terms));
}

TEST_CASE("a verification record counts failures, NaNs included, and names the worst output", "[ops][verification]") {
  gpucmp::verification v;
  v.method = "test";
  CHECK_FALSE(v.passed());  // nothing checked is not a pass
  CHECK(v.summary().find("nothing was checked") != std::string::npos);
  CHECK(v.add(1.0, 1.0, 0.1, "a"));
  CHECK(v.add(1.05, 1.0, 0.1, "b"));
  CHECK(v.passed());
  CHECK(v.worst_where == "b");
  CHECK(v.worst_ratio == Approx(0.5));
  CHECK_FALSE(v.add(std::numeric_limits<double>::quiet_NaN(), 1.0, 0.1, "never written"));
  CHECK_FALSE(v.add(2.0, 1.0, 0.1, "c"));
  CHECK(v.checked == 4);
  CHECK(v.failed == 2);
  CHECK(v.worst_where == "never written");  // NaN is the worst of all
  CHECK_THAT(v.summary(), GPUCMP_CONTAINS("2 of 4 outputs outside tolerance (test); worst at never written"));
  try {
    gpucmp::require_passed("gemm/x", v);
    FAIL("require_passed accepted a failed check");
  } catch (const gpucmp::verification_failed& e) {
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("verification failed: gemm/x: 2 of 4"));
    CHECK(e.result().failed == 2);
  }
}

TEST_CASE("DeepBench's representative GEMMs are the eleven listed, in the requested precision", "[ops][shapes]") {
  const auto shapes = gpucmp::deepbench_gemm_shapes(gpucmp::numerics::tf32);
  REQUIRE(shapes.size() == 11);
  CHECK(shapes[4].shape_name() == "5124x9124x2560_tn");
  CHECK(shapes[8].shape_name() == "1024x16x500000");
  for (const auto& p : shapes) {
    CHECK(p.dtype == gpucmp::numerics::tf32);
    CHECK_NOTHROW(p.validate());
  }
}

TEST_CASE("ResNet-50's distinct convolutions are 23, at the requested batch", "[ops][shapes]") {
  const auto shapes = gpucmp::resnet50_conv_shapes(256, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc);
  REQUIRE(shapes.size() == 23);
  std::set<std::string> names;
  double flops = 0;
  for (const auto& p : shapes) {
    CHECK(p.n == 256);
    CHECK_NOTHROW(p.validate());
    names.insert(p.shape_name());
    flops += p.flops();
  }
  CHECK(names.size() == 23);
  CHECK(shapes.front().shape_name() == "n256_c3_h224_w224_k64_r7_s7_p3_u2");
  CHECK(shapes.front().p() == 112);
  CHECK(flops > 0);
}

TEST_CASE("DeepBench's convolutions keep its width/height order", "[ops][shapes]") {
  const auto shapes = gpucmp::deepbench_conv_shapes(gpucmp::numerics::fp32, gpucmp::conv_layout::nchw);
  REQUIRE(shapes.size() == 12);
  const auto& speech = shapes[10];  // 700x161x1, 32 filters of 20 (height) x 5 (width), stride 2
  CHECK(speech.w == 700);
  CHECK(speech.h == 161);
  CHECK(speech.r == 20);
  CHECK(speech.s == 5);
  CHECK(speech.p() == (161 - 20) / 2 + 1);
  CHECK(speech.q() == (700 - 5) / 2 + 1);
}

TEST_CASE("a convolution's reduction length depends on the pass", "[ops][conv]") {
  gpucmp::conv_problem p;
  p.n = 8;
  p.c = 64;
  p.h = p.w = 56;
  p.k = 128;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.groups = 2;
  CHECK(p.reduction_length(gpucmp::conv_direction::forward) == 32 * 9);
  CHECK(p.reduction_length(gpucmp::conv_direction::backward_data) == 64 * 9);
  CHECK(p.reduction_length(gpucmp::conv_direction::backward_filter) == 8 * 56 * 56);
}

TEST_CASE("an out-of-memory error without a size still says what was free", "[ops][errors]") {
  const gpucmp::out_of_memory e(0, std::size_t{1} << 30, std::size_t{2} << 30, "cuBLAS workspace");
  CHECK(std::string(e.what()) == "oom: cuBLAS workspace needs more than is free, 1.00 GiB free of 2.00 GiB");
}

TEST_CASE("the search keeps the fastest candidate whose output verifies", "[ops][search]") {
  const std::vector<double> times = {3e-6, 1e-6, 2e-6, 0, 4e-6};
  auto passing = [](bool ok) {
    gpucmp::verification v;
    v.method = "test";
    v.add(ok ? 1.0 : 2.0, 1.0, 0.5, "output 0");
    return v;
  };
  std::vector<gpucmp::candidate_time> log;
  std::vector<std::size_t> verified;
  const gpucmp::search_choice chosen = gpucmp::choose_fastest_verified(
      times.size(), [](std::size_t i) { return "candidate " + std::to_string(i); },
      [&](std::size_t i) {
        if (i == 3) throw gpucmp::unsupported("cannot run this one");
        return times[i];
      },
      [&](std::size_t i) {
        verified.push_back(i);
        return passing(i != 1);  // the fastest is wrong
      },
      log, "test op");
  CHECK(chosen.index == 2);
  CHECK(chosen.seconds == 2e-6);
  CHECK(verified == std::vector<std::size_t>{1, 2});  // fastest first, stop at the first correct one
  REQUIRE(log.size() == 5);
  CHECK(log[1].failure.rfind("rejected: 1 of 1 outputs outside tolerance", 0) == 0);
  CHECK(log[3].failure == "unsupported: cannot run this one");
  CHECK(log[3].seconds == 0);
  CHECK(log[0].failure.empty());
  CHECK(log[4].description == "candidate 4");
}

namespace {

gpucmp::verification verified_ok() {
  gpucmp::verification v;
  v.method = "test";
  v.add(0.5, 1.0, 0.5, "output 0");
  return v;
}

}  // namespace

TEST_CASE("close contenders are timed again, interleaved, and ranked by their median", "[ops][search]") {
  // Candidate 0 had a lucky first timing (0.80, then 1.00 twice); 1 is steadily 0.90; 2 is
  // within the 10 % margin (0.87); 3 is 20 % behind and is not timed again.
  std::map<std::size_t, std::vector<double>> planned = {
      {0, {0.80, 1.00, 1.00}}, {1, {0.85, 0.90, 0.90}}, {2, {0.87, 0.95, 0.95}}, {3, {0.96}}};
  std::vector<std::size_t> calls;
  auto time = [&](std::size_t i) {
    const double t = planned[i].at(std::count(calls.begin(), calls.end(), i));
    calls.push_back(i);
    return t;
  };
  std::vector<gpucmp::candidate_time> log;
  gpucmp::search_options options;  // defaults: 2 more rounds, 10 % margin, 4 contenders
  options.duel_contenders = 0;     // the re-timing alone (the duel has its own test)
  const gpucmp::search_choice chosen = gpucmp::choose_fastest_verified(
      4, [](std::size_t i) { return "c" + std::to_string(i); }, time, [](std::size_t) { return verified_ok(); }, log,
      "op", options);
  CHECK(chosen.index == 1);
  CHECK(chosen.seconds == 0.90);
  // First pass in order, then two rounds over the contenders (fastest first: 0, 1, 2) in
  // rotating order.
  CHECK(calls == std::vector<std::size_t>{0, 1, 2, 3, 1, 2, 0, 2, 0, 1});
  CHECK(log[0].timings == 3);
  CHECK(log[0].seconds == 1.00);
  CHECK(log[2].seconds == 0.95);
  CHECK(log[3].timings == 1);
  CHECK(log[3].seconds == 0.96);
}

TEST_CASE("a candidate timed once does not beat the contenders' medians", "[ops][search]") {
  // Contenders 0-3 (the fastest four first timings) warm up to medians of 0.93-1.00; candidate
  // 4 is within the margin but beyond the four, timed once at 0.88, below every median. It
  // lost to every contender on first timings, so the best median (3, at 0.93) is chosen, and
  // 4 is only verified after the contenders.
  std::map<std::size_t, std::vector<double>> planned = {{0, {0.80, 1.00, 1.00}},
                                                        {1, {0.85, 1.00, 1.00}},
                                                        {2, {0.87, 0.99, 0.99}},
                                                        {3, {0.86, 0.93, 0.93}},
                                                        {4, {0.88}}};
  std::map<std::size_t, int> timed;
  auto time = [&](std::size_t i) { return planned[i].at(std::size_t(timed[i]++)); };
  std::vector<std::size_t> verified;
  auto verify = [&](std::size_t i) {
    verified.push_back(i);
    gpucmp::verification v = verified_ok();
    if (i != 4) v.add(2.0, 1.0, 0.5, "wrong");  // only candidate 4 is right
    return v;
  };
  std::vector<gpucmp::candidate_time> log;
  const auto describe = [](std::size_t i) { return "c" + std::to_string(i); };
  gpucmp::search_options no_duel;
  no_duel.duel_contenders = 0;
  const gpucmp::search_choice chosen =
      gpucmp::choose_fastest_verified(5, describe, time, [](std::size_t) { return verified_ok(); }, log, "op", no_duel);
  CHECK(chosen.index == 3);
  CHECK(chosen.seconds == 0.93);
  CHECK(log[4].timings == 1);
  std::vector<gpucmp::candidate_time> log2;
  timed.clear();
  const gpucmp::search_choice fallback = gpucmp::choose_fastest_verified(5, describe, time, verify, log2, "op", no_duel);
  CHECK(fallback.index == 4);
  CHECK(verified == std::vector<std::size_t>{3, 2, 0, 1, 4});  // contenders by median, then the rest
}

TEST_CASE("refinement respects its limits and can be turned off", "[ops][search]") {
  std::vector<gpucmp::candidate_time> log;
  std::vector<std::size_t> calls;
  auto constant = [&](std::size_t i) {
    calls.push_back(i);
    return 1.0 + 0.01 * double(i);
  };
  auto describe = [](std::size_t i) { return "c" + std::to_string(i); };
  auto ok = [](std::size_t) { return verified_ok(); };
  gpucmp::search_options two;
  two.refine_contenders = 2;
  two.refine_rounds = 1;
  two.duel_contenders = 0;
  gpucmp::choose_fastest_verified(6, describe, constant, ok, log, "op", two);
  CHECK(calls == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 1, 0});
  calls.clear();
  gpucmp::search_options off;
  off.refine_rounds = 0;
  off.duel_contenders = 0;
  const auto chosen = gpucmp::choose_fastest_verified(6, describe, constant, ok, log, "op", off);
  CHECK(calls.size() == 6);
  CHECK(chosen.index == 0);
}

TEST_CASE("the fastest of each group is timed again even beyond the margin, and wins on its median", "[ops][search]") {
  // Two groups (a convolution's two cuDNN APIs). Group 0: candidate 0 steady at 6.43, 1 at
  // 6.60. Group 1: candidate 2's first timing is 31 % slow (8.42), its true time 6.30;
  // candidate 3 is 9.00. Group 2: candidate 4 is 10.00, beyond the 50 % group margin.
  std::map<std::size_t, std::vector<double>> planned = {
      {0, {6.43, 6.43, 6.43}}, {1, {6.60, 6.60, 6.60}}, {2, {8.42, 6.30, 6.30}}, {3, {9.00}}, {4, {10.00}}};
  std::vector<std::size_t> calls;
  auto time = [&](std::size_t i) {
    const double t = planned[i].at(std::count(calls.begin(), calls.end(), i));
    calls.push_back(i);
    return t;
  };
  auto describe = [](std::size_t i) { return "c" + std::to_string(i); };
  auto ok = [](std::size_t) { return verified_ok(); };
  auto group = [](std::size_t i) { return i < 2 ? 0 : i < 4 ? 1 : 2; };
  gpucmp::search_options options;
  options.duel_contenders = 0;  // the re-timing alone
  std::vector<gpucmp::candidate_time> log;
  const gpucmp::search_choice chosen = gpucmp::choose_fastest_verified(5, describe, time, ok, log, "op", options, group);
  CHECK(chosen.index == 2);
  CHECK(chosen.seconds == 6.30);
  CHECK(log[2].timings == 3);
  CHECK(log[3].timings == 1);  // not its group's fastest
  CHECK(log[4].timings == 1);  // beyond the group margin
  // Without groups (or with the group margin off) the first timing decides: candidate 0.
  calls.clear();
  log.clear();
  CHECK(gpucmp::choose_fastest_verified(5, describe, time, ok, log, "op", options).index == 0);
  CHECK(log[2].timings == 1);
  calls.clear();
  log.clear();
  gpucmp::search_options no_groups = options;
  no_groups.refine_group_margin = 0;
  CHECK(gpucmp::choose_fastest_verified(5, describe, time, ok, log, "op", no_groups, group).index == 0);
}

TEST_CASE("the closest long candidates duel in sustained spells, and the one that holds its pace wins", "[ops][search]") {
  // Candidate 0 is a power-hungry configuration: fastest in short timings (0.90 ms), it
  // slows to 0.96 ms once the limiter catches up, from its fourth timing in a spell on.
  // Candidate 1 starts at 0.91 ms and holds 0.92 ms. 2 is 5 % behind: outside the duel.
  std::map<std::size_t, int> in_spell;
  std::size_t last = 99;
  std::vector<std::size_t> calls;
  auto time = [&](std::size_t i) {
    in_spell[i] = last == i ? in_spell[i] + 1 : 1;
    last = i;
    calls.push_back(i);
    if (i == 2) return 0.95e-3;
    if (i == 0) return in_spell[i] >= 4 ? 0.96e-3 : 0.90e-3;
    return in_spell[i] >= 4 ? 0.92e-3 : 0.91e-3;
  };
  gpucmp::search_options options;
  options.refine_rounds = 0;  // the duel alone
  std::vector<gpucmp::candidate_time> log;
  const auto chosen = gpucmp::choose_fastest_verified(
      3, [](std::size_t i) { return "c" + std::to_string(i); }, time, [](std::size_t) { return verified_ok(); }, log,
      "op", options);
  CHECK(chosen.index == 1);
  CHECK(chosen.seconds == 0.92e-3);
  // First timings, then spells of 8 in the order A B B A.
  std::vector<std::size_t> expected = {0, 1, 2};
  for (std::size_t who : {0, 1, 1, 0}) expected.insert(expected.end(), 8, who);
  CHECK(calls == expected);
  CHECK(log[0].duel_timings == 8);  // the second half of each spell
  CHECK(log[0].seconds == 0.96e-3);
  CHECK(log[1].duel_timings == 8);
  CHECK(log[2].duel_timings == 0);
  CHECK(log[2].seconds == 0.95e-3);
  // Short calls never duel (they do not reach the power limit within a batch), nor do
  // candidates outside the margin.
  calls.clear();
  auto short_call = [&](std::size_t i) {
    calls.push_back(i);
    return 1e-6 * (1.0 + 0.001 * double(i));
  };
  gpucmp::choose_fastest_verified(3, [](std::size_t i) { return "c" + std::to_string(i); }, short_call,
                                  [](std::size_t) { return verified_ok(); }, log, "op", options);
  CHECK(calls.size() == 3);
  calls.clear();
  auto far_apart = [&](std::size_t i) {
    calls.push_back(i);
    return 1e-3 * (1.0 + 0.05 * double(i));
  };
  gpucmp::choose_fastest_verified(3, [](std::size_t i) { return "c" + std::to_string(i); }, far_apart,
                                  [](std::size_t) { return verified_ok(); }, log, "op", options);
  CHECK(calls.size() == 3);
}

TEST_CASE("a duelist that fails drops out with its reason", "[ops][search]") {
  int timings_of_0 = 0;
  auto time = [&](std::size_t i) -> double {
    if (i == 0 && ++timings_of_0 > 3) throw gpucmp::unsupported("workspace gone");
    return i == 0 ? 1.0e-3 : 1.01e-3;
  };
  gpucmp::search_options options;
  options.refine_rounds = 0;
  std::vector<gpucmp::candidate_time> log;
  const auto chosen = gpucmp::choose_fastest_verified(
      2, [](std::size_t i) { return "c" + std::to_string(i); }, time, [](std::size_t) { return verified_ok(); }, log,
      "op", options);
  CHECK(chosen.index == 1);
  CHECK(log[0].failure == "unsupported: workspace gone");
  CHECK(log[0].seconds == 0);
  CHECK(log[1].duel_timings == 8);
}

TEST_CASE("with an incumbent, the first candidate joins the duel and keeps the lead unless beaten by more than the margin", "[ops][search]") {
  // Candidate 0 (the heuristic's choice) times 1.00 ms, but its first timing caught a slow
  // spell (1.05 ms): outside the 3 % duel margin, inside the 10 % re-timing margin.
  int timings_of_0 = 0;
  auto search = [&](double challenger_ms, double lead) {
    timings_of_0 = 0;
    auto time = [&](std::size_t i) {
      if (i == 0) return ++timings_of_0 == 1 ? 1.05e-3 : 1.00e-3;
      return i == 1 ? challenger_ms * 1e-3 : 1.02e-3;
    };
    gpucmp::search_options options;
    options.refine_rounds = 0;
    options.duel_incumbent_lead = lead;
    std::vector<gpucmp::candidate_time> log;
    const auto chosen = gpucmp::choose_fastest_verified(
        3, [](std::size_t i) { return "c" + std::to_string(i); }, time, [](std::size_t) { return verified_ok(); }, log,
        "op", options);
    return std::make_pair(chosen.index, log);
  };
  // 0.5 % ahead: no evidence against the incumbent, which duelled (8 kept timings).
  auto [close_choice, close_log] = search(0.995, 0.01);
  CHECK(close_choice == 0);
  CHECK(close_log[0].duel_timings == 8);
  CHECK(close_log[0].seconds == 1.00e-3);
  CHECK(close_log[1].duel_timings == 8);
  CHECK(close_log[2].duel_timings == 8);  // 2 % behind the fastest: inside the duel margin
  // 2 % ahead: the challenger wins.
  CHECK(search(0.98, 0.01).first == 1);
  // No incumbent (search_options' default): the fastest in the duel wins, and candidate 0,
  // outside the duel margin on its first timing, never duels.
  CHECK(gpucmp::search_options{}.duel_incumbent_lead == 0);
  auto [plain_choice, plain_log] = search(0.995, 0);
  CHECK(plain_choice == 1);
  CHECK(plain_log[0].duel_timings == 0);
  // Far behind (more than the re-timing margin): the incumbent does not join.
  auto far = [&](std::size_t i) { return i == 0 ? 1.2e-3 : (i == 1 ? 0.995e-3 : 1.0e-3); };
  gpucmp::search_options options;
  options.refine_rounds = 0;
  options.duel_incumbent_lead = 0.01;
  std::vector<gpucmp::candidate_time> log;
  const auto chosen = gpucmp::choose_fastest_verified(
      3, [](std::size_t i) { return "c" + std::to_string(i); }, far, [](std::size_t) { return verified_ok(); }, log, "op",
      options);
  CHECK(chosen.index == 1);
  CHECK(log[0].duel_timings == 0);
}

TEST_CASE("a sustained candidate is timed in batches that span the power cap's clock swings", "[ops][search]") {
  const gpucmp::search_options defaults;
  // An 8192^3 FP8 GEMM (0.9 ms): six calls, 5.4 ms, not one call that catches one clock state.
  CHECK(gpucmp::sustained_candidate(9e-4, defaults));
  CHECK(gpucmp::search_batch_calls(9e-4, defaults, 200) == 6);
  // Longer than the window: one call. Far shorter and not sustained: the 0.2 ms batch.
  CHECK(gpucmp::search_batch_calls(2e-2, defaults, 200) == 1);
  CHECK_FALSE(gpucmp::sustained_candidate(1e-5, defaults));
  CHECK(gpucmp::search_batch_calls(1e-5, defaults, 200) == 21);
  // At the threshold (50 us) the long window applies, up to the cap.
  CHECK(gpucmp::search_batch_calls(5e-5, defaults, 1000) == 101);
  CHECK(gpucmp::search_batch_calls(5e-5, defaults, 64) == 64);
  // Sustaining off: the short window for every candidate.
  gpucmp::search_options unsustained;
  unsustained.sustain_seconds = 0;
  CHECK_FALSE(gpucmp::sustained_candidate(9e-4, unsustained));
  CHECK(gpucmp::search_batch_calls(9e-4, unsustained, 200) == 1);
  // A zero-length first estimate does not divide by zero.
  CHECK(gpucmp::search_batch_calls(0.0, defaults, 200) == 200);
}

TEST_CASE("a search's timings go through the engine as fixed batches of its trials, long candidates settled", "[ops][search]") {
  const gpucmp::search_options defaults;
  gpucmp::measure_options preset = gpucmp::search_preset();
  CHECK(preset.power_settle_s == 0);  // a search times dozens of candidates
  preset.cooldown_s = 2;
  preset.hold_timeout_s = 3;
  preset.power = true;
  // A candidate's first timing: the engine sizes the batch from its warm-up to fill the
  // short window; nothing but the trials decides when to stop; the search's cool-down once.
  const gpucmp::measure_options first = gpucmp::search_timing_options(0.0, defaults, preset, true);
  CHECK_NOTHROW(first.validate());
  CHECK(first.batch == 0);
  CHECK(first.min_sample_time_s == defaults.min_batch_seconds);
  CHECK(first.max_batch == gpucmp::search_max_batch);
  CHECK(first.min_samples == std::size_t(defaults.trials));
  CHECK(first.max_samples == std::size_t(defaults.trials));
  CHECK(first.min_gpu_time_s == 0);
  CHECK(first.window_s == 0);
  CHECK(first.warmup_launches == 2);
  CHECK(first.warmup_time_s == 0);
  CHECK(first.settle_s == 0);
  CHECK(first.cooldown_s == 2);
  // What the caller set is honoured by every timing: hold, power.
  CHECK(first.hold_timeout_s == 3);
  CHECK(first.power);
  const gpucmp::measure_options later = gpucmp::search_timing_options(0.0, defaults, preset, false);
  CHECK(later.cooldown_s == 0);
  // Known to be long (0.9 ms): the batch spans the sustained window and the load runs first.
  const gpucmp::measure_options sustained = gpucmp::search_timing_options(9e-4, defaults, preset, false);
  CHECK_NOTHROW(sustained.validate());
  CHECK(sustained.batch == std::size_t(gpucmp::search_batch_calls(9e-4, defaults, int(gpucmp::search_max_batch))));
  CHECK(sustained.batch == 6);
  CHECK(sustained.settle_s == defaults.sustain_seconds);
  // Short (10 us): the short window, no settle.
  const gpucmp::measure_options brief = gpucmp::search_timing_options(1e-5, defaults, preset, false);
  CHECK(brief.batch == 21);
  CHECK(brief.settle_s == 0);
  // A tiny call never asks for more than the cap.
  CHECK(gpucmp::search_timing_options(1e-9, defaults, preset, false).batch == gpucmp::search_max_batch);
  // Paced for a sanitizer (one trial, no sustain, no batch window): one launch, one sample.
  gpucmp::search_options paced;
  paced.trials = 1;
  paced.sustain_seconds = 0;
  paced.min_batch_seconds = 0;
  const gpucmp::measure_options one = gpucmp::search_timing_options(9e-4, paced, gpucmp::search_preset(), false);
  CHECK(one.batch == 1);
  CHECK(one.max_samples == 1);
  CHECK(one.settle_s == 0);
}

TEST_CASE("a contender that fails when timed again drops out with its reason", "[ops][search]") {
  std::vector<gpucmp::candidate_time> log;
  int timings_of_0 = 0;
  auto time = [&](std::size_t i) -> double {
    if (i == 0 && ++timings_of_0 > 1) throw gpucmp::unsupported("workspace gone");
    return i == 0 ? 1.0 : 1.05;
  };
  const auto chosen = gpucmp::choose_fastest_verified(
      2, [](std::size_t i) { return "c" + std::to_string(i); }, time, [](std::size_t) { return verified_ok(); }, log,
      "op");
  CHECK(chosen.index == 1);
  CHECK(log[0].failure == "unsupported: workspace gone");
  CHECK(log[0].timings == 0);
  CHECK(log[0].seconds == 0);
}

TEST_CASE("a search where nothing verifies, or the context is lost, stops with the reason", "[ops][search]") {
  std::vector<gpucmp::candidate_time> log;
  auto wrong = [](std::size_t) {
    gpucmp::verification v;
    v.add(NAN, 1.0, 0.5, "output 0");
    return v;
  };
  CHECK_THROWS_WITH(gpucmp::choose_fastest_verified(
                        2, [](std::size_t) { return std::string("c"); }, [](std::size_t) { return 1e-6; }, wrong, log, "op x"),
                    GPUCMP_CONTAINS("none of the 2 candidates for op x ran and verified; first: rejected"));
  const gpucmp::cuda_error sticky(cudaErrorIllegalAddress, "kernel", "file.cu", 1, true);
  CHECK_THROWS_AS(gpucmp::choose_fastest_verified(
                      2, [](std::size_t) { return std::string("c"); },
                      [&](std::size_t) -> double { throw sticky; }, wrong, log, "op y"),
                  gpucmp::cuda_error);
}

TEST_CASE("precision and layout names parse back, and an unknown one is named in the error", "[ops][conv]") {
  for (auto t : {gpucmp::numerics::fp32, gpucmp::numerics::tf32, gpucmp::numerics::fp16, gpucmp::numerics::bf16}) {
    CHECK(gpucmp::parse_numerics(gpucmp::to_string(t)) == t);
  }
  try {
    gpucmp::parse_numerics("fp8");
    FAIL("fp8 is not a convolution precision");
  } catch (const gpucmp::invalid_argument& e) {
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("unknown precision 'fp8'"));
  }
  for (auto l : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw}) CHECK(gpucmp::parse_conv_layout(gpucmp::to_string(l)) == l);
  try {
    gpucmp::parse_conv_layout("chwn");
    FAIL("chwn is not a supported layout");
  } catch (const gpucmp::invalid_argument& e) {
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("unknown layout 'chwn' (nhwc, nchw)"));
  }
}
