// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The P2P matrix of a comparison: the rows whose typed axes say a one-way copy between two
// GPUs (benchmarks/p2p_matrix: axes method, from, to, bytes, direction "one_way"; never their
// names) gathered per measured GPU and copy method at the largest size into a from x to
// matrix of GB/s, shown as a markdown table and as an SVG heat map (darker is faster; the
// value is written in each cell).
#pragma once

#include "format.hpp"
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_report {

/// One GPU's P2P bandwidths for one copy method.
struct p2p_matrix {
  std::string gpu;                      ///< the column's GPU
  std::string method;                   ///< "memcpy_peer", "copy_kernel"
  double bytes = 0;                     ///< the copy size shown: the largest one measured
  std::vector<std::vector<double>> gbps;  ///< [from][to]; NaN where there is no measurement
};

namespace detail {
// The numeric axis `name` of `d`, or -1.
inline double axis_number(const gpucmp::row_description& d, const char* name) {
  const gpucmp::axis* a = d.find(name);
  return a != nullptr && a->number ? *a->number : -1;
}
// The text axis `name` of `d`, or "".
inline std::string axis_text(const gpucmp::row_description& d, const char* name) {
  const gpucmp::axis* a = d.find(name);
  return a != nullptr && !a->number ? a->text : std::string();
}
}  // namespace detail

/// Every measured column's matrices, one per copy method, from the one-way rows at the
/// method's largest size. GPU indexes above 63 are left out (no machine has more).
inline std::vector<p2p_matrix> p2p_matrices(const comparison& cmp) {
  struct entry {
    int from, to;
    double bytes, gbps;
  };
  std::vector<p2p_matrix> out;
  for (std::size_t i = 0; i < cmp.columns.size(); ++i) {
    if (cmp.columns[i].projected) continue;  // a copy between two GPUs is not projected
    std::map<std::string, std::vector<entry>> by_method;
    for (std::size_t r = 0; r < cmp.benchmarks.size() && r < cmp.facts.size(); ++r) {
      const gpucmp::row_description& d = cmp.facts[r].described;
      const std::string method = detail::axis_text(d, "method");
      if (method.empty() || detail::axis_text(d, "direction") != "one_way") continue;
      const double from = detail::axis_number(d, "from"), to = detail::axis_number(d, "to"), bytes = detail::axis_number(d, "bytes");
      const cell& c = cmp.cells[r][i];
      if (from < 0 || to < 0 || from > 63 || to > 63 || from != std::floor(from) || to != std::floor(to) || from == to ||
          bytes <= 0 || c.unit != "GB/s" || !std::isfinite(c.rate)) {
        continue;
      }
      by_method[method].push_back({int(from), int(to), bytes, c.rate});
    }
    for (const auto& [method, entries] : by_method) {
      p2p_matrix m;
      m.gpu = cmp.columns[i].label;
      m.method = method;
      int devices = 0;
      for (const entry& e : entries) {
        m.bytes = std::max(m.bytes, e.bytes);
        devices = std::max({devices, e.from + 1, e.to + 1});
      }
      m.gbps.assign(std::size_t(devices), std::vector<double>(std::size_t(devices), NAN));
      for (const entry& e : entries) {
        if (e.bytes == m.bytes) m.gbps[std::size_t(e.from)][std::size_t(e.to)] = e.gbps;
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

/// The matrix as a markdown table (row: from, column: to; "–" on the diagonal).
inline std::string p2p_markdown(const p2p_matrix& m) {
  std::ostringstream md;
  const std::size_t n = m.gbps.size();
  md << "| from \\ to |";
  for (std::size_t b = 0; b < n; ++b) md << " " << b << " |";
  md << "\n|---|";
  for (std::size_t b = 0; b < n; ++b) md << "---|";
  md << "\n";
  for (std::size_t a = 0; a < n; ++a) {
    md << "| " << a << " |";
    for (std::size_t b = 0; b < n; ++b) {
      const double v = m.gbps[a][b];
      md << " " << (a == b ? std::string("–") : std::isfinite(v) ? fixed(v, 1) : std::string("not measured")) << " |";
    }
    md << "\n";
  }
  return md.str();
}

/// The matrix as an SVG heat map: each pair's cell shaded by its GB/s against the fastest
/// pair (white to dark blue), the value written in it; the diagonal and unmeasured pairs grey.
inline std::string p2p_heatmap_svg(const p2p_matrix& m) {
  const int cell_px = 64, margin = 48;
  const int n = int(m.gbps.size());
  double best = 0;
  for (const auto& row : m.gbps)
    for (double v : row)
      if (std::isfinite(v)) best = std::max(best, v);
  const int size = margin + n * cell_px + 8;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << std::max(size, 380) << "\" height=\"" << size + 16
      << "\" role=\"img\" aria-label=\"P2P bandwidth, " << html_escape(m.method) << ", GB/s\">";
  svg << "<text x=\"" << margin << "\" y=\"12\" font-size=\"11\">to →</text>";
  svg << "<text x=\"4\" y=\"" << margin - 8 << "\" font-size=\"11\">from ↓</text>";
  for (int i = 0; i < n; ++i) {
    svg << "<text x=\"" << margin + i * cell_px + cell_px / 2 << "\" y=\"" << margin - 8 << "\" text-anchor=\"middle\" font-size=\"12\">" << i
        << "</text>";
    svg << "<text x=\"" << margin - 8 << "\" y=\"" << margin + i * cell_px + cell_px / 2 + 4 << "\" text-anchor=\"end\" font-size=\"12\">" << i
        << "</text>";
  }
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const double v = m.gbps[std::size_t(a)][std::size_t(b)];
      std::string fill = "#e0e0e0", ink = "#222", label = a == b ? "–" : "n/a";
      if (a != b && std::isfinite(v) && best > 0) {
        const double t = std::clamp(v / best, 0.0, 1.0);  // 0: white, 1: #08306b
        char color[32];  // room for any int: GCC 13 cannot see the channels stay within 0-255
        std::snprintf(color, sizeof color, "#%02x%02x%02x", unsigned(255 - t * (255 - 8)) & 0xffu,
                      unsigned(255 - t * (255 - 48)) & 0xffu, unsigned(255 - t * (255 - 107)) & 0xffu);
        fill = color;
        ink = t > 0.5 ? "#fff" : "#222";
        label = fixed(v, 0);
      }
      const int x = margin + b * cell_px, y = margin + a * cell_px;
      svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cell_px - 2 << "\" height=\"" << cell_px - 2 << "\" fill=\"" << fill
          << "\"/><text x=\"" << x + cell_px / 2 << "\" y=\"" << y + cell_px / 2 + 4 << "\" text-anchor=\"middle\" font-size=\"12\" fill=\""
          << ink << "\">" << label << "</text>";
    }
  }
  svg << "<text x=\"" << margin << "\" y=\"" << size + 10 << "\" font-size=\"11\">GB/s, one way, " << number(m.bytes)
      << " bytes; darkest: " << fixed(best, 1) << "</text></svg>";
  return svg.str();
}

}  // namespace gpucmp_report
