// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A small strict JSON reader (result files, safetensors headers), with errors that say
// where (line:column) and what is wrong. Internal: not part of gpucmp's API.
#pragma once

#include <cctype>
#include <limits>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpucmp::detail {

/// A parse error with its position.
class json_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A JSON value (null, bool, number, string, array, object); objects keep key order irrelevant.
class json {
 public:
  enum class kind { null, boolean, number, string, array, object };

  json() = default;
  static json make_bool(bool b) { json j; j.m_kind = kind::boolean; j.m_bool = b; return j; }
  static json make_number(double d) { json j; j.m_kind = kind::number; j.m_number = d; return j; }
  static json make_string(std::string s) { json j; j.m_kind = kind::string; j.m_string = std::move(s); return j; }
  static json make_array() { json j; j.m_kind = kind::array; return j; }
  static json make_object() { json j; j.m_kind = kind::object; return j; }

  kind type() const noexcept { return m_kind; }
  bool is_object() const noexcept { return m_kind == kind::object; }
  bool is_array() const noexcept { return m_kind == kind::array; }
  bool is_string() const noexcept { return m_kind == kind::string; }
  bool is_number() const noexcept { return m_kind == kind::number; }
  bool is_bool() const noexcept { return m_kind == kind::boolean; }

  double number() const { return m_number; }
  bool boolean() const { return m_bool; }
  const std::string& string() const { return m_string; }
  const std::vector<json>& items() const { return m_items; }
  std::vector<json>& items() { return m_items; }
  const std::map<std::string, json>& members() const { return m_members; }
  std::map<std::string, json>& members() { return m_members; }

  /// Member `key` of an object, or nullptr.
  const json* find(const std::string& key) const {
    if (m_kind != kind::object) return nullptr;
    auto it = m_members.find(key);
    return it == m_members.end() ? nullptr : &it->second;
  }

 private:
  kind m_kind = kind::null;
  bool m_bool = false;
  double m_number = 0;
  std::string m_string;
  std::vector<json> m_items;
  std::map<std::string, json> m_members;
};

/// Parses `text`; throws json_error "line L, column C: what" on malformed or truncated input.
inline json parse_json(const std::string& text) {
  struct parser {
    const std::string& s;
    std::size_t i = 0;

    [[noreturn]] void fail(const std::string& what) const {
      std::size_t line = 1, column = 1;
      for (std::size_t k = 0; k < i && k < s.size(); ++k) {
        if (s[k] == '\n') {
          ++line;
          column = 1;
        } else {
          ++column;
        }
      }
      throw json_error("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
    }
    void skip_space() {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    }
    char peek() {
      skip_space();
      if (i >= s.size()) fail("unexpected end of input (the file is truncated)");
      return s[i];
    }
    void expect(char c) {
      if (peek() != c) fail(std::string("expected '") + c + "', found '" + s[i] + "'");
      ++i;
    }
    void literal(const char* word) {
      for (const char* p = word; *p; ++p, ++i) {
        if (i >= s.size()) fail("unexpected end of input (the file is truncated)");
        if (s[i] != *p) fail(std::string("invalid literal, expected '") + word + "'");
      }
    }
    std::string string_value() {
      expect('"');
      std::string out;
      while (true) {
        if (i >= s.size()) fail("unterminated string (the file is truncated)");
        const char c = s[i++];
        if (c == '"') return out;
        if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
        if (c != '\\') {
          out += c;
          continue;
        }
        if (i >= s.size()) fail("unterminated escape");
        const char e = s[i++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            if (i + 4 > s.size()) fail("truncated \\u escape");
            const unsigned code = static_cast<unsigned>(std::strtoul(s.substr(i, 4).c_str(), nullptr, 16));
            i += 4;
            if (code < 0x80) {
              out += static_cast<char>(code);
            } else if (code < 0x800) {
              out += static_cast<char>(0xC0 | (code >> 6));
              out += static_cast<char>(0x80 | (code & 0x3F));
            } else {
              out += static_cast<char>(0xE0 | (code >> 12));
              out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
              out += static_cast<char>(0x80 | (code & 0x3F));
            }
            break;
          }
          default: fail(std::string("invalid escape '\\") + e + "'");
        }
      }
    }
    json value(int depth) {
      if (depth > 64) fail("nesting deeper than 64 levels");
      const char c = peek();
      if (c == '{') {
        ++i;
        json obj = json::make_object();
        if (peek() == '}') {
          ++i;
          return obj;
        }
        while (true) {
          if (peek() != '"') fail("expected a member name in quotes");
          std::string key = string_value();
          expect(':');
          obj.members()[key] = value(depth + 1);
          const char next = peek();
          ++i;
          if (next == '}') return obj;
          if (next != ',') fail("expected ',' or '}' after an object member");
        }
      }
      if (c == '[') {
        ++i;
        json arr = json::make_array();
        if (peek() == ']') {
          ++i;
          return arr;
        }
        while (true) {
          arr.items().push_back(value(depth + 1));
          const char next = peek();
          ++i;
          if (next == ']') return arr;
          if (next != ',') fail("expected ',' or ']' after an array element");
        }
      }
      if (c == '"') return json::make_string(string_value());
      if (c == 't') {
        literal("true");
        return json::make_bool(true);
      }
      if (c == 'f') {
        literal("false");
        return json::make_bool(false);
      }
      if (c == 'n') {
        literal("null");
        return json();
      }
      if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
        const char* begin = s.c_str() + i;
        char* end = nullptr;
        const double d = std::strtod(begin, &end);
        if (end == begin) fail("invalid number");
        i += static_cast<std::size_t>(end - begin);
        return json::make_number(d);
      }
      // Google Benchmark writes NaN and Infinity for undefined statistics; accept them as numbers.
      if (s.compare(i, 3, "NaN") == 0) {
        i += 3;
        return json::make_number(std::numeric_limits<double>::quiet_NaN());
      }
      if (s.compare(i, 8, "Infinity") == 0) {
        i += 8;
        return json::make_number(std::numeric_limits<double>::infinity());
      }
      fail(std::string("unexpected character '") + c + "'");
    }
  };
  parser p{text};
  json root = p.value(0);
  p.skip_space();
  if (p.i != text.size()) p.fail("unexpected text after the JSON value");
  return root;
}

}  // namespace gpucmp::detail
