// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A decode GEMV (ops/gemv_problem.hpp) as a verified operation (ops/operation.hpp) whose
// candidates come from two providers, chosen by one verified search:
//   - cuBLASLt, through the gemm operation (ops/gemm.cuh) of the same product: the
//     heuristic's algorithms and their split-K variants (a GEMV's output is far below one wave);
//   - gpucmp's own kernel for up to gemv_kernel_max_batch tokens: warps stream W's rows in
//     16-byte packs, several loads in flight per lane, FP32 sums for every token at once, and
//     `split` warps of a block share one row (split-K inside the block) where a row alone
//     holds too few bytes in flight. It also takes E4M3 weights with a per-tensor scale
//     (gemv_problem::fp8_weights, weight-only quantization), which no cuBLASLt GEMM does,
//     and fuses a decoder's RMSNorm before its product and residual add after it (gemv_fusion).
// cuBLASLt's tensor-core kernels tile for larger outputs, and at batch 1 a plain GEMV moves
// the weight at a fraction of the copy rate (PyTorch's O projection on the H200: 1,225 of
// 4,294 GB/s); the kernel is what reaches the copy rate there, the tensor cores what wins at
// tens of tokens. Both write the gemm operation's output, which its FP64 reference checks.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/cuda/launch.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/gemm.cuh>
#include <gpucmp/ops/gemm_reference.cuh>
#include <gpucmp/ops/gemv_problem.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/packed_elements.cuh>

#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp {

/// The most tokens gpucmp's GEMV kernel takes (its sums live in registers, one per token);
/// beyond, the tensor cores' GEMMs are the candidates.
inline constexpr int gemv_kernel_max_batch = 8;

namespace detail {

inline constexpr int gemv_block_threads = 256;  // 8 warps
inline constexpr int gemv_loads_in_flight = 4;  // 16-byte W vectors each lane loads before it sums

// Sixteen bytes of W as FP32 values: 8 FP16/BF16 weights or 16 E4M3 ones.
template <class W>
struct weight_pack {
  static constexpr int width = int(16 / sizeof(W));
  float v[width];
};

template <class W>
__device__ inline weight_pack<W> load_weights(const W* p) {  // W: read once, kept out of L1
  const uint4 raw = __ldcs(reinterpret_cast<const uint4*>(p));
  W stored[weight_pack<W>::width];
  static_assert(sizeof(stored) == sizeof(raw), "a pack is 16 bytes");
  memcpy(stored, &raw, sizeof(raw));
  weight_pack<W> out;
#pragma unroll
  for (int e = 0; e < weight_pack<W>::width; ++e) {
    if constexpr (std::is_same_v<W, __nv_fp8_e4m3>) {
      out.v[e] = float(stored[e]);  // Hopper converts E4M3 in hardware
    } else {
      out.v[e] = to_float(stored[e]);
    }
  }
  return out;
}

template <class T>
__device__ inline packed<T> load_cached(const T* p) {  // x: read by every row, kept in L1
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  packed<T> out;
  memcpy(&out, &raw, sizeof(raw));
  return out;
}

// Adds one pack of W's columns times every token's x at the same columns. Norm: W's columns
// times the RMSNorm weights g first, and, where `squares`, each token's x squared into `ss`.
template <class T, class W, int B, bool Norm>
__device__ inline void gemv_accumulate(weight_pack<W> w, const T* x, const T* g, std::int64_t k, std::int64_t column,
                                       bool squares, float (&sum)[B], float (&ss)[B]) {
  constexpr int X = packed<T>::width, parts = weight_pack<W>::width / X;
  if constexpr (Norm) {
#pragma unroll
    for (int part = 0; part < parts; ++part) {
      const packed<T> gv = load_cached(g + column + part * X);
#pragma unroll
      for (int e = 0; e < X; ++e) w.v[part * X + e] *= to_float(gv.v[e]);
    }
  }
#pragma unroll
  for (int b = 0; b < B; ++b) {
#pragma unroll
    for (int part = 0; part < parts; ++part) {
      const packed<T> xv = load_cached(x + b * k + column + part * X);
#pragma unroll
      for (int e = 0; e < X; ++e) {
        const float xe = to_float(xv.v[e]);
        sum[b] += w.v[part * X + e] * xe;
        if constexpr (Norm) {
          if (squares) ss[b] += xe * xe;
        }
      }
    }
  }
}

// y[b][row] = scale sum_c x[b][c] W[row][c] for B tokens. A block's 8 warps hold 8 / split
// rows; the `split` warps of a row read its 16-byte packs interleaved, gemv_loads_in_flight
// at a time, then sum across lanes (shuffles) and across the row's warps (shared memory).
// Launched overlapped (cuda/launch.hpp), its first packs of W, which no kernel writes, are in
// flight before it waits for the kernel that writes x.
// Fused around the product (gemv_fusion): Norm, x RMS-normalized with weights g first, as
// y = rsqrt(mean(x^2) + eps) sum_c (W g)[row][c] x[c], x's squares summed from the x each
// warp reads anyway, its rows taking turns a round of loads each so that no warp does more
// than its share (a block's warps wait for its slowest); `accumulate`, y += the product
// rounded to T first, as a separate residual add of the product rounds.
template <class T, class W, int B, bool Norm>
__global__ void __launch_bounds__(gemv_block_threads)
    gemv_kernel(const W* __restrict__ w, float scale, const T* __restrict__ x, T* __restrict__ y, std::int64_t n,
                std::int64_t k, int split, const T* __restrict__ g, float eps, bool accumulate) {
  constexpr int U = gemv_loads_in_flight, E = weight_pack<W>::width, warps = gemv_block_threads / 32;
  __shared__ float partial[warps][B];
  __shared__ float partial_squares[Norm ? warps : 1][B];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, rows = warps / split, turn = warp / split;
  const std::int64_t row = std::int64_t(blockIdx.x) * rows + turn;
  const W* w_row = w + (row < n ? row : 0) * k;
  // Norm: a row past n still reads x (on row 0's weights, its sums dropped) for its turns' squares.
  const std::int64_t packs = row < n || Norm ? k / E : 0, stride = std::int64_t(split) * 32;
  std::int64_t v = std::int64_t(warp % split) * 32 + lane;
  weight_pack<W> wv[U];
  if (v + (U - 1) * stride < packs) {
#pragma unroll
    for (int u = 0; u < U; ++u) wv[u] = load_weights(w_row + (v + u * stride) * E);
  }
  wait_for_prior_grids();
  let_next_grid_start();
  float sum[B] = {}, ss[B] = {};
  int round = 0;  // rounds of loads so far: the row whose turn it is sums the squares
  for (; v + (U - 1) * stride < packs; v += U * stride, ++round) {
    const bool squares = Norm && round % rows == turn;
#pragma unroll
    for (int u = 0; u < U; ++u) gemv_accumulate<T, W, B, Norm>(wv[u], x, g, k, (v + u * stride) * E, squares, sum, ss);
    const std::int64_t next = v + U * stride;
    if (next + (U - 1) * stride < packs) {
#pragma unroll
      for (int u = 0; u < U; ++u) wv[u] = load_weights(w_row + (next + u * stride) * E);
    }
  }
  for (; v < packs; v += stride, ++round) {
    gemv_accumulate<T, W, B, Norm>(load_weights(w_row + v * E), x, g, k, v * E, Norm && round % rows == turn, sum, ss);
  }
#pragma unroll
  for (int b = 0; b < B; ++b) {
    for (int offset = 16; offset > 0; offset /= 2) sum[b] += __shfl_xor_sync(0xffffffffu, sum[b], offset);
    if constexpr (Norm) {
      for (int offset = 16; offset > 0; offset /= 2) ss[b] += __shfl_xor_sync(0xffffffffu, ss[b], offset);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
      partial[warp][b] = sum[b];
      if constexpr (Norm) partial_squares[warp][b] = ss[b];
    }
  }
  __syncthreads();
  if (row < n && warp % split == 0 && lane < B) {
    float total = 0;
    for (int p = 0; p < split; ++p) total += partial[warp + p][lane];
    if constexpr (Norm) {
      float squared = 0;
      for (int p = 0; p < warps; ++p) squared += partial_squares[p][lane];
      total *= rsqrtf(squared / float(k) + eps);
    }
    T out = from_float<T>(total * scale);
    if (accumulate) out = from_float<T>(to_float(out) + to_float(y[lane * n + row]));
    y[lane * n + row] = out;
  }
}

// What the kernel fuses around its product (gemv_fusion, typed).
template <class T>
struct gemv_fused {
  const T* norm_weight = nullptr;  // not null: RMSNorm of x first
  float norm_eps = 0;
  bool accumulate = false;  // y += the product
};

template <class T, class W, int B>
void launch_gemv(const W* w, float scale, const T* x, T* y, std::int64_t n, std::int64_t k, int split,
                 const gemv_fused<T>& f, launch_order order, cudaStream_t stream) {
  const std::int64_t rows_per_block = gemv_block_threads / 32 / split;
  const std::int64_t blocks = (n + rows_per_block - 1) / rows_per_block;
  const auto kernel = f.norm_weight != nullptr ? gemv_kernel<T, W, B, true> : gemv_kernel<T, W, B, false>;
  launch_kernel(kernel, dim3(unsigned(blocks)), dim3(gemv_block_threads), 0, stream, order, "gemv_kernel", w, scale, x, y,
                n, k, split, f.norm_weight, f.norm_eps, f.accumulate);
}

template <class T, class W>
void launch_gemv(int batch, const W* w, float scale, const T* x, T* y, std::int64_t n, std::int64_t k, int split,
                 const gemv_fused<T>& f, launch_order order, cudaStream_t stream) {
  switch (batch) {
    case 1: return launch_gemv<T, W, 1>(w, scale, x, y, n, k, split, f, order, stream);
    case 2: return launch_gemv<T, W, 2>(w, scale, x, y, n, k, split, f, order, stream);
    case 3: return launch_gemv<T, W, 3>(w, scale, x, y, n, k, split, f, order, stream);
    case 4: return launch_gemv<T, W, 4>(w, scale, x, y, n, k, split, f, order, stream);
    case 5: return launch_gemv<T, W, 5>(w, scale, x, y, n, k, split, f, order, stream);
    case 6: return launch_gemv<T, W, 6>(w, scale, x, y, n, k, split, f, order, stream);
    case 7: return launch_gemv<T, W, 7>(w, scale, x, y, n, k, split, f, order, stream);
    case 8: return launch_gemv<T, W, 8>(w, scale, x, y, n, k, split, f, order, stream);
  }
  throw invalid_argument("gemv kernel: batch " + std::to_string(batch) + " is over " +
                         std::to_string(gemv_kernel_max_batch));
}

/// Calls f(T{}) with the activations' type of a GEMV in `t` (gemv_numerics: FP16 or BF16).
template <class F>
decltype(auto) visit_gemv_activations(numerics t, F&& f) {
  if (types_of(t).input == element_type::fp16) return f(__half{});
  return f(__nv_bfloat16{});
}

}  // namespace detail

/// How a GEMV is prepared.
struct gemv_options {
  algorithm_choice choice = algorithm_choice::search;  ///< search: time every candidate, keep the verified fastest
  search_options search = gemm_search_defaults();      ///< how the candidates are timed
  bool cublaslt = true;                                ///< cuBLASLt's algorithms are candidates
  bool kernel = true;  ///< gpucmp's kernel is (batch <= gemv_kernel_max_batch, k a multiple of 16 bytes)
  std::uint64_t seed = 1;  ///< operands' random stream
};

/// What gpucmp's GEMV kernel does around its product in gemv::run_on(): a decoder's RMSNorm
/// before a linear layer and its residual add after one, so neither is a kernel of its own.
/// Default: the plain product.
struct gemv_fusion {
  /// Not null: each token's x is RMS-normalized in FP32, x / sqrt(mean(x^2) + norm_eps), and
  /// multiplied by these k weights (the activations' type) before the product. x itself is
  /// read as it is: one rounding fewer than an RMSNorm kernel storing its output first.
  const void* norm_weight = nullptr;
  float norm_eps = 1e-5f;
  /// y += the product, rounded to the activations' type first as a separate add of it rounds
  /// (y holds the residual stream), instead of y = the product.
  bool add_to_output = false;
  bool any() const noexcept { return norm_weight != nullptr || add_to_output; }
};

/// What a GEMV runs now.
struct gemv_algorithm {
  std::string provider;                                      ///< "cuBLASLt" or "gpucmp"
  std::string candidate;                                     ///< describe_candidate() of it
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< heuristic: the first candidate
  double searched_seconds = 0;                               ///< its median in the search
  /// "gpucmp kernel, 2 warps a row (search)".
  std::string describe() const { return candidate + " (" + to_string(chosen_by) + ")"; }
};

/// One verified decode GEMV on the current device, W and x random.
class gemv {
 public:
  /// Prepares `p`: validates it, checks this GPU and free memory, allocates and fills W, x and
  /// y (16-bit weights: through the gemm of the same product, whose candidates and FP64
  /// reference it shares; E4M3 weights: its own, with a per-tensor scale of 0.5 so the scale
  /// path is checked), and lists the candidates: cuBLASLt's (16-bit weights, unless
  /// options.cublaslt is false; all of them, as a search needs) and the kernel's split
  /// settings where it applies. Throws invalid_argument, unsupported (also when the options
  /// leave no candidate) or out_of_memory.
  explicit gemv(const gemv_problem& p, const gemv_options& options = {}, cudaStream_t stream = nullptr)
      : m_problem((p.validate(), p)), m_options(options) {
    if (p.fp8_weights) {
      allocate_fp8(stream);
    } else {
      m_gemm.emplace(p.as_gemm(), gemm_settings(options), stream);
      m_from_cublaslt = options.cublaslt ? m_gemm->candidate_count() : 0;
    }
    if (kernel_applies(p) && options.kernel) m_splits = {1, 2, 4, 8};
    if (candidate_count() == 0) {
      throw unsupported("gemv: no candidate for " + p.name() + " (cuBLASLt " +
                        (options.cublaslt && !p.fp8_weights ? "on" : "off or not for E4M3 weights") +
                        "; gpucmp's kernel takes up to " + std::to_string(gemv_kernel_max_batch) +
                        " tokens and rows of whole 16-byte packs)");
    }
    select(0, stream);
  }

  /// "" when `device` can run `p`, else why not (E4M3 weights: any GPU, converted in the kernel).
  static std::string support(const gemv_problem& p, const gemv_options& options, const device_info& device) {
    return p.fp8_weights ? std::string() : gemm::support(p.as_gemm(), gemm_settings(options), device);
  }
  /// Device bytes it allocates for `p`: W, x, y (and cuBLASLt's workspace for 16-bit weights).
  static double bytes_needed(const gemv_problem& p, const gemv_options& options) {
    if (!p.fp8_weights) return gemm::bytes_needed(p.as_gemm(), gemm_settings(options));
    return p.weight_bytes() + double(p.batch) * double(p.k + p.n) * double(activation_bytes(p.dtype));
  }
  /// Whether gpucmp's kernel takes `p`: at most gemv_kernel_max_batch tokens, rows of W and x
  /// whole 16-byte packs.
  static bool kernel_applies(const gemv_problem& p) noexcept {
    const std::int64_t per_pack = 16 / std::int64_t(element_bytes(p.weight_type()));
    return p.batch <= gemv_kernel_max_batch && p.k % per_pack == 0 && p.k % (16 / std::int64_t(activation_bytes(p.dtype))) == 0;
  }

  /// Enqueues one call of the selected candidate.
  void operator()(cudaStream_t stream) { launch(w_data(), x_data(), output(), m_scale, stream); }

  /// Enqueues the selected candidate on the caller's W (n x k, row-major), x and y (batch rows)
  /// instead of its own: how a decoder runs a GEMV searched and verified on this operation's
  /// tensors. `weight_scale` is the caller's per-tensor scale of E4M3 weights (16-bit weights
  /// take none: 1); `fusion`, what gpucmp's kernel does around the product (kernel_selected()).
  /// Throws invalid_argument for a null pointer, a scale 16-bit weights cannot take, a bad
  /// norm epsilon or a fusion while cuBLASLt's candidate is selected.
  void run_on(const void* w, const void* x, void* y, cudaStream_t stream, float weight_scale = 1.0f,
              const gemv_fusion& fusion = {}) {
    if (w == nullptr || x == nullptr || y == nullptr) throw invalid_argument(name() + ": run_on needs W, x and y");
    if (!m_problem.fp8_weights && weight_scale != 1.0f) {
      throw invalid_argument(name() + ": 16-bit weights take no scale (got " + std::to_string(weight_scale) + ")");
    }
    if (!std::isfinite(weight_scale) || weight_scale == 0) {
      throw invalid_argument(name() + ": the weight scale must be finite and nonzero");
    }
    if (fusion.any() && !kernel_selected()) {
      throw invalid_argument(name() + ": only gpucmp's kernel fuses an RMSNorm or an add; selected: " +
                             describe_candidate(m_selected));
    }
    if (fusion.norm_weight != nullptr && !(std::isfinite(fusion.norm_eps) && fusion.norm_eps > 0)) {
      throw invalid_argument(name() + ": the RMSNorm epsilon must be finite and positive (got " +
                             std::to_string(fusion.norm_eps) + ")");
    }
    launch(w, x, y, weight_scale, stream, fusion);
  }
  /// Whether gpucmp's kernel is the selected candidate (what run_on()'s fusion needs).
  bool kernel_selected() const noexcept { return m_selected >= m_from_cublaslt; }

  /// Poisons y, runs once and checks it against the FP64 reference.
  verification verify(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(output(), 0xFF, y_bytes(), stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output(stream);
  }
  /// Checks y as it is now: the gemm's FP64 reference (16-bit weights) or the same reference of
  /// scale x W8^T (E4M3 weights), over sampled outputs touching every tile.
  verification check_output(cudaStream_t stream) const {
    if (m_gemm) return m_gemm->check_output(stream);
    return detail::visit_gemv_activations(m_problem.dtype, [&](auto zero) {
      using T = decltype(zero);
      const gemv_problem& p = m_problem;
      const detail::gemm_geometry g{p.n, p.batch, p.k, p.k, p.k, p.n, p.n * p.k, p.batch * p.k, p.batch * p.n, true, false};
      const detail::gemm_reference_values values = detail::gemm_reference_at_samples<__nv_fp8_e4m3, T, T>(
          g, 1, m_w8.data(), std::size_t(p.n * p.k), m_x.data(), std::size_t(p.batch * p.k), m_y.data(),
          std::size_t(p.batch * p.n), double(m_scale), stream);
      return detail::gemm_verification(values, gemm_tolerance(p.dtype), double(p.k),
                                       [](std::int64_t, std::int64_t i, std::int64_t j) {
                                         return "token " + std::to_string(j) + ", output " + std::to_string(i);
                                       });
    });
  }

  /// "gemv/bf16/b1_n4096_k4096".
  std::string name() const { return "gemv/" + m_problem.name(); }
  gpucmp::work work() const { return m_problem.work(); }       ///< the problem's
  std::vector<axis> axes() const { return m_problem.axes(); }  ///< the problem's
  std::string sweep_axis() const { return "batch"; }           ///< what a sweep varies
  /// Who runs the selected candidate: "cuBLASLt" or "gpucmp".
  std::string provider() const { return kernel_selected() ? "gpucmp" : "cuBLASLt"; }
  /// cuBLASLt's version where its GEMM is a candidate.
  std::vector<std::pair<std::string, std::string>> libraries() const {
    return m_gemm ? m_gemm->libraries() : std::vector<std::pair<std::string, std::string>>{};
  }

  /// cuBLASLt's candidates first, then the kernel's.
  std::size_t candidate_count() const noexcept { return m_from_cublaslt + m_splits.size(); }
  /// "cuBLASLt algo 6 ..." or "gpucmp kernel, 2 warps a row".
  std::string describe_candidate(std::size_t i) const {
    if (i < m_from_cublaslt) return "cuBLASLt " + m_gemm->describe_candidate(i);
    const int split = m_splits.at(i - m_from_cublaslt);
    return "gpucmp kernel, " + std::to_string(split) + (split == 1 ? " warp a row" : " warps a row");
  }
  /// 0: cuBLASLt's, 1: the kernel's (each group's fastest is re-timed).
  int candidate_group(std::size_t i) const noexcept { return i < m_from_cublaslt ? 0 : 1; }
  /// Runs candidate `i` from now on.
  void select(std::size_t i, cudaStream_t stream) {
    if (i >= candidate_count()) throw invalid_argument(name() + ": no candidate " + std::to_string(i));
    if (i < m_from_cublaslt) m_gemm->select(i, stream);
    m_selected = i;
  }
  algorithm_choice choice() const noexcept { return m_options.choice; }                ///< its options'
  const search_options& search_settings() const noexcept { return m_options.search; }  ///< its options'
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& c, std::vector<candidate_time> log) {
    select(c.index, nullptr);
    m_search.adopt(c, std::move(log));
  }
  const std::vector<candidate_time>& search_log() const noexcept { return m_search.log; }  ///< its search
  /// What it runs now.
  gemv_algorithm algorithm() const {
    return {provider(), describe_candidate(m_selected), m_search.chosen_by, m_search.searched_seconds};
  }
  const gemv_problem& problem() const noexcept { return m_problem; }  ///< what it computes
  /// How gpucmp's kernel is launched against the kernel before it (cuda/launch.hpp; cuBLASLt's
  /// candidates launch as cuBLASLt does). Serial unless set: a decoder's step overlaps its kernels.
  void set_launch_order(launch_order order) noexcept { m_order = order; }
  /// y, batch rows of n (column-major n x batch, as a GEMM's D).
  void* output() noexcept { return m_gemm ? m_gemm->d() : m_y.data(); }
  /// W, n rows of k (E4M3 weights: stored as drawn, their scale weight_scale()).
  void* weights() noexcept { return w_data(); }
  /// x, batch rows of k.
  void* input() noexcept { return x_data(); }
  /// E4M3 weights' per-tensor scale (1 for 16-bit weights).
  float weight_scale() const noexcept { return m_problem.fp8_weights ? m_scale : 1.0f; }

 private:
  static gemm_options gemm_settings(const gemv_options& o) {
    gemm_options g;
    // Every algorithm and split-K variant, for this operation's own search (none without cuBLASLt).
    g.choice = o.cublaslt ? algorithm_choice::search : algorithm_choice::heuristic;
    g.search = o.search;
    g.staging = operand_staging::off;  // nothing to align: the kernel and cuBLASLt share W, x and y
    g.seed = o.seed;
    return g;
  }

  // E4M3 weights: W uniform in [-1, 1) (exact in E4M3), x in [-1, 1), y poisoned; after a
  // check of free memory.
  void allocate_fp8(cudaStream_t stream) {
    const gemv_problem& p = m_problem;
    const double needed = bytes_needed(p, m_options);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name());
    const std::size_t activation = activation_bytes(p.dtype);
    m_w8 = device_buffer<std::uint8_t>(std::size_t(p.n * p.k), initial_fill::uninitialized());
    m_x = device_buffer<std::uint8_t>(std::size_t(p.batch * p.k) * activation, initial_fill::uninitialized());
    m_y = device_buffer<std::uint8_t>(std::size_t(p.batch * p.n) * activation, initial_fill::poison());
    fill_uniform(reinterpret_cast<__nv_fp8_e4m3*>(m_w8.data()), m_w8.bytes(), m_options.seed, -1, 1, stream);
    detail::visit_gemv_activations(m_problem.dtype, [&](auto zero) {
      using T = decltype(zero);
      fill_uniform(reinterpret_cast<T*>(m_x.data()), std::size_t(p.batch * p.k), m_options.seed + 1, -1, 1, stream);
    });
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void launch(const void* w, const void* x_in, void* y_out, float scale, cudaStream_t stream, const gemv_fusion& fusion = {}) {
    if (!kernel_selected()) {
      m_gemm->run_on(w, x_in, y_out, stream);
      return;
    }
    const int split = m_splits[m_selected - m_from_cublaslt];
    detail::visit_gemv_activations(m_problem.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* x = static_cast<const T*>(x_in);
      T* y = static_cast<T*>(y_out);
      const detail::gemv_fused<T> f{static_cast<const T*>(fusion.norm_weight), fusion.norm_eps, fusion.add_to_output};
      if (m_problem.fp8_weights) {
        detail::launch_gemv<T>(int(m_problem.batch), static_cast<const __nv_fp8_e4m3*>(w), scale, x, y, m_problem.n,
                               m_problem.k, split, f, m_order, stream);
      } else {
        detail::launch_gemv<T>(int(m_problem.batch), static_cast<const T*>(w), 1.0f, x, y, m_problem.n, m_problem.k,
                               split, f, m_order, stream);
      }
    });
  }

  void* w_data() noexcept { return m_gemm ? m_gemm->a() : static_cast<void*>(m_w8.data()); }
  void* x_data() noexcept { return m_gemm ? m_gemm->b() : static_cast<void*>(m_x.data()); }
  std::size_t y_bytes() const noexcept {
    return std::size_t(m_problem.batch * m_problem.n) * activation_bytes(m_problem.dtype);
  }

  gemv_problem m_problem;
  gemv_options m_options;
  // 16-bit weights: W (A, k x n column-major), x (B), y (D), cuBLASLt's candidates and the reference.
  std::optional<gemm> m_gemm;
  device_buffer<std::uint8_t> m_w8, m_x, m_y;  // E4M3 weights: W, x and y
  launch_order m_order = launch_order::serial;
  float m_scale = 0.5f;                         // E4M3 weights: W's per-tensor scale (unused for 16-bit weights)
  std::size_t m_from_cublaslt = 0;
  std::vector<int> m_splits;  // the kernel's candidates: warps a row
  std::size_t m_selected = 0;
  search_record m_search;
};

}  // namespace gpucmp
