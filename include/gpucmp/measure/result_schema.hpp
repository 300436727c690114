// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The typed result schema: every fact of one benchmark run under a documented key with its
// unit (as nvbench's summaries), written by the adapter into a result file's "gpucmp"
// section and read back by the report and the scripts, so that no reader takes a fact from a
// benchmark's name or message. A new metric is one row of result_keys() plus one line in
// to_json and one in result_row_from_json; docs/results-format.md lists every key (a test
// keeps the two in sync).
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/io/json.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/specs/specs_types.hpp>
#include <gpucmp/specs/work.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// The version of the "gpucmp" section a result file carries. A reader accepts its own
/// version, and the legacy version below as what it is: a change of meaning or of a required
/// key is a new version. Version 2: rows say what was measured (axes, sweep_axis, provider,
/// algorithm, verification, search, libraries), and readers take families and pairs from the
/// axes, never from a name.
inline constexpr int result_schema_version = 2;
/// The schema before rows described their problem: read as rows without a description.
inline constexpr int result_schema_legacy_version = 1;

/// When a key is present in a row.
enum class key_presence {
  always,    ///< in every row
  measured,  ///< when status is ok (a file upgraded from before the schema may hold only "seconds")
  declared,  ///< when the benchmark declared a nonzero amount of that part of its work
  power,     ///< with --gpucmp_power (or measure_options::power), when measured
  kernel,    ///< in kernel mode, when measured
  described, ///< when the benchmark described what it measured (state::set_axis and friends; run_verified)
  serving,   ///< in a serving run (state::run_serving), when measured
};

/// One key of a typed result row.
struct result_key {
  const char* key;        ///< the JSON key
  const char* unit;       ///< "s", "W", "J", "FLOP", "B", ... ("" for names and counts)
  key_presence presence;  ///< when it is there
  const char* meaning;    ///< what it holds
};

/// Every key of a typed result row, in the order docs/results-format.md lists them.
inline const std::vector<result_key>& result_keys() {
  static const std::vector<result_key> keys = {
      {"name", "", key_presence::always, "Google Benchmark's name of the run, as in the file's benchmarks[].name"},
      {"benchmark", "", key_presence::always,
       "the registration name with its arguments, without Google Benchmark's decorations: the row's identity "
       "across files and repetitions"},
      {"repetition_index", "", key_presence::always, "which repetition of the benchmark this row is (0 without repetitions)"},
      {"status", "", key_presence::always, "ok, failed, unsupported, oom, skipped or timeout"},
      {"message", "", key_presence::always, "why the run was not measured; empty when status is ok"},
      {"mode", "", key_presence::always,
       "the timing mode: cold, hot, graph or kernel (absent only in a file upgraded from before the schema whose "
       "names do not say it)"},
      {"precision", "", key_presence::always, "the precision the declared FLOPs run in (none: no FLOPs declared)"},
      {"sparsity", "", key_presence::declared,
       "\"2:4\" when the declared FLOPs run on 2:4 sparse tensor cores (% of peak then reads the datasheet's sparse "
       "rate; flops stay the dense count); absent when dense"},
      {"seconds", "s", key_presence::measured, "median GPU time per launch"},
      {"seconds_min", "s", key_presence::measured, "fastest sample, per launch"},
      {"seconds_max", "s", key_presence::measured, "slowest sample, per launch"},
      {"noise", "", key_presence::measured, "relative noise of the samples (robust spread / median)"},
      {"samples", "", key_presence::measured, "timed samples"},
      {"batch", "", key_presence::measured, "launches per sample"},
      {"sample_seconds", "s", key_presence::measured,
       "GPU time per launch of each timed sample, in the order taken (at most 1000, evenly spaced over the run when "
       "more were taken): what a before/after comparison's rank test reads (absent in files written before it)"},
      {"flops", "FLOP", key_presence::declared, "declared FLOPs per launch"},
      {"bytes_read", "B", key_presence::declared, "declared bytes read from device memory per launch"},
      {"bytes_written", "B", key_presence::declared, "declared bytes written to device memory per launch"},
      {"items", "", key_presence::declared, "declared domain items (elements, images, tokens) per launch"},
      {"power_w", "W", key_presence::power, "average board power over the power window"},
      {"power_peak_w", "W", key_presence::power, "highest power over any 100 ms of the window"},
      {"energy_j", "J", key_presence::power, "energy of the power window"},
      {"power_limit_w", "W", key_presence::power, "the enforced power limit (0: unknown)"},
      {"throttled_fraction", "", key_presence::power, "share of power samples taken while slowed for power or heat"},
      {"kernels", "", key_presence::kernel, "the kernels of one launch, largest share of busy time first"},
      {"axes", "", key_presence::described,
       "the problem's parameters, each a number or a text: {\"m\": 4096, \"n\": 4096, \"k\": 4096, \"dtype\": "
       "\"fp16\"}, {\"bytes\": 1048576, \"from\": 0, \"to\": 1}, ..."},
      {"sweep_axis", "", key_presence::described,
       "the numeric axis the benchmark sweeps: rows alike in every other axis are one family, drawn over it"},
      {"provider", "", key_presence::described, "what ran it: cuBLASLt, cuDNN, NCCL, CUDA runtime, gpucmp kernel, ..."},
      {"algorithm", "", key_presence::described, "the algorithm it ran, as the provider's wrapper describes it"},
      {"verification", "", key_presence::described,
       "its output check: {\"method\", \"checked\" outputs, \"failed\" outputs, \"worst_ratio\": the largest "
       "error over its bound}"},
      {"search", "", key_presence::described,
       "the algorithm search: {\"wall_s\": its wall time, what a cold start pays once, \"candidates\": [{\"algorithm\", "
       "\"seconds\" per call (0 when it could not run), \"failure\"}]}"},
      {"libraries", "", key_presence::described,
       "the versions of the libraries that ran it, read at run time: {\"cublasLt\": \"130100\", ...}"},
      {"latency", "s", key_presence::serving,
       "request latency, due to seen complete by the host, every measured request: {\"pattern\", \"requests\", "
       "\"offered_per_s\", \"achieved_per_s\", \"p50\", \"p90\", \"p99\", \"p999\", \"max\", \"mean\"}; "
       "seconds is then the median of the rounds' median latencies"},
  };
  return keys;
}

/// The power facts of a row.
struct row_power {
  double average_w = 0;           ///< power_w
  double peak_w = 0;              ///< power_peak_w
  double energy_j = 0;            ///< energy_j
  double limit_w = 0;             ///< power_limit_w
  double throttled_fraction = 0;  ///< throttled_fraction
};

/// The most per-sample times a row carries: enough for a rank test to resolve a 1 % shift,
/// small enough that a suite's file stays a few hundred kB.
inline constexpr std::size_t max_written_samples = 1000;

/// At most max_written_samples of `samples`, evenly spaced over the run.
inline std::vector<double> written_samples(const std::vector<double>& samples) {
  return evenly_spaced(samples, max_written_samples);
}

/// One parameter of the measured problem: a number or a text.
struct axis {
  std::string name;             ///< "m", "bytes", "dtype", ...
  std::optional<double> number; ///< its value when numeric
  std::string text;             ///< its value otherwise
  /// The axis `name` = `value`.
  static axis of(std::string name, double value) { return {std::move(name), value, {}}; }
  static axis of(std::string name, std::string value) { return {std::move(name), std::nullopt, std::move(value)}; }  ///< see above
  /// Same name and value.
  bool operator==(const axis& o) const { return name == o.name && number == o.number && text == o.text; }
};

/// A row's output check, as the operation's verification recorded it.
struct row_verification {
  std::string method;      ///< how it was checked
  double checked = 0;      ///< outputs compared
  double failed = 0;       ///< outputs outside their bound
  double worst_ratio = 0;  ///< the largest |error| / bound
};

/// One candidate of a row's algorithm search.
struct row_candidate {
  std::string algorithm;  ///< as the wrapper describes it
  double seconds = 0;     ///< median per call; 0 when it could not run
  std::string failure;    ///< why it could not run
};

/// A row's algorithm search.
struct row_search {
  double wall_s = 0;                     ///< the search's wall time
  std::vector<row_candidate> candidates; ///< every candidate, as timed
};

/// What a row measured beyond its work: the problem's axes, who ran it and how.
struct row_description {
  std::vector<axis> axes;                  ///< in the order declared
  std::string sweep_axis;                  ///< a numeric axis of `axes`, or ""
  std::string provider;                    ///< "" when not said
  std::string algorithm;                   ///< "" when not said
  std::optional<row_verification> verification;
  std::optional<row_search> search;
  std::vector<std::pair<std::string, std::string>> libraries;  ///< name, version

  /// The axis named `name`, or nullptr.
  const axis* find(const std::string& name) const {
    for (const axis& a : axes) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }
  /// Sets axis `a` (replacing one of its name).
  void set(axis a) {
    for (axis& have : axes) {
      if (have.name == a.name) {
        have = std::move(a);
        return;
      }
    }
    axes.push_back(std::move(a));
  }
  /// Whether anything was described.
  bool empty() const noexcept {
    return axes.empty() && sweep_axis.empty() && provider.empty() && algorithm.empty() && !verification && !search &&
           libraries.empty();
  }
};

/// A serving run's request latencies (seconds) and rates.
struct row_latency {
  std::string pattern;       ///< "closed_loop", "fixed_rate", "poisson"
  double requests = 0;       ///< measured requests
  double offered_per_s = 0;  ///< requests per second offered
  double achieved_per_s = 0; ///< requests per second completed
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;  ///< latency percentiles, slowest, mean
};

/// One benchmark run, typed: what the adapter writes and the readers get back.
struct result_row {
  std::string name;       ///< Google Benchmark's run name
  std::string benchmark;  ///< registration name with arguments
  std::int64_t repetition_index = 0;
  result_status status = result_status::ok;
  std::string message;
  mode timing_mode = mode::hot;
  bool mode_known = true;  ///< false only in a row upgraded from a name that does not say the mode
  /// Declared work per launch; `arithmetic` is the precision.
  work declared;
  /// Which parts of `declared` the benchmark declared (a declared 0 differs from none).
  bool has_flops = false, has_bytes = false, has_items = false;
  double seconds = NAN, seconds_min = NAN, seconds_max = NAN, noise = NAN;  ///< when measured
  std::int64_t samples = 0, batch = 0;                                     ///< when measured
  std::vector<double> sample_seconds;  ///< when measured: per-launch time of each sample (at most max_written_samples)
  std::optional<row_power> power;
  std::vector<std::string> kernels;  ///< kernel mode
  row_description described;         ///< what it measured (schema 2)
  std::optional<row_latency> latency; ///< a serving run's request latencies (schema 2)

  bool ok() const noexcept { return status == result_status::ok; }
};

/// The status named `text` ("ok", "oom", ...), or nullopt.
inline std::optional<result_status> status_from_name(const std::string& text) noexcept {
  for (result_status s : {result_status::ok, result_status::failed, result_status::unsupported,
                          result_status::out_of_memory, result_status::skipped, result_status::timeout}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

namespace detail {

/// A finite number >= 0 in `v` (a member of `key`), else fail(key, why).
template <class Fail>
double described_amount(const json* v, const std::string& key, Fail& fail) {
  if (v == nullptr || !v->is_number() || !std::isfinite(v->number()) || v->number() < 0) {
    fail(key, "holds no finite number >= 0 where one belongs");
  }
  return v->number();
}

/// A string in `v`, else fail(key, why).
template <class Fail>
std::string described_text(const json* v, const std::string& key, Fail& fail) {
  if (v == nullptr || !v->is_string()) fail(key, "holds no text where one belongs");
  return v->string();
}

}  // namespace detail

/// Reads the description keys of row `o` (schema 2) into `d`; fail(key, why) on one that
/// breaks the schema. A sweep axis must be a numeric axis of the row.
template <class Fail>
void read_description(const detail::json& o, row_description& d, Fail& fail) {
  using detail::json;
  if (const json* axes = o.find("axes")) {
    if (!axes->is_object()) fail("axes", "is not an object");
    for (const auto& [name, value] : axes->members()) {
      if (value.is_number() && std::isfinite(value.number())) {
        d.axes.push_back(axis::of(name, value.number()));
      } else if (value.is_string()) {
        d.axes.push_back(axis::of(name, value.string()));
      } else {
        fail("axes", "'" + name + "' is neither a finite number nor a text");
      }
    }
  }
  if (const json* s = o.find("sweep_axis")) {
    d.sweep_axis = detail::described_text(s, "sweep_axis", fail);
    const axis* swept = d.find(d.sweep_axis);
    if (swept == nullptr || !swept->number) fail("sweep_axis", "'" + d.sweep_axis + "' is not a numeric axis of the row");
  }
  if (const json* p = o.find("provider")) d.provider = detail::described_text(p, "provider", fail);
  if (const json* a = o.find("algorithm")) d.algorithm = detail::described_text(a, "algorithm", fail);
  if (const json* v = o.find("verification")) {
    if (!v->is_object()) fail("verification", "is not an object");
    row_verification rv;
    rv.method = detail::described_text(v->find("method"), "verification", fail);
    rv.checked = detail::described_amount(v->find("checked"), "verification", fail);
    rv.failed = detail::described_amount(v->find("failed"), "verification", fail);
    rv.worst_ratio = detail::described_amount(v->find("worst_ratio"), "verification", fail);
    d.verification = rv;
  }
  if (const json* s = o.find("search")) {
    if (!s->is_object()) fail("search", "is not an object");
    row_search rs;
    rs.wall_s = detail::described_amount(s->find("wall_s"), "search", fail);
    const json* candidates = s->find("candidates");
    if (candidates == nullptr || !candidates->is_array()) fail("search", "has no candidates list");
    for (const json& c : candidates->items()) {
      if (!c.is_object()) fail("search", "holds a candidate that is not an object");
      rs.candidates.push_back({detail::described_text(c.find("algorithm"), "search", fail),
                               detail::described_amount(c.find("seconds"), "search", fail),
                               detail::described_text(c.find("failure"), "search", fail)});
    }
    d.search = rs;
  }
  if (const json* l = o.find("libraries")) {
    if (!l->is_object()) fail("libraries", "is not an object");
    for (const auto& [name, version] : l->members()) d.libraries.emplace_back(name, detail::described_text(&version, "libraries", fail));
  }
}

/// `row` as a JSON object under result_keys().
inline detail::json to_json(const result_row& row) {
  using detail::json;
  json o = json::make_object();
  auto& m = o.members();
  auto number = [&](const char* key, double v) { m[key] = json::make_number(v); };
  m["name"] = json::make_string(row.name);
  m["benchmark"] = json::make_string(row.benchmark);
  number("repetition_index", double(row.repetition_index));
  m["status"] = json::make_string(to_string(row.status));
  m["message"] = json::make_string(row.ok() ? "" : row.message);
  if (row.mode_known) m["mode"] = json::make_string(to_string(row.timing_mode));
  m["precision"] = json::make_string(to_string(row.declared.arithmetic));
  if (row.declared.structure != sparsity::dense) m["sparsity"] = json::make_string(to_string(row.declared.structure));
  if (row.ok()) {
    number("seconds", row.seconds);
    if (std::isfinite(row.seconds_min)) number("seconds_min", row.seconds_min);
    if (std::isfinite(row.seconds_max)) number("seconds_max", row.seconds_max);
    if (std::isfinite(row.noise)) number("noise", row.noise);
    if (row.samples > 0) number("samples", double(row.samples));
    if (row.batch > 0) number("batch", double(row.batch));
    if (!row.sample_seconds.empty()) {
      json list = json::make_array();
      for (double t : row.sample_seconds) list.items().push_back(json::make_number(t));
      m["sample_seconds"] = list;
    }
  }
  if (row.has_flops) number("flops", row.declared.flops);
  if (row.has_bytes) {
    number("bytes_read", row.declared.bytes_read);
    number("bytes_written", row.declared.bytes_written);
  }
  if (row.has_items) number("items", row.declared.items);
  if (row.ok() && row.power) {
    number("power_w", row.power->average_w);
    number("power_peak_w", row.power->peak_w);
    number("energy_j", row.power->energy_j);
    number("power_limit_w", row.power->limit_w);
    number("throttled_fraction", row.power->throttled_fraction);
  }
  if (row.ok() && !row.kernels.empty()) {
    json list = json::make_array();
    for (const auto& k : row.kernels) list.items().push_back(json::make_string(k));
    m["kernels"] = list;
  }
  if (row.ok() && row.latency) {
    json l = json::make_object();
    auto& lm = l.members();
    lm["pattern"] = json::make_string(row.latency->pattern);
    for (const auto& [key, value] : {std::pair{"requests", row.latency->requests}, {"offered_per_s", row.latency->offered_per_s},
                                     {"achieved_per_s", row.latency->achieved_per_s}, {"p50", row.latency->p50},
                                     {"p90", row.latency->p90}, {"p99", row.latency->p99}, {"p999", row.latency->p999},
                                     {"max", row.latency->max}, {"mean", row.latency->mean}}) {
      lm[key] = json::make_number(value);
    }
    m["latency"] = l;
  }
  const row_description& d = row.described;
  if (!d.axes.empty()) {
    json axes = json::make_object();
    for (const axis& a : d.axes) axes.members()[a.name] = a.number ? json::make_number(*a.number) : json::make_string(a.text);
    m["axes"] = axes;
  }
  if (!d.sweep_axis.empty()) m["sweep_axis"] = json::make_string(d.sweep_axis);
  if (!d.provider.empty()) m["provider"] = json::make_string(d.provider);
  if (!d.algorithm.empty()) m["algorithm"] = json::make_string(d.algorithm);
  if (d.verification) {
    json v = json::make_object();
    v.members()["method"] = json::make_string(d.verification->method);
    v.members()["checked"] = json::make_number(d.verification->checked);
    v.members()["failed"] = json::make_number(d.verification->failed);
    v.members()["worst_ratio"] = json::make_number(d.verification->worst_ratio);
    m["verification"] = v;
  }
  if (d.search) {
    json s = json::make_object();
    s.members()["wall_s"] = json::make_number(d.search->wall_s);
    json list = json::make_array();
    for (const row_candidate& c : d.search->candidates) {
      json one = json::make_object();
      one.members()["algorithm"] = json::make_string(c.algorithm);
      one.members()["seconds"] = json::make_number(c.seconds);
      one.members()["failure"] = json::make_string(c.failure);
      list.items().push_back(one);
    }
    s.members()["candidates"] = list;
    m["search"] = s;
  }
  if (!d.libraries.empty()) {
    json libraries = json::make_object();
    for (const auto& [name, version] : d.libraries) libraries.members()[name] = json::make_string(version);
    m["libraries"] = libraries;
  }
  return o;
}

/// The row in `o`; throws invalid_argument naming `where` and the key for anything that
/// does not follow the schema (a missing or mistyped key, an unknown status, mode or
/// precision, a number that no measurement gives). Unknown keys are ignored.
inline result_row result_row_from_json(const detail::json& o, const std::string& where) {
  using detail::json;
  if (!o.is_object()) throw invalid_argument(where + ": a result row is not an object");
  result_row row;
  auto fail = [&](const std::string& key, const std::string& what) -> void {
    const json* n = o.find("name");
    const std::string who = n != nullptr && n->is_string() ? " '" + n->string() + "'" : "";
    throw invalid_argument(where + ": result row" + who + ": '" + key + "' " + what);
  };
  auto text = [&](const char* key) -> std::string {
    const json* v = o.find(key);
    if (v == nullptr) fail(key, "is missing");
    if (!v->is_string()) fail(key, "is not a string");
    return v->string();
  };
  // A count or amount: finite and not negative.
  auto amount = [&](const char* key, bool required, double fallback) -> double {
    const json* v = o.find(key);
    if (v == nullptr) {
      if (required) fail(key, "is missing");
      return fallback;
    }
    if (!v->is_number()) fail(key, "is not a number");
    if (!std::isfinite(v->number()) || v->number() < 0) fail(key, "is " + std::to_string(v->number()) + " (expected a finite number >= 0)");
    return v->number();
  };
  // A count: a whole amount a double holds exactly (converting a larger double to an integer
  // is undefined behaviour; found by fuzzing).
  auto count = [&](const char* key, bool required) -> std::int64_t {
    const double x = amount(key, required, 0);
    if (x > 9007199254740992.0 || x != std::floor(x)) fail(key, "is " + std::to_string(x) + " (expected a whole number up to 2^53)");
    return std::int64_t(x);
  };
  row.name = text("name");
  row.benchmark = text("benchmark");
  row.repetition_index = count("repetition_index", true);
  const std::string status = text("status");
  const auto s = status_from_name(status);
  if (!s) fail("status", "is '" + status + "' (expected ok, failed, unsupported, oom, skipped or timeout)");
  row.status = *s;
  row.message = text("message");
  row.mode_known = o.find("mode") != nullptr;
  if (row.mode_known) {
    try {
      row.timing_mode = parse_mode(text("mode"));
    } catch (const invalid_argument& e) {
      fail("mode", e.what());
    }
  }
  const std::string p = text("precision");
  row.declared.arithmetic = precision_from_name(p);
  if (row.declared.arithmetic == precision::none && p != to_string(precision::none)) fail("precision", "is '" + p + "', not a precision");
  if (o.find("sparsity") != nullptr) {
    const std::string structure = text("sparsity");
    if (structure == to_string(sparsity::structured_2_4)) {
      row.declared.structure = sparsity::structured_2_4;
    } else if (structure != to_string(sparsity::dense)) {
      fail("sparsity", "is '" + structure + "' (expected 2:4 or dense)");
    }
  }
  if (row.ok()) {
    row.seconds = amount("seconds", true, NAN);
    if (!(row.seconds > 0)) fail("seconds", "is 0 in a measured row");
    row.seconds_min = amount("seconds_min", false, NAN);
    row.seconds_max = amount("seconds_max", false, NAN);
    row.noise = amount("noise", false, NAN);
    row.samples = count("samples", false);
    row.batch = count("batch", false);
    if (const json* list = o.find("sample_seconds")) {
      if (!list->is_array() || list->items().empty()) fail("sample_seconds", "is not a non-empty list");
      if (list->items().size() > max_written_samples) fail("sample_seconds", "holds more than " + std::to_string(max_written_samples) + " samples");
      for (const json& t : list->items()) {
        if (!t.is_number() || !(t.number() > 0) || !std::isfinite(t.number())) fail("sample_seconds", "holds a time that is not a finite number > 0");
        row.sample_seconds.push_back(t.number());
      }
    }
  }
  row.has_flops = o.find("flops") != nullptr;
  row.declared.flops = amount("flops", false, 0);
  row.has_bytes = o.find("bytes_read") != nullptr || o.find("bytes_written") != nullptr;
  row.declared.bytes_read = amount("bytes_read", false, 0);
  row.declared.bytes_written = amount("bytes_written", false, 0);
  row.has_items = o.find("items") != nullptr;
  row.declared.items = amount("items", false, 0);
  if (o.find("power_w") != nullptr) {
    row_power pw;
    pw.average_w = amount("power_w", true, 0);
    pw.peak_w = amount("power_peak_w", true, 0);
    pw.energy_j = amount("energy_j", true, 0);
    pw.limit_w = amount("power_limit_w", true, 0);
    pw.throttled_fraction = amount("throttled_fraction", true, 0);
    row.power = pw;
  }
  if (const json* k = o.find("kernels")) {
    if (!k->is_array()) fail("kernels", "is not a list");
    for (const json& name : k->items()) {
      if (!name.is_string()) fail("kernels", "holds a name that is not a string");
      row.kernels.push_back(name.string());
    }
  }
  read_description(o, row.described, fail);
  if (const json* l = o.find("latency")) {
    if (!l->is_object()) fail("latency", "is not an object");
    row_latency rl;
    rl.pattern = detail::described_text(l->find("pattern"), "latency", fail);
    for (auto [key, field] : {std::pair{"requests", &row_latency::requests}, {"offered_per_s", &row_latency::offered_per_s},
                              {"achieved_per_s", &row_latency::achieved_per_s}, {"p50", &row_latency::p50},
                              {"p90", &row_latency::p90}, {"p99", &row_latency::p99}, {"p999", &row_latency::p999},
                              {"max", &row_latency::max}, {"mean", &row_latency::mean}}) {
      rl.*field = detail::described_amount(l->find(key), "latency", fail);
    }
    row.latency = rl;
  }
  return row;
}

/// The "gpucmp" section of a result file: {"schema_version": N, "results": [rows]}.
inline detail::json results_section(const std::vector<result_row>& rows) {
  using detail::json;
  json section = json::make_object();
  section.members()["schema_version"] = json::make_number(result_schema_version);
  json list = json::make_array();
  for (const auto& r : rows) list.items().push_back(to_json(r));
  section.members()["results"] = list;
  return section;
}

/// The typed rows of a parsed result file `root` (named `where` in errors). Throws
/// invalid_argument when the file has no "gpucmp" section (written before the typed schema,
/// or by a main other than gpucmp::benchmark_main, or without --benchmark_out), when its
/// schema_version is not this reader's, or when a row breaks the schema.
inline std::vector<result_row> result_rows_of(const detail::json& root, const std::string& where) {
  const detail::json* section = root.find("gpucmp");
  if (section == nullptr || !section->is_object()) {
    throw invalid_argument(where + ": has no typed gpucmp results (no \"gpucmp\" section with a schema_version): it was "
                           "written before result schema " + std::to_string(result_schema_version) +
                           ", or by a main other than gpucmp::benchmark_main; rerun it, or read it as a legacy file");
  }
  const detail::json* version = section->find("schema_version");
  if (version == nullptr || !version->is_number()) {
    throw invalid_argument(where + ": its gpucmp section has no numeric schema_version");
  }
  const bool legacy = version->number() == result_schema_legacy_version;
  if (version->number() != result_schema_version && !legacy) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", version->number());
    throw invalid_argument(where + ": written with result schema " + text + "; this reader knows schemas " +
                           std::to_string(result_schema_version) + " and " + std::to_string(result_schema_legacy_version));
  }
  const detail::json* rows = section->find("results");
  if (rows == nullptr || !rows->is_array()) throw invalid_argument(where + ": its gpucmp section has no results list");
  std::vector<result_row> out;
  for (const auto& r : rows->items()) {
    out.push_back(result_row_from_json(r, where));
    if (legacy) out.back().described = {};  // schema 1 rows describe nothing (its writers wrote no such keys)
  }
  return out;
}

}  // namespace gpucmp
