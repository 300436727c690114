// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The element type a training precision stores activations and gradients in, for code that
// picks a kernel template at run time: FP32 and TF32 store float, FP16 __half, BF16
// __nv_bfloat16.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/conv_problem.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace gpucmp {

/// Calls f(T{}) with the storage element of `t`.
template <class F>
decltype(auto) visit_storage(conv_dtype t, F&& f) {
  switch (t) {
    case conv_dtype::fp32:
    case conv_dtype::tf32: return f(float{});
    case conv_dtype::fp16: return f(__half{});
    case conv_dtype::bf16: return f(__nv_bfloat16{});
  }
  throw invalid_argument("unknown conv_dtype");
}

}  // namespace gpucmp
