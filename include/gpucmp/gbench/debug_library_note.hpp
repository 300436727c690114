// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Distributions build Google Benchmark without NDEBUG, so every run prints "***WARNING***
// Library was built as DEBUG. Timings may be affected." and result files say
// "library_build_type": "debug". That warning is about Google Benchmark's own timing loop;
// gpucmp's times are GPU times from CUDA events, passed to it as manual time, which a debug
// build of the library does not touch. benchmark_main says so once, on the line after it.
#pragma once

#include <ostream>
#include <streambuf>
#include <string>

namespace gpucmp::detail {

/// What gpucmp adds after Google Benchmark's debug-build warning.
inline const char* debug_library_note_text() noexcept {
  return "gpucmp: that warning is about Google Benchmark's own timing loop (this libbenchmark was built without "
         "NDEBUG, as distributions build it). gpucmp's times are GPU times from CUDA events, reported as manual time: "
         "a debug build of the library does not change them (docs/cmake-integration.md#google-benchmark-built-as-debug).\n";
}

/// While it lives, `stream`'s text passes through unchanged, and debug_library_note_text()
/// follows the first line that holds Google Benchmark's debug-build warning.
class debug_library_note final : public std::streambuf {
 public:
  /// Starts watching `stream` (Google Benchmark writes its context to std::cerr).
  explicit debug_library_note(std::ostream& stream) : m_stream(stream), m_target(stream.rdbuf()) { m_stream.rdbuf(this); }
  /// Gives `stream` its own buffer back.
  ~debug_library_note() override { m_stream.rdbuf(m_target); }
  debug_library_note(const debug_library_note&) = delete;
  debug_library_note& operator=(const debug_library_note&) = delete;

  /// Whether the note was written.
  bool noted() const noexcept { return m_noted; }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    if (traits_type::eq_int_type(m_target->sputc(c), traits_type::eof())) return traits_type::eof();
    watch(c);
    return ch;
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    for (std::streamsize i = 0; i < count; ++i) {
      if (traits_type::eq_int_type(overflow(traits_type::to_int_type(text[i])), traits_type::eof())) return i;
    }
    return count;
  }
  int sync() override { return m_target->pubsync(); }

 private:
  void watch(char c) {
    if (c != '\n') {
      if (m_line.size() < 512) m_line += c;  // the warning is short; a long line is not it
      return;
    }
    if (!m_noted && m_line.find("Library was built as DEBUG") != std::string::npos) {
      m_noted = true;
      const std::string note = debug_library_note_text();
      m_target->sputn(note.data(), std::streamsize(note.size()));
    }
    m_line.clear();
  }

  std::ostream& m_stream;
  std::streambuf* m_target;
  std::string m_line;
  bool m_noted = false;
};

}  // namespace gpucmp::detail
