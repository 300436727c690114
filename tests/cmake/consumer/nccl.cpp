// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Component nccl through the package: NCCL's version (ncclGetVersion needs no GPU) and
// nccl-tests' bus bandwidth factor from gpucmp's collective arithmetic, compiled by the C++
// compiler alone.
#include <gpucmp/multigpu/collective_math.hpp>

#include <nccl.h>

#include <cstdio>

int main() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) {
    std::fprintf(stderr, "consumer_nccl: ncclGetVersion failed\n");
    return 1;
  }
  std::printf("NCCL %d; all-reduce busbw factor over 8 ranks: %.2f\n", version,
              gpucmp::bus_bandwidth_factor(gpucmp::collective::all_reduce, 8));
  return 0;
}
