// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// benchmarks/decoder's serve mode: the decoder (models/decoder.cuh) serving requests with
// continuous batching on a paged KV cache (serving/continuous_batching.hpp), and its goodput:
// the highest Poisson arrival rate whose TTFT and TPOT percentiles stay within an SLO, found by
// doubling and then bisecting the rate, every rate tried written with its latencies.
//   decoder serve --out=FILE.json [--model=llama-3-8b] [--dtype=bf16] [--slots=64]
//                 [--page_size=64] [--prompt=1536 | MIN-MAX] [--output=512 | MIN-MAX]
//                 [--requests=128] [--ttft=0.5] [--tpot=0.05] [--percentile=0.99]
//                 [--first_rate=1] [--bisections=4] [--max_prefill_tokens=8192] [--seed=1]
//                 [--real_time] [--full_search]
// Every step runs on the GPU and is timed by the host's steady clock around it, its uploads and
// its synchronisation included. Unless --real_time, the clock skips the time the server would
// sit idle waiting for the next arrival (a rate's run then takes its busy time only, and the
// GPU never idles between steps, as a loaded server's does not). Before the search, every step
// shape the runs can take is built and verified and each decode shape's CUDA graph captured,
// so no run builds anything; unless --full_search, each shape's search skips its sustained duel
// (decoder_options::sustained_duel: it settles about 1 % at up to 2 s a linear layer, and an
// 8B model on 64 slots has 18 shapes of five), and the build's wall time is written. Exit
// status 1 on an error, 2 for bad flags.
#pragma once

#include "program_flags.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/io/json.hpp>
#include <gpucmp/models/decoder.cuh>
#include <gpucmp/serving/continuous_batching.hpp>
#include <gpucmp/serving/latency.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace gpucmp_bench {
namespace detail {

struct serve_settings {
  std::string model = "llama-3-8b", out;
  gpucmp::numerics dtype = gpucmp::numerics::bf16;
  std::int64_t slots = 64, page_size = 64, requests = 128, max_prefill_tokens = 8192, bisections = 4;
  std::int64_t prompt_min = 1536, prompt_max = 1536, output_min = 512, output_max = 512;
  std::uint64_t seed = 1;
  double first_rate = 1;
  gpucmp::serving_slo slo;
  bool real_time = false;
  bool full_search = false;
};

// "N" or "MIN-MAX" (whole numbers from 1).
inline void parse_range(const std::string& text, const char* flag, std::int64_t& low, std::int64_t& high) {
  const std::size_t dash = text.find('-');
  low = whole_number(text.substr(0, dash), 1, std::int64_t{1} << 20, "decoder serve", flag);
  high = dash == std::string::npos ? low : whole_number(text.substr(dash + 1), 1, std::int64_t{1} << 20, "decoder serve", flag);
  if (high < low) throw gpucmp::invalid_argument(std::string("decoder serve: ") + flag + " " + text + " is not MIN-MAX");
}

inline serve_settings parse_serve_flags(int argc, char** argv) {
  serve_settings s;
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    auto whole = [&](const char* v, long long minimum, const char* flag) {
      return whole_number(v, minimum, std::int64_t{1} << 30, "decoder serve", flag);
    };
    auto real = [&](const char* v, double minimum, double maximum, const char* flag) {
      return real_number(v, minimum, maximum, "decoder serve", flag);
    };
    if (const char* v = flag_value(a, "--out=")) {
      s.out = v;
    } else if (const char* v = flag_value(a, "--model=")) {
      s.model = v;
    } else if (const char* v = flag_value(a, "--dtype=")) {
      s.dtype = gpucmp::parse_numerics(v);
    } else if (const char* v = flag_value(a, "--slots=")) {
      s.slots = whole(v, 1, "--slots");
    } else if (const char* v = flag_value(a, "--page_size=")) {
      s.page_size = whole(v, 1, "--page_size");
    } else if (const char* v = flag_value(a, "--prompt=")) {
      parse_range(v, "--prompt", s.prompt_min, s.prompt_max);
    } else if (const char* v = flag_value(a, "--output=")) {
      parse_range(v, "--output", s.output_min, s.output_max);
    } else if (const char* v = flag_value(a, "--requests=")) {
      s.requests = whole(v, 1, "--requests");
    } else if (const char* v = flag_value(a, "--max_prefill_tokens=")) {
      s.max_prefill_tokens = whole(v, 1, "--max_prefill_tokens");
    } else if (const char* v = flag_value(a, "--bisections=")) {
      s.bisections = whole(v, 0, "--bisections");
    } else if (const char* v = flag_value(a, "--seed=")) {
      s.seed = std::uint64_t(whole(v, 0, "--seed"));
    } else if (const char* v = flag_value(a, "--first_rate=")) {
      s.first_rate = real(v, 1e-6, 1e9, "--first_rate");
    } else if (const char* v = flag_value(a, "--ttft=")) {
      s.slo.ttft_s = real(v, 1e-6, 1e6, "--ttft");
    } else if (const char* v = flag_value(a, "--tpot=")) {
      s.slo.tpot_s = real(v, 1e-6, 1e6, "--tpot");
    } else if (const char* v = flag_value(a, "--percentile=")) {
      s.slo.percentile = real(v, 0.5, 0.99, "--percentile");
    } else if (std::string(a) == "--real_time") {
      s.real_time = true;
    } else if (std::string(a) == "--full_search") {
      s.full_search = true;
    } else {
      throw gpucmp::invalid_argument(std::string("decoder serve: unknown flag '") + a + "'");
    }
  }
  if (s.out.empty()) throw gpucmp::invalid_argument("decoder serve: --out=FILE.json is required");
  if (s.dtype != gpucmp::numerics::bf16 && s.dtype != gpucmp::numerics::fp16) {
    throw gpucmp::invalid_argument(std::string("decoder serve: --dtype takes bf16 or fp16, got ") + gpucmp::to_string(s.dtype));
  }
  if (s.prompt_max > s.max_prefill_tokens) {
    throw gpucmp::invalid_argument("decoder serve: a prompt of " + std::to_string(s.prompt_max) +
                                   " tokens is past --max_prefill_tokens " + std::to_string(s.max_prefill_tokens));
  }
  return s;
}

// A token id of the vocabulary, fixed by (request, position): the steps' work does not depend
// on which ids they take.
inline std::int32_t token_id(std::uint64_t request, std::uint64_t position, std::int64_t vocab) {
  return std::int32_t(gpucmp::random_bits(request * 1000003 + 7, position) % std::uint64_t(vocab));
}

// Real time, or real time with the idle waits skipped (serve_settings::real_time).
class serve_clock {
 public:
  explicit serve_clock(bool real_time) : m_real_time(real_time), m_start(std::chrono::steady_clock::now()) {}
  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count() + m_skipped;
  }
  void wait_until(double t) {
    const double n = now();
    if (t <= n) return;
    if (m_real_time) {
      std::this_thread::sleep_for(std::chrono::duration<double>(t - n));
    } else {
      m_skipped += t - n;
    }
  }

 private:
  bool m_real_time;
  std::chrono::steady_clock::time_point m_start;
  double m_skipped = 0;
};

inline gpucmp::detail::json number(double v) { return gpucmp::detail::json::make_number(v); }

inline gpucmp::detail::json latencies(const gpucmp::latency_summary& l) {
  gpucmp::detail::json j = gpucmp::detail::json::make_object();
  for (const auto& [key, value] : {std::pair<const char*, double>{"count", double(l.count)}, {"p50_s", l.p50}, {"p90_s", l.p90},
                                   {"p99_s", l.p99}, {"max_s", l.max}, {"mean_s", l.mean}}) {
    j.members()[key] = number(value);
  }
  return j;
}

}  // namespace detail

/// `decoder serve ...` (argv[1] "serve"): the exit status.
inline int decoder_serve_main(int argc, char** argv) {
  using namespace detail;
  serve_settings s;
  try {
    s = parse_serve_flags(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  try {
    const gpucmp::decoder_config config = gpucmp::decoder_preset(s.model);
    gpucmp::decoder_options o;
    o.dtype = s.dtype;
    o.max_batch = s.slots;
    o.max_context = s.prompt_max + s.output_max;
    o.page_size = s.page_size;
    o.sustained_duel = s.full_search;  // kv_pages 0: every slot can hold its longest request, so no step runs out of pages
    gpucmp::stream stream;
    gpucmp::decoder d(config, o, stream.get());
    const std::int64_t vocab = config.vocab_size;
    std::vector<std::int64_t> all_slots(std::size_t(s.slots));
    for (std::int64_t i = 0; i < s.slots; ++i) all_slots[std::size_t(i)] = i;
    auto run_step = [&](const std::vector<std::int64_t>& slots, const std::vector<std::vector<std::int32_t>>& tokens) {
      d.step(slots, tokens, stream.get());
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    };
    auto prompt_of = [&](std::uint64_t request, std::int64_t length) {
      std::vector<std::int32_t> p(static_cast<std::size_t>(length));
      for (std::int64_t i = 0; i < length; ++i) p[std::size_t(i)] = token_id(request, std::uint64_t(i), vocab);
      return p;
    };
    // Every shape a run can take (models/step_buckets.hpp), built before any run: prefill steps
    // of 1 to the most prompts the prefill budget admits at each prompt bucket, and decode steps
    // of every batch bucket, their graphs captured.
    std::printf("decoder serve: building every step shape of %s on %lld slots\n", s.model.c_str(), (long long)s.slots);
    std::fflush(stdout);
    const auto build_start = std::chrono::steady_clock::now();
    for (std::int64_t low = s.prompt_min; low <= s.prompt_max;) {  // each bucket of prompt lengths
      const std::int64_t bucket = gpucmp::token_bucket(low, o.max_context), length = std::min(bucket, s.prompt_max);
      const std::int64_t most = std::min(s.slots, s.max_prefill_tokens / low);  // prompts a prefill step admits
      for (std::int64_t k = 1; k <= most; k = k == most ? k + 1 : std::min(k * 2, most)) {
        const std::vector<std::int64_t> slots(all_slots.begin(), all_slots.begin() + k);
        run_step(slots, std::vector<std::vector<std::int32_t>>(std::size_t(k), prompt_of(0, length)));
        for (std::int64_t slot : slots) d.release(slot);
      }
      low = bucket + 1;
    }
    for (std::int64_t b = 1; b <= s.slots; b = b == s.slots ? b + 1 : std::min(b * 2, s.slots)) {
      const std::vector<std::int64_t> slots(all_slots.begin(), all_slots.begin() + b);
      run_step(slots, std::vector<std::vector<std::int32_t>>(std::size_t(b), prompt_of(0, 1)));
      run_step(slots, std::vector<std::vector<std::int32_t>>(std::size_t(b), {1}));
      for (std::int64_t slot : slots) d.release(slot);
    }
    const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
    std::printf("decoder serve: built in %.1f s (%s search)\n", build_s, s.full_search ? "full" : "quick");
    std::fflush(stdout);
    // The requests of a rate: Poisson arrivals, lengths uniform in their ranges (fixed by the seed).
    auto requests_at = [&](double rate) {
      const std::vector<double> times =
          gpucmp::arrival_times(gpucmp::arrival_pattern::poisson, rate, std::size_t(s.requests), s.seed);
      auto uniform = [&](std::uint64_t stream, std::size_t i, std::int64_t low, std::int64_t high) {
        return low + std::int64_t(gpucmp::random_bits(stream, i) % std::uint64_t(high - low + 1));
      };
      std::vector<gpucmp::serving_request> r(times.size());
      for (std::size_t i = 0; i < r.size(); ++i) {
        r[i].arrival_s = times[i];
        r[i].prompt_tokens = uniform(s.seed + 11, i, s.prompt_min, s.prompt_max);
        r[i].output_tokens = uniform(s.seed + 13, i, s.output_min, s.output_max);
      }
      return r;
    };
    gpucmp::batching_options batching;
    batching.slots = s.slots;
    batching.max_prefill_tokens = s.max_prefill_tokens;
    gpucmp::detail::json runs = gpucmp::detail::json::make_array();
    auto serve_at = [&](double rate) {
      const std::vector<gpucmp::serving_request> requests = requests_at(rate);
      std::vector<std::uint64_t> request_in(std::size_t(s.slots), 0);  // which request a slot holds, for its ids
      std::vector<std::int64_t> position(std::size_t(s.slots), 0);
      std::size_t admitted = 0;
      gpucmp::serving_executor executor;
      executor.prefill = [&](const std::vector<std::int64_t>& slots, const std::vector<std::int64_t>& prompts) {
        std::vector<std::vector<std::int32_t>> tokens;
        for (std::size_t i = 0; i < slots.size(); ++i) {
          const std::uint64_t request = ++admitted;
          request_in[std::size_t(slots[i])] = request;
          position[std::size_t(slots[i])] = prompts[i];
          tokens.push_back(prompt_of(request, prompts[i]));
        }
        run_step(slots, tokens);
      };
      executor.decode = [&](const std::vector<std::int64_t>& slots) {
        std::vector<std::vector<std::int32_t>> tokens;
        for (std::int64_t slot : slots) {
          tokens.push_back({token_id(request_in[std::size_t(slot)], std::uint64_t(position[std::size_t(slot)]++), vocab)});
        }
        run_step(slots, tokens);
      };
      executor.release = [&](std::int64_t slot) { d.release(slot); };
      serve_clock clock(s.real_time);
      const gpucmp::serving_clock timing{[&] { return clock.now(); }, [&](double t) { clock.wait_until(t); }};
      const gpucmp::batching_run r = gpucmp::serve_continuous_batching(requests, batching, executor, timing);
      std::printf("  %9.3f requests/s: TTFT p50 %7.1f ms p99 %7.1f ms, TPOT p50 %6.2f ms p99 %6.2f ms, %8.0f tokens/s, %s\n",
                  rate, r.ttft.p50 * 1e3, r.ttft.p99 * 1e3, r.tpot.p50 * 1e3, r.tpot.p99 * 1e3, r.tokens_per_second(),
                  s.slo.met(r) ? "meets the SLO" : "misses it");
      std::fflush(stdout);
      gpucmp::detail::json j = gpucmp::detail::json::make_object();
      j.members()["rate_per_s"] = number(rate);
      j.members()["met"] = gpucmp::detail::json::make_bool(s.slo.met(r));
      j.members()["ttft"] = latencies(r.ttft);
      j.members()["tpot"] = latencies(r.tpot);
      j.members()["tokens_per_s"] = number(r.tokens_per_second());
      j.members()["prefill_steps"] = number(double(r.prefill_steps));
      j.members()["decode_steps"] = number(double(r.decode_steps));
      j.members()["busy_s"] = number(r.busy_s);
      j.members()["span_s"] = number(r.span_s);
      runs.items().push_back(std::move(j));
      return r;
    };
    const gpucmp::goodput_result g = gpucmp::search_goodput(serve_at, s.slo, s.first_rate, int(s.bisections));
    std::printf("decoder serve: goodput %.3f requests/s (TTFT p%g <= %g s, TPOT p%g <= %g s)\n", g.goodput_per_s,
                s.slo.percentile * 100, s.slo.ttft_s, s.slo.percentile * 100, s.slo.tpot_s);
    gpucmp::detail::json out = gpucmp::detail::json::make_object();
    auto& m = out.members();
    m["model"] = gpucmp::detail::json::make_string(s.model);
    m["dtype"] = gpucmp::detail::json::make_string(gpucmp::to_string(s.dtype));
    m["slots"] = number(double(s.slots));
    m["page_size"] = number(double(s.page_size));
    m["prompt_tokens"] = gpucmp::detail::json::make_array();
    m["prompt_tokens"].items() = {number(double(s.prompt_min)), number(double(s.prompt_max))};
    m["output_tokens"] = gpucmp::detail::json::make_array();
    m["output_tokens"].items() = {number(double(s.output_min)), number(double(s.output_max))};
    m["requests"] = number(double(s.requests));
    m["max_prefill_tokens"] = number(double(s.max_prefill_tokens));
    m["arrivals"] = gpucmp::detail::json::make_string("poisson");
    m["clock"] = gpucmp::detail::json::make_string(s.real_time ? "real time" : "real time, idle waits skipped");
    gpucmp::detail::json slo = gpucmp::detail::json::make_object();
    slo.members()["ttft_s"] = number(s.slo.ttft_s);
    slo.members()["tpot_s"] = number(s.slo.tpot_s);
    slo.members()["percentile"] = number(s.slo.percentile);
    m["slo"] = slo;
    m["search"] = gpucmp::detail::json::make_string(s.full_search ? "full" : "without the sustained duel");
    m["build_s"] = number(build_s);
    m["goodput_per_s"] = number(g.goodput_per_s);
    m["runs"] = runs;
    std::ofstream file(s.out);
    file << gpucmp::detail::to_json_text(out, 1) << "\n";
    if (!file) throw gpucmp::invalid_argument(s.out + ": cannot write");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decoder serve: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace gpucmp_bench
