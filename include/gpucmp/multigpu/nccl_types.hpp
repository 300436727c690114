// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NCCL's tag of each element type of the vocabulary (cuda/element_type.hpp), for the
// collectives and for data-parallel training's gradient all-reduce.
#pragma once

#include <gpucmp/cuda/element_type.hpp>

#include <nccl.h>

namespace gpucmp {

/// NCCL's tag of `t` (FP8 needs NCCL 2.24+, which gpucmp::nccl requires).
inline ncclDataType_t nccl_data_type(element_type t) noexcept {
  switch (t) {
    case element_type::fp64: return ncclFloat64;
    case element_type::fp32: return ncclFloat32;
    case element_type::fp16: return ncclFloat16;
    case element_type::bf16: return ncclBfloat16;
    case element_type::fp8_e4m3: return ncclFloat8e4m3;
    case element_type::fp8_e5m2: return ncclFloat8e5m2;
    case element_type::int8: return ncclInt8;
    case element_type::int32: return ncclInt32;
  }
  return ncclFloat32;  // not reached: every value has its case
}

}  // namespace gpucmp
