// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Renderers of a comparison: markdown, CSV and a self-contained HTML page with SVG charts.
// They only read the comparison; numbers are formatted the same way everywhere.
#pragma once

#include "format.hpp"
#include "model.hpp"
#include "p2p_heatmap.hpp"
#include "summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_report {

inline std::string energy_text(double joules) {
  if (joules >= 1) return number(joules) + " J";
  if (joules >= 1e-3) return number(joules * 1e3) + " mJ";
  return number(joules * 1e6) + " µJ";
}

inline std::string time_text(double seconds) {
  if (seconds >= 1) return number(seconds) + " s";
  if (seconds >= 1e-3) return number(seconds * 1e3) + " ms";
  return number(seconds * 1e6) + " µs";
}

/// "1.38 ms · 796 TFLOP/s", "≈4.38 ms · 251 TFLOP/s", "oom", ...
// Whether any cell of `cmp` is of kind `k`.
inline bool any_cell_of(const comparison& cmp, cell_kind k) {
  for (const auto& row : cmp.cells)
    for (const auto& c : row)
      if (c.kind == k) return true;
  return false;
}

inline std::string cell_text(const cell& c) {
  switch (c.kind) {
    case cell_kind::measured:
    case cell_kind::projected: {
      std::string text = (c.kind == cell_kind::projected ? "≈" : "") + time_text(c.seconds);
      if (std::isfinite(c.rate)) text += " · " + number(c.rate) + " " + c.unit;
      return text;
    }
    default: return to_string(c.kind);
  }
}

// Control characters (a newline would end a table row) as visible \xNN text.
inline std::string visible_control(char ch) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(static_cast<unsigned char>(ch)));
  return buf;
}

/// A benchmark name as a markdown code span inside a table cell: raw HTML is not interpreted
/// inside a code span, so only what ends the span or the row is replaced.
inline std::string markdown_name(const std::string& name) {
  std::string out;
  for (char ch : name) {
    if (ch == '|') out += "\\|";
    else if (ch == '`') out += "'";
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) out += visible_control(ch);
    else out += ch;
  }
  return "`" + out + "`";
}

/// Text from a result file (a GPU name, a path) in markdown outside a code span: HTML, the
/// table's bars and link brackets are escaped, so the text shows as written and links nowhere.
inline std::string markdown_text(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '|': case '\\': case '`': case '[': case ']':
        out += '\\';
        out += ch;
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) out += visible_control(ch);
        else out += ch;
    }
  }
  return out;
}

inline std::string column_title(const column& c) {
  std::string title = c.label + (c.projected ? " (projected)" : " (measured)");
  if (c.trust == gpucmp::confidence::low) title += " ⚠ low-confidence specs";
  if (c.trust == gpucmp::confidence::derived) title += " ⚠ derived specs";
  if (c.ptx_jit) title += " ⚠ JIT-compiled PTX";
  return title;
}

inline std::string method_text(const comparison& cmp) {
  std::string text = "Measured columns come from gpucmp result files. Projected columns are roofline estimates "
                     "from the measured " + cmp.columns[cmp.baseline].label +
                     ": time = max(FLOPs / (peak × e_c), bytes / (bandwidth × e_m)), with the efficiency of the "
                     "ceiling that bound each result carried over from its measurement and the other taken from "
                     "the same run's best result (defaults 0.80 compute, 0.85 bandwidth). Speedups are against "
                     + cmp.columns[cmp.baseline].label + ".";
  return text;
}

// ---------------------------------------------------------------------------------------

// One markdown table: a benchmark column, then one column per title, cells from text_of(row, column).
template <class CellText>
void markdown_table(std::ostringstream& md, const comparison& cmp, const std::vector<std::string>& titles,
                    CellText text_of) {
  md << "| benchmark |";
  for (const auto& t : titles) md << " " << t << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i < titles.size(); ++i) md << "---|";
  md << "\n";
  for (std::size_t r = 0; r < cmp.benchmarks.size(); ++r) {
    md << "| " << markdown_name(cmp.benchmarks[r]) << " |";
    for (std::size_t i = 0; i < titles.size(); ++i) md << " " << text_of(r, i) << " |";
    md << "\n";
  }
}

// The notes that say what the summary's and the table's marks mean; only those that apply.
inline std::vector<std::string> reading_notes(const comparison& cmp) {
  std::vector<std::string> notes;
  bool any_projected = false, any_l2 = false;
  for (const auto& c : cmp.columns) any_projected = any_projected || c.projected;
  for (const auto& row : cmp.cells)
    for (const auto& c : row) any_l2 = any_l2 || c.l2_resident;
  if (any_projected) {
    notes.push_back("≈ projected: a roofline estimate from the measured " + cmp.columns[cmp.baseline].label +
                    ". The band is the projection's measured error, ±" + fixed(gpucmp::projection_mean_abs_error * 100, 1) +
                    " % on average and up to " + fixed(gpucmp::projection_largest_abs_error * 100, 1) +
                    " % against published results (GEMMs came out 10–21 % low; docs/results/h200-projection.md).");
  }
  for (const auto& c : cmp.columns) {
    if (c.trust == gpucmp::confidence::low) {
      notes.push_back("⚠ low-confidence specs: NVIDIA publishes no datasheet for the " + c.label +
                      "; its figures come from secondary sources (docs/gpu-database.md), so its projections are less "
                      "certain than the band says.");
    } else if (c.trust == gpucmp::confidence::derived) {
      notes.push_back("⚠ derived specs: the " + c.label + " is not in the database; its figures were computed from the "
                      "device's own attributes.");
    }
  }
  for (const auto& c : cmp.columns) {
    if (c.ptx_jit) {
      notes.push_back("⚠ JIT-compiled PTX: the program measured on the " + c.label + " carried no machine code for it "
                      "(its context's cuda_architectures and gpu_code): the driver compiled older PTX at load, so its "
                      "own kernels ran code never built for this GPU. Rebuild with CMAKE_CUDA_ARCHITECTURES for it.");
    }
  }
  if (any_l2) {
    notes.push_back("L2-resident: its bytes fit in the GPU's L2 cache and moved faster than its DRAM can, so L2 served "
                    "them: the rate is not a DRAM figure. † projected from a measurement whose bytes fit in L2: the "
                    "projection uses DRAM bandwidth, and the summary leaves these rows out of projected means.");
  }
  if (any_cell_of(cmp, cell_kind::latency_bound)) {
    notes.push_back("latency-bound: measured in under " + number(gpucmp::latency_bound_below_s * 1e6) +
                    " µs a launch, so a launch's fixed cost, not a datasheet ceiling, bounds it: not projected.");
  }
  return notes;
}

/// A table cell of the comparison: time, rate, speedup and its marks.
inline std::string table_cell_text(const comparison& cmp, std::size_t r, std::size_t i) {
  const cell& c = cmp.cells[r][i];
  std::string text = cell_text(c);
  if (std::isfinite(c.speedup) && i != cmp.baseline) text += " (×" + fixed(c.speedup, 2) + ")";
  if (c.kind == cell_kind::measured && c.l2_resident) text += " · L2-resident";
  if (c.kind == cell_kind::projected && c.l2_resident) text += " †";
  return text;
}

inline const char* power_intro = "Power (average W over the measurement window), energy per launch (W x time) and work "
                                 "per second per W; measured columns only:";
inline const char* per_dollar_intro = "Work an hour at the given price buys (launches when no work was declared; ≈ projected):";

/// Whether any cell recorded power.
inline bool any_power(const comparison& cmp) {
  for (const auto& row : cmp.cells)
    for (const auto& c : row)
      if (std::isfinite(c.watts)) return true;
  return false;
}

/// Whether any column has a price.
inline bool any_price(const comparison& cmp) {
  for (const auto& c : cmp.columns)
    if (std::isfinite(c.usd_per_hour)) return true;
  return false;
}

/// Row `r`'s power on column `i`: "385 W, 1.69 J, 0.649 TFLOP/s/W", or "" when not recorded.
inline std::string power_text(const comparison& cmp, std::size_t r, std::size_t i) {
  const cell& c = cmp.cells[r][i];
  if (!std::isfinite(c.watts)) return std::string();
  std::string text = number(c.watts) + " W";
  if (std::isfinite(c.seconds)) text += ", " + energy_text(c.watts * c.seconds);
  if (std::isfinite(c.rate)) text += ", " + number(c.rate / c.watts) + " " + c.unit + "/W";
  return text;
}

/// What an hour of column `i` at its price buys of row `r`'s work: "9.26 M GB per $", "≈2.1 M GB per $".
inline std::string per_dollar_text(const comparison& cmp, std::size_t r, std::size_t i) {
  const cell& c = cmp.cells[r][i];
  const double price = cmp.columns[i].usd_per_hour;
  if (!(std::isfinite(price) && price > 0 && std::isfinite(c.seconds) && c.seconds > 0)) return std::string();
  const std::string mark = c.kind == cell_kind::projected ? "≈" : "";
  if (std::isfinite(c.rate)) return mark + count_text(c.rate * 3600.0 / price) + " " + c.unit.substr(0, c.unit.size() - 2) + " per $";
  return mark + count_text(3600.0 / c.seconds / price) + " launches per $";
}

/// A summary cell: the group's speedup and, when some rows have none here, how many it averages.
inline std::string summary_cell_text(const group_speedup& s, std::size_t group_rows) {
  std::string text = speedup_text(s);
  if (s.rows > 0 && s.rows < group_rows) text += " (" + std::to_string(s.rows) + " of " + std::to_string(group_rows) + " rows)";
  return text;
}

// The summary as markdown: a table of groups x GPUs, or one sentence when there is one GPU.
inline void markdown_summary(std::ostringstream& md, const comparison& cmp, const comparison_summary& summary) {
  md << "## Summary\n\n";
  if (cmp.columns.size() < 2) {
    md << "One GPU, " << markdown_text(cmp.columns.front().label)
       << ", and nothing to compare it with: give more result files, or --project onto other GPUs.\n";
    return;
  }
  md << "Speedup against " << markdown_text(cmp.columns[cmp.baseline].label)
     << ": the geometric mean over each group's rows (higher is faster; rows group by what they measured, from their "
        "axes).\n\n| group | rows |";
  for (const auto& c : cmp.columns) md << " " << markdown_text(column_title(c)) << " |";
  md << " fastest |\n|---|---|";
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) md << "---|";
  md << "---|\n";
  for (std::size_t g = 0; g < summary.groups.size(); ++g) {
    const row_group& group = summary.groups[g];
    md << "| " << markdown_text(group.title) << " | " << group.rows.size() << " |";
    for (const auto& s : summary.speedups[g]) md << " " << summary_cell_text(s, group.rows.size()) << " |";
    const std::size_t best = summary.fastest(g);
    md << " " << (best == std::string::npos ? std::string("—") : markdown_text(cmp.columns[best].label)) << " |\n";
  }
}

inline std::string render_markdown(const comparison& cmp) {
  std::ostringstream md;
  md << "# gpucmp comparison\n\n";
  markdown_summary(md, cmp, summarize_comparison(cmp));
  const std::vector<std::string> notes = reading_notes(cmp);
  if (!notes.empty()) md << "\n";
  for (const auto& n : notes) md << "- " << markdown_text(n) << "\n";
  md << "\n## Results\n\n" << markdown_text(method_text(cmp)) << "\n\n";
  std::vector<std::string> titles, labels, priced;
  for (const auto& c : cmp.columns) {
    titles.push_back(markdown_text(column_title(c)));
    labels.push_back(markdown_text(c.label));
    priced.push_back(markdown_text(c.label) + (std::isfinite(c.usd_per_hour) ? " ($" + fixed(c.usd_per_hour, 2) + "/h)" : ""));
  }
  markdown_table(md, cmp, titles, [&](std::size_t r, std::size_t i) { return table_cell_text(cmp, r, i); });
  // Efficiency per watt and per dollar, when recorded or given.
  if (any_power(cmp)) {
    md << "\n## Power\n\n" << markdown_text(power_intro) << "\n\n";
    markdown_table(md, cmp, labels, [&](std::size_t r, std::size_t i) { return power_text(cmp, r, i); });
  }
  if (any_price(cmp)) {
    md << "\n## Per dollar\n\n" << markdown_text(per_dollar_intro) << "\n\n";
    markdown_table(md, cmp, priced, [&](std::size_t r, std::size_t i) { return per_dollar_text(cmp, r, i); });
  }
  const std::vector<p2p_matrix> p2p = p2p_matrices(cmp);
  if (!p2p.empty()) md << "\n## P2P bandwidth\n\nOne-way copies between GPUs, GB/s; row: from, column: to.\n";
  for (const p2p_matrix& m : p2p) {
    md << "\n" << markdown_text(m.gpu) << ", " << markdown_text(m.method) << ", " << size_text(m.bytes) << ":\n\n" << p2p_markdown(m);
  }
  md << "\n## Sources\n";
  for (const auto& c : cmp.columns) md << "\n- " << markdown_text(c.label) << ": " << markdown_text(c.source);
  md << "\n";
  return md.str();
}

// ---------------------------------------------------------------------------------------

/// A CSV field (RFC 4180). A text that a spreadsheet would read as a formula (it starts with
/// = + - @, a tab or a carriage return) gets a leading ' and quotes, so opening the CSV
/// runs nothing.
inline std::string csv_field(const std::string& text) {
  const bool formula = !text.empty() && std::string("=+-@\t\r").find(text[0]) != std::string::npos;
  if (!formula && text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = formula ? "\"'" : "\"";
  for (char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

inline std::string render_csv(const comparison& cmp) {
  std::ostringstream csv;
  csv << "benchmark,gpu,gpu_key,kind,seconds,rate,rate_unit,speedup,watts,usd_per_hour,note\n";
  for (std::size_t r = 0; r < cmp.benchmarks.size(); ++r) {
    for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
      const cell& c = cmp.cells[r][i];
      const column& col = cmp.columns[i];
      const auto num = csv_number;
      csv << csv_field(cmp.benchmarks[r]) << "," << csv_field(col.label) << "," << csv_field(col.key) << ","
          << to_string(c.kind) << "," << num(c.seconds) << "," << num(c.rate) << "," << c.unit << "," << num(c.speedup)
          << "," << num(c.watts) << "," << num(col.usd_per_hour) << "," << csv_field(c.note) << "\n";
    }
  }
  return csv.str();
}

// ---------------------------------------------------------------------------------------


inline const char* column_color(std::size_t i) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return colors[i % 8];
}

// A tick step for an axis from 0 to `top` with 4 to 8 ticks: 1, 2, 2.5 or 5 times a power of ten.
inline double tick_step(double top) {
  const double raw = top / 6;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

// One group's chart: for each row (labelled by what sets it apart), one horizontal bar per GPU
// of its speedup against the baseline; projected bars hatched, ×1 drawn darker, the value
// written after each bar (room is kept for it), what has no speedup written in grey.
inline std::string group_chart_svg(const comparison& cmp, const row_group& g) {
  std::size_t longest = 0;
  for (const auto& label : g.labels) longest = std::max(longest, label.size());
  const int label_w = static_cast<int>(std::clamp<std::size_t>(7 * longest + 16, 120, 440)), chart_w = 460, value_w = 90, bar_h = 12, bar_gap = 2, row_gap = 12, top = 8, bottom = 34;
  const std::size_t columns = cmp.columns.size();
  double max_speedup = 1.0;
  for (std::size_t r : g.rows)
    for (const auto& c : cmp.cells[r])
      if (std::isfinite(c.speedup)) max_speedup = std::max(max_speedup, c.speedup);
  const double step = tick_step(max_speedup);
  const double axis_top = std::ceil(max_speedup / step - 1e-9) * step;
  const int cluster_h = static_cast<int>(columns) * (bar_h + bar_gap) - bar_gap;
  const int height = top + static_cast<int>(g.rows.size()) * (cluster_h + row_gap) + bottom;
  const int width = label_w + chart_w + value_w;
  auto px = [&](double v) { return label_w + v / axis_top * chart_w; };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" role=\"img\" aria-label=\"" << html_escape(g.title) << "\">";
  const int plot_bottom = height - bottom;
  for (double t = 0; t <= axis_top + 1e-9; t += step) {
    const double x = px(t);
    svg << "<line x1=\"" << fixed(x, 1) << "\" y1=\"" << top << "\" x2=\"" << fixed(x, 1) << "\" y2=\"" << plot_bottom
        << "\" stroke=\"#e4e4e4\"/><text x=\"" << fixed(x, 1) << "\" y=\"" << plot_bottom + 14
        << "\" text-anchor=\"middle\" font-size=\"11\">×" << parameter_number(std::round(t * 1000) / 1000) << "</text>";
  }
  svg << "<line x1=\"" << fixed(px(1), 1) << "\" y1=\"" << top << "\" x2=\"" << fixed(px(1), 1) << "\" y2=\"" << plot_bottom
      << "\" stroke=\"#555\" stroke-dasharray=\"3 2\"/>";
  svg << "<text x=\"" << label_w + chart_w / 2 << "\" y=\"" << height - 4 << "\" text-anchor=\"middle\" font-size=\"12\">speedup against "
      << html_escape(cmp.columns[cmp.baseline].label) << " (×1: the same speed)</text>";
  for (std::size_t k = 0; k < g.rows.size(); ++k) {
    const int y0 = top + static_cast<int>(k) * (cluster_h + row_gap) + row_gap / 2;
    svg << "<text x=\"" << label_w - 8 << "\" y=\"" << y0 + cluster_h / 2 + 4 << "\" text-anchor=\"end\" font-size=\"12\">"
        << html_escape(g.labels[k]) << "</text>";
    for (std::size_t i = 0; i < columns; ++i) {
      const cell& c = cmp.cells[g.rows[k]][i];
      const int y = y0 + static_cast<int>(i) * (bar_h + bar_gap);
      if (!std::isfinite(c.speedup)) {
        svg << "<text x=\"" << label_w + 4 << "\" y=\"" << y + bar_h - 2 << "\" font-size=\"10\" fill=\"#888\">"
            << html_escape(cmp.columns[i].label) << ": " << to_string(c.kind) << "</text>";
        continue;
      }
      const double w = std::max(1.0, px(c.speedup) - label_w);
      const bool projected = c.kind == cell_kind::projected;
      svg << "<rect x=\"" << label_w << "\" y=\"" << y << "\" width=\"" << fixed(w, 1) << "\" height=\"" << bar_h << "\" fill=\""
          << (projected ? "url(#hatch" + std::to_string(i) + ")" : column_color(i)) << "\" stroke=\"" << column_color(i)
          << "\"><title>" << html_escape(cmp.columns[i].label) << "</title></rect>";
      svg << "<text x=\"" << fixed(label_w + w + 4, 1) << "\" y=\"" << y + bar_h - 2 << "\" font-size=\"10\">"
          << (projected ? "≈" : "") << "×" << fixed(c.speedup, 2) << (c.l2_resident ? " L2" : "") << "</text>";
    }
  }
  svg << "</svg>";
  return svg.str();
}

// A table of the benchmarks against the GPUs (with their prices when `priced`), cells from
// text_of(row, column).
template <class CellText>
std::string html_table(const comparison& cmp, CellText text_of, bool priced) {
  std::string out = "<table><tr><th>benchmark</th>";
  for (const auto& c : cmp.columns) {
    out += "<th>" + html_escape(c.label + (priced && std::isfinite(c.usd_per_hour) ? " ($" + fixed(c.usd_per_hour, 2) + "/h)" : "")) +
           "</th>";
  }
  out += "</tr>\n";
  for (std::size_t r = 0; r < cmp.benchmarks.size(); ++r) {
    out += "<tr><td><code>" + html_escape(cmp.benchmarks[r]) + "</code></td>";
    for (std::size_t i = 0; i < cmp.columns.size(); ++i) out += "<td>" + html_escape(text_of(r, i)) + "</td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

// The colour of each GPU's column, then `after`.
inline std::string legend_html(const comparison& cmp, const std::string& after) {
  std::string out = "<div class=\"legend\">";
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    out += std::string("<span><i style=\"background:") + column_color(i) + "\"></i>" + html_escape(column_title(cmp.columns[i])) +
           "</span>";
  }
  return out + html_escape(after) + "</div>";
}

inline std::string html_notes(const comparison& cmp) {
  const std::vector<std::string> notes = reading_notes(cmp);
  if (notes.empty()) return "";
  std::string out = "<ul class=\"notes\">";
  for (const auto& n : notes) out += "<li>" + html_escape(n) + "</li>";
  return out + "</ul>\n";
}

// The summary as HTML: a table of groups x GPUs (the fastest in bold) and the reading notes.
inline void html_summary(std::ostringstream& html, const comparison& cmp, const comparison_summary& summary) {
  html << "<p>Speedup against " << html_escape(cmp.columns[cmp.baseline].label)
       << ": the geometric mean over each group's rows (higher is faster; rows group by what they measured, from their "
          "axes).</p>\n<table class=\"summary\"><tr><th>group</th><th>rows</th>";
  for (const auto& c : cmp.columns) html << "<th>" << html_escape(column_title(c)) << "</th>";
  html << "<th>fastest</th></tr>\n";
  for (std::size_t g = 0; g < summary.groups.size(); ++g) {
    const row_group& group = summary.groups[g];
    const std::size_t best = summary.fastest(g);
    html << "<tr><td>" << html_escape(group.title) << "</td><td>" << group.rows.size() << "</td>";
    for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
      html << "<td" << (i == best ? " class=\"best\"" : "") << ">"
           << html_escape(summary_cell_text(summary.speedups[g][i], group.rows.size())) << "</td>";
    }
    html << "<td>" << (best == std::string::npos ? std::string("—") : html_escape(cmp.columns[best].label)) << "</td></tr>\n";
  }
  html << "</table>\n" << html_notes(cmp) << "</section>\n";
}

inline std::string render_html(const comparison& cmp) {
  std::ostringstream html;
  const comparison_summary summary = summarize_comparison(cmp);
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpucmp comparison</title>\n"
       << "<style>body{font-family:sans-serif;margin:24px;color:#222;max-width:1300px}table{border-collapse:collapse;margin:12px 0}"
          "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px}th{background:#f3f3f3}"
          "table.summary td{font-size:14px}table.summary td.best{font-weight:bold}"
          "td.projected{font-style:italic;color:#555}td.oom,td.unsupported,td.failed,td.missing,td.skipped,td.no_model{color:#a00}"
          "td.latency-bound{color:#777}ul.notes li{font-size:13px;margin:3px 0}"
          ".legend span{display:inline-block;margin-right:16px}.legend i{display:inline-block;width:14px;height:10px;"
          "margin-right:4px}</style></head><body>\n";
  html << "<h1>gpucmp comparison</h1>\n";
  html << "<svg width=\"0\" height=\"0\" style=\"position:absolute\"><defs>";
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    html << "<pattern id=\"hatch" << i << "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         << "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"white\"/><rect width=\"3\" height=\"6\" fill=\""
         << column_color(i) << "\"/></pattern>";
  }
  html << "</defs></svg>\n";
  // The summary first: who wins, by how much, and how far to trust it.
  html << "<section id=\"summary\"><h2>Summary</h2>\n";
  if (cmp.columns.size() < 2) {
    html << "<p>One GPU, " << html_escape(cmp.columns.front().label)
         << ", and nothing to compare it with: give more result files, or --project onto other GPUs.</p>\n"
         << html_notes(cmp) << "</section>\n";
  } else {
    html_summary(html, cmp, summary);
  }

  html << "<section id=\"results\"><h2>Results</h2>\n<p>" << html_escape(method_text(cmp)) << "</p>\n"
       << legend_html(cmp, "") << "\n<table><tr><th>benchmark</th>";
  for (const auto& c : cmp.columns) html << "<th>" << html_escape(column_title(c)) << "</th>";
  html << "</tr>\n";
  for (std::size_t r = 0; r < cmp.benchmarks.size(); ++r) {
    html << "<tr><td><code>" << html_escape(cmp.benchmarks[r]) << "</code></td>";
    for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
      const cell& c = cmp.cells[r][i];
      std::string kind = to_string(c.kind);
      std::replace(kind.begin(), kind.end(), ' ', '_');
      html << "<td class=\"" << kind << "\" title=\"" << html_escape(c.note) << "\">" << html_escape(table_cell_text(cmp, r, i))
           << "</td>";
    }
    html << "</tr>\n";
  }
  html << "</table>\n";
  html << "</section>\n";

  // One chart per group: the described groups first, then the rows without axes (labelled by
  // their names, the one thing that tells them apart).
  html << "<section id=\"charts\"><h2>Charts: speedup against " << html_escape(cmp.columns[cmp.baseline].label)
       << ", one per group</h2>\n" << legend_html(cmp, " (hatched: projected)") << "\n";
  for (const bool described : {true, false}) {
    if (!described && std::any_of(summary.groups.begin(), summary.groups.end(), [](const row_group& g) { return !g.described; })) {
      html << "<div id=\"undescribed-charts\"></div>\n";
    }
    for (const row_group& g : summary.groups) {
      if (g.described == described) html << "<h3>" << html_escape(g.title) << "</h3>\n" << group_chart_svg(cmp, g) << "\n";
    }
  }
  const std::vector<p2p_matrix> p2p = p2p_matrices(cmp);
  if (!p2p.empty()) html << "<h2>P2P bandwidth</h2>\n";
  for (const p2p_matrix& m : p2p) {
    html << "<h3>" << html_escape(m.gpu) << ": <code>" << html_escape(m.method) << "</code></h3>\n" << p2p_heatmap_svg(m) << "\n";
  }
  html << "</section>\n";
  if (any_power(cmp)) {
    html << "<h2>Power</h2>\n<p>" << html_escape(power_intro) << "</p>\n"
         << html_table(cmp, [&](std::size_t r, std::size_t i) { return power_text(cmp, r, i); }, false);
  }
  if (any_price(cmp)) {
    html << "<h2>Per dollar</h2>\n<p>" << html_escape(per_dollar_intro) << "</p>\n"
         << html_table(cmp, [&](std::size_t r, std::size_t i) { return per_dollar_text(cmp, r, i); }, true);
  }
  html << "<h2>Sources</h2><ul>";
  for (const auto& c : cmp.columns) html << "<li>" << html_escape(c.label) << ": " << html_escape(c.source) << "</li>";
  html << "</ul></body></html>\n";
  return html.str();
}

}  // namespace gpucmp_report
