// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NCCL communicators for several GPUs driven by one process (ncclCommInitAll), each rank with
// its own non-blocking stream on its device (component gpucmp::nccl). One GPU is a group of
// one: every collective then runs with n = 1. RAII: the destructor destroys the
// communicators and streams and never throws.
//
//   gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
//   group.ranks();                        // 2 on a two-GPU machine
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/multigpu/nccl_status.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// One communicator per device, in one process.
class communicator_group {
 public:
  /// Every visible device, rank r on device r. Throws unsupported when there is none.
  static communicator_group all_visible() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      throw unsupported(std::string("communicator_group: no CUDA device (") + cudaGetErrorString(e) + ")");
    }
    std::vector<int> devices;
    for (int d = 0; d < count; ++d) devices.push_back(d);
    return communicator_group(devices);
  }

  /// Rank r on devices[r]. Throws invalid_argument for an empty list or a repeated or unknown
  /// device.
  explicit communicator_group(std::vector<int> devices) : m_devices(std::move(devices)) {
    if (m_devices.empty()) throw invalid_argument("communicator_group: no devices");
    int count = 0;
    GPUCMP_CUDA_CHECK(cudaGetDeviceCount(&count));
    for (std::size_t i = 0; i < m_devices.size(); ++i) {
      if (m_devices[i] < 0 || m_devices[i] >= count) {
        throw invalid_argument("communicator_group: device " + std::to_string(m_devices[i]) + " is not one of the " +
                               std::to_string(count) + " visible");
      }
      for (std::size_t j = 0; j < i; ++j) {
        if (m_devices[j] == m_devices[i]) throw invalid_argument("communicator_group: device " + std::to_string(m_devices[i]) + " twice");
      }
    }
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    try {
      m_comms.assign(m_devices.size(), nullptr);
      GPUCMP_NCCL_CHECK(ncclCommInitAll(m_comms.data(), int(m_devices.size()), m_devices.data()));
      for (int d : m_devices) {
        GPUCMP_CUDA_CHECK(cudaSetDevice(d));
        cudaStream_t s = nullptr;
        GPUCMP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        m_streams.push_back(s);
      }
    } catch (...) {
      release();
      cudaSetDevice(previous);
      throw;
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
  }
  communicator_group(const communicator_group&) = delete;
  communicator_group& operator=(const communicator_group&) = delete;
  communicator_group(communicator_group&& o) noexcept
      : m_devices(std::move(o.m_devices)), m_comms(std::move(o.m_comms)), m_streams(std::move(o.m_streams)) {
    o.m_comms.clear();
    o.m_streams.clear();
  }
  communicator_group& operator=(communicator_group&&) = delete;
  ~communicator_group() { release(); }

  /// Ranks in the group.
  int ranks() const noexcept { return int(m_devices.size()); }
  /// Every rank's device, in rank order.
  const std::vector<int>& devices() const noexcept { return m_devices; }
  /// The device of rank `rank`.
  int device(int rank) const { return m_devices.at(std::size_t(rank)); }
  /// The communicator of rank `rank`.
  ncclComm_t comm(int rank) const { return m_comms.at(std::size_t(rank)); }
  /// Rank `rank`'s stream (non-blocking, on its device).
  cudaStream_t stream(int rank) const { return m_streams.at(std::size_t(rank)); }
  /// Waits for every rank's stream.
  void synchronize() const {
    for (std::size_t r = 0; r < m_streams.size(); ++r) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_devices[r]));
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(m_streams[r]));
    }
  }

 private:
  void release() noexcept {
    int previous = 0;
    const bool known = cudaGetDevice(&previous) == cudaSuccess;
    for (ncclComm_t c : m_comms) {
      if (c != nullptr) ncclCommDestroy(c);
    }
    m_comms.clear();
    for (std::size_t r = 0; r < m_streams.size(); ++r) {
      if (cudaSetDevice(m_devices[r]) == cudaSuccess) cudaStreamDestroy(m_streams[r]);
    }
    m_streams.clear();
    if (known) cudaSetDevice(previous);
    cudaGetLastError();
  }

  std::vector<int> m_devices;
  std::vector<ncclComm_t> m_comms;
  std::vector<cudaStream_t> m_streams;
};

}  // namespace gpucmp
