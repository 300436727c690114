// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The transformer operations' problems, on the host: bytes and FLOPs under each convention,
// bad shapes refused with the field named, the rows a check samples, the launch-shape record.
#include "catch.hpp"

#include <gpucmp/ops/attention_problem.hpp>
#include <gpucmp/ops/decode_attention_chunks.hpp>
#include <gpucmp/ops/gemv_problem.hpp>
#include <gpucmp/ops/kernel_candidates.hpp>
#include <gpucmp/ops/rmsnorm_problem.hpp>
#include <gpucmp/ops/sampled_rows.hpp>
#include <gpucmp/ops/swiglu_problem.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

TEST_CASE("attention: FLOPs under each causal convention, bytes, names", "[ops][attention]") {
  gpucmp::attention_problem p;  // Llama-3-8B: 32 query heads, 8 KV heads, d 128
  p.batch = 2;
  p.seq_q = p.seq_kv = 4096;
  const double square = 4.0 * 2 * 32 * 4096.0 * 4096.0 * 128;
  CHECK(p.work().flops == square / 2);  // causal, half the square by default
  p.flops_convention = gpucmp::causal_flops::full_square;
  CHECK(p.work().flops == square);
  p.mask = gpucmp::attention_mask::none;
  p.flops_convention = gpucmp::causal_flops::half_square;
  CHECK(p.work().flops == square);  // nothing masked: the convention does not apply
  CHECK(p.work().bytes_read == 2.0 * 2 * 128 * (4096.0 * 32 + 2 * 4096.0 * 8));
  CHECK(p.work().bytes_written == 2.0 * 2 * 4096 * 32 * 128);
  CHECK(p.work().arithmetic == gpucmp::precision::bf16);
  CHECK(p.name() == "bf16/b2_s4096_h32+8_d128/full");
  p.kv_heads = 32;
  p.seq_kv = 1024;
  p.mask = gpucmp::attention_mask::causal;
  CHECK(p.name() == "bf16/b2_s4096x1024_h32_d128/causal");
  CHECK(p.applied_scale() == Approx(1 / std::sqrt(128.0)));
}

TEST_CASE("attention backward: 2.5 times the forward's FLOPs, its own bytes and name", "[ops][attention]") {
  gpucmp::attention_problem p;
  p.batch = 2;
  p.seq_q = p.seq_kv = 1024;  // 32 query heads over 8 KV heads, d 128, causal
  const gpucmp::work forward = p.work();
  p.pass = gpucmp::attention_pass::backward;
  const gpucmp::work backward = p.work();
  CHECK(backward.flops == 2.5 * forward.flops);
  CHECK(backward.flops == 10.0 * 2 * 32 * (1024.0 * 1024 / 2) * 128);
  const double q = 2.0 * 2 * 1024 * 32 * 128, kv = 2.0 * 2 * 1024 * 8 * 128;
  CHECK(backward.bytes_read == 3 * q + 2 * kv + 4.0 * 2 * 32 * 1024);  // Q, O, dO; K, V; FP32 statistics
  CHECK(backward.bytes_written == q + 2 * kv);                         // dQ; dK, dV
  CHECK(p.name() == "bf16/b2_s1024_h32+8_d128/causal/bwd");
  bool has_pass = false;
  for (const gpucmp::axis& a : p.axes()) has_pass = has_pass || (a.name == "pass" && a.text == "backward");
  CHECK(has_pass);
}

TEST_CASE("attention: the sampled positions hold both ends and spread between", "[ops][attention]") {
  const std::vector<std::int64_t> s = gpucmp::attention_sampled_positions(8192);
  CHECK(s.size() == 16);
  CHECK(s.front() == 0);
  CHECK(s[1] == 1);
  CHECK(s.back() == 8191);
  CHECK(std::set<std::int64_t>(s.begin(), s.end()).size() == s.size());
  CHECK(gpucmp::attention_sampled_positions(3) == std::vector<std::int64_t>{0, 1, 2});
  CHECK(gpucmp::attention_sampled_positions(1) == std::vector<std::int64_t>{0});
}

TEST_CASE("attention FP8: one byte an element, scaled bounds, a backward too", "[ops][attention]") {
  gpucmp::attention_problem p;
  p.batch = 1;
  p.seq_q = p.seq_kv = 2048;
  p.dtype = gpucmp::numerics::fp8_e4m3;
  CHECK_NOTHROW(p.validate());
  CHECK(p.element_size() == 1);
  CHECK(p.work().bytes_read == 1.0 * 128 * (2048.0 * 32 + 2 * 2048.0 * 8));
  CHECK(p.work().arithmetic == gpucmp::precision::fp8);
  CHECK(p.name() == "fp8_e4m3/b1_s2048_h32+8_d128/causal");
  const gpucmp::tolerance tol = p.output_tolerance();
  CHECK(tol.output_eps == std::ldexp(1.0, -4));                    // E4M3: 3 mantissa bits
  CHECK(tol.output_abs == std::ldexp(1.0, -10) / 256);            // half of 2^-9, O scaled by 256
  CHECK(p.p_floor() == std::ldexp(1.0, -10) / 256 / std::ldexp(1.0, -4));
  p.dtype = gpucmp::numerics::bf16;
  CHECK(p.p_floor() < 1e-30);  // BF16's subnormals are far below any P a check meets
  p.dtype = gpucmp::numerics::fp8_e4m3;
  p.pass = gpucmp::attention_pass::backward;
  CHECK_NOTHROW(p.validate());
  CHECK(p.work().flops == 2.5 * 4 * 32 * 2048.0 * 2048 / 2 * 128);
  CHECK(p.work().bytes_written == 2048.0 * 32 * 128 + 2 * 2048.0 * 8 * 128);  // one byte an element
  p.seq_kv = 2000;  // a partial tile, which cuDNN's FP8 backward got wrong
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("whole tiles of 128 tokens (got 2048 x 2000)"));
  CHECK_THROWS_AS(p.validate(), gpucmp::unsupported);
  p.pass = gpucmp::attention_pass::forward;
  CHECK_NOTHROW(p.validate());
}

TEST_CASE("attention FP8 backward: scales from a measured maximum are powers of two under half of E4M3's range",
          "[ops][attention]") {
  CHECK(gpucmp::attention_fp8_scale_for(1) == 128);       // 1 x 128 <= 224 < 1 x 256
  CHECK(gpucmp::attention_fp8_scale_for(224) == 1);
  CHECK(gpucmp::attention_fp8_scale_for(225) == 0.5);
  CHECK(gpucmp::attention_fp8_scale_for(0.003) == 65536);  // small gradients lifted clear of the subnormals
  CHECK(gpucmp::attention_fp8_scale_for(0) == 1);          // nothing measured
  CHECK(gpucmp::attention_fp8_scale_for(std::nan("")) == 1);
  CHECK(gpucmp::attention_fp8_scale_for(1e-30) == std::ldexp(1.0, 30));
  for (double amax : {1e-6, 0.01, 0.7, 3.0, 100.0, 448.0, 1e5}) {
    const double scale = gpucmp::attention_fp8_scale_for(amax);
    CHECK(amax * scale <= 224);
    CHECK(amax * scale > 112);
  }
}

TEST_CASE("attention serving: padded lengths and paged K and V, their bytes, names and bad tables", "[ops][attention]") {
  gpucmp::attention_problem p;  // decode: one query a sequence against a paged cache
  p.batch = 2;
  p.seq_q = 1;
  p.seq_kv = 1000;
  p.mask = gpucmp::attention_mask::none;
  p.page_size = 64;
  p.kv_lengths = {1000, 10};
  CHECK_NOTHROW(p.validate());
  CHECK(p.serving());
  CHECK(p.pages_per_sequence() == 16);
  CHECK(p.kv_tokens() == 1010);
  CHECK(p.kv_length(1) == 10);
  CHECK(p.work().flops == 4.0 * 32 * 1010 * 128);  // every sequence's keys, no more
  CHECK(p.work().bytes_read == 2.0 * 128 * (2 * 32 + 2 * 1010.0 * 8));
  CHECK(p.name() == "bf16/b2_s1x1000_h32+8_d128/full/paged64/kv1010tokens");
  std::vector<std::int32_t> table(32);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = std::int32_t(31 - i);
  CHECK_NOTHROW(p.validate_page_table(table));
  table[20] = 32;
  CHECK_THROWS_WITH(p.validate_page_table(table),
                    GPUCMP_CONTAINS("page table entry 20 (sequence 1) is page 32, outside the pool's 32 pages"));
  table.pop_back();
  CHECK_THROWS_WITH(p.validate_page_table(table), GPUCMP_CONTAINS("has 31 entries, not 2 sequences x 16 pages"));
  gpucmp::attention_problem bad = p;
  bad.kv_lengths = {1000};
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("kv_lengths has 1 lengths for a batch of 2"));
  bad.kv_lengths = {1000, 1001};
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("kv_lengths[1] = 1001 is outside 1..1000"));
  bad = p;
  bad.page_size = -1;
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("page_size must not be negative"));
  bad = p;
  bad.pass = gpucmp::attention_pass::backward;
  CHECK_THROWS_AS(bad.validate(), gpucmp::unsupported);
  bad = p;
  bad.page_size = 0;
  CHECK_THROWS_WITH(bad.validate_page_table(table), GPUCMP_CONTAINS("not paged"));
  bad.page_pool = 40;
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("only a paged problem has one"));
  // A model's cache: one pool shared by more sequences than the step holds.
  gpucmp::attention_problem shared = p;
  shared.page_pool = 100;
  CHECK_NOTHROW(shared.validate());
  CHECK(shared.pool_pages() == 100);
  CHECK(p.pool_pages() == 32);
  CHECK(shared.kv_rows() == 100 * 64);
  CHECK(shared.work().bytes_read == p.work().bytes_read);  // what a call reads, not what the pool holds
  CHECK(shared.name() == "bf16/b2_s1x1000_h32+8_d128/full/paged64_pool100/kv1010tokens");
  table.push_back(99);
  table[20] = 99;
  CHECK_NOTHROW(shared.validate_page_table(table));
  table[20] = 100;
  CHECK_THROWS_WITH(shared.validate_page_table(table), GPUCMP_CONTAINS("is page 100, outside the pool's 100 pages"));
  shared.page_pool = -1;
  CHECK_THROWS_WITH(shared.validate(), GPUCMP_CONTAINS("page_pool must not be negative"));
}

TEST_CASE("attention serving: query lengths and packed (ragged) batches, their offsets, work and limits",
          "[ops][attention]") {
  gpucmp::attention_problem p;  // prefill of three prompts, causal
  p.batch = 3;
  p.q_heads = p.kv_heads = 8;
  p.seq_q = p.seq_kv = 1000;
  p.q_lengths = {1000, 10, 300};
  p.kv_lengths = {1000, 10, 300};
  CHECK_NOTHROW(p.validate());
  CHECK(p.serving());
  CHECK(p.q_tokens() == 1310);
  CHECK(p.q_length(1) == 10);
  CHECK(p.q_rows() == 3000);  // padded: every sequence's full stride
  CHECK(p.q_offset(2) == 2000);
  CHECK(p.counted_pairs() == (1000.0 * 1000 + 10 * 10 + 300 * 300) / 2);
  CHECK(p.work().flops == 4.0 * 8 * p.counted_pairs() * 128);
  CHECK(p.work().items == 1310);
  CHECK(p.work().bytes_read == 2.0 * 128 * 8 * (1310 + 2 * 1310));
  CHECK(p.name() == "bf16/b3_s1000_h8_d128/causal/q1310tokens/kv1310tokens");
  p.packed = true;
  CHECK(p.q_rows() == 1310);
  CHECK(p.kv_rows() == 1310);
  CHECK(p.q_offset(0) == 0);
  CHECK(p.q_offset(2) == 1010);
  CHECK(p.kv_offset(3) == 1310);
  CHECK(p.name() == "bf16/b3_s1000_h8_d128/causal/q1310tokens/kv1310tokens/packed");
  bool thd = false;
  for (const gpucmp::axis& a : p.axes()) thd = thd || (a.name == "layout" && a.text == "thd");
  CHECK(thd);
  p.page_size = 64;  // packed queries against a paged cache: K and V are the pool's
  CHECK(p.kv_rows() == 3 * 16 * 64);
  p.page_size = 0;

  gpucmp::attention_problem bad = p;
  bad.q_lengths = {1000, 10};
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("q_lengths has 2 lengths for a batch of 3"));
  bad.q_lengths = {1000, 0, 5};
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("q_lengths[1] = 0 is outside 1..1000"));
  bad = p;
  bad.pass = gpucmp::attention_pass::backward;
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("padded, packed or paged batches are built for the BF16 and FP16 forward only"));
  bad = p;  // 2^31 elements of Q: past cuDNN's 32-bit ragged offsets
  bad.batch = 1;
  bad.seq_q = bad.seq_kv = 1 << 20;
  bad.q_heads = bad.kv_heads = 16;
  bad.q_lengths = bad.kv_lengths = {1 << 20};
  CHECK_THROWS_AS(bad.validate(), gpucmp::unsupported);
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("past the 32-bit ragged offsets"));
  bad.packed = false;  // padded, the offsets are not used
  CHECK_NOTHROW(bad.validate());
}

TEST_CASE("attention: bad problems are refused by name", "[ops][attention]") {
  gpucmp::attention_problem p;
  p.head_dim = 100;
  CHECK_THROWS_AS(p.validate(), gpucmp::unsupported);
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("head_dim 100 is not supported"));
  p.head_dim = 128;
  p.kv_heads = 5;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("kv_heads 5 does not divide q_heads 32"));
  p.kv_heads = 8;
  p.seq_q = 0;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("seq_q"));
  p.seq_q = 16;
  p.dtype = gpucmp::numerics::fp32;
  CHECK_THROWS_AS(p.validate(), gpucmp::unsupported);
  p.dtype = gpucmp::numerics::fp16;
  CHECK_NOTHROW(p.validate());
}

TEST_CASE("decode attention: where gpucmp's split-KV kernel applies, its chunk sizes and partial sums", "[ops][attention]") {
  gpucmp::attention_problem p;  // Llama-3-8B's decode: 32 query heads over 8 KV heads of 128
  p.batch = 16;
  p.seq_q = 1;
  p.seq_kv = 2049;
  p.mask = gpucmp::attention_mask::none;
  CHECK(gpucmp::decode_attention_applies(p));
  CHECK(gpucmp::decode_attention_chunks(p) == std::vector<std::int64_t>{64, 128, 256, 512, 1024, 2048, 2049});
  CHECK(gpucmp::decode_attention_partial_floats(p, 64) == std::size_t(16 * 32 * 33 * 130));  // 33 chunks of 64
  CHECK(gpucmp::decode_attention_partial_floats(p, 2049) == 0);                             // one chunk: no merge
  p.seq_kv = 32768;  // chunks of 32 to 256 would split a sequence into more than 64
  CHECK(gpucmp::decode_attention_chunks(p) == std::vector<std::int64_t>{512, 1024, 2048, 4096, 32768});
  p.seq_kv = 40;
  CHECK(gpucmp::decode_attention_chunks(p) == std::vector<std::int64_t>{32, 40});
  p.seq_kv = 32;
  CHECK(gpucmp::decode_attention_chunks(p) == std::vector<std::int64_t>{32});
  p.q_lengths.assign(16, 1);
  CHECK(gpucmp::decode_attention_applies(p));
  auto refused = [&](auto change) {
    gpucmp::attention_problem q = p;
    change(q);
    return !gpucmp::decode_attention_applies(q) && gpucmp::decode_attention_chunks(q).empty();
  };
  CHECK(refused([](gpucmp::attention_problem& q) { q.mask = gpucmp::attention_mask::causal; }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.seq_q = 2; q.q_lengths.clear(); }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.q_lengths[3] = 0; }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.head_dim = 96; }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.kv_heads = 32; q.q_heads = 96; }));  // 3 query heads a KV head
  CHECK(refused([](gpucmp::attention_problem& q) { q.dtype = gpucmp::numerics::fp8_e4m3; }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.pass = gpucmp::attention_pass::backward; }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.packed = true; }));
  CHECK(refused([](gpucmp::attention_problem& q) { q.page_size = 48; }));  // pages of a power of two keys only,
  CHECK(refused([](gpucmp::attention_problem& q) { q.page_size = 8; }));   // at least 16 (one tile)
  p.page_size = 16;
  CHECK(gpucmp::decode_attention_applies(p));
}

TEST_CASE("gemv: bytes, FLOPs, the GEMM it is, Llama-3-8B's shapes, bad problems", "[ops][gemv]") {
  const gpucmp::gemv_problem p{1, 4096, 14336, gpucmp::numerics::bf16};  // the down projection
  CHECK(p.weight_bytes() == 2.0 * 4096 * 14336);
  CHECK(p.work().bytes_read == 2.0 * 4096 * 14336 + 2.0 * 14336);
  CHECK(p.work().bytes_written == 2.0 * 4096);
  CHECK(p.work().flops == 2.0 * 4096 * 14336);
  CHECK(p.name() == "bf16/b1_n4096_k14336");
  const gpucmp::gemm_problem g = p.as_gemm();
  CHECK(g.m == 4096);
  CHECK(g.n == 1);
  CHECK(g.k == 14336);
  CHECK(g.transpose_a);
  CHECK_FALSE(g.transpose_b);
  CHECK(g.flops() == p.work().flops);
  const std::vector<gpucmp::named_gemv> llama = gpucmp::llama3_8b_gemvs(8);
  REQUIRE(llama.size() == 5);
  CHECK(llama[0].layer == "qkv");
  CHECK(llama[0].problem.n == 6144);
  CHECK(llama[4].layer == "lm_head");
  CHECK(llama[4].problem.n == 128256);
  CHECK(llama[4].problem.batch == 8);
  gpucmp::gemv_problem w8 = p;
  w8.fp8_weights = true;  // weight-only E4M3: half the bytes, x and y unchanged
  CHECK(w8.weight_bytes() == 1.0 * 4096 * 14336);
  CHECK(w8.work().bytes_read == 1.0 * 4096 * 14336 + 2.0 * 14336);
  CHECK(w8.work().flops == p.work().flops);
  CHECK(w8.name() == "bf16/b1_n4096_k14336/fp8_weights");
  CHECK(w8.weight_type() == gpucmp::element_type::fp8_e4m3);
  gpucmp::gemv_problem bad = p;
  bad.batch = 0;
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("batch must be positive"));
  bad = p;
  bad.k = 0;
  CHECK_THROWS_WITH(bad.validate(), GPUCMP_CONTAINS("W is n x k"));
  bad = p;
  bad.dtype = gpucmp::numerics::fp32;
  CHECK_THROWS_AS(bad.validate(), gpucmp::unsupported);
}

TEST_CASE("rmsnorm and swiglu: bytes, FLOPs and bad shapes", "[ops][rmsnorm][swiglu]") {
  gpucmp::rmsnorm_problem n;
  n.tokens = 8192;
  n.hidden = 4096;
  CHECK(n.work().bytes_read == 8192.0 * 4096 * 2 + 4096 * 2);
  CHECK(n.work().bytes_written == 8192.0 * 4096 * 2);
  n.residual = true;
  CHECK(n.work().bytes_read == 2 * 8192.0 * 4096 * 2 + 4096 * 2);
  CHECK(n.work().bytes_written == 2 * 8192.0 * 4096 * 2);
  CHECK(n.name() == "bf16/8192x4096+residual");
  n.hidden = 0;
  CHECK_THROWS_WITH(n.validate(), GPUCMP_CONTAINS("hidden must be from 1"));
  n.hidden = 4096;
  n.eps = 0;
  CHECK_THROWS_WITH(n.validate(), GPUCMP_CONTAINS("eps"));
  n.eps = 1e-5;
  n.dtype = gpucmp::numerics::int8;
  CHECK_THROWS_AS(n.validate(), gpucmp::unsupported);

  gpucmp::swiglu_problem s{8192, 14336, gpucmp::numerics::fp16};
  CHECK(s.work().bytes_read == 2 * 8192.0 * 14336 * 2);
  CHECK(s.work().bytes_written == 8192.0 * 14336 * 2);
  CHECK(s.name() == "fp16/8192x14336");
  CHECK(s.axes().front() == gpucmp::axis::of("pass", "forward"));
  gpucmp::swiglu_problem back = s;  // the backward: dout read too, dgate and dup written
  back.backward = true;
  CHECK(back.work().bytes_read == 3 * 8192.0 * 14336 * 2);
  CHECK(back.work().bytes_written == 2 * 8192.0 * 14336 * 2);
  CHECK(back.name() == "fp16/8192x14336/bwd");
  CHECK(back.axes().front() == gpucmp::axis::of("pass", "backward"));
  CHECK(back.output_tolerance().input_eps > s.output_tolerance().input_eps);
  s.tokens = -1;
  CHECK_THROWS_WITH(s.validate(), GPUCMP_CONTAINS("tokens must be positive"));
}

TEST_CASE("sampled_rows: every row when few, the edges and an even stride when many", "[ops]") {
  CHECK(gpucmp::sampled_rows(5).size() == 5);
  const auto rows = gpucmp::sampled_rows(100000, 1024);
  CHECK(rows.front() == 0);
  CHECK(rows.back() == 99999);
  CHECK(rows.size() <= 1100);
  CHECK(rows.size() >= 900);
  CHECK(std::set<std::int64_t>(rows.begin(), rows.end()).size() == rows.size());
  CHECK(std::is_sorted(rows.begin(), rows.end()));
}

TEST_CASE("kernel_candidates: the first shape runs until a search picks another", "[ops]") {
  CHECK_THROWS_AS(gpucmp::kernel_candidates({}, "x"), gpucmp::invalid_argument);
  gpucmp::kernel_candidates c({{256, 4, true}, {128, 1, false}}, "x");
  CHECK(c.algorithm().describe() == "256x4v (heuristic)");
  c.adopt({1, 2e-6, 0.1}, {{"256x4v", 3e-6, "", 1, 0}, {"128x1e", 2e-6, "", 1, 0}});
  CHECK(c.algorithm().describe() == "128x1e (search)");
  CHECK(c.algorithm().searched_seconds == 2e-6);
  CHECK(c.log().size() == 2);
  CHECK_THROWS(c.select(2));
}
