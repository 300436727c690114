// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The transformer block's memory-bound operations against the copy rate: RMSNorm (alone and
// fused with the residual add), RoPE on the fused QKV rows and SwiGLU, each verified before it
// is timed, at Llama-3-8B's widths over a sweep of tokens, each beside a verified copy kernel
// that moves the same bytes (read + written) in the same run, so scripts/bandwidth-fraction.py
// reads each row as a fraction of the copy rate. Names:
//   rmsnorm/<dtype>/<tokens>x<hidden>[+residual]/graph
//   rope/<dtype>/<tokens>x<q heads>+<kv heads>x<head dim>/<pairs>/graph
//   swiglu/<dtype>/<tokens>x<intermediate>/graph
//   copy/kernel/<bytes per buffer>/graph       (the copy each row above is read against)
// BF16 over the whole sweep; FP16 and FP32 at 8,192 tokens.
#include "copy_rows.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/rmsnorm.cuh>
#include <gpucmp/ops/rope.cuh>
#include <gpucmp/ops/swiglu.cuh>

#include <cstdint>
#include <string>

namespace {

template <class Op, class Problem>
void register_op(const std::string& prefix, const Problem& p) {
  gpucmp::register_benchmark(prefix + "/" + p.name(),
                             [p](gpucmp::state& st) {
                               Op op(p, st.stream());
                               gpucmp::run_verified(st, op);
                             },
                             {gpucmp::mode::graph});
  gpucmp_bench::register_copy_for(p.work());
}

void register_tokens(std::int64_t tokens, gpucmp::numerics t) {
  for (bool residual : {false, true}) {
    gpucmp::rmsnorm_problem n;
    n.tokens = tokens;
    n.hidden = 4096;
    n.dtype = t;
    n.residual = residual;
    register_op<gpucmp::rmsnorm>("rmsnorm", n);
  }
  gpucmp::rope_problem r;  // Llama-3-8B: 32 query heads, 8 KV heads of 128, theta 500,000
  r.tokens = tokens;
  r.dtype = t;
  register_op<gpucmp::rope>("rope", r);
  for (std::int64_t intermediate : {4096, 14336}) register_op<gpucmp::swiglu>("swiglu", gpucmp::swiglu_problem{tokens, intermediate, t});
}

const bool registered = [] {
  for (std::int64_t tokens : {1, 16, 128, 1024, 4096, 8192, 16384}) register_tokens(tokens, gpucmp::numerics::bf16);
  for (gpucmp::numerics t : {gpucmp::numerics::fp16, gpucmp::numerics::fp32}) register_tokens(8192, t);
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
