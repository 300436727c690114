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
#include <vector>

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
  r.sample_seconds = {1.25e-4, 1.234567890123e-4, 1.3e-4};
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
  CHECK(back.sample_seconds == r.sample_seconds);  // in the order taken, exact
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
      {"sample_seconds", json::make_number(1e-4), "'sample_seconds' is not a non-empty list"},
      {"sample_seconds", json::make_array(), "'sample_seconds' is not a non-empty list"},
  };
  for (const auto& c : cases) {
    INFO(c.key << ": " << c.says);
    CHECK_THROWS_WITH(gpucmp::result_row_from_json(broken(c.key, c.value), "run.json"),
                      GPUCMP_CONTAINS("run.json") && GPUCMP_CONTAINS(c.says));
  }
}

TEST_CASE("a row keeps each sample's time, at most max_written_samples of them, evenly spaced", "[schema]") {
  std::vector<double> few = {3e-6, 1e-6, 2e-6};
  CHECK(gpucmp::written_samples(few) == few);  // all of them, in the order taken
  std::vector<double> many(4 * gpucmp::max_written_samples + 3);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = 1e-6 * double(i + 1);
  const std::vector<double> kept = gpucmp::written_samples(many);
  REQUIRE(kept.size() == gpucmp::max_written_samples);
  CHECK(kept.front() == many.front());
  CHECK(kept.back() == many.back());
  // Evenly spaced: the kept samples' middle is the run's middle, so a drift keeps its share.
  CHECK(std::abs(kept[kept.size() / 2] - many[many.size() / 2]) <= 4e-6);
  // A time that no measurement gives, or too many of them, is named.
  gpucmp::detail::json o = gpucmp::to_json(full_row());
  o.members()["sample_seconds"].items()[1] = gpucmp::detail::json::make_number(0);
  CHECK_THROWS_WITH(gpucmp::result_row_from_json(o, "run.json"),
                    GPUCMP_CONTAINS("'sample_seconds' holds a time that is not a finite number > 0"));
  gpucmp::result_row r = full_row();
  r.sample_seconds = many;  // a writer that did not thin them
  CHECK_THROWS_WITH(round_trip(r), GPUCMP_CONTAINS("'sample_seconds' holds more than 1000 samples"));
}

TEST_CASE("a file without the typed section or with another schema version is rejected, saying why", "[schema]") {
  const auto legacy = gpucmp::detail::parse_json(R"({"context": {}, "benchmarks": []})");
  CHECK_THROWS_WITH(gpucmp::result_rows_of(legacy, "old.json"),
                    GPUCMP_CONTAINS("old.json: has no typed gpucmp results") && GPUCMP_CONTAINS("legacy"));
  const auto future = gpucmp::detail::parse_json(R"({"gpucmp": {"schema_version": 7, "results": []}})");
  CHECK_THROWS_WITH(gpucmp::result_rows_of(future, "new.json"),
                    GPUCMP_CONTAINS("written with result schema 7; this reader knows schemas 2 and 1"));
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

TEST_CASE("a row says what it measured: axes, swept axis, provider, algorithm, check, search, libraries", "[schema]") {
  gpucmp::result_row r = full_row();
  gpucmp::row_description& d = r.described;
  d.axes = {gpucmp::axis::of("m", 4095), gpucmp::axis::of("dtype", "fp16"), gpucmp::axis::of("bytes", 1 << 20)};
  d.sweep_axis = "bytes";
  d.provider = "cuBLASLt";
  d.algorithm = "algo 66 (search: heuristic rank 3)";
  d.verification = gpucmp::row_verification{"GPU FP64 reference", 4096, 0, 0.25};
  d.search = gpucmp::row_search{0.8, {{"algo 66", 1e-4, ""}, {"algo 7", 0, "needs 2 GB of workspace"}}};
  d.libraries = {{"cublasLt", "130100"}};
  r.latency = gpucmp::row_latency{"poisson", 600, 7000, 6950, 1.1e-4, 1.5e-4, 4e-4, 9e-4, 1.2e-3, 1.3e-4};
  const gpucmp::result_row back = round_trip(r);
  REQUIRE(back.latency.has_value());
  CHECK(back.latency->pattern == "poisson");
  CHECK(back.latency->requests == 600);
  CHECK(back.latency->p99 == 4e-4);
  CHECK(back.latency->achieved_per_s == 6950);
  const gpucmp::row_description& b = back.described;
  REQUIRE(b.axes.size() == 3);
  CHECK(*b.find("m") == gpucmp::axis::of("m", 4095));
  CHECK(*b.find("dtype") == gpucmp::axis::of("dtype", "fp16"));
  CHECK(b.sweep_axis == "bytes");
  CHECK(b.provider == "cuBLASLt");
  CHECK(b.algorithm == d.algorithm);
  REQUIRE(b.verification.has_value());
  CHECK(b.verification->checked == 4096);
  CHECK(b.verification->worst_ratio == 0.25);
  REQUIRE(b.search.has_value());
  CHECK(b.search->wall_s == 0.8);
  REQUIRE(b.search->candidates.size() == 2);
  CHECK(b.search->candidates[1].failure == "needs 2 GB of workspace");
  CHECK(b.libraries == d.libraries);
  // A row that describes nothing writes none of these keys.
  const gpucmp::detail::json plain = gpucmp::to_json(full_row());
  for (const char* key : {"axes", "sweep_axis", "provider", "algorithm", "verification", "search", "libraries"}) {
    INFO(key);
    CHECK(plain.find(key) == nullptr);
  }
}

TEST_CASE("a description that breaks the schema is named; a schema-1 file's rows describe nothing", "[schema]") {
  using gpucmp::detail::json;
  gpucmp::result_row r = full_row();
  r.described.axes = {gpucmp::axis::of("dtype", "fp16"), gpucmp::axis::of("bytes", 64)};
  json o = gpucmp::to_json(r);
  o.members()["sweep_axis"] = json::make_string("dtype");
  CHECK_THROWS_WITH(gpucmp::result_row_from_json(o, "run.json"), GPUCMP_CONTAINS("'sweep_axis' 'dtype' is not a numeric axis of the row"));
  o.members()["sweep_axis"] = json::make_string("bytes");
  o.members()["axes"].members()["ok"] = json::make_bool(true);
  CHECK_THROWS_WITH(gpucmp::result_row_from_json(o, "run.json"), GPUCMP_CONTAINS("'axes' 'ok' is neither a finite number nor a text"));
  o.members()["axes"].members().erase("ok");
  o.members()["verification"] = json::make_object();
  CHECK_THROWS_WITH(gpucmp::result_row_from_json(o, "run.json"), GPUCMP_CONTAINS("'verification' holds no text"));
  o.members().erase("verification");
  CHECK(gpucmp::result_row_from_json(o, "run.json").described.sweep_axis == "bytes");
  // Schema 1: its writers wrote no description, so a reader keeps none.
  json file = json::make_object();
  file.members()["gpucmp"] = json::make_object();
  file.members()["gpucmp"].members()["schema_version"] = json::make_number(1);
  file.members()["gpucmp"].members()["results"] = json::make_array();
  file.members()["gpucmp"].members()["results"].items().push_back(o);
  const auto rows = gpucmp::result_rows_of(file, "old.json");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].described.empty());
}
