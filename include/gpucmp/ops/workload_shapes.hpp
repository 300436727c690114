// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The shapes the bundled sweeps run: DeepBench's representative GEMM and convolution shapes
// (baidu-research/DeepBench @da81ba7, code/kernels/*.h; as listed in the project's
// workload-shapes notes) and the distinct convolutions of ResNet-50 v1.5. Host-only.
#pragma once

#include <gpucmp/data/resnet50_v1_5.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/gemm_problem.hpp>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace gpucmp {

/// DeepBench's representative GEMMs (M, N, K, op(A), op(B); column-major), in `dtype`.
inline std::vector<gemm_problem> deepbench_gemm_shapes(numerics dtype) {
  struct row {
    std::int64_t m, n, k;
    bool ta, tb;
  };
  static const row rows[] = {
      {1760, 128, 1760, false, false}, {2560, 64, 2560, false, false},  {4096, 128, 4096, false, false},
      {4096, 7000, 4096, false, false}, {5124, 9124, 2560, true, false}, {35, 8457, 2560, false, false},
      {7680, 128, 2560, false, false},  {3072, 128, 1024, true, false},  {1024, 16, 500000, false, false},
      {7680, 24000, 2560, false, false}, {512, 24000, 2816, false, false},
  };
  std::vector<gemm_problem> out;
  for (const row& r : rows) {
    gemm_problem p;
    p.m = r.m;
    p.n = r.n;
    p.k = r.k;
    p.transpose_a = r.ta;
    p.transpose_b = r.tb;
    p.dtype = dtype;
    out.push_back(p);
  }
  return out;
}

/// DeepBench's representative convolutions (its tuples are W, H, C, N, K, S, R, pad_w, pad_h,
/// stride_w, stride_h; NCHW in DeepBench), in `dtype` and `layout`.
inline std::vector<conv_problem> deepbench_conv_shapes(numerics dtype, conv_layout layout) {
  struct row {
    std::int64_t w, h, c, n, k, s, r, pad, stride;
  };
  static const row rows[] = {
      {224, 224, 3, 16, 64, 7, 7, 3, 2},    {56, 56, 64, 16, 64, 3, 3, 1, 1},    {28, 28, 128, 16, 128, 3, 3, 1, 1},
      {14, 14, 256, 16, 256, 3, 3, 1, 1},   {7, 7, 512, 16, 512, 3, 3, 1, 1},    {56, 56, 64, 16, 256, 1, 1, 0, 1},
      {56, 56, 256, 16, 64, 1, 1, 0, 1},    {14, 14, 1024, 16, 256, 1, 1, 0, 1}, {7, 7, 2048, 16, 512, 1, 1, 0, 1},
      {28, 28, 256, 16, 512, 3, 3, 1, 1},   {700, 161, 1, 32, 32, 5, 20, 0, 2},  {341, 79, 32, 32, 32, 5, 10, 0, 2},
  };
  std::vector<conv_problem> out;
  for (const row& x : rows) {
    conv_problem p;
    p.n = x.n;
    p.c = x.c;
    p.h = x.h;
    p.w = x.w;
    p.k = x.k;
    p.r = x.r;
    p.s = x.s;
    p.pad_h = p.pad_w = x.pad;
    p.stride_h = p.stride_w = x.stride;
    p.dtype = dtype;
    p.layout = layout;
    out.push_back(p);
  }
  return out;
}

/// The distinct convolutions of ResNet-50 v1.5 (23 of its 53), first-use order, at `batch`.
inline std::vector<conv_problem> resnet50_conv_shapes(std::int64_t batch, numerics dtype, conv_layout layout) {
  std::vector<conv_problem> out;
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> seen;
  for (const data::conv_layer& l : data::resnet50_v1_5_convs) {
    const auto key = std::make_tuple(l.in_channels, l.out_channels, l.kernel, l.stride, l.padding, l.input_size);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    conv_problem p;
    p.n = batch;
    p.c = l.in_channels;
    p.h = p.w = l.input_size;
    p.k = l.out_channels;
    p.r = p.s = l.kernel;
    p.pad_h = p.pad_w = l.padding;
    p.stride_h = p.stride_w = l.stride;
    p.dtype = dtype;
    p.layout = layout;
    out.push_back(p);
  }
  return out;
}

}  // namespace gpucmp
