// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Memory-bandwidth operations (ops/operation.hpp), verified before they are timed: a device
// copy kernel and a STREAM triad kernel (each searched on this GPU over block sizes and loads
// in flight per thread, the verified fastest kept and recorded), cudaMemcpyAsync
// device-to-device, and host<->device copies from pinned memory. Bytes are counted as read +
// written (a D2D copy of B bytes moves 2B), the convention of the CUDA samples'
// bandwidthTest and STREAM.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/pinned_buffer.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/specs/work.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace gpucmp {

/// Which memory operation.
enum class memory_op {
  copy_kernel,  ///< out[i] = in[i], 16-byte loads and stores
  triad_kernel, ///< a[i] = b[i] + s c[i] in FP64 (STREAM triad)
  memcpy_d2d,   ///< cudaMemcpyAsync device to device
  memcpy_h2d,   ///< cudaMemcpyAsync pinned host to device
  memcpy_d2h,   ///< cudaMemcpyAsync device to pinned host
};

/// "copy/kernel", "triad/kernel", "copy/cudaMemcpyAsync_d2d", "copy/cudaMemcpyAsync_h2d", "copy/cudaMemcpyAsync_d2h".
inline const char* to_string(memory_op op) noexcept {
  switch (op) {
    case memory_op::copy_kernel: return "copy/kernel";
    case memory_op::triad_kernel: return "triad/kernel";
    case memory_op::memcpy_d2d: return "copy/cudaMemcpyAsync_d2d";
    case memory_op::memcpy_h2d: return "copy/cudaMemcpyAsync_h2d";
    case memory_op::memcpy_d2h: return "copy/cudaMemcpyAsync_d2h";
  }
  return "unknown";
}

/// A kernel's launch shape: threads per block, and 16-byte elements per thread in flight.
struct stream_kernel_config {
  int threads = 256;  ///< threads per block
  int unroll = 4;     ///< 16-byte loads each thread issues before its stores
  /// "256x4".
  std::string describe() const { return std::to_string(threads) + "x" + std::to_string(unroll); }
};

namespace detail {

// Each block moves threads * Unroll 16-byte elements; all loads are issued before the
// stores so each thread has Unroll requests in flight. Streaming hints (evict-first) keep
// the data from displacing what else is in L2.
template <int Unroll>
__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t n) {
  const std::size_t base = blockIdx.x * std::size_t(blockDim.x) * Unroll + threadIdx.x;
  uint4 v[Unroll];
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const std::size_t i = base + std::size_t(u) * blockDim.x;
    if (i < n) v[u] = __ldcs(in + i);
  }
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const std::size_t i = base + std::size_t(u) * blockDim.x;
    if (i < n) __stcs(out + i, v[u]);
  }
}

template <int Unroll>
__global__ void triad_kernel(double2* __restrict__ a, const double2* __restrict__ b, const double2* __restrict__ c,
                             double scalar, std::size_t n) {
  const std::size_t base = blockIdx.x * std::size_t(blockDim.x) * Unroll + threadIdx.x;
  double2 vb[Unroll], vc[Unroll];
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const std::size_t i = base + std::size_t(u) * blockDim.x;
    if (i < n) {
      vb[u] = __ldcs(b + i);
      vc[u] = __ldcs(c + i);
    }
  }
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const std::size_t i = base + std::size_t(u) * blockDim.x;
    if (i < n) __stcs(a + i, make_double2(vb[u].x + scalar * vc[u].x, vb[u].y + scalar * vc[u].y));
  }
}

// Counts positions where two word arrays differ and remembers the first.
template <class Word>
__global__ void count_differences(const Word* x, const Word* y, std::size_t n,
                                         unsigned long long* differences, unsigned long long* first) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    if (x[i] != y[i]) {
      atomicAdd(differences, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
  }
}

// Counts triad outputs off b + s c by more than one rounding.
template <class Real>
__global__ void count_triad_errors(const Real* a, const Real* b, const Real* c, Real scalar,
                                          std::size_t n, unsigned long long* errors, unsigned long long* first) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const Real expected = b[i] + scalar * c[i];
    const Real allowed = Real(0x1p-51) * (fabs(b[i]) + fabs(scalar * c[i]));
    if (!(fabs(a[i] - expected) <= allowed)) {
      atomicAdd(errors, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
  }
}

}  // namespace detail

/// How a memory kernel's launch shapes are searched: each timed once, the verified fastest
/// kept (the rule the shapes were chosen by before the operation contract). No re-timing
/// and no duel: both were measured on GEMMs under the power cap
/// (docs/results/h200-operations.md, "Why the search is built this way"), not on copies, and
/// the duel's spells would add seconds to every large row of a bandwidth sweep.
inline search_options memory_search_defaults() {
  search_options s;
  s.refine_rounds = 0;
  s.duel_contenders = 0;
  return s;
}

/// What a memory operation runs: its launch shape and how it was chosen.
struct memory_algorithm {
  std::string shape;                                          ///< "256x4" (threads x loads), or "cudaMemcpyAsync"
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< how it was chosen
  double searched_seconds = 0;                                ///< its median per call in the search (search only)
  /// "256x4 (search)".
  std::string describe() const { return shape + " (" + to_string(chosen_by) + ")"; }
};

/// One verified memory operation over `bytes` bytes (per buffer) on the current device.
class memory_bandwidth {
 public:
  /// Prepares the operation: allocates and fills the buffers on `stream` (throws
  /// out_of_memory with needed vs free) and, for the kernels, lists the launch shapes a
  /// search (choose_algorithm(), with `search`'s settings) times; until then the default
  /// shape runs. `bytes` must be a positive multiple of 16.
  memory_bandwidth(memory_op op, std::size_t bytes, cudaStream_t stream = nullptr,
                   const search_options& search = memory_search_defaults())
      : m_op(op), m_bytes(bytes), m_search(search) {
    if (bytes == 0 || bytes % 16 != 0) {
      throw invalid_argument("memory_bandwidth: bytes must be a positive multiple of 16 (got " + std::to_string(bytes) + ")");
    }
    check_fits();
    const std::size_t words = bytes / 4;
    switch (op) {
      case memory_op::copy_kernel:
      case memory_op::memcpy_d2d:
        m_in = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());
        m_out = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());
        fill_uniform(m_in.data(), words, 5, 0, double(std::numeric_limits<std::uint32_t>::max()), stream);
        break;
      case memory_op::triad_kernel:
        m_in = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());   // b
        m_in2 = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());  // c
        m_out = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());  // a
        fill_uniform(reinterpret_cast<double*>(m_in.data()), bytes / 8, 6, -1, 1, stream);
        fill_uniform(reinterpret_cast<double*>(m_in2.data()), bytes / 8, 7, -1, 1, stream);
        break;
      case memory_op::memcpy_h2d:
        m_host = pinned_buffer<std::uint32_t>(words);
        m_out = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());
        for (std::size_t i = 0; i < words; ++i) m_host.data()[i] = std::uint32_t(random_bits(8, i));
        break;
      case memory_op::memcpy_d2h:
        m_in = device_buffer<std::uint32_t>(words, initial_fill::uninitialized());
        m_host = pinned_buffer<std::uint32_t>(words);
        fill_uniform(m_in.data(), words, 9, 0, double(std::numeric_limits<std::uint32_t>::max()), stream);
        break;
    }
    poison_output(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_configs.push_back(stream_kernel_config{});  // the default shape first: it runs until a search
    if (is_kernel()) {
      for (int threads : {128, 256, 512, 1024}) {
        for (int unroll : {1, 2, 4, 8}) {
          const stream_kernel_config c{threads, unroll};
          // A shape whose block needs more registers than an SM has cannot launch (triad
          // with 8 loads in flight uses 86 registers per thread on sm_90: 1024 threads fail):
          // no candidate, rather than a failed launch in every search.
          if (c.threads > max_block_threads(c.unroll)) continue;
          if (c.threads != m_configs[0].threads || c.unroll != m_configs[0].unroll) m_configs.push_back(c);
        }
      }
    }
  }

  /// Device bytes its buffers take for `op` over `bytes` bytes (pinned host memory aside).
  static double bytes_needed(memory_op op, std::size_t bytes) {
    const double buffers = op == memory_op::triad_kernel ? 3 : op == memory_op::memcpy_h2d || op == memory_op::memcpy_d2h ? 1 : 2;
    return buffers * double(bytes);
  }

  /// Enqueues the operation on `stream`.
  void operator()(cudaStream_t stream) { run(m_config, stream); }

  /// "copy/kernel/1073741824".
  std::string name() const { return std::string(to_string(m_op)) + "/" + std::to_string(m_bytes); }
  /// Its row's axes (operation, bytes per buffer), the axis a sweep varies, what runs it and
  /// the CUDA runtime that did.
  std::vector<axis> axes() const { return {axis::of("operation", to_string(m_op)), axis::of("bytes", double(m_bytes))}; }
  std::string sweep_axis() const { return "bytes"; }  ///< see axes()
  std::string provider() const { return is_kernel() ? "gpucmp kernel" : "CUDA runtime"; }  ///< see axes()
  std::vector<std::pair<std::string, std::string>> libraries() const {  ///< see axes()
    int runtime = 0;
    GPUCMP_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    return {{"cudart", std::to_string(runtime)}};
  }
  /// Launch shapes to choose from (one for the cudaMemcpyAsync operations).
  std::size_t candidate_count() const noexcept { return m_configs.size(); }
  /// Candidate `i`'s launch shape ("256x4"), or "cudaMemcpyAsync".
  std::string describe_candidate(std::size_t i) const { return is_kernel() ? m_configs.at(i).describe() : "cudaMemcpyAsync"; }
  /// Runs candidate `i` from now on.
  void select(std::size_t i, cudaStream_t /*stream*/) { m_config = m_configs.at(i); }
  /// search for the kernels (their launch shape), heuristic for the copies (nothing to choose).
  algorithm_choice choice() const noexcept { return is_kernel() ? algorithm_choice::search : algorithm_choice::heuristic; }
  /// The settings it was prepared with.
  const search_options& search_settings() const noexcept { return m_search; }
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    select(chosen.index, nullptr);
    m_chosen_by = algorithm_choice::search;
    m_searched_seconds = chosen.seconds;
    m_search_log = std::move(log);
  }
  /// What it runs now.
  memory_algorithm algorithm() const {
    return {is_kernel() ? m_config.describe() : "cudaMemcpyAsync", m_chosen_by, m_searched_seconds};
  }

  /// Runs once on a poisoned destination and checks every byte (copies) or every element
  /// (triad, within one rounding).
  verification verify(cudaStream_t stream) {
    poison_output(stream);
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output(stream);
  }

  /// Checks the destination as it is now (verify() without the run).
  verification check_output(cudaStream_t stream) const {
    verification v;
    unsigned long long bad = 0, first = std::numeric_limits<unsigned long long>::max();
    std::size_t checked = 0;
    if (m_op == memory_op::memcpy_h2d || m_op == memory_op::memcpy_d2h) {
      std::vector<std::uint32_t> device_side(m_bytes / 4);
      const std::uint32_t* d = m_op == memory_op::memcpy_h2d ? m_out.data() : m_in.data();
      GPUCMP_CUDA_CHECK(cudaMemcpy(device_side.data(), d, m_bytes, cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < device_side.size(); ++i) {
        if (device_side[i] != m_host.data()[i]) {
          ++bad;
          if (i < first) first = i;
        }
      }
      checked = device_side.size();
      v.method = "every 32-bit word, on the CPU";
    } else {
      device_buffer<unsigned long long> counters(2, initial_fill::uninitialized());
      counters.copy_from_host({0ull, std::numeric_limits<unsigned long long>::max()});
      if (m_op == memory_op::triad_kernel) {
        detail::count_triad_errors<<<1024, 256, 0, stream>>>(reinterpret_cast<const double*>(m_out.data()),
                                                            reinterpret_cast<const double*>(m_in.data()),
                                                            reinterpret_cast<const double*>(m_in2.data()), triad_scalar,
                                                            m_bytes / 8, counters.data(), counters.data() + 1);
        checked = m_bytes / 8;
        v.method = "every FP64 element against b + s c, on the GPU";
      } else {
        detail::count_differences<<<1024, 256, 0, stream>>>(m_in.data(), m_out.data(), m_bytes / 4, counters.data(),
                                                           counters.data() + 1);
        checked = m_bytes / 4;
        v.method = "every 32-bit word, on the GPU";
      }
      GPUCMP_CUDA_CHECK_LAST("memory verification kernel");
      const auto c = counters.to_host();
      bad = c[0];
      first = c[1];
    }
    v.checked = checked;
    v.failed = std::size_t(bad);
    v.worst_ratio = bad == 0 ? 0 : INFINITY;
    if (bad != 0) v.worst_where = "element " + std::to_string(first);
    return v;
  }

  /// One call's work: bytes read and written in device memory (a copy of B bytes: B read +
  /// B written; triad: 2B + B). Host<->device copies count the B bytes that cross the bus
  /// once, so their rate is the link's (bandwidthTest's convention).
  gpucmp::work work() const {
    gpucmp::work w;
    const bool over_bus = m_op == memory_op::memcpy_h2d || m_op == memory_op::memcpy_d2h;
    w.bytes_read = double(m_bytes) * (m_op == memory_op::triad_kernel ? 2 : 1);
    w.bytes_written = over_bus ? 0.0 : double(m_bytes);
    if (m_op == memory_op::triad_kernel) w.flops = 2.0 * double(m_bytes / 8);
    w.arithmetic = m_op == memory_op::triad_kernel ? precision::fp64 : precision::none;
    return w;
  }

  /// The destination: a device pointer, or the pinned host buffer for memcpy_d2h.
  void* destination() noexcept { return m_op == memory_op::memcpy_d2h ? static_cast<void*>(m_host.data()) : m_out.data(); }

  /// The kernels' selected launch shape (threads x loads per thread).
  const stream_kernel_config& config() const noexcept { return m_config; }
  /// Every timing of its search (kernels only; empty until a search ran).
  const std::vector<candidate_time>& search_log() const noexcept { return m_search_log; }
  /// The operation.
  memory_op op() const noexcept { return m_op; }
  /// Bytes per buffer.
  std::size_t bytes() const noexcept { return m_bytes; }

  static constexpr double triad_scalar = 3.0;  ///< s in a = b + s c

 private:
  bool is_kernel() const noexcept { return m_op == memory_op::copy_kernel || m_op == memory_op::triad_kernel; }

  void check_fits() const {
    const double needed = bytes_needed(m_op, m_bytes);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) {
      throw out_of_memory(std::size_t(needed), free_bytes, total_bytes,
                          std::string(to_string(m_op)) + " of " + std::to_string(m_bytes) + " bytes");
    }
  }

  void poison_output(cudaStream_t stream) {
    if (m_op == memory_op::memcpy_d2h) {
      std::memset(m_host.data(), 0xFF, m_bytes);
    } else {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_out.data(), 0xFF, m_bytes, stream));
    }
  }

  template <int Unroll>
  void run_kernel(const stream_kernel_config& c, cudaStream_t stream) {
    const std::size_t n = m_bytes / 16;
    const std::size_t per_block = std::size_t(c.threads) * Unroll;
    const std::size_t blocks = (n + per_block - 1) / per_block;
    if (blocks > std::size_t(std::numeric_limits<int>::max())) throw invalid_argument("memory_bandwidth: buffer too large for one grid");
    if (m_op == memory_op::copy_kernel) {
      detail::copy_kernel<Unroll><<<unsigned(blocks), unsigned(c.threads), 0, stream>>>(
          reinterpret_cast<const uint4*>(m_in.data()), reinterpret_cast<uint4*>(m_out.data()), n);
      GPUCMP_CUDA_CHECK_LAST("copy_kernel");
    } else {
      detail::triad_kernel<Unroll><<<unsigned(blocks), unsigned(c.threads), 0, stream>>>(
          reinterpret_cast<double2*>(m_out.data()), reinterpret_cast<const double2*>(m_in.data()),
          reinterpret_cast<const double2*>(m_in2.data()), triad_scalar, n);
      GPUCMP_CUDA_CHECK_LAST("triad_kernel");
    }
  }

  // The largest block the kernel for `unroll` launches with on this device, as the driver
  // sees the loaded function (its registers; under compute-sanitizer, the tool's too).
  int max_block_threads(int unroll) const {
    switch (unroll) {
      case 1: return max_block_threads<1>();
      case 2: return max_block_threads<2>();
      case 4: return max_block_threads<4>();
      case 8: return max_block_threads<8>();
      default: throw invalid_argument("memory_bandwidth: unroll must be 1, 2, 4 or 8");
    }
  }

  template <int Unroll>
  int max_block_threads() const {
    cudaFuncAttributes a{};
    if (m_op == memory_op::copy_kernel) {
      GPUCMP_CUDA_CHECK(cudaFuncGetAttributes(&a, detail::copy_kernel<Unroll>));
    } else {
      GPUCMP_CUDA_CHECK(cudaFuncGetAttributes(&a, detail::triad_kernel<Unroll>));
    }
    return a.maxThreadsPerBlock;
  }

  void run(const stream_kernel_config& c, cudaStream_t stream) {
    switch (m_op) {
      case memory_op::copy_kernel:
      case memory_op::triad_kernel:
        switch (c.unroll) {
          case 1: run_kernel<1>(c, stream); break;
          case 2: run_kernel<2>(c, stream); break;
          case 4: run_kernel<4>(c, stream); break;
          case 8: run_kernel<8>(c, stream); break;
          default: throw invalid_argument("memory_bandwidth: unroll must be 1, 2, 4 or 8");
        }
        break;
      case memory_op::memcpy_d2d:
        GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_out.data(), m_in.data(), m_bytes, cudaMemcpyDeviceToDevice, stream));
        break;
      case memory_op::memcpy_h2d:
        GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_out.data(), m_host.data(), m_bytes, cudaMemcpyHostToDevice, stream));
        break;
      case memory_op::memcpy_d2h:
        GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_host.data(), m_in.data(), m_bytes, cudaMemcpyDeviceToHost, stream));
        break;
    }
  }

  memory_op m_op;
  std::size_t m_bytes;
  search_options m_search;
  device_buffer<std::uint32_t> m_in, m_in2, m_out;
  pinned_buffer<std::uint32_t> m_host;
  std::vector<stream_kernel_config> m_configs;  // the candidates
  stream_kernel_config m_config;
  std::vector<candidate_time> m_search_log;
  algorithm_choice m_chosen_by = algorithm_choice::heuristic;
  double m_searched_seconds = 0;
};

}  // namespace gpucmp
