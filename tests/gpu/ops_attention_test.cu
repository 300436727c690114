// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuDNN's fused attention forward: every plan of BF16, FP16 and FP8, causal and full masks, head
// sizes 64, 128 and 256, multi-head and grouped-query, sequence lengths that are not tile
// multiples, verified against the double reference; a corrupted output is caught and located;
// a search keeps a verified plan; the backward's dQ, dK and dV (BF16, FP16 and FP8) against the
// FP64 GPU reference at the same shapes and a long GQA sequence; padded, packed and paged
// serving batches; gpucmp's split-KV decode kernel at every chunk size (bad problems:
// tests/unit/transformer_problems_test.cpp).
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/attention.cuh>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

// Runs every plan of `op` once and checks it; each must pass and compare `outputs` values.
void check_every_plan(gpucmp::attention& op, gpucmp::stream& s, std::size_t outputs) {
  REQUIRE(op.candidate_count() >= 1);
  for (std::size_t i = 0; i < op.candidate_count(); ++i) {
    op.select(i, s.get());
    const gpucmp::verification v = op.verify(s.get());
    INFO(op.name() << " with " << op.describe_candidate(i) << ": " << v.summary());
    CHECK(v.passed());
    CHECK(v.checked == outputs);
  }
}

}  // namespace

TEST_CASE("attention: every plan matches the double reference", "[gpu][ops][attention]") {
  gpucmp::stream s;
  gpucmp::attention_options options;
  options.max_plans = 4;
  for (gpucmp::numerics t : {gpucmp::numerics::bf16, gpucmp::numerics::fp16}) {
    for (gpucmp::attention_mask mask : {gpucmp::attention_mask::causal, gpucmp::attention_mask::none}) {
      for (std::int64_t d : {64, 128, 256}) {
        for (std::int64_t kv_heads : {8, 2}) {
          gpucmp::attention_problem p;
          p.batch = 2;
          p.q_heads = 8;
          p.kv_heads = kv_heads;
          p.seq_q = p.seq_kv = d == 128 ? 333 : 256;  // 333: not a multiple of any tile
          p.head_dim = d;
          p.dtype = t;
          p.mask = mask;
          gpucmp::attention op(p, options, s.get());
          check_every_plan(op, s, std::size_t(2 * op.sampled_positions().size() * 8 * d));
        }
      }
    }
  }
}

TEST_CASE("attention FP8: every plan matches the double reference, O descaled", "[gpu][ops][attention][fp8]") {
  gpucmp::stream s;
  if (gpucmp::query_current_device().cc_major < 9) {
    WARN("not run: cuDNN's FP8 attention needs Hopper or later");
    return;
  }
  gpucmp::attention_options options;
  options.max_plans = 4;
  for (gpucmp::attention_mask mask : {gpucmp::attention_mask::causal, gpucmp::attention_mask::none}) {
    for (std::int64_t d : {64, 128}) {
      for (std::int64_t kv_heads : {8, 2}) {
        gpucmp::attention_problem p;
        p.batch = 2;
        p.q_heads = 8;
        p.kv_heads = kv_heads;
        p.seq_q = p.seq_kv = d == 128 ? 1000 : 512;  // 1000: not a multiple of any tile
        p.head_dim = d;
        p.dtype = gpucmp::numerics::fp8_e4m3;
        p.mask = mask;
        gpucmp::attention op(p, options, s.get());
        check_every_plan(op, s, std::size_t(2 * op.sampled_positions().size() * 8 * d));
      }
    }
  }
}

TEST_CASE("attention: a corrupted output is caught and located; a search keeps a verified plan", "[gpu][ops][attention]") {
  gpucmp::stream s;
  gpucmp::attention_problem p;
  p.batch = 1;
  p.seq_q = p.seq_kv = 1024;
  gpucmp::attention op(p, {}, s.get());
  const gpucmp::prepared_operation prepared = gpucmp::prepare_verified(op);
  REQUIRE(prepared.search.has_value());
  CHECK(prepared.check.passed());
  CHECK(op.algorithm().chosen_by == gpucmp::algorithm_choice::search);
  CHECK(op.search_log().size() >= 1);
  // Position 0 sees only key 0, so its output is V's row 0: set head 3's element 5 far off.
  const std::uint16_t big = 0x4700;  // BF16 32768
  REQUIRE(cudaMemcpy(static_cast<char*>(op.output()) + (3 * 128 + 5) * 2, &big, 2, cudaMemcpyHostToDevice) == cudaSuccess);
  const gpucmp::verification v = op.check_output();
  CHECK(v.failed == 1);
  CHECK(v.worst_where == "batch 0, position 0, head 3, element 5");
}

TEST_CASE("attention run_on: the chosen plan on the caller's tensors, forward and backward", "[gpu][ops][attention]") {
  gpucmp::stream s;
  gpucmp::attention_problem p;
  p.batch = 2;
  p.q_heads = 8;
  p.kv_heads = 2;
  p.seq_q = p.seq_kv = 333;
  const std::size_t q_bytes = std::size_t(2 * 333 * 8 * 128) * 2, kv_bytes = std::size_t(2 * 333 * 2 * 128) * 2;
  auto buffer = [](std::size_t bytes) { return gpucmp::device_buffer<unsigned char>(bytes, gpucmp::initial_fill::poison()); };
  auto copy = [](void* to, const void* from, std::size_t bytes) {
    REQUIRE(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
  };
  {  // Forward: the caller's Q, K, V and O; O lands in the caller's, and is right.
    gpucmp::attention op(p, {}, s.get());
    REQUIRE(op.verify(s.get()).passed());
    auto q = buffer(q_bytes), k = buffer(kv_bytes), v = buffer(kv_bytes), o = buffer(q_bytes);
    const gpucmp::attention_tensors own = op.tensors();
    copy(q.data(), own.q, q_bytes);
    copy(k.data(), own.k, kv_bytes);
    copy(v.data(), own.v, kv_bytes);
    REQUIRE(cudaMemset(op.output(), 0xFF, q_bytes) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
    op.run_on({q.data(), k.data(), v.data(), o.data()}, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    CHECK_FALSE(op.check_output().passed());  // its own O untouched
    copy(op.output(), o.data(), q_bytes);
    CHECK(op.check_output().passed());
    REQUIRE(cudaMemset(v.data(), 0, kv_bytes) == cudaSuccess);  // the caller's V, not its own, is read
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
    op.run_on({q.data(), k.data(), v.data(), o.data()}, s.get());
    copy(op.output(), o.data(), q_bytes);
    CHECK_FALSE(op.check_output().passed());
    CHECK_THROWS_WITH(op.run_on({q.data(), nullptr, v.data(), o.data()}, s.get()), GPUCMP_CONTAINS("needs tensor 'k'"));
  }
  {  // Backward: its own inputs, the caller's dQ, dK and dV.
    p.pass = gpucmp::attention_pass::backward;
    gpucmp::attention op(p, {}, s.get());
    REQUIRE(op.verify(s.get()).passed());
    gpucmp::attention_tensors t = op.tensors();
    auto dq = buffer(q_bytes), dk = buffer(kv_bytes), dv = buffer(kv_bytes);
    t.dq = dq.data();
    t.dk = dk.data();
    t.dv = dv.data();
    for (const char* g : {"dq", "dk", "dv"}) REQUIRE(cudaMemset(op.gradient(g), 0xFF, g[1] == 'q' ? q_bytes : kv_bytes) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
    op.run_on(t, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    copy(op.gradient("dq"), dq.data(), q_bytes);
    copy(op.gradient("dk"), dk.data(), kv_bytes);
    copy(op.gradient("dv"), dv.data(), kv_bytes);
    CHECK(op.check_output().passed());
    t.stats = nullptr;
    CHECK_THROWS_WITH(op.run_on(t, s.get()), GPUCMP_CONTAINS("needs tensor 'stats'"));
  }
}

TEST_CASE("attention backward: every plan's dQ, dK and dV match the FP64 reference", "[gpu][ops][attention][backward]") {
  gpucmp::stream s;
  gpucmp::attention_options options;
  options.max_plans = 4;
  for (gpucmp::numerics t : {gpucmp::numerics::bf16, gpucmp::numerics::fp16}) {
    for (gpucmp::attention_mask mask : {gpucmp::attention_mask::causal, gpucmp::attention_mask::none}) {
      for (std::int64_t d : {64, 128, 256}) {
        for (std::int64_t kv_heads : {8, 2}) {
          gpucmp::attention_problem p;
          p.pass = gpucmp::attention_pass::backward;
          p.batch = 2;
          p.q_heads = 8;
          p.kv_heads = kv_heads;
          p.seq_q = p.seq_kv = d == 128 ? 333 : 256;  // 333: not a multiple of any tile
          p.head_dim = d;
          p.dtype = t;
          p.mask = mask;
          gpucmp::attention op(p, options, s.get());
          const std::size_t positions = gpucmp::attention_sampled_positions(p.seq_q).size();
          // O and dQ (8 query heads each), dK and dV (kv_heads each), both batches.
          check_every_plan(op, s, std::size_t(2 * positions * d * (8 + 8 + 2 * kv_heads)));
        }
      }
    }
  }
}

TEST_CASE("attention FP8 backward: every plan's dQ, dK and dV match the FP64 reference, descaled",
          "[gpu][ops][attention][backward][fp8]") {
  gpucmp::stream s;
  if (gpucmp::query_current_device().cc_major < 9) {
    WARN("not run: cuDNN's FP8 attention needs Hopper or later");
    return;
  }
  gpucmp::attention_options options;
  options.max_plans = 4;
  for (gpucmp::attention_mask mask : {gpucmp::attention_mask::causal, gpucmp::attention_mask::none}) {
    for (std::int64_t kv_heads : {8, 2}) {
      for (std::int64_t seq : {1152, 4096}) {  // 1152: 9 tiles of 128, not a power of two
        gpucmp::attention_problem p;
        p.pass = gpucmp::attention_pass::backward;
        p.dtype = gpucmp::numerics::fp8_e4m3;
        p.batch = 2;
        p.q_heads = 8;
        p.kv_heads = kv_heads;
        p.seq_q = p.seq_kv = seq;
        p.mask = mask;
        gpucmp::attention op(p, options, s.get());
        const std::size_t positions = gpucmp::attention_sampled_positions(p.seq_q).size();
        check_every_plan(op, s, std::size_t(2 * positions * 128 * (8 + 8 + 2 * kv_heads)));
        // The calibrated scales are powers of two, and lift gradients this small clear of E4M3's subnormals.
        const gpucmp::attention_gradient_scales& g = op.gradient_scales();
        INFO("scales: dS " << g.ds << ", dQ " << g.dq << ", dK " << g.dk << ", dV " << g.dv);
        CHECK(g.o == gpucmp::attention_fp8_o_scale);
        for (double scale : {g.ds, g.dq, g.dk, g.dv}) {
          CHECK(scale > 1);
          CHECK(std::exp2(std::round(std::log2(scale))) == scale);
        }
      }
    }
  }
  if (gpucmp::query_current_device().cc_major == 9) {  // Hopper's FP8 backward takes head_dim 128 only
    gpucmp::attention_problem p;
    p.pass = gpucmp::attention_pass::backward;
    p.dtype = gpucmp::numerics::fp8_e4m3;
    p.seq_q = p.seq_kv = 256;
    p.head_dim = 64;
    CHECK_THROWS_AS(gpucmp::attention(p, options, s.get()), gpucmp::unsupported);
    p.head_dim = 128;
    p.seq_q = p.seq_kv = 1000;  // a partial tile: refused before cuDNN leaves its dQ rows unwritten
    CHECK_THROWS_AS(gpucmp::attention(p, options, s.get()), gpucmp::unsupported);
  }
}

TEST_CASE("attention backward: a long causal GQA sequence; a corrupted dK is caught and located",
          "[gpu][ops][attention][backward]") {
  gpucmp::stream s;
  gpucmp::attention_problem p;
  p.pass = gpucmp::attention_pass::backward;
  p.batch = 1;
  p.seq_q = p.seq_kv = 4096;  // 32 query heads over 8 KV heads, d 128
  gpucmp::attention op(p, {}, s.get());
  const gpucmp::prepared_operation prepared = gpucmp::prepare_verified(op);
  REQUIRE(prepared.search.has_value());
  INFO(prepared.check.summary());
  CHECK(prepared.check.passed());
  // The last key is seen by the last query alone (of each of its group's 4 heads), so dK there
  // is small: set KV head 7's element 9 far off.
  const std::uint16_t big = 0x4700;  // BF16 32768
  char* dk = static_cast<char*>(op.gradient("dk"));
  REQUIRE(cudaMemcpy(dk + ((4095 * 8 + 7) * 128 + 9) * 2, &big, 2, cudaMemcpyHostToDevice) == cudaSuccess);
  const gpucmp::verification v = op.check_output();
  CHECK(v.failed == 1);
  CHECK(v.worst_where == "dK batch 0, position 4095, head 7, element 9");
  CHECK_THROWS_AS(op.gradient("do"), gpucmp::invalid_argument);
}

TEST_CASE("attention decode: gpucmp's split-KV kernel matches the reference at every chunk size, twice in a row",
          "[gpu][ops][attention][paged]") {
  gpucmp::stream s;
  gpucmp::attention_options options;
  options.max_plans = 1;
  for (gpucmp::numerics t : {gpucmp::numerics::bf16, gpucmp::numerics::fp16}) {
    for (std::int64_t d : {64, 128, 256}) {
      for (std::int64_t kv_heads : {8, 4, 2, 1}) {  // 1, 2, 4 and 8 query heads a KV head
        for (std::int64_t page_size : {0, 64, 16}) {  // contiguous, pages of 64 and 16 keys
          const bool paged = page_size > 0;
          gpucmp::attention_problem p;
          p.batch = 2;
          p.q_heads = 8;
          p.kv_heads = kv_heads;
          p.seq_q = 1;
          p.seq_kv = 777;
          p.head_dim = d;
          p.dtype = t;
          p.mask = gpucmp::attention_mask::none;
          p.kv_lengths = std::vector<std::int64_t>{777, 1};  // chunks merged, the last cut short; one key
          p.page_size = page_size;
          gpucmp::attention op(p, options, s.get());
          std::size_t kernels = 0;
          for (std::size_t i = 0; i < op.candidate_count(); ++i) {
            if (op.candidate_group(i) != 1) continue;
            ++kernels;
            op.select(i, s.get());
            CHECK(op.provider() == "gpucmp");
            for (int call = 0; call < 2; ++call) {  // each call leaves its arrival counts at zero for the next
              const gpucmp::verification v = op.verify(s.get());
              INFO(op.name() << (paged ? " pages of " + std::to_string(page_size) : std::string(" contiguous")) << " with "
                             << op.describe_candidate(i) << ", call " << call << ": " << v.summary());
              CHECK(v.passed());
              CHECK(v.checked == std::size_t(2 * 8 * d));  // both sequences, every head
            }
          }
          CHECK(kernels == gpucmp::decode_attention_chunks(p).size());
          CHECK(kernels == 6);  // 32, 64, 128, 256 and 512 keys a block, and the whole sequence
        }
      }
    }
  }
}

TEST_CASE("attention serving: padded lengths and paged K and V match the double reference", "[gpu][ops][attention][paged]") {
  gpucmp::stream s;
  gpucmp::attention_options options;
  options.max_plans = 4;
  for (gpucmp::numerics t : {gpucmp::numerics::bf16, gpucmp::numerics::fp16}) {
    // Decode against a paged cache: one query a sequence, lengths that end inside a page.
    gpucmp::attention_problem decode;
    decode.batch = 4;
    decode.q_heads = 8;
    decode.kv_heads = 2;
    decode.seq_q = 1;
    decode.seq_kv = 1000;
    decode.mask = gpucmp::attention_mask::none;
    decode.dtype = t;
    decode.page_size = 64;
    decode.kv_lengths = {1000, 17, 500, 999};
    // Prefill of a padded batch, causal, K and V contiguous.
    gpucmp::attention_problem padded;
    padded.batch = 3;
    padded.q_heads = 8;
    padded.kv_heads = 8;
    padded.seq_q = padded.seq_kv = 333;
    padded.dtype = t;
    padded.kv_lengths = {333, 100, 7};
    for (const gpucmp::attention_problem& p : {decode, padded}) {
      gpucmp::attention op(p, options, s.get());
      check_every_plan(op, s, std::size_t(2 * op.sampled_positions().size() * 8 * 128));
    }
    // Prefill of prompts of different lengths, causal, grouped-query: padded to the longest,
    // then packed back to back (ragged offsets), then packed queries against a paged cache.
    gpucmp::attention_problem prompts;
    prompts.batch = 4;
    prompts.q_heads = 8;
    prompts.kv_heads = 2;
    prompts.seq_q = prompts.seq_kv = 517;
    prompts.dtype = t;
    prompts.q_lengths = prompts.kv_lengths = {200, 517, 1, 333};
    gpucmp::attention_problem packed = prompts;
    packed.packed = true;
    gpucmp::attention_problem packed_paged = packed;
    packed_paged.page_size = 64;
    for (const gpucmp::attention_problem& p : {prompts, packed, packed_paged}) {
      gpucmp::attention op(p, options, s.get());
      std::size_t outputs = 0;
      for (std::int64_t b : op.checked_sequences()) outputs += op.sampled_positions(b).size() * 8 * 128;
      CHECK(outputs == (16 + 16) * 8 * 128);  // the first sequence and the last, 16 positions each
      check_every_plan(op, s, outputs);
    }
  }
  {  // A packed O is where the offsets say: corrupt sequence 3's last token, head 5, element 2.
    gpucmp::attention_problem p;
    p.batch = 4;
    p.q_heads = 8;
    p.kv_heads = 2;
    p.seq_q = p.seq_kv = 517;
    p.q_lengths = p.kv_lengths = {200, 517, 1, 333};
    p.packed = true;
    gpucmp::attention op(p, options, s.get());
    REQUIRE(op.verify(s.get()).passed());
    const std::uint16_t big = 0x4700;  // BF16 32768
    char* o = static_cast<char*>(op.output());
    REQUIRE(cudaMemcpy(o + (((200 + 517 + 1 + 332) * 8 + 5) * 128 + 2) * 2, &big, 2, cudaMemcpyHostToDevice) == cudaSuccess);
    const gpucmp::verification v = op.check_output();
    CHECK(v.failed == 1);
    CHECK(v.worst_where == "batch 3, position 332, head 5, element 2");
  }
  // A caller's page table out of the pool is refused before anything is allocated.
  gpucmp::attention_problem p;
  p.batch = 1;
  p.seq_q = 1;
  p.seq_kv = 128;
  p.mask = gpucmp::attention_mask::none;
  p.page_size = 64;
  options.page_table = {0, 2};
  CHECK_THROWS_WITH(gpucmp::attention(p, options, s.get()), GPUCMP_CONTAINS("is page 2, outside the pool's 2 pages"));
}
