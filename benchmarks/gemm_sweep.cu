// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// GEMM sweep: verified cuBLASLt GEMMs in every precision this GPU supports, over square sizes
// and DeepBench's representative shapes. Names: gemm/<provider>/<dtype>/<shape>/<mode>, where
// provider "cublaslt" is the timed algorithm search and "cublaslt_heuristic" the heuristic's
// first choice, so one run shows what the search gains (and, next to PyTorch, which also takes
// the heuristic's first choice, what the harnesses do to one algorithm); mode is graph, and
// for square sizes also kernel. FP8 and INT8 run transposed-A ("_tn"), the layout cuBLASLt
// requires for them. Select rows with --benchmark_filter; unsupported precisions are skipped
// with the reason.
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#if GPUCMP_WITH_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>  // registers CUPTI for the kernel-mode rows
#endif
#include <gpucmp/ops/gemm.cuh>
#include <gpucmp/ops/workload_shapes.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace {

void run_gemm(gpucmp::state& st, const gpucmp::gemm_problem& problem, gpucmp::algorithm_choice choice) {
  gpucmp::gemm_options options;
  options.choice = choice;
  gpucmp::gemm op(problem, options, st.stream());
  gpucmp::run_verified(st, op);  // search (unless the heuristic is asked for), verify, declare, time
}

void register_gemm(const gpucmp::gemm_problem& p, gpucmp::algorithm_choice choice,
                   std::initializer_list<gpucmp::mode> modes = {gpucmp::mode::graph}) {
  const std::string provider = choice == gpucmp::algorithm_choice::search ? "cublaslt" : "cublaslt_heuristic";
  gpucmp::register_benchmark("gemm/" + provider + "/" + gpucmp::to_string(p.dtype) + "/" + p.shape_name(),
                             [p, choice](gpucmp::state& st) { run_gemm(st, p, choice); }, modes);
}

const bool registered = [] {
  gpucmp_bench::add_version_context("cublasLt_version", cublasLtGetVersion());
  using gpucmp::numerics;
  const numerics all[] = {numerics::fp64, numerics::fp32,     numerics::tf32,     numerics::fp16,
                            numerics::fp16_acc16, numerics::bf16, numerics::fp8_e4m3, numerics::fp8_e5m2,
                            numerics::int8};
  for (numerics t : all) {
    const bool tn = t == numerics::fp8_e4m3 || t == numerics::fp8_e5m2 || t == numerics::int8;
    for (std::int64_t n : {256, 512, 1024, 2048, 4096, 8192, 16384}) {
      gpucmp::gemm_problem p;
      p.m = p.n = p.k = n;
      p.transpose_a = tn;
      p.dtype = t;
      // Square sizes also in kernel mode: --gpucmp_kernels_out then names the kernel each
      // algorithm runs (cuBLASLt's ids do not say the tile; the kernel's name does).
      register_gemm(p, gpucmp::algorithm_choice::search, {gpucmp::mode::graph, gpucmp::mode::kernel});
      register_gemm(p, gpucmp::algorithm_choice::heuristic, {gpucmp::mode::graph, gpucmp::mode::kernel});
    }
  }
  for (numerics t : {numerics::fp64, numerics::fp32, numerics::tf32, numerics::fp16, numerics::bf16}) {
    for (const auto& p : gpucmp::deepbench_gemm_shapes(t)) {
      register_gemm(p, gpucmp::algorithm_choice::search);
      register_gemm(p, gpucmp::algorithm_choice::heuristic);
    }
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
