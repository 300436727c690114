// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A small stride-2 stem of two INT8 images, five filters: the shape space-to-depth regroups
// (models/space_to_depth.hpp), for the host tests of the regrouping and of its quantized input.
#pragma once

#include <gpucmp/models/space_to_depth.hpp>

#include <cstdint>

namespace gpucmp_test {

inline gpucmp::conv_problem stride_two_stem(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t rs, std::int64_t pad) {
  gpucmp::conv_problem p;
  p.n = 2;
  p.c = c;
  p.h = h;
  p.w = w;
  p.k = 5;
  p.r = p.s = rs;
  p.pad_h = p.pad_w = pad;
  p.stride_h = p.stride_w = 2;
  p.dtype = gpucmp::numerics::int8;
  return p;
}

}  // namespace gpucmp_test
