// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RoPE as a verified operation (ops/operation.hpp; the problem in ops/rope_problem.hpp): Q and
// K of each token's fused QKV row rotated in place by its position's angles, V untouched.
// The angles come from a cos/sin table in FP32 (one row per position, computed in double on
// the host from rope_problem::inverse_frequencies()), the rotation in FP32. A thread rotates
// one 16-byte vector's worth of pairs (`items` of them in flight) or, for heads that are not
// whole vectors, one pair; the launch shapes are the candidates.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/kernel_candidates.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/rope_problem.hpp>
#include <gpucmp/ops/sampled_rows.hpp>
#include <gpucmp/ops/vector_access.cuh>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// The cos/sin table of `p`: row `position` holds (cos, sin) of position x inv_freq[i] for
/// the rotated() / 2 frequencies, computed in double and rounded to FP32 (a backward's sin
/// negated: the same kernels then rotate by minus the angle).
inline std::vector<float2> rope_table(const rope_problem& p) {
  const std::vector<double> f = p.inverse_frequencies();
  std::vector<float2> out(std::size_t(p.max_positions) * f.size());
  for (std::int64_t pos = 0; pos < p.max_positions; ++pos) {
    for (std::size_t i = 0; i < f.size(); ++i) {
      const double angle = double(pos) * f[i], sine = p.sine_sign() * std::sin(angle);
      out[std::size_t(pos) * f.size() + i] = make_float2(float(std::cos(angle)), float(sine));
    }
  }
  return out;
}

/// The geometry a RoPE kernel runs over.
struct rope_geometry {
  std::int64_t tokens = 0;
  int heads = 0;       ///< rotated heads a row: q_heads + kv_heads
  int head_dim = 0;
  int row = 0;         ///< elements a row: (q_heads + 2 kv_heads) x head_dim
  int half = 0;        ///< rotated pairs a head: rotated() / 2
  bool interleaved = false;
};

namespace detail {

// Rotates x1 (first of a pair) and x2 by (c, s).
__device__ inline void rotate(float& x1, float& x2, float2 cs) {
  const float a = x1 * cs.x - x2 * cs.y, b = x2 * cs.x + x1 * cs.y;
  x1 = a;
  x2 = b;
}

// Unit u: (token, head, group of V pairs). Half pairs: the group's V first-half elements and
// the V elements rot/2 further on. Interleaved: V consecutive elements, V/2 pairs.
template <class T, int Items>
__global__ void rope_vector_kernel(T* qkv, const int* __restrict__ positions, const float2* __restrict__ table,
                                   rope_geometry g, std::int64_t units) {
  wait_for_prior_grids();
  let_next_grid_start();
  constexpr int V = vector_elements<T>;
  const int groups = g.interleaved ? 2 * g.half / V : g.half / V;
  const std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x * Items + threadIdx.x;
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const std::int64_t u = base + std::int64_t(it) * blockDim.x;
    if (u >= units) continue;
    const std::int64_t token = u / (std::int64_t(g.heads) * groups);
    const int rest = int(u - token * g.heads * groups), head = rest / groups, group = rest % groups;
    T* h = qkv + token * g.row + std::int64_t(head) * g.head_dim;
    const float2* cs = table + std::int64_t(positions[token]) * g.half;
    if (g.interleaved) {
      float x[V];
      load_vector(h + group * V, x);
#pragma unroll
      for (int e = 0; e < V; e += 2) rotate(x[e], x[e + 1], cs[group * V / 2 + e / 2]);
      store_vector(h + group * V, x);
    } else {
      float x1[V], x2[V];
      load_vector(h + group * V, x1);
      load_vector(h + g.half + group * V, x2);
#pragma unroll
      for (int e = 0; e < V; ++e) rotate(x1[e], x2[e], cs[group * V + e]);
      store_vector(h + group * V, x1);
      store_vector(h + g.half + group * V, x2);
    }
  }
}

// Unit u: (token, head, pair); any head size.
template <class T>
__global__ void rope_element_kernel(T* qkv, const int* __restrict__ positions, const float2* __restrict__ table,
                                    rope_geometry g, std::int64_t units) {
  wait_for_prior_grids();
  let_next_grid_start();
  for (std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t token = u / (std::int64_t(g.heads) * g.half);
    const int rest = int(u - token * g.heads * g.half), head = rest / g.half, i = rest % g.half;
    T* h = qkv + token * g.row + std::int64_t(head) * g.head_dim;
    const int first = g.interleaved ? 2 * i : i, second = g.interleaved ? 2 * i + 1 : i + g.half;
    float x1 = to_float(h[first]), x2 = to_float(h[second]);
    rotate(x1, x2, table[std::int64_t(positions[token]) * g.half + i]);
    h[first] = from_float<T>(x1);
    h[second] = from_float<T>(x2);
  }
}

// The largest block the kernel of `shape` launches with (its registers decide).
template <class T>
int rope_block_limit(const launch_shape& shape) {
  if (!shape.vectorized) return block_limit(rope_element_kernel<T>);
  switch (shape.items) {
    case 1: return block_limit(rope_vector_kernel<T, 1>);
    case 2: return block_limit(rope_vector_kernel<T, 2>);
    case 4: return block_limit(rope_vector_kernel<T, 4>);
    default: return 0;
  }
}

}  // namespace detail

/// The launch shapes for `p`, the heuristic's first: where each head's rotated pairs form
/// whole 16-byte vectors (and rows are aligned to them), 128 to 1024 threads with 1, 2 or 4
/// vectors in flight per thread (2 first); then the pair-by-pair kernel at 256 and 512 threads.
/// Shapes this GPU cannot launch (too many registers for the block) are left out.
inline std::vector<launch_shape> rope_shapes(const rope_problem& p) {
  p.validate();
  return visit_floating_storage(types_of(p.dtype).output, [&](auto tag) {
    using T = decltype(tag);
    std::vector<launch_shape> out;
    auto add = [&](const launch_shape& s) {
      if (s.threads <= detail::rope_block_limit<T>(s)) out.push_back(s);
    };
    const std::int64_t v = vector_elements<T>;
    const std::int64_t half = p.rotated() / 2;
    const bool aligned = p.head_dim % v == 0;  // every head (and row) starts on a vector
    const bool whole = p.pairs == rope_pairs::half ? half % v == 0 : p.rotated() % v == 0;
    if (aligned && whole) {
      for (int items : {2, 1, 4}) {
        for (int threads : {256, 128, 512, 1024}) add({threads, items, true});
      }
    }
    for (int threads : {256, 512}) add({threads, 1, false});
    return out;
  });
}

/// Enqueues one RoPE of `p` on `qkv` (tokens x row_elements(), rotated in place) with each
/// token's position from `positions` (device, tokens of them, each in [0, max_positions)) and
/// the device copy of rope_table(p), with `shape` (one of rope_shapes(p)) on `stream`.
template <class T>
void run_rope(const rope_problem& p, const launch_shape& shape, T* qkv, const int* positions, const float2* table,
              cudaStream_t stream) {
  if (element_bytes(types_of(p.dtype).output) != sizeof(T)) throw invalid_argument("rope: tensors of the wrong type for " + p.name());
  rope_geometry g;
  g.tokens = p.tokens;
  g.heads = int(p.q_heads + p.kv_heads);
  g.head_dim = int(p.head_dim);
  g.row = int(p.row_elements());
  g.half = int(p.rotated() / 2);
  g.interleaved = p.pairs == rope_pairs::interleaved;
  if (!shape.vectorized) {
    const std::int64_t units = p.tokens * g.heads * g.half;
    const std::int64_t blocks = std::min<std::int64_t>((units + shape.threads - 1) / shape.threads, 1 << 20);
    launch_kernel(detail::rope_element_kernel<T>, dim3(unsigned(blocks)), dim3(unsigned(shape.threads)), 0, stream, shape.order,
                  "rope kernel", qkv, positions, table, g, units);
  } else {
    constexpr int V = vector_elements<T>;
    const std::int64_t groups = g.interleaved ? 2 * g.half / V : g.half / V;
    const std::int64_t units = p.tokens * g.heads * groups, per_block = std::int64_t(shape.threads) * shape.items;
    const std::int64_t blocks = (units + per_block - 1) / per_block;
    if (blocks > std::numeric_limits<int>::max()) throw invalid_argument("rope " + p.name() + ": too large for one grid");
    const dim3 grid{unsigned(blocks)}, block{unsigned(shape.threads)};
    auto launch = [&](auto kernel) {
      launch_kernel(kernel, grid, block, 0, stream, shape.order, "rope kernel", qkv, positions, table, g, units);
    };
    switch (shape.items) {
      case 1: launch(detail::rope_vector_kernel<T, 1>); break;
      case 2: launch(detail::rope_vector_kernel<T, 2>); break;
      case 4: launch(detail::rope_vector_kernel<T, 4>); break;
      default: throw invalid_argument("rope: vectors per thread must be 1, 2 or 4, got " + std::to_string(shape.items));
    }
  }
}

/// One verified RoPE on the current device: random Q, K and V, random positions.
class rope : public kernel_operation<rope_problem> {
 public:
  /// Prepares `p`: validates it, checks it fits in free memory (out_of_memory), fills the QKV
  /// rows uniform in [-2, 2) (and keeps a copy, which verify() starts from), draws each
  /// token's position uniformly from [0, max_positions), uploads the cos/sin table and lists
  /// the launch shapes.
  explicit rope(const rope_problem& p, cudaStream_t stream = nullptr, search_options search = streaming_kernel_search())
      : kernel_operation(p, rope_shapes(p), "rope " + p.name(), search) {
    const double needed = bytes_needed(p);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, "rope " + p.name());
    const std::size_t elements = std::size_t(p.tokens) * std::size_t(p.row_elements());
    m_qkv = device_buffer<std::uint8_t>(elements * activation_bytes(p.dtype), initial_fill::uninitialized());
    m_initial = device_buffer<std::uint8_t>(elements * activation_bytes(p.dtype), initial_fill::uninitialized());
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) {
      using T = decltype(tag);
      fill_uniform(reinterpret_cast<T*>(m_initial.data()), elements, 61, -2, 2, stream);
    });
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_qkv.data(), m_initial.data(), m_qkv.bytes(), cudaMemcpyDeviceToDevice, stream));
    m_host_positions.resize(std::size_t(p.tokens));
    for (std::size_t t = 0; t < m_host_positions.size(); ++t) {
      m_host_positions[t] = int(random_bits(62, t) % std::uint64_t(p.max_positions));
    }
    m_positions = device_buffer<int>(m_host_positions.size(), initial_fill::uninitialized());
    // On `stream`, which the runs use: a cudaMemcpy from pageable memory may return before its
    // copy lands, and a kernel on a non-blocking stream would read the table half written.
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_positions.data(), m_host_positions.data(), m_positions.bytes(),
                                      cudaMemcpyHostToDevice, stream));
    const std::vector<float2> table = rope_table(p);
    m_table = device_buffer<float>(2 * table.size(), initial_fill::uninitialized());  // (cos, sin) pairs
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_table.data(), table.data(), m_table.bytes(), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `table` goes at the end of this scope
  }

  /// Device bytes it allocates for `p`: QKV and its copy, the positions and the table.
  static double bytes_needed(const rope_problem& p) {
    return 2 * double(p.tokens) * double(p.row_elements()) * double(activation_bytes(p.dtype)) + 4 * double(p.tokens) +
           8 * double(p.max_positions) * double(p.rotated() / 2);
  }

  /// Enqueues one call of the selected launch shape (rotating QKV in place once more).
  void operator()(cudaStream_t stream) {
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) {
      using T = decltype(tag);
      run_rope<T>(m_problem, m_candidates.selected(), reinterpret_cast<T*>(m_qkv.data()), m_positions.data(),
                  reinterpret_cast<const float2*>(m_table.data()), stream);
    });
  }

  /// "rope/bf16/8192x32+8x128/half".
  std::string name() const { return "rope/" + m_problem.name(); }

  /// Restores QKV from the prepared copy, runs once and compares sampled rows with a double
  /// reference at the exact angles: rotated elements within output_tolerance(), the rest of
  /// each Q and K head and all of V bit for bit.
  verification verify(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_qkv.data(), m_initial.data(), m_qkv.bytes(), cudaMemcpyDeviceToDevice, stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output();
  }

  /// Checks the output as it is now (verify() without the run), against the inputs as prepared.
  verification check_output() const {
    return visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) { return check<decltype(tag)>(); });
  }

  /// The output tensor on the device (the QKV rows, rotated in place).
  void* output() noexcept { return m_qkv.data(); }

 private:
  template <class T>
  verification check() const {
    const rope_problem& p = m_problem;
    const std::vector<std::int64_t> rows = sampled_rows(p.tokens);
    const std::int64_t row = p.row_elements(), half = p.rotated() / 2;
    const std::vector<T> before = copy_rows_to_host(reinterpret_cast<const T*>(m_initial.data()), row, rows);
    const std::vector<T> after = copy_rows_to_host(reinterpret_cast<const T*>(m_qkv.data()), row, rows);
    const std::vector<double> f = p.inverse_frequencies();
    const tolerance tol = p.output_tolerance();
    verification v;
    v.method = "double reference on the CPU at exact angles, " + std::to_string(rows.size()) + " of " +
               std::to_string(p.tokens) + " rows; V and unrotated elements bit for bit";
    const bool interleaved = p.pairs == rope_pairs::interleaved;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::size_t at = r * std::size_t(row);
      const double position = m_host_positions[std::size_t(rows[r])];
      auto where = [&](std::int64_t c) {
        return [&, c] { return "token " + std::to_string(rows[r]) + ", element " + std::to_string(c) + " of its row"; };
      };
      std::vector<bool> rotated(std::size_t(row), false);
      for (std::int64_t h = 0; h < p.q_heads + p.kv_heads; ++h) {
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t a = h * p.head_dim + (interleaved ? 2 * i : i);
          const std::int64_t b = h * p.head_dim + (interleaved ? 2 * i + 1 : i + half);
          const double x1 = to_double(before[at + std::size_t(a)]), x2 = to_double(before[at + std::size_t(b)]);
          const double angle = position * f[std::size_t(i)];
          const double c = std::cos(angle), s = p.sine_sign() * std::sin(angle);
          const double y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
          v.add_at(to_double(after[at + std::size_t(a)]), y1, tol.bound(y1, std::fabs(x1 * c) + std::fabs(x2 * s), 2), where(a));
          v.add_at(to_double(after[at + std::size_t(b)]), y2, tol.bound(y2, std::fabs(x2 * c) + std::fabs(x1 * s), 2), where(b));
          rotated[std::size_t(a)] = rotated[std::size_t(b)] = true;
        }
      }
      for (std::int64_t c = 0; c < row; ++c) {
        if (rotated[std::size_t(c)]) continue;
        v.add_at(to_double(after[at + std::size_t(c)]), to_double(before[at + std::size_t(c)]), 1e-300, where(c));
      }
    }
    return v;
  }

  device_buffer<std::uint8_t> m_qkv, m_initial;
  device_buffer<int> m_positions;
  device_buffer<float> m_table;
  std::vector<int> m_host_positions;
};

}  // namespace gpucmp
