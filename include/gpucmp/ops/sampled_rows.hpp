// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Which rows of a large row-wise output a host reference checks, and copying just those rows
// back: the first and last rows in full and an even stride through the rest, so a check of
// 8k tokens x 14k elements costs milliseconds while every part of the grid is seen.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpucmp {

/// Rows a check compares, ascending: all of them when there are at most `budget`, else the
/// first and last 32 and an even stride through the middle (`budget` rows in all, about).
inline std::vector<std::int64_t> sampled_rows(std::int64_t rows, std::int64_t budget = 1024) {
  std::vector<std::int64_t> out;
  if (rows <= budget) {
    for (std::int64_t r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  const std::int64_t edge = 32;
  for (std::int64_t r = 0; r < edge; ++r) out.push_back(r);
  const std::int64_t middle = budget - 2 * edge;
  const std::int64_t stride = std::max<std::int64_t>(1, (rows - 2 * edge) / middle);
  for (std::int64_t r = edge; r < rows - edge; r += stride) out.push_back(r);
  for (std::int64_t r = rows - edge; r < rows; ++r) out.push_back(r);
  return out;
}

/// The rows `rows` of a device matrix of `row_elements` elements a row (row-major), copied to
/// the host one after another.
template <class T>
std::vector<T> copy_rows_to_host(const T* device, std::int64_t row_elements, const std::vector<std::int64_t>& rows) {
  std::vector<T> out(rows.size() * std::size_t(row_elements));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    GPUCMP_CUDA_CHECK(cudaMemcpy(out.data() + i * std::size_t(row_elements), device + rows[i] * row_elements,
                                 std::size_t(row_elements) * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return out;
}

}  // namespace gpucmp
