// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One NCCL collective over a communicator_group, checked and timed like any operation
// (component gpucmp::nccl). Each rank's input holds collective_input()'s small integers, so
// verify() checks every output element on its GPU against the exact result
// (multigpu/collective_math.hpp), as nccl-tests' -c does.
//
// Timing across ranks: operator()(stream) forks from `stream` (an event every rank's stream
// waits for), launches the collective on every rank in one NCCL group, and joins back
// (`stream` waits for an event on every rank's stream). The engine then times the call on
// `stream` like any other, from the first rank's start to the last rank's end, in hot mode or
// captured into one CUDA graph. With ranks in several processes (one per GPU under MPI),
// each process launches, fills and checks its own ranks, and every process must make the
// same calls in the same order (multigpu/mpi_world.hpp, measure_options' make_lockstep).
//
//   gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
//   gpucmp::nccl_collective op(group, gpucmp::collective::all_reduce, std::size_t{1} << 30,
//                              gpucmp::element_type::fp32);
//   require_passed(op.name(), op.verify(stream));
//   st.set_work(op.work());           // S bytes per call (algbw); busbw is op.bus_factor() x that
//   st.run(op);
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/multigpu/collective_math.hpp>
#include <gpucmp/multigpu/communicator.hpp>
#include <gpucmp/multigpu/nccl_status.hpp>
#include <gpucmp/multigpu/nccl_types.hpp>
#include <gpucmp/multigpu/stream_fork.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The most ranks whose sums a collective's data check keeps exact in `t` (each rank adds
/// small integers, collective_input): FP16 above 128, BF16 and INT8 above 8 would round or
/// wrap. 0: the collectives do not take `t`.
inline int collective_exact_ranks(element_type t) noexcept {
  switch (t) {
    case element_type::fp64:
    case element_type::fp32:
    case element_type::int32: return 1 << 20;
    case element_type::fp16: return 128;
    case element_type::bf16:
    case element_type::int8: return 8;
    case element_type::fp8_e4m3:  // NCCL reduces FP8 on sm_90+ only; the data check has no FP8 rule yet
    case element_type::fp8_e5m2: return 0;
  }
  return 0;
}

/// How a collective call is set up.
struct nccl_collective_options {
  bool in_place = false;  ///< the output overwrites the input (nccl-tests' in-place column)
};

namespace detail {

template <class T>
__global__ void fill_collective_input(T* data, std::int64_t count, int rank) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    data[i] = from_double<T>(collective_input(rank, i));
  }
}

// Counts outputs that differ from the exact result; the smallest such index goes to *first.
template <class T>
__global__ void check_collective_output(const T* out, std::int64_t count, collective kind, int ranks, std::int64_t call_count,
                                        int rank, unsigned long long* wrong, unsigned long long* first) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const double want = collective_expected_unchecked(kind, ranks, call_count, rank, i);
    if (isnan(want)) continue;  // undefined there (reduce off the root)
    if (!(to_double(out[i]) == want)) {
      atomicAdd(wrong, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

inline unsigned collective_grid(std::int64_t count) {
  return unsigned(std::max<std::int64_t>(1, std::min<std::int64_t>((count + 255) / 256, 4096)));
}

}  // namespace detail

/// One collective over every rank of a group (file comment).
class nccl_collective {
 public:
  /// Sizes the call for `bytes` (nccl-tests' sizes: the whole array for all-gather,
  /// reduce-scatter and all-to-all), allocates each rank's input and output on its device,
  /// fills the inputs and poisons the outputs. Throws invalid_argument for a rank count the
  /// data check cannot keep exact (FP16 above 128, BF16 and INT8 above 8), unsupported for FP8
  /// (collective_exact_ranks), out_of_memory.
  nccl_collective(const communicator_group& group, collective kind, std::size_t bytes, element_type dtype,
                  const nccl_collective_options& options = {})
      : m_group(group), m_dtype(dtype), m_options(options),
        m_size(size_for_bytes(kind, group.ranks(), bytes, element_bytes(dtype))), m_fork(group.devices()) {
    const int n = group.ranks();
    const int exact_up_to = collective_exact_ranks(dtype);
    if (exact_up_to == 0) throw unsupported(name() + ": collectives of " + to_string(dtype) + " are not measured here");
    if (n > exact_up_to) {
      throw invalid_argument(name() + ": sums over " + std::to_string(n) + " ranks are not exact in " + to_string(dtype));
    }
    if (options.in_place && (kind == collective::all_to_all || kind == collective::send_recv)) {
      throw invalid_argument(name() + ": NCCL has no in-place " + to_string(kind));
    }
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    const std::size_t e = element_bytes(dtype);
    for (int i = 0; i < group.local_ranks(); ++i) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(group.device(i)));
      const std::size_t in_bytes = std::size_t(m_size.input_elements()) * e, out_bytes = std::size_t(m_size.output_elements()) * e;
      m_inputs.emplace_back(std::max(in_bytes, options.in_place ? out_bytes : in_bytes), initial_fill::uninitialized());
      if (!options.in_place) m_outputs.emplace_back(out_bytes, initial_fill::uninitialized());
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    refill();
  }
  nccl_collective(const nccl_collective&) = delete;
  nccl_collective& operator=(const nccl_collective&) = delete;

  /// "all_reduce/nccl/fp32/1073741824/out_of_place": collective, library, type, nccl-tests' bytes, placement.
  std::string name() const {
    return std::string(to_string(m_size.kind)) + "/nccl/" + to_string(m_dtype) + "/" +
           std::to_string(static_cast<unsigned long long>(m_size.bytes())) + "/" + (m_options.in_place ? "in_place" : "out_of_place");
  }
  /// The call's size (count, ranks, S).
  const collective_size& size() const noexcept { return m_size; }
  /// nccl-tests' busbw factor (NaN with one rank).
  double bus_factor() const { return bus_bandwidth_factor(m_size.kind, m_size.ranks); }
  /// One call's work: S bytes (algbw = S / t); read and written as nccl-tests counts them.
  gpucmp::work work() const {
    gpucmp::work w;
    w.bytes_read = m_size.bytes();
    return w;
  }

  /// Enqueues the collective on every rank of this process, forked from and joined back to
  /// `stream` (any device's stream). Across processes, every process must enqueue it.
  void operator()(cudaStream_t stream) const {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    m_fork.begin(stream);
    for (int i = 0; i < m_group.local_ranks(); ++i) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(i)));
      m_fork.wait(std::size_t(i), m_group.stream(i));
    }
    launch_all();
    for (int i = 0; i < m_group.local_ranks(); ++i) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(i)));
      m_fork.done(std::size_t(i), m_group.stream(i));
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_fork.join(stream);
  }

  /// Refills the inputs, poisons the outputs, runs once from `stream` and checks every
  /// output element of this process's ranks against the exact result (across processes,
  /// each checks its own: combine the verdicts). In place, the inputs are refilled
  /// afterwards. Synchronizes.
  verification verify(cudaStream_t stream) {
    refill();
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const verification v = check_outputs();
    if (m_options.in_place) refill();
    return v;
  }

  /// Checks every output element of this process's ranks as it is now against the exact
  /// result (verify() without the run and the refill).
  verification check_outputs() const {
    verification v;
    v.method = "every output element of every rank against the exact result (nccl-tests' -c)";
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    for (int i = 0; i < m_group.local_ranks(); ++i) {
      const int r = m_group.rank(i);
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(i)));
      device_buffer<unsigned long long> counters(2, initial_fill::uninitialized());
      const unsigned long long init[2] = {0, ~0ull};
      GPUCMP_CUDA_CHECK(cudaMemcpy(counters.data(), init, sizeof init, cudaMemcpyHostToDevice));
      const std::int64_t count = m_size.output_elements();
      visit_element(m_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        detail::check_collective_output<T><<<detail::collective_grid(count), 256>>>(
            static_cast<const T*>(output(i)), count, m_size.kind, m_size.ranks, m_size.count, r, counters.data(), counters.data() + 1);
      });
      GPUCMP_CUDA_CHECK_LAST("check_collective_output");
      unsigned long long got[2] = {0, 0};
      GPUCMP_CUDA_CHECK(cudaMemcpy(got, counters.data(), sizeof got, cudaMemcpyDeviceToHost));
      const std::int64_t checked = m_size.kind == collective::reduce && r != 0 ? 0 : count;
      v.checked += std::size_t(checked);
      v.failed += std::size_t(got[0]);
      if (got[0] != 0 && v.worst_where.empty()) {
        v.worst_where = "rank " + std::to_string(r) + ", element " + std::to_string(got[1]);
        v.worst_reference = collective_expected(m_size, r, std::int64_t(got[1]));
        v.worst_ratio = INFINITY;
      }
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    return v;
  }

  /// Device pointer to local rank `local`'s output (for tests that corrupt it).
  void* output_of(int local) const { return output(local); }

 private:
  // Buffers by local rank; blocks within them by world rank.
  void* input(int local) const { return const_cast<unsigned char*>(m_inputs[std::size_t(local)].data()); }
  // In place, reduce-scatter's output is the rank's own block of its input.
  void* output(int local) const {
    if (!m_options.in_place) return const_cast<unsigned char*>(m_outputs[std::size_t(local)].data());
    const std::size_t block = m_size.kind == collective::reduce_scatter
                                  ? std::size_t(m_group.rank(local)) * std::size_t(m_size.count) * element_bytes(m_dtype)
                                  : 0;
    return static_cast<unsigned char*>(input(local)) + block;
  }

  // Inputs to collective_input(), outputs poisoned (0xFF: NaN in floating types).
  void refill() {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    for (int i = 0; i < m_group.local_ranks(); ++i) {
      const int r = m_group.rank(i);
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(i)));
      if (!m_options.in_place) GPUCMP_CUDA_CHECK(cudaMemset(output(i), 0xFF, m_outputs[std::size_t(i)].bytes()));
      const std::int64_t count = m_size.input_elements();
      visit_element(m_dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (m_options.in_place) GPUCMP_CUDA_CHECK(cudaMemset(input(i), 0xFF, m_inputs[std::size_t(i)].bytes()));
        // In place, all-gather's input is the rank's own block of the output.
        T* at = static_cast<T*>(input(i)) + (m_options.in_place && m_size.kind == collective::all_gather ? std::int64_t(r) * m_size.count : 0);
        detail::fill_collective_input<T><<<detail::collective_grid(count), 256>>>(at, count, r);
      });
      GPUCMP_CUDA_CHECK_LAST("fill_collective_input");
      GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
  }

  void launch_all() const {
    const ncclDataType_t type = nccl_data_type(m_dtype);
    const std::size_t count = std::size_t(m_size.count), e = element_bytes(m_dtype);
    const int n = m_group.ranks();
    GPUCMP_NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < m_group.local_ranks(); ++i) {
      const int r = m_group.rank(i);
      const ncclComm_t comm = m_group.comm(i);
      const cudaStream_t s = m_group.stream(i);
      const void* send = input(i);
      void* recv = output(i);
      if (m_options.in_place && m_size.kind == collective::all_gather) send = static_cast<const unsigned char*>(recv) + std::size_t(r) * count * e;
      switch (m_size.kind) {
        case collective::all_reduce: GPUCMP_NCCL_CHECK(ncclAllReduce(send, recv, count, type, ncclSum, comm, s)); break;
        case collective::all_gather: GPUCMP_NCCL_CHECK(ncclAllGather(send, recv, count, type, comm, s)); break;
        case collective::reduce_scatter: GPUCMP_NCCL_CHECK(ncclReduceScatter(send, recv, count, type, ncclSum, comm, s)); break;
        case collective::broadcast: GPUCMP_NCCL_CHECK(ncclBroadcast(send, recv, count, type, 0, comm, s)); break;
        case collective::reduce: GPUCMP_NCCL_CHECK(ncclReduce(send, recv, count, type, ncclSum, 0, comm, s)); break;
        case collective::all_to_all:
          for (int p = 0; p < n; ++p) {
            GPUCMP_NCCL_CHECK(ncclSend(static_cast<const unsigned char*>(send) + std::size_t(p) * count * e, count, type, p, comm, s));
            GPUCMP_NCCL_CHECK(ncclRecv(static_cast<unsigned char*>(recv) + std::size_t(p) * count * e, count, type, p, comm, s));
          }
          break;
        case collective::send_recv:
          GPUCMP_NCCL_CHECK(ncclSend(send, count, type, (r + 1) % n, comm, s));
          GPUCMP_NCCL_CHECK(ncclRecv(recv, count, type, (r + n - 1) % n, comm, s));
          break;
      }
    }
    GPUCMP_NCCL_CHECK(ncclGroupEnd());
  }

  const communicator_group& m_group;
  element_type m_dtype;
  nccl_collective_options m_options;
  collective_size m_size;
  std::vector<device_buffer<unsigned char>> m_inputs, m_outputs;
  stream_fork m_fork;  // one branch per rank
};

}  // namespace gpucmp
