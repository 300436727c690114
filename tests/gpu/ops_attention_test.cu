// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuDNN's fused attention forward: every plan of BF16 and FP16, causal and full masks, head
// sizes 64, 128 and 256, multi-head and grouped-query, sequence lengths that are not tile
// multiples, verified against the double reference; a corrupted output is caught and located;
// a search keeps a verified plan (bad problems: tests/unit/transformer_problems_test.cpp).
#include "catch.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/attention.cuh>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

TEST_CASE("attention: every plan matches the double reference", "[gpu][ops][attention]") {
  gpucmp::stream s;
  gpucmp::attention_options options;
  options.max_plans = 4;
  for (gpucmp::numerics t : gpucmp::attention_numerics) {
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
          REQUIRE(op.candidate_count() >= 1);
          for (std::size_t i = 0; i < op.candidate_count(); ++i) {
            op.select(i, s.get());
            const gpucmp::verification v = op.verify(s.get());
            INFO(op.name() << " with " << op.describe_candidate(i) << ": " << v.summary());
            CHECK(v.passed());
            CHECK(v.checked == std::size_t(2 * op.sampled_positions().size() * 8 * d));
          }
        }
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
