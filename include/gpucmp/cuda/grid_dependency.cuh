// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The device side of an overlapped launch (cuda/launch.hpp): a kernel launched with
// launch_order::overlapped waits here for the kernels before it, and lets the kernel after it
// start early. Both are no-ops in a kernel launched serially and before sm_90, so a kernel can
// call them whichever way it is launched.
#pragma once

namespace gpucmp {

/// In a kernel launched overlapped: blocks until the kernels before it in the stream have
/// finished and their writes are visible. A no-op in a kernel launched serially, and before sm_90.
__device__ inline void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel in the stream, when it is launched overlapped, start its blocks once
/// every block of this one has called this or exited. It does not make this kernel's writes
/// visible early: the next kernel's wait_for_prior_grids() still waits for this kernel to finish.
__device__ inline void let_next_grid_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

}  // namespace gpucmp
