// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Decode GEMV sweep: Llama-3-8B's five decode GEMVs (fused QKV, O, fused gate and up, down,
// LM head) at 1 to 64 tokens, BF16 (and with E4M3 weights at 1, 4 and 8 tokens), each through
// gpucmp's verified GEMV (ops/gemv.cuh: cuBLASLt's algorithms and split-K variants beside
// gpucmp's own kernel, the verified fastest kept), each beside a verified copy kernel that moves the same bytes in the same run, so
// scripts/bandwidth-fraction.py reads each row as a fraction of the copy rate and, given
// scripts/peers/torch_gemv.py's output, against PyTorch on the same shapes. Graph replays keep
// a weight matrix smaller than L2 (the O projection's 32 MB) in L2, which a decode step through
// 32 layers never does; so at 1 and 8 tokens each GEMV and its copy are also timed cold, L2
// flushed before every call. Names:
//   gemv/<dtype>/b<tokens>_n<out features>_k<in features>[/fp8_weights]/<graph or cold>
//   copy/kernel/<bytes per buffer>/<graph or cold>
#include "copy_rows.hpp"
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/gemv.cuh>

#include <cublasLt.h>

#include <cstdint>

namespace {

const bool registered = [] {
  gpucmp_bench::add_version_context("cublaslt_version", cublasLtGetVersion());
  auto add = [](const gpucmp::gemv_problem& p, gpucmp::mode m) {
    gpucmp::register_benchmark("gemv/" + p.name(),
                               [p](gpucmp::state& st) {
                                 gpucmp::gemv op(p, {}, st.stream());
                                 gpucmp::run_verified(st, op);
                               },
                               {m});
    gpucmp_bench::register_copy_for(p.work(), m);
  };
  for (std::int64_t batch : {1, 2, 4, 8, 16, 32, 64}) {
    for (const gpucmp::named_gemv& g : gpucmp::llama3_8b_gemvs(batch)) add(g.problem, gpucmp::mode::graph);
  }
  for (std::int64_t batch : {1, 8}) {
    for (const gpucmp::named_gemv& g : gpucmp::llama3_8b_gemvs(batch)) add(g.problem, gpucmp::mode::cold);
  }
  // E4M3 weights (weight-only quantization) where gpucmp's kernel takes the batch.
  for (std::int64_t batch : {1, 4, 8}) {
    for (gpucmp::named_gemv g : gpucmp::llama3_8b_gemvs(batch)) {
      g.problem.fp8_weights = true;
      add(g.problem, gpucmp::mode::graph);
    }
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
