// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// Llama-style decoders on the host: the presets' exact parameter counts (Hugging Face's), bad
// configurations named, the memory plan's parts (weights per recipe, KV cache per token and in
// pages, a step's buffers, logits), the largest batch and longest context found exactly, and
// what CUDA shows on the spec database's GPUs.
#include "catch.hpp"

#include <gpucmp/models/decoder_memory.hpp>

#include <cmath>

namespace {
constexpr double GiB = 1073741824.0;
}

TEST_CASE("decoder presets have Hugging Face's parameter counts", "[models][decoder]") {
  CHECK(gpucmp::decoder_preset("llama-3-8b").parameters() == 8030261248);
  CHECK(gpucmp::decoder_preset("llama-3.1-8b").parameters() == 8030261248);
  CHECK(gpucmp::decoder_preset("llama-3.2-1b").parameters() == 1235814400);  // tied LM head
  CHECK(gpucmp::decoder_preset("llama-3-70b").parameters() == 70553706496);
  const gpucmp::decoder_config c = gpucmp::decoder_preset("llama-3.1-8b");
  CHECK(c.max_positions == 131072);
  CHECK(c.rope.factor == 8);
  CHECK_THROWS_WITH(gpucmp::decoder_preset("llama-2-7b"),
                    GPUCMP_CONTAINS("unknown decoder 'llama-2-7b' (presets: llama-3-8b, llama-3.1-8b, llama-3.2-1b, llama-3-70b)"));
  for (const auto& p : gpucmp::decoder_presets()) CHECK_NOTHROW(p.validate());
}

TEST_CASE("impossible decoders are refused by name", "[models][decoder]") {
  gpucmp::decoder_config c = gpucmp::decoder_preset("llama-3-8b");
  c.kv_heads = 5;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("decoder llama-3-8b: heads 32 is not a multiple of kv_heads 5"));
  c.kv_heads = 0;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("kv_heads must be positive, got 0"));
  c = gpucmp::decoder_preset("llama-3-8b");
  c.head_dim = 127;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("head_dim 127 must be even"));
  c.head_dim = 128;
  c.norm_eps = 0;
  CHECK_THROWS_WITH(c.validate(), GPUCMP_CONTAINS("norm_eps must be positive"));
}

TEST_CASE("a decoder's memory plan, part by part", "[models][decoder]") {
  const gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3-8b");
  gpucmp::decoder_memory_options o;
  gpucmp::decoder_memory_plan p = gpucmp::plan_decoder_memory(m, 4, 2048, o);
  CHECK(p.weight_bytes == 8030261248.0 * 2);
  CHECK(p.kv_bytes_per_token == 131072);  // 2 (K, V) x 32 layers x 8 heads x 128 x 2 bytes
  CHECK(p.kv_cache_bytes == 131072.0 * 2048 * 4);
  // A step of 8,192 tokens (4 x 2,048): residual and normed input, then the larger half
  // (gate, up and SwiGLU's output: 3 x 14,336, over Q/K/V and attention's 10,240).
  CHECK(p.activation_bytes == 8192.0 * (2 * 4096 + 3 * 14336) * 2);
  CHECK(p.logits_bytes == 4.0 * 128256 * 4);
  CHECK(p.workspace_bytes == 64.0 * 1048576);
  CHECK(p.total() == p.weight_bytes + p.kv_cache_bytes + p.activation_bytes + p.logits_bytes + p.workspace_bytes);
  // One short sequence: the step is its tokens only.
  CHECK(gpucmp::plan_decoder_memory(m, 1, 100, o).activation_bytes == 100.0 * (2 * 4096 + 3 * 14336) * 2);
  // FP8 weights: the blocks' linear layers in one byte (and a scale each), the rest in BF16.
  o.weights = gpucmp::numerics::fp8_e4m3;
  const double linear = 32.0 * m.block_linear_parameters();
  CHECK(gpucmp::plan_decoder_memory(m, 1, 1, o).weight_bytes == linear + 32 * 7 * 4 + (8030261248.0 - linear) * 2);
  // An FP8 cache, paged: whole pages of 64 tokens (1,000 tokens take 16 pages).
  o.kv_cache = gpucmp::element_type::fp8_e4m3;
  o.page_tokens = 64;
  p = gpucmp::plan_decoder_memory(m, 3, 1000, o);
  CHECK(p.kv_bytes_per_token == 65536);
  CHECK(p.kv_cache_bytes == 65536.0 * 1024 * 3);
  o.kv_cache = gpucmp::element_type::int8;
  CHECK_THROWS_AS(gpucmp::plan_decoder_memory(m, 1, 1, o), gpucmp::unsupported);
  o.kv_cache = gpucmp::element_type::bf16;
  o.weights = gpucmp::numerics::tf32;
  CHECK_THROWS_WITH(gpucmp::plan_decoder_memory(m, 1, 1, o), GPUCMP_CONTAINS("does not run tf32"));
  CHECK_THROWS_WITH(gpucmp::plan_decoder_memory(m, 0, 1, {}), GPUCMP_CONTAINS("batch must be positive, got 0"));
  CHECK_THROWS_WITH(gpucmp::plan_decoder_memory(m, 1, -2, {}), GPUCMP_CONTAINS("context must be positive, got -2"));
}

TEST_CASE("the largest batch and the longest context are the edges of what fits", "[models][decoder]") {
  const gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3.1-8b");
  const double capacity = 70 * GiB;
  const std::int64_t batch = gpucmp::largest_decoder_batch(m, 8192, capacity);
  REQUIRE(batch > 1);
  CHECK(gpucmp::plan_decoder_memory(m, batch, 8192).total() <= capacity);
  CHECK(gpucmp::plan_decoder_memory(m, batch + 1, 8192).total() > capacity);
  const std::int64_t context = gpucmp::longest_decoder_context(m, 16, capacity);
  REQUIRE(context > 1);
  REQUIRE(context < m.max_positions);
  CHECK(gpucmp::plan_decoder_memory(m, 16, context).total() <= capacity);
  CHECK(gpucmp::plan_decoder_memory(m, 16, context + 1).total() > capacity);
  CHECK(gpucmp::longest_decoder_context(m, 1, 1000 * GiB) == m.max_positions);  // the model's own limit
  CHECK(gpucmp::largest_decoder_batch(m, 8192, 10 * GiB) == 0);                 // 15 GiB of weights
  CHECK(gpucmp::longest_decoder_context(m, 1, 10 * GiB) == 0);
}

TEST_CASE("what CUDA shows on the database's GPUs, and Llama 3 70B in BF16 on one of them", "[models][decoder]") {
  const gpucmp::gpu_profile h200 = *gpucmp::find_spec_by_key("h200_sxm");
  const gpucmp::gpu_profile h100 = *gpucmp::find_spec_by_key("h100_sxm");
  const gpucmp::gpu_profile l40s = *gpucmp::find_spec_by_key("l40s");
  CHECK(h200.visible_memory_bytes == 141 * GiB);  // our H200 showed 139.8 GiB: within 1 %
  CHECK(std::fabs(h200.visible_memory_bytes / 150109880320.0 - 1) < 0.01);
  CHECK(l40s.visible_memory_bytes == 45 * GiB);  // 48 GB of GDDR6, ECC inline
  CHECK(gpucmp::usable_memory_bytes(h100) == 78 * GiB);
  CHECK(gpucmp::usable_memory_bytes(h100, 0) == 80 * GiB);
  const gpucmp::decoder_config big = gpucmp::decoder_preset("llama-3-70b");  // 131 GiB of BF16 weights
  CHECK(gpucmp::largest_decoder_batch(big, 8192, gpucmp::usable_memory_bytes(h100)) == 0);
  CHECK(gpucmp::largest_decoder_batch(big, 8192, gpucmp::usable_memory_bytes(h200)) >= 1);
  gpucmp::decoder_memory_options fp8;
  fp8.weights = gpucmp::numerics::fp8_e4m3;
  CHECK(gpucmp::largest_decoder_batch(big, 8192, gpucmp::usable_memory_bytes(h100), fp8) >= 1);
  gpucmp::device_facts d;
  d.name = "Some Future GPU";
  d.memory_bytes = 200e9;
  CHECK(gpucmp::spec_for_device(d).visible_memory_bytes == 200e9);  // derived: the device's own figure
}
