// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What the docs' C++ blocks leave to the reader, so that CI can compile them as shown
// (tests/docs/doc_snippets.py): the guide's saxpy kernel and its grid size.
#pragma once

#include <cstddef>

static __global__ void saxpy_kernel(std::size_t n, float a, const float* x, float* y) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

/// Blocks of 256 threads for n elements.
static inline unsigned grid(std::size_t n) { return unsigned((n + 255) / 256); }
