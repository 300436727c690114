// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Guard bands: bytes after a buffer filled with a known pattern and checked after a kernel
// ran. Comparing a layer's output with a reference cannot see a write past the output's end;
// that write lands in some other tensor, and every later check then agrees with the damage.
// A changed guard names the layer that made it.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/verification.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace gpucmp {

/// The byte a guard band holds.
inline constexpr unsigned char guard_pattern = 0xA5;

/// What a guard band check found.
struct guard_check {
  std::size_t changed = 0;  ///< bytes that no longer hold guard_pattern
  std::size_t first = 0;    ///< offset of the first of them from the band's start
  bool intact() const noexcept { return changed == 0; }
};

namespace detail {

template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void count_changed_kernel(const unsigned char* band, std::size_t bytes, unsigned char pattern,
                                            unsigned long long* changed, unsigned long long* first) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < bytes; i += std::size_t(gridDim.x) * blockDim.x) {
    if (band[i] != pattern) {
      atomicAdd(changed, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

}  // namespace detail

/// Fills `bytes` at `band` with guard_pattern (asynchronous on `stream`).
inline void fill_guard(void* band, std::size_t bytes, cudaStream_t stream) {
  if (bytes != 0) GPUCMP_CUDA_CHECK(cudaMemsetAsync(band, guard_pattern, bytes, stream));
}

/// Counts the bytes at `band` that changed since fill_guard (synchronizes `stream`).
inline guard_check check_guard(const void* band, std::size_t bytes, cudaStream_t stream) {
  guard_check out;
  if (bytes == 0) return out;
  device_buffer<unsigned long long> counters(2, initial_fill::uninitialized());
  counters.copy_from_host({0ull, ~0ull});
  const unsigned blocks = unsigned(std::min<std::size_t>((bytes + 255) / 256, 1024));
  detail::count_changed_kernel<><<<blocks, 256, 0, stream>>>(static_cast<const unsigned char*>(band), bytes, guard_pattern,
                                                          counters.data(), counters.data() + 1);
  GPUCMP_CUDA_CHECK_LAST("count_changed_kernel");
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<unsigned long long> host = counters.to_host();
  out.changed = std::size_t(host[0]);
  out.first = out.changed != 0 ? std::size_t(host[1]) : 0;
  return out;
}

/// One guard band after a buffer: where it starts, its bytes (0: none), and what it follows
/// ("its output").
struct guard_band_at {
  const void* start;
  std::size_t bytes;
  const char* after;
};

/// Folds the checks of `bands` (filled by fill_guard before the run) into a layer's output
/// check `v`: a band that changed fails it, naming how many bytes were written past the end
/// of what and where the first landed. Synchronizes `stream`.
inline void add_guard_checks(verification& v, std::initializer_list<guard_band_at> bands, cudaStream_t stream) {
  for (const guard_band_at& b : bands) {
    const guard_check g = check_guard(b.start, b.bytes, stream);
    if (g.intact()) continue;
    v.method += "; guard band after " + std::string(b.after);
    v.failed += g.changed;
    v.checked += b.bytes;
    v.worst_where = "wrote " + std::to_string(g.changed) + " bytes past the end of " + b.after + " (first at +" +
                    std::to_string(g.first) + " bytes)";
    v.worst_ratio = INFINITY;
  }
}

}  // namespace gpucmp
