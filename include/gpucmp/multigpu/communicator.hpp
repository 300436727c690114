// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A process's share of an NCCL communicator: the ranks whose GPUs this process drives, each
// with its own non-blocking stream on its device (component gpucmp::nccl). Either every rank
// in one process (ncclCommInitAll), or some ranks of a world that spans processes, joined
// through an NCCL unique id (ncclCommInitRank; multigpu/mpi_world.hpp hands the id round
// over MPI, one process per GPU). One GPU is a group of one: every collective then runs with
// n = 1. RAII: the destructor destroys the communicators and streams and never throws.
//
//   gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
//   group.ranks();                        // 2 on a two-GPU machine
//   group.local_ranks();                  // 2: both in this process
// Local index i (0 .. local_ranks() - 1) names this process's ranks; rank(i) is its rank in
// the world.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/multigpu/nccl_status.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// This process's ranks of one NCCL communicator (file comment).
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
  explicit communicator_group(std::vector<int> devices) : communicator_group(nullptr, 0, 0, std::move(devices)) {}

  /// Ranks first_rank .. first_rank + devices.size() - 1 of a world of `world_ranks` ranks,
  /// on `devices`, joined through `id` (ncclGetUniqueId on one process, handed to all). Every
  /// process of the world must call this with the same id and world; it returns once all
  /// have. Throws invalid_argument for ranks outside the world and what the list constructor
  /// throws.
  communicator_group(const ncclUniqueId& id, int world_ranks, int first_rank, std::vector<int> devices)
      : communicator_group(&id, world_ranks, first_rank, std::move(devices)) {}
  communicator_group(const communicator_group&) = delete;
  communicator_group& operator=(const communicator_group&) = delete;
  communicator_group(communicator_group&& o) noexcept
      : m_devices(std::move(o.m_devices)), m_world(o.m_world), m_first(o.m_first), m_comms(std::move(o.m_comms)),
        m_streams(std::move(o.m_streams)) {
    o.m_comms.clear();
    o.m_streams.clear();
  }
  communicator_group& operator=(communicator_group&&) = delete;
  ~communicator_group() { release(); }

  /// Ranks in the communicator, across every process.
  int ranks() const noexcept { return m_world; }
  /// Ranks this process drives.
  int local_ranks() const noexcept { return int(m_devices.size()); }
  /// The world rank of local rank `local`.
  int rank(int local) const { return m_first + int(checked(local)); }
  /// True when every rank is in this process.
  bool single_process() const noexcept { return local_ranks() == m_world; }
  /// This process's devices, in local rank order.
  const std::vector<int>& devices() const noexcept { return m_devices; }
  /// The device of local rank `local`.
  int device(int local) const { return m_devices[checked(local)]; }
  /// The communicator of local rank `local`.
  ncclComm_t comm(int local) const { return m_comms[checked(local)]; }
  /// Local rank `local`'s stream (non-blocking, on its device).
  cudaStream_t stream(int local) const { return m_streams[checked(local)]; }
  /// Waits for every local rank's stream.
  void synchronize() const {
    for (std::size_t r = 0; r < m_streams.size(); ++r) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_devices[r]));
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(m_streams[r]));
    }
  }

 private:
  // id null: every rank here (ncclCommInitAll); else ncclCommInitRank for each device.
  communicator_group(const ncclUniqueId* id, int world_ranks, int first_rank, std::vector<int> devices)
      : m_devices(std::move(devices)), m_world(id ? world_ranks : int(m_devices.size())), m_first(id ? first_rank : 0) {
    if (m_devices.empty()) throw invalid_argument("communicator_group: no devices");
    if (m_first < 0 || m_first + int(m_devices.size()) > m_world) {
      throw invalid_argument("communicator_group: ranks " + std::to_string(m_first) + " to " +
                             std::to_string(m_first + int(m_devices.size()) - 1) + " are not in a world of " + std::to_string(m_world));
    }
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
      if (id == nullptr) {
        GPUCMP_NCCL_CHECK(ncclCommInitAll(m_comms.data(), int(m_devices.size()), m_devices.data()));
      } else {
        // Several ranks of one process join in a group, or the first would wait for the next.
        GPUCMP_NCCL_CHECK(ncclGroupStart());
        try {
          for (std::size_t i = 0; i < m_devices.size(); ++i) {
            GPUCMP_CUDA_CHECK(cudaSetDevice(m_devices[i]));
            GPUCMP_NCCL_CHECK(ncclCommInitRank(&m_comms[i], m_world, *id, m_first + int(i)));
          }
        } catch (...) {
          ncclGroupEnd();  // leave NCCL's group; the first error is the one to report
          throw;
        }
        GPUCMP_NCCL_CHECK(ncclGroupEnd());
      }
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

  std::size_t checked(int local) const {
    if (local < 0 || local >= int(m_devices.size())) {
      throw invalid_argument("communicator_group: local rank " + std::to_string(local) + " of " + std::to_string(m_devices.size()));
    }
    return std::size_t(local);
  }

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
  int m_world = 0;  // ranks across every process
  int m_first = 0;  // world rank of local rank 0
  std::vector<ncclComm_t> m_comms;
  std::vector<cudaStream_t> m_streams;
};

}  // namespace gpucmp
