// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 4: the library's verified operations as building blocks. Your own GEMM and
// convolution shapes, checked against an FP64 reference before they are timed, with the
// algorithm the timed search chose in the label:
//   04_verified_ops --benchmark_filter=gemm
// Needs the gpucmp::cublas and gpucmp::cudnn components.
#include <gpucmp/bench.hpp>
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/gemm.cuh>

namespace {

// An MLP layer of your model: 4096 tokens x 4096 -> 11008, BF16, FP32 accumulate.
void mlp_up_projection(gpucmp::state& st) {
  gpucmp::gemm_problem p;
  p.m = 11008;
  p.n = 4096;
  p.k = 4096;
  p.dtype = gpucmp::numerics::bf16;
  gpucmp::gemm op(p, {}, st.stream());  // allocates and fills; times nothing
  gpucmp::run_verified(st, op);          // times cuBLASLt's candidates, keeps the verified fastest, checks it, times it
}

// A 3x3 convolution of your CNN, FP16 NHWC, batch 64.
void my_conv(gpucmp::state& st) {
  gpucmp::conv_problem p;
  p.n = 64;
  p.c = p.k = 128;
  p.h = p.w = 28;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  gpucmp::conv op(p, {}, st.stream());
  gpucmp::run_verified(st, op);
}

}  // namespace

GPUCMP_BENCHMARK(mlp_up_projection, gpucmp::mode::graph);
GPUCMP_BENCHMARK(my_conv, gpucmp::mode::graph);
GPUCMP_BENCHMARK_MAIN()
