// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Attention sweep, forward and backward: cuDNN's fused attention through gpucmp's verified
// operation (ops/attention.cuh), each row's plan searched and its output checked before it is
// timed. Names: attention/cudnn/<dtype>/b<batch>_s<seq>_h<q heads>[+<kv heads>]_d<head dim>/
// <mask>[/bwd]/graph; a backward row times dQ, dK and dV from a forward's O and statistics.
// Shapes: the transformer building blocks issue's (batch 1 x 8192, 4 x 4096, 16 x 1024 tokens,
// 32 heads of 128, causal and full, BF16 and FP16; FP8 forward and backward on those three), grouped-query
// attention (Llama-3-8B's 32
// query heads over 8 KV heads), head sizes 64 and 256 at the same width (4096). Causal FLOPs
// are counted as half the square (attention_problem::flops_convention; every row's axes say
// so), a backward's as 2.5 times its forward's. scripts/peers/torch_attention.py times PyTorch
// on the same shapes. Decode rows (one query a sequence, batch 1 to 64, context 1k to 32k,
// K and V in a paged cache: .../full/paged64) sit beside copy/kernel/<bytes> rows for
// scripts/bandwidth-fraction.py --match paged. Prefill of 16 prompts of different lengths,
// padded (.../q<tokens>tokens/kv<tokens>tokens) and packed (.../packed).
#include "copy_rows.hpp"
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/attention.cuh>

#include <cudnn.h>

#include <cstdint>
#include <string>

namespace {

void register_attention(const gpucmp::attention_problem& p) {
  gpucmp::register_benchmark("attention/cudnn/" + p.name(),
                             [p](gpucmp::state& st) {
                               gpucmp::attention op(p, {}, st.stream());
                               gpucmp::run_verified(st, op);
                             },
                             {gpucmp::mode::graph});
}

// A self-attention shape of the sweep.
struct shape {
  std::int64_t batch, seq, q_heads, kv_heads, head_dim;
};

gpucmp::attention_problem problem_of(const shape& s, gpucmp::numerics t, gpucmp::attention_mask mask,
                                     gpucmp::attention_pass pass) {
  gpucmp::attention_problem p;
  p.batch = s.batch;
  p.seq_q = p.seq_kv = s.seq;
  p.q_heads = s.q_heads;
  p.kv_heads = s.kv_heads;
  p.head_dim = s.head_dim;
  p.dtype = t;
  p.mask = mask;
  p.pass = pass;
  return p;
}

const bool registered = [] {
  gpucmp_bench::add_version_context("cudnn_version", cudnnGetVersion());
  const shape shapes[] = {{1, 8192, 32, 32, 128}, {4, 4096, 32, 32, 128}, {16, 1024, 32, 32, 128},
                          {4, 4096, 32, 8, 128},  {4, 4096, 64, 64, 64},   {4, 4096, 16, 16, 256}};
  const gpucmp::attention_mask masks[] = {gpucmp::attention_mask::causal, gpucmp::attention_mask::none};
  for (gpucmp::numerics t : {gpucmp::numerics::bf16, gpucmp::numerics::fp16}) {
    for (gpucmp::attention_mask mask : masks) {
      for (gpucmp::attention_pass pass : {gpucmp::attention_pass::forward, gpucmp::attention_pass::backward}) {
        for (const shape& s : shapes) register_attention(problem_of(s, t, mask, pass));
      }
    }
  }
  // Decode against a paged KV cache (pages of 64 tokens, shuffled), Llama-3-8B's heads, one
  // query a sequence: bytes of K and V read against a copy of the same bytes in the same run.
  for (std::int64_t batch : {1, 8, 64}) {
    for (std::int64_t context : {1024, 4096, 16384, 32768}) {
      gpucmp::attention_problem p;
      p.batch = batch;
      p.seq_q = 1;
      p.seq_kv = context;
      p.mask = gpucmp::attention_mask::none;
      p.page_size = 64;
      register_attention(p);
      gpucmp_bench::register_copy_for(p.work());
    }
  }
  // Prefill of a serving batch: 16 prompts of 256 to 4,096 tokens (every sixteenth of 4,096,
  // shuffled), causal, Llama-3-8B's heads; padded to the longest (the padding mask skips the
  // rest) and packed back to back (ragged offsets): what padding costs, and what packing saves.
  for (bool packed : {false, true}) {
    gpucmp::attention_problem p;
    p.batch = 16;
    p.seq_q = p.seq_kv = 4096;
    p.mask = gpucmp::attention_mask::causal;
    for (std::int64_t b = 0; b < p.batch; ++b) p.q_lengths.push_back(4096 * (1 + (b * 7) % 16) / 16);
    p.kv_lengths = p.q_lengths;
    p.packed = packed;
    register_attention(p);
  }
  // FP8 forward and backward (Hopper on): the issue's three shapes, causal and full, beside BF16's.
  for (gpucmp::attention_mask mask : masks) {
    for (gpucmp::attention_pass pass : {gpucmp::attention_pass::forward, gpucmp::attention_pass::backward}) {
      for (const shape& s : {shapes[0], shapes[1], shapes[2]}) {
        register_attention(problem_of(s, gpucmp::numerics::fp8_e4m3, mask, pass));
      }
    }
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
