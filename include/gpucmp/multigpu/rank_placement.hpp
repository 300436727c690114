// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Which GPU a process drives when one process runs per GPU (mpirun -np N, on one node or
// several): the process that is local rank k of its node takes device k. NCCL takes one rank
// per GPU, so a node with more processes than visible GPUs is refused here, by name, rather
// than inside ncclCommInitRank. Host code, tested without a GPU or MPI.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <string>

namespace gpucmp {

/// Where one process of a world sits: its rank in the world and on its node.
struct rank_placement {
  int rank = 0;        ///< in the world
  int size = 1;        ///< processes in the world
  int local_rank = 0;  ///< on this node
  int local_size = 1;  ///< processes on this node
};

/// The device of a process placed at `p` on a node with `visible_devices` GPUs: its local
/// rank. Throws invalid_argument for an inconsistent placement or more processes on the node
/// than GPUs.
inline int device_for(const rank_placement& p, int visible_devices) {
  if (p.size < 1 || p.rank < 0 || p.rank >= p.size || p.local_size < 1 || p.local_rank < 0 || p.local_rank >= p.local_size ||
      p.local_size > p.size) {
    throw invalid_argument("device_for: rank " + std::to_string(p.rank) + " of " + std::to_string(p.size) + ", local rank " +
                           std::to_string(p.local_rank) + " of " + std::to_string(p.local_size) + " is not a placement");
  }
  if (p.local_size > visible_devices) {
    throw invalid_argument("device_for: " + std::to_string(p.local_size) + " processes on this node but " +
                           std::to_string(visible_devices) + " visible GPU(s); NCCL takes one rank per GPU (run at most " +
                           std::to_string(visible_devices) + " processes per node)");
  }
  return p.local_rank;
}

}  // namespace gpucmp
