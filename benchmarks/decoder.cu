// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A Llama-style decoder's steps as benchmarks (models/decoder.cuh): prefill of a batch of
// prompts (time to first token) and decode steps of one token a sequence at a context (time per
// output token), each step's operations searched and verified before it is timed, replayed from
// CUDA graphs. Every row declares the step's work (models/decoder_work.hpp: FLOPs, and the
// bytes it must move: weights once, the K and V it reads and writes), so the report reads a
// decode step's GB/s against bandwidth and a prefill's TFLOP/s against the dense peak; a copy
// row of the same run gives the decode roofline (scripts/bandwidth-fraction.py).
//   decoder/<model>/<dtype>/prefill/b<batch>_p<prompt>[/serial][/rope_apart][/norm_fused]/graph
//   decoder/<model>/<dtype>/decode/b<batch>_c<context>[/serial][/rope_apart][/norm_fused]/graph
//   copy/kernel/<bytes>/graph
// Flags: --model=<preset> (llama-3-8b, llama-3.1-8b, llama-3.2-1b, llama-3-70b), --dtype=bf16|fp16,
// --prompts=128,...  --prefill_batch=1  --batches=1,...  --contexts=1024,...  --weights=<checkpoint>
// (a .safetensors file or model.safetensors.index.json; random seeded weights otherwise),
// --overlap=on|off (off: the step's kernels launch serially, rows named .../serial; what the
// overlapped launches of decoder_options::overlap_kernels gain), --breakdown (each step also in
// kernel mode, rows .../kernel: each kernel's own GPU time, and the gaps between them;
// --gpucmp_kernels_out=FILE lists every kernel; needs CUPTI, docs/kernel-mode.md),
// --rope_split=on|off (off: RoPE, then the QKV split, rows named .../rope_apart; what applying
// RoPE in the split, decoder_options::fuse_rope_split, the default, gains), --norm_fusion=on|off
// (on: RMSNorm and the residual add inside gpucmp's GEMV kernel where it runs, rows named
// .../norm_fused; what decoder_options::fuse_norm_into_gemv gains).
// `decoder logits ...` writes a checkpoint's logits instead (decoder_logits.hpp); `decoder serve
// ...` serves requests with continuous batching and searches the goodput (decoder_serve.hpp);
// `decoder train ...` times training steps (decoder_train.hpp); `decoder train-check ...` writes a
// training step's gradients on a checkpoint for the comparison with PyTorch (decoder_train_check.hpp).
#include "copy_rows.hpp"
#include "decoder_logits.hpp"
#include "decoder_serve.hpp"
#include "decoder_train.hpp"
#include "decoder_train_check.hpp"
#include "library_versions.hpp"
#include "program_flags.hpp"

#include <gpucmp/bench.hpp>
#if GPUCMP_WITH_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>  // registers CUPTI for --breakdown's kernel-mode rows
#endif
#include <gpucmp/models/decoder.cuh>
#include <gpucmp/models/decoder_work.hpp>

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

struct settings {
  std::string model = "llama-3-8b";
  gpucmp::numerics dtype = gpucmp::numerics::bf16;
  std::vector<std::int64_t> prompts{128, 512, 1024, 2048, 4096};
  std::int64_t prefill_batch = 1;
  std::vector<std::int64_t> batches{1, 4, 16};
  std::vector<std::int64_t> contexts{1024, 2048, 4095};
  std::string weights;
  bool overlap = true;     // decoder_options::overlap_kernels
  bool breakdown = false;  // kernel-mode rows beside the graph rows
  bool rope_split = true;   // decoder_options::fuse_rope_split
  bool norm_fusion = false;  // decoder_options::fuse_norm_into_gemv
};

settings& config() {
  static settings s;
  return s;
}

std::int64_t largest(const std::vector<std::int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

// One decoder for every row: its cache holds the largest batch and the longest step.
gpucmp::decoder& model(cudaStream_t stream) {
  static std::unique_ptr<gpucmp::decoder> d;
  if (!d) {
    gpucmp::decoder_options o;
    o.dtype = config().dtype;
    o.max_batch = std::max(config().prefill_batch, largest(config().batches));
    o.max_context = std::max(largest(config().prompts), largest(config().contexts) + 1);
    o.overlap_kernels = config().overlap;
    o.fuse_rope_split = config().rope_split;
    o.fuse_norm_into_gemv = config().norm_fusion;
    d = std::make_unique<gpucmp::decoder>(gpucmp::decoder_preset(config().model), o, stream);
    if (!config().weights.empty()) d->load(gpucmp::decoder_checkpoint::open(config().weights), stream);
  }
  return *d;
}

void register_step(bool decode_step, std::int64_t batch, std::int64_t tokens_or_context) {
  const settings& c = config();
  const std::string name = "decoder/" + c.model + "/" + gpucmp::to_string(c.dtype) +
                           (decode_step ? "/decode/b" + std::to_string(batch) + "_c" : "/prefill/b" + std::to_string(batch) + "_p") +
                           std::to_string(tokens_or_context) + (c.overlap ? "" : "/serial") + (c.rope_split ? "" : "/rope_apart") + (c.norm_fusion ? "/norm_fused" : "");
  auto body = [decode_step, batch, tokens_or_context](gpucmp::state& st) {
    gpucmp::decoder& d = model(st.stream());
    const std::int64_t tokens = decode_step ? 1 : tokens_or_context, context = decode_step ? tokens_or_context : 0;
    d.prepare(batch, tokens, decode_step, st.stream());
    gpucmp::decoder_memory_options memory;
    memory.weights = config().dtype;
    memory.kv_cache = gpucmp::types_of(config().dtype).output;
    const gpucmp::decoder_step_work w = decode_step ? gpucmp::decoder_decode_work(d.config(), batch, context, memory)
                                                    : gpucmp::decoder_prefill_work(d.config(), batch, tokens, memory);
    st.set_work(w.as_work(gpucmp::peak_precision(config().dtype)));
    st.set_axis("phase", decode_step ? "decode" : "prefill");
    st.set_axis("model", config().model);
    st.set_axis("dtype", gpucmp::to_string(config().dtype));
    st.set_axis("batch", double(batch));
    st.set_axis(decode_step ? "context" : "prompt", double(tokens_or_context));
    st.set_axis("launches", config().overlap ? "overlapped" : "serial");
    st.set_axis("rope", config().rope_split ? "in the split" : "apart");
    st.set_axis("rmsnorm", config().norm_fusion ? "in the GEMV where it runs" : "own kernel");
    st.set_sweep_axis(decode_step ? "context" : "prompt");
    st.set_provider("gpucmp");
    for (const std::string& line : d.algorithms(batch, tokens, decode_step)) st.add_note(line);
    st.run([&d, batch, tokens, decode_step, context](cudaStream_t s) { d.run_prepared(batch, tokens, decode_step, context, s); });
  };
  gpucmp::register_benchmark_as(name + "/graph", gpucmp::mode::graph, body);
  if (c.breakdown) gpucmp::register_benchmark_as(name + "/kernel", gpucmp::mode::kernel, body);
}

void register_all() {
  gpucmp_bench::add_version_context("cudnn_version", cudnnGetVersion());
  const settings& c = config();
  for (std::int64_t prompt : c.prompts) register_step(false, c.prefill_batch, prompt);
  for (std::int64_t batch : c.batches) {
    for (std::int64_t context : c.contexts) register_step(true, batch, context);
  }
  gpucmp::work copy;  // the roofline's copy rate: 1 GiB each way, far past L2
  copy.bytes_read = copy.bytes_written = double(1u << 30);
  gpucmp_bench::register_copy_for(copy);
}

// Takes this program's flags out of argv (Google Benchmark rejects unknown ones).
void parse_flags(int& argc, char** argv) {
  int kept = 1;
  auto numbers = [](const char* v, long long minimum, const char* flag) {
    std::vector<std::int64_t> out;
    for (const auto& x : gpucmp_bench::split_list(v)) out.push_back(gpucmp_bench::whole_number(x, minimum, std::int64_t{1} << 24, "decoder", flag));
    if (out.empty()) throw gpucmp::invalid_argument(std::string("decoder: ") + flag + " needs at least one value");
    return out;
  };
  auto on_or_off = [](const std::string& v, const char* flag) {
    if (v != "on" && v != "off") throw gpucmp::invalid_argument(std::string("decoder: ") + flag + " takes on or off, got '" + v + "'");
    return v == "on";
  };
  for (int i = 1; i < argc; ++i) {
    auto value = [&](const char* flag) { return gpucmp_bench::flag_value(argv[i], flag); };
    if (const char* v = value("--model=")) {
      config().model = v;
    } else if (const char* v = value("--dtype=")) {
      config().dtype = gpucmp::parse_numerics(v);
    } else if (const char* v = value("--prompts=")) {
      config().prompts = numbers(v, 1, "--prompts");
    } else if (const char* v = value("--prefill_batch=")) {
      config().prefill_batch = numbers(v, 1, "--prefill_batch").front();
    } else if (const char* v = value("--batches=")) {
      config().batches = numbers(v, 1, "--batches");
    } else if (const char* v = value("--contexts=")) {
      config().contexts = numbers(v, 0, "--contexts");
    } else if (const char* v = value("--weights=")) {
      config().weights = v;
    } else if (std::string(argv[i]) == "--breakdown") {
#if GPUCMP_WITH_KERNEL_MODE
      config().breakdown = true;
#else
      throw gpucmp::invalid_argument("decoder: --breakdown needs kernel mode, and this build has no CUPTI (docs/kernel-mode.md)");
#endif
    } else if (const char* v = value("--overlap=")) {
      config().overlap = on_or_off(v, "--overlap");
    } else if (const char* v = value("--rope_split=")) {
      config().rope_split = on_or_off(v, "--rope_split");
    } else if (const char* v = value("--norm_fusion=")) {
      config().norm_fusion = on_or_off(v, "--norm_fusion");
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  gpucmp::decoder_preset(config().model);  // an unknown preset is named before anything runs
  if (config().dtype != gpucmp::numerics::bf16 && config().dtype != gpucmp::numerics::fp16) {
    throw gpucmp::invalid_argument(std::string("decoder: --dtype takes bf16 or fp16, got ") + gpucmp::to_string(config().dtype));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "logits") return gpucmp_bench::decoder_logits_main(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "serve") return gpucmp_bench::decoder_serve_main(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "train-check") return gpucmp_bench::decoder_train_check_main(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "train") return gpucmp_bench::decoder_train_main(argc, argv, GPUCMP_CUDA_ARCH_LIST);
  try {
    parse_flags(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decoder: %s\n", e.what());
    return 2;
  }
  register_all();
  return gpucmp::benchmark_main(argc, argv, GPUCMP_CUDA_ARCH_LIST);
}
