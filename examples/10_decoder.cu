// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 10: your own decoder geometry as a benchmark. Describe it as Hugging Face's
// LlamaConfig does; gpucmp builds it (seeded random weights), searches and verifies every
// operation of a step, and times a prefill (time to first token) and a decode step (time per
// output token). Before that it prints how many sequences of a 4k context fit on each GPU.
//   10_decoder --benchmark_filter=decode
#include <gpucmp/bench.hpp>
#include <gpucmp/models/decoder.cuh>
#include <gpucmp/models/decoder_memory.hpp>
#include <gpucmp/models/decoder_work.hpp>
#include <gpucmp/specs/specs.hpp>
#include <cstdio>

namespace {

gpucmp::decoder_config my_decoder() {
  gpucmp::decoder_config c;
  c.name = "my-decoder-1b";
  c.hidden_size = 2048, c.layers = 16, c.heads = 16, c.kv_heads = 4, c.head_dim = 128;
  c.intermediate_size = 5632, c.vocab_size = 32000, c.max_positions = 4096, c.rope_theta = 10000;
  return c;
}

// One decoder for both rows: 8 sequences of up to 4,096 tokens.
gpucmp::decoder& model(cudaStream_t stream) {
  gpucmp::decoder_options o;
  o.max_batch = 8;
  o.max_context = 4096;
  static gpucmp::decoder d(my_decoder(), o, stream);
  return d;
}

// A prefill (tokens new tokens a sequence) or a decode step (one, after `context` cached).
void step(gpucmp::state& st, std::int64_t batch, std::int64_t tokens, bool decode, std::int64_t context) {
  gpucmp::decoder& d = model(st.stream());
  d.prepare(batch, tokens, decode, st.stream());  // every operation searched and verified
  const gpucmp::decoder_step_work w = decode ? gpucmp::decoder_decode_work(d.config(), batch, context)
                                             : gpucmp::decoder_prefill_work(d.config(), batch, tokens);
  st.set_work(w.as_work(gpucmp::precision::bf16));  // FLOPs, and the bytes it must move
  st.run([&](cudaStream_t s) { d.run_prepared(batch, tokens, decode, context, s); });
}
void prefill_2048(gpucmp::state& st) { step(st, 1, 2048, false, 0); }
void decode_batch8_context2048(gpucmp::state& st) { step(st, 8, 1, true, 2048); }

}  // namespace

GPUCMP_BENCHMARK(prefill_2048, gpucmp::mode::graph);
GPUCMP_BENCHMARK(decode_batch8_context2048, gpucmp::mode::graph);

int main(int argc, char** argv) {
  for (const char* gpu : {"l20", "l40s", "a100_80gb_sxm", "h100_sxm", "h200_sxm"}) {
    const double usable = gpucmp::usable_memory_bytes(*gpucmp::find_spec_by_key(gpu));
    std::printf("%-14s sequences of 4,096 tokens that fit: %lld\n", gpu,
                static_cast<long long>(gpucmp::largest_decoder_batch(my_decoder(), 4096, usable)));
  }
  return gpucmp::benchmark_main(argc, argv, GPUCMP_CUDA_ARCH_LIST);
}
