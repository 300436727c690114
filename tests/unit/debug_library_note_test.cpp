// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gbench/debug_library_note.hpp: the stream's text passes through unchanged, and gpucmp's note
// follows Google Benchmark's debug-build warning once, on the next line.
#include "catch.hpp"

#include <gpucmp/gbench/debug_library_note.hpp>

#include <sstream>
#include <string>

TEST_CASE("gpucmp's note follows Google Benchmark's debug-build warning once, and nothing else changes", "[gbench_note]") {
  const std::string warning = "***WARNING*** Library was built as DEBUG. Timings may be affected.\n";
  const std::string context = "Run on (2 X 2596 MHz CPU s)\nLoad Average: 1.63, 1.52, 1.48\n";
  std::ostringstream out;
  std::streambuf* own = out.rdbuf();
  {
    gpucmp::detail::debug_library_note note(out);
    out << context << warning << "gpucmp_version: 0.1.0\n";
    out.write(warning.data(), std::streamsize(warning.size()));  // a second time: no second note
    CHECK(note.noted());
  }
  CHECK(out.rdbuf() == own);  // the stream has its buffer back
  CHECK(out.str() == context + warning + gpucmp::detail::debug_library_note_text() + "gpucmp_version: 0.1.0\n" + warning);

  std::ostringstream plain;
  {
    gpucmp::detail::debug_library_note note(plain);
    plain << context << "Library was built as RELEASE\n" << std::string(2000, 'x') << "\n";
    CHECK_FALSE(note.noted());
  }
  CHECK(plain.str() == context + "Library was built as RELEASE\n" + std::string(2000, 'x') + "\n");
}
