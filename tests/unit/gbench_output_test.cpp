// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The Google Benchmark adapter's parts that need no GPU: the kernel-breakdown companion
// file (--gpucmp_kernels_out), read back with gpucmp's JSON reader, and gpucmp's own flags.
#include "catch.hpp"

#include <gpucmp/io/json.hpp>
#include <gpucmp/gbench/adapter.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

TEST_CASE("kernel breakdowns are written as valid JSON with names escaped", "[gbench]") {
  gpucmp::kernel_stat gemm;
  gemm.name = "void gemm<\"quoted\", \\slash>(float*)";
  gemm.kind = gpucmp::activity_kind::kernel;
  gemm.count = 10;
  gemm.per_launch = 1;
  gemm.total_s = 1e-2;
  gemm.median_s = 1e-3;
  gemm.share = 0.75;
  gemm.exposed_s = 8e-3;
  gemm.exposed_share = 0.8;
  gpucmp::kernel_stat memset = gemm;
  memset.name = "[memset]";
  memset.kind = gpucmp::activity_kind::memset;
  memset.share = 0.25;
  auto& list = gpucmp::detail::kernel_breakdowns();
  list.clear();
  list.push_back({"model/resnet50/kernel", {gemm, memset}});

  const std::string path = "gbench_output_test_kernels.json";
  REQUIRE(gpucmp::detail::write_kernel_breakdowns(path));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  const gpucmp::detail::json root = gpucmp::detail::parse_json(text.str());
  REQUIRE(root.find("breakdowns") != nullptr);
  const auto& breakdowns = root.find("breakdowns")->items();
  REQUIRE(breakdowns.size() == 1);
  CHECK(breakdowns[0].find("benchmark")->string() == "model/resnet50/kernel");
  const auto& kernels = breakdowns[0].find("kernels")->items();
  REQUIRE(kernels.size() == 2);
  CHECK(kernels[0].find("name")->string() == gemm.name);
  CHECK(kernels[0].find("count")->number() == 10);
  CHECK(kernels[0].find("share")->number() == Approx(0.75));
  CHECK(kernels[0].find("exposed_s")->number() == Approx(8e-3));
  CHECK(kernels[0].find("exposed_share")->number() == Approx(0.8));
  CHECK(kernels[1].find("kind")->string() == "memset");
  list.clear();
}

TEST_CASE("an unwritable breakdown path is reported, not ignored", "[gbench]") {
  CHECK_FALSE(gpucmp::detail::write_kernel_breakdowns("/nonexistent-dir/kernels.json"));
}

namespace {

// Runs take_gpucmp_flags over a command line; returns the flags and what is left of argv.
std::pair<gpucmp::detail::gpucmp_flags, std::vector<std::string>> take(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  const auto flags = gpucmp::detail::take_gpucmp_flags(argc, argv.data());
  return {flags, std::vector<std::string>(argv.begin(), argv.begin() + argc)};
}

}  // namespace

TEST_CASE("gpucmp's flags are taken out of argv and Google Benchmark's are kept in order", "[gbench]") {
  const auto [flags, rest] = take({"sweep", "--benchmark_filter=gemm", "--gpucmp_batch=10", "--gpucmp_power",
                                   "--gpucmp_kernels_out=k.json", "--benchmark_out=x.json", "--gpucmp_search_log=s.jsonl"});
  CHECK(flags.error.empty());
  CHECK(flags.batch == 10);
  CHECK(flags.power);
  CHECK(flags.kernels_out == "k.json");
  CHECK(flags.search_log == "s.jsonl");
  CHECK(rest == std::vector<std::string>{"sweep", "--benchmark_filter=gemm", "--benchmark_out=x.json"});
  CHECK(take({"sweep"}).first.batch == 0);  // not given: each benchmark chooses its batch
}

TEST_CASE("a malformed --gpucmp_batch is an error naming the flag", "[gbench]") {
  for (const char* bad : {"--gpucmp_batch=", "--gpucmp_batch=0", "--gpucmp_batch=-3", "--gpucmp_batch=ten",
                          "--gpucmp_batch=2.5", "--gpucmp_batch=257", "--gpucmp_batch=99999999999"}) {
    INFO(bad);
    const auto [flags, rest] = take({"sweep", bad});
    CHECK(flags.error == std::string(bad) + ": expected a whole number of launches per sample, 1 to 256 (the launch queue is finite)");
    CHECK(flags.batch == 0);
    CHECK(rest.size() == 1);
  }
  CHECK(take({"sweep", "--gpucmp_batch=256"}).first.batch == 256);
}

TEST_CASE("the cool-down flag takes idle seconds, and a bad value is an error naming the flag", "[gbench]") {
  const auto [flags, rest] = take({"sweep", "--gpucmp_cooldown_s=2.5", "--benchmark_filter=gemm"});
  CHECK(flags.error.empty());
  CHECK(flags.cooldown_s == 2.5);
  CHECK(rest == std::vector<std::string>{"sweep", "--benchmark_filter=gemm"});
  CHECK(take({"sweep"}).first.cooldown_s == 0);
  for (const char* bad : {"--gpucmp_cooldown_s=", "--gpucmp_cooldown_s=-1", "--gpucmp_cooldown_s=2s",
                          "--gpucmp_cooldown_s=nan", "--gpucmp_cooldown_s=inf", "--gpucmp_cooldown_s=601"}) {
    INFO(bad);
    const auto taken = take({"sweep", bad});
    CHECK(taken.first.error == std::string(bad) + ": expected idle seconds before each warm-up, 0 to 600");
    CHECK(taken.first.cooldown_s == 0);
    CHECK(taken.second.size() == 1);
  }
}

TEST_CASE("the warm-up and window flags take seconds, and a bad value names its flag", "[gbench]") {
  const auto [flags, rest] = take({"sweep", "--gpucmp_warmup_s=1", "--gpucmp_window_s=0.75", "--benchmark_filter=gemm"});
  CHECK(flags.error.empty());
  CHECK(flags.warmup_s == 1);
  CHECK(flags.window_s == 0.75);
  CHECK(rest == std::vector<std::string>{"sweep", "--benchmark_filter=gemm"});
  CHECK(take({"sweep"}).first.warmup_s == 0);
  CHECK(take({"sweep"}).first.window_s == 0);
  CHECK(take({"sweep", "--gpucmp_warmup_s=x"}).first.error == "--gpucmp_warmup_s=x: expected seconds of warm-up, 0 to 600");
  const auto bad_window = take({"sweep", "--gpucmp_window_s=-2", "--gpucmp_cooldown_s=1"});
  CHECK(bad_window.first.error == "--gpucmp_window_s=-2: expected seconds of GPU time in each sampling window, 0 to 600");
  CHECK(bad_window.first.window_s == 0);
  CHECK(bad_window.first.cooldown_s == 1);  // the good flag next to it is still taken
}

TEST_CASE("the --gpucmp_timeout_s flag sets every measurement budget; a misspelt gpucmp flag is named", "[gbench]") {
  const auto [flags, rest] = take({"sweep", "--gpucmp_timeout_s=30", "--benchmark_filter=gemm"});
  CHECK(flags.error.empty());
  CHECK(flags.timeout_s == 30);
  CHECK(rest == std::vector<std::string>{"sweep", "--benchmark_filter=gemm"});
  CHECK(take({"sweep", "--gpucmp_timeout_s=-1"}).first.error ==
        "--gpucmp_timeout_s=-1: expected seconds a measurement may run before it ends as a timeout, 0 to 86400");
  CHECK(take({"sweep", "--gpucmp_timeout_s=0x10"}).first.error.rfind("--gpucmp_timeout_s=0x10: expected", 0) == 0);
  CHECK(take({"sweep", "--gpucmp_powr"}).first.error == "--gpucmp_powr: unknown gpucmp flag");
  CHECK(take({"sweep", "--gpucmp_kernels_out="}).first.error == "--gpucmp_kernels_out=: expected a file name");
  CHECK(take({"sweep", "--gpucmp_search_log="}).first.error == "--gpucmp_search_log=: expected a file name");
}

TEST_CASE("output files that cannot be written are found before anything is measured", "[gbench]") {
  std::vector<std::string> args{"suite", "--benchmark_out=/nonexistent-dir/out.json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  gpucmp::detail::gpucmp_flags flags;
  flags.kernels_out = "/nonexistent-dir/kernels.json";
  flags.search_log = "/nonexistent-dir/searches.jsonl";
  const auto problems = gpucmp::detail::unwritable_outputs(static_cast<int>(argv.size()), argv.data(), flags);
  REQUIRE(problems.size() == 3);
  CHECK_THAT(problems[0], GPUCMP_CONTAINS("--benchmark_out=/nonexistent-dir/out.json: cannot be written"));
  CHECK_THAT(problems[1], GPUCMP_CONTAINS("--gpucmp_kernels_out=/nonexistent-dir/kernels.json: cannot be written"));
  CHECK_THAT(problems[2], GPUCMP_CONTAINS("--gpucmp_search_log=/nonexistent-dir/searches.jsonl: cannot be written"));
  // A writable path passes, and a file that did not exist is not left behind.
  const std::string fresh = "gpucmp_writable_probe.json";
  std::remove(fresh.c_str());
  CHECK(gpucmp::detail::unwritable_reason(fresh).empty());
  std::FILE* left = std::fopen(fresh.c_str(), "r");
  CHECK(left == nullptr);
  if (left != nullptr) std::fclose(left);
}

TEST_CASE("measurement options: the group's defaults, then the command-line flags, then the body", "[gbench]") {
  gpucmp::measure_options group;
  group.power = false;
  group.batch = 8;
  group.cooldown_s = 0.5;
  group.window_s = 0.2;
  group.hold = false;  // NoHold: no flag touches it
  gpucmp::detail::gpucmp_flags none;
  const gpucmp::measure_options plain = gpucmp::detail::resolve_options(group, none, "gemm/x/hot");
  CHECK(plain.batch == 8);
  CHECK(plain.cooldown_s == 0.5);
  CHECK(plain.window_s == 0.2);
  CHECK_FALSE(plain.power);
  CHECK_FALSE(plain.hold);
  CHECK(plain.name == "gemm/x/hot");

  gpucmp::detail::gpucmp_flags flags;
  flags.power = true;
  flags.batch = 32;
  flags.cooldown_s = 2;
  flags.warmup_s = 0.3;
  flags.timeout_s = 9;
  const gpucmp::measure_options flagged = gpucmp::detail::resolve_options(group, flags, "gemm/x/hot");
  CHECK(flagged.power);
  CHECK(flagged.batch == 32);  // a flag given wins over the group
  CHECK(flagged.cooldown_s == 2);
  CHECK(flagged.warmup_time_s == 0.3);
  CHECK(flagged.timeout_s == 9);
  CHECK(flagged.window_s == 0.2);  // a flag not given leaves the group's setting
  CHECK_FALSE(flagged.hold);

  group.name = "my range";
  CHECK(gpucmp::detail::resolve_options(group, flags, "gemm/x/hot").name == "my range");
}

namespace {

// A run as Google Benchmark reports it (the fields every release from 1.7 has).
benchmark::BenchmarkReporter::Run iteration_run(const std::string& function, const std::string& args, std::int64_t repetition,
                                                 std::int64_t repetitions) {
  benchmark::BenchmarkReporter::Run run;
  run.run_name.function_name = function;
  run.run_name.args = args;
  run.run_name.iterations = "iterations:1";
  run.run_name.time_type = "manual_time";
  run.run_type = benchmark::BenchmarkReporter::Run::RT_Iteration;
  run.repetition_index = repetition;
  run.repetitions = repetitions;
  run.iterations = 1;
  run.real_accumulated_time = 1e-4;
  run.cpu_accumulated_time = 1e-5;
  run.time_unit = benchmark::kMicrosecond;
  return run;
}

// Marks `run` as skipped with an error (Google Benchmark 1.8 renamed the fields).
template <class Run>
auto set_error(Run& run, const std::string& message, int) -> decltype(run.skip_message, void()) {
  using skipped_kind = decltype(run.skipped);  // Google Benchmark's internal Skipped enum
  run.skipped = skipped_kind::SkippedWithError;
  run.skip_message = message;
}
template <class Run>
void set_error(Run& run, const std::string& message, long) {
  run.error_occurred = true;
  run.error_message = message;
}

gpucmp::result_row measured(double seconds) {
  gpucmp::result_row row;
  row.timing_mode = gpucmp::mode::graph;
  row.declared.flops = 1e9;
  row.declared.arithmetic = gpucmp::precision::bf16;
  row.has_flops = true;
  row.seconds = row.seconds_min = row.seconds_max = seconds;
  row.noise = 0.01;
  row.samples = 10;
  row.batch = 4;
  return row;
}

// What the typed reporter writes for `runs` (each call one benchmark instance).
gpucmp::detail::json write_typed(const std::vector<std::vector<benchmark::BenchmarkReporter::Run>>& calls) {
  std::stringstream out;
  gpucmp::typed_json_reporter reporter;
  reporter.SetOutputStream(&out);
  reporter.SetErrorStream(&out);
  benchmark::BenchmarkReporter::Context context;
  REQUIRE(reporter.ReportContext(context));
  for (const auto& runs : calls) reporter.ReportRuns(runs);
  reporter.Finalize();
  return gpucmp::detail::parse_json(out.str());  // the whole file is valid JSON
}

}  // namespace

TEST_CASE("the typed reporter writes Google Benchmark's JSON plus a gpucmp section, pairing rows with runs", "[gbench]") {
  gpucmp::detail::pending_rows().clear();
  gpucmp::detail::reported_rows().clear();
  // Two instances of one family, the second with two repetitions, measured interleaved (as
  // --benchmark_enable_random_interleaving runs them): each row pairs with the run that holds
  // its time. And a typed failure of another registration, paired by its message.
  gpucmp::detail::pending_rows().push_back({"gemm/x/graph", measured(2e-3)});
  gpucmp::detail::pending_rows().push_back({"gemm/x/graph", measured(1e-3)});
  gpucmp::detail::pending_rows().push_back({"gemm/x/graph", measured(3e-3)});
  gpucmp::result_row oom;
  oom.status = gpucmp::result_status::out_of_memory;
  oom.message = "oom: needs 90 GB, 80 GB free";
  oom.timing_mode = gpucmp::mode::cold;
  gpucmp::detail::pending_rows().push_back({"conv/y/cold", oom});
  auto timed = [](benchmark::BenchmarkReporter::Run run, double seconds) {
    run.real_accumulated_time = seconds;
    return run;
  };
  auto failed = iteration_run("conv/y/cold", "7", 0, 1);
  set_error(failed, oom.message, 0);
  const gpucmp::detail::json file =
      write_typed({{timed(iteration_run("gemm/x/graph", "64", 0, 1), 1e-3)},
                   {timed(iteration_run("gemm/x/graph", "128", 0, 2), 2e-3), timed(iteration_run("gemm/x/graph", "128", 1, 2), 3e-3)},
                   {failed}});
  REQUIRE(file.find("benchmarks") != nullptr);
  CHECK(file.find("benchmarks")->items().size() == 4);
  const auto rows = gpucmp::result_rows_of(file, "typed.json");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].name == "gemm/x/graph/64/iterations:1/manual_time");
  CHECK(rows[0].benchmark == "gemm/x/graph/64");
  CHECK(rows[0].seconds == 1e-3);
  CHECK(rows[1].benchmark == "gemm/x/graph/128");
  CHECK(rows[1].repetition_index == 0);
  CHECK(rows[1].seconds == 2e-3);
  CHECK(rows[2].benchmark == "gemm/x/graph/128");
  CHECK(rows[2].repetition_index == 1);
  CHECK(rows[2].seconds == 3e-3);
  CHECK(rows[2].declared.arithmetic == gpucmp::precision::bf16);
  CHECK(rows[3].status == gpucmp::result_status::out_of_memory);
  CHECK(rows[3].message == oom.message);
  CHECK(rows[3].timing_mode == gpucmp::mode::cold);
  CHECK(gpucmp::detail::pending_rows().empty());
  gpucmp::detail::reported_rows().clear();
}

TEST_CASE("with aggregates only in the file, each row is still paired with its benchmark", "[gbench]") {
  gpucmp::detail::pending_rows().clear();
  gpucmp::detail::reported_rows().clear();
  gpucmp::detail::pending_rows().push_back({"op/hot", measured(1e-3)});
  gpucmp::detail::pending_rows().push_back({"op/hot", measured(2e-3)});
  auto median = iteration_run("op/hot", "", 0, 2);
  median.run_type = benchmark::BenchmarkReporter::Run::RT_Aggregate;
  median.aggregate_name = "median";
  const auto rows = gpucmp::result_rows_of(write_typed({{median}}), "aggregates.json");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].benchmark == "op/hot");
  CHECK(rows[1].repetition_index == 1);
  gpucmp::detail::reported_rows().clear();
}

namespace {
void skipping_benchmark(gpucmp::state& st) { st.skip("skipped: this test measures nothing"); }
}  // namespace

TEST_CASE("a registered benchmark's typed row gives its status and mode through RunSpecifiedBenchmarks", "[gbench]") {
  gpucmp::detail::pending_rows().clear();
  gpucmp::detail::reported_rows().clear();
  gpucmp::register_benchmark("typed_rows_skip", skipping_benchmark, {gpucmp::mode::cold, gpucmp::mode::kernel})->Arg(3);
  std::stringstream out;
  gpucmp::typed_json_reporter reporter;  // as the display reporter: no --benchmark_out needed
  reporter.SetOutputStream(&out);
  reporter.SetErrorStream(&out);
  benchmark::RunSpecifiedBenchmarks(&reporter, "^typed_rows_skip/");
  const auto rows = gpucmp::result_rows_of(gpucmp::detail::parse_json(out.str()), "run");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].benchmark == "typed_rows_skip/cold/3");
  CHECK(rows[0].timing_mode == gpucmp::mode::cold);
  CHECK(rows[1].timing_mode == gpucmp::mode::kernel);
  for (const auto& r : rows) {
    CHECK(r.status == gpucmp::result_status::skipped);  // no device here, or the body's own skip
    CHECK_FALSE(r.message.empty());
  }
  gpucmp::detail::reported_rows().clear();
}

TEST_CASE("a JSON --benchmark_out is what selects the typed reporter", "[gbench]") {
  auto writes = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return gpucmp::detail::writes_json_results(static_cast<int>(argv.size()), argv.data());
  };
  CHECK(writes({"prog", "--benchmark_out=r.json"}));
  CHECK(writes({"prog", "--benchmark_out=r.json", "--benchmark_out_format=json"}));
  CHECK_FALSE(writes({"prog", "--benchmark_out=r.csv", "--benchmark_out_format=csv"}));
  CHECK_FALSE(writes({"prog", "--benchmark_format=json"}));  // stdout only: Google Benchmark's own
}

TEST_CASE("the search log gets one JSON line per search: chosen, wall time, every candidate", "[gbench]") {
  const std::string path = "gpucmp_search_log_probe.jsonl";
  std::remove(path.c_str());
  std::vector<gpucmp::candidate_time> log(2);
  log[0].description = "algo \"1\"";
  log[0].seconds = 12.5e-6;
  log[0].timings = 3;
  log[1].description = "algo 2";
  log[1].failure = "needs 2 GB of workspace";
  REQUIRE(gpucmp::detail::append_search_log(path, "gemm/x/graph", "gemm/cublaslt/fp16/8x8x8", "algo \"1\"", 0.75, log));
  REQUIRE(gpucmp::detail::append_search_log(path, "gemm/y/graph", "gemm/cublaslt/fp16/16x16x16", "algo 2", 1.5, {}));
  std::FILE* file = std::fopen(path.c_str(), "rb");
  REQUIRE(file != nullptr);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += char(c);
  std::fclose(file);
  std::remove(path.c_str());
  const std::size_t end = text.find('\n');
  REQUIRE(end != std::string::npos);
  const gpucmp::detail::json first = gpucmp::detail::parse_json(text.substr(0, end));
  CHECK(first.find("benchmark")->string() == "gemm/x/graph");
  CHECK(first.find("chosen")->string() == "algo \"1\"");
  CHECK(first.find("search_wall_s")->number() == 0.75);
  REQUIRE(first.find("candidates")->items().size() == 2);
  CHECK(first.find("candidates")->items()[0].find("us")->number() == Approx(12.5));
  CHECK(first.find("candidates")->items()[1].find("failure")->string() == "needs 2 GB of workspace");
  CHECK(gpucmp::detail::parse_json(text.substr(end + 1)).find("candidates")->items().empty());
  CHECK_FALSE(gpucmp::detail::append_search_log("/nonexistent-dir/s.jsonl", "b", "o", "c", 1, {}));
}

TEST_CASE("the stopping rule's and the device's flags are taken, checked and applied; --help lists every flag", "[gbench]") {
  const auto [flags, rest] = take({"sweep", "--gpucmp_target_noise=0.01", "--gpucmp_min_samples=25", "--gpucmp_max_time_s=60",
                                   "--gpucmp_device=1", "--benchmark_filter=x"});
  CHECK(flags.error.empty());
  CHECK(flags.target_noise == 0.01);
  CHECK(flags.min_samples == 25);
  CHECK(flags.max_time_s == 60);
  CHECK(flags.device == 1);
  CHECK(rest == std::vector<std::string>{"sweep", "--benchmark_filter=x"});
  CHECK(take({"sweep"}).first.device == -1);  // not given: the current device
  const gpucmp::measure_options o = gpucmp::detail::resolve_options({}, flags, "b");
  CHECK(o.target_noise == 0.01);
  CHECK(o.min_samples == 25);
  CHECK(o.max_samples >= 25);
  CHECK(o.max_wall_time_s == 60);
  CHECK_NOTHROW(o.validate());
  CHECK(take({"sweep", "--gpucmp_min_samples=0"}).first.error == "--gpucmp_min_samples=0: expected a whole number of samples, 1 to 1000000");
  CHECK(take({"sweep", "--gpucmp_device=-1"}).first.error == "--gpucmp_device=-1: expected a CUDA device number, 0 to 1023");
  CHECK(take({"sweep", "--gpucmp_target_noise=2"}).first.error.rfind("--gpucmp_target_noise=2: expected a relative noise target", 0) == 0);
  // Every flag --help lists is one the parser takes (with a value where it wants one).
  for (const auto& h : gpucmp::detail::gpucmp_flags_help()) {
    std::string flag = h.flag;
    const auto equals = flag.find('=');
    if (equals != std::string::npos) {
      const std::string kind = flag.substr(equals + 1);
      flag = flag.substr(0, equals + 1) + (kind == "FILE" ? "out.json" : kind == "X" ? "0.5" : kind == "WHEN" ? "auto" : "1");
    }
    INFO(flag);
    CHECK(take({"sweep", flag.c_str()}).first.error.empty());
    CHECK_THAT(gpucmp::detail::gpucmp_flags_help_text(), GPUCMP_CONTAINS(h.flag));
  }
}

TEST_CASE("progress lines go to the sink the program installs, and a throwing sink loses only its line", "[gbench]") {
  CHECK(take({"sweep"}).first.progress == "auto");
  CHECK(take({"sweep", "--gpucmp_progress=off"}).first.progress == "off");
  CHECK(take({"sweep", "--gpucmp_progress=loud"}).first.error == "--gpucmp_progress=loud: expected on, off or auto");
  struct restore_sink {
    gpucmp::progress_sink saved = gpucmp::progress_output();
    ~restore_sink() { gpucmp::progress_output() = saved; }
  } restore;
  std::vector<std::string> lines;
  gpucmp::progress_output() = [&](const std::string& line) { lines.push_back(line); };
  gpucmp::report_progress("searching gemm/x: 12 candidates");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "searching gemm/x: 12 candidates");
  gpucmp::progress_output() = [](const std::string&) { throw std::runtime_error("closed"); };
  CHECK_NOTHROW(gpucmp::report_progress("lost"));
  gpucmp::progress_output() = nullptr;
  CHECK_NOTHROW(gpucmp::report_progress("nowhere"));
}
