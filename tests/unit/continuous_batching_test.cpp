// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// Continuous batching on a simulated model and clock: one request's TTFT and TPOT are its
// prefill and decode steps; a request arriving mid-decode joins at the next step boundary
// (the running one's tokens wait for that prefill); a full batch makes newcomers wait for a
// slot; the prefill budget splits admissions; slots are given back and reused; the goodput
// search brackets the highest rate that meets the SLO and keeps every rate it tried; bad
// requests are named.
#include "catch.hpp"

#include <gpucmp/serving/continuous_batching.hpp>

#include <algorithm>
#include <set>

namespace {

// A model whose prefill takes 10 ms + 1 us a prompt token and decode 5 ms + 0.1 ms a sequence.
struct simulated {
  double t = 0;
  std::vector<std::string> log;
  std::set<std::int64_t> held;
  gpucmp::serving_executor executor() {
    gpucmp::serving_executor e;
    e.prefill = [this](const std::vector<std::int64_t>& slots, const std::vector<std::int64_t>& prompts) {
      std::int64_t tokens = 0;
      for (std::int64_t p : prompts) tokens += p;
      for (std::int64_t s : slots) {
        if (!held.insert(s).second) throw gpucmp::error("slot " + std::to_string(s) + " given twice");
      }
      t += 0.010 + 1e-6 * double(tokens);
      log.push_back("prefill " + std::to_string(slots.size()));
    };
    e.decode = [this](const std::vector<std::int64_t>& slots) {
      t += 0.005 + 1e-4 * double(slots.size());
      log.push_back("decode " + std::to_string(slots.size()));
    };
    e.release = [this](std::int64_t slot) { held.erase(slot); };
    return e;
  }
  gpucmp::serving_clock clock() {
    return {[this] { return t; }, [this](double until) { t = std::max(t, until); }};
  }
};

}  // namespace

TEST_CASE("one request's TTFT is its prefill step and its TPOT a decode step", "[serving]") {
  simulated m;
  const gpucmp::batching_run r =
      gpucmp::serve_continuous_batching({{0.25, 1000, 4}}, {4, 8192}, m.executor(), m.clock());
  REQUIRE(r.requests.size() == 1);
  CHECK(r.requests[0].ttft() == Approx(0.011));
  CHECK(r.requests[0].tpot() == Approx(0.0051));
  CHECK(r.prefill_steps == 1);
  CHECK(r.decode_steps == 3);
  CHECK(r.span_s == Approx(0.011 + 3 * 0.0051));
  CHECK(m.held.empty());  // given back
}

TEST_CASE("a request arriving mid-decode joins at the next step boundary", "[serving]") {
  simulated m;
  // A at 0 (8 tokens), B at 0.02: A's prefill ends at 0.0101, its decodes at 0.0152, 0.0203;
  // B waits for that boundary, then its prefill runs before A's next token.
  const gpucmp::batching_run r =
      gpucmp::serve_continuous_batching({{0.0, 100, 8}, {0.02, 100, 3}}, {4, 8192}, m.executor(), m.clock());
  CHECK(r.requests[1].first_token_s == Approx(0.0203 + 0.0101));
  CHECK(r.requests[1].ttft() == Approx(0.0104));
  CHECK(m.log[0] == "prefill 1");
  CHECK(m.log[3] == "prefill 1");
  CHECK(m.log[4] == "decode 2");  // both in one step from then on
  // A's third token waited for B's prefill: its time per token is over one decode step.
  CHECK(r.requests[0].tpot() > 0.0052);
}

TEST_CASE("a full batch makes newcomers wait for a slot; the prefill budget splits admissions", "[serving]") {
  simulated m;
  const gpucmp::batching_run r = gpucmp::serve_continuous_batching({{0, 10, 3}, {0, 10, 3}, {0, 10, 2}}, {2, 8192}, m.executor(),
                                                                   m.clock());
  CHECK(m.log[0] == "prefill 2");
  // The third waits for a slot: two decode steps finish the first two, then its prefill.
  CHECK(m.log[1] == "decode 2");
  CHECK(m.log[2] == "decode 2");
  CHECK(m.log[3] == "prefill 1");
  CHECK(r.requests[2].first_token_s > r.requests[0].finished_s);
  simulated b;
  gpucmp::serve_continuous_batching({{0, 600, 1}, {0, 600, 1}}, {4, 1000}, b.executor(), b.clock());
  CHECK(b.log == std::vector<std::string>{"prefill 1", "prefill 1"});  // 1,200 tokens do not fit one 1,000-token step
}

TEST_CASE("the goodput search brackets the highest rate that meets the SLO", "[serving]") {
  auto serve_at = [](double rate) {
    simulated m;
    std::vector<gpucmp::serving_request> requests;
    for (int i = 0; i < 200; ++i) requests.push_back({double(i) / rate, 500, 16});
    return gpucmp::serve_continuous_batching(requests, {8, 8192}, m.executor(), m.clock());
  };
  const gpucmp::serving_slo slo{0.05, 0.008, 0.99};
  const gpucmp::goodput_result g = gpucmp::search_goodput(serve_at, slo, 1.0);
  REQUIRE(g.goodput_per_s > 0);
  CHECK(slo.met(serve_at(g.goodput_per_s)));
  // Some rate tried above it failed, and every rate that met the SLO is at most the goodput.
  bool above_failed = false;
  for (const gpucmp::goodput_step& s : g.steps) {
    if (s.met) CHECK(s.rate_per_s <= g.goodput_per_s);
    above_failed = above_failed || (!s.met && s.rate_per_s > g.goodput_per_s);
  }
  CHECK(above_failed);
  CHECK(g.steps.size() >= 6);
  // An SLO nothing meets: goodput 0, with the rates tried.
  const gpucmp::goodput_result none = gpucmp::search_goodput(serve_at, {0.001, 0.001, 0.99}, 1.0);
  CHECK(none.goodput_per_s == 0);
  CHECK(!none.steps.empty());
}

TEST_CASE("bad serving requests are refused by name", "[serving]") {
  simulated m;
  CHECK_THROWS_WITH(gpucmp::serve_continuous_batching({{1, 10, 1}, {0, 10, 1}}, {4, 100}, m.executor(), m.clock()),
                    GPUCMP_CONTAINS("arrivals must be sorted"));
  CHECK_THROWS_WITH(gpucmp::serve_continuous_batching({{0, 101, 1}}, {4, 100}, m.executor(), m.clock()),
                    GPUCMP_CONTAINS("request 0 has 101 prompt and 1 output tokens (1 or more; prompts up to 100)"));
  CHECK_THROWS_WITH(gpucmp::serve_continuous_batching({{0, 10, 0}}, {4, 100}, m.executor(), m.clock()),
                    GPUCMP_CONTAINS("request 0 has 10 prompt and 0 output tokens"));
  CHECK_THROWS_WITH(gpucmp::serve_continuous_batching({}, {0, 100}, m.executor(), m.clock()),
                    GPUCMP_CONTAINS("slots and max_prefill_tokens must be positive"));
  CHECK_THROWS_WITH(gpucmp::search_goodput([](double) { return gpucmp::batching_run{}; }, {}, 0),
                    GPUCMP_CONTAINS("the first rate must be positive"));
}
