// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "test_kernels.hpp"

#include <gpucmp/kernels/read.cuh>
#include <gpucmp/kernels/spin.cuh>

namespace gpucmp_test {

void launch_spin(cudaStream_t stream, double seconds) { gpucmp::kernels::launch_spin(stream, seconds); }

void launch_read_sum(cudaStream_t stream, const float* in, std::size_t floats, float* partial, int blocks) {
  gpucmp::kernels::launch_read_sum(stream, reinterpret_cast<const float4*>(in), floats / 4, partial, blocks);
}

namespace {
__global__ void never_runs() {}
__global__ void empty() {}
__global__ void trap() { asm volatile("trap;"); }
}  // namespace

void launch_empty(cudaStream_t stream) {
  empty<<<1, 1, 0, stream>>>();
  GPUCMP_CUDA_CHECK_LAST("empty<<<1, 1>>>");
}

void launch_invalid_configuration(cudaStream_t stream) {
  never_runs<<<1, 4096, 0, stream>>>();  // deliberately unchecked: the engine must catch it
}

void launch_trap(cudaStream_t stream) {
  trap<<<1, 1, 0, stream>>>();
  GPUCMP_CUDA_CHECK_LAST("trap<<<1, 1>>>");
}

}  // namespace gpucmp_test
