// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Registration: a gpucmp benchmark is one Google Benchmark registration per timing mode,
// through the public benchmark::RegisterBenchmark (nothing from its internal namespace),
// each running one iteration (the engine has its own stopping rule) inside a guard that
// turns every error into a typed result. Fixtures and the GPUCMP_BENCHMARK macros.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/result_rows.hpp>
#include <gpucmp/gbench/state.hpp>
#include <gpucmp/measure/options.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <optional>
#include <vector>

namespace gpucmp {

namespace detail {

/// Runs `body(state&)` for one registration, turning every error into SkipWithError.
template <class Body>
void run_guarded(benchmark::State& gb, const std::string& name, mode m, const measure_options& defaults, Body&& body) {
  // Every way out leaves the run's typed row (gbench/result_rows.hpp) with its status: a new
  // one, or the one state::run already recorded when the body threw after it.
  const std::size_t rows_before = pending_rows().size();
  std::optional<state> st;  // outside the try: a failed run's row still says what it was (its description)
  auto typed = [&](result_status status, const std::string& message) {
    if (pending_rows().size() > rows_before) {
      pending_rows().back().row.status = status;
      pending_rows().back().row.message = message;
    } else {
      result_row row = unmeasured_row(m, status, message);
      if (st) {
        row.declared = st->declared_work();
        row.described = st->description();
      }
      record_row(gb, name, std::move(row));
    }
  };
  const std::string& no_device = cached_no_device_reason();
  if (!no_device.empty()) {
    tally().no_device = true;
    typed(result_status::skipped, no_device);
    gb.SkipWithError(no_device.c_str());
    return;
  }
  if (!tally().context_lost_in.empty()) {  // nothing can run on a lost context; do not touch the GPU
    const std::string why = "skipped: the CUDA context was lost after an error in " + tally().context_lost_in;
    typed(result_status::skipped, why);
    gb.SkipWithError(why.c_str());
    return;
  }
  try {
    st.emplace(gb, name, m, engine_for_current_device(), defaults);
    body(*st);
    if (!st->finished()) {
      const std::string why = "failed: the benchmark function returned without calling gpucmp::state::run";
      typed(result_status::failed, why);
      report_failure(gb, name, why);
    }
  } catch (const unsupported& e) {
    typed(result_status::unsupported, e.what());
    gb.SkipWithError(e.what());  // this GPU cannot run it: a typed result, not a failure
  } catch (const out_of_memory& e) {
    typed(result_status::out_of_memory, e.what());
    gb.SkipWithError(e.what());  // does not fit: a typed result (needed vs free), not a failure
  } catch (const timeout_error& e) {
    typed(result_status::timeout, e.what());
    gb.SkipWithError(e.what());  // ran past its budget: a typed result, and the run goes on
  } catch (const std::exception& e) {
    typed(result_status::failed, std::string("failed: ") + e.what());
    report_failure(gb, name, std::string("failed: ") + e.what());
  } catch (...) {
    typed(result_status::failed, "failed: unknown exception");
    report_failure(gb, name, "failed: unknown exception");
  }
}

inline std::vector<mode> modes_or_default(std::initializer_list<mode> modes) {
  if (modes.size() == 0) return {mode::hot};
  return {modes.begin(), modes.end()};
}

/// Google Benchmark's registration object: the Benchmark class of its internal namespace up to 1.8
/// and benchmark::Benchmark since (main deprecates the internal name). Named through what
/// benchmark::RegisterBenchmark returns, so the adapter uses no internal name.
using gbench_registration =
    std::remove_pointer_t<decltype(benchmark::RegisterBenchmark("", std::declval<void (*)(benchmark::State&)>()))>;

inline void configure_defaults(gbench_registration* b) {
  b->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
}

}  // namespace detail

/// The Google Benchmark registrations of one gpucmp benchmark, one per timing mode; each
/// configuration call is forwarded to all of them (same names as Google Benchmark's own).
class benchmark_group {
 public:
  /// Wraps registrations that share `options`.
  benchmark_group(std::vector<detail::gbench_registration*> registrations,
                  std::shared_ptr<measure_options> options)
      : m_registrations(std::move(registrations)), m_options(std::move(options)) {}

  /// Measurement options every instance starts from (a benchmark may still change them).
  benchmark_group* Options(const measure_options& options) {
    options.validate();
    *m_options = options;
    return this;
  }
  /// Opt out of the stream hold, for code that synchronizes internally.
  benchmark_group* NoHold() {
    m_options->hold = false;
    return this;
  }
  benchmark_group* Arg(std::int64_t x) { return each([&](auto* b) { b->Arg(x); }); }
  benchmark_group* Args(const std::vector<std::int64_t>& args) { return each([&](auto* b) { b->Args(args); }); }
  benchmark_group* Range(std::int64_t lo, std::int64_t hi) { return each([&](auto* b) { b->Range(lo, hi); }); }
  benchmark_group* DenseRange(std::int64_t start, std::int64_t limit, int step = 1) {
    return each([&](auto* b) { b->DenseRange(start, limit, step); });
  }
  benchmark_group* Ranges(const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges) {
    return each([&](auto* b) { b->Ranges(ranges); });
  }
  benchmark_group* ArgsProduct(const std::vector<std::vector<std::int64_t>>& lists) {
    return each([&](auto* b) { b->ArgsProduct(lists); });
  }
  benchmark_group* RangeMultiplier(int multiplier) { return each([&](auto* b) { b->RangeMultiplier(multiplier); }); }
  benchmark_group* ArgName(const std::string& name) { return each([&](auto* b) { b->ArgName(name); }); }
  benchmark_group* ArgNames(const std::vector<std::string>& names) { return each([&](auto* b) { b->ArgNames(names); }); }
  benchmark_group* Unit(benchmark::TimeUnit unit) { return each([&](auto* b) { b->Unit(unit); }); }
  benchmark_group* Repetitions(int n) { return each([&](auto* b) { b->Repetitions(n); }); }
  /// Any other Google Benchmark configuration, applied to each registration.
  benchmark_group* Apply(void (*custom)(detail::gbench_registration*)) {
    return each([&](auto* b) { b->Apply(custom); });
  }
  /// The underlying registrations, one per mode.
  const std::vector<detail::gbench_registration*>& registrations() const noexcept { return m_registrations; }

 private:
  template <class F>
  benchmark_group* each(F&& f) {
    for (auto* b : m_registrations) f(b);
    return this;
  }

  std::vector<detail::gbench_registration*> m_registrations;
  std::shared_ptr<measure_options> m_options;
};

namespace detail {

/// Keeps a group for the whole process, as Google Benchmark keeps its registrations (a
/// caller may drop the pointer after configuring it: `register_benchmark(...)->Arg(1)`).
inline benchmark_group* keep(std::unique_ptr<benchmark_group> group) {
  static std::vector<std::unique_ptr<benchmark_group>> groups;
  groups.push_back(std::move(group));
  return groups.back().get();
}

}  // namespace detail

/// Registers `fn(gpucmp::state&)` once per mode as "<name>/<mode>" (default mode: hot).
template <class Function>
benchmark_group* register_benchmark(const std::string& name, Function fn, std::initializer_list<mode> modes = {}) {
  auto options = std::make_shared<measure_options>();
  std::vector<detail::gbench_registration*> registrations;
  for (mode m : detail::modes_or_default(modes)) {
    const std::string full_name = name + "/" + to_string(m);
    auto* b = benchmark::RegisterBenchmark(full_name.c_str(), [fn, m, options, full_name](benchmark::State& gb) {
      detail::run_guarded(gb, full_name, m, *options, fn);
    });
    detail::configure_defaults(b);
    registrations.push_back(b);
  }
  return detail::keep(std::make_unique<benchmark_group>(std::move(registrations), std::move(options)));
}

/// Registers `fn(gpucmp::state&)` once, in mode `m`, under exactly `name` (no mode suffix:
/// for names that say the mode their own way, e.g. "resnet50/fp16/bs64/eager").
template <class Function>
benchmark_group* register_benchmark_as(const std::string& name, mode m, Function fn) {
  auto options = std::make_shared<measure_options>();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [fn, m, options, name](benchmark::State& gb) {
    detail::run_guarded(gb, name, m, *options, fn);
  });
  detail::configure_defaults(b);
  return detail::keep(std::make_unique<benchmark_group>(std::vector<detail::gbench_registration*>{b}, std::move(options)));
}

namespace detail {

/// Runs a fixture (a benchmark::Fixture subclass with `void gpucmp_measure(gpucmp::state&)`)
/// with SetUp and TearDown inside the error guard, so an allocation failure in SetUp is a
/// result, not a crash.
template <class Fixture>
void run_fixture(Fixture& fixture, benchmark::State& gb, const std::string& name, mode m, const measure_options& options) {
  bool set_up = false;
  run_guarded(gb, name, m, options, [&](state& st) {
    fixture.SetUp(gb);
    set_up = true;
    fixture.gpucmp_measure(st);
  });
  if (set_up) {
    try {
      fixture.TearDown(gb);
    } catch (const std::exception& e) {
      mark_last_row_failed(name, std::string("failed in TearDown: ") + e.what());
      report_failure(gb, name, std::string("failed in TearDown: ") + e.what());
    }
  }
}

/// Registers one instance of `Fixture` per mode (Google Benchmark, too, keeps one fixture
/// object per registration), through the public RegisterBenchmark.
template <class Fixture>
benchmark_group* register_fixture(const std::string& name, std::initializer_list<mode> modes) {
  auto options = std::make_shared<measure_options>();
  std::vector<gbench_registration*> registrations;
  for (mode m : modes_or_default(modes)) {
    const std::string full_name = name + "/" + to_string(m);
    auto fixture = std::make_shared<Fixture>();
    auto* b = benchmark::RegisterBenchmark(full_name.c_str(), [fixture, full_name, m, options](benchmark::State& gb) {
      run_fixture(*fixture, gb, full_name, m, *options);
    });
    configure_defaults(b);
    registrations.push_back(b);
  }
  return keep(std::make_unique<benchmark_group>(std::move(registrations), std::move(options)));
}

}  // namespace detail

}  // namespace gpucmp

#define GPUCMP_DETAIL_CONCAT2(a, b) a##b
#define GPUCMP_DETAIL_CONCAT(a, b) GPUCMP_DETAIL_CONCAT2(a, b)
#define GPUCMP_DETAIL_UNIQUE(prefix) GPUCMP_DETAIL_CONCAT(prefix, __COUNTER__)
// The trailing empty argument keeps `...` non-empty in C++17; `{a, b, }` is a valid list.
#define GPUCMP_DETAIL_BENCHMARK(fn, ...) \
  static ::gpucmp::benchmark_group* GPUCMP_DETAIL_UNIQUE(gpucmp_benchmark_) = ::gpucmp::register_benchmark(#fn, fn, {__VA_ARGS__})
#define GPUCMP_DETAIL_REGISTER_F(Base, Method, ...)                                                              \
  static ::gpucmp::benchmark_group* GPUCMP_DETAIL_UNIQUE(gpucmp_fixture_) =                                      \
      ::gpucmp::detail::register_fixture<Base##_##Method##_gpucmp>(#Base "/" #Method, {__VA_ARGS__})

/// Registers `void fn(gpucmp::state&)`, optionally followed by modes (default: hot):
/// `GPUCMP_BENCHMARK(fn, gpucmp::mode::cold, gpucmp::mode::hot)->Arg(1 << 20);`
#define GPUCMP_BENCHMARK(...) GPUCMP_DETAIL_BENCHMARK(__VA_ARGS__, )

/// Defines method `Method` of fixture `Base` (a benchmark::Fixture); follow with
/// `(gpucmp::state& st) { ... }`, as with BENCHMARK_DEFINE_F.
#define GPUCMP_BENCHMARK_DEFINE_F(Base, Method)                   \
  class Base##_##Method##_gpucmp : public Base {                 \
   public:                                                       \
    void gpucmp_measure(::gpucmp::state&);                       \
                                                                 \
   protected:                                                    \
    void BenchmarkCase(::benchmark::State&) override {} /* unused: the adapter drives the fixture */ \
  };                                                             \
  void Base##_##Method##_gpucmp::gpucmp_measure

/// Registers a fixture method, optionally followed by modes: `GPUCMP_BENCHMARK_REGISTER_F(F, M, gpucmp::mode::cold)`.
#define GPUCMP_BENCHMARK_REGISTER_F(...) GPUCMP_DETAIL_REGISTER_F(__VA_ARGS__, )
