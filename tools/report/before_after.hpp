// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// `gpucmp-report compare --label before=A.json --label after=B.json`: the same benchmarks run
// twice (two builds, two drivers, two days), row by row: the ratio of their times and a verdict
// of SAME, FASTER, SLOWER or UNCERTAIN from the full sample sets (measure/before_after.hpp),
// and an outcome a CI job can fail on.
#pragma once

#include "format.hpp"
#include "model.hpp"
#include "render.hpp"

#include <gpucmp/measure/before_after.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_report {

/// A result file under the name a before/after comparison gives it.
struct labelled_file {
  std::string label;  ///< "before", "after", "main", "pr-123", ...
  result_file file;   ///< its results
};

/// One benchmark in both runs.
struct before_after_row {
  std::string benchmark;      ///< its name, the same in both files
  std::optional<result> before;  ///< empty when the first run lacks it
  std::optional<result> after;   ///< empty when the second run lacks it
  bool compared = false;      ///< both measured with samples: `change` holds the verdict
  gpucmp::sample_change change;
  bool lost = false;          ///< measured in the first run, not in the second: a regression too
  std::string note;           ///< why not compared
};

/// Two labelled runs of the same benchmarks, row by row.
struct before_after {
  labelled_file before, after;          ///< the reference run and the run compared with it
  gpucmp::change_options options;       ///< how the verdicts were decided
  std::vector<before_after_row> rows;   ///< every benchmark of either run, in natural name order

  /// Rows compared with verdict `v`.
  std::size_t count(gpucmp::verdict v) const {
    std::size_t n = 0;
    for (const auto& r : rows) n += r.compared && r.change.call == v ? 1 : 0;
    return n;
  }
  /// Rows measured in the first run and not in the second.
  std::size_t lost_count() const {
    std::size_t n = 0;
    for (const auto& r : rows) n += r.lost ? 1 : 0;
    return n;
  }
  /// Whether a CI job should fail on it: a row SLOWER, or one no longer measured.
  bool regressed() const { return count(gpucmp::verdict::slower) > 0 || lost_count() > 0; }
};

namespace detail {

inline std::string outcome_text(const std::optional<result>& r) {
  if (!r) return "missing";
  if (r->kind == cell_kind::measured) return time_text(r->seconds);
  return to_string(r->kind);
}

}  // namespace detail

/// Pairs the benchmarks of `before` and `after` by name and compares each pair's samples.
inline before_after compare_before_after(labelled_file before, labelled_file after, const gpucmp::change_options& options) {
  options.validate();
  before_after out{std::move(before), std::move(after), options, {}};
  if (out.before.label == out.after.label) throw input_error("both runs are labelled '" + out.before.label + "'");
  std::set<std::string> names;
  for (const auto* f : {&out.before.file, &out.after.file})
    for (const auto& [name, r] : f->results) names.insert(name);
  std::vector<std::string> ordered(names.begin(), names.end());
  std::sort(ordered.begin(), ordered.end(), natural_less);
  for (const auto& name : ordered) {
    before_after_row row;
    row.benchmark = name;
    if (auto it = out.before.file.results.find(name); it != out.before.file.results.end()) row.before = it->second;
    if (auto it = out.after.file.results.find(name); it != out.after.file.results.end()) row.after = it->second;
    const bool before_ok = row.before && row.before->kind == cell_kind::measured;
    const bool after_ok = row.after && row.after->kind == cell_kind::measured;
    if (before_ok && !after_ok) {
      row.lost = true;
      row.note = !row.after ? "not in " + out.after.label
                                      : out.after.label + ": " + to_string(row.after->kind) + ": " + row.after->message;
    } else if (!before_ok) {
      row.note = !row.before ? "not in " + out.before.label : out.before.label + ": " + to_string(row.before->kind);
    } else if (row.before->samples.empty() || row.after->samples.empty()) {
      row.note = (row.before->samples.empty() ? out.before.label : out.after.label) +
                 " has no per-sample times (sample_seconds: written by gpucmp since result files carry it)";
    } else {
      row.compared = true;
      row.change = gpucmp::compare_samples(row.before->samples, row.after->samples, options);
      row.note = row.change.why;
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

/// The verdict cell of row `r`.
inline std::string verdict_text(const before_after_row& r) {
  if (r.compared) return gpucmp::to_string(r.change.call);
  return r.lost ? "NOT MEASURED" : "not compared";
}

/// One line that says how many rows came out which way.
inline std::string before_after_summary(const before_after& cmp) {
  std::string line;
  for (auto v : {gpucmp::verdict::slower, gpucmp::verdict::faster, gpucmp::verdict::same, gpucmp::verdict::uncertain}) {
    line += std::to_string(cmp.count(v)) + " " + gpucmp::to_string(v) + ", ";
  }
  std::size_t not_compared = 0;
  for (const auto& r : cmp.rows) not_compared += !r.compared && !r.lost ? 1 : 0;
  return line + std::to_string(cmp.lost_count()) + " NOT MEASURED in " + cmp.after.label + ", " +
         std::to_string(not_compared) + " not compared";
}

inline std::string render_before_after_markdown(const before_after& cmp) {
  std::ostringstream md;
  const std::string& a = cmp.before.label;
  const std::string& b = cmp.after.label;
  md << "# " << markdown_text(b) << " against " << markdown_text(a) << "\n\n";
  md << "- " << markdown_text(a) << ": " << markdown_text(cmp.before.file.path) << " (" << markdown_text(cmp.before.file.gpu.name)
     << ")\n";
  md << "- " << markdown_text(b) << ": " << markdown_text(cmp.after.file.path) << " (" << markdown_text(cmp.after.file.gpu.name)
     << ")\n";
  if (cmp.before.file.gpu.name != cmp.after.file.gpu.name) {
    md << "\n**The two runs are on different GPUs:** the verdicts say how the runs differ, not what a change of code did.\n";
  }
  md << "\n**" << (cmp.regressed() ? "REGRESSED" : "NO REGRESSION") << ":** " << before_after_summary(cmp) << ".\n\n";
  md << "| benchmark | " << markdown_text(a) << " | " << markdown_text(b) << " | " << markdown_text(b) << " / "
     << markdown_text(a) << " | " << fixed(cmp.options.confidence * 100, 0) << " % interval | threshold | p | verdict |\n";
  md << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : cmp.rows) {
    md << "| " << markdown_name(r.benchmark) << " | " << detail::outcome_text(r.before) << " | " << detail::outcome_text(r.after)
       << " | ";
    if (r.compared) {
      const auto& c = r.change;
      md << "×" << fixed(c.ratio, 3) << " | ";
      md << (std::isfinite(c.ratio_low) ? fixed(c.ratio_low, 3) + "–" + fixed(c.ratio_high, 3) : "") << " | ±"
         << fixed(c.threshold * 100, 1) << " % | " << (c.p_value < 1e-4 ? std::string("<0.0001") : fixed(c.p_value, 4)) << " | ";
    } else {
      md << " |  |  |  | ";
    }
    const std::string v = verdict_text(r);
    const bool loud = r.lost || (r.compared && r.change.call != gpucmp::verdict::same);
    md << (loud ? "**" + v + "**" : v);
    if (!r.note.empty()) md << " (" << markdown_text(r.note) << ")";
    md << " |\n";
  }
  md << "\nThe ratio is " << markdown_text(b) << "'s time over " << markdown_text(a)
     << "'s: the median over every pair of samples (Hodges-Lehmann), with the interval that inverts "
        "the Mann-Whitney rank test. SLOWER or FASTER: the whole interval lies beyond the threshold, the largest of "
        "--min-change ("
     << fixed(cmp.options.min_change * 100, 1) << " %), --min-change-s (" << number(cmp.options.min_change_s * 1e6)
     << " µs, over the first run's median) and the samples' own spread; SAME: it lies within; UNCERTAIN: it reaches past the threshold, or a set "
        "has fewer than "
     << cmp.options.min_samples
     << " samples. p is the rank test's, for reading only: two runs of one binary differ by more than their "
        "samples' spread, so p alone would call them different.\n";
  return md.str();
}

inline std::string render_before_after_csv(const before_after& cmp) {
  std::ostringstream csv;
  const auto num = csv_number;
  auto seconds = [&](const std::optional<result>& r) { return r && r->kind == cell_kind::measured ? num(r->seconds) : ""; };
  csv << "benchmark,before_label,before_seconds,after_label,after_seconds,ratio,ratio_low,ratio_high,threshold,p_value,"
         "verdict,note\n";
  for (const auto& r : cmp.rows) {
    csv << csv_field(r.benchmark) << "," << csv_field(cmp.before.label) << "," << seconds(r.before) << ","
        << csv_field(cmp.after.label) << "," << seconds(r.after) << ",";
    if (r.compared) {
      csv << num(r.change.ratio) << "," << num(r.change.ratio_low) << "," << num(r.change.ratio_high) << ","
          << num(r.change.threshold) << "," << num(r.change.p_value) << ",";
    } else {
      csv << ",,,,,";
    }
    csv << verdict_text(r) << "," << csv_field(r.note) << "\n";
  }
  return csv.str();
}

}  // namespace gpucmp_report
