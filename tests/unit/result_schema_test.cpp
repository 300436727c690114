// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The typed result schema (measure/result_schema.hpp): a row survives the trip through JSON
// text, a row that breaks the schema is an error naming the key, and a file without the
// typed section or with another schema version is rejected with a message that says so.
#include "catch.hpp"

#include <gpucmp/io/json.hpp>
#include <gpucmp/measure/result_schema.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace {

gpucmp::result_row full_row() {
  gpucmp::result_row r;
  r.name = "gemm/cublas/fp16/4096x4096x4096/graph/iterations:1/manual_time";
  r.benchmark = "gemm/cublas/fp16/4096x4096x4096/graph";
  r.repetition_index = 2;
  r.timing_mode = gpucmp::mode::graph;
  r.declared.arithmetic = gpucmp::precision::fp16;
  r.declared.flops = 2.0 * 4096 * 4096 * 4096;
  r.declared.bytes_read = 2.0 * 2 * 4096 * 4096;
  r.declared.bytes_written = 2.0 * 4096 * 4096;
  r.has_flops = r.has_bytes = true;
  r.seconds = 1.234567890123e-4;
  r.seconds_min = 1.2e-4;
  r.seconds_max = 1.3e-4;
  r.noise = 0.0042;
  r.samples = 40;
  r.batch = 16;
  gpucmp::row_power p;
  p.average_w = 612.5;
  p.peak_w = 690;
  p.energy_j = 612.5;
  p.limit_w = 700;
  p.throttled_fraction = 0.25;
  r.power = p;
  r.kernels = {"sm90_xmma_gemm_f16f16_f16f32", "[memset]"};
  return r;
}

gpucmp::result_row round_trip(const gpucmp::result_row& r) {
  const std::string text = gpucmp::detail::to_json_text(gpucmp::to_json(r), 2);
  return gpucmp::result_row_from_json(gpucmp::detail::parse_json(text), "test.json");
}

}  // namespace

TEST_CASE("a typed result row survives the trip through JSON text", "[schema]") {
  const gpucmp::result_row r = full_row();
  const gpucmp::result_row back = round_trip(r);
  CHECK(back.name == r.name);
  CHECK(back.benchmark == r.benchmark);
  CHECK(back.repetition_index == 2);
  CHECK(back.status == gpucmp::result_status::ok);
  CHECK(back.timing_mode == gpucmp::mode::graph);
  CHECK(back.declared.arithmetic == gpucmp::precision::fp16);
  CHECK(back.declared.flops == r.declared.flops);
  CHECK(back.declared.bytes_read == r.declared.bytes_read);
  CHECK(back.declared.bytes_written == r.declared.bytes_written);
  CHECK_FALSE(back.has_items);
  CHECK(back.seconds == r.seconds);  // 17 significant digits: exact
  CHECK(back.noise == r.noise);
  CHECK(back.samples == 40);
  CHECK(back.batch == 16);
  REQUIRE(back.power.has_value());
  CHECK(back.power->average_w == 612.5);
  CHECK(back.power->throttled_fraction == 0.25);
  CHECK(back.kernels == r.kernels);
  CHECK(back.declared.structure == gpucmp::sparsity::dense);
  // A 2:4 row says so, and says it again when read back; a dense row has no sparsity key.
  CHECK(gpucmp::to_json(r).find("sparsity") == nullptr);
  gpucmp::result_row sparse = r;
  sparse.declared.structure = gpucmp::sparsity::structured_2_4;
  CHECK(gpucmp::to_json(sparse).find("sparsity")->string() == "2:4");
  CHECK(round_trip(sparse).declared.structure == gpucmp::sparsity::structured_2_4);
}

TEST_CASE("every status and mode is written and read by name", "[schema]") {
  for (auto s : {gpucmp::result_status::failed, gpucmp::result_status::unsupported, gpucmp::result_status::out_of_memory,
                 gpucmp::result_status::skipped, gpucmp::result_status::timeout}) {
    gpucmp::result_row r;
    r.name = r.benchmark = "x/hot";
    r.status = s;
    r.message = std::string(gpucmp::to_string(s)) + ": why";
    r.timing_mode = gpucmp::mode::kernel;
    const gpucmp::result_row back = round_trip(r);
    CHECK(back.status == s);
    CHECK(back.message == r.message);
    CHECK(back.timing_mode == gpucmp::mode::kernel);
    CHECK(std::isnan(back.seconds));  // an unmeasured row has no time
    const gpucmp::detail::json o = gpucmp::to_json(r);
    CHECK(o.find("seconds") == nullptr);
  }
}

TEST_CASE("the key table names every key a row can hold, each once", "[schema]") {
  std::set<std::string> table;
  for (const auto& k : gpucmp::result_keys()) CHECK(table.insert(k.key).second);
  const gpucmp::detail::json row = gpucmp::to_json(full_row());
  for (const auto& [key, value] : row.members()) {
    INFO(key);
    CHECK(table.count(key) == 1);
  }
  gpucmp::result_row items = full_row();
  items.has_items = true;
  items.declared.items = 8;
  const gpucmp::detail::json with_items = gpucmp::to_json(items);
  CHECK(with_items.find("items") != nullptr);
}

TEST_CASE("a row that breaks the schema is an error naming the key", "[schema]") {
  auto broken = [](const std::string& key, gpucmp::detail::json value) {
    gpucmp::detail::json o = gpucmp::to_json(full_row());
    if (value.type() == gpucmp::detail::json::kind::null) {
      o.members().erase(key);
    } else {
      o.members()[key] = value;
    }
    return o;
  };
  using gpucmp::detail::json;
  struct bad_case {
    const char* key;
    json value;
    const char* says;
  };
  const bad_case cases[] = {
      {"status", json::make_string("great"), "'status' is 'great'"},
      {"mode", json::make_string("warm"), "unknown mode 'warm'"},
      {"precision", json::make_string("fp12"), "'precision' is 'fp12', not a precision"},
      {"sparsity", json::make_string("1:2"), "'sparsity' is '1:2' (expected 2:4 or dense)"},
      {"seconds", json::make_number(-1), "'seconds' is -1"},
      {"seconds", json::make_number(0), "'seconds' is 0 in a measured row"},
      {"seconds", json(), "'seconds' is missing"},
      {"flops", json::make_string("many"), "'flops' is not a number"},
      {"kernels", json::make_number(3), "'kernels' is not a list"},
      {"name", json(), "'name' is missing"},
      {"status", json(), "'status' is missing"},
      {"noise", json::make_number(-0.5), "'noise' is -0.5"},
  };
  for (const auto& c : cases) {
    INFO(c.key << ": " << c.says);
    CHECK_THROWS_WITH(gpucmp::result_row_from_json(broken(c.key, c.value), "run.json"),
                      GPUCMP_CONTAINS("run.json") && GPUCMP_CONTAINS(c.says));
  }
}

TEST_CASE("a file without the typed section or with another schema version is rejected, saying why", "[schema]") {
  const auto legacy = gpucmp::detail::parse_json(R"({"context": {}, "benchmarks": []})");
  CHECK_THROWS_WITH(gpucmp::result_rows_of(legacy, "old.json"),
                    GPUCMP_CONTAINS("old.json: has no typed gpucmp results") && GPUCMP_CONTAINS("legacy"));
  const auto future = gpucmp::detail::parse_json(R"({"gpucmp": {"schema_version": 7, "results": []}})");
  CHECK_THROWS_WITH(gpucmp::result_rows_of(future, "new.json"),
                    GPUCMP_CONTAINS("written with result schema 7; this reader knows schema 1"));
  gpucmp::detail::json file = gpucmp::detail::json::make_object();
  file.members()["gpucmp"] = gpucmp::results_section({full_row(), full_row()});
  const auto rows = gpucmp::result_rows_of(gpucmp::detail::parse_json(gpucmp::detail::to_json_text(file)), "ok.json");
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].benchmark == full_row().benchmark);
}

TEST_CASE("the JSON writer escapes strings and writes what JSON lacks as null", "[schema]") {
  using gpucmp::detail::json;
  json o = json::make_object();
  o.members()["text"] = json::make_string("a \"quote\", a \\, a\nnewline and \x01");
  o.members()["nan"] = json::make_number(std::numeric_limits<double>::quiet_NaN());
  o.members()["list"] = json::make_array();
  o.members()["list"].items().push_back(json::make_bool(true));
  const std::string text = gpucmp::detail::to_json_text(o, 2);
  const json back = gpucmp::detail::parse_json(text);
  CHECK(back.find("text")->string() == o.find("text")->string());
  CHECK(back.find("nan")->type() == json::kind::null);
  CHECK(back.find("list")->items().at(0).boolean());
}
