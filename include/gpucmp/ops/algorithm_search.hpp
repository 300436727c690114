// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The rules of the timed algorithm search every operation shares (the verified fastest, the
// re-timing of close contenders, the sustained duel and the incumbent) and the timer that
// measures candidates through the engine, so a search is timed like any benchmark. Heuristics
// rank algorithms by a model; on skinny, unaligned or small problems their first choice can
// be several times slower than the best, so the library times the top candidates.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/ops/verification.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <utility>
#include <string>
#include <vector>

namespace gpucmp {

/// How an operation picks its algorithm.
enum class algorithm_choice {
  heuristic,  ///< the library heuristic's first choice, untimed
  search,     ///< the fastest of the heuristic's top candidates, timed on this GPU
};

/// "heuristic" or "search".
inline const char* to_string(algorithm_choice c) noexcept { return c == algorithm_choice::heuristic ? "heuristic" : "search"; }

/// Settings of a timed search. Each rule's measured evidence (what went wrong without it, on
/// which GPU, and what it gave) is in docs/results/h200-operations.md, "Why the search is
/// built this way"; the rules themselves in docs/operations.md, "Algorithm choice".
struct search_options {
  int max_candidates = 16;          ///< how many of the heuristic's candidates are timed
  int trials = 5;                   ///< timed batches per candidate (median taken)
  double min_batch_seconds = 2e-4;  ///< each batch is at least this long (launch gaps amortised)
  bool in_graph = true;             ///< time batches as CUDA-graph replays, as graph mode measures
  /// Before its trials, a candidate runs back to back at least this long, so it is ranked at
  /// the clocks it sustains, not at a burst's (a power-capped GPU slows under sustained load).
  double sustain_seconds = 0.03;
  /// Only candidates whose one call takes at least this long are sustained (smaller ones do
  /// not reach the power limit within a batch, and a sweep has thousands of them).
  double sustain_min_call_seconds = 5e-5;
  /// A sustained candidate's batches are at least this long: under a power cap the clocks
  /// swing between states on a millisecond scale, and a batch must span several swings, not
  /// sample one state.
  double sustained_batch_seconds = 5e-3;
  /// Close contenders are timed again: candidates within `refine_margin` of the fastest (the
  /// fastest `refine_contenders` of them) get `refine_rounds` more timings, interleaved and
  /// in rotating order, are ranked by the median of all their timings, and are chosen before
  /// any candidate timed only once (verification permitting): one timing each ranks a family
  /// of near-equal configurations by noise. 0 rounds: one timing per candidate.
  int refine_rounds = 2;
  double refine_margin = 0.10;  ///< relative to the fastest first timing
  int refine_contenders = 4;    ///< at most this many are re-timed (the fastest first)
  /// Where the candidates come in groups (a convolution's two cuDNN APIs: the operation's
  /// candidate_group()), the fastest of each group is a contender too, beyond
  /// `refine_contenders`, when its first timing is within this of the fastest: a first timing
  /// can be off for a whole group (on the H200 the legacy API's ran 6-29 % above its time in
  /// the committed run at batch 32, and the choice followed that error;
  /// docs/architecture.md). 0: no group contenders.
  double refine_group_margin = 0.5;
  /// Sustained duel: where the best call takes at least `duel_min_call_seconds`, the fastest
  /// `duel_contenders` within `duel_margin` of it are each timed again and again for a spell
  /// (up to `duel_timings` timings or `duel_spell_seconds` of wall time), twice, in the order
  /// A B B A, and ranked by the median of the second half of each spell, where the power
  /// limiter has caught up with that candidate's own draw: short timings under a power cap
  /// can favour configurations that draw more power, since the limiter lowers the clocks
  /// only after ~0.1 s and the slowdown a candidate causes falls on whichever runs next.
  /// 0 or 1 contenders: no duel.
  int duel_contenders = 2;
  double duel_margin = 0.03;             ///< relative to the fastest, after re-timing
  double duel_min_call_seconds = 2e-4;   ///< shorter calls do not reach the power limit in a batch
  int duel_timings = 8;                  ///< at most this many timings per spell
  double duel_spell_seconds = 0.5;       ///< and at most this much wall time per spell
  /// The caller's first candidate (the library heuristic's own choice) as the duel's
  /// incumbent: it joins the duel whenever it is within `refine_margin` of the fastest, and
  /// keeps the lead unless a duelist's sustained median beats it by more than this fraction:
  /// a duel resolves about 1 %, so a smaller lead is no evidence against the heuristic.
  /// 0: no incumbent (gemm_options' search sets 0.01).
  double duel_incumbent_lead = 0;
};

/// One candidate's timing during a search.
struct candidate_time {
  std::string description;  ///< the algorithm, as the wrapper describes it
  double seconds = 0;       ///< median seconds per call (0 when it failed to run)
  std::string failure;      ///< why it could not run, if it could not
  int timings = 0;          ///< how often it was timed (more than 1: a close contender, seconds is the median)
  int duel_timings = 0;     ///< timings kept from the sustained duel (then seconds is their median)
};

/// Whether a candidate whose one call takes `once` seconds is sustained before its trials and
/// timed in long batches (options.sustain_*).
inline bool sustained_candidate(double once, const search_options& options) noexcept {
  return once >= options.sustain_min_call_seconds && options.sustain_seconds > 0;
}

/// Calls in one timed batch of a search for a candidate whose one call takes `once` seconds:
/// enough to fill options.min_batch_seconds, or options.sustained_batch_seconds when the
/// candidate is sustained (options.sustain_*), and at least 1 and at most `cap`.
inline int search_batch_calls(double once, const search_options& options, int cap) {
  const double window = sustained_candidate(once, options)
                            ? std::max(options.min_batch_seconds, options.sustained_batch_seconds)
                            : options.min_batch_seconds;
  const double calls = std::floor(window / std::max(once, 1e-9)) + 1;
  return int(std::clamp(calls, 1.0, double(std::max(cap, 1))));
}

/// The measurement options a search starts from: the engine's defaults with no power
/// settle. What a caller sets here is honoured by every timing of the search: the stream
/// hold and its timeout, power (each timing then spans power_window_s), the time budget of
/// one timing (timeout_s: a candidate that runs past it is a recorded failure) and the NVTX
/// name. cooldown_s idles the GPU once, before the search's first timing. The timer sets the
/// rest for each timing (search_timing_options()).
inline measure_options search_preset() {
  measure_options preset;
  preset.power_settle_s = 0;  // a search times dozens of candidates; settle_s sustains the long ones
  return preset;
}

/// The launches one timed sample of a search holds at most (a held stream's launch queue is
/// finite; hot and graph mode alike).
constexpr std::size_t search_max_batch = 200;

/// The engine options of one timing of a search: `preset` (search_preset()) with a warm-up
/// of two launches, `options.trials` samples and nothing else deciding when to stop.
/// `once` is the candidate's seconds per call from an earlier timing, or 0 for its first:
/// then the engine sizes the batch from its warm-up to fill options.min_batch_seconds.
/// Otherwise the batch is search_batch_calls(once), and a sustained candidate
/// (sustained_candidate(once)) first runs back to back for options.sustain_seconds
/// (measure_options::settle_s). `first_of_search`: keep the preset's cool-down.
inline measure_options search_timing_options(double once, const search_options& options, const measure_options& preset,
                                             bool first_of_search) {
  measure_options o = preset;
  o.warmup_launches = 2;  // lazy initialisation, and the estimate that sizes the batch
  o.warmup_time_s = 0;
  if (!first_of_search) o.cooldown_s = 0;
  o.min_samples = o.max_samples = std::size_t(std::max(1, options.trials));
  o.min_gpu_time_s = 0;
  o.window_s = 0;
  o.max_batch = search_max_batch;
  o.settle_s = 0;
  if (!(once > 0)) {
    o.batch = 0;
    o.min_sample_time_s = options.min_batch_seconds;
  } else {
    o.batch = std::size_t(search_batch_calls(once, options, int(search_max_batch)));
    if (sustained_candidate(once, options)) o.settle_s = options.sustain_seconds;
  }
  return o;
}

/// Times the candidates of one search through an engine, so a search is measured like any
/// other benchmark: CUDA graph replays of a batch of calls (hot mode, launches behind a held
/// stream, when search_options::in_graph is off), on the engine's stream, with its hold,
/// power and time budget. A candidate's first timing sizes its batches; a candidate whose
/// call is long enough to be sustained (search_options::sustain_*) is timed again at once,
/// sustained, and that timing counts. Not copyable; one per search.
class candidate_timer {
 public:
  /// A timer on `eng` with `options`' trials, batches and sustain, and the measurement
  /// settings of `preset` (search_preset()).
  candidate_timer(engine& eng, const search_options& options, const measure_options& preset = search_preset())
      : m_engine(eng), m_options(options), m_preset(preset) {}
  candidate_timer(const candidate_timer&) = delete;
  candidate_timer& operator=(const candidate_timer&) = delete;

  /// The stream the timings run on (the engine's).
  cudaStream_t stream() const noexcept { return m_engine.stream(); }

  /// Median seconds per call of `launch(stream)`, the enqueue of candidate `candidate`.
  /// Throws what the engine throws (gpucmp::error, cuda_error).
  template <class Launch>
  double time(std::size_t candidate, Launch&& launch) {
    const mode m = m_options.in_graph ? mode::graph : mode::hot;
    auto found = m_once.find(candidate);
    if (found == m_once.end()) {
      const double once = measure(launch, m, 0.0);
      found = m_once.emplace(candidate, once).first;
      if (!sustained_candidate(once, m_options)) return once;
    }
    return measure(launch, m, found->second);
  }

 private:
  template <class Launch>
  double measure(Launch& launch, mode m, double once) {
    measure_options o = search_timing_options(once, m_options, m_preset, !m_started);
    m_started = true;
    return m_engine.measure(launch, m, o).gpu.median;
  }

  engine& m_engine;
  search_options m_options;
  measure_options m_preset;
  std::map<std::size_t, double> m_once;  // seconds per call of each candidate's first timing
  bool m_started = false;
};

/// Which candidate a search chose.
struct search_choice {
  std::size_t index = 0;    ///< the candidate
  double seconds = 0;       ///< its median per call
  double wall_seconds = 0;  ///< the whole search's wall time (search()): what a cold start pays once
};

/// What a search settled for an operation: how its candidate was chosen, that candidate's
/// median and every timing. Operations keep one, so adopt_search(), search_log() and
/// algorithm() read the same record (the operation selects the candidate itself).
struct search_record {
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< heuristic until a search ran
  double searched_seconds = 0;                               ///< the chosen candidate's median in the search
  std::vector<candidate_time> log;                           ///< every timing of the search

  /// Keeps a search's verdict and timings.
  void adopt(const search_choice& chosen, std::vector<candidate_time> timings) {
    chosen_by = algorithm_choice::search;
    searched_seconds = chosen.seconds;
    log = std::move(timings);
  }
};

namespace detail {

/// Times candidate `i` with `time(i)`; a gpucmp::error becomes `failure` (and +inf), a sticky
/// CUDA error is rethrown: the context is gone and nothing else can run.
template <class Time>
double time_candidate(Time& time, std::size_t i, std::string& failure) {
  try {
    return time(i);
  } catch (const cuda_error& e) {
    if (e.sticky()) throw;
    failure = e.what();
  } catch (const error& e) {
    failure = e.what();
  }
  return std::numeric_limits<double>::infinity();
}

/// Reorders `order`: the `leaders` first, by `seconds`; then the others in their present
/// order; whatever failed (infinite seconds) last.
inline void leaders_first(std::vector<std::size_t>& order, const std::vector<std::size_t>& leaders,
                          const std::vector<double>& seconds) {
  std::vector<std::size_t> ranked = leaders;
  std::stable_sort(ranked.begin(), ranked.end(), [&](std::size_t a, std::size_t b) { return seconds[a] < seconds[b]; });
  for (std::size_t i : order) {
    if (std::find(leaders.begin(), leaders.end(), i) == leaders.end()) ranked.push_back(i);
  }
  std::stable_partition(ranked.begin(), ranked.end(), [&](std::size_t i) { return std::isfinite(seconds[i]); });
  order = std::move(ranked);
}

/// The search's sustained duel (search_options::duel_*): reorders the front of `order` by
/// the duelists' sustained medians and records them in `log`; a duelist that fails drops out
/// with its reason.
template <class Time>
void sustained_duel(Time& time, std::vector<std::size_t>& order, std::vector<double>& seconds,
                    std::vector<candidate_time>& log, std::size_t first, const search_options& options) {
  if (options.duel_contenders < 2 || options.duel_timings < 1 || order.empty()) return;
  const double best = seconds[order[0]];
  if (!std::isfinite(best) || best < options.duel_min_call_seconds) return;
  std::vector<std::size_t> duelists;
  for (std::size_t i : order) {
    if (int(duelists.size()) >= options.duel_contenders || !(seconds[i] <= best * (1.0 + options.duel_margin))) break;
    duelists.push_back(i);
  }
  // The incumbent (candidate 0) joins when it is not far behind, as one more duelist.
  const std::size_t incumbent = 0;
  const bool has_incumbent =
      options.duel_incumbent_lead > 0 && seconds[incumbent] <= best * (1.0 + options.refine_margin);
  if (has_incumbent && std::find(duelists.begin(), duelists.end(), incumbent) == duelists.end()) {
    duelists.push_back(incumbent);
  }
  if (duelists.size() < 2) return;
  std::vector<std::vector<double>> kept(duelists.size());
  std::vector<bool> failed(duelists.size(), false);
  for (int spell = 0; spell < 2; ++spell) {
    for (std::size_t k = 0; k < duelists.size(); ++k) {
      const std::size_t d = spell == 0 ? k : duelists.size() - 1 - k;  // A B, then B A
      if (failed[d]) continue;
      std::vector<double> spell_timings;
      const auto start = std::chrono::steady_clock::now();
      while (int(spell_timings.size()) < options.duel_timings) {
        std::string failure;
        const double t = time_candidate(time, duelists[d], failure);
        if (!std::isfinite(t)) {
          failed[d] = true;
          log[first + duelists[d]].failure = failure;
          break;
        }
        spell_timings.push_back(t);
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= options.duel_spell_seconds) break;
      }
      // The second half: the limiter has settled on this candidate's draw by then.
      kept[d].insert(kept[d].end(), spell_timings.begin() + std::ptrdiff_t(spell_timings.size() / 2), spell_timings.end());
    }
  }
  for (std::size_t d = 0; d < duelists.size(); ++d) {
    candidate_time& entry = log[first + duelists[d]];
    if (failed[d]) {
      seconds[duelists[d]] = std::numeric_limits<double>::infinity();
      entry.seconds = 0;
      entry.timings = 0;
      entry.duel_timings = 0;
    } else {
      seconds[duelists[d]] = summarize(kept[d]).median;
      entry.seconds = seconds[duelists[d]];
      entry.duel_timings = int(kept[d].size());
    }
  }
  // Duelists first, by sustained median; then the rest as they were; failures last.
  leaders_first(order, duelists, seconds);
  // A challenger leads only by more than the incumbent's margin.
  if (has_incumbent && std::isfinite(seconds[incumbent]) && order.front() != incumbent &&
      !(seconds[order.front()] * (1.0 + options.duel_incumbent_lead) < seconds[incumbent])) {
    order.erase(std::find(order.begin(), order.end(), incumbent));
    order.insert(order.begin(), incumbent);
  }
}

}  // namespace detail

/// The search rule of every operation: time each of `count` candidates with `time(i)`
/// (seconds per call; a gpucmp::error it throws makes that candidate a recorded failure, a
/// sticky CUDA error ends the search), time the close contenders again (`options`'
/// refine_* fields), let the closest of long calls duel in sustained spells (duel_* fields),
/// record every timing in `log` (described by `describe(i)`), then check
/// candidates from the fastest up with `verify(i)` and return the first whose output passes:
/// a fast wrong answer is rejected, and its rejection recorded. Throws unsupported naming
/// `what` when no candidate both ran and verified.
/// `group_of(i)` names candidate i's group (search_options::refine_group_margin); the overload
/// without it puts every candidate in one group.
template <class Describe, class Time, class Verify, class GroupOf>
search_choice choose_fastest_verified(std::size_t count, Describe&& describe, Time&& time, Verify&& verify,
                                      std::vector<candidate_time>& log, const std::string& what, const search_options& options,
                                      GroupOf&& group_of) {
  const std::size_t first = log.size();
  std::vector<double> seconds(count, std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i < count; ++i) {
    candidate_time t;
    t.description = describe(i);
    seconds[i] = detail::time_candidate(time, i, t.failure);
    if (std::isfinite(seconds[i])) {
      t.seconds = seconds[i];
      t.timings = 1;
    }
    log.push_back(t);
  }
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return seconds[a] < seconds[b]; });

  // Close contenders: timed again, interleaved and in rotating order, so a slow spell of the
  // GPU (clocks, power cap) falls on each of them in turn; each is ranked by its median.
  std::vector<std::size_t> contenders;
  if (count > 0 && std::isfinite(seconds[order[0]]) && options.refine_rounds > 0) {
    for (std::size_t i : order) {
      if (int(contenders.size()) >= options.refine_contenders) break;
      if (!(seconds[i] <= seconds[order[0]] * (1.0 + options.refine_margin))) break;
      contenders.push_back(i);
    }
    // The fastest of each group not yet among them, within refine_group_margin.
    std::map<int, std::size_t> group_best;
    for (std::size_t i : order) {
      if (!std::isfinite(seconds[i])) break;
      group_best.emplace(group_of(i), i);  // order is by first timing: the first seen is the group's fastest
    }
    for (const auto& [group, i] : group_best) {
      if (std::find(contenders.begin(), contenders.end(), i) == contenders.end() &&
          seconds[i] <= seconds[order[0]] * (1.0 + options.refine_group_margin)) {
        contenders.push_back(i);
      }
    }
  }
  if (contenders.size() > 1) {
    std::vector<std::vector<double>> timings(contenders.size());
    for (std::size_t c = 0; c < contenders.size(); ++c) timings[c].push_back(seconds[contenders[c]]);
    for (int round = 0; round < options.refine_rounds; ++round) {
      for (std::size_t k = 0; k < contenders.size(); ++k) {
        const std::size_t c = (k + std::size_t(round) + 1) % contenders.size();
        if (timings[c].empty()) continue;  // failed in an earlier round
        std::string failure;
        const double t = detail::time_candidate(time, contenders[c], failure);
        if (std::isfinite(t)) {
          timings[c].push_back(t);
        } else {
          timings[c].clear();
          log[first + contenders[c]].failure = failure;
        }
      }
    }
    for (std::size_t c = 0; c < contenders.size(); ++c) {
      candidate_time& entry = log[first + contenders[c]];
      entry.timings = int(timings[c].size());
      seconds[contenders[c]] = timings[c].empty() ? std::numeric_limits<double>::infinity() : summarize(timings[c]).median;
      entry.seconds = timings[c].empty() ? 0.0 : seconds[contenders[c]];
    }
    // Contenders first, by median, then the rest in first-timing order, then whatever failed.
    // A contender's median includes its later timings, on a warmer GPU; a candidate timed
    // once lost to every contender on first timings and is not ranked against that median by
    // its one timing (docs/results/h200-operations.md, "Why the search is built this way",
    // has the case that showed it).
    detail::leaders_first(order, contenders, seconds);
  }
  detail::sustained_duel(time, order, seconds, log, first, options);

  for (std::size_t i : order) {
    if (!std::isfinite(seconds[i])) break;
    const verification v = verify(i);
    if (v.passed()) return {i, seconds[i]};
    log[first + i].failure = "rejected: " + v.summary();
  }
  std::string first_failure = count == 0 ? std::string("there were none") : log[first].failure;
  throw unsupported("none of the " + std::to_string(count) + " candidates for " + what + " ran and verified; first: " +
                    (first_failure.empty() ? std::string("slower than the rejected ones") : first_failure));
}

template <class Describe, class Time, class Verify>
search_choice choose_fastest_verified(std::size_t count, Describe&& describe, Time&& time, Verify&& verify,
                                      std::vector<candidate_time>& log, const std::string& what,
                                      const search_options& options = {}) {
  return choose_fastest_verified(count, std::forward<Describe>(describe), std::forward<Time>(time), std::forward<Verify>(verify),
                                 log, what, options, [](std::size_t) { return 0; });
}

}  // namespace gpucmp
