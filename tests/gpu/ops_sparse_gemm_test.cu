// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuSPARSELt's 2:4 sparse GEMM: every sparse precision this GPU has verified against the
// FP64 reference of the pruned A (CPU for small problems, GPU for large ones) after a
// search over cuSPARSELt's configurations; A pruned to the pattern (checked here, apart from
// cuSPARSELt's own check) and not to zeros; a corrupted output located; the call in a CUDA
// graph; the declared work (dense FLOPs at the sparse peak, A as compressed); bad problems
// refused by name.
#include "catch.hpp"
#include "search_pace.hpp"

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/sparse_gemm.cuh>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

bool sparse_supported_here(gpucmp::numerics t) {
  const auto d = gpucmp::query_current_device();
  return gpucmp::sparse_gemm_support(t, d.cc_major, d.cc_minor).empty();
}

// The pruned A's elements, as doubles, read back.
std::vector<double> pruned_a(gpucmp::sparse_gemm& g) {
  const gpucmp::sparse_gemm_problem& p = g.problem();
  return gpucmp::visit_gemm_storage(p.dtype, [&](auto storage) {
    using A = typename decltype(storage)::a_type;
    std::vector<A> raw(std::size_t(p.m * p.k));
    REQUIRE(cudaMemcpy(raw.data(), g.a(), raw.size() * sizeof(A), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<double> out(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) out[i] = gpucmp::to_double(raw[i]);
    return out;
  });
}

}  // namespace

TEST_CASE("every 2:4 sparse precision passes verification after a search", "[gpu][ops][sparse_gemm]") {
  gpucmp::stream s;
  for (gpucmp::numerics t : gpucmp::sparse_gemm_numerics) {
    if (!sparse_supported_here(t)) {
      WARN("skipping " << gpucmp::to_string(t) << ": no sparse tensor cores for it on this GPU");
      continue;
    }
    for (std::int64_t size : {128, 1024}) {  // 128: CPU reference of every output; 1024: GPU rows and columns
      gpucmp::sparse_gemm_problem p;
      p.m = size;
      p.n = size + 64;
      p.k = size / 2 + 64;
      p.dtype = t;
      INFO(gpucmp::to_string(t) << " " << p.shape_name());
      gpucmp::sparse_gemm g(p, gpucmp_test::paced(gpucmp::sparse_gemm_options{}), s.get());
      REQUIRE(g.candidate_count() > 1);
      gpucmp::choose_algorithm(g);
      const gpucmp::verification v = g.verify(s.get());
      INFO(v.summary());
      CHECK(v.passed());
      CHECK(v.method.find(size <= 128 ? "CPU" : "GPU") != std::string::npos);
      CHECK(v.method.find("pruned") != std::string::npos);
      CHECK(v.checked >= std::size_t(size <= 128 ? p.m * p.n : 16 * p.m));
      CHECK(g.algorithm().chosen_by == gpucmp::algorithm_choice::search);
      CHECK(g.search_log().size() >= 2);
      CHECK(g.algorithm().searched_seconds > 0);
    }
  }
}

TEST_CASE("A is pruned to two of every four values along k, and not to zeros", "[gpu][ops][sparse_gemm]") {
  gpucmp::stream s;
  for (gpucmp::numerics t : {gpucmp::numerics::fp16, gpucmp::numerics::int8, gpucmp::numerics::tf32}) {
    if (!sparse_supported_here(t)) continue;
    gpucmp::sparse_gemm_problem p;
    p.m = 64;
    p.n = 64;
    p.k = 256;
    p.dtype = t;
    INFO(gpucmp::to_string(t));
    gpucmp::sparse_gemm_options o;
    o.choice = gpucmp::algorithm_choice::heuristic;
    gpucmp::sparse_gemm g(p, o, s.get());
    const std::vector<double> a = pruned_a(g);
    const std::int64_t group = p.group();
    std::size_t over = 0, nonzero = 0;
    for (std::int64_t r = 0; r < p.m; ++r) {
      for (std::int64_t c = 0; c < p.k; c += group) {
        std::int64_t kept = 0;
        for (std::int64_t e = 0; e < group; ++e) kept += a[std::size_t(r * p.k + c + e)] != 0;
        over += kept > group / 2;
        nonzero += std::size_t(kept);
      }
    }
    CHECK(over == 0);
    // Random values are almost never zero: nearly half of A is kept.
    CHECK(double(nonzero) > 0.45 * double(p.m * p.k));
    // The compressed A: the kept half and its indices, less than the dense A.
    const double dense = double(p.m * p.k) * double(gpucmp::element_bytes(gpucmp::types_of(t).weight));
    CHECK(double(g.compressed_bytes()) >= p.compressed_a_bytes());
    CHECK(double(g.compressed_bytes()) < dense);
    CHECK(g.verify(s.get()).passed());
  }
}

TEST_CASE("a corrupted sparse GEMM output is located, and the call runs in a CUDA graph", "[gpu][ops][sparse_gemm]") {
  REQUIRE(sparse_supported_here(gpucmp::numerics::fp16));
  gpucmp::stream s;
  gpucmp::sparse_gemm_problem p;
  p.m = 256;
  p.n = 192;
  p.k = 128;
  gpucmp::sparse_gemm_options o;
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::sparse_gemm g(p, o, s.get());
  REQUIRE(g.verify(s.get()).passed());
  const __half bad = gpucmp::from_double<__half>(1000.0);
  REQUIRE(cudaMemcpy(static_cast<__half*>(g.d()) + 17 * p.n + 5, &bad, sizeof bad, cudaMemcpyHostToDevice) == cudaSuccess);
  const gpucmp::verification v = g.check_output(s.get());
  CHECK_FALSE(v.passed());
  CHECK(v.failed == 1);
  CHECK(v.worst_where == "row 17, column 5");
  // Captured once, replayed on a poisoned output: the same verified result.
  REQUIRE(cudaMemset(g.d(), 0xFF, std::size_t(p.m * p.n) * sizeof(__half)) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
  const gpucmp::graph captured = gpucmp::capture_graph(s.get(), [&](cudaStream_t st) { g(st); });
  CHECK(captured.node_count() >= 1);
  gpucmp::graph_exec replay(captured.get());
  replay.launch(s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  CHECK(g.check_output(s.get()).passed());
}

TEST_CASE("a sparse GEMM declares dense FLOPs at the sparse peak, and its row's axes", "[gpu][ops][sparse_gemm]") {
  REQUIRE(sparse_supported_here(gpucmp::numerics::bf16));
  gpucmp::sparse_gemm_problem p;
  p.m = 512;
  p.n = 256;
  p.k = 1024;
  p.dtype = gpucmp::numerics::bf16;
  gpucmp::sparse_gemm_options o;
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::sparse_gemm g(p, o);
  const gpucmp::work w = g.work();
  CHECK(w.flops == 2.0 * 512 * 256 * 1024);
  CHECK(w.structure == gpucmp::sparsity::structured_2_4);
  CHECK(w.arithmetic == gpucmp::precision::bf16);
  CHECK(w.bytes_read == double(g.compressed_bytes()) + 256.0 * 1024 * 2);
  CHECK(w.bytes_written == 512.0 * 256 * 2);
  CHECK(g.name() == "sparse_gemm/cusparselt/bf16/512x256x1024");
  CHECK(g.provider() == "cuSPARSELt");
  REQUIRE(g.libraries().size() == 1);
  CHECK(std::stoi(g.libraries()[0].second) > 0);
  CHECK(g.candidate_count() == 1);  // the default configuration alone, untimed
  CHECK(g.algorithm().describe().find("default config") == 0);
}

TEST_CASE("bad sparse GEMM problems are refused by name", "[gpu][ops][sparse_gemm]") {
  gpucmp::sparse_gemm_problem p;
  p.m = p.n = 64;
  p.k = 66;
  CHECK_THROWS_WITH(gpucmp::sparse_gemm(p), GPUCMP_CONTAINS("k 66 is not a multiple of the sparsity group (4 for fp16)"));
  p.k = 64;
  p.dtype = gpucmp::numerics::fp64;
  CHECK_THROWS_AS(gpucmp::sparse_gemm(p), gpucmp::unsupported);
  // A shape cuSPARSELt does not take is its refusal, by name, or it runs and verifies.
  p.dtype = gpucmp::numerics::fp16;
  p.m = p.n = p.k = 36;
  try {
    gpucmp::sparse_gemm g(p);
    gpucmp::choose_algorithm(g);
    CHECK(g.verify(nullptr).passed());
  } catch (const gpucmp::error& e) {
    CHECK(std::string(e.what()).find("cuSPARSELt") != std::string::npos);
  }
}
