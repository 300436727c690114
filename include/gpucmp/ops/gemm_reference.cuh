// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The FP64 reference a GEMM's output is checked against, whichever library computed it
// (cuBLASLt's dense GEMM, cuSPARSELt's 2:4 sparse one): outputs chosen so that every tile is
// touched (all of them for small problems; whole rows and columns, first, last and random,
// of the first and last batch for large ones), each recomputed in double precision (on the
// CPU, independent of any GPU code, up to 2^27 multiply-adds; one warp an output on the GPU
// beyond), with the root of its squared products as the rounding model's scale; then each
// compared within its precision's bound. Column-major, the cuBLAS convention.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gpucmp {
namespace detail {

/// Where one output lives and which operands it reads.
struct gemm_geometry {
  std::int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
  bool transpose_a, transpose_b;
};

// One warp per checked output: its exact value (times scale), the root of its squared
// products (the rounding model's scale) and the value the GEMM wrote.
template <class A, class B, class C>
__global__ void gemm_reference_kernel(const A* a, const B* b, const C* c, gemm_geometry g,
                                      const std::int64_t* where, std::size_t count, double scale, double* reference,
                                      double* l2, double* got) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (warp >= count) return;  // whole warps leave together
  const std::int64_t batch = where[3 * warp], i = where[3 * warp + 1], j = where[3 * warp + 2];
  const A* ab = a + batch * g.stride_a;
  const B* bb = b + batch * g.stride_b;
  double sum = 0, squares = 0;
  for (std::int64_t l = lane; l < g.k; l += 32) {
    const double x = to_double(g.transpose_a ? ab[l + i * g.lda] : ab[i + l * g.lda]);
    const double y = to_double(g.transpose_b ? bb[j + l * g.ldb] : bb[l + j * g.ldb]);
    sum += x * y;
    squares += (x * y) * (x * y);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
    squares += __shfl_down_sync(0xffffffffu, squares, offset);
  }
  if (lane == 0) {
    reference[warp] = scale * sum;
    l2[warp] = std::fabs(scale) * sqrt(squares);
    got[warp] = to_double(c[batch * g.stride_c + i + j * g.ldc]);
  }
}

/// Up to `count` distinct indices in [0, extent): the first and last, then random ones; all
/// of them when extent <= count.
inline std::vector<std::int64_t> sample_indices(std::int64_t extent, std::int64_t count, std::uint64_t seed) {
  std::set<std::int64_t> picked;
  if (extent <= count) {
    for (std::int64_t i = 0; i < extent; ++i) picked.insert(i);
  } else {
    picked.insert(0);
    picked.insert(extent - 1);
    for (std::uint64_t t = 0; std::int64_t(picked.size()) < count; ++t) {
      picked.insert(std::int64_t(random_bits(seed, t) % std::uint64_t(extent)));
    }
  }
  return {picked.begin(), picked.end()};
}

/// The reference at a GEMM's sampled outputs: where (batch, row, column triples), the FP64
/// value, its rounding scale and what the GEMM wrote.
struct gemm_reference_values {
  std::vector<std::int64_t> where;  ///< batch, row, column of each output
  std::vector<double> reference, l2, got;
  std::string method;               ///< how they were chosen and computed
};

/// The reference of the GEMM `g` (`batch` of them) at sampled outputs, `scale` times the exact
/// product of A and B (element types A, B; C the output's), read from device memory.
template <class A, class B, class C>
gemm_reference_values gemm_reference_at_samples(const gemm_geometry& g, std::int64_t batch, const void* a_device,
                                                std::size_t a_elements, const void* b_device, std::size_t b_elements,
                                                const void* c_device, std::size_t c_elements, double scale,
                                                cudaStream_t stream) {
  // Small problems: every output. Large ones: whole rows and columns (first, last and
  // random ones) of the first and last batch, which touch every tile of the output.
  const bool everything = double(batch) * double(g.m) * double(g.n) <= double(1 << 20);
  std::vector<std::int64_t> where;
  std::vector<std::int64_t> batches = everything ? sample_indices(batch, batch, 0) : sample_indices(batch, 2, 0);
  std::vector<std::int64_t> rows = everything ? sample_indices(g.m, g.m, 0) : sample_indices(g.m, 16, 11);
  std::vector<std::int64_t> cols = everything ? std::vector<std::int64_t>{} : sample_indices(g.n, 16, 12);
  const std::set<std::int64_t> row_set(rows.begin(), rows.end());
  for (std::int64_t bt : batches) {
    for (std::int64_t i : rows)
      for (std::int64_t j = 0; j < g.n; ++j) where.insert(where.end(), {bt, i, j});
    for (std::int64_t j : cols)
      for (std::int64_t i = 0; i < g.m; ++i)
        if (!row_set.count(i)) where.insert(where.end(), {bt, i, j});
  }
  const std::size_t count = where.size() / 3;
  gemm_reference_values out;
  out.reference.resize(count);
  out.l2.resize(count);
  out.got.resize(count);
  // Up to 2^27 multiply-adds the reference runs on the CPU, independent of any GPU code.
  const bool on_cpu = everything && double(batch) * double(g.m) * double(g.n) * double(g.k) <= double(1 << 27);
  if (on_cpu) {
    std::vector<A> a(a_elements);
    std::vector<B> b(b_elements);
    std::vector<C> c(c_elements);
    GPUCMP_CUDA_CHECK(cudaMemcpy(a.data(), a_device, a_elements * sizeof(A), cudaMemcpyDeviceToHost));
    GPUCMP_CUDA_CHECK(cudaMemcpy(b.data(), b_device, b_elements * sizeof(B), cudaMemcpyDeviceToHost));
    GPUCMP_CUDA_CHECK(cudaMemcpy(c.data(), c_device, c_elements * sizeof(C), cudaMemcpyDeviceToHost));
    for (std::size_t e = 0; e < count; ++e) {
      const std::int64_t bt = where[3 * e], i = where[3 * e + 1], j = where[3 * e + 2];
      double sum = 0, squares = 0;
      for (std::int64_t l = 0; l < g.k; ++l) {
        const double x = to_double(a[std::size_t(bt * g.stride_a + (g.transpose_a ? l + i * g.lda : i + l * g.lda))]);
        const double y = to_double(b[std::size_t(bt * g.stride_b + (g.transpose_b ? j + l * g.ldb : l + j * g.ldb))]);
        sum += x * y;
        squares += (x * y) * (x * y);
      }
      out.reference[e] = scale * sum;
      out.l2[e] = std::fabs(scale) * std::sqrt(squares);
      out.got[e] = to_double(c[std::size_t(bt * g.stride_c + i + j * g.ldc)]);
    }
  } else {
    device_buffer<std::int64_t> where_d(where.size(), initial_fill::uninitialized());
    where_d.copy_from_host(where);
    device_buffer<double> reference(count, initial_fill::poison()), l2(count, initial_fill::poison()),
        got(count, initial_fill::poison());
    const unsigned threads = 256;
    const std::size_t blocks = (count * 32 + threads - 1) / threads;
    gemm_reference_kernel<A, B, C><<<unsigned(blocks), threads, 0, stream>>>(
        static_cast<const A*>(a_device), static_cast<const B*>(b_device), static_cast<const C*>(c_device), g,
        where_d.data(), count, scale, reference.data(), l2.data(), got.data());
    GPUCMP_CUDA_CHECK_LAST("gemm_reference_kernel");
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    out.reference = reference.to_host();
    out.l2 = l2.to_host();
    out.got = got.to_host();
  }
  out.where = std::move(where);
  out.method = std::string(on_cpu ? "FP64 CPU reference, " : "FP64 GPU reference, ") +
               (everything ? "every output" : "rows and columns incl. first and last, of the first and last batch");
  return out;
}

/// The check of `values` against `tol` over `k`-term sums; `locate(batch, row, column)` names
/// an output as its caller's layout calls it.
template <class Locate>
verification gemm_verification(const gemm_reference_values& values, const tolerance& tol, double k, Locate locate) {
  verification v;
  v.method = values.method;
  for (std::size_t e = 0; e < values.got.size(); ++e) {
    const double bound = tol.bound(values.reference[e], values.l2[e], k);
    const std::int64_t* w = &values.where[3 * e];
    const double err = std::fabs(values.got[e] - values.reference[e]);
    if (!(err <= bound) || v.checked == 0 || err / bound > v.worst_ratio) {
      v.add(values.got[e], values.reference[e], bound, locate(w[0], w[1], w[2]));
    } else {
      v.add(values.got[e], values.reference[e], bound, std::string());
    }
  }
  return v;
}

}  // namespace detail
}  // namespace gpucmp
