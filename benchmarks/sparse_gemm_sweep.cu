// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// 2:4 sparse GEMM sweep: what structured sparsity really buys, each verified cuSPARSELt row
// beside the verified dense cuBLASLt GEMM of the same shape and layout (A's rows and B's rows
// k-contiguous: a linear layer's weights and tokens), in one run. Names:
//   sparse_gemm/cusparselt/<dtype>/<m>x<n>x<k>/graph          timed search over cuSPARSELt's configurations
//   sparse_gemm/cusparselt_default/<dtype>/<m>x<n>x<k>/graph  cuSPARSELt's default configuration (squares)
//   gemm/cublaslt/<dtype>/<m>x<n>x<k>_tn/graph                the dense baseline
// Both count dense FLOPs, so TFLOP/s compare directly; a sparse row's % of peak is taken
// against the datasheet's "with sparsity" rate. Shapes: squares, Llama-3-8B's linear layers
// (m outputs x k inputs) at 16 and 4096 tokens (n), DeepBench's GEMMs. Select rows with --benchmark_filter;
// precisions this GPU has no sparse tensor cores for are skipped with the reason.
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/gemm.cuh>
#include <gpucmp/ops/sparse_gemm.cuh>
#include <gpucmp/ops/workload_shapes.hpp>

#include <cstdint>
#include <string>

namespace {

void register_pair(const gpucmp::sparse_gemm_problem& p, bool with_default) {
  auto sparse = [p](gpucmp::algorithm_choice choice) {
    return [p, choice](gpucmp::state& st) {
      gpucmp::sparse_gemm_options options;
      options.choice = choice;
      gpucmp::sparse_gemm op(p, options, st.stream());
      gpucmp::run_verified(st, op);
    };
  };
  const std::string tail = gpucmp::to_string(p.dtype) + std::string("/") + p.shape_name();
  gpucmp::register_benchmark("sparse_gemm/cusparselt/" + tail, sparse(gpucmp::algorithm_choice::search), {gpucmp::mode::graph});
  if (with_default) {
    gpucmp::register_benchmark("sparse_gemm/cusparselt_default/" + tail, sparse(gpucmp::algorithm_choice::heuristic),
                               {gpucmp::mode::graph});
  }
  gpucmp::gemm_problem dense;  // the same data layout: A^T stored k x m, B k x n, both k-contiguous
  dense.m = p.m;
  dense.n = p.n;
  dense.k = p.k;
  dense.transpose_a = true;
  dense.dtype = p.dtype;
  gpucmp::register_benchmark(std::string("gemm/cublaslt/") + gpucmp::to_string(p.dtype) + "/" + dense.shape_name(),
                             [dense](gpucmp::state& st) {
                               gpucmp::gemm op(dense, {}, st.stream());
                               gpucmp::run_verified(st, op);
                             },
                             {gpucmp::mode::graph});
}

const bool registered = [] {
  gpucmp_bench::add_version_context("cublasLt_version", cublasLtGetVersion());
  gpucmp_bench::add_version_context("cusparseLt_version", CUSPARSELT_VERSION);
  for (gpucmp::numerics t : gpucmp::sparse_gemm_numerics) {
    for (std::int64_t n : {1024, 2048, 4096, 8192, 16384}) register_pair({n, n, n, t}, true);
    // Llama-3-8B's projections: fused QKV, O, fused gate/up, down.
    const std::int64_t layers[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
    for (const auto& layer : layers) {
      for (std::int64_t tokens : {16, 4096}) register_pair({layer[0], tokens, layer[1], t}, false);
    }
    // DeepBench's GEMMs as they are: a shape cuSPARSELt does not take (k not a multiple of
    // four, rows cuSPARSELt will not align) is reported unsupported with its reason.
    for (const gpucmp::gemm_problem& d : gpucmp::deepbench_gemm_shapes(t)) register_pair({d.m, d.n, d.k, t}, false);
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
