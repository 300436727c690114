// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Fuzzes gpucmp-report's loader of result files (Google Benchmark JSON with typed rows) and
// everything made from what it accepts: the comparison with projections and prices, and the
// markdown, CSV and HTML renderings; the before/after comparison of the file with itself (its
// rank statistics over the rows' sample_seconds); and the legacy path of `gpucmp-report upgrade`, whose
// output the loader must then accept. Input is either rejected with input_error or used.
#include "before_after.hpp"
#include "model.hpp"
#include "render.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const gpucmp_report::result_file file = gpucmp_report::parse_result_file(text, "fuzz.json");
    gpucmp_report::compare_options options;
    options.project_to = {"a100_80gb_sxm", "l40s"};
    const gpucmp_report::comparison cmp = gpucmp_report::compare({file}, options);
    const std::string out =
        gpucmp_report::render_markdown(cmp) + gpucmp_report::render_csv(cmp) + gpucmp_report::render_html(cmp);
    const gpucmp_report::before_after same = gpucmp_report::compare_before_after({"a", file}, {"b", file}, {});
    const std::string diff = gpucmp_report::render_before_after_markdown(same) + gpucmp_report::render_before_after_csv(same);
    volatile std::size_t rendered = out.size() + diff.size();  // keeps the renderings from being optimised away
    (void)rendered;
  } catch (const gpucmp_report::input_error&) {
    // rejected with a message naming the file: the expected outcome
  }
  std::string upgraded;
  try {
    upgraded = gpucmp_report::upgraded_result_text(text, "fuzz.json");
  } catch (const gpucmp_report::input_error&) {
    return 0;  // not a legacy gpucmp result
  }
  // What the upgrade writes is a typed file the loader accepts (a throw here is a finding).
  gpucmp_report::parse_result_file(upgraded, "upgraded.json");
  return 0;
}
