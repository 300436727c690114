// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A decoder step's work on the host: Llama-3-8B's decode bytes and FLOPs at context 2k (every
// linear weight, norm and the LM head once, the embedding rows of the step's tokens, the KV
// cache read and written, FP32 logits), its bandwidth roofline, prefill's FLOPs (causal as
// half the square, logits of the last token only), FP8 weights and a tied LM head, bad
// arguments named.
#include "catch.hpp"

#include <gpucmp/models/decoder_work.hpp>

TEST_CASE("a decode step moves its weights once and its sequences' KV cache", "[models][decoder]") {
  const gpucmp::decoder_config c = gpucmp::decoder_preset("llama-3-8b");
  const gpucmp::decoder_step_work w = gpucmp::decoder_decode_work(c, 1, 2048);
  // 32 blocks of 218,103,808 linear weights, 65 norms of 4096 and the 128256 x 4096 LM head, in BF16.
  CHECK(w.weight_bytes == 2.0 * (32.0 * 218103808 + 65.0 * 4096 + 128256.0 * 4096));
  CHECK(w.weight_bytes == 15009849344.0);
  CHECK(w.embedding_bytes == 4096.0 * 2);
  CHECK(w.kv_read_bytes == 131072.0 * 2048);  // K and V of 32 layers x 8 heads x 128, BF16
  CHECK(w.kv_write_bytes == 131072.0);
  CHECK(w.logits_bytes == 128256.0 * 4);
  CHECK(w.bytes() == 15278937088.0);
  CHECK(w.linear_flops == 2.0 * 32 * 218103808);
  CHECK(w.attention_flops == 4.0 * 32 * 32 * 128 * 2049);
  CHECK(w.lm_head_flops == 2.0 * 128256 * 4096);
  // At a 4,301 GB/s copy rate: 281 tokens a second (the whole embedding table, which a step
  // never reads, would make it 263).
  CHECK(gpucmp::roofline_tokens_per_second(w, 4301e9) == Approx(281.4986).epsilon(1e-6));
  // Batch 16: the weights once, the KV cache sixteen times.
  const gpucmp::decoder_step_work b16 = gpucmp::decoder_decode_work(c, 16, 2048);
  CHECK(b16.bytes() == 15009849344.0 + 16 * (8192.0 + 131072.0 * 2049 + 128256.0 * 4));
  CHECK(gpucmp::roofline_tokens_per_second(b16, 4301e9) == Approx(3562.78).epsilon(1e-5));
  const gpucmp::work as = b16.as_work(gpucmp::precision::bf16);
  CHECK(as.items == 16);
  CHECK(as.bytes_read + as.bytes_written == b16.bytes());
  CHECK(as.flops == b16.flops());
}

TEST_CASE("a prefill step counts causal attention as half the square and the last token's logits", "[models][decoder]") {
  const gpucmp::decoder_config c = gpucmp::decoder_preset("llama-3-8b");
  const gpucmp::decoder_step_work w = gpucmp::decoder_prefill_work(c, 1, 4096);
  CHECK(w.tokens == 4096);
  CHECK(w.linear_flops == 2.0 * 32 * 218103808 * 4096);
  CHECK(w.attention_flops == 4.0 * 32 * 32 * 128 * 4096.0 * 4096 / 2);
  CHECK(w.lm_head_flops == 2.0 * 128256 * 4096);
  CHECK(w.flops() == 61573701828608.0);
  CHECK(w.kv_write_bytes == 131072.0 * 4096);
  CHECK(w.embedding_bytes == 4096.0 * 4096 * 2);
  const gpucmp::decoder_step_work b4 = gpucmp::decoder_prefill_work(c, 4, 512);
  CHECK(b4.tokens == 2048);
  CHECK(b4.lm_head_flops == 4 * 2.0 * 128256 * 4096);
  CHECK(b4.logits_bytes == 4 * 128256.0 * 4);
}

TEST_CASE("FP8 weights halve the linear layers' bytes; a tied LM head reads the embedding", "[models][decoder]") {
  const gpucmp::decoder_config c = gpucmp::decoder_preset("llama-3-8b");
  gpucmp::decoder_memory_options fp8;
  fp8.weights = gpucmp::numerics::fp8_e4m3;
  fp8.kv_cache = gpucmp::element_type::fp8_e4m3;
  const gpucmp::decoder_step_work w = gpucmp::decoder_decode_work(c, 1, 2048, fp8);
  CHECK(w.weight_bytes == 32.0 * 218103808 + 32 * 7 * 4 + 2.0 * (65.0 * 4096 + 128256.0 * 4096));
  CHECK(w.kv_read_bytes == 65536.0 * 2048);
  const gpucmp::decoder_config small = gpucmp::decoder_preset("llama-3.2-1b");
  REQUIRE(small.tied_embeddings);
  const gpucmp::decoder_step_work t = gpucmp::decoder_decode_work(small, 1, 0);
  CHECK(t.weight_bytes == 2.0 * (double(small.layers) * double(small.block_linear_parameters()) +
                                 double(small.norm_parameters()) + double(small.vocab_size) * double(small.hidden_size)));
  CHECK(t.kv_read_bytes == 0);
  CHECK(t.attention_flops == 4.0 * double(small.layers * small.heads * small.head_dim));
}

TEST_CASE("bad decoder steps are refused by name", "[models][decoder]") {
  const gpucmp::decoder_config c = gpucmp::decoder_preset("llama-3-8b");
  CHECK_THROWS_WITH(gpucmp::decoder_decode_work(c, 0, 10), GPUCMP_CONTAINS("decoder decode: batch must be positive, got 0"));
  CHECK_THROWS_WITH(gpucmp::decoder_decode_work(c, 1, -1), GPUCMP_CONTAINS("context must be 0 or positive, got -1"));
  CHECK_THROWS_WITH(gpucmp::decoder_prefill_work(c, 1, 0), GPUCMP_CONTAINS("decoder prefill: prompt must be positive, got 0"));
  CHECK_THROWS_WITH(gpucmp::decoder_prefill_work(c, -2, 8), GPUCMP_CONTAINS("decoder prefill: batch must be positive, got -2"));
  gpucmp::decoder_config broken = c;
  broken.kv_heads = 5;
  CHECK_THROWS_WITH(gpucmp::decoder_decode_work(broken, 1, 8), GPUCMP_CONTAINS("is not a multiple of kv_heads 5"));
  CHECK_THROWS_WITH(gpucmp::roofline_tokens_per_second(gpucmp::decoder_decode_work(c, 1, 8), 0),
                    GPUCMP_CONTAINS("the copy bandwidth must be positive"));
}
