// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The report's model: gpucmp result files (Google Benchmark JSON with the typed "gpucmp"
// section) read and validated, lined up by benchmark into a comparison of measured and
// projected cells. Renderers only read a comparison. The legacy reader, for files written
// before the typed schema, serves only `gpucmp-report upgrade`.
#pragma once

#include <gpucmp/io/json.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/measure/statistics.hpp>

#include <gpucmp/specs/projection.hpp>
#include <gpucmp/specs/specs.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpucmp_report {

using gpucmp::detail::json;
using gpucmp::detail::json_error;
using gpucmp::detail::parse_json;

/// A bad input, with the file and what is wrong.
class input_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a cell of the comparison holds.
enum class cell_kind { measured, projected, oom, unsupported, failed, skipped, timeout, missing, no_model, latency_bound };

inline const char* to_string(cell_kind k) {
  switch (k) {
    case cell_kind::measured: return "measured";
    case cell_kind::projected: return "projected";
    case cell_kind::oom: return "oom";
    case cell_kind::unsupported: return "unsupported";
    case cell_kind::failed: return "failed";
    case cell_kind::skipped: return "skipped";
    case cell_kind::timeout: return "timeout";
    case cell_kind::missing: return "missing";
    case cell_kind::no_model: return "no model";
    case cell_kind::latency_bound: return "latency-bound";
  }
  return "unknown";
}

/// One benchmark's result in one file.
struct result {
  cell_kind kind = cell_kind::measured;  ///< measured, oom, unsupported, failed or skipped
  std::string message;                   ///< the error message, when not measured
  double seconds = NAN;                  ///< median time per launch
  gpucmp::work declared;                 ///< work per launch, recovered from the rate counters
  double watts = NAN;                    ///< average power, when recorded
  gpucmp::row_description described;     ///< what it measured: axes, sweep axis, provider, ... (schema 2)
  std::string timing_mode;               ///< "hot", "graph", ... ("" when the row does not say)
  std::vector<double> samples;           ///< every repetition's per-sample times; empty when a row lacks them
};

/// One result file.
struct result_file {
  std::string path;                          ///< where it was read from
  gpucmp::gpu_profile gpu;                   ///< the GPU it ran on, with its datasheet figures
  std::map<std::string, result> results;     ///< by benchmark name
  bool ptx_jit = false;                      ///< its context says the GPU ran JIT-compiled PTX (gpu_code)
};

/// One cell of the comparison.
struct cell {
  cell_kind kind = cell_kind::missing;  ///< what it holds
  double seconds = NAN;                 ///< time per launch (measured or projected)
  double rate = NAN;                    ///< declared work per second in `unit`
  std::string unit;                     ///< "TFLOP/s", "GB/s", or "" when no work was declared
  double speedup = NAN;                 ///< baseline time / this time
  double watts = NAN;                   ///< average power, when recorded
  std::string note;                     ///< error message or projection note
  bool l2_resident = false;             ///< measured: its bytes fit in L2 and it moved them faster than DRAM can, so
                                        ///< L2 served it; projected: its source's bytes fit in L2 (projected with DRAM bandwidth)
};

/// A column: one GPU, measured (from a file) or projected.
struct column {
  std::string label;       ///< GPU name
  std::string key;         ///< database key
  bool projected = false;  ///< projected rather than measured
  gpucmp::confidence trust = gpucmp::confidence::high;  ///< datasheet confidence
  std::string source;      ///< file path, or "projected from <GPU>"
  bool ptx_jit = false;    ///< measured from a program whose kernels this GPU ran as JIT-compiled PTX
  double usd_per_hour = NAN;  ///< price, when given
};

/// What a comparison's row measured, from the first file that has it: the facts charts
/// group by (never its name).
struct row_facts {
  gpucmp::row_description described;  ///< axes, sweep axis, provider, ...
  std::string timing_mode;            ///< "hot", "graph", ...
};

/// Measured and projected GPUs side by side, one row per benchmark.
struct comparison {
  std::vector<column> columns;              ///< GPUs
  std::size_t baseline = 0;                 ///< column the speedups refer to
  std::vector<std::string> benchmarks;      ///< row names, sorted
  std::vector<row_facts> facts;             ///< [row]: what each row measured
  std::vector<std::vector<cell>> cells;     ///< [row][column]
};

// ---------------------------------------------------------------------------------------
// Reading result files

inline std::string read_file(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw input_error(path + ": is a directory, not a result file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(path + ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline double context_number(const json& context, const char* key) {
  const json* v = context.find(key);
  if (v == nullptr) return NAN;
  if (v->is_number()) return v->number();
  if (v->is_string()) {
    try {
      return std::stod(v->string());
    } catch (...) {
      return NAN;
    }
  }
  return NAN;
}

/// The benchmark name without Google Benchmark's run decorations ("/iterations:1/manual_time").
inline std::string clean_name(const std::string& name) {
  std::string out;
  std::stringstream parts(name);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part == "manual_time" || part == "real_time" || part.rfind("iterations:", 0) == 0 ||
        part.rfind("repeats:", 0) == 0 || part.rfind("min_time:", 0) == 0 || part.rfind("threads:", 0) == 0) {
      continue;
    }
    out += (out.empty() ? "" : "/") + part;
  }
  return out;
}

/// The precision named by a path element of a benchmark name (op/provider/dtype/shape).
inline gpucmp::precision precision_of(const std::string& name) {
  std::stringstream parts(name);
  std::string part;
  while (std::getline(parts, part, '/')) {
    const gpucmp::precision p = gpucmp::precision_from_name(part);
    if (p != gpucmp::precision::none) return p;
  }
  return gpucmp::precision::none;
}

inline double unit_seconds(const std::string& unit) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1.0;
  return NAN;
}

inline cell_kind kind_of_error(const std::string& message) {
  if (message.rfind("oom:", 0) == 0) return cell_kind::oom;
  if (message.rfind("unsupported:", 0) == 0) return cell_kind::unsupported;
  if (message.rfind("timeout:", 0) == 0) return cell_kind::timeout;
  if (message.rfind("no CUDA device", 0) == 0 || message.rfind("skipped:", 0) == 0) return cell_kind::skipped;
  return cell_kind::failed;
}

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD, so each renderer gets valid
/// text whatever a result file holds (names come from users and are untrusted).
inline std::string valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xC0) == 0x80;
    if (ok && len > 1) {  // no overlong forms, surrogates or code points past U+10FFFF
      std::uint32_t cp = c & (0x7F >> len);
      for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
      const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= least[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(text, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

/// Reads and validates one gpucmp result file.
inline result_file load_result_file(const std::string& path);

namespace detail {

/// The parsed root of `text`; malformed JSON is an input_error naming `path`.
inline json parse_root(const std::string& text, const std::string& path) {
  try {
    return parse_json(text);
  } catch (const json_error& e) {
    throw input_error(path + ": malformed JSON: " + e.what());
  }
}

/// A result file's GPU, from its context; what is not a gpucmp result is an input_error.
inline result_file file_of_context(const json& root, const std::string& path) {
  const json* context = root.find("context");
  const json* benchmarks = root.find("benchmarks");
  if (context == nullptr || !context->is_object() || benchmarks == nullptr || !benchmarks->is_array()) {
    throw input_error(path + ": not a Google Benchmark JSON file (needs a 'context' object and a 'benchmarks' array)");
  }
  if (context->find("gpucmp_version") == nullptr) {
    throw input_error(path + ": not a gpucmp result (its context has no gpucmp_version)");
  }
  const json* gpu_name = context->find("gpu_name");
  if (gpu_name == nullptr || !gpu_name->is_string()) {
    const json* why = context->find("gpu");
    throw input_error(path + ": records no GPU" + (why && why->is_string() ? " (" + why->string() + ")" : ""));
  }
  result_file file;
  file.path = valid_utf8(path);
  gpucmp::device_facts facts;
  facts.name = valid_utf8(gpu_name->string());
  const double cc = context_number(*context, "gpu_compute_capability");
  if (std::isfinite(cc) && !(cc >= 0 && cc < 100)) {  // converting a larger one to int is undefined
    throw input_error(path + ": gpu_compute_capability " + std::to_string(cc) + " is not a compute capability");
  }
  facts.cc_major = std::isfinite(cc) ? static_cast<int>(cc) : 0;
  facts.cc_minor = std::isfinite(cc) ? static_cast<int>(std::lround((cc - facts.cc_major) * 10)) : 0;
  facts.memory_bytes = context_number(*context, "gpu_memory_bytes");
  facts.sm_count = context_number(*context, "gpu_sm_count");
  facts.sm_clock_max_hz = context_number(*context, "gpu_sm_clock_max_mhz") * 1e6;
  facts.memory_bandwidth_bytes_per_s =
      2.0 * context_number(*context, "gpu_memory_clock_max_mhz") * 1e6 * context_number(*context, "gpu_memory_bus_width_bits") / 8.0;
  facts.l2_bytes = context_number(*context, "gpu_l2_bytes");
  file.gpu = gpucmp::spec_for_device(facts);
  const json* code = context->find("gpu_code");
  file.ptx_jit = code != nullptr && code->is_string() && (code->string() == "ptx_jit" || code->string() == "none");
  return file;
}

inline cell_kind kind_of_status(gpucmp::result_status s) {
  switch (s) {
    case gpucmp::result_status::ok: return cell_kind::measured;
    case gpucmp::result_status::failed: return cell_kind::failed;
    case gpucmp::result_status::unsupported: return cell_kind::unsupported;
    case gpucmp::result_status::out_of_memory: return cell_kind::oom;
    case gpucmp::result_status::skipped: return cell_kind::skipped;
    case gpucmp::result_status::timeout: return cell_kind::timeout;
  }
  return cell_kind::failed;
}

}  // namespace detail

/// Validates the content `text` of a gpucmp result file, naming it `path` in errors; throws
/// input_error for anything malformed. Every fact comes from the file's typed rows (its
/// "gpucmp" section, docs/results-format.md), none from a name, label or message; a file
/// without them is refused with a pointer to `gpucmp-report upgrade`.
inline result_file parse_result_file(const std::string& text, const std::string& path) {
  const json root = detail::parse_root(text, path);
  result_file file = detail::file_of_context(root, path);
  std::vector<gpucmp::result_row> rows;
  try {
    rows = gpucmp::result_rows_of(root, valid_utf8(path));
  } catch (const gpucmp::invalid_argument& e) {
    std::string why = valid_utf8(e.what());
    if (root.find("gpucmp") == nullptr) why += " (gpucmp-report upgrade OLD.json NEW.json reads it the legacy way)";
    throw input_error(why);
  }
  // Repetitions of one benchmark: the median of their times; any that did not measure
  // makes the cell that outcome.
  std::map<std::string, std::vector<const gpucmp::result_row*>> by_benchmark;
  for (const auto& row : rows) {
    const std::string name = valid_utf8(row.benchmark);
    for (const auto* seen : by_benchmark[name]) {
      if (seen->repetition_index == row.repetition_index) {
        throw input_error(path + ": benchmark '" + name + "' appears twice with the same repetition (conflicting duplicates)");
      }
    }
    by_benchmark[name].push_back(&row);
  }
  for (const auto& [name, reps] : by_benchmark) {
    result r;
    r.described = reps.front()->described;
    if (reps.front()->mode_known) r.timing_mode = gpucmp::to_string(reps.front()->timing_mode);
    const auto bad = std::find_if(reps.begin(), reps.end(), [](const gpucmp::result_row* x) { return !x->ok(); });
    if (bad != reps.end()) {
      r.kind = detail::kind_of_status((*bad)->status);
      r.message = valid_utf8((*bad)->message);
      file.results[name] = r;
      continue;
    }
    std::vector<double> seconds, watts;
    bool every_row_has_samples = true;
    for (const auto* x : reps) {
      seconds.push_back(x->seconds);
      if (x->power) watts.push_back(x->power->average_w);
      every_row_has_samples = every_row_has_samples && !x->sample_seconds.empty();
      r.samples.insert(r.samples.end(), x->sample_seconds.begin(), x->sample_seconds.end());
    }
    if (!every_row_has_samples) r.samples.clear();  // a partial set would weigh repetitions unevenly
    r.seconds = gpucmp::summarize(seconds).median;
    if (watts.size() == reps.size()) r.watts = gpucmp::summarize(watts).median;
    r.declared = reps.front()->declared;
    file.results[name] = r;
  }
  return file;
}

/// The explicit legacy path: a result file written before the typed schema, read the old way
/// (precision from a name's path elements, the kind of error from the message's prefix,
/// work rebuilt from the rate counters). Only `gpucmp-report upgrade` uses it.
inline result_file parse_legacy_result_file(const std::string& text, const std::string& path) {
  const json root = detail::parse_root(text, path);
  result_file file = detail::file_of_context(root, path);
  const json* benchmarks = root.find("benchmarks");
  // Repetitions of one benchmark are combined through their median aggregate when present.
  std::map<std::string, std::vector<const json*>> iterations;
  std::map<std::string, const json*> medians;
  for (const json& b : benchmarks->items()) {
    const json* name = b.find("run_name");
    if (name == nullptr) name = b.find("name");
    if (name == nullptr || !name->is_string()) throw input_error(path + ": a benchmark entry has no name");
    const std::string clean = clean_name(valid_utf8(name->string()));
    const json* run_type = b.find("run_type");
    if (run_type != nullptr && run_type->is_string() && run_type->string() == "aggregate") {
      const json* aggregate = b.find("aggregate_name");
      if (aggregate != nullptr && aggregate->is_string() && aggregate->string() == "median") medians[clean] = &b;
      continue;
    }
    const json* repetition = b.find("repetition_index");
    const double index = repetition != nullptr && repetition->is_number() ? repetition->number() : 0;
    for (const json* seen : iterations[clean]) {
      const json* r = seen->find("repetition_index");
      if ((r != nullptr && r->is_number() ? r->number() : 0) == index) {
        throw input_error(path + ": benchmark '" + clean + "' appears twice with the same repetition (conflicting duplicates)");
      }
    }
    iterations[clean].push_back(&b);
  }
  for (const auto& [name, runs] : iterations) {
    const json& b = medians.count(name) ? *medians[name] : *runs.front();
    result r;
    const json* error = b.find("error_occurred");
    const json* skipped = b.find("skipped");
    const bool failed = (error != nullptr && error->is_bool() && error->boolean()) ||
                        (skipped != nullptr && skipped->is_bool() && skipped->boolean());
    if (failed) {
      const json* message = b.find("error_message");
      if (message == nullptr) message = b.find("skip_message");
      r.message = message != nullptr && message->is_string() ? valid_utf8(message->string()) : "failed";
      r.kind = kind_of_error(r.message);
      file.results[name] = r;
      continue;
    }
    const json* time = b.find("real_time");
    const json* unit = b.find("time_unit");
    if (time == nullptr || !time->is_number() || unit == nullptr || !unit->is_string() ||
        !std::isfinite(unit_seconds(unit->string()))) {
      throw input_error(path + ": benchmark '" + name + "' has no real_time with a known time_unit");
    }
    // Every number the comparison uses must be one a measurement can give: finite, not negative.
    const std::string& benchmark = name;  // a lambda cannot capture a structured binding in C++17
    auto measured_value = [&](double value, const char* what) {
      if (!std::isfinite(value) || value < 0) {
        throw input_error(path + ": benchmark '" + benchmark + "' has " + what + " " + std::to_string(value) +
                          " (expected a finite number >= 0)");
      }
      return value;
    };
    r.seconds = measured_value(time->number() * unit_seconds(unit->string()), "real_time");
    if (const json* tflops = b.find("TFLOP/s"); tflops != nullptr && tflops->is_number()) {
      r.declared.flops = measured_value(measured_value(tflops->number(), "TFLOP/s") * 1e12 * r.seconds, "FLOPs per launch");
    }
    if (const json* gbs = b.find("GB/s"); gbs != nullptr && gbs->is_number()) {
      // read + written, as the counter counts them
      r.declared.bytes_read = measured_value(measured_value(gbs->number(), "GB/s") * 1e9 * r.seconds, "bytes per launch");
    }
    r.declared.arithmetic = precision_of(name);
    if (const json* watts = b.find("power_w"); watts != nullptr && watts->is_number()) {
      r.watts = measured_value(watts->number(), "power_w");
    }
    file.results[name] = r;
  }
  return file;
}

inline result_file load_result_file(const std::string& path) { return parse_result_file(read_file(path), path); }

/// `gpucmp-report upgrade`: the legacy file `text` (named `path`) with the typed "gpucmp"
/// section added, as the legacy reader understands it: the mode from a path element of the
/// name (left out when none names one), the status from the message's prefix, bytes read and
/// written together as bytes_read (the GB/s counter holds their sum), power from power_w.
inline std::string upgraded_result_text(const std::string& text, const std::string& path) {
  const json root = detail::parse_root(text, path);
  if (!root.is_object()) throw input_error(path + ": not a JSON object");
  if (root.find("gpucmp") != nullptr) throw input_error(path + ": already has typed gpucmp results");
  const result_file legacy = parse_legacy_result_file(text, path);
  std::vector<gpucmp::result_row> rows;
  for (const auto& [name, r] : legacy.results) {
    gpucmp::result_row row;
    row.name = row.benchmark = name;
    row.mode_known = false;
    std::stringstream parts(name);
    for (std::string part; std::getline(parts, part, '/');) {
      for (gpucmp::mode m : {gpucmp::mode::cold, gpucmp::mode::hot, gpucmp::mode::graph, gpucmp::mode::kernel}) {
        if (part == gpucmp::to_string(m)) {
          row.timing_mode = m;
          row.mode_known = true;
        }
      }
    }
    switch (r.kind) {
      case cell_kind::oom: row.status = gpucmp::result_status::out_of_memory; break;
      case cell_kind::unsupported: row.status = gpucmp::result_status::unsupported; break;
      case cell_kind::timeout: row.status = gpucmp::result_status::timeout; break;
      case cell_kind::skipped: row.status = gpucmp::result_status::skipped; break;
      case cell_kind::measured: row.status = gpucmp::result_status::ok; break;
      default: row.status = gpucmp::result_status::failed; break;
    }
    if (row.ok() && !(r.seconds > 0)) {  // the legacy reader let 0 through; no measurement takes 0 s
      throw input_error(path + ": benchmark '" + name + "' has real_time 0 in a measured row");
    }
    row.message = r.message;
    row.declared = r.declared;
    row.has_flops = r.declared.flops > 0;
    row.has_bytes = r.declared.bytes() > 0;
    row.seconds = r.seconds;
    if (std::isfinite(r.watts)) {
      gpucmp::row_power p;
      p.average_w = r.watts;
      row.power = p;
    }
    rows.push_back(row);
  }
  // The old text stays as it was, byte for byte; the section goes in before its last brace.
  const std::size_t close = text.find_last_of('}');
  std::size_t end = close;
  while (end > 0 && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(0, end) + ",\n  \"gpucmp\": " + gpucmp::detail::to_json_text(gpucmp::results_section(rows), 2, 1) +
         "\n" + text.substr(close);
}


// ---------------------------------------------------------------------------------------
// Lining up

/// Efficiencies of the ceilings on the file's GPU: the best fraction of peak reached by a
/// compute-bound result (per precision) and by a memory-bound result that does not fit in L2.
struct file_efficiency {
  std::map<gpucmp::precision, double> compute;
  double memory = NAN;

  gpucmp::efficiency for_precision(gpucmp::precision p) const {
    gpucmp::efficiency e;
    if (auto it = compute.find(p); it != compute.end()) e.compute = it->second;
    if (std::isfinite(memory)) e.memory = memory;
    return e;
  }
};

inline file_efficiency efficiency_of(const result_file& f) {
  file_efficiency e;
  for (const auto& [name, r] : f.results) {
    if (r.kind != cell_kind::measured) continue;
    const gpucmp::roofline_point p = gpucmp::place_on_roofline(r.declared, r.seconds, f.gpu);
    if (p.bound == gpucmp::roofline_bound::compute && std::isfinite(p.fraction_of_peak_compute)) {
      double& best = e.compute[r.declared.arithmetic];
      best = std::max(best, p.fraction_of_peak_compute);
    } else if (p.bound == gpucmp::roofline_bound::memory && !p.fits_in_l2 && std::isfinite(p.fraction_of_peak_bandwidth)) {
      e.memory = std::isfinite(e.memory) ? std::max(e.memory, p.fraction_of_peak_bandwidth) : p.fraction_of_peak_bandwidth;
    }
  }
  return e;
}

inline void fill_rate(cell& c, const gpucmp::work& w) {
  if (!std::isfinite(c.seconds) || c.seconds <= 0) return;
  if (w.flops > 0) {
    c.rate = w.flops / c.seconds * 1e-12;
    c.unit = w.arithmetic == gpucmp::precision::int8 ? "TOP/s" : "TFLOP/s";
  } else if (w.bytes() > 0) {
    c.rate = w.bytes() / c.seconds * 1e-9;
    c.unit = "GB/s";
  }
}

/// Orders names path element by path element, numeric elements by value (16777216 before
/// 1073741824).
inline bool natural_less(const std::string& a, const std::string& b) {
  std::stringstream sa(a), sb(b);
  std::string pa, pb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(sa, pa, '/'));
    const bool more_b = static_cast<bool>(std::getline(sb, pb, '/'));
    if (!more_a || !more_b) return !more_a && more_b;
    if (pa == pb) continue;
    const bool num_a = !pa.empty() && pa.find_first_not_of("0123456789") == std::string::npos;
    const bool num_b = !pb.empty() && pb.find_first_not_of("0123456789") == std::string::npos;
    if (num_a && num_b) {  // by value, for any number of digits: fewer significant digits first
      const std::string da = pa.substr(std::min(pa.find_first_not_of('0'), pa.size()));
      const std::string db = pb.substr(std::min(pb.find_first_not_of('0'), pb.size()));
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
    }
    return pa < pb;
  }
}

/// Options of a comparison.
struct compare_options {
  std::string baseline;                       ///< GPU key or name of the baseline column ("" = first file)
  std::vector<std::string> project_to;        ///< database keys to project onto
  std::map<std::string, double> usd_per_hour; ///< prices by key
};

/// Lines `files` up by benchmark name, adds projected columns, computes speedups.
inline comparison compare(const std::vector<result_file>& files, const compare_options& options) {
  if (files.empty()) throw input_error("no result files given");
  comparison out;
  // Conflicting duplicates: the same benchmark measured twice on the same GPU.
  std::map<std::string, std::string> first_file_of;
  for (const auto& f : files) {
    for (const auto& [name, r] : f.results) {
      const std::string id = f.gpu.key + "|" + name;
      auto [it, inserted] = first_file_of.emplace(id, f.path);
      if (!inserted) {
        throw input_error("benchmark '" + name + "' on " + f.gpu.name + " appears in both " + it->second + " and " + f.path +
                          " (conflicting duplicates)");
      }
    }
  }
  std::set<std::string> names;
  for (const auto& f : files) {
    for (const auto& [name, r] : f.results) names.insert(name);
    column c;
    c.label = f.gpu.name;
    c.key = f.gpu.key;
    c.trust = f.gpu.trust;
    c.source = f.path;
    c.ptx_jit = f.ptx_jit;
    out.columns.push_back(c);
  }
  out.benchmarks.assign(names.begin(), names.end());
  std::sort(out.benchmarks.begin(), out.benchmarks.end(), natural_less);

  // The baseline: a file's GPU.
  if (!options.baseline.empty()) {
    bool found = false;
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (files[i].gpu.key == options.baseline || files[i].gpu.name == options.baseline) {
        out.baseline = i;
        found = true;
        break;
      }
    }
    if (!found) throw input_error("baseline GPU '" + options.baseline + "' is not among the result files' GPUs");
  }
  const result_file& base = files[out.baseline];
  const file_efficiency base_efficiency = efficiency_of(base);

  std::vector<gpucmp::gpu_profile> targets;
  for (const auto& key : options.project_to) {
    auto target = gpucmp::find_spec_by_key(key);
    if (!target) target = gpucmp::find_spec_by_device_name(key);
    if (!target) throw input_error("unknown GPU '" + key + "' to project onto (see docs/gpu-database.md for the keys)");
    bool measured = false;
    for (const auto& f : files) measured = measured || f.gpu.key == target->key;
    if (measured) continue;  // measured beats projected
    targets.push_back(*target);
    column c;
    c.label = target->name;
    c.key = target->key;
    c.projected = true;
    c.trust = target->trust;
    c.source = "projected from " + base.gpu.name;
    out.columns.push_back(c);
  }
  for (auto& c : out.columns) {
    if (auto price = options.usd_per_hour.find(c.key); price != options.usd_per_hour.end()) c.usd_per_hour = price->second;
  }
  for (const auto& [key, price] : options.usd_per_hour) {
    bool used = false;
    for (const auto& c : out.columns) used = used || c.key == key;
    if (!used) throw input_error("price given for '" + key + "', which is not a column of this comparison");
  }

  for (const auto& name : out.benchmarks) {
    row_facts facts;
    for (const auto& f : files) {
      if (auto it = f.results.find(name); it != f.results.end()) {
        facts = {it->second.described, it->second.timing_mode};
        break;
      }
    }
    out.facts.push_back(std::move(facts));
    std::vector<cell> row;
    for (const auto& f : files) {
      cell c;
      auto it = f.results.find(name);
      if (it == f.results.end()) {
        c.kind = cell_kind::missing;
      } else {
        c.kind = it->second.kind;
        c.seconds = it->second.seconds;
        c.note = it->second.message;
        c.watts = it->second.watts;
        fill_rate(c, it->second.declared);
        if (c.kind == cell_kind::measured) {
          const gpucmp::roofline_point at = gpucmp::place_on_roofline(it->second.declared, c.seconds, f.gpu);
          c.l2_resident = at.bound == gpucmp::roofline_bound::memory && at.fits_in_l2 && at.fraction_of_peak_bandwidth > 1;
        }
      }
      row.push_back(c);
    }
    const auto base_result = base.results.find(name);
    for (const auto& target : targets) {
      cell c;
      if (base_result == base.results.end() || base_result->second.kind != cell_kind::measured) {
        c.kind = cell_kind::missing;
        c.note = "not measured on " + base.gpu.name;
      } else {
        const result& r = base_result->second;
        const gpucmp::projection p =
            gpucmp::project(r.declared, r.seconds, base.gpu, target, base_efficiency.for_precision(r.declared.arithmetic));
        switch (p.status) {
          case gpucmp::projection_status::projected:
            c.kind = cell_kind::projected;
            c.seconds = p.seconds;
            c.note = p.reason;
            c.l2_resident = p.from_l2_resident;
            fill_rate(c, r.declared);
            break;
          case gpucmp::projection_status::unsupported: c.kind = cell_kind::unsupported; break;
          case gpucmp::projection_status::oom: c.kind = cell_kind::oom; break;
          case gpucmp::projection_status::no_model: c.kind = cell_kind::no_model; break;
          case gpucmp::projection_status::latency_bound: c.kind = cell_kind::latency_bound; break;
        }
        if (p.status != gpucmp::projection_status::projected) c.note = p.reason;
      }
      row.push_back(c);
    }
    const double base_seconds = row[out.baseline].kind == cell_kind::measured ? row[out.baseline].seconds : NAN;
    for (auto& c : row) {
      if (std::isfinite(base_seconds) && std::isfinite(c.seconds) && c.seconds > 0) c.speedup = base_seconds / c.seconds;
    }
    out.cells.push_back(std::move(row));
  }
  return out;
}

}  // namespace gpucmp_report
