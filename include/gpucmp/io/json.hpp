// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A small strict JSON reader (result files, safetensors headers), with errors that say
// where (line:column) and what is wrong, and the writer beside it (typed result rows).
// Internal: not part of gpucmp's API.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdio>
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
    // Four hexadecimal digits of a \u escape.
    unsigned hex4() {
      if (i + 4 > s.size()) fail("truncated \\u escape");
      unsigned code = 0;
      for (int k = 0; k < 4; ++k, ++i) {
        const char h = s[i];
        const int digit = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (digit < 0) fail("\\u escape needs four hexadecimal digits");
        code = code * 16 + static_cast<unsigned>(digit);
      }
      return code;
    }
    static void append_utf8(std::string& out, unsigned code) {
      if (code < 0x80) {
        out += static_cast<char>(code);
      } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
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
            unsigned code = hex4();
            if (code >= 0xDC00 && code <= 0xDFFF) fail("\\u escape of a lone low surrogate");
            if (code >= 0xD800 && code <= 0xDBFF) {  // a high surrogate: its low half must follow
              if (i + 2 > s.size() || s[i] != '\\' || s[i + 1] != 'u') fail("\\u escape of a high surrogate without its low half");
              i += 2;
              const unsigned low = hex4();
              if (low < 0xDC00 || low > 0xDFFF) fail("\\u escape of a high surrogate without its low half");
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(out, code);
            break;
          }
          default: fail(std::string("invalid escape '\\") + e + "'");
        }
      }
    }
    // A number by JSON's grammar (strtod alone would also take hexadecimal, "inf" and "nan").
    double number_value() {
      const std::size_t begin = i;
      auto digits = [&] {
        const std::size_t first = i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        return i > first;
      };
      if (s[i] == '-') ++i;
      if (s.compare(i, 8, "Infinity") == 0) {  // Google Benchmark writes -Infinity too
        i += 8;
        return -std::numeric_limits<double>::infinity();
      }
      if (!digits()) fail("invalid number");
      if (i < s.size() && s[i] == '.') {
        ++i;
        if (!digits()) fail("invalid number: no digit after the decimal point");
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        if (!digits()) fail("invalid number: no digit in the exponent");
      }
      return std::strtod(s.substr(begin, i - begin).c_str(), nullptr);
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
          // RFC 8259 leaves a repeated name's meaning open; gpucmp's formats give none.
          if (obj.members().count(key) != 0) fail("duplicate member name '" + key + "'");
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
      if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return json::make_number(number_value());
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

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped (the
/// bytes are written as they are; the reader of a typed result checks their UTF-8).
inline std::string json_quoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

/// `value` as JSON text, `indent` spaces per level from `depth` (0: on one line). Numbers
/// round-trip (17 significant digits); NaN and infinities, which JSON lacks, become null.
inline std::string to_json_text(const json& value, int indent = 0, int depth = 0) {
  const std::string pad = indent > 0 ? "\n" + std::string(std::size_t(indent * (depth + 1)), ' ') : "";
  const std::string close = indent > 0 ? "\n" + std::string(std::size_t(indent * depth), ' ') : "";
  switch (value.type()) {
    case json::kind::null: return "null";
    case json::kind::boolean: return value.boolean() ? "true" : "false";
    case json::kind::number: {
      if (!std::isfinite(value.number())) return "null";
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", value.number());
      return buf;
    }
    case json::kind::string: return json_quoted(value.string());
    case json::kind::array: {
      if (value.items().empty()) return "[]";
      std::string out = "[";
      for (std::size_t i = 0; i < value.items().size(); ++i) {
        out += (i ? "," : "") + pad + to_json_text(value.items()[i], indent, depth + 1);
      }
      return out + close + "]";
    }
    case json::kind::object: {
      if (value.members().empty()) return "{}";
      std::string out = "{";
      bool first = true;
      for (const auto& [key, member] : value.members()) {
        out += (first ? "" : ",") + pad + json_quoted(key) + (indent > 0 ? ": " : ":") +
               to_json_text(member, indent, depth + 1);
        first = false;
      }
      return out + close + "}";
    }
  }
  return "null";
}

}  // namespace gpucmp::detail
