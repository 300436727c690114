// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Serving a language model the way serving engines do (continuous batching), and its goodput:
// requests arrive (serving/latency.hpp's arrival patterns), wait for a free sequence slot,
// join the running batch with a prefill step (its first token), then take one token from each
// decode step of the whole running batch until they have their output, and leave at the step
// boundary where they finish, so others join without waiting for the batch to drain. Waiting
// requests are admitted before the next decode step (prefill first, as vLLM schedules by
// default), as many as there are free slots and the prefill step's token budget holds.
//   TTFT  arrival to the end of its prefill step (the first token)
//   TPOT  first token to last, over the tokens after the first
// Goodput is the highest arrival rate whose TTFT and TPOT percentiles stay within a stated
// SLO, found by a search over rates (doubling until the SLO breaks, then bisecting), every
// rate tried kept as a step of the search.
//
// The model is behind an executor: prefill(slots, prompt tokens) and decode(slots) that run
// a step and return when it has finished, and a clock: now() and wait_until(t). A GPU model
// with the steady clock serves for real (the decoder's serving benchmark); a simulated
// executor and clock make the schedule testable on the host. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/serving/latency.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace gpucmp {

/// One request: when it arrives, its prompt and how many tokens it generates.
struct serving_request {
  double arrival_s = 0;           ///< from the start of the run
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 1;  ///< the first comes from the prefill step
};

/// What happened to one request.
struct request_timing {
  double arrival_s = 0;
  double first_token_s = 0;  ///< end of its prefill step
  double finished_s = 0;     ///< end of the step that gave its last token
  std::int64_t output_tokens = 0;
  /// Time to first token.
  double ttft() const noexcept { return first_token_s - arrival_s; }
  /// Time per output token after the first (0 for a one-token request).
  double tpot() const noexcept { return output_tokens > 1 ? (finished_s - first_token_s) / double(output_tokens - 1) : 0.0; }
};

/// How the batch is run.
struct batching_options {
  std::int64_t slots = 16;                  ///< sequences in the running batch at most
  std::int64_t max_prefill_tokens = 8192;  ///< a prefill step's prompt tokens at most (one prompt always fits)
};

/// The model a batch runs on: each call runs one step to its end.
struct serving_executor {
  std::function<void(const std::vector<std::int64_t>& slots, const std::vector<std::int64_t>& prompt_tokens)> prefill;
  std::function<void(const std::vector<std::int64_t>& slots)> decode;
  std::function<void(std::int64_t slot)> release;  ///< a request left its slot (may be empty)
};

/// The clock a run is timed on.
struct serving_clock {
  std::function<double()> now;              ///< seconds since the run began
  std::function<void(double)> wait_until;  ///< until `now() >= t` (nothing arrives before)
};

/// What a run did.
struct batching_run {
  std::vector<request_timing> requests;  ///< in arrival order
  std::int64_t prefill_steps = 0;
  std::int64_t decode_steps = 0;
  double busy_s = 0;  ///< time inside steps
  double span_s = 0;  ///< first arrival to last finish
  latency_summary ttft, tpot;
  /// Output tokens a second over the span.
  double tokens_per_second() const noexcept {
    double n = 0;
    for (const request_timing& r : requests) n += double(r.output_tokens);
    return span_s > 0 ? n / span_s : 0.0;
  }
};

/// Serves `requests` (sorted by arrival) with continuous batching (this header's opening
/// comment). Throws invalid_argument for bad options or requests (unsorted arrivals, a prompt
/// or output of no tokens, a prompt over the prefill budget), and whatever the executor throws.
inline batching_run serve_continuous_batching(const std::vector<serving_request>& requests, const batching_options& options,
                                              const serving_executor& run, const serving_clock& clock) {
  if (options.slots <= 0 || options.max_prefill_tokens <= 0) {
    throw invalid_argument("continuous batching: slots and max_prefill_tokens must be positive");
  }
  if (!run.prefill || !run.decode || !clock.now || !clock.wait_until) {
    throw invalid_argument("continuous batching: needs prefill, decode, now and wait_until");
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const serving_request& r = requests[i];
    if (i > 0 && r.arrival_s < requests[i - 1].arrival_s) throw invalid_argument("continuous batching: arrivals must be sorted");
    if (r.prompt_tokens < 1 || r.output_tokens < 1 || r.prompt_tokens > options.max_prefill_tokens || !std::isfinite(r.arrival_s)) {
      throw invalid_argument("continuous batching: request " + std::to_string(i) + " has " + std::to_string(r.prompt_tokens) +
                             " prompt and " + std::to_string(r.output_tokens) + " output tokens (1 or more; prompts up to " +
                             std::to_string(options.max_prefill_tokens) + ")");
    }
  }
  batching_run out;
  out.requests.resize(requests.size());
  struct running {
    std::size_t request;
    std::int64_t slot, left;  // tokens still to generate
  };
  std::vector<running> batch;
  std::vector<std::int64_t> free_slots;
  for (std::int64_t s = options.slots - 1; s >= 0; --s) free_slots.push_back(s);
  std::deque<std::size_t> waiting;
  std::size_t next = 0, done = 0;
  auto step = [&](const std::function<void()>& f) {
    const double began = clock.now();
    f();
    const double ended = clock.now();
    out.busy_s += ended - began;
    return ended;
  };
  while (done < requests.size()) {
    const double t = clock.now();
    while (next < requests.size() && requests[next].arrival_s <= t) waiting.push_back(next++);
    if (batch.empty() && waiting.empty()) {
      clock.wait_until(requests[next].arrival_s);
      continue;
    }
    // Admit waiting requests into free slots, up to the prefill budget.
    std::vector<std::int64_t> slots, prompts;
    std::vector<std::size_t> admitted;
    std::int64_t tokens = 0;
    while (!waiting.empty() && !free_slots.empty() && tokens + requests[waiting.front()].prompt_tokens <= options.max_prefill_tokens) {
      const std::size_t r = waiting.front();
      waiting.pop_front();
      slots.push_back(free_slots.back());
      free_slots.pop_back();
      prompts.push_back(requests[r].prompt_tokens);
      admitted.push_back(r);
      tokens += requests[r].prompt_tokens;
    }
    std::vector<running> finished;
    if (!admitted.empty()) {
      const double ended = step([&] { run.prefill(slots, prompts); });
      ++out.prefill_steps;
      for (std::size_t i = 0; i < admitted.size(); ++i) {
        request_timing& timing = out.requests[admitted[i]];
        timing.arrival_s = requests[admitted[i]].arrival_s;
        timing.first_token_s = ended;
        timing.output_tokens = requests[admitted[i]].output_tokens;
        running r{admitted[i], slots[i], requests[admitted[i]].output_tokens - 1};
        if (r.left == 0) {
          timing.finished_s = ended;
          finished.push_back(r);
        } else {
          batch.push_back(r);
        }
      }
    } else {
      std::vector<std::int64_t> active;
      for (const running& r : batch) active.push_back(r.slot);
      const double ended = step([&] { run.decode(active); });
      ++out.decode_steps;
      std::vector<running> still;
      for (running& r : batch) {
        if (--r.left == 0) {
          out.requests[r.request].finished_s = ended;
          finished.push_back(r);
        } else {
          still.push_back(r);
        }
      }
      batch = std::move(still);
    }
    for (const running& r : finished) {
      if (run.release) run.release(r.slot);
      free_slots.push_back(r.slot);
      ++done;
    }
  }
  if (!requests.empty()) {
    double last = 0;
    std::vector<double> ttft, tpot;
    for (const request_timing& r : out.requests) {
      last = std::max(last, r.finished_s);
      ttft.push_back(r.ttft());
      if (r.output_tokens > 1) tpot.push_back(r.tpot());
    }
    out.span_s = last - requests.front().arrival_s;
    out.ttft = summarize_latencies(ttft);
    if (!tpot.empty()) out.tpot = summarize_latencies(tpot);
  }
  return out;
}

/// A latency objective: the TTFT and TPOT percentile (0.99: p99) within their bounds.
struct serving_slo {
  double ttft_s = 0.5;
  double tpot_s = 0.05;
  double percentile = 0.99;
  /// Whether `r` met it.
  bool met(const batching_run& r) const {
    auto at = [&](const latency_summary& l) { return percentile >= 0.99 ? l.p99 : percentile >= 0.9 ? l.p90 : l.p50; };
    return at(r.ttft) <= ttft_s && (r.tpot.count == 0 || at(r.tpot) <= tpot_s);
  }
};

/// One rate the goodput search tried.
struct goodput_step {
  double rate_per_s = 0;
  bool met = false;
  double ttft_p99_s = 0, tpot_p99_s = 0, tokens_per_second = 0;
};

/// The search's verdict and every rate it tried.
struct goodput_result {
  double goodput_per_s = 0;  ///< the highest rate tried that met the SLO (0: none did)
  std::vector<goodput_step> steps;
};

/// The highest request rate at which `serve_at(rate)` meets `slo`: starting at `first_rate`,
/// doubling until a rate fails, then bisecting between the last that met it and the first
/// that did not, `bisections` times. Throws invalid_argument for a rate that is not positive.
inline goodput_result search_goodput(const std::function<batching_run(double rate_per_s)>& serve_at, const serving_slo& slo,
                                     double first_rate, int bisections = 5, int max_doublings = 12) {
  if (!(first_rate > 0) || !std::isfinite(first_rate)) throw invalid_argument("goodput search: the first rate must be positive");
  goodput_result out;
  auto attempt = [&](double rate) {
    const batching_run r = serve_at(rate);
    const bool ok = slo.met(r);
    out.steps.push_back({rate, ok, r.ttft.p99, r.tpot.p99, r.tokens_per_second()});
    if (ok) out.goodput_per_s = std::max(out.goodput_per_s, rate);
    return ok;
  };
  double good = 0, bad = first_rate;
  for (int i = 0; i <= max_doublings && attempt(bad); ++i) {
    good = bad;
    bad *= 2;
  }
  if (good == 0) {  // even the first rate failed: look below it
    for (int i = 0; i < bisections && good == 0; ++i) {
      bad /= 2;
      if (attempt(bad)) good = bad;
    }
    if (good == 0) return out;
    bad = good * 2;
  }
  for (int i = 0; i < bisections; ++i) {
    const double mid = (good + bad) / 2;
    if (attempt(mid)) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  return out;
}

}  // namespace gpucmp
