// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One process per GPU under MPI (component gpucmp::mpi): MPI for the process's lifetime, where
// the process sits (world and node), the NCCL communicator joined through rank 0's unique id
// broadcast over MPI, and the agreements a benchmark needs so that no process goes on alone
// (a check that failed anywhere fails everywhere). The same path runs across nodes with a
// host file: `mpirun -np 16 --hostfile hosts ./collectives --mpi`.
//
//   gpucmp::mpi_session mpi(&argc, &argv);
//   const gpucmp::communicator_group group = gpucmp::communicator_group_from_mpi(MPI_COMM_WORLD);
//   gpucmp::nccl_collective op(group, gpucmp::collective::all_reduce, bytes, gpucmp::element_type::fp32);
//   if (!gpucmp::all_ranks_agree(op.verify(stream).passed(), MPI_COMM_WORLD)) ...
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/multigpu/communicator.hpp>
#include <gpucmp/multigpu/nccl_status.hpp>
#include <gpucmp/multigpu/rank_placement.hpp>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <exception>
#include <string>

namespace gpucmp {

namespace detail {
inline void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw error(std::string("MPI: ") + call + " failed: " + std::string(text, std::size_t(length)));
}
}  // namespace detail

/// Throws gpucmp::error naming the call and MPI's message unless it returned MPI_SUCCESS.
#define GPUCMP_MPI_CHECK(call) ::gpucmp::detail::mpi_check((call), #call)

/// MPI for as long as it lives: initialises MPI unless the program already has, makes
/// MPI_COMM_WORLD's errors return (so GPUCMP_MPI_CHECK sees them), and finalises what it
/// initialised. One per process; the destructor never throws.
class mpi_session {
 public:
  mpi_session(int* argc, char*** argv) {
    int initialized = 0;
    GPUCMP_MPI_CHECK(MPI_Initialized(&initialized));
    if (!initialized) {
      int provided = 0;
      GPUCMP_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
      m_owned = true;
    }
    GPUCMP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  ~mpi_session() {
    if (!m_owned) return;
    int finalized = 1;
    if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
  }

 private:
  bool m_owned = false;
};

/// Where this process sits in `comm`: its rank and size, and on its node (the processes that
/// share its memory).
inline rank_placement placement_in(MPI_Comm comm) {
  rank_placement p;
  GPUCMP_MPI_CHECK(MPI_Comm_rank(comm, &p.rank));
  GPUCMP_MPI_CHECK(MPI_Comm_size(comm, &p.size));
  MPI_Comm node = MPI_COMM_NULL;
  GPUCMP_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, p.rank, MPI_INFO_NULL, &node));
  const int rank_status = MPI_Comm_rank(node, &p.local_rank);
  const int size_status = MPI_Comm_size(node, &p.local_size);
  MPI_Comm_free(&node);
  GPUCMP_MPI_CHECK(rank_status);
  GPUCMP_MPI_CHECK(size_status);
  return p;
}

/// True on every process when `ok` is true on every process of `comm` (a logical and).
inline bool all_ranks_agree(bool ok, MPI_Comm comm) {
  int mine = ok ? 1 : 0, all = 0;
  GPUCMP_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm));
  return all == 1;
}

/// The largest of every process's `value` in `comm`, on every process.
inline double max_over_ranks(double value, MPI_Comm comm) {
  double all = 0;
  GPUCMP_MPI_CHECK(MPI_Allreduce(&value, &all, 1, MPI_DOUBLE, MPI_MAX, comm));
  return all;
}

/// This process's rank of an NCCL communicator over every process of `comm`, one GPU each
/// (device_for: the process's local rank on its node); rank 0's unique id is broadcast over
/// `comm`. Collective: every process of `comm` must call it. Throws invalid_argument when a
/// node has more processes than GPUs, unsupported without a GPU.
inline communicator_group communicator_group_from_mpi(MPI_Comm comm) {
  const rank_placement p = placement_in(comm);
  int visible = 0;
  const cudaError_t e = cudaGetDeviceCount(&visible);
  if (e != cudaSuccess) {
    cudaGetLastError();
    visible = 0;
  }
  // Every process learns whether any lacks a GPU before anyone waits in NCCL.
  if (!all_ranks_agree(visible > 0, comm)) throw unsupported("communicator_group_from_mpi: a process of the world sees no CUDA device");
  // A refusal on one process is a refusal on all: the others would wait in the broadcast.
  std::string problem;
  int device = -1;
  ncclUniqueId id{};
  try {
    device = device_for(p, visible);
    if (p.rank == 0) GPUCMP_NCCL_CHECK(ncclGetUniqueId(&id));
  } catch (const std::exception& refused) {
    problem = refused.what();
  }
  if (!all_ranks_agree(problem.empty(), comm)) {
    throw invalid_argument(problem.empty() ? "communicator_group_from_mpi: another process could not join (see its error)" : problem);
  }
  GPUCMP_MPI_CHECK(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm));
  return communicator_group(id, p.size, p.rank, {device});
}

}  // namespace gpucmp
