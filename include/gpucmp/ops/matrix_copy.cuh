// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Copies batches of column-major matrices between buffers of different leading dimensions:
// how a gemm stages an operand whose columns do not start on 16-byte boundaries into an
// aligned buffer of its own, and copies a staged result back. Each column is moved in the
// widest words (8, 4, 2 or 1 bytes) that every column start and length allow.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gpucmp {

/// Where one batch of column-major matrices lives: leading dimension and batch stride in elements.
struct matrix_place {
  void* data = nullptr;     ///< first element of the first matrix
  std::int64_t ld = 0;      ///< elements from one column's start to the next
  std::int64_t stride = 0;  ///< elements from one matrix's start to the next (batch)
};

namespace detail {

// One flat walk over every word of every column of the batch, so short columns (35 FP16
// rows: 70 bytes) keep as many threads busy as long ones. Each thread steps a fixed number of
// columns and words ahead per iteration, so no division runs inside the loop.
template <class Word>
__global__ void copy_columns_kernel(const Word* src, std::int64_t src_ld, std::int64_t src_stride, Word* dst,
                                    std::int64_t dst_ld, std::int64_t dst_stride, std::int64_t column_words,
                                    std::int64_t cols, std::int64_t batch) {
  const std::int64_t first = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t step_columns = step / column_words, step_words = step % column_words;
  const std::int64_t step_matrices = step_columns / cols, step_cols = step_columns % cols;
  const std::int64_t column = first / column_words;
  std::int64_t r = first % column_words, j = column % cols, matrix = column / cols;
  while (matrix < batch) {
    dst[matrix * dst_stride + j * dst_ld + r] = src[matrix * src_stride + j * src_ld + r];
    r += step_words;
    j += step_cols;
    matrix += step_matrices;
    if (r >= column_words) {  // carried into the next column
      r -= column_words;
      ++j;
    }
    if (j >= cols) {  // at most 2 * cols - 1 here: one subtraction carries
      j -= cols;
      ++matrix;
    }
  }
}

template <class Word>
void launch_copy_columns(const matrix_place& dst, const matrix_place& src, std::int64_t rows, std::int64_t cols,
                         std::int64_t batch, std::size_t element_bytes, cudaStream_t stream) {
  // Exact: copy_word_bytes chose a word that divides every length and offset in bytes.
  const auto words = [&](std::int64_t elements) { return elements * std::int64_t(element_bytes) / std::int64_t(sizeof(Word)); };
  const std::int64_t column_words = words(rows);
  const unsigned threads = 256;
  // Enough blocks to fill any GPU several times over; the grid-stride loop covers the rest.
  const unsigned blocks = unsigned(std::min<std::int64_t>((column_words * cols * batch + threads - 1) / threads, 8192));
  copy_columns_kernel<Word><<<blocks, threads, 0, stream>>>(static_cast<const Word*>(src.data), words(src.ld),
                                                             words(src.stride), static_cast<Word*>(dst.data), words(dst.ld),
                                                             words(dst.stride), column_words, cols, batch);
  GPUCMP_CUDA_CHECK_LAST("copy_columns_kernel");
}

}  // namespace detail

/// The widest word (8, 4, 2 or 1 bytes) in which both places' columns of `rows` elements of
/// `element_bytes` can be copied: it divides every column's start and length in bytes.
inline std::size_t copy_word_bytes(const matrix_place& dst, const matrix_place& src, std::int64_t rows,
                                   std::size_t element_bytes) {
  for (std::size_t word : {std::size_t{8}, std::size_t{4}, std::size_t{2}}) {
    auto fits = [&](std::int64_t elements) { return (std::uint64_t(elements) * element_bytes) % word == 0; };
    auto address_fits = [&](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % word == 0; };
    if (fits(rows) && fits(src.ld) && fits(dst.ld) && fits(src.stride) && fits(dst.stride) && address_fits(src.data) &&
        address_fits(dst.data)) {
      return word;
    }
  }
  return 1;
}

/// Copies `batch` column-major matrices of `rows` x `cols` elements of `element_bytes` bytes
/// from `src` to `dst` on `stream` (the rows between `rows` and a leading dimension are left
/// alone). Throws invalid_argument for a leading dimension below `rows` or overlapping
/// matrices of a batch.
inline void copy_matrix_columns(const matrix_place& dst, const matrix_place& src, std::int64_t rows, std::int64_t cols,
                                std::int64_t batch, std::size_t element_bytes, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || batch <= 0) throw invalid_argument("copy_matrix_columns: rows, cols and batch must be positive");
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8) {
    throw invalid_argument("copy_matrix_columns: element size must be 1, 2, 4 or 8 bytes");
  }
  if (src.ld < rows || dst.ld < rows) throw invalid_argument("copy_matrix_columns: a leading dimension is less than rows");
  if (batch > 1 && (src.stride < src.ld * cols || dst.stride < dst.ld * cols)) {
    throw invalid_argument("copy_matrix_columns: a batch stride is less than one matrix");
  }
  switch (copy_word_bytes(dst, src, rows, element_bytes)) {
    case 8: detail::launch_copy_columns<std::uint64_t>(dst, src, rows, cols, batch, element_bytes, stream); break;
    case 4: detail::launch_copy_columns<std::uint32_t>(dst, src, rows, cols, batch, element_bytes, stream); break;
    case 2: detail::launch_copy_columns<std::uint16_t>(dst, src, rows, cols, batch, element_bytes, stream); break;
    default: detail::launch_copy_columns<std::uint8_t>(dst, src, rows, cols, batch, element_bytes, stream); break;
  }
}

}  // namespace gpucmp
