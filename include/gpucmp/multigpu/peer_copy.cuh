// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Copies between two GPUs, for the P2P matrix: `bytes` from device `from` to device `to`
// through cudaMemcpyPeerAsync (the copy engines) or through gpucmp's copy kernel running on
// the destination and reading the source over peer access (the SMs; needs peer access), in
// one direction or both at once. Like the collectives, a call forks from the stream it is
// given and joins back, so the engine times it in hot mode or as a graph. verify() checks
// every destination byte against the source's pattern. Core CUDA only.
//
//   gpucmp::peer_copy copy(0, 1, std::size_t{1} << 30, gpucmp::peer_method::memcpy_peer);
//   require_passed(copy.name(), copy.verify(stream));
//   st.set_work(copy.work());    // bytes moved (both directions count twice)
//   st.run(copy);
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/multigpu/stream_fork.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// How a peer copy moves the bytes.
enum class peer_method {
  memcpy_peer,  ///< cudaMemcpyPeerAsync: the copy engines
  copy_kernel,  ///< a kernel on the destination reading the source over peer access (the SMs)
};

/// "memcpy_peer" or "copy_kernel".
inline const char* to_string(peer_method m) noexcept { return m == peer_method::memcpy_peer ? "memcpy_peer" : "copy_kernel"; }

/// Whether device `from` can be read by device `to` (cudaDeviceCanAccessPeer), and why not.
struct peer_access {
  bool possible = false;
  std::string reason;  ///< "" when possible
};

/// Peer access from `to` to `from`'s memory. Same device: not a peer copy.
inline peer_access query_peer_access(int from, int to) {
  if (from == to) return {false, "one GPU: device " + std::to_string(from) + " is not its own peer"};
  int can = 0;
  GPUCMP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, to, from));
  if (can == 0) return {false, "peer access from device " + std::to_string(to) + " to device " + std::to_string(from) + " is off"};
  return {true, ""};
}

namespace detail {

template <int = 0>  // a template: header kernels stay one definition across translation units
__global__ void peer_copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

template <int = 0>
__global__ void peer_pattern_kernel(std::uint32_t* data, std::size_t words, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < words; i += std::size_t(gridDim.x) * blockDim.x) {
    data[i] = std::uint32_t(i * 2654435761u) ^ seed;
  }
}

template <int = 0>
__global__ void peer_check_kernel(const std::uint32_t* data, std::size_t words, std::uint32_t seed, unsigned long long* wrong,
                                  unsigned long long* first) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < words; i += std::size_t(gridDim.x) * blockDim.x) {
    if (data[i] != (std::uint32_t(i * 2654435761u) ^ seed)) {
      atomicAdd(wrong, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

}  // namespace detail

/// One peer copy (file comment).
class peer_copy {
 public:
  /// `bytes` (a multiple of 16) from device `from` to device `to`, and back at the same time
  /// with `both_ways`. Throws unsupported when the devices are the same or (copy_kernel) peer
  /// access is off, invalid_argument for a size that is not a positive multiple of 16.
  peer_copy(int from, int to, std::size_t bytes, peer_method method, bool both_ways = false)
      : m_from(from), m_to(to), m_bytes(bytes), m_method(method), m_both(both_ways) {
    if (bytes == 0 || bytes % 16 != 0) throw invalid_argument("peer_copy: bytes must be a positive multiple of 16, got " + std::to_string(bytes));
    const peer_access access = query_peer_access(from, to);
    if (from == to || (method == peer_method::copy_kernel && !access.possible)) throw unsupported("peer_copy " + name() + ": " + access.reason);
    if (m_both && method == peer_method::copy_kernel && !query_peer_access(to, from).possible) {
      throw unsupported("peer_copy " + name() + ": " + query_peer_access(to, from).reason);
    }
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    for (int side = 0; side < 2; ++side) {
      const int device = side == 0 ? from : to;
      GPUCMP_CUDA_CHECK(cudaSetDevice(device));
      if (method == peer_method::copy_kernel) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(side == 0 ? to : from, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) GPUCMP_CUDA_CHECK(e);
        cudaGetLastError();  // an already-enabled peer is not an error here
      }
      m_source[side] = device_buffer<unsigned char>(bytes, initial_fill::uninitialized());
      m_destination[side] = device_buffer<unsigned char>(bytes, initial_fill::uninitialized());
      cudaStream_t s = nullptr;
      GPUCMP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      m_streams[side] = s;
      const std::size_t words = bytes / 4;
      detail::peer_pattern_kernel<><<<grid(words), 256>>>(reinterpret_cast<std::uint32_t*>(m_source[side].data()), words, seed(side));
      GPUCMP_CUDA_CHECK_LAST("peer_pattern_kernel");
      GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_fork = std::make_unique<stream_fork>(std::vector<int>{from, to});  // a branch per side, on its device
  }
  peer_copy(const peer_copy&) = delete;
  peer_copy& operator=(const peer_copy&) = delete;
  ~peer_copy() {
    for (int side = 0; side < 2; ++side) {
      if (m_streams[side] != nullptr) cudaStreamDestroy(m_streams[side]);
    }
    cudaGetLastError();
  }

  /// "memcpy_peer/0_1/1073741824/one_way".
  std::string name() const {
    return std::string(to_string(m_method)) + "/" + std::to_string(m_from) + "_" + std::to_string(m_to) + "/" + std::to_string(m_bytes) +
           "/" + (m_both ? "both_ways" : "one_way");
  }
  /// Bytes moved per call: each direction's bytes once (read on one GPU, written on the other).
  gpucmp::work work() const {
    gpucmp::work w;
    w.bytes_read = double(m_bytes) * (m_both ? 2 : 1);
    return w;
  }

  /// Enqueues the copy (both copies with both_ways), forked from and joined to `stream`.
  void operator()(cudaStream_t stream) const {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    m_fork->begin(stream);
    for (int side = 0; side < (m_both ? 2 : 1); ++side) {
      // Direction `side`: 0 copies from -> to, 1 copies to -> from; each runs on its destination.
      const int source = side == 0 ? m_from : m_to, destination = side == 0 ? m_to : m_from;
      const int at = side == 0 ? 1 : 0;  // the destination's stream and buffers
      GPUCMP_CUDA_CHECK(cudaSetDevice(destination));
      const cudaStream_t s = m_streams[at];
      m_fork->wait(std::size_t(at), s);
      const void* in = m_source[1 - at].data();
      void* out = const_cast<unsigned char*>(m_destination[at].data());
      if (m_method == peer_method::memcpy_peer) {
        GPUCMP_CUDA_CHECK(cudaMemcpyPeerAsync(out, destination, in, source, m_bytes, s));
      } else {
        const std::size_t vectors = m_bytes / 16;
        detail::peer_copy_kernel<><<<grid(vectors), 256, 0, s>>>(static_cast<const uint4*>(in), static_cast<uint4*>(out), vectors);
        GPUCMP_CUDA_CHECK_LAST("peer_copy_kernel");
      }
      m_fork->done(std::size_t(at), s);
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_fork->join(stream);
  }

  /// Poisons the destinations, copies once from `stream`, and checks every destination word
  /// against its source's pattern. Synchronizes.
  verification verify(cudaStream_t stream) {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    for (int side = 0; side < 2; ++side) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(side == 0 ? m_from : m_to));
      GPUCMP_CUDA_CHECK(cudaMemset(m_destination[side].data(), 0xFF, m_bytes));
      GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    verification v;
    v.method = "every destination word against the source's pattern";
    for (int side = 0; side < (m_both ? 2 : 1); ++side) {
      const int at = side == 0 ? 1 : 0;
      GPUCMP_CUDA_CHECK(cudaSetDevice(at == 1 ? m_to : m_from));
      device_buffer<unsigned long long> counters(2, initial_fill::uninitialized());
      const unsigned long long init[2] = {0, ~0ull};
      GPUCMP_CUDA_CHECK(cudaMemcpy(counters.data(), init, sizeof init, cudaMemcpyHostToDevice));
      const std::size_t words = m_bytes / 4;
      detail::peer_check_kernel<><<<grid(words), 256>>>(reinterpret_cast<const std::uint32_t*>(m_destination[at].data()), words,
                                                        seed(1 - at), counters.data(), counters.data() + 1);
      GPUCMP_CUDA_CHECK_LAST("peer_check_kernel");
      unsigned long long got[2] = {0, 0};
      GPUCMP_CUDA_CHECK(cudaMemcpy(got, counters.data(), sizeof got, cudaMemcpyDeviceToHost));
      v.checked += words;
      v.failed += std::size_t(got[0]);
      if (got[0] != 0 && v.worst_where.empty()) {
        v.worst_where = "device " + std::to_string(at == 1 ? m_to : m_from) + ", word " + std::to_string(got[1]);
        v.worst_ratio = INFINITY;
      }
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    return v;
  }

 private:
  static unsigned grid(std::size_t count) { return unsigned(std::max<std::size_t>(1, std::min<std::size_t>((count + 255) / 256, 4096))); }
  static std::uint32_t seed(int side) noexcept { return side == 0 ? 0x5EED0000u : 0x5EED1111u; }

  int m_from, m_to;
  std::size_t m_bytes;
  peer_method m_method;
  bool m_both;
  device_buffer<unsigned char> m_source[2], m_destination[2];  // [0] on `from`, [1] on `to`
  cudaStream_t m_streams[2] = {nullptr, nullptr};
  std::unique_ptr<stream_fork> m_fork;  // made last: a refused copy makes no events
};

}  // namespace gpucmp
