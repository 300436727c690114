// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// RMSNorm as a verified operation (ops/operation.hpp), optionally fused with the residual add
// before it (ops/rmsnorm_problem.hpp): one block a row, FP32 arithmetic. Two kernels: the
// row held in registers between the sum of squares and the scaling (16-byte vectors, when a
// row is a whole number of them), so x is read from memory once; and an element-by-element
// kernel for any row length, which reads its row twice (the second time from L1/L2). The
// launch shapes (threads per block x vectors per thread) are the candidates, searched on the
// GPU. The residual is written to its own buffer (pass the same pointer to run_rmsnorm() for
// the in-place add a decoder does), so every timed call does the same work.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/grid_dependency.cuh>
#include <gpucmp/ops/block_reduce.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/kernel_candidates.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/rmsnorm_problem.hpp>
#include <gpucmp/ops/sampled_rows.hpp>
#include <gpucmp/ops/vector_access.cuh>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// The tensors of one RMSNorm call (device pointers; residual ones null without the fused add).
template <class T>
struct rmsnorm_tensors {
  const T* x = nullptr;        ///< tokens x hidden
  const T* residual = nullptr; ///< tokens x hidden, the residual stream before the add
  T* residual_out = nullptr;   ///< tokens x hidden, residual + x (may be `residual`: in place)
  const T* weight = nullptr;   ///< hidden
  T* y = nullptr;              ///< tokens x hidden
  float* inv_rms = nullptr;    ///< tokens: each row's 1 / rms, written when not null (a training step's backward reads it)
};

namespace detail {

// One block a row; thread t holds vectors t, t + blockDim.x, ... of its row in registers.
template <class T, int Items, bool Residual>
__global__ void rmsnorm_vector_kernel(rmsnorm_tensors<T> t, int hidden, float eps) {
  wait_for_prior_grids();
  let_next_grid_start();
  constexpr int V = vector_elements<T>;
  const std::size_t base = std::size_t(blockIdx.x) * std::size_t(hidden);
  float v[Items][V];
  float squares = 0;
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const int col = (it * int(blockDim.x) + int(threadIdx.x)) * V;
    if (col < hidden) {
      load_vector(t.x + base + col, v[it]);
      if constexpr (Residual) {
        float r[V];
        load_vector(t.residual + base + col, r);
#pragma unroll
        for (int e = 0; e < V; ++e) v[it][e] = to_float(from_float<T>(v[it][e] + r[e]));  // as a separate add rounds
        store_vector(t.residual_out + base + col, v[it]);
      }
#pragma unroll
      for (int e = 0; e < V; ++e) squares += v[it][e] * v[it][e];
    }
  }
  const float scale = rsqrtf(block_sum(squares) / float(hidden) + eps);
  if (t.inv_rms != nullptr && threadIdx.x == 0) t.inv_rms[blockIdx.x] = scale;
#pragma unroll
  for (int it = 0; it < Items; ++it) {
    const int col = (it * int(blockDim.x) + int(threadIdx.x)) * V;
    if (col < hidden) {
      float w[V];
      load_vector(t.weight + col, w);
#pragma unroll
      for (int e = 0; e < V; ++e) v[it][e] = v[it][e] * scale * w[e];
      store_vector(t.y + base + col, v[it]);
    }
  }
}

// One block a row, element by element, any row length: the second pass reads the row again.
template <class T, bool Residual>
__global__ void rmsnorm_element_kernel(rmsnorm_tensors<T> t, int hidden, float eps) {
  wait_for_prior_grids();
  let_next_grid_start();
  const std::size_t base = std::size_t(blockIdx.x) * std::size_t(hidden);
  float squares = 0;
  for (int col = int(threadIdx.x); col < hidden; col += int(blockDim.x)) {
    float v = to_float(t.x[base + col]);
    if constexpr (Residual) {
      const T sum = from_float<T>(v + to_float(t.residual[base + col]));
      t.residual_out[base + col] = sum;
      v = to_float(sum);
    }
    squares += v * v;
  }
  const float scale = rsqrtf(block_sum(squares) / float(hidden) + eps);
  if (t.inv_rms != nullptr && threadIdx.x == 0) t.inv_rms[blockIdx.x] = scale;
  const T* source = Residual ? t.residual_out : t.x;  // this thread wrote these elements of residual_out
  for (int col = int(threadIdx.x); col < hidden; col += int(blockDim.x)) {
    t.y[base + col] = from_float<T>(to_float(source[base + col]) * scale * to_float(t.weight[col]));
  }
}

template <class T, bool Residual>
void launch_rmsnorm(const rmsnorm_tensors<T>& t, std::int64_t tokens, std::int64_t hidden, float eps,
                    const launch_shape& shape, cudaStream_t stream) {
  const dim3 grid{unsigned(tokens)}, block{unsigned(shape.threads)};
  const int h = int(hidden);
  auto launch = [&](auto kernel) { launch_kernel(kernel, grid, block, 0, stream, shape.order, "rmsnorm kernel", t, h, eps); };
  if (!shape.vectorized) {
    launch(rmsnorm_element_kernel<T, Residual>);
  } else {
    switch (shape.items) {
      case 1: launch(rmsnorm_vector_kernel<T, 1, Residual>); break;
      case 2: launch(rmsnorm_vector_kernel<T, 2, Residual>); break;
      case 4: launch(rmsnorm_vector_kernel<T, 4, Residual>); break;
      case 8: launch(rmsnorm_vector_kernel<T, 8, Residual>); break;
      default: throw invalid_argument("rmsnorm: vectors per thread must be 1, 2, 4 or 8, got " + std::to_string(shape.items));
    }
  }
}

// The largest block the kernel of `shape` launches with (its registers decide).
template <class T, bool Residual>
int rmsnorm_block_limit(const launch_shape& shape) {
  if (!shape.vectorized) return block_limit(rmsnorm_element_kernel<T, Residual>);
  switch (shape.items) {
    case 1: return block_limit(rmsnorm_vector_kernel<T, 1, Residual>);
    case 2: return block_limit(rmsnorm_vector_kernel<T, 2, Residual>);
    case 4: return block_limit(rmsnorm_vector_kernel<T, 4, Residual>);
    case 8: return block_limit(rmsnorm_vector_kernel<T, 8, Residual>);
    default: return 0;
  }
}

}  // namespace detail

/// The launch shapes that fit `p`, the heuristic's first: for rows of whole 16-byte vectors,
/// each block size from 64 to 1024 threads with the fewest vectors per thread (1, 2, 4 or 8)
/// that cover a row, leaving no more than half the threads idle; then the element-by-element
/// kernel at 256, 512 and 1024 threads, which takes any row. Shapes this GPU cannot launch
/// (too many registers for the block) are left out.
inline std::vector<launch_shape> rmsnorm_shapes(const rmsnorm_problem& p) {
  p.validate();
  std::vector<launch_shape> out;
  const std::int64_t per_vector = std::int64_t(16 / activation_bytes(p.dtype));
  return visit_floating_storage(types_of(p.dtype).output, [&](auto tag) {
    using T = decltype(tag);
    auto fits = [&](const launch_shape& s) {
      const int limit = p.residual ? detail::rmsnorm_block_limit<T, true>(s) : detail::rmsnorm_block_limit<T, false>(s);
      return s.threads <= limit;
    };
    if (p.hidden % per_vector == 0) {
      const std::int64_t vectors = p.hidden / per_vector;
      for (int threads : {64, 128, 256, 512, 1024}) {
        std::int64_t items = 1;
        while (items < 8 && items * threads < vectors) items *= 2;
        if (items * threads < vectors) continue;                  // a row is too long for this block
        if (items == 1 && std::int64_t(threads) > 2 * vectors) continue;  // over half the threads idle
        const launch_shape s{threads, int(items), true};
        if (fits(s)) out.push_back(s);
      }
      // The heuristic's first: 4 vectors a thread where a shape has it (enough bytes in flight).
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].items == 4) {
          std::swap(out[0], out[i]);
          break;
        }
      }
    }
    for (int threads : {256, 512, 1024}) {
      const launch_shape s{threads, 1, false};
      if (fits(s)) out.push_back(s);
    }
    return out;
  });
}

/// Enqueues one RMSNorm of `p` with launch shape `shape` (one of rmsnorm_shapes(p)) on
/// `stream`. T is the recipe's element type (float, __half, __nv_bfloat16); throws
/// invalid_argument when it is not, or when a fused add lacks its residual tensors.
template <class T>
void run_rmsnorm(const rmsnorm_problem& p, const launch_shape& shape, const rmsnorm_tensors<T>& t, cudaStream_t stream) {
  if (element_bytes(types_of(p.dtype).output) != sizeof(T)) throw invalid_argument("rmsnorm: tensors of the wrong type for " + p.name());
  if (p.residual && (t.residual == nullptr || t.residual_out == nullptr)) {
    throw invalid_argument("rmsnorm " + p.name() + ": the fused residual add needs residual and residual_out");
  }
  if (p.residual) {
    detail::launch_rmsnorm<T, true>(t, p.tokens, p.hidden, float(p.eps), shape, stream);
  } else {
    detail::launch_rmsnorm<T, false>(t, p.tokens, p.hidden, float(p.eps), shape, stream);
  }
}

/// One verified RMSNorm on the current device, its tensors filled with random values.
class rmsnorm : public kernel_operation<rmsnorm_problem> {
 public:
  /// Prepares `p`: validates it (invalid_argument, unsupported), checks it fits in free memory
  /// (out_of_memory with needed vs free), allocates and fills x and the residual uniform in
  /// [-2, 2) and the weight in [0.5, 1.5), and lists the launch shapes.
  explicit rmsnorm(const rmsnorm_problem& p, cudaStream_t stream = nullptr, search_options search = streaming_kernel_search())
      : kernel_operation(p, rmsnorm_shapes(p), "rmsnorm " + p.name(), search) {
    const double needed = bytes_needed(p);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, "rmsnorm " + p.name());
    const std::size_t bytes = activation_bytes(p.dtype);
    const std::size_t matrix = std::size_t(p.tokens) * std::size_t(p.hidden) * bytes;
    m_x = device_buffer<std::uint8_t>(matrix, initial_fill::uninitialized());
    m_y = device_buffer<std::uint8_t>(matrix, initial_fill::uninitialized());
    m_weight = device_buffer<std::uint8_t>(std::size_t(p.hidden) * bytes, initial_fill::uninitialized());
    if (p.residual) {
      m_residual = device_buffer<std::uint8_t>(matrix, initial_fill::uninitialized());
      m_residual_out = device_buffer<std::uint8_t>(matrix, initial_fill::uninitialized());
    }
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) {
      using T = decltype(tag);
      const std::size_t n = std::size_t(p.tokens) * std::size_t(p.hidden);
      fill_uniform(reinterpret_cast<T*>(m_x.data()), n, 41, -2, 2, stream);
      fill_uniform(reinterpret_cast<T*>(m_weight.data()), std::size_t(p.hidden), 42, 0.5, 1.5, stream);
      if (p.residual) fill_uniform(reinterpret_cast<T*>(m_residual.data()), n, 43, -2, 2, stream);
    });
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  /// Device bytes it allocates for `p`: x, y and the weight, and the residual in and out.
  static double bytes_needed(const rmsnorm_problem& p) {
    const double matrix = double(p.tokens) * double(p.hidden) * double(activation_bytes(p.dtype));
    return matrix * (p.residual ? 4 : 2) + double(p.hidden) * double(activation_bytes(p.dtype));
  }

  /// Enqueues one call of the selected launch shape.
  void operator()(cudaStream_t stream) {
    visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) {
      using T = decltype(tag);
      run_rmsnorm<T>(m_problem, m_candidates.selected(), tensors<T>(), stream);
    });
  }

  /// "rmsnorm/bf16/8192x4096" ("+residual" when fused).
  std::string name() const { return "rmsnorm/" + m_problem.name(); }

  /// Poisons y and the residual output, runs once and compares sampled rows (sampled_rows())
  /// with a double reference from the same stored inputs: the residual sum bit for bit (it is
  /// one rounding of an exact sum), y within output_tolerance().
  verification verify(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_y.data(), 0xFF, m_y.bytes(), stream));
    if (m_problem.residual) GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_residual_out.data(), 0xFF, m_residual_out.bytes(), stream));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output();
  }

  /// Checks the output as it is now (verify() without the run), against the inputs as prepared.
  verification check_output() const {
    return visit_floating_storage(types_of(m_problem.dtype).output, [&](auto tag) { return check<decltype(tag)>(); });
  }

  /// The output tensor on the device (y, tokens x hidden).
  void* output() noexcept { return m_y.data(); }

 private:
  template <class T>
  rmsnorm_tensors<T> tensors() {
    rmsnorm_tensors<T> t;
    t.x = reinterpret_cast<const T*>(m_x.data());
    t.weight = reinterpret_cast<const T*>(m_weight.data());
    t.y = reinterpret_cast<T*>(m_y.data());
    if (m_problem.residual) {
      t.residual = reinterpret_cast<const T*>(m_residual.data());
      t.residual_out = reinterpret_cast<T*>(m_residual_out.data());
    }
    return t;
  }

  template <class T>
  verification check() const {
    const rmsnorm_problem& p = m_problem;
    const std::vector<std::int64_t> rows = sampled_rows(p.tokens);
    const std::vector<T> x = copy_rows_to_host(reinterpret_cast<const T*>(m_x.data()), p.hidden, rows);
    const std::vector<T> y = copy_rows_to_host(reinterpret_cast<const T*>(m_y.data()), p.hidden, rows);
    const std::vector<T> w = copy_rows_to_host(reinterpret_cast<const T*>(m_weight.data()), p.hidden, {0});
    std::vector<T> r, r_out;
    if (p.residual) {
      r = copy_rows_to_host(reinterpret_cast<const T*>(m_residual.data()), p.hidden, rows);
      r_out = copy_rows_to_host(reinterpret_cast<const T*>(m_residual_out.data()), p.hidden, rows);
    }
    const tolerance tol = p.output_tolerance();
    verification v;
    v.method = "double reference on the CPU, " + std::to_string(rows.size()) + " of " + std::to_string(p.tokens) +
               " rows" + (p.residual ? ", the residual sum bit for bit" : "");
    std::vector<double> row(std::size_t(p.hidden));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::size_t at = i * std::size_t(p.hidden);
      double squares = 0;
      for (std::int64_t c = 0; c < p.hidden; ++c) {
        double value = to_double(x[at + std::size_t(c)]);
        if (p.residual) {
          value = to_double(from_double<T>(value + to_double(r[at + std::size_t(c)])));  // the exact sum, rounded once
          const double got = to_double(r_out[at + std::size_t(c)]);
          v.add_at(got, value, 1e-300, [&] { return "residual, row " + std::to_string(rows[i]) + ", column " + std::to_string(c); });
        }
        row[std::size_t(c)] = value;
        squares += value * value;
      }
      const double scale = 1 / std::sqrt(squares / double(p.hidden) + p.eps);
      for (std::int64_t c = 0; c < p.hidden; ++c) {
        const double reference = row[std::size_t(c)] * scale * to_double(w[std::size_t(c)]);
        v.add_at(to_double(y[at + std::size_t(c)]), reference, tol.bound(reference, std::fabs(reference), double(p.hidden)),
                 [&] { return "row " + std::to_string(rows[i]) + ", column " + std::to_string(c); });
      }
    }
    return v;
  }

  device_buffer<std::uint8_t> m_x, m_y, m_weight, m_residual, m_residual_out;
};

}  // namespace gpucmp
