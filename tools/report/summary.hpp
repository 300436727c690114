// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Who wins and by how much: the comparison's rows in groups read from their typed facts
// (never their names), and for each group and GPU the geometric mean of the speedups, with the
// projection's measured error as a band around projected figures. Every renderer shows this
// first, and draws one chart per group.
#pragma once

#include "format.hpp"
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace gpucmp_report {

/// Rows that belong together: a family (alike in every axis, provider and mode but the one
/// they sweep), a kind (the same provider, mode and axis names, so the same sort of problem),
/// or rows written without axes (schema 1, or a benchmark that described nothing), by mode and
/// by the unit of their declared work.
struct row_group {
  std::string title;                 ///< from the axes: what the rows share, and what varies
  bool described = true;             ///< false: rows written without axes (labelled by their names)
  std::vector<std::size_t> rows;     ///< rows of the comparison, in chart order
  std::vector<std::string> labels;   ///< per row: what sets it apart in the group ("16 MiB", "dtype=fp16")
};

/// One group's speedup on one GPU against the baseline.
struct group_speedup {
  double geomean = NAN;      ///< geometric mean of the rows' speedups
  double low = NAN, high = NAN;  ///< projected: geomean x (1 -/+ the projection's mean error)
  std::size_t rows = 0;      ///< rows in the mean
  std::size_t left_out = 0;  ///< rows of the group without a speedup here (not measured, latency-bound, L2-resident)
};

/// The summary of a comparison.
struct comparison_summary {
  std::vector<row_group> groups;                     ///< ordered by title
  std::vector<std::vector<group_speedup>> speedups;  ///< [group][column]
  /// The column with the highest geomean in group `g` (the baseline counts as 1), or npos when
  /// fewer than two columns have one (nothing to win against).
  std::size_t fastest(std::size_t g) const {
    std::size_t best = std::string::npos, with_value = 0;
    for (std::size_t i = 0; i < speedups[g].size(); ++i) {
      with_value += std::isfinite(speedups[g][i].geomean) ? 1 : 0;
      if (std::isfinite(speedups[g][i].geomean) && (best == std::string::npos || speedups[g][i].geomean > speedups[g][best].geomean)) {
        best = i;
      }
    }
    return with_value >= 2 ? best : std::string::npos;
  }
};

namespace detail {

/// An axis value as a reader wants it: byte counts in binary units, other numbers as written.
inline std::string axis_value_text(const gpucmp::axis& a) {
  if (!a.number) return a.text;
  const bool bytes = a.name == "bytes" || (a.name.size() > 6 && a.name.compare(a.name.size() - 6, 6, "_bytes") == 0);
  return bytes ? size_text(*a.number) : parameter_number(*a.number);
}

inline std::string axis_text(const gpucmp::axis& a) { return a.name + "=" + axis_value_text(a); }

}  // namespace detail

/// The unit of row `r`'s declared work as its cells give it ("TFLOP/s", "GB/s"; "" for none).
inline std::string work_unit(const comparison& cmp, std::size_t r) {
  for (const cell& c : cmp.cells[r])
    if (!c.unit.empty()) return c.unit;
  return "";
}

/// The comparison's rows in groups, from their typed facts.
inline std::vector<row_group> row_groups(const comparison& cmp) {
  struct building {
    row_group group;
    std::string swept;  // the family's swept axis, or ""
  };
  std::map<std::string, building> by_key;
  for (std::size_t r = 0; r < cmp.benchmarks.size() && r < cmp.facts.size(); ++r) {
    const row_facts& f = cmp.facts[r];
    const gpucmp::row_description& d = f.described;
    std::string key;
    std::string swept;
    if (d.axes.empty()) {
      // No axes: grouped by what their declared work makes them (a rate's unit), never by name.
      key = "~undescribed|" + f.timing_mode + "|" + work_unit(cmp, r);
    } else if (!d.sweep_axis.empty()) {
      swept = d.sweep_axis;
      key = "family|" + d.provider + "|" + f.timing_mode + "|" + swept;
      for (const gpucmp::axis& a : d.axes)
        if (a.name != swept) key += "|" + detail::axis_text(a);
    } else {
      key = "kind|" + d.provider + "|" + f.timing_mode;
      std::vector<std::string> names;
      for (const gpucmp::axis& a : d.axes) names.push_back(a.name);
      std::sort(names.begin(), names.end());
      for (const auto& n : names) key += "|" + n;
    }
    building& b = by_key[key];
    b.swept = swept;
    b.group.described = !d.axes.empty();
    b.group.rows.push_back(r);
  }
  std::vector<row_group> out;
  for (auto& entry : by_key) {
    building& b = entry.second;  // a named reference: lambdas below capture it (not a structured binding)
    row_group& g = b.group;
    if (!g.described) {
      const row_facts& f = cmp.facts[g.rows.front()];
      const std::string unit = work_unit(cmp, g.rows.front());
      g.title = (f.timing_mode.empty() ? std::string() : f.timing_mode + " mode, ") + "rows without axes" +
                (unit.empty() ? std::string(" and without declared work") : ", in " + unit);
      for (std::size_t r : g.rows) g.labels.push_back(cmp.benchmarks[r]);  // only names tell them apart
      out.push_back(std::move(g));
      continue;
    }
    const row_facts& first = cmp.facts[g.rows.front()];
    // The axes every row shares (same value) make the title; the others label the rows.
    std::vector<std::string> shared, varying;
    for (const gpucmp::axis& a : first.described.axes) {
      const bool same = std::all_of(g.rows.begin(), g.rows.end(), [&](std::size_t r) {
        const gpucmp::axis* other = cmp.facts[r].described.find(a.name);
        return other != nullptr && *other == a;
      });
      (same && a.name != b.swept ? shared : varying).push_back(a.name);
    }
    // Each row's label (the varying axes; the swept one by its value alone), then the rows in
    // order of the swept value and the label.
    std::vector<std::tuple<double, std::string, std::size_t>> ordered;
    for (std::size_t r : g.rows) {
      std::string label;
      for (const auto& name : varying) {
        const gpucmp::axis* a = cmp.facts[r].described.find(name);
        if (a == nullptr) continue;
        label += (label.empty() ? "" : ", ") + (name == b.swept ? detail::axis_value_text(*a) : detail::axis_text(*a));
      }
      const gpucmp::axis* x = b.swept.empty() ? nullptr : cmp.facts[r].described.find(b.swept);
      ordered.emplace_back(x != nullptr && x->number ? *x->number : 0.0, label.empty() ? "(one row)" : label, r);
    }
    std::sort(ordered.begin(), ordered.end());
    g.rows.clear();
    for (const auto& [x, label, r] : ordered) {
      g.rows.push_back(r);
      g.labels.push_back(label);
    }
    std::string title;
    auto add = [&](const std::string& part) { title += (title.empty() ? "" : ", ") + part; };
    if (!first.described.provider.empty()) add(first.described.provider);
    if (!first.timing_mode.empty()) add(first.timing_mode + " mode");
    for (const auto& name : shared) add(detail::axis_text(*first.described.find(name)));
    if (!b.swept.empty()) {
      title += "; over " + b.swept;
    } else if (!varying.empty()) {
      title += "; by ";
      for (std::size_t i = 0; i < varying.size(); ++i) title += (i ? ", " : "") + varying[i];
    }
    g.title = title;
    out.push_back(std::move(g));
  }
  // By title, the rows without a description last: an order that no name decides.
  std::stable_sort(out.begin(), out.end(), [](const row_group& a, const row_group& c) {
    return a.described != c.described ? a.described : a.title < c.title;
  });
  return out;
}

/// The summary: each group's geomean speedup on each GPU. A projected column leaves out rows
/// measured L2-resident on the baseline (projected with DRAM bandwidth, their ratio compares
/// an L2 with a DRAM); latency-bound and unmeasured rows have no speedup to average.
inline comparison_summary summarize_comparison(const comparison& cmp) {
  comparison_summary out;
  out.groups = row_groups(cmp);
  for (const row_group& g : out.groups) {
    std::vector<group_speedup> per_column(cmp.columns.size());
    for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
      double log_sum = 0;
      group_speedup& s = per_column[i];
      for (std::size_t r : g.rows) {
        const cell& c = cmp.cells[r][i];
        if (!std::isfinite(c.speedup) || !(c.speedup > 0) || (cmp.columns[i].projected && c.l2_resident)) {
          ++s.left_out;
          continue;
        }
        log_sum += std::log(c.speedup);
        ++s.rows;
      }
      if (s.rows == 0) continue;
      s.geomean = std::exp(log_sum / double(s.rows));
      if (cmp.columns[i].projected) {
        s.low = s.geomean * (1 - gpucmp::projection_mean_abs_error);
        s.high = s.geomean * (1 + gpucmp::projection_mean_abs_error);
      }
    }
    out.speedups.push_back(std::move(per_column));
  }
  return out;
}

/// "×0.42", "≈×0.42 (0.38–0.46)", "—" (no row to average).
inline std::string speedup_text(const group_speedup& s) {
  if (!std::isfinite(s.geomean)) return "—";
  if (!std::isfinite(s.low)) return "×" + fixed(s.geomean, 2);
  return "≈×" + fixed(s.geomean, 2) + " (" + fixed(s.low, 2) + "–" + fixed(s.high, 2) + ")";
}

}  // namespace gpucmp_report
