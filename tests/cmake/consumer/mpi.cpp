// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Component mpi through the package: MPI's version (MPI_Get_version needs neither MPI_Init nor
// mpirun) and where a process of a two-node world would run, compiled by the C++ compiler
// alone against mpi_world.hpp.
#include <gpucmp/multigpu/mpi_world.hpp>

#include <cstdio>

int main() {
  int major = 0, minor = 0;
  if (MPI_Get_version(&major, &minor) != MPI_SUCCESS) {
    std::fprintf(stderr, "consumer_mpi: MPI_Get_version failed\n");
    return 1;
  }
  gpucmp::rank_placement p;
  p.rank = 3;
  p.size = 4;
  p.local_rank = 1;
  p.local_size = 2;
  std::printf("MPI %d.%d; world rank 3 of 4, local rank 1 of 2, drives device %d\n", major, minor, gpucmp::device_for(p, 2));
  return 0;
}
