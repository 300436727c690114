// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The element type a training precision stores activations and gradients in, for code that
// picks a kernel template at run time: FP32 and TF32 store float, FP16 __half, BF16
// __nv_bfloat16.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/conv_problem.hpp>

#include <utility>

namespace gpucmp {

/// Calls f(T{}) with the element activations and gradients are stored in under `t` (its
/// output type: float for FP32 and TF32, __half, __nv_bfloat16).
template <class F>
decltype(auto) visit_storage(numerics t, F&& f) {
  return visit_floating_storage(types_of(t).output, std::forward<F>(f));
}

}  // namespace gpucmp
