// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// ResNet-50 v1.5 (or, with --model=resnet18, ResNet-18) inference through gpucmp's model
// API: every batch size and precision asked for, eager (each layer launched from the host as the GPU runs, no held stream: the launch
// path shows when it is slower than the GPU) and graph (the forward pass captured into a CUDA
// graph and replayed). Each network is built, searched and verified layer by layer before it
// is timed. Names:
// <model>/<dtype>/bs<N>/<eager|graph>; counters add images/s, TFLOP/s and % of peak.
//   resnet50 [--model=resnet50|resnet18] [--batches=1,16,32,64,128,256] [--dtypes=fp16,bf16,tf32,fp32,fp8_e4m3,int8]
//            [--layouts=nhwc,nchw] [--weights=resnet50.safetensors] [--layers_out=layers.md [--layer_error_images=16]]
//            [--paths=fused_graph,legacy_fused,conv_then_kernel] [--accuracy_images=512]
//            [--calibration=FILE | --calibration_images=512 --calibration_method=max_abs|percentile
//             --calibration_out=FILE] [benchmark flags]
// fp8_e4m3 and int8 run the network quantized (models/quantized_network.cuh, NHWC only) from a
// calibration: read from --calibration (made for this model and these weights), or made here
// over --calibration_images random images and written to --calibration_out; with --weights,
// the calibration beside them (settle_calibration_file). Accuracy goes with
// every row: each network's logits on --accuracy_images random images (others than the
// calibration's) beside the FP32 network's, as counters top1_agreement_pct (images whose top-1
// class is FP32's), max_rel_logit_error (max |logit - FP32's| / max |FP32 logit|),
// accuracy_images and fp32_top1_classes (distinct classes FP32 gives those images: an
// agreement means little where most images get the same class), and the same on centred
// logits (centred_top1_agreement_pct, centred_max_rel_logit_error, fp32_centred_top1_classes:
// each class's mean FP32 logit over the images taken out of both, as compare_logits does; on
// random weights the top-1 only varies from image to image there).
// Rows are resnet50/<dtype>/bs<N>/<eager|graph> in NHWC (the default layout) and
// resnet50/<dtype>_nchw/bs<N>/... in NCHW (resnet18/... with --model=resnet18).
// --weights loads ResNet-50's torchvision weights; other models run on random weights.
// --layers_out appends each network's layers: algorithm, searched time, verification and,
// where CUPTI is available, each layer's kernels and time inside the pass (kernel mode); and
// for every network but FP32, each layer's output beside the FP32 network's on the first
// --layer_error_images accuracy images (models/layer_errors.hpp: where the error grows; 0: none).
// A batch that does not fit is a typed out-of-memory result (needed vs free); the largest
// batch that fits is printed at the end for each precision.
#include "program_flags.hpp"
#include "trace_cells.hpp"

#include <gpucmp/bench.hpp>
#if GPUCMP_WITH_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>  // registers CUPTI: --layers_out then adds the layers' in-pass times
#endif
#include <gpucmp/models/calibration_run.cuh>
#include <gpucmp/models/layer_errors.hpp>
#include <gpucmp/models/logits_agreement.hpp>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/network_memory.hpp>
#include <gpucmp/models/quantized_network.cuh>
#include <gpucmp/models/resnet18.hpp>
#include <gpucmp/models/resnet50.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

struct settings {
  std::string model = "resnet50";  // or "resnet18"
  std::vector<std::int64_t> batches{1, 16, 32, 64, 128, 256};
  std::vector<gpucmp::numerics> dtypes{gpucmp::numerics::fp16};
  std::vector<gpucmp::conv_layout> layouts{gpucmp::conv_layout::nhwc};
  std::string weights;     // empty: deterministic random weights
  std::string layers_out;  // per-layer breakdown (markdown), appended per network
  std::vector<gpucmp::fusion_path> paths = gpucmp::all_fusion_paths();
  std::int64_t accuracy_images = 512;  // each row's logits beside FP32's on this many images
  std::int64_t layer_error_images = 16;  // --layers_out's layer-by-layer errors on this many (0: none)
  std::string calibration_file;        // a quantized network's calibration, read; empty: made here
  std::string calibration_out;         // where a calibration made here is written (empty: nowhere)
  gpucmp::calibration_settings calibration;
};

// The accuracy images come from another random stream than the calibration's.
constexpr std::uint64_t accuracy_seed = 99;

settings& config() {
  static settings s;
  return s;
}

// The model asked for, built once: the registry of the models this program runs.
gpucmp::network_definition build_definition() {
  if (config().model == "resnet18") {
    if (!config().weights.empty()) throw gpucmp::invalid_argument("resnet50: --weights loads ResNet-50 weights only");
    return gpucmp::resnet18_random(1);
  }
  if (config().model != "resnet50") {
    throw gpucmp::invalid_argument("resnet50: unknown --model '" + config().model + "' (resnet50, resnet18)");
  }
  return config().weights.empty() ? gpucmp::resnet50_random(1) : gpucmp::resnet50_from_file(config().weights);
}

const gpucmp::network_definition& definition() {
  static const gpucmp::network_definition def = build_definition();
  return def;
}

// One network at a time (eager and graph share it); a new batch or precision replaces it.
std::unique_ptr<gpucmp::network>& current() {
  static std::unique_ptr<gpucmp::network> net;
  return net;
}
std::unique_ptr<gpucmp::quantized_network>& current_quantized() {
  static std::unique_ptr<gpucmp::quantized_network> net;
  return net;
}
// The current network's logits beside FP32's (accuracy_of).
gpucmp::logits_agreement& current_accuracy() {
  static gpucmp::logits_agreement a;
  return a;
}

bool is_quantized(gpucmp::numerics dtype) {
  return std::find(std::begin(gpucmp::quantized_network_numerics), std::end(gpucmp::quantized_network_numerics), dtype) !=
         std::end(gpucmp::quantized_network_numerics);
}

// `net`'s logits on the accuracy images, `batch` at a time (the last batch padded with zeros).
template <class Net>
std::vector<float> logits_of(Net& net, std::int64_t batch, cudaStream_t stream) {
  const gpucmp::network_definition& def = definition();
  const auto images = gpucmp::random_calibration_images(def.shape(def.input()), accuracy_seed);
  const std::int64_t classes = def.shape(def.output()).elements();
  std::vector<float> logits;
  for (std::int64_t first = 0; first < config().accuracy_images; first += batch) {
    const std::int64_t count = std::min(batch, config().accuracy_images - first);
    std::vector<float> in = images(first, count);
    in.resize(std::size_t(batch * def.shape(def.input()).elements()), 0.0f);
    net.set_input(in, stream);
    net(stream);
    const std::vector<float> out = net.output(stream);
    logits.insert(logits.end(), out.begin(), out.begin() + count * classes);
  }
  return logits;
}

// The FP32 network every other is compared with (NCHW, as gpucmp's FP32 networks run).
gpucmp::network fp32_network(std::int64_t batch, gpucmp::algorithm_choice choice, cudaStream_t stream) {
  gpucmp::network_options o;
  o.batch = batch;
  o.dtype = gpucmp::numerics::fp32;
  o.layout = gpucmp::conv_layout::nchw;
  o.choice = choice;
  return gpucmp::network(definition(), o, stream);
}

// The FP32 network's logits on the accuracy images, made once.
const std::vector<float>& reference_logits(cudaStream_t stream) {
  static const std::vector<float> logits = [stream] {
    const std::int64_t batch = std::min<std::int64_t>(32, config().accuracy_images);
    gpucmp::network reference = fp32_network(batch, gpucmp::algorithm_choice::search, stream);
    return logits_of(reference, batch, stream);
  }();
  return logits;
}

// `net`'s layers beside the FP32 network's on the first accuracy images (layer_errors), as a
// table; each convolution of the FP32 network is its heuristic's first choice, verified (its
// speed does not matter here).
template <class Net>
void write_layer_errors(std::ostream& out, Net& net, cudaStream_t stream) {
  const std::int64_t images = std::min({config().layer_error_images, config().accuracy_images, net.options().batch});
  if (images < 2) return;
  const gpucmp::network_definition& def = definition();
  const std::vector<float> some = gpucmp::random_calibration_images(def.shape(def.input()), accuracy_seed)(0, images);
  gpucmp::network reference = fp32_network(images, gpucmp::algorithm_choice::heuristic, stream);
  const std::vector<gpucmp::layer_error> rows = gpucmp::layer_errors(reference, net, some, stream);
  out << "\n### Error against FP32, layer by layer\n\nEach layer's output beside the FP32 network's on the first " << images
      << " accuracy images, every layer before it run in its own network, so each row is the error accumulated up to "
         "it: RMS error over the FP32 output's RMS; over the RMS of what varies from image to image (the FP32 output "
         "less its mean over the images at each position); largest error over the largest FP32 value.\n\n"
         "| layer | kind | relative RMS error | error / images' variation | largest relative error |\n|---|---|---|---|---|\n";
  for (const gpucmp::layer_error& r : rows) {
    out << "| " << r.layer << " | " << r.kind << " | " << r.error.relative_rms << " | " << r.error.relative_to_variation
        << " | " << r.error.max_relative << " |\n";
  }
}

template <class Net>
gpucmp::logits_agreement accuracy_of(Net& net, std::int64_t batch, cudaStream_t stream) {
  const std::vector<float>& expected = reference_logits(stream);
  return gpucmp::compare_logits(expected, logits_of(net, batch, stream), definition().shape(definition().output()).elements());
}

// The quantized networks' calibration, made once: the file --calibration names, read and
// checked against this model and its weights (no GPU work: main reads it before anything
// runs), or calibrate()'s FP32 network over random images, written where --calibration_out asks.
const gpucmp::calibration_table& calibration(cudaStream_t stream) {
  static const gpucmp::calibration_table table = [stream] {
    const gpucmp::network_definition& def = definition();
    if (!config().calibration_file.empty()) {
      return gpucmp::read_calibration(config().calibration_file, def.name(), gpucmp::definition_fingerprint(def),
                                      gpucmp::calibration_tensors(def));
    }
    gpucmp::calibration_table made = gpucmp::calibrate(def, config().calibration, 32, stream);
    if (!config().calibration_out.empty()) gpucmp::write_calibration(config().calibration_out, made);
    return made;
  }();
  return table;
}

// The network's layers traced in kernel mode (CUPTI), or why they could not be.
struct layer_times {
  std::optional<gpucmp::network_trace> trace;
  std::string unavailable;  // the reason when there is no trace
};

template <class Network>
layer_times traced_layer_times(const Network& net, cudaStream_t stream) {
  layer_times times;
  try {
    const auto tracer = gpucmp::make_activity_tracer();
    times.trace = net.trace_layers(*tracer, stream, 20);
  } catch (const gpucmp::unsupported& e) {
    times.unavailable = e.what();
  }
  return times;
}

// Each layer's row (searched, and in the pass where traced), then the sums, for either network.
void write_layer_rows(std::ostream& out, const std::vector<gpucmp::layer_report>& layers, const layer_times& times) {
  out << "Searched: each layer alone, replayed in a graph during the algorithm search. In the pass: the layer's "
         "kernels inside whole forward passes, on the GPU's clock (kernel mode: CUPTI timestamps, median over "
         "passes launched layer by layer; unavailable without CUPTI, see below).\n\n"
      << "| layer | shape | algorithm | searched us | in the pass us | share | kernels in the pass | verification |\n"
         "|---|---|---|---|---|---|---|---|\n";
  double total = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    total += l.searched_seconds;
    out << "| " << l.name << " | " << l.shape << " | " << l.algorithm << " | " << l.searched_seconds * 1e6 << " | ";
    if (times.trace) {
      const gpucmp::layer_trace& traced = times.trace->layers.at(i);
      out << traced.busy_s * 1e6 << " | " << 100.0 * traced.share << " % | " << gpucmp_bench::kernels_cell(traced) << " | ";
    } else {
      out << "– | – | – | ";
    }
    out << l.check.summary() << " |\n";
  }
  out << "\nsum of the layers' searched times: " << total * 1e6 << " us\n";
  if (times.trace) {
    out << "\nkernel mode, " << times.trace->passes << " passes: the pass's kernels take " << times.trace->busy_s * 1e6
        << " us (median pass); launched layer "
        << "by layer from the host the pass spans " << times.trace->eager_span_s * 1e6
        << " us; the graph row's time is the pass replayed without host gaps";
    if (times.trace->dropped_records > 0) out << "; " << times.trace->dropped_records << " activity records were dropped";
    out << "\n";
  } else {
    out << "\nkernel mode: " << times.unavailable << "\n";
  }
}

void write_layers(gpucmp::network& net, cudaStream_t stream) {
  if (config().layers_out.empty()) return;
  const layer_times times = traced_layer_times(net, stream);
  std::ofstream out(config().layers_out, std::ios::app);
  out << "\n## " << net.name() << "\n\nalgorithm search " << net.search_seconds() << " s, device memory "
      << (net.device_bytes() >> 20) << " MiB (activations " << (net.memory().activation_bytes >> 20) << " MiB after reuse, "
      << (net.memory().activation_bytes_without_reuse >> 20) << " MiB without)\n\n";
  write_layer_rows(out, net.layers(), times);
  if (net.options().dtype != gpucmp::numerics::fp32) write_layer_errors(out, net, stream);
  out << "\n<details><summary>every candidate timed</summary>\n\n";
  for (const auto& c : net.candidate_log()) {
    out << "- " << c.description << ": " << (c.failure.empty() ? std::to_string(c.seconds * 1e6) + " us" : c.failure) << "\n";
  }
  out << "\n</details>\n";
}

gpucmp::network& network_for(gpucmp::numerics dtype, gpucmp::conv_layout layout, std::int64_t batch, cudaStream_t stream) {
  auto& net = current();
  if (net && net->options().dtype == dtype && net->options().layout == layout && net->options().batch == batch) return *net;
  net.reset();  // frees the previous network's memory first
  current_quantized().reset();
  gpucmp::network_options o;
  o.batch = batch;
  o.dtype = dtype;
  o.layout = layout;
  o.fusion_paths = config().paths;
  net = std::make_unique<gpucmp::network>(definition(), o, stream);
  current_accuracy() = accuracy_of(*net, batch, stream);
  write_layers(*net, stream);
  return *net;
}

void write_quantized_layers(gpucmp::quantized_network& net, cudaStream_t stream) {
  if (config().layers_out.empty()) return;
  const layer_times times = traced_layer_times(net, stream);
  std::ofstream out(config().layers_out, std::ios::app);
  out << "\n## " << net.name() << "\n\n```\n" << net.plan().report() << "```\n\n";
  write_layer_rows(out, net.layers(), times);
  write_layer_errors(out, net, stream);
}

gpucmp::quantized_network& quantized_network_for(gpucmp::numerics format, std::int64_t batch, cudaStream_t stream) {
  auto& net = current_quantized();
  if (net && net->plan().format() == format && net->options().batch == batch) return *net;
  net.reset();
  current().reset();
  gpucmp::quantized_network_options o;
  o.batch = batch;
  gpucmp::quantization_plan plan(definition(), calibration(stream), format);
  net = std::make_unique<gpucmp::quantized_network>(definition(), std::move(plan), o, stream);
  current_accuracy() = accuracy_of(*net, batch, stream);
  write_quantized_layers(*net, stream);
  return *net;
}

// The convolutions' precisions, e.g. "convs: fp16 3, int8 50 (in FP16: conv1, ...); every layer verified".
std::string precisions_note(const gpucmp::quantized_network& net) {
  std::map<std::string, int> counts;
  std::string fp16;
  for (const gpucmp::quantized_layer& q : net.plan().layers()) {
    counts[gpucmp::to_string(q.precision)]++;
    if (q.precision == gpucmp::numerics::fp16) fp16 += (fp16.empty() ? "" : ", ") + q.name;
  }
  std::string note = "convs:";
  for (const auto& [precision, n] : counts) note += " " + precision + " " + std::to_string(n) + ",";
  note.pop_back();
  if (!fp16.empty()) note += " (in FP16: " + fp16 + ")";
  return note + "; every layer verified";
}

// Accuracy beside the time: FP32's top-1 kept and the largest logit error (reference_logits).
void add_accuracy(gpucmp::state& st) {
  const gpucmp::logits_agreement& a = current_accuracy();
  auto& c = st.gbench().counters;
  c["top1_agreement_pct"] = 100.0 * a.top1_agreement();
  c["max_rel_logit_error"] = a.max_relative_error;
  c["accuracy_images"] = double(a.images);
  c["fp32_top1_classes"] = double(a.reference_classes);
  c["centred_top1_agreement_pct"] = 100.0 * a.centred_top1_agreement();
  c["centred_max_rel_logit_error"] = a.centred_max_relative_error;
  c["fp32_centred_top1_classes"] = double(a.centred_reference_classes);
}

// Fusion paths the search chose, e.g. "fused graph 49, legacy fused 1, conv + epilogue kernel 3".
std::string paths_note(const gpucmp::network& net) {
  std::map<std::string, int> counts;
  for (const auto& l : net.layers()) {
    if (l.kind != "conv") continue;
    counts[l.algorithm.substr(0, l.algorithm.find(':'))]++;
  }
  std::string note = "convs:";
  for (const auto& [path, n] : counts) note += " " + path + " " + std::to_string(n) + ";";
  note.pop_back();
  return note + "; every layer verified";
}

// Rows in order of precision, layout, batch; NHWC keeps the plain name.
void register_all() {
  for (gpucmp::numerics dtype : config().dtypes) {
    for (gpucmp::conv_layout layout : config().layouts) {
      const std::string precision =
          std::string(gpucmp::to_string(dtype)) + (layout == gpucmp::conv_layout::nhwc ? "" : std::string("_") + gpucmp::to_string(layout));
      for (std::int64_t batch : config().batches) {
        const std::string base = config().model + "/" + precision + "/bs" + std::to_string(batch);
        for (auto [label, mode] : {std::pair{"eager", gpucmp::mode::hot}, std::pair{"graph", gpucmp::mode::graph}}) {
          const bool eager = mode == gpucmp::mode::hot;
          auto fn = [dtype, layout, batch, eager](gpucmp::state& st) {
            st.set_axis("model", config().model);
            st.set_axis("dtype", gpucmp::to_string(dtype));
            st.set_axis("layout", gpucmp::to_string(layout));
            st.set_axis("batch", double(batch));
            // Eager: launches are not queued behind a held stream, so the host's launch path
            // shows whenever it is slower than the GPU, as in a framework's eager mode.
            if (eager) st.options().hold = false;
            if (is_quantized(dtype)) {
              if (layout != gpucmp::conv_layout::nhwc) return st.skip("unsupported: a quantized network runs NHWC");
              gpucmp::quantized_network& net = quantized_network_for(dtype, batch, st.stream());
              st.set_work(net.work());
              const std::string precisions = precisions_note(net);
              st.set_algorithm(precisions);
              st.add_note(precisions);
              add_accuracy(st);
              return st.run(net);
            }
            gpucmp::network& net = network_for(dtype, layout, batch, st.stream());
            st.set_work(net.work());
            const std::string paths = paths_note(net);
            st.set_algorithm(paths);
            st.add_note(paths);
            add_accuracy(st);
            st.run(net);
          };
          gpucmp::register_benchmark_as(base + "/" + label, mode, fn);
        }
      }
    }
  }
}

// A calibration is kept beside the weights it was made for (resnet50.safetensors:
// resnet50.calibration.json): with --weights and no --calibration, the file beside them is read
// where it exists and written there once made. A named or found file is read and checked here.
void settle_calibration_file() {
  if (std::none_of(config().dtypes.begin(), config().dtypes.end(), is_quantized)) return;
  if (config().calibration_file.empty() && !config().weights.empty()) {
    std::string beside = config().weights;
    const std::size_t dot = beside.rfind('.');
    if (dot != std::string::npos && beside.find('/', dot) == std::string::npos) beside.resize(dot);
    beside += ".calibration.json";
    if (std::ifstream(beside).good()) {
      config().calibration_file = beside;
    } else if (config().calibration_out.empty()) {
      config().calibration_out = beside;
    }
  }
  if (!config().calibration_file.empty()) calibration(nullptr);  // read once, here
}

// Takes this program's flags out of argv (Google Benchmark rejects unknown ones).
void parse_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) { return gpucmp_bench::flag_value(argv[i], flag); };
    if (const char* v = value("--model=")) {
      config().model = v;
    } else if (const char* v = value("--batches=")) {
      config().batches = gpucmp_bench::parse_batches(v, 1, "resnet50");
    } else if (const char* v = value("--dtypes=")) {
      config().dtypes.clear();
      for (const auto& t : gpucmp_bench::split_list(v)) config().dtypes.push_back(gpucmp::parse_numerics(t));
    } else if (const char* v = value("--layouts=")) {
      config().layouts.clear();
      for (const auto& l : gpucmp_bench::split_list(v)) config().layouts.push_back(gpucmp::parse_conv_layout(l));
    } else if (const char* v = value("--weights=")) {
      config().weights = v;
    } else if (const char* v = value("--layers_out=")) {
      config().layers_out = v;
    } else if (const char* v = value("--accuracy_images=")) {
      config().accuracy_images = gpucmp_bench::whole_number(v, 1, 1 << 20, "resnet50", "--accuracy_images");
    } else if (const char* v = value("--layer_error_images=")) {
      config().layer_error_images = gpucmp_bench::whole_number(v, 0, 256, "resnet50", "--layer_error_images");
    } else if (const char* v = value("--calibration=")) {
      config().calibration_file = v;
    } else if (const char* v = value("--calibration_out=")) {
      config().calibration_out = v;
    } else if (const char* v = value("--calibration_images=")) {
      config().calibration.images = gpucmp_bench::whole_number(v, 1, 1 << 20, "resnet50", "--calibration_images");
    } else if (const char* v = value("--calibration_method=")) {
      config().calibration.method = gpucmp::parse_calibration_method(v);
    } else if (const char* v = value("--paths=")) {
      config().paths.clear();
      for (const auto& p : gpucmp_bench::split_list(v)) config().paths.push_back(gpucmp::parse_fusion_path(p));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
}

// The largest batch whose parameters, activations and workspace fit in free memory now.
void print_largest_batches() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    cudaGetLastError();
    return;
  }
  current().reset();
  current_quantized().reset();
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return;
  for (gpucmp::numerics dtype : config().dtypes) {
    if (is_quantized(dtype)) continue;  // network_memory models the FP networks' memory only
    const std::int64_t largest = gpucmp::largest_batch_that_fits(definition(), dtype, free_bytes);
    std::printf("%s/%s: largest batch that fits in %.1f GiB free: %lld\n", config().model.c_str(), gpucmp::to_string(dtype),
                double(free_bytes) / double(1ull << 30), static_cast<long long>(largest));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    parse_flags(argc, argv);
    definition();  // a bad weight file is reported before anything runs
    settle_calibration_file();  // and so is a bad calibration file
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet50: %s\n", e.what());
    return 2;
  }
  register_all();
  const int status = gpucmp::benchmark_main(argc, argv);
  print_largest_batches();
  return status;
}
