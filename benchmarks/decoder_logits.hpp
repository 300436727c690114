// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// benchmarks/decoder's logits mode: gpucmp's decoder (models/decoder.cuh) on a Hugging Face
// checkpoint, its logits written for the comparison with transformers
// (scripts/models/decoder-vs-transformers.py):
//   decoder logits CONFIG.json WEIGHTS DTYPE PROMPT STEPS OUT
// CONFIG.json is the checkpoint's config.json; WEIGHTS a .safetensors file or a
// model.safetensors.index.json; DTYPE bf16 or fp16; PROMPT comma-separated token ids (one
// sequence); STEPS greedy decode steps after the prompt. Writes OUT.bin, (STEPS + 1) x vocab
// little-endian float32 logits (after the prompt, then after each step's token), and OUT.json,
// {"tokens": the greedy tokens, "vocab", "steps", "dtype", "algorithms"}. Every operation is
// verified on its own tensors before the model runs. Exit status 1 on an error.
#pragma once

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/decoder.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp_bench {
namespace detail {

// The logits of sequence 0 as float.
template <class T>
std::vector<float> logits_of(const gpucmp::decoder& d) {
  const std::size_t vocab = std::size_t(d.config().vocab_size);
  std::vector<T> stored(vocab);
  GPUCMP_CUDA_CHECK(cudaMemcpy(stored.data(), d.logits(), vocab * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> out(vocab);
  for (std::size_t i = 0; i < vocab; ++i) out[i] = float(gpucmp::to_double(stored[i]));
  return out;
}

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

}  // namespace detail

/// `decoder logits ...` (argv[0] the program, argv[1] "logits"): the exit status.
inline int decoder_logits_main(int argc, char** argv) {
  using detail::json_string;
  using detail::logits_of;
  if (argc != 8) {
    std::fprintf(stderr, "usage: decoder logits CONFIG.json WEIGHTS DTYPE PROMPT STEPS OUT\n");
    return 1;
  }
  ++argv;  // past "logits": argv[1] is CONFIG.json
  try {
    std::ifstream in(argv[1]);
    if (!in) throw gpucmp::invalid_argument(std::string(argv[1]) + ": cannot open the configuration");
    std::stringstream text;
    text << in.rdbuf();
    const gpucmp::decoder_config config = gpucmp::decoder_config_from_json(text.str(), argv[1], "checkpoint");
    const gpucmp::numerics dtype = gpucmp::parse_numerics(argv[3]);
    std::vector<std::int32_t> prompt;
    std::stringstream ids(argv[4]);
    for (std::string id; std::getline(ids, id, ',');) prompt.push_back(std::int32_t(std::stol(id)));
    const long steps = std::stol(argv[5]);
    if (prompt.empty() || steps < 0) throw gpucmp::invalid_argument("decoder logits: a prompt of one token or more and steps >= 0");
    gpucmp::decoder_options o;
    o.dtype = dtype;
    o.max_batch = 1;
    o.max_context = std::int64_t(prompt.size()) + steps;
    gpucmp::stream s;
    gpucmp::decoder d(config, o, s.get());
    d.load(gpucmp::decoder_checkpoint::open(argv[2]), s.get());
    std::vector<std::vector<float>> logits;
    std::vector<std::int32_t> tokens;
    auto take = [&] {
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(s.get()));
      logits.push_back(dtype == gpucmp::numerics::fp16 ? logits_of<__half>(d) : logits_of<__nv_bfloat16>(d));
      const auto& l = logits.back();
      tokens.push_back(std::int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
    };
    d.prefill(prompt, 1, std::int64_t(prompt.size()), s.get());
    take();
    for (long step = 0; step < steps; ++step) {
      d.decode({tokens.back()}, 1, std::int64_t(prompt.size()) + step, s.get());
      take();
    }
    const std::string out = argv[6];
    std::ofstream bin(out + ".bin", std::ios::binary);
    for (const auto& l : logits) bin.write(reinterpret_cast<const char*>(l.data()), std::streamsize(l.size() * sizeof(float)));
    if (!bin) throw gpucmp::invalid_argument(out + ".bin: cannot write the logits");
    std::ofstream meta(out + ".json");
    meta << "{\"tokens\": [";
    for (std::size_t i = 0; i < tokens.size(); ++i) meta << (i ? ", " : "") << tokens[i];
    meta << "], \"vocab\": " << config.vocab_size << ", \"steps\": " << steps << ", \"dtype\": " << json_string(argv[3])
         << ", \"algorithms\": [";
    const std::vector<std::string> prefill = d.algorithms(1, std::int64_t(prompt.size()), false);
    for (std::size_t i = 0; i < prefill.size(); ++i) meta << (i ? ", " : "") << json_string("prefill " + prefill[i]);
    meta << "]}\n";
    if (!meta) throw gpucmp::invalid_argument(out + ".json: cannot write");
    std::printf("decoder logits: %zu logits rows written to %s.bin\n", logits.size(), out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decoder logits: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace gpucmp_bench
