// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The FP64 reference an attention backward's gradients are checked against, on the GPU (a
// long sequence's gradient needs every query row's softmax, billions of multiply-adds the CPU
// cannot do in a check's time) and independent of the operation under test: its own kernels,
// double precision throughout. For the first and last batch:
//   1. every query row's log-sum-exp of its scores, recomputed from Q and K (never the
//      forward's statistics), and D = dO . O from the stored O, which is how the backward
//      defines it (cuDNN takes O as an input), so the forward's own rounding is not charged
//      to the backward;
//   2. dQ at sampled query positions, every query head: scale * sum_j dS_ij K_j;
//   3. dK and dV at sampled key positions, every KV head, summed over its group of query
//      heads: scale * sum_i dS_ij Q_i and sum_i P_ij dO_i;
// where P_ij = exp(scale Q_i.K_j - lse_i) and dS_ij = P_ij (dO_i.V_j - D_i). Each output also
// gets the root of its squared terms (the rounding model's scale: the kernel rounds P and dS
// to the input type before its GEMMs) with a subnormal floor and, for dS, the rounding of dP -
// D (which cancels exactly where a query sees one key: FP32's, FP8's at BF16's), and the
// number of terms. FP8: the
// stored O and the gradients are descaled by the scales they were rounded at, and the floors
// of P and dS are their scales'.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/attention_problem.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {
namespace detail {

/// BSHD geometry of one attention problem's tensors, for the reference kernels.
struct attention_geometry {
  std::int64_t seq_q, seq_kv, q_heads, kv_heads, head_dim;
  bool causal;               ///< top-left: query i sees keys 0..i
  double scale;              ///< applied to Q K^T
  double floor_ratio = 0;    ///< P's rounding floor: half the smallest subnormal at P's scale, over the unit roundoff
  double ds_floor_ratio = 0;  ///< dS's, the same at dS's scale
  double cancel_ratio = 0;   ///< FP32's unit roundoff over the input type's: dS's cancellation, in P's units
  double o_descale = 1;      ///< what the stored O is multiplied by (FP8: 1 / its scale)
  double dq_descale = 1, dk_descale = 1, dv_descale = 1;  ///< the same for the stored gradients

  __host__ __device__ std::int64_t q_at(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return ((b * seq_q + i) * q_heads + h) * head_dim;
  }
  __host__ __device__ std::int64_t kv_at(std::int64_t b, std::int64_t j, std::int64_t h) const {
    return ((b * seq_kv + j) * kv_heads + h) * head_dim;
  }
  /// Keys query i sees.
  __host__ __device__ std::int64_t keys_seen(std::int64_t i) const {
    return causal ? (i + 1 < seq_kv ? i + 1 : seq_kv) : seq_kv;
  }
  /// The first query that sees key j.
  __host__ __device__ std::int64_t first_query(std::int64_t j) const { return causal ? j : 0; }
};

inline constexpr unsigned attention_reference_threads = 256;

template <class T>
__device__ double dot_row(const double* shared_row, const T* row, std::int64_t n) {
  double s = 0;
  for (std::int64_t c = 0; c < n; ++c) s += shared_row[c] * to_double(row[c]);
  return s;
}

// As dot_row, with the sum of the products' magnitudes in `magnitude`.
template <class T>
__device__ double dot_row(const double* shared_row, const T* row, std::int64_t n, double& magnitude) {
  double s = 0, m = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    const double product = shared_row[c] * to_double(row[c]);
    s += product;
    m += fabs(product);
  }
  magnitude = m;
  return s;
}

// One block per query row (batch slot, head, position): its log-sum-exp over the keys it
// sees, merged across threads as online softmax does, D = dO . O and the sum of |dO O|.
template <class T>
__global__ void attention_row_statistics(attention_geometry g, const T* q, const T* k, const T* o, const T* dout,
                                         const std::int64_t* batches, double* lse, double* dsum, double* dsum_abs) {
  __shared__ double row[256], max_part[attention_reference_threads], sum_part[attention_reference_threads];
  const std::int64_t r = blockIdx.x;  // (slot, head, position)
  const std::int64_t i = r % g.seq_q, h = (r / g.seq_q) % g.q_heads, slot = r / (g.seq_q * g.q_heads);
  const std::int64_t b = batches[slot], kvh = h / (g.q_heads / g.kv_heads);
  for (std::int64_t c = threadIdx.x; c < g.head_dim; c += blockDim.x) row[c] = to_double(q[g.q_at(b, i, h) + c]);
  __syncthreads();
  double top = -INFINITY, sum = 0;
  for (std::int64_t j = threadIdx.x; j < g.keys_seen(i); j += blockDim.x) {
    const double s = g.scale * dot_row(row, k + g.kv_at(b, j, kvh), g.head_dim);
    if (s > top) {
      sum = sum * exp(top - s) + 1;
      top = s;
    } else {
      sum += exp(s - top);
    }
  }
  max_part[threadIdx.x] = top;
  sum_part[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double m = -INFINITY, l = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      if (sum_part[t] == 0) continue;
      const double mt = max_part[t], nm = mt > m ? mt : m;
      l = l * exp(m - nm) + sum_part[t] * exp(mt - nm);
      m = nm;
    }
    double d = 0, magnitude = 0;
    for (std::int64_t c = 0; c < g.head_dim; ++c) {
      const double product = to_double(dout[g.q_at(b, i, h) + c]) * to_double(o[g.q_at(b, i, h) + c]) * g.o_descale;
      d += product;
      magnitude += fabs(product);
    }
    lse[r] = m + log(l);
    dsum[r] = d;
    dsum_abs[r] = magnitude;
  }
}

/// What each checked output gets: the reference, its rounding scale, its terms, the value.
struct attention_reference_out {
  double* reference;
  double* l2;
  double* terms;
  double* got;
};

// One block per sampled query row (batch slot, head, position): dQ over tiles of keys, each
// thread scoring one key of a tile, then each thread one element of the head.
template <class T>
__global__ void attention_dq_reference(attention_geometry g, const T* q, const T* k, const T* v, const T* dout,
                                       const T* dq, const std::int64_t* batches, const std::int64_t* positions,
                                       std::int64_t position_count, const double* lse, const double* dsum,
                                       const double* dsum_abs, attention_reference_out out) {
  __shared__ double qrow[256], dorow[256], ds[attention_reference_threads], ds_err[attention_reference_threads];
  const std::int64_t r = blockIdx.x;  // (slot, head, sampled position)
  const std::int64_t p = r % position_count, h = (r / position_count) % g.q_heads,
                     slot = r / (position_count * g.q_heads);
  const std::int64_t b = batches[slot], i = positions[p], kvh = h / (g.q_heads / g.kv_heads);
  const std::int64_t stat = (slot * g.q_heads + h) * g.seq_q + i;
  for (std::int64_t c = threadIdx.x; c < g.head_dim; c += blockDim.x) {
    qrow[c] = to_double(q[g.q_at(b, i, h) + c]);
    dorow[c] = to_double(dout[g.q_at(b, i, h) + c]);
  }
  __syncthreads();
  const std::int64_t c = threadIdx.x, seen = g.keys_seen(i);
  double sum = 0, squares = 0;
  for (std::int64_t j0 = 0; j0 < seen; j0 += blockDim.x) {
    const std::int64_t j = j0 + threadIdx.x;
    if (j < seen) {
      const double s = g.scale * dot_row(qrow, k + g.kv_at(b, j, kvh), g.head_dim);
      double dp_abs = 0;
      const double dp = dot_row(dorow, v + g.kv_at(b, j, kvh), g.head_dim, dp_abs);
      const double p = exp(s - lse[stat]);
      ds[threadIdx.x] = p * (dp - dsum[stat]);
      // dP - D cancels (exactly, for a query that sees one key): FP32's rounding of both sums.
      ds_err[threadIdx.x] = p * g.cancel_ratio * (dp_abs + dsum_abs[stat]);
    }
    __syncthreads();
    if (c < g.head_dim) {
      const std::int64_t tile = seen - j0 < std::int64_t(blockDim.x) ? seen - j0 : blockDim.x;
      for (std::int64_t t = 0; t < tile; ++t) {
        const double x = g.scale * to_double(k[g.kv_at(b, j0 + t, kvh) + c]);
        sum += ds[t] * x;
        const double magnitude = fabs(x) * (fabs(ds[t]) + g.ds_floor_ratio + ds_err[t]);
        squares += magnitude * magnitude;
      }
    }
    __syncthreads();
  }
  if (c < g.head_dim) {
    const std::int64_t e = r * g.head_dim + c;
    out.reference[e] = sum;
    out.l2[e] = sqrt(squares);
    out.terms[e] = double(seen);
    out.got[e] = to_double(dq[g.q_at(b, i, h) + c]) * g.dq_descale;
  }
}

// One block per sampled key row (batch slot, KV head, position): dK and dV over the group's
// query heads and tiles of queries, each thread scoring one query of a tile, then each thread
// one element of the head. Outputs: dK's at [0, n), dV's at [n, 2n).
template <class T>
__global__ void attention_dkv_reference(attention_geometry g, const T* q, const T* k, const T* v, const T* dout,
                                        const T* dk, const T* dv, const std::int64_t* batches,
                                        const std::int64_t* positions, std::int64_t position_count, const double* lse,
                                        const double* dsum, const double* dsum_abs, attention_reference_out out,
                                        std::int64_t n) {
  __shared__ double krow[256], vrow[256], pt[attention_reference_threads], ds[attention_reference_threads],
      ds_err[attention_reference_threads];
  const std::int64_t r = blockIdx.x;  // (slot, KV head, sampled position)
  const std::int64_t p = r % position_count, kvh = (r / position_count) % g.kv_heads,
                     slot = r / (position_count * g.kv_heads);
  const std::int64_t b = batches[slot], j = positions[p], group = g.q_heads / g.kv_heads;
  for (std::int64_t c = threadIdx.x; c < g.head_dim; c += blockDim.x) {
    krow[c] = to_double(k[g.kv_at(b, j, kvh) + c]);
    vrow[c] = to_double(v[g.kv_at(b, j, kvh) + c]);
  }
  __syncthreads();
  const std::int64_t c = threadIdx.x, first = g.first_query(j);
  double dk_sum = 0, dk_squares = 0, dv_sum = 0, dv_squares = 0;
  for (std::int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (std::int64_t i0 = first; i0 < g.seq_q; i0 += blockDim.x) {
      const std::int64_t i = i0 + threadIdx.x;
      if (i < g.seq_q) {
        const std::int64_t stat = (slot * g.q_heads + h) * g.seq_q + i;
        const double s = g.scale * dot_row(krow, q + g.q_at(b, i, h), g.head_dim);
        double dp_abs = 0;
        const double dp = dot_row(vrow, dout + g.q_at(b, i, h), g.head_dim, dp_abs);
        pt[threadIdx.x] = exp(s - lse[stat]);
        ds[threadIdx.x] = pt[threadIdx.x] * (dp - dsum[stat]);
        ds_err[threadIdx.x] = pt[threadIdx.x] * g.cancel_ratio * (dp_abs + dsum_abs[stat]);
      }
      __syncthreads();
      if (c < g.head_dim) {
        const std::int64_t tile = g.seq_q - i0 < std::int64_t(blockDim.x) ? g.seq_q - i0 : blockDim.x;
        for (std::int64_t t = 0; t < tile; ++t) {
          const double x = g.scale * to_double(q[g.q_at(b, i0 + t, h) + c]);
          const double y = to_double(dout[g.q_at(b, i0 + t, h) + c]);
          dk_sum += ds[t] * x;
          dv_sum += pt[t] * y;
          const double mk = fabs(x) * (fabs(ds[t]) + g.ds_floor_ratio + ds_err[t]), mv = fabs(y) * (pt[t] + g.floor_ratio);
          dk_squares += mk * mk;
          dv_squares += mv * mv;
        }
      }
      __syncthreads();
    }
  }
  if (c < g.head_dim) {
    const std::int64_t e = r * g.head_dim + c;
    const double terms = g.seq_q > first ? double(group) * double(g.seq_q - first) : 0;  // none: a key past every query
    out.reference[e] = dk_sum;
    out.l2[e] = sqrt(dk_squares);
    out.terms[e] = terms;
    out.got[e] = to_double(dk[g.kv_at(b, j, kvh) + c]) * g.dk_descale;
    out.reference[n + e] = dv_sum;
    out.l2[n + e] = sqrt(dv_squares);
    out.terms[n + e] = terms;
    out.got[n + e] = to_double(dv[g.kv_at(b, j, kvh) + c]) * g.dv_descale;
  }
}

}  // namespace detail

/// Device pointers of an attention backward's tensors, BSHD (element type T).
struct attention_gradients_view {
  const void *q, *k, *v, *o, *dout, *dq, *dk, *dv;
};

/// What an FP8 backward multiplied O, dS and the gradients by before rounding them to E4M3
/// (1 for BF16 and FP16).
struct attention_gradient_scales {
  double o = 1, ds = 1, dq = 1, dk = 1, dv = 1;
};

/// Checks dQ, dK and dV of `p` (a backward) as they are now in `t` against the FP64 GPU
/// reference (this header's opening comment): dQ at attention_sampled_positions(seq_q) and dK,
/// dV at attention_sampled_positions(seq_kv), of the first and last batch, every head, each
/// within p.output_tolerance() of its terms, its absolute floor that of its own scale. T: the
/// stored element type.
template <class T>
verification check_attention_gradients(const attention_problem& p, const attention_gradients_view& t,
                                       cudaStream_t stream, const attention_gradient_scales& scales = {}) {
  const tolerance tol = p.output_tolerance();
  detail::attention_geometry g{p.seq_q,    p.seq_kv, p.q_heads, p.kv_heads, p.head_dim, p.mask == attention_mask::causal,
                               p.applied_scale()};
  const element_type stored = types_of(p.dtype).input;
  const double half_subnormal = element_info_of(stored).smallest_subnormal / 2;
  g.floor_ratio = p.p_floor();
  g.ds_floor_ratio = half_subnormal / scales.ds / tol.input_eps;
  // dP - D cancels where a query sees one key. FP32 sums leave FP32's rounding; cuDNN's FP8
  // backward leaves residuals of about 2^-11 of |dP| there (H100, cuDNN 9.19: a 16-bit step
  // inside), so FP8 is charged BF16's rounding.
  g.cancel_ratio = unit_roundoff(p.is_fp8() ? element_type::bf16 : element_type::fp32) / tol.input_eps;
  g.o_descale = 1 / scales.o;
  g.dq_descale = 1 / scales.dq;
  g.dk_descale = 1 / scales.dk;
  g.dv_descale = 1 / scales.dv;
  std::vector<std::int64_t> batches{0};
  if (p.batch > 1) batches.push_back(p.batch - 1);
  const std::vector<std::int64_t> queries = attention_sampled_positions(p.seq_q),
                                  keys = attention_sampled_positions(p.seq_kv);
  const std::int64_t slots = std::int64_t(batches.size());
  device_buffer<std::int64_t> batches_d(batches.size(), initial_fill::uninitialized()),
      queries_d(queries.size(), initial_fill::uninitialized()), keys_d(keys.size(), initial_fill::uninitialized());
  batches_d.copy_from_host(batches);
  queries_d.copy_from_host(queries);
  keys_d.copy_from_host(keys);
  const std::size_t rows = std::size_t(slots * p.q_heads * p.seq_q);
  device_buffer<double> lse(rows, initial_fill::poison()), dsum(rows, initial_fill::poison()),
      dsum_abs(rows, initial_fill::poison());
  const T* q = static_cast<const T*>(t.q);
  const T* k = static_cast<const T*>(t.k);
  const T* v = static_cast<const T*>(t.v);
  const T* dout = static_cast<const T*>(t.dout);
  const unsigned threads = detail::attention_reference_threads;
  detail::attention_row_statistics<T><<<unsigned(rows), threads, 0, stream>>>(
      g, q, k, static_cast<const T*>(t.o), dout, batches_d.data(), lse.data(), dsum.data(), dsum_abs.data());
  GPUCMP_CUDA_CHECK_LAST("attention_row_statistics");

  const std::int64_t dq_rows = slots * p.q_heads * std::int64_t(queries.size());
  const std::int64_t dkv_rows = slots * p.kv_heads * std::int64_t(keys.size());
  const std::size_t dq_n = std::size_t(dq_rows * p.head_dim), dkv_n = std::size_t(dkv_rows * p.head_dim);
  const std::size_t total = dq_n + 2 * dkv_n;
  device_buffer<double> reference(total, initial_fill::poison()), l2(total, initial_fill::poison()),
      terms(total, initial_fill::poison()), got(total, initial_fill::poison());
  detail::attention_reference_out dq_out{reference.data(), l2.data(), terms.data(), got.data()};
  detail::attention_reference_out dkv_out{reference.data() + dq_n, l2.data() + dq_n, terms.data() + dq_n,
                                          got.data() + dq_n};
  detail::attention_dq_reference<T><<<unsigned(dq_rows), threads, 0, stream>>>(
      g, q, k, v, dout, static_cast<const T*>(t.dq), batches_d.data(), queries_d.data(), std::int64_t(queries.size()),
      lse.data(), dsum.data(), dsum_abs.data(), dq_out);
  GPUCMP_CUDA_CHECK_LAST("attention_dq_reference");
  detail::attention_dkv_reference<T><<<unsigned(dkv_rows), threads, 0, stream>>>(
      g, q, k, v, dout, static_cast<const T*>(t.dk), static_cast<const T*>(t.dv), batches_d.data(), keys_d.data(),
      std::int64_t(keys.size()), lse.data(), dsum.data(), dsum_abs.data(), dkv_out, std::int64_t(dkv_n));
  GPUCMP_CUDA_CHECK_LAST("attention_dkv_reference");
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<double> ref_h = reference.to_host(), l2_h = l2.to_host(), terms_h = terms.to_host(),
                            got_h = got.to_host();

  verification ver;
  ver.method = "FP64 GPU reference: dQ at " + std::to_string(queries.size()) + " query positions, dK and dV at " +
               std::to_string(keys.size()) + " key positions, of " + std::to_string(batches.size()) +
               " batch(es), every head; D from the stored O";
  // Each gradient's own rounding floor: half a subnormal at the scale it was stored at.
  tolerance dq_tol = tol, dk_tol = tol, dv_tol = tol;
  dq_tol.output_abs = half_subnormal / scales.dq;
  dk_tol.output_abs = half_subnormal / scales.dk;
  dv_tol.output_abs = half_subnormal / scales.dv;
  for (std::size_t e = 0; e < total; ++e) {
    const tolerance& own = e < dq_n ? dq_tol : e < dq_n + dkv_n ? dk_tol : dv_tol;
    ver.add_at(got_h[e], ref_h[e], own.bound(ref_h[e], l2_h[e], terms_h[e]), [&] {
      const bool is_dq = e < dq_n;
      const std::size_t local = is_dq ? e : (e - dq_n) % dkv_n;
      const std::int64_t heads = is_dq ? p.q_heads : p.kv_heads;
      const std::vector<std::int64_t>& positions = is_dq ? queries : keys;
      const std::int64_t element = std::int64_t(local) % p.head_dim, row = std::int64_t(local) / p.head_dim;
      const std::int64_t position = positions[std::size_t(row % std::int64_t(positions.size()))];
      const std::int64_t head = (row / std::int64_t(positions.size())) % heads;
      const std::int64_t slot = row / (std::int64_t(positions.size()) * heads);
      const char* which = is_dq ? "dQ" : e < dq_n + dkv_n ? "dK" : "dV";
      return std::string(which) + " batch " + std::to_string(batches[std::size_t(slot)]) + ", position " +
             std::to_string(position) + ", head " + std::to_string(head) + ", element " + std::to_string(element);
    });
  }
  return ver;
}

}  // namespace gpucmp
