// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Plain launch functions for the kernels the GPU tests need, so the tests themselves are
// ordinary C++ compiled by the host compiler, as an embedder's code would be.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gpucmp_test {

/// One thread spinning for `seconds` on %globaltimer.
void launch_spin(cudaStream_t stream, double seconds);

/// Read-bound sum of `floats` floats (a multiple of 4) into `partial` (`blocks` floats).
void launch_read_sum(cudaStream_t stream, const float* in, std::size_t floats, float* partial, int blocks);

/// An empty kernel (one thread): its per-launch time in a batch is the stream's kernel-to-kernel gap.
void launch_empty(cudaStream_t stream);

/// A launch with 4096 threads per block: always an invalid configuration.
void launch_invalid_configuration(cudaStream_t stream);

/// A kernel that executes a trap instruction: a sticky error, after which the CUDA context
/// of the process is unusable.
void launch_trap(cudaStream_t stream);

}  // namespace gpucmp_test
