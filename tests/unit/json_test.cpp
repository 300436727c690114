// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The strict JSON reader: escapes, numbers by JSON's grammar, and the errors it gives.
#include "catch.hpp"

#include <gpucmp/io/json.hpp>

#include <cmath>
#include <string>

using gpucmp::detail::parse_json;

TEST_CASE("\\u escapes become UTF-8, surrogate pairs included", "[json][fuzz]") {
  CHECK(parse_json(R"("\u00e9")").string() == "\xC3\xA9");
  CHECK(parse_json(R"("\u20AC")").string() == "\xE2\x82\xAC");
  CHECK(parse_json(R"("\ud83d\ude00")").string() == "\xF0\x9F\x98\x80");  // U+1F600
  CHECK_THROWS_WITH(parse_json(R"("\u00zz")"), GPUCMP_CONTAINS("four hexadecimal digits"));
  CHECK_THROWS_WITH(parse_json(R"("\u-1ab")"), GPUCMP_CONTAINS("four hexadecimal digits"));
  CHECK_THROWS_WITH(parse_json(R"("\ud83d")"), GPUCMP_CONTAINS("without its low half"));
  CHECK_THROWS_WITH(parse_json(R"("\ude00")"), GPUCMP_CONTAINS("lone low surrogate"));
  CHECK_THROWS_WITH(parse_json(R"("\u12)"), GPUCMP_CONTAINS("truncated"));
}

TEST_CASE("numbers follow JSON's grammar; Google Benchmark's NaN and Infinity are read", "[json][fuzz]") {
  CHECK(parse_json("-12.5e-1").number() == -1.25);
  CHECK(parse_json("[0, 1E3]").items()[1].number() == 1000);
  CHECK(std::isnan(parse_json("NaN").number()));
  CHECK(parse_json("Infinity").number() == INFINITY);
  CHECK(parse_json("-Infinity").number() == -INFINITY);
  for (const char* bad : {"0x1p3", "-inf", "-nan", "1.", "1e", "-", "-.5", ".5", "+1"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_json(bad), gpucmp::detail::json_error);
  }
}

TEST_CASE("errors say where: line and column", "[json]") {
  CHECK_THROWS_WITH(parse_json("{\n  \"a\": tru\n}"), GPUCMP_CONTAINS("line 2, column"));
  CHECK_THROWS_WITH(parse_json("[1, 2"), GPUCMP_CONTAINS("truncated"));
  std::string deep(100, '[');
  CHECK_THROWS_WITH(parse_json(deep), GPUCMP_CONTAINS("nesting deeper than 64"));
}

TEST_CASE("a member name repeated in one object is refused by name; in two objects it is fine", "[json]") {
  CHECK_THROWS_WITH(parse_json(R"({"a": 1, "b": 2, "a": 3})"), GPUCMP_CONTAINS("duplicate member name 'a'"));
  const auto j = parse_json(R"({"a": {"x": 1}, "b": {"x": 2}})");
  CHECK(j.find("b")->find("x")->number() == 2);
}
