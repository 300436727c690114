// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Memory operations: every one is verified in full, a corrupted destination is caught, the
// kernels' tuning records its candidates, and bad sizes get typed errors; the matrix copy a
// gemm stages operands with moves every column and nothing else.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/ops/matrix_copy.cuh>
#include <gpucmp/ops/memory.cuh>
#include <gpucmp/cuda/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// The largest block the copy (or triad) kernel with Unroll loads in flight launches with.
template <int Unroll>
int max_block_threads(bool copy) {
  cudaFuncAttributes a{};
  const cudaError_t e = copy ? cudaFuncGetAttributes(&a, gpucmp::detail::copy_kernel<Unroll>)
                             : cudaFuncGetAttributes(&a, gpucmp::detail::triad_kernel<Unroll>);
  REQUIRE(e == cudaSuccess);
  return a.maxThreadsPerBlock;
}

}  // namespace

TEST_CASE("every memory operation copies every byte", "[gpu][ops][memory]") {
  gpucmp::stream s;
  for (auto op : {gpucmp::memory_op::copy_kernel, gpucmp::memory_op::triad_kernel, gpucmp::memory_op::memcpy_d2d,
                  gpucmp::memory_op::memcpy_h2d, gpucmp::memory_op::memcpy_d2h}) {
    for (std::size_t bytes : {std::size_t{4096 + 16}, std::size_t{64} << 20}) {
      gpucmp::memory_bandwidth m(op, bytes, s.get());
      gpucmp::choose_algorithm(m);
      const gpucmp::verification v = m.verify(s.get());
      INFO(gpucmp::to_string(op) << " " << bytes << ": " << v.summary());
      CHECK(v.passed());
      const gpucmp::work w = m.work();
      const bool over_bus = op == gpucmp::memory_op::memcpy_h2d || op == gpucmp::memory_op::memcpy_d2h;
      CHECK(w.bytes_written == (over_bus ? 0.0 : double(bytes)));
      CHECK(w.bytes_read == double(bytes) * (op == gpucmp::memory_op::triad_kernel ? 2 : 1));
      if (op == gpucmp::memory_op::copy_kernel || op == gpucmp::memory_op::triad_kernel) {
        // Every launchable shape of 4 block sizes x 4 unrolls is a candidate, and each ran:
        // a shape with more registers than an SM holds is left out, not tried and failed.
        const bool copy = op == gpucmp::memory_op::copy_kernel;
        const int limits[] = {max_block_threads<1>(copy), max_block_threads<2>(copy), max_block_threads<4>(copy),
                              max_block_threads<8>(copy)};
        std::size_t launchable = 0;
        for (int threads : {128, 256, 512, 1024}) {
          for (int limit : limits) launchable += threads <= limit ? 1 : 0;
        }
        CHECK(launchable >= 13);  // only 1024 threads can be out of reach (64 K registers per SM)
        CHECK(m.search_log().size() == launchable);
        for (const gpucmp::candidate_time& c : m.search_log()) {
          INFO(c.description << ": " << c.failure);
          CHECK(c.failure.empty());
          CHECK(c.seconds > 0);
        }
        CHECK(m.config().threads >= 128);
      }
    }
  }
}

TEST_CASE("a corrupted destination fails verification", "[gpu][ops][memory]") {
  gpucmp::stream s;
  for (auto op : {gpucmp::memory_op::copy_kernel, gpucmp::memory_op::triad_kernel, gpucmp::memory_op::memcpy_h2d}) {
    gpucmp::memory_bandwidth m(op, std::size_t{1} << 20, s.get());
    gpucmp::choose_algorithm(m);
    REQUIRE(m.verify(s.get()).passed());
    const std::uint32_t word = 0x12345678u;
    REQUIRE(cudaMemcpy(static_cast<char*>(m.destination()) + 4096, &word, sizeof word, cudaMemcpyHostToDevice) ==
            cudaSuccess);
    const gpucmp::verification v = m.check_output(s.get());
    CHECK_FALSE(v.passed());
    CHECK(v.failed == 1);
    CHECK(v.worst_where == (op == gpucmp::memory_op::triad_kernel ? "element 512" : "element 1024"));
  }
}

TEST_CASE("bad sizes get typed errors", "[gpu][ops][memory]") {
  CHECK_THROWS_WITH(gpucmp::memory_bandwidth(gpucmp::memory_op::copy_kernel, 10), GPUCMP_CONTAINS("multiple of 16"));
  CHECK_THROWS_AS(gpucmp::memory_bandwidth(gpucmp::memory_op::copy_kernel, std::size_t{1} << 42), gpucmp::out_of_memory);
}

TEST_CASE("copy_matrix_columns moves every column of a batch and leaves the rest alone", "[gpu][ops][memory]") {
  gpucmp::stream s;
  struct layout {
    std::int64_t rows, src_ld, dst_ld, cols, batch;
  };
  // Staging in (35 -> 40 rows), staging out (5128 -> 5124), odd everything, and aligned; the
  // last has more words (2.8 million) than the copy has threads, so each thread steps across
  // columns and matrices.
  for (const layout& l : {layout{35, 35, 40, 5, 2}, layout{5124, 5128, 5124, 5, 2}, layout{7, 9, 7, 5, 2},
                          layout{16, 16, 16, 5, 2}, layout{7, 9, 7, 1000, 400}}) {
    for (std::size_t element : {std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
      const std::int64_t cols = l.cols, batch = l.batch;
      const std::int64_t src_stride = l.src_ld * cols + 3, dst_stride = l.dst_ld * cols + 1;  // odd strides too
      std::vector<unsigned char> src_h(std::size_t(src_stride * batch) * element);
      for (std::size_t i = 0; i < src_h.size(); ++i) src_h[i] = static_cast<unsigned char>(i * 31 + 7);
      gpucmp::device_buffer<unsigned char> src(src_h.size(), gpucmp::initial_fill::uninitialized());
      src.copy_from_host(src_h);
      gpucmp::device_buffer<unsigned char> dst(std::size_t(dst_stride * batch) * element, gpucmp::initial_fill::uninitialized());
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(dst.data(), 0xAB, dst.bytes(), s.get()));
      const gpucmp::matrix_place from{src.data(), l.src_ld, src_stride}, to{dst.data(), l.dst_ld, dst_stride};
      gpucmp::copy_matrix_columns(to, from, l.rows, cols, batch, element, s.get());
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(s.get()));
      const std::vector<unsigned char> dst_h = dst.to_host();
      std::size_t wrong = 0, touched_padding = 0;
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t j = 0; j < cols; ++j)
          for (std::int64_t r = 0; r < l.dst_ld; ++r)
            for (std::size_t e = 0; e < element; ++e) {
              const std::size_t at = std::size_t(b * dst_stride + j * l.dst_ld + r) * element + e;
              if (r < l.rows) {
                wrong += dst_h[at] != src_h[std::size_t(b * src_stride + j * l.src_ld + r) * element + e];
              } else {
                touched_padding += dst_h[at] != 0xAB;
              }
            }
      INFO("rows " << l.rows << ", ld " << l.src_ld << " -> " << l.dst_ld << ", " << cols << " columns, batch " << batch << ", "
                   << element << "-byte elements");
      CHECK(wrong == 0);
      CHECK(touched_padding == 0);
    }
  }
  // The widest word that divides every column's start and length in bytes.
  auto word = [](std::int64_t rows, std::int64_t src_ld, std::int64_t dst_ld, std::size_t element) {
    return gpucmp::copy_word_bytes({nullptr, dst_ld, dst_ld * 3}, {nullptr, src_ld, src_ld * 3}, rows, element);
  };
  CHECK(word(5124, 5128, 5124, 2) == 8);  // 10,248-byte columns
  CHECK(word(35, 35, 40, 2) == 2);        // 70-byte columns
  CHECK(word(35, 35, 36, 4) == 4);        // 140-byte columns
  CHECK(word(7, 9, 7, 1) == 1);
  CHECK(word(7, 9, 7, 8) == 8);
  const gpucmp::matrix_place small{nullptr, 4, 0};
  CHECK_THROWS_WITH(gpucmp::copy_matrix_columns(small, small, 5, 1, 1, 2, s.get()),
                    GPUCMP_CONTAINS("a leading dimension is less than rows"));
  CHECK_THROWS_WITH(gpucmp::copy_matrix_columns(small, small, 4, 2, 2, 2, s.get()),
                    GPUCMP_CONTAINS("a batch stride is less than one matrix"));
  CHECK_THROWS_WITH(gpucmp::copy_matrix_columns(small, small, 4, 1, 1, 3, s.get()),
                    GPUCMP_CONTAINS("element size must be 1, 2, 4 or 8 bytes"));
}
