// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// benchmarks/decoder's train-check mode: gpucmp's training step (training/decoder_training.cuh)
// on a Hugging Face checkpoint and a fixed batch, what it computes written for the comparison
// with PyTorch autograd (scripts/models/decoder-training-vs-pytorch.py):
//   decoder train-check CONFIG.json WEIGHTS TOKENS.bin BATCH SEQUENCE STEPS LR OUT [checkpointing]
// CONFIG.json is the checkpoint's config.json; WEIGHTS a .safetensors file or a
// model.safetensors.index.json; TOKENS.bin BATCH x SEQUENCE little-endian int32 ids, each
// labelled with the next one in its sequence (the last with none), as transformers' loss
// shifts its labels. The whole model trains STEPS steps of AdamW (learning rate LR, torch's
// other defaults) on that batch. Writes OUT_gradients.safetensors (the first step's gradients)
// and OUT_weights.safetensors (the FP32 master weights after it), both in Hugging Face's names,
// and OUT.json, {"losses": each step's loss before its update, "batch", "sequence", "lr",
// "checkpointing"}. Exit status 1 on an error.
#pragma once

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/io/safetensors_writer.hpp>
#include <gpucmp/models/decoder_weights.hpp>
#include <gpucmp/training/decoder_training.cuh>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_bench {

/// `decoder train-check ...` (argv[0] the program, argv[1] "train-check"): the exit status.
inline int decoder_train_check_main(int argc, char** argv) {
  if (argc != 10 && !(argc == 11 && std::string(argv[10]) == "checkpointing")) {
    std::fprintf(stderr, "usage: decoder train-check CONFIG.json WEIGHTS TOKENS.bin BATCH SEQUENCE STEPS LR OUT [checkpointing]\n");
    return 1;
  }
  try {
    std::ifstream in(argv[2]);
    if (!in) throw gpucmp::invalid_argument(std::string(argv[2]) + ": cannot open the configuration");
    std::stringstream text;
    text << in.rdbuf();
    const gpucmp::decoder_config config = gpucmp::decoder_config_from_json(text.str(), argv[2], "checkpoint");
    const std::int64_t batch = std::stoll(argv[5]), sequence = std::stoll(argv[6]), steps = std::stoll(argv[7]);
    const double lr = std::stod(argv[8]);
    const std::string out = argv[9];
    if (batch < 1 || sequence < 2 || steps < 1) throw gpucmp::invalid_argument("decoder train-check: batch >= 1, sequence >= 2, steps >= 1");
    std::ifstream ids(argv[4], std::ios::binary);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch * sequence));
    ids.read(reinterpret_cast<char*>(tokens.data()), std::streamsize(tokens.size() * sizeof(std::int32_t)));
    if (!ids || ids.peek() != std::char_traits<char>::eof()) {
      throw gpucmp::invalid_argument(std::string(argv[4]) + ": not exactly " + std::to_string(tokens.size()) + " int32 token ids");
    }
    std::vector<std::int32_t> labels(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) labels[i] = (std::int64_t(i) + 1) % sequence == 0 ? -100 : tokens[i + 1];
    gpucmp::decoder_training_options what;
    what.scope = gpucmp::decoder_training_scope::whole_model;
    what.checkpointing = argc == 11;
    gpucmp::decoder_trainer_options options;
    options.adamw.learning_rate = lr;
    gpucmp::stream s;
    gpucmp::decoder_trainer t(config, batch, sequence, what, options, s.get());
    t.load(gpucmp::decoder_checkpoint::open(argv[3]), s.get());
    t.set_tokens(tokens, labels, s.get());
    std::vector<float> losses;
    for (std::int64_t step = 0; step < steps; ++step) {
      t.step(s.get());
      losses.push_back(t.loss(s.get()));
      if (step == 0) {
        gpucmp::write_safetensors(out + "_gradients.safetensors", t.checkpoint_tensors(true));
        gpucmp::write_safetensors(out + "_weights.safetensors", t.checkpoint_tensors(false));
      }
    }
    std::ofstream meta(out + ".json");
    meta << "{\"losses\": [";
    for (std::size_t i = 0; i < losses.size(); ++i) meta << (i ? ", " : "") << losses[i];
    meta << "], \"batch\": " << batch << ", \"sequence\": " << sequence << ", \"lr\": " << lr
         << ", \"checkpointing\": " << (what.checkpointing ? "true" : "false") << "}\n";
    if (!meta) throw gpucmp::invalid_argument(out + ".json: cannot write");
    std::printf("decoder train-check: %lld steps, loss %g -> %g; gradients and weights in %s_*.safetensors\n",
                static_cast<long long>(steps), losses.front(), losses.back(), out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decoder train-check: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace gpucmp_bench
