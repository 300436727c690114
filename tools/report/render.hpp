// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Renderers of a comparison: markdown, CSV and a self-contained HTML page with SVG charts.
// They only read the comparison; numbers are formatted the same way everywhere.
#pragma once

#include "format.hpp"
#include "model.hpp"
#include "p2p_heatmap.hpp"

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

inline std::string render_markdown(const comparison& cmp) {
  std::ostringstream md;
  md << "# gpucmp comparison\n\n" << markdown_text(method_text(cmp)) << "\n\n";
  std::vector<std::string> titles, labels, priced;
  for (const auto& c : cmp.columns) {
    titles.push_back(markdown_text(column_title(c)));
    labels.push_back(markdown_text(c.label));
    priced.push_back(markdown_text(c.label) + (std::isfinite(c.usd_per_hour) ? " ($" + fixed(c.usd_per_hour, 2) + "/h)" : ""));
  }
  markdown_table(md, cmp, titles, [&](std::size_t r, std::size_t i) {
    const cell& c = cmp.cells[r][i];
    std::string text = cell_text(c);
    if (std::isfinite(c.speedup) && i != cmp.baseline) text += " (×" + fixed(c.speedup, 2) + ")";
    if (c.kind == cell_kind::projected && !c.note.empty()) text += " †";
    return text;
  });
  // Efficiency per watt and per dollar, when recorded or given.
  bool any_power = false, any_price = false;
  for (const auto& row : cmp.cells)
    for (const auto& c : row) any_power = any_power || std::isfinite(c.watts);
  for (const auto& c : cmp.columns) any_price = any_price || std::isfinite(c.usd_per_hour);
  if (any_power) {
    md << "\nPower (average W over the measurement window), energy per launch (W x time) and work per "
          "second per W; measured columns only:\n\n";
    markdown_table(md, cmp, labels, [&](std::size_t r, std::size_t i) {
      const cell& c = cmp.cells[r][i];
      if (!std::isfinite(c.watts)) return std::string();
      std::string text = number(c.watts) + " W";
      if (std::isfinite(c.seconds)) text += ", " + energy_text(c.watts * c.seconds);
      if (std::isfinite(c.rate)) text += ", " + number(c.rate / c.watts) + " " + c.unit + "/W";
      return text;
    });
  }
  if (any_price) {
    md << "\nPer dollar (work an hour at the given price buys; launches when no work was declared):\n\n";
    markdown_table(md, cmp, priced, [&](std::size_t r, std::size_t i) {
      const cell& c = cmp.cells[r][i];
      const double price = cmp.columns[i].usd_per_hour;
      if (!(std::isfinite(price) && price > 0 && std::isfinite(c.seconds) && c.seconds > 0)) return std::string();
      if (std::isfinite(c.rate)) return number(c.rate * 3600.0 / price) + " " + c.unit.substr(0, c.unit.size() - 2) + " per $";
      return number(3600.0 / c.seconds / price) + " launches per $";
    });
  }
  bool any_caveat = false;
  for (const auto& row : cmp.cells)
    for (const auto& c : row) any_caveat = any_caveat || (c.kind == cell_kind::projected && !c.note.empty());
  if (any_caveat) md << "\n† L2-resident when measured: projected with DRAM bandwidth.\n";
  if (any_cell_of(cmp, cell_kind::latency_bound)) {
    md << "\nlatency-bound: measured in under " << number(gpucmp::latency_bound_below_s * 1e6)
       << " µs a launch, so a launch's fixed cost, not a datasheet ceiling, bounds it: not projected.\n";
  }
  const std::vector<p2p_matrix> p2p = p2p_matrices(cmp);
  if (!p2p.empty()) md << "\nP2P bandwidth (one-way copies between GPUs, GB/s; row: from, column: to):\n";
  for (const p2p_matrix& m : p2p) {
    md << "\n" << markdown_text(m.gpu) << ", " << markdown_text(m.method) << ", " << number(m.bytes) << " bytes:\n\n" << p2p_markdown(m);
  }
  md << "\nSources:";
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
      auto num = [](double v) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", v);
        return std::isfinite(v) ? std::string(buf) : std::string();
      };
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

// Horizontal bars of speedup against the baseline, one per GPU; projected bars hatched.
inline std::string speedup_bars_svg(const comparison& cmp, std::size_t row) {
  const int bar_h = 18, gap = 6, label_w = 300, chart_w = 360;
  double max_speedup = 1.0;
  for (const auto& c : cmp.cells[row]) {
    if (std::isfinite(c.speedup)) max_speedup = std::max(max_speedup, c.speedup);
  }
  const int height = static_cast<int>(cmp.columns.size()) * (bar_h + gap) + gap;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << label_w + chart_w + 80 << "\" height=\"" << height
      << "\" role=\"img\" aria-label=\"speedup of " << html_escape(cmp.benchmarks[row]) << "\">";
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    const cell& c = cmp.cells[row][i];
    const int y = gap + static_cast<int>(i) * (bar_h + gap);
    svg << "<text x=\"" << label_w - 6 << "\" y=\"" << y + bar_h - 5 << "\" text-anchor=\"end\" font-size=\"12\">"
        << html_escape(cmp.columns[i].label) << "</text>";
    if (std::isfinite(c.speedup)) {
      const int w = std::max(1, static_cast<int>(chart_w * c.speedup / max_speedup));
      svg << "<rect x=\"" << label_w << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << bar_h << "\" fill=\""
          << (c.kind == cell_kind::projected ? "url(#hatch" + std::to_string(i) + ")" : column_color(i))
          << "\" stroke=\"" << column_color(i) << "\"/>";
      svg << "<text x=\"" << label_w + w + 4 << "\" y=\"" << y + bar_h - 5 << "\" font-size=\"12\">×" << fixed(c.speedup, 2)
          << (c.kind == cell_kind::projected ? " projected" : "") << "</text>";
    } else {
      svg << "<text x=\"" << label_w + 4 << "\" y=\"" << y + bar_h - 5 << "\" font-size=\"12\" fill=\"#888\">"
          << to_string(c.kind) << "</text>";
    }
  }
  svg << "</svg>";
  return svg.str();
}

// A family's title, from what its rows share: every axis but the swept one ("name=value",
// in the order the benchmark declared them), the provider, the timing mode, the swept axis.
inline std::string family_title(const row_facts& f) {
  std::string title;
  auto add = [&](const std::string& part) { title += (title.empty() ? "" : ", ") + part; };
  for (const gpucmp::axis& a : f.described.axes) {
    if (a.name != f.described.sweep_axis) add(a.name + "=" + (a.number ? parameter_number(*a.number) : a.text));
  }
  if (!f.described.provider.empty()) add(f.described.provider);
  if (!f.timing_mode.empty()) add(f.timing_mode + " mode");
  return title + "; over " + f.described.sweep_axis;
}

// Families: rows alike in every axis but the one they sweep (and in provider and timing
// mode), read from the rows' typed axes and never from their names, drawn as curves of the
// rate (or 1 / time) over the swept axis, one line per GPU, on a log2 x axis.
inline std::map<std::string, std::vector<std::pair<double, std::size_t>>> families(const comparison& cmp) {
  std::map<std::string, std::vector<std::pair<double, std::size_t>>> out;
  for (std::size_t r = 0; r < cmp.benchmarks.size() && r < cmp.facts.size(); ++r) {
    const row_facts& f = cmp.facts[r];
    if (f.described.sweep_axis.empty()) continue;
    const gpucmp::axis* x = f.described.find(f.described.sweep_axis);
    if (x == nullptr || !x->number || !(*x->number > 0)) continue;  // a log axis: positive sizes only
    auto& points = out[family_title(f)];
    const bool seen = std::any_of(points.begin(), points.end(), [&](const auto& p) { return p.first == *x->number; });
    if (!seen) points.push_back({*x->number, r});  // two rows at one point: the first (in name order) is drawn
  }
  for (auto it = out.begin(); it != out.end();) {
    it = it->second.size() >= 3 ? std::next(it) : out.erase(it);
  }
  return out;
}

inline std::string family_curve_svg(const comparison& cmp, const std::string& family,
                                     std::vector<std::pair<double, std::size_t>> points) {
  std::sort(points.begin(), points.end());
  const int w = 640, h = 300, left = 70, right = 20, top = 20, bottom = 40;
  auto value = [&](const cell& c) { return std::isfinite(c.rate) ? c.rate : (std::isfinite(c.seconds) ? 1.0 / c.seconds : NAN); };
  double max_v = 0;
  std::string unit = "launches/s";
  for (const auto& [size, row] : points)
    for (const auto& c : cmp.cells[row])
      if (std::isfinite(value(c))) {
        max_v = std::max(max_v, value(c));
        if (!c.unit.empty()) unit = c.unit;
      }
  if (max_v <= 0) return "";
  const double x0 = std::log2(points.front().first), x1 = std::log2(points.back().first);
  auto px = [&](double size) { return left + (x1 > x0 ? (std::log2(size) - x0) / (x1 - x0) : 0.5) * (w - left - right); };
  auto py = [&](double v) { return top + (1.0 - v / max_v) * (h - top - bottom); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" role=\"img\" aria-label=\""
      << html_escape(family) << "\">";
  svg << "<line x1=\"" << left << "\" y1=\"" << h - bottom << "\" x2=\"" << w - right << "\" y2=\"" << h - bottom
      << "\" stroke=\"#333\"/><line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << h - bottom
      << "\" stroke=\"#333\"/>";
  svg << "<text x=\"" << left - 6 << "\" y=\"" << top + 10 << "\" text-anchor=\"end\" font-size=\"11\">" << number(max_v)
      << "</text><text x=\"" << left - 6 << "\" y=\"" << h - bottom << "\" text-anchor=\"end\" font-size=\"11\">0</text>";
  svg << "<text x=\"" << (w + left) / 2 << "\" y=\"" << h - 8 << "\" text-anchor=\"middle\" font-size=\"12\">size (log scale), "
      << html_escape(unit) << " up</text>";
  for (const auto& [size, row] : points) {
    svg << "<text x=\"" << px(size) << "\" y=\"" << h - bottom + 14 << "\" text-anchor=\"middle\" font-size=\"10\">"
        << number(size) << "</text>";
  }
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    std::string path;
    for (const auto& [size, row] : points) {
      const double v = value(cmp.cells[row][i]);
      if (!std::isfinite(v)) continue;
      path += (path.empty() ? "" : " ") + fixed(px(size), 1) + "," + fixed(py(v), 1);
    }
    if (path.empty()) continue;
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << column_color(i) << "\""
        << (cmp.columns[i].projected ? " stroke-dasharray=\"6 4\"" : "") << " points=\"" << path << "\"/>";
  }
  svg << "</svg>";
  return svg.str();
}

inline std::string render_html(const comparison& cmp) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpucmp comparison</title>\n"
       << "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
          "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px}th{background:#f3f3f3}"
          "td.projected{font-style:italic;color:#555}td.oom,td.unsupported,td.failed,td.missing,td.skipped,td.no_model{color:#a00}"
          ".legend span{display:inline-block;margin-right:16px}.legend i{display:inline-block;width:14px;height:10px;"
          "margin-right:4px}</style></head><body>\n";
  html << "<h1>gpucmp comparison</h1>\n<p>" << html_escape(method_text(cmp)) << "</p>\n";
  html << "<svg width=\"0\" height=\"0\" style=\"position:absolute\"><defs>";
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    html << "<pattern id=\"hatch" << i << "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         << "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"white\"/><rect width=\"3\" height=\"6\" fill=\""
         << column_color(i) << "\"/></pattern>";
  }
  html << "</defs></svg>\n<div class=\"legend\">";
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    html << "<span><i style=\"background:" << column_color(i) << "\"></i>" << html_escape(column_title(cmp.columns[i]))
         << "</span>";
  }
  html << "</div>\n<table><tr><th>benchmark</th>";
  for (const auto& c : cmp.columns) html << "<th>" << html_escape(column_title(c)) << "</th>";
  html << "</tr>\n";
  for (std::size_t r = 0; r < cmp.benchmarks.size(); ++r) {
    html << "<tr><td><code>" << html_escape(cmp.benchmarks[r]) << "</code></td>";
    for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
      const cell& c = cmp.cells[r][i];
      std::string kind = to_string(c.kind);
      std::replace(kind.begin(), kind.end(), ' ', '_');
      html << "<td class=\"" << kind << "\" title=\"" << html_escape(c.note) << "\">" << html_escape(cell_text(c));
      if (std::isfinite(c.speedup) && i != cmp.baseline) html << " (×" << fixed(c.speedup, 2) << ")";
      html << "</td>";
    }
    html << "</tr>\n";
  }
  html << "</table>\n";
  if (any_cell_of(cmp, cell_kind::latency_bound)) {
    html << "<p>latency-bound: measured in under " << number(gpucmp::latency_bound_below_s * 1e6)
         << " µs a launch, so a launch's fixed cost, not a datasheet ceiling, bounds it: not projected.</p>\n";
  }
  html << "<h2>Speedup against " << html_escape(cmp.columns[cmp.baseline].label) << "</h2>\n";
  for (std::size_t r = 0; r < cmp.benchmarks.size(); ++r) {
    html << "<h3><code>" << html_escape(cmp.benchmarks[r]) << "</code></h3>\n" << speedup_bars_svg(cmp, r) << "\n";
  }
  const auto fams = families(cmp);
  if (!fams.empty()) html << "<h2>Over problem size</h2>\n";
  for (const auto& [family, points] : fams) {
    html << "<h3><code>" << html_escape(family) << "</code></h3>\n" << family_curve_svg(cmp, family, points) << "\n";
  }
  const std::vector<p2p_matrix> p2p = p2p_matrices(cmp);
  if (!p2p.empty()) html << "<h2>P2P bandwidth</h2>\n";
  for (const p2p_matrix& m : p2p) {
    html << "<h3>" << html_escape(m.gpu) << ": <code>" << html_escape(m.method) << "</code></h3>\n" << p2p_heatmap_svg(m) << "\n";
  }
  html << "<h2>Sources</h2><ul>";
  for (const auto& c : cmp.columns) html << "<li>" << html_escape(c.label) << ": " << html_escape(c.source) << "</li>";
  html << "</ul></body></html>\n";
  return html.str();
}

}  // namespace gpucmp_report
