// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The transformer block's memory-bound operations (RMSNorm with and without the fused
// residual add, RoPE, SwiGLU): every launch shape of every recipe verified against the
// double reference, on rows that are whole 16-byte vectors and rows that are not; the
// in-place residual add gives what the out-of-place one gives; a corrupted output is caught
// and located; a search picks a verified shape.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/rmsnorm.cuh>
#include <gpucmp/ops/rope.cuh>
#include <gpucmp/ops/swiglu.cuh>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// Runs and verifies every launch shape of `op`; returns how many there were.
template <class Op>
std::size_t verify_every_shape(Op& op, cudaStream_t s) {
  for (std::size_t i = 0; i < op.candidate_count(); ++i) {
    op.select(i, s);
    const gpucmp::verification v = op.verify(s);
    INFO(op.name() << " with " << op.describe_candidate(i) << ": " << v.summary());
    CHECK(v.passed());
    CHECK(v.worst_ratio < 1);
  }
  return op.candidate_count();
}

// Overwrites element `index` of a 16-bit or 32-bit output with a value far from any answer.
void corrupt(void* output, std::size_t element_bytes, std::size_t index) {
  const std::uint32_t big = element_bytes == 4 ? 0x47000000u /* 32768.f */ : 0x4700u /* bf16 32768 / fp16 7.0 */;
  REQUIRE(cudaMemcpy(static_cast<char*>(output) + index * element_bytes, &big, element_bytes, cudaMemcpyHostToDevice) ==
          cudaSuccess);
}

}  // namespace

TEST_CASE("rmsnorm: every launch shape of every recipe matches the double reference", "[gpu][ops][rmsnorm]") {
  gpucmp::stream s;
  for (gpucmp::numerics t : gpucmp::rmsnorm_numerics) {
    for (bool residual : {false, true}) {
      for (std::int64_t hidden : {4096, 8192, 1000, 1001}) {  // whole vectors, then rows that are not
        for (std::int64_t tokens : {1, 300}) {
          gpucmp::rmsnorm_problem p;
          p.tokens = tokens;
          p.hidden = hidden;
          p.dtype = t;
          p.residual = residual;
          gpucmp::rmsnorm op(p, s.get());
          const std::size_t shapes = verify_every_shape(op, s.get());
          CHECK(shapes >= 3);  // the element-by-element kernel at 256, 512 and 1024 threads at least
        }
      }
    }
  }
}

TEST_CASE("rmsnorm: the in-place residual add equals the out-of-place one", "[gpu][ops][rmsnorm]") {
  gpucmp::stream s;
  gpucmp::rmsnorm_problem p;
  p.tokens = 64;
  p.hidden = 4096;
  p.residual = true;
  const std::size_t n = std::size_t(p.tokens * p.hidden);
  gpucmp::device_buffer<__nv_bfloat16> x(n, gpucmp::initial_fill::uninitialized()), r(n, gpucmp::initial_fill::uninitialized()),
      r_copy(n, gpucmp::initial_fill::uninitialized()), r_out(n, gpucmp::initial_fill::uninitialized()),
      y1(n, gpucmp::initial_fill::uninitialized()), y2(n, gpucmp::initial_fill::uninitialized()),
      w(std::size_t(p.hidden), gpucmp::initial_fill::uninitialized());
  gpucmp::fill_uniform(x.data(), n, 1, -2, 2, s.get());
  gpucmp::fill_uniform(r.data(), n, 2, -2, 2, s.get());
  gpucmp::fill_uniform(w.data(), std::size_t(p.hidden), 3, 0.5, 1.5, s.get());
  REQUIRE(cudaMemcpyAsync(r_copy.data(), r.data(), r.bytes(), cudaMemcpyDeviceToDevice, s.get()) == cudaSuccess);
  for (const gpucmp::launch_shape& shape : gpucmp::rmsnorm_shapes(p)) {
    INFO(shape.describe());
    gpucmp::rmsnorm_tensors<__nv_bfloat16> apart{x.data(), r_copy.data(), r_out.data(), w.data(), y1.data()};
    gpucmp::run_rmsnorm(p, shape, apart, s.get());
    REQUIRE(cudaMemcpyAsync(r.data(), r_copy.data(), r.bytes(), cudaMemcpyDeviceToDevice, s.get()) == cudaSuccess);
    gpucmp::rmsnorm_tensors<__nv_bfloat16> in_place{x.data(), r.data(), r.data(), w.data(), y2.data()};
    gpucmp::run_rmsnorm(p, shape, in_place, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    CHECK(y1.to_host() == y2.to_host());
    CHECK(r.to_host() == r_out.to_host());
  }
  gpucmp::rmsnorm_tensors<__nv_bfloat16> missing{x.data(), nullptr, nullptr, w.data(), y1.data()};
  CHECK_THROWS_AS(gpucmp::run_rmsnorm(p, gpucmp::rmsnorm_shapes(p).front(), missing, s.get()), gpucmp::invalid_argument);
}

TEST_CASE("swiglu: every launch shape of every recipe, forward and backward, matches the double reference",
          "[gpu][ops][swiglu]") {
  gpucmp::stream s;
  for (gpucmp::numerics t : gpucmp::swiglu_numerics) {
    for (std::int64_t intermediate : {14336, 1000, 1001}) {
      for (std::int64_t tokens : {1, 7, 1000}) {
        if (tokens == 7) {  // the backward: [dgate | dup], silu' through its zero
          gpucmp::swiglu back({tokens, intermediate, t, true}, s.get());
          CHECK(verify_every_shape(back, s.get()) >= 2u);
        }
        gpucmp::swiglu op({tokens, intermediate, t}, s.get());
        const std::size_t shapes = verify_every_shape(op, s.get());
        const bool whole_vectors = intermediate % (t == gpucmp::numerics::fp32 ? 4 : 8) == 0;
        // 16 vector shapes less those over this GPU's register budget (never more than the
        // 1024-thread ones), and the 2 element-by-element ones.
        if (whole_vectors) {
          CHECK(shapes >= 12u);
          CHECK(shapes <= 18u);
        } else {
          CHECK(shapes == 2u);
        }
      }
    }
  }
}

TEST_CASE("rope: every launch shape, both pair layouts, partial rotation and the backward match the double reference",
          "[gpu][ops][rope]") {
  gpucmp::stream s;
  for (gpucmp::numerics t : gpucmp::rope_numerics) {
    for (gpucmp::rope_pairs pairs : {gpucmp::rope_pairs::half, gpucmp::rope_pairs::interleaved}) {
      struct head {
        std::int64_t dim, rotary;
      };
      for (head h : {head{128, 0}, head{64, 0}, head{96, 32}, head{6, 0}}) {
        gpucmp::rope_problem p;
        p.tokens = 333;
        p.q_heads = 8;
        p.kv_heads = 2;
        p.head_dim = h.dim;
        p.rotary_dim = h.rotary;
        p.dtype = t;
        p.pairs = pairs;
        p.max_positions = 4096;
        if (h.dim == 64) p.scaling.factor = 8;  // Llama 3.1's scaling
        gpucmp::rope op(p, s.get());
        verify_every_shape(op, s.get());
        if (h.dim == 128 || h.dim == 96) {  // the backward: the gradients rotated back by the same angles
          p.backward = true;
          gpucmp::rope back(p, s.get());
          verify_every_shape(back, s.get());
        }
      }
    }
  }
}

TEST_CASE("a corrupted output of each operation is caught and located", "[gpu][ops][rmsnorm][rope][swiglu]") {
  gpucmp::stream s;
  gpucmp::rmsnorm_problem rp;
  rp.tokens = 16;
  rp.hidden = 4096;
  gpucmp::rmsnorm norm(rp, s.get());
  REQUIRE(norm.verify(s.get()).passed());
  corrupt(norm.output(), 2, 3 * 4096 + 17);
  gpucmp::verification v = norm.check_output();
  CHECK(v.failed == 1);
  CHECK(v.worst_where == "row 3, column 17");

  gpucmp::swiglu act({16, 1024, gpucmp::numerics::fp16}, s.get());
  REQUIRE(act.verify(s.get()).passed());
  corrupt(act.output(), 2, 5 * 1024 + 9);
  v = act.check_output();
  CHECK(v.failed == 1);
  CHECK(v.worst_where == "row 5, column 9");

  gpucmp::rope_problem qp;
  qp.tokens = 16;
  qp.q_heads = 4;
  qp.kv_heads = 1;
  qp.dtype = gpucmp::numerics::fp32;
  qp.max_positions = 128;
  gpucmp::rope rot(qp, s.get());
  REQUIRE(rot.verify(s.get()).passed());
  const std::int64_t v_element = 2 * 768 + 5 * 128 + 1;  // token 2, V head's element 1: must be untouched
  corrupt(rot.output(), 4, std::size_t(v_element));
  v = rot.check_output();
  CHECK(v.failed == 1);
  CHECK(v.worst_where == "token 2, element " + std::to_string(5 * 128 + 1) + " of its row");
}

TEST_CASE("a search over the launch shapes keeps a verified one", "[gpu][ops][rmsnorm][rope][swiglu]") {
  gpucmp::stream s;
  gpucmp::rmsnorm_problem rp;
  rp.tokens = 2048;
  rp.residual = true;
  gpucmp::rmsnorm norm(rp, s.get());
  const gpucmp::prepared_operation prepared = gpucmp::prepare_verified(norm);
  REQUIRE(prepared.search.has_value());
  CHECK(norm.search_log().size() == norm.candidate_count());
  CHECK(norm.algorithm().chosen_by == gpucmp::algorithm_choice::search);
  CHECK(norm.algorithm().searched_seconds > 0);
  CHECK(prepared.check.passed());
  gpucmp::swiglu act({2048, 14336, gpucmp::numerics::bf16}, s.get());
  CHECK(gpucmp::prepare_verified(act).check.passed());
  gpucmp::rope_problem qp;
  qp.tokens = 2048;
  gpucmp::rope rot(qp, s.get());
  CHECK(gpucmp::prepare_verified(rot).check.passed());
}
