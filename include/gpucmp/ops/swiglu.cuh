// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// SwiGLU as a verified operation (ops/operation.hpp; the problem in ops/swiglu_problem.hpp):
// out = silu(gate) * up over rows of [gate | up], FP32 arithmetic and one rounding. A
// streaming kernel: each thread reads `items` 16-byte vectors of gate and of up before it
// writes, so enough loads are in flight to reach the copy rate; an element-by-element kernel
// takes rows that are not whole vectors. The launch shapes are the candidates. The backward
// (swiglu_problem::backward) has kernels of the same two kinds, reading dout as well and
// writing [dgate | dup].
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/kernel_candidates.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/sampled_rows.hpp>
#include <gpucmp/ops/swiglu_problem.hpp>
#include <gpucmp/ops/vector_access.cuh>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp {

namespace detail {

__device__ inline float silu(float g) { return g / (1.0f + expf(-g)); }

// The backward's gradients of one element: dgate = dout up silu'(g), dup = dout silu(g).
__device__ inline void swiglu_gradients(float g, float u, float d, float& dgate, float& dup) {
  const float s = 1.0f / (1.0f + expf(-g));
  dgate = d * u * (s * (1.0f + g * (1.0f - s)));
  dup = d * (g * s);
}

// The backward's vector u of dout: row u / per_row; its gate and up vectors in that row of `in`,
// its dgate and dup vectors in that row of `grad` ([dgate | dup], as `in` is laid out).
template <class T, int Items>
__global__ void swiglu_backward_vector_kernel(const T* __restrict__ in, const T* __restrict__ dout, T* __restrict__ grad,
                                              std::int64_t per_row, std::int64_t vectors) {
  constexpr int V = vector_elements<T>;
  const std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x * Items + threadIdx.x;
  float g[Items][V], u[Items][V], d[Items][V];
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const std::int64_t v = base + std::int64_t(it) * blockDim.x;
    if (v < vectors) {
      const std::int64_t row = v / per_row, col = (v - row * per_row) * V;
      const T* gate = in + row * per_row * V * 2 + col;
      load_vector(gate, g[it]);
      load_vector(gate + per_row * V, u[it]);
      load_vector(dout + v * V, d[it]);
    }
  }
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const std::int64_t v = base + std::int64_t(it) * blockDim.x;
    if (v < vectors) {
      const std::int64_t row = v / per_row, col = (v - row * per_row) * V;
#pragma unroll
      for (int e = 0; e < V; ++e) swiglu_gradients(g[it][e], u[it][e], d[it][e], g[it][e], u[it][e]);
      T* dgate = grad + row * per_row * V * 2 + col;
      store_vector(dgate, g[it]);
      store_vector(dgate + per_row * V, u[it]);
    }
  }
}

template <class T>
__global__ void swiglu_backward_element_kernel(const T* __restrict__ in, const T* __restrict__ dout, T* __restrict__ grad,
                                               std::int64_t intermediate, std::int64_t outputs) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / intermediate, col = i - row * intermediate, at = row * intermediate * 2 + col;
    float dgate = 0, dup = 0;
    swiglu_gradients(to_float(in[at]), to_float(in[at + intermediate]), to_float(dout[i]), dgate, dup);
    grad[at] = from_float<T>(dgate);
    grad[at + intermediate] = from_float<T>(dup);
  }
}

// Vector u of the output (u < tokens * intermediate / V): row u / per_row, its column's gate
// and up vectors in that row of the input.
template <class T, int Items>
__global__ void swiglu_vector_kernel(const T* __restrict__ in, T* __restrict__ out, std::int64_t per_row,
                                     std::int64_t vectors) {
  wait_for_prior_grids();
  let_next_grid_start();
  constexpr int V = vector_elements<T>;
  const std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x * Items + threadIdx.x;
  float g[Items][V], u[Items][V];
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const std::int64_t v = base + std::int64_t(it) * blockDim.x;
    if (v < vectors) {
      const std::int64_t row = v / per_row, col = (v - row * per_row) * V;
      const T* gate = in + row * per_row * V * 2 + col;
      load_vector(gate, g[it]);
      load_vector(gate + per_row * V, u[it]);
    }
  }
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const std::int64_t v = base + std::int64_t(it) * blockDim.x;
    if (v < vectors) {
#pragma unroll
      for (int e = 0; e < V; ++e) g[it][e] = silu(g[it][e]) * u[it][e];
      store_vector(out + v * V, g[it]);
    }
  }
}

template <class T>
__global__ void swiglu_element_kernel(const T* __restrict__ in, T* __restrict__ out, std::int64_t intermediate,
                                      std::int64_t outputs) {
  wait_for_prior_grids();
  let_next_grid_start();
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / intermediate, col = i - row * intermediate;
    const T* gate = in + row * intermediate * 2 + col;
    out[i] = from_float<T>(silu(to_float(gate[0])) * to_float(gate[intermediate]));
  }
}

// Calls f(std::integral_constant<int, items>{}): the vector kernels are instantiated for 1, 2,
// 4 and 8 vectors a thread.
template <class F>
auto with_items(int items, F&& f) {
  switch (items) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: throw invalid_argument("swiglu: vectors per thread must be 1, 2, 4 or 8, got " + std::to_string(items));
  }
}

// The largest block the kernel of `shape` launches with (its registers decide).
template <class T>
int swiglu_block_limit(const launch_shape& shape, bool backward) {
  if (!shape.vectorized) return backward ? block_limit(swiglu_backward_element_kernel<T>) : block_limit(swiglu_element_kernel<T>);
  return with_items(shape.items, [&](auto items) {
    constexpr int I = decltype(items)::value;
    return backward ? block_limit(swiglu_backward_vector_kernel<T, I>) : block_limit(swiglu_vector_kernel<T, I>);
  });
}

// The grid of `shape` over p's outputs: an element kernel's blocks (at most 2^20, grid-stride),
// or a vector kernel's, one thread per `items` vectors.
struct swiglu_grid {
  dim3 grid, block;
  std::int64_t outputs = 0, vectors = 0, per_row = 0;  // vectors: of the output; per_row: a row's
};
template <class T>
swiglu_grid swiglu_grid_of(const swiglu_problem& p, const launch_shape& shape) {
  if (element_bytes(types_of(p.dtype).output) != sizeof(T)) throw invalid_argument("swiglu: tensors of the wrong type for " + p.name());
  swiglu_grid g;
  g.outputs = p.tokens * p.intermediate;
  g.block = dim3{unsigned(shape.threads)};
  if (!shape.vectorized) {
    g.grid = dim3{unsigned(std::min<std::int64_t>((g.outputs + shape.threads - 1) / shape.threads, 1 << 20))};
    return g;
  }
  constexpr int V = vector_elements<T>;
  g.vectors = g.outputs / V;
  g.per_row = p.intermediate / V;
  const std::int64_t per_block = std::int64_t(shape.threads) * shape.items, blocks = (g.vectors + per_block - 1) / per_block;
  if (blocks > std::numeric_limits<int>::max()) throw invalid_argument("swiglu " + p.name() + ": too large for one grid");
  g.grid = dim3{unsigned(blocks)};
  return g;
}

}  // namespace detail

/// The launch shapes for `p`, the heuristic's first: for rows of whole 16-byte vectors, 128 to
/// 1024 threads with 1, 2, 4 or 8 vectors of gate and of up per thread (4 first); then the
/// element-by-element kernel at 256 and 512 threads, which takes any row. Shapes this GPU
/// cannot launch (too many registers for the block) are left out.
inline std::vector<launch_shape> swiglu_shapes(const swiglu_problem& p) {
  p.validate();
  return visit_floating_storage(types_of(p.dtype).output, [&](auto tag) {
    using T = decltype(tag);
    std::vector<launch_shape> out;
    auto add = [&](const launch_shape& s) {
      if (s.threads <= detail::swiglu_block_limit<T>(s, p.backward)) out.push_back(s);
    };
    if (p.intermediate % std::int64_t(vector_elements<T>) == 0) {
      for (int items : {4, 1, 2, 8}) {
        for (int threads : {256, 128, 512, 1024}) add({threads, items, true});
      }
    }
    for (int threads : {256, 512}) add({threads, 1, false});
    return out;
  });
}

/// Enqueues one SwiGLU of `p` from `in` (tokens x [gate | up]) into `out` (tokens x
/// intermediate) with `shape` (one of swiglu_shapes(p)) on `stream`; T is the recipe's type.
template <class T>
void run_swiglu(const swiglu_problem& p, const launch_shape& shape, const T* in, T* out, cudaStream_t stream) {
  if (p.backward) throw invalid_argument("swiglu " + p.name() + ": a backward runs with run_swiglu_backward");
  const detail::swiglu_grid g = detail::swiglu_grid_of<T>(p, shape);
  if (!shape.vectorized) {
    launch_kernel(detail::swiglu_element_kernel<T>, g.grid, g.block, 0, stream, shape.order, "swiglu kernel", in, out,
                  p.intermediate, g.outputs);
  } else {
    detail::with_items(shape.items, [&](auto items) {
      launch_kernel(detail::swiglu_vector_kernel<T, decltype(items)::value>, g.grid, g.block, 0, stream, shape.order,
                    "swiglu kernel", in, out, g.per_row, g.vectors);
    });
  }
}

/// Enqueues one SwiGLU backward of `p` (p.backward) from `in` (tokens x [gate | up], as the
/// forward read it) and `dout` (tokens x intermediate) into `grad` (tokens x [dgate | dup])
/// with `shape` (one of swiglu_shapes(p)) on `stream`; T is the recipe's type.
template <class T>
void run_swiglu_backward(const swiglu_problem& p, const launch_shape& shape, const T* in, const T* dout, T* grad,
                         cudaStream_t stream) {
  if (!p.backward) throw invalid_argument("swiglu " + p.name() + ": a forward runs with run_swiglu");
  const detail::swiglu_grid g = detail::swiglu_grid_of<T>(p, shape);
  if (!shape.vectorized) {
    detail::swiglu_backward_element_kernel<T><<<g.grid, g.block, 0, stream>>>(in, dout, grad, p.intermediate, g.outputs);
  } else {
    detail::with_items(shape.items, [&](auto items) {
      detail::swiglu_backward_vector_kernel<T, decltype(items)::value><<<g.grid, g.block, 0, stream>>>(in, dout, grad, g.per_row,
                                                                                                     g.vectors);
    });
  }
  GPUCMP_CUDA_CHECK_LAST("swiglu backward kernel");
}

/// One verified SwiGLU (or its backward) on the current device, gate and up (and dout) filled
/// with random values.
class swiglu : public kernel_operation<swiglu_problem> {
 public:
  /// Prepares `p`: validates it, checks it fits in free memory (out_of_memory), fills gate
  /// and up uniform in [-6, 6) (both tails of silu, and silu' through its zero), a backward's
  /// dout in [-1, 1), and lists the launch shapes.
  explicit swiglu(const swiglu_problem& p, cudaStream_t stream = nullptr, search_options search = streaming_kernel_search())
      : kernel_operation(p, swiglu_shapes(p), "swiglu " + p.name(), search) {
    const double needed = bytes_needed(p);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, "swiglu " + p.name());
    const std::size_t outputs = std::size_t(p.tokens) * std::size_t(p.intermediate);
    const std::size_t written = (p.backward ? 2 : 1) * outputs;
    m_in = device_buffer<std::uint8_t>(2 * outputs * activation_bytes(p.dtype), initial_fill::uninitialized());
    m_out = device_buffer<std::uint8_t>(written * activation_bytes(p.dtype), initial_fill::uninitialized());
    if (p.backward) m_dout = device_buffer<std::uint8_t>(outputs * activation_bytes(p.dtype), initial_fill::uninitialized());
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) {
      using T = decltype(tag);
      fill_uniform(reinterpret_cast<T*>(m_in.data()), 2 * outputs, 51, -6, 6, stream);
      if (m_problem.backward) fill_uniform(reinterpret_cast<T*>(m_dout.data()), outputs, 52, -1, 1, stream);
    });
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  /// Device bytes it allocates for `p`: the input (gate and up) and the output; a backward's
  /// dout and its two gradients.
  static double bytes_needed(const swiglu_problem& p) {
    return (p.backward ? 5 : 3) * double(p.tokens) * double(p.intermediate) * double(activation_bytes(p.dtype));
  }

  /// Enqueues one call of the selected launch shape.
  void operator()(cudaStream_t stream) {
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) {
      using T = decltype(tag);
      const T* in = reinterpret_cast<const T*>(m_in.data());
      T* out = reinterpret_cast<T*>(m_out.data());
      if (m_problem.backward) {
        run_swiglu_backward<T>(m_problem, m_candidates.selected(), in, reinterpret_cast<const T*>(m_dout.data()), out, stream);
      } else {
        run_swiglu<T>(m_problem, m_candidates.selected(), in, out, stream);
      }
    });
  }

  /// "swiglu/bf16/8192x14336".
  std::string name() const { return "swiglu/" + m_problem.name(); }

  /// Poisons the output, runs once and compares sampled rows with a double reference from
  /// the same stored gate and up, within output_tolerance().
  verification verify(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_out.data(), 0xFF, m_out.bytes(), stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output();
  }

  /// Checks the output as it is now (verify() without the run), against the inputs as prepared.
  verification check_output() const {
    return visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) { return check<decltype(tag)>(); });
  }

  /// The output tensor on the device: tokens x intermediate, a backward's tokens x [dgate | dup].
  void* output() noexcept { return m_out.data(); }

 private:
  template <class T>
  verification check() const {
    const swiglu_problem& p = m_problem;
    const std::vector<std::int64_t> rows = sampled_rows(p.tokens);
    const std::vector<T> in = copy_rows_to_host(reinterpret_cast<const T*>(m_in.data()), 2 * p.intermediate, rows);
    const tolerance tol = p.output_tolerance();
    verification v;
    v.method = "double reference on the CPU, " + std::to_string(rows.size()) + " of " + std::to_string(p.tokens) + " rows";
    if (p.backward) return check_backward<T>(rows, in, tol, v);
    const std::vector<T> out = copy_rows_to_host(reinterpret_cast<const T*>(m_out.data()), p.intermediate, rows);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::int64_t c = 0; c < p.intermediate; ++c) {
        const double g = to_double(in[i * std::size_t(2 * p.intermediate) + std::size_t(c)]);
        const double u = to_double(in[i * std::size_t(2 * p.intermediate) + std::size_t(p.intermediate + c)]);
        const double reference = g / (1 + std::exp(-g)) * u;
        v.add_at(to_double(out[i * std::size_t(p.intermediate) + std::size_t(c)]), reference,
                 tol.bound(reference, std::fabs(reference), 1),
                 [&] { return "row " + std::to_string(rows[i]) + ", column " + std::to_string(c); });
      }
    }
    return v;
  }

  // dgate within the bound of its terms' size (swiglu_problem::output_tolerance), dup of itself.
  template <class T>
  verification check_backward(const std::vector<std::int64_t>& rows, const std::vector<T>& in, const tolerance& tol,
                              verification& v) const {
    const swiglu_problem& p = m_problem;
    const std::size_t m = std::size_t(p.intermediate);
    const std::vector<T> dout = copy_rows_to_host(reinterpret_cast<const T*>(m_dout.data()), p.intermediate, rows);
    const std::vector<T> grad = copy_rows_to_host(reinterpret_cast<const T*>(m_out.data()), 2 * p.intermediate, rows);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::size_t c = 0; c < m; ++c) {
        const double g = to_double(in[i * 2 * m + c]), u = to_double(in[i * 2 * m + m + c]), d = to_double(dout[i * m + c]);
        const double s = 1 / (1 + std::exp(-g));
        const double dgate = d * u * s * (1 + g * (1 - s)), dup = d * g * s;
        const double terms = std::fabs(d * u * s) * (1 + std::fabs(g));  // 1 - s carries s's rounding, times g
        auto where = [&](const char* what) {
          return [&, what] { return std::string(what) + ", row " + std::to_string(rows[i]) + ", column " + std::to_string(c); };
        };
        v.add_at(to_double(grad[i * 2 * m + c]), dgate, tol.bound(dgate, terms, 1), where("dgate"));
        v.add_at(to_double(grad[i * 2 * m + m + c]), dup, tol.bound(dup, std::fabs(dup), 1), where("dup"));
      }
    }
    return v;
  }

  device_buffer<std::uint8_t> m_in, m_out, m_dout;
};

}  // namespace gpucmp
