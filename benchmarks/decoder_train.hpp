// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// benchmarks/decoder's train mode: training steps of a decoder (training/decoder_training.cuh),
// forward, backward and AdamW in BF16 mixed precision, each step replayed from a CUDA graph:
//   decoder_train/<model>/bf16/<scope>/b<batch>_s<sequence>[/checkpointing]/graph
// <scope> is blocks1 (one decoder block: hidden states in, a fixed gradient of its output back),
// blocksN or whole_model (embedding to the mean cross-entropy of next-token labels). A row
// declares the step's FLOPs (models/decoder_training_work.hpp: the model's, forward and
// backward, so TFLOP/s and % of peak are MFU; checkpointing's second forward is not work) and
// its tokens (items/s: tokens a second). Counters: memory_gb (device memory the step holds),
// planned_gb (models/decoder_training_memory.hpp's plan), largest_batch (the largest batch of
// this sequence length the plan fits in the memory free before the row), loss_first and
// loss_last (the whole model's, before and after the timed steps). Before it is timed a step
// runs once and its loss (whole model) or gradients must be finite: training/decoder_training.cuh's
// GPU tests check the step against an FP64 reference on small shapes.
//   decoder train [--model=llama-3-8b] [--scopes=blocks1,whole_model] [--batch=8] [--sequence=4096]
//                 [--checkpointing=off,on] [benchmark flags]
// A configuration that does not fit is an out-of-memory row; rows before it stay.
#pragma once

#include "program_flags.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_training_memory.hpp>
#include <gpucmp/training/decoder_training.cuh>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp_bench {
namespace detail {

struct train_settings {
  std::string model = "llama-3-8b";
  std::vector<std::string> scopes{"blocks1", "whole_model"};
  std::int64_t batch = 8, sequence = 4096;
  std::vector<bool> checkpointing{false, true};
};

// "blocks<N>" or "whole_model" as training options; throws invalid_argument otherwise.
inline gpucmp::decoder_training_options training_scope(const std::string& scope) {
  gpucmp::decoder_training_options o;
  if (scope == "whole_model") {
    o.scope = gpucmp::decoder_training_scope::whole_model;
  } else if (scope.rfind("blocks", 0) == 0 && scope.size() > 6) {
    o.blocks = whole_number(scope.substr(6), 1, 1024, "decoder train", "--scopes");
  } else {
    throw gpucmp::invalid_argument("decoder train: --scopes takes blocks<N> or whole_model, got '" + scope + "'");
  }
  return o;
}

inline train_settings parse_train_flags(int& argc, char** argv) {
  train_settings s;
  int kept = 1;
  for (int i = 2; i < argc; ++i) {  // argv[1] is "train"
    auto value = [&](const char* flag) { return flag_value(argv[i], flag); };
    if (const char* v = value("--model=")) {
      s.model = v;
    } else if (const char* v = value("--scopes=")) {
      s.scopes = split_list(v);
    } else if (const char* v = value("--batch=")) {
      s.batch = whole_number(v, 1, 1 << 20, "decoder train", "--batch");
    } else if (const char* v = value("--sequence=")) {
      s.sequence = whole_number(v, 1, 1 << 24, "decoder train", "--sequence");
    } else if (const char* v = value("--checkpointing=")) {
      s.checkpointing.clear();
      for (const std::string& x : split_list(v)) {
        if (x != "off" && x != "on") throw gpucmp::invalid_argument("decoder train: --checkpointing takes off and/or on, got '" + x + "'");
        s.checkpointing.push_back(x == "on");
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  const gpucmp::decoder_config model = gpucmp::decoder_preset(s.model);  // unknown names fail before anything runs
  if (s.scopes.empty() || s.checkpointing.empty()) throw gpucmp::invalid_argument("decoder train: --scopes and --checkpointing need a value");
  for (const std::string& scope : s.scopes) (void)gpucmp::plan_decoder_training_work(model, s.batch, s.sequence, training_scope(scope));
  return s;
}

inline void register_training_step(const train_settings& s, const std::string& scope, bool checkpointing) {
  gpucmp::decoder_training_options training = training_scope(scope);
  training.checkpointing = checkpointing;
  const std::string name = "decoder_train/" + s.model + "/bf16/" + scope + "/b" + std::to_string(s.batch) + "_s" +
                           std::to_string(s.sequence) + (checkpointing ? "/checkpointing" : "");
  gpucmp::register_benchmark_as(name + "/graph", gpucmp::mode::graph, [s, scope, training](gpucmp::state& st) {
    const gpucmp::decoder_config model = gpucmp::decoder_preset(s.model);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    gpucmp::decoder_trainer_options options;
    options.graphs = false;  // the engine captures the step itself
    gpucmp::decoder_trainer t(model, s.batch, s.sequence, training, options, st.stream());
    const bool whole = training.scope == gpucmp::decoder_training_scope::whole_model;
    t.step(st.stream());  // once before timing: it must give finite numbers
    const float first = whole ? t.loss(st.stream()) : 0.0f;
    const std::string probe = "layers.0.down";
    double squares = 0;
    for (float g : t.gradient(probe)) squares += double(g) * double(g);
    if (!std::isfinite(first) || !std::isfinite(squares) || squares == 0) {
      throw gpucmp::invalid_argument(t.name() + ": the first step gave loss " + std::to_string(first) + " and " + probe +
                                     " a gradient of norm " + std::to_string(std::sqrt(squares)));
    }
    st.set_work(t.work().as_work(gpucmp::peak_precision(gpucmp::numerics::bf16)));
    st.set_axis("phase", "train");
    st.set_axis("model", s.model);
    st.set_axis("scope", scope);
    st.set_axis("batch", double(s.batch));
    st.set_axis("sequence", double(s.sequence));
    st.set_axis("checkpointing", training.checkpointing ? "on" : "off");
    st.set_sweep_axis("batch");
    st.set_provider("gpucmp");
    st.add_note("attention backward: " + t.attention_operation().algorithm().describe());
    st.run([&t](cudaStream_t stream) { t.step(stream); });
    auto& c = st.gbench().counters;
    c["memory_gb"] = t.allocated_bytes() * 1e-9;
    c["planned_gb"] = gpucmp::plan_decoder_training_memory(model, s.batch, s.sequence, training).total() * 1e-9;
    c["largest_batch"] = double(gpucmp::largest_decoder_training_batch(model, s.sequence, double(free_bytes), training));
    if (whole) {
      c["loss_first"] = first;
      c["loss_last"] = t.loss(st.stream());
    }
  });
}

}  // namespace detail

/// `decoder train ...` (file comment): registers the rows and runs Google Benchmark's main.
inline int decoder_train_main(int argc, char** argv, const char* architectures) {
  detail::train_settings s;
  try {
    s = detail::parse_train_flags(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  for (const std::string& scope : s.scopes) {
    for (bool checkpointing : s.checkpointing) detail::register_training_step(s, scope, checkpointing);
  }
  return gpucmp::benchmark_main(argc, argv, architectures);
}

}  // namespace gpucmp_bench
