// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Training steps through gpucmp's model API (training/training_network.cuh): ResNet-50 v1.5
// (or ResNet-18) on synthetic data, forward + backward + SGD, for every batch and precision
// asked for, eager (each layer launched from the host, no held stream) and graph (the whole
// step captured into one CUDA graph and replayed). Each network is built, searched and
// verified layer by layer before it is timed. Names:
//   train/<model>/<precision>/bs<N>/<eager|graph>
// with images/s, TFLOP/s (training FLOPs: forward + data + weight gradients, the convention
// of training/training_work.hpp) and % of peak; counters add the memory plan (activations,
// parameter state, gradient buffers, workspaces, in bytes), the skipped steps and the final
// loss scale. A batch that does not fit is a typed out-of-memory row; rows measured before
// it stay.
//   training [--model=resnet50|resnet18] [--batches=64,128,256]
//            [--precisions=amp_fp16,bf16,tf32,fp32] [--layouts=nhwc,nchw]
//            [--layers_out=layers.md] [--largest_batch | --only_largest_batch] [--data_parallel]
//            [--bucket_mb=25] [--accumulate_in_conv=1|0] [--statistics_in_conv=searched|off|always]
//            [--candidates_per_pass=16] [benchmark flags]
// --largest_batch prints, after the benchmarks, per precision, the largest batch the memory
// plan fits in free memory and confirms it by building the network (falling back 10 % at a
// time); --only_largest_batch does only that. --data_parallel (built with gpucmp::nccl) adds
// train/<model>/<precision>/bs<N>/x<GPUs>/<eager|graph>: the step on every visible GPU, N
// images each, gradients averaged with NCCL in buckets of --bucket_mb MiB (default 25, DDP's)
// that overlap the backward pass; 0: one all-reduce after it (training/data_parallel.cuh).
// --accumulate_in_conv=0 adds a tensor's second gradient with a separate kernel instead of
// in the data-gradient pass (training_options::accumulate_in_conv), to measure what that saves;
// --candidates_per_pass=N searches the heuristic's first N candidates of each cuDNN API per
// pass and shape (training_options::candidates_per_pass, default 16), to weigh a longer search
// against the step it finds (docs/results/h200-training.md, eighth run);
// --statistics_in_conv says where the batch norms' forward statistics come from
// (training_options::statistics_in_conv): searched per layer (the default), off (the batch
// norm reads x for them) or always (every convolution cuDNN fuses them into).
#include "program_flags.hpp"
#include "trace_cells.hpp"

#include <gpucmp/bench.hpp>
#if GPUCMP_WITH_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>  // registers CUPTI: --layers_out then adds where the step's time goes
#endif
#include <gpucmp/models/resnet18.hpp>
#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/training/training_memory.hpp>
#include <gpucmp/training/step_trace.hpp>
#include <gpucmp/training/training_network.cuh>
#if GPUCMP_WITH_NCCL
#include <gpucmp/training/data_parallel.cuh>
#endif

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

// A precision of a training step: the storage type and whether the loss is scaled.
struct training_precision {
  std::string name;  // amp_fp16, fp16, bf16, tf32, fp32
  gpucmp::numerics dtype;
  bool scaled;
};

training_precision parse_precision(const std::string& text) {
  if (text == "amp_fp16") return {text, gpucmp::numerics::fp16, true};
  if (text == "fp16") return {text, gpucmp::numerics::fp16, false};
  if (text == "bf16") return {text, gpucmp::numerics::bf16, false};
  if (text == "tf32") return {text, gpucmp::numerics::tf32, false};
  if (text == "fp32") return {text, gpucmp::numerics::fp32, false};
  throw gpucmp::invalid_argument("training: unknown precision '" + text + "' (amp_fp16, fp16, bf16, tf32, fp32)");
}

struct settings {
  std::string model = "resnet50";
  std::vector<std::int64_t> batches{64, 128, 256};
  std::vector<training_precision> precisions{parse_precision("amp_fp16")};
  std::vector<gpucmp::conv_layout> layouts{gpucmp::conv_layout::nhwc};
  std::string layers_out;
  bool largest_batch = false;
  bool only_largest_batch = false;
  bool data_parallel = false;
  std::size_t bucket_bytes = std::size_t{25} << 20;  // data_parallel_training's default, DDP's
  bool accumulate_in_conv = true;                     // training_options' default
  gpucmp::conv_statistics statistics_in_conv = gpucmp::training_options{}.statistics_in_conv;
  int candidates_per_pass = gpucmp::training_options{}.candidates_per_pass;
};

settings& config() {
  static settings s;
  return s;
}

gpucmp::network_definition build_definition() {
  if (config().model == "resnet18") return gpucmp::resnet18_random(1);
  if (config().model == "resnet50") return gpucmp::resnet50_random(1);
  throw gpucmp::invalid_argument("training: unknown --model '" + config().model + "' (resnet50, resnet18)");
}

const gpucmp::network_definition& definition() {
  static const gpucmp::network_definition def = build_definition();
  return def;
}

gpucmp::training_options options_for(const training_precision& p, gpucmp::conv_layout layout, std::int64_t batch) {
  gpucmp::training_options o;
  o.batch = batch;
  o.dtype = p.dtype;
  o.loss_scaling = p.scaled;
  o.layout = layout;
  o.accumulate_in_conv = config().accumulate_in_conv;
  o.statistics_in_conv = config().statistics_in_conv;
  o.candidates_per_pass = config().candidates_per_pass;
  return o;
}

// One network at a time (eager and graph share it); a new batch or precision replaces it.
std::unique_ptr<gpucmp::training_network>& current() {
  static std::unique_ptr<gpucmp::training_network> net;
  return net;
}

// Where the step's time goes: the step traced piece by piece in kernel mode (CUPTI), summed
// by part, then every piece; the network is reset afterwards, so the timed rows start from
// the same state as without the trace.
void write_step_trace(std::ostream& out, gpucmp::training_network& net, cudaStream_t stream) {
  gpucmp::network_trace trace;
  try {
    const auto tracer = gpucmp::make_activity_tracer();
    trace = net.trace_step(*tracer, stream, 10);
  } catch (const gpucmp::unsupported& e) {
    out << "\nkernel mode: " << e.what() << "\n";
    return;
  }
  net.reset(stream);
  out << "\n### Where the step's time goes\n\nKernel mode: the step's pieces launched one by one from the host, each "
         "inside its own CUPTI sample, "
      << trace.passes << " steps; each piece's busy time is the median over the steps of its kernels' durations on the GPU's "
      << "clock. The median step's kernels take " << trace.busy_s * 1e3 << " ms (launched piece by piece the step spans "
      << trace.eager_span_s * 1e3 << " ms)";
  if (trace.dropped_records > 0) out << "; " << trace.dropped_records << " activity records were dropped";
  out << ".\n\n| part | pieces | ms | share |\n|---|---|---|---|\n";
  for (const gpucmp::step_part_time& p : gpucmp::times_by_part(trace)) {
    out << "| " << p.part << " | " << p.pieces << " | " << p.busy_s * 1e3 << " | " << 100.0 * p.share << " % |\n";
  }
  out << "\n<details><summary>every piece</summary>\n\n| piece | us | share | largest kernels |\n|---|---|---|---|\n";
  for (const gpucmp::layer_trace& piece : trace.layers) {
    out << "| " << piece.layer << " | " << piece.busy_s * 1e6 << " | " << 100.0 * piece.share << " % | " << gpucmp_bench::kernels_cell(piece, 3)
        << " |\n";
  }
  out << "\n</details>\n";
}

void write_layers(gpucmp::training_network& net, cudaStream_t stream) {
  if (config().layers_out.empty()) return;
  std::ofstream out(config().layers_out, std::ios::app);
  const gpucmp::training_memory_plan& m = net.memory();
  out << "\n## " << net.name() << "\n\nbuilt (searched and verified) in " << net.build_seconds() << " s; device memory "
      << (net.device_bytes() >> 20) << " MiB: activations kept " << (m.activation_bytes >> 20) << " MiB, gradient buffers "
      << (m.gradient_buffer_bytes() >> 20) << " MiB (" << (m.activation_gradient_bytes_without_reuse >> 20)
      << " MiB without reuse), parameters and optimizer state " << (m.parameter_state_bytes() >> 20) << " MiB, workspaces "
      << (net.workspace_bytes() >> 20) << " MiB\n\n"
      << "| layer | shape | forward | data gradient | weight gradient | batch norm | checks |\n|---|---|---|---|---|---|---|\n";
  for (const auto& l : net.layers()) {
    std::string checks;
    for (const auto& c : l.checks) checks += (checks.empty() ? "" : "<br>") + c;
    out << "| " << l.name << " | " << l.shape << " | " << l.forward << " | " << l.data_gradient << " | " << l.weight_gradient << " | "
        << l.batch_norm << " | " << checks << " |\n";
  }
  write_step_trace(out, net, stream);
}

gpucmp::training_network& network_for(const training_precision& p, gpucmp::conv_layout layout, std::int64_t batch,
                                      cudaStream_t stream) {
  auto& net = current();
  if (net && net->options().dtype == p.dtype && net->options().loss_scaling == p.scaled && net->options().layout == layout &&
      net->options().batch == batch) {
    return *net;
  }
  net.reset();  // frees the previous network's memory first
  net = std::make_unique<gpucmp::training_network>(definition(), options_for(p, layout, batch), stream);
  write_layers(*net, stream);
  return *net;
}

void register_all() {
  for (const training_precision& p : config().precisions) {
    for (gpucmp::conv_layout layout : config().layouts) {
      const std::string precision = p.name + (layout == gpucmp::conv_layout::nhwc ? "" : std::string("_") + gpucmp::to_string(layout));
      for (std::int64_t batch : config().batches) {
        const std::string base = "train/" + config().model + "/" + precision + "/bs" + std::to_string(batch);
        for (auto [label, mode] : {std::pair{"eager", gpucmp::mode::hot}, std::pair{"graph", gpucmp::mode::graph}}) {
          const bool eager = mode == gpucmp::mode::hot;
          auto fn = [p, layout, batch, eager](gpucmp::state& st) {
            gpucmp::training_network& net = network_for(p, layout, batch, st.stream());
            if (eager) st.options().hold = false;  // the host's launch path shows, as in a framework's eager mode
            st.set_work(net.work());
            std::ostringstream note;
            note << "whole step (forward, loss, backward, SGD" << (net.options().scales_loss() ? ", loss scaling" : "")
                 << "); every layer verified";
            st.add_note(note.str());
            st.run([&net](cudaStream_t s) { net.step(s); });
            const gpucmp::loss_scale_state scale = net.loss_scale(st.stream());
            auto& c = st.gbench().counters;
            c["skipped_steps"] = double(scale.skipped_steps);
            c["loss_scale"] = double(scale.scale);
            c["final_loss"] = double(net.loss(st.stream()));
            const gpucmp::training_memory_plan& m = net.memory();
            c["activation_bytes"] = double(m.activation_bytes);
            c["gradient_buffer_bytes"] = double(m.gradient_buffer_bytes());
            c["parameter_state_bytes"] = double(m.parameter_state_bytes());
            c["workspace_bytes"] = double(net.workspace_bytes());
            c["device_bytes"] = double(net.device_bytes());
          };
          gpucmp::register_benchmark_as(base + "/" + label, mode, fn);
        }
      }
    }
  }
}

#if GPUCMP_WITH_NCCL
// The data-parallel step over every visible GPU, one at a time like the single-GPU networks.
void register_data_parallel() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return;
  }
  for (const training_precision& p : config().precisions) {
    for (std::int64_t batch : config().batches) {
      const std::string base = "train/" + config().model + "/" + p.name + "/bs" + std::to_string(batch) + "/x" + std::to_string(devices);
      for (auto [label, mode] : {std::pair{"eager", gpucmp::mode::hot}, std::pair{"graph", gpucmp::mode::graph}}) {
        const bool eager = mode == gpucmp::mode::hot;
        auto fn = [p, batch, eager](gpucmp::state& st) {
          static std::unique_ptr<gpucmp::communicator_group> group;
          static std::unique_ptr<gpucmp::data_parallel_training> dp;
          static std::string built;
          const std::string key = p.name + "/" + std::to_string(batch);
          if (!dp || built != key) {
            current().reset();  // the single-GPU network's memory first
            dp.reset();
            if (!group) group = std::make_unique<gpucmp::communicator_group>(gpucmp::communicator_group::all_visible());
            dp = std::make_unique<gpucmp::data_parallel_training>(definition(), options_for(p, config().layouts.front(), batch), *group,
                                                                  config().bucket_bytes);
            built = key;
          }
          if (eager) st.options().hold = false;
          st.set_work(dp->work());
          st.add_note(std::to_string(dp->ranks()) + " GPU(s), gradients averaged with NCCL in " + std::to_string(dp->buckets().size()) +
                      " bucket(s) overlapping the backward pass; every layer verified on each");
          st.run(*dp);
        };
        gpucmp::register_benchmark_as(base + "/" + label, mode, fn);
      }
    }
  }
}
#endif

void parse_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) { return gpucmp_bench::flag_value(argv[i], flag); };
    if (const char* v = value("--model=")) {
      config().model = v;
    } else if (const char* v = value("--batches=")) {
      config().batches = gpucmp_bench::parse_batches(v, 2, "training");
    } else if (const char* v = value("--precisions=")) {
      config().precisions.clear();
      for (const auto& t : gpucmp_bench::split_list(v)) config().precisions.push_back(parse_precision(t));
    } else if (const char* v = value("--layouts=")) {
      config().layouts.clear();
      for (const auto& l : gpucmp_bench::split_list(v)) config().layouts.push_back(gpucmp::parse_conv_layout(l));
    } else if (const char* v = value("--layers_out=")) {
      config().layers_out = v;
    } else if (arg == "--largest_batch") {
      config().largest_batch = true;
    } else if (arg == "--data_parallel") {
#if GPUCMP_WITH_NCCL
      config().data_parallel = true;
#else
      throw gpucmp::invalid_argument("training: --data_parallel needs gpucmp::nccl, which this build lacks");
#endif
    } else if (const char* v = value("--bucket_mb=")) {
#if GPUCMP_WITH_NCCL
      const double mb = gpucmp_bench::real_number(v, 0, 1e6, "training", "--bucket_mb");  // MiB; 0: one all-reduce
      config().bucket_bytes = std::size_t(mb * 1024 * 1024);
#else
      throw gpucmp::invalid_argument("training: --bucket_mb needs gpucmp::nccl, which this build lacks");
#endif
    } else if (const char* v = value("--accumulate_in_conv=")) {
      const std::string text = v;
      if (text != "0" && text != "1") throw gpucmp::invalid_argument("training: --accumulate_in_conv must be 0 or 1, got '" + text + "'");
      config().accumulate_in_conv = text == "1";
    } else if (const char* v = value("--candidates_per_pass=")) {
      config().candidates_per_pass = int(gpucmp_bench::whole_number(v, 1, 64, "training", "--candidates_per_pass"));
    } else if (const char* v = value("--statistics_in_conv=")) {
      config().statistics_in_conv = gpucmp::parse_conv_statistics(v);
    } else if (arg == "--only_largest_batch") {
      config().largest_batch = config().only_largest_batch = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
}

// A build that only has to show the batch fits: each pass's first candidate of each cuDNN API,
// timed once, still verified. The full search at a batch of thousands ran past 170 s on the
// H200 (2026-12-02) without finishing.
gpucmp::training_options quick_search(gpucmp::training_options o) {
  o.candidates_per_pass = 1;
  o.search.trials = 1;
  o.search.sustain_seconds = 0;
  o.search.refine_rounds = 0;
  o.search.duel_contenders = 0;
  return o;
}

// The plan's largest batch in free memory, confirmed by building the network there (10 %
// lower per out-of-memory).
void print_largest_batches() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    cudaGetLastError();
    return;
  }
  current().reset();
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) return;
  for (const training_precision& p : config().precisions) {
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) break;
    std::int64_t batch = gpucmp::largest_training_batch_that_fits(definition(), p.dtype, free_bytes, config().accumulate_in_conv);
    std::string outcome = "no batch fits";
    while (batch > 1) {
      try {
        gpucmp::training_network net(definition(), quick_search(options_for(p, config().layouts.front(), batch)), stream);
        outcome = "built and verified";
        break;
      } catch (const gpucmp::out_of_memory& e) {
        outcome = std::string("out of memory: ") + e.what();
        batch = batch * 9 / 10;
      }
    }
    std::printf("train/%s/%s: largest batch (memory plan in %.1f GiB free, then built): %lld (%s)\n", config().model.c_str(),
                p.name.c_str(), double(free_bytes) / double(1ull << 30), static_cast<long long>(batch), outcome.c_str());
  }
  cudaStreamDestroy(stream);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    parse_flags(argc, argv);
    definition();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "training: %s\n", e.what());
    return 2;
  }
  int status = 0;
  if (!config().only_largest_batch) {
    register_all();
#if GPUCMP_WITH_NCCL
    if (config().data_parallel) register_data_parallel();
#endif
    status = gpucmp::benchmark_main(argc, argv);
  }
  current().reset();
  if (config().largest_batch) {
    try {
      print_largest_batches();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "training: largest batch: %s\n", e.what());
      return status == 0 ? 1 : status;
    }
  }
  return status;
}
