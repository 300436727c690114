// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp-report: side-by-side GPU comparisons from gpucmp result files, spec tables, and whether
// a language model fits each GPU's memory.
#include "before_after.hpp"
#include "fit_table.hpp"
#include "model.hpp"
#include "render.hpp"
#include "specs_table.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

const char* usage =
    "usage:\n"
    "  gpucmp-report compare [options] RESULT.json...\n"
    "      --baseline GPU          GPU (key or name) the speedups refer to (default: the first file's)\n"
    "      --project KEY[,KEY...]  GPUs to project onto from the baseline (keys: docs/gpu-database.md)\n"
    "      --price KEY=USD_PER_H   price of a GPU per hour (repeatable); --prices FILE with KEY=USD lines\n"
    "      --markdown FILE  --csv FILE  --html FILE   outputs (default: markdown on standard output; - = standard output)\n"
    "  gpucmp-report compare --label NAME=RESULT.json --label NAME=RESULT.json [--min-change F] [--markdown FILE] [--csv FILE]\n"
    "      before/after: the second run against the first, row by row: ratio, interval and a verdict of SAME,\n"
    "      FASTER, SLOWER or UNCERTAIN from the two runs' samples (docs/comparisons.md#before-and-after)\n"
    "      --min-change F          smallest relative change called FASTER or SLOWER (default 0.02 = 2 %)\n"
    "      --min-change-s S        smallest absolute change per launch called so (default 2.5e-7 = 0.25 us)\n"
    "  gpucmp-report specs [--errata] [--markdown FILE] GPU...\n"
    "  gpucmp-report fit [options] [GPU...]   whether a Llama-style decoder serves a batch at a context on each GPU\n"
    "      (default GPUs: a100_80gb_sxm a100_40gb_sxm l40s l20 h100_sxm h200_sxm)\n"
    "      --model NAME            llama-3.1-8b (default), llama-3-8b, llama-3.2-1b, llama-3-70b\n"
    "      --weights R             bf16 (default), fp16, fp8_e4m3 (the blocks' linear layers)\n"
    "      --kv T                  the KV cache's type: bf16 (default), fp16, fp8_e4m3, fp8_e5m2\n"
    "      --context N[,N...]      tokens a sequence holds (default 2048,8192,32768,131072)\n"
    "      --page-tokens N         a paged cache's page (default 0: contiguous)\n"
    "      --step-tokens N         tokens a step processes at most (default 8192)\n"
    "      --reserve-gib X         memory kept for the CUDA context and libraries (default 2)\n"
    "  gpucmp-report upgrade OLD.json NEW.json   adds the typed section to a file written before it\n"
    "exit status: 0 done, 1 bad input (nothing written), 2 bad usage,\n"
    "             3 before/after: a row SLOWER, or measured in the first run and not in the second (outputs written)\n";

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::stringstream in(text);
  while (std::getline(in, part, sep))
    if (!part.empty()) out.push_back(part);
  return out;
}

void add_price(std::map<std::string, double>& prices, const std::string& assignment, const std::string& where) {
  const auto eq = assignment.find('=');
  double usd = NAN;
  if (eq != std::string::npos) {
    const std::string text = assignment.substr(eq + 1);
    try {
      std::size_t used = 0;
      usd = std::stod(text, &used);
      if (used != text.size()) usd = NAN;  // "1.2x" is not a price
    } catch (...) {
    }
  }
  if (eq == std::string::npos || !(usd > 0) || !std::isfinite(usd)) {
    throw gpucmp_report::input_error(where + ": price '" + assignment +
                                     "' is not KEY=USD_PER_HOUR with a positive, finite price");
  }
  prices[assignment.substr(0, eq)] = usd;
}

// Whether `path` is written through a temporary file renamed over it: a regular file or
// nothing yet. A symlink (its target is what the user means), a device or a pipe is written in
// place: a rename would replace it with a regular file.
bool written_by_rename(const std::string& path) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0) return true;  // not there yet
  return S_ISREG(info.st_mode);
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return bool(out);
}

// Writes the regular files' outputs to temporary files first and renames them only when every
// output was written, so a failure leaves no half-written report behind; outputs written in
// place (written_by_rename) come after the temporary files, before the renames.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::pair<std::string, std::string>> staged;  // (path, temporary file)
  auto fail = [&](const std::string& path) {
    for (const auto& s : staged) std::remove(s.second.c_str());
    throw gpucmp_report::input_error(path + ": cannot write the output file");
  };
  for (const auto& [path, text] : outputs) {
    if (path == "-" || !written_by_rename(path)) continue;
    const std::string temp = path + ".tmp" + std::to_string(getpid());
    if (!write_text(temp, text)) {
      std::remove(temp.c_str());
      fail(path);
    }
    staged.push_back({path, temp});
  }
  for (const auto& [path, text] : outputs) {
    if (path != "-" && !written_by_rename(path) && !write_text(path, text)) fail(path);
  }
  for (const auto& [path, temp] : staged) {
    if (std::rename(temp.c_str(), path.c_str()) != 0) fail(path);
  }
  for (const auto& [path, text] : outputs) {
    if (path == "-") std::cout << text;
  }
}

// `compare --label A=FILE --label B=FILE`: the before/after comparison; exit 3 when it regressed.
int before_after_command(const std::string& command, const std::vector<std::pair<std::string, std::string>>& labels,
                         const std::vector<std::string>& positional, const gpucmp::change_options& change,
                         bool comparison_option, const std::string& html_path, const std::string& markdown_path,
                         const std::string& csv_path) {
  if (command != "compare") throw usage_error("--label belongs to compare");
  if (labels.size() != 2) throw usage_error("a before/after comparison takes two --label NAME=RESULT.json, not " + std::to_string(labels.size()));
  if (!positional.empty()) throw usage_error("give every result file of a before/after comparison with --label");
  if (comparison_option) throw usage_error("--baseline, --project and --price compare GPUs, not two runs");
  if (!html_path.empty()) throw usage_error("a before/after comparison writes --markdown and --csv, not --html");
  gpucmp_report::labelled_file before{labels[0].first, gpucmp_report::load_result_file(labels[0].second)};
  gpucmp_report::labelled_file after{labels[1].first, gpucmp_report::load_result_file(labels[1].second)};
  const gpucmp_report::before_after cmp = gpucmp_report::compare_before_after(std::move(before), std::move(after), change);
  const std::string md = gpucmp_report::render_before_after_markdown(cmp);
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!markdown_path.empty()) outputs.push_back({markdown_path, md});
  if (!csv_path.empty()) outputs.push_back({csv_path, gpucmp_report::render_before_after_csv(cmp)});
  write_outputs(outputs);
  if (outputs.empty()) std::cout << md;
  std::fprintf(stderr, "gpucmp-report: %s against %s: %s\n", labels[1].first.c_str(), labels[0].first.c_str(),
               gpucmp_report::before_after_summary(cmp).c_str());
  return cmp.regressed() ? 3 : 0;
}

int run(int argc, char** argv) {
  if (argc < 2) throw usage_error("no command");
  const std::string command = argv[1];
  std::vector<std::string> positional;
  std::string markdown_path, csv_path, html_path;
  bool errata = false;
  gpucmp_report::compare_options options;
  std::vector<std::pair<std::string, std::string>> labels;  // (label, path), in the order given
  gpucmp::change_options change;
  bool comparison_option = false;  // an option that only a comparison of GPUs takes
  std::string fit_option;          // the first option only `fit` takes, if any
  gpucmp_report::fit_request fit;
  fit.model = gpucmp::decoder_preset("llama-3.1-8b");
  fit.contexts = {2048, 8192, 32768, 131072};
  auto whole_number = [](const std::string& option, const std::string& text, std::int64_t least) {
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < least) {
      throw gpucmp_report::input_error(option + " '" + text + "' is not a whole number of at least " + std::to_string(least));
    }
    return std::int64_t(v);
  };
  bool min_change_given = false;
  auto value_of = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw usage_error(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--label") {
      const std::string assignment = value_of(i);
      const auto eq = assignment.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == assignment.size()) {
        throw usage_error("--label '" + assignment + "' is not NAME=RESULT.json");
      }
      labels.push_back({assignment.substr(0, eq), assignment.substr(eq + 1)});
    } else if (arg == "--min-change") {
      const std::string text = value_of(i);
      min_change_given = true;
      char* end = nullptr;
      change.min_change = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(change.min_change >= 0 && change.min_change < 1)) {
        throw usage_error("--min-change '" + text + "' is not a fraction in [0, 1) (0.02 = 2 %)");
      }
    } else if (arg == "--min-change-s") {
      const std::string text = value_of(i);
      min_change_given = true;
      char* end = nullptr;
      change.min_change_s = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(change.min_change_s >= 0) || !std::isfinite(change.min_change_s)) {
        throw usage_error("--min-change-s '" + text + "' is not a time in seconds >= 0 (2.5e-7 = 0.25 us)");
      }
    } else if (arg == "--baseline" || arg == "--project" || arg == "--price" || arg == "--prices") {
      comparison_option = true;
      if (arg == "--baseline") options.baseline = value_of(i);
      else if (arg == "--project") for (auto& k : split(value_of(i), ',')) options.project_to.push_back(k);
      else if (arg == "--price") add_price(options.usd_per_hour, value_of(i), "--price");
      else {
      const std::string path = value_of(i);
      std::stringstream lines(gpucmp_report::read_file(path));
      std::string line;
      while (std::getline(lines, line))
        if (!line.empty() && line[0] != '#') add_price(options.usd_per_hour, line, path);
      }
    } else if (arg == "--model" || arg == "--weights" || arg == "--kv" || arg == "--context" || arg == "--page-tokens" ||
               arg == "--step-tokens" || arg == "--reserve-gib") {
      if (fit_option.empty()) fit_option = arg;
      const std::string text = value_of(i);
      try {
        if (arg == "--model") fit.model = gpucmp::decoder_preset(text);
        else if (arg == "--weights") fit.options.weights = gpucmp::parse_numerics(text);
        else if (arg == "--kv") fit.options.kv_cache = gpucmp::parse_element_type(text);
        else if (arg == "--page-tokens") fit.options.page_tokens = whole_number(arg, text, 0);
        else if (arg == "--step-tokens") fit.options.step_tokens = whole_number(arg, text, 1);
        else if (arg == "--context") {
          fit.contexts.clear();
          for (const auto& c : split(text, ',')) fit.contexts.push_back(whole_number(arg, c, 1));
          if (fit.contexts.empty()) throw gpucmp_report::input_error("--context needs at least one context");
        } else {
          char* end = nullptr;
          const double gib = std::strtod(text.c_str(), &end);
          if (text.empty() || *end != '\0' || !(gib >= 0) || !std::isfinite(gib)) {
            throw gpucmp_report::input_error("--reserve-gib '" + text + "' is not a finite number of GiB >= 0");
          }
          fit.reserve_bytes = gib * 1073741824.0;
        }
      } catch (const gpucmp::error& e) {
        throw gpucmp_report::input_error(arg + ": " + e.what());
      }
    } else if (arg == "--markdown") markdown_path = value_of(i);
    else if (arg == "--csv") csv_path = value_of(i);
    else if (arg == "--html") html_path = value_of(i);
    else if (arg == "--errata") errata = true;
    else if (arg.rfind("--", 0) == 0) throw usage_error("unknown option " + arg);
    else positional.push_back(arg);
  }
  if (labels.empty() && min_change_given) throw usage_error("--min-change belongs to a before/after comparison (--label), as does --min-change-s");
  if (!fit_option.empty() && command != "fit") throw usage_error(fit_option + " belongs to fit");
  if (command == "fit") {
    if (!labels.empty() || comparison_option || !csv_path.empty() || !html_path.empty() || errata) {
      throw usage_error("fit takes --model, --weights, --kv, --context, --page-tokens, --step-tokens, --reserve-gib and --markdown");
    }
    try {
      fit.options.validate();
    } catch (const gpucmp::error& e) {
      throw gpucmp_report::input_error(std::string("fit: ") + e.what());
    }
    if (positional.empty()) positional = {"a100_80gb_sxm", "a100_40gb_sxm", "l40s", "l20", "h100_sxm", "h200_sxm"};
    const std::string md = gpucmp_report::render_fit_markdown(fit, gpucmp_report::resolve_gpus(positional));
    if (markdown_path.empty()) {
      std::cout << md;
    } else {
      write_outputs({{markdown_path, md}});
    }
    return 0;
  }
  if (!labels.empty()) return before_after_command(command, labels, positional, change, comparison_option, html_path,
                                                  markdown_path, csv_path);
  if (positional.empty()) throw usage_error(command == "specs" ? "no GPU named" : "no result file given");

  std::vector<std::pair<std::string, std::string>> outputs;
  std::string to_stdout;
  if (command == "specs") {
    const std::string md = gpucmp_report::render_specs_markdown(gpucmp_report::resolve_gpus(positional), errata);
    if (markdown_path.empty()) to_stdout = md; else outputs.push_back({markdown_path, md});
  } else if (command == "compare") {
    std::vector<gpucmp_report::result_file> files;
    for (const auto& path : positional) files.push_back(gpucmp_report::load_result_file(path));
    const gpucmp_report::comparison cmp = gpucmp_report::compare(files, options);
    const std::string md = gpucmp_report::render_markdown(cmp);
    if (!markdown_path.empty()) outputs.push_back({markdown_path, md});
    if (!csv_path.empty()) outputs.push_back({csv_path, gpucmp_report::render_csv(cmp)});
    if (!html_path.empty()) outputs.push_back({html_path, gpucmp_report::render_html(cmp)});
    if (outputs.empty()) to_stdout = md;
  } else if (command == "upgrade") {
    if (positional.size() != 2) throw usage_error("upgrade takes OLD.json NEW.json");
    outputs.push_back({positional[1], gpucmp_report::upgraded_result_text(gpucmp_report::read_file(positional[0]), positional[0])});
  } else {
    throw usage_error("unknown command '" + command + "'");
  }
  write_outputs(outputs);
  std::cout << to_stdout;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "gpucmp-report: %s\n%s", e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpucmp-report: error: %s\n", e.what());
    return 1;
  }
}
