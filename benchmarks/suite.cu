// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The bundled comparison suite: what scripts/run-benchmarks.sh runs and gpucmp-report puts
// side by side with projected GPUs. Names follow op/provider/dtype/shape/mode[/size].
//   - gemm/cublas/{fp32,tf32,fp16,bf16}/8192x8192x8192: verified square GEMMs (compute-bound)
//   - copy/kernel/none and copy/cudaMemcpyAsync/none over 16 MiB (L2-resident) to 4 GiB:
//     device-to-device copies, bytes read + written, verified (memory-bound)
//   - spin/globaltimer/none at 20 us and 1 ms: a kernel that runs a known time on the GPU's
//     global timer, the reference a before/after comparison of two builds can call by name
//     (lab/runs/before-after-check.sh slows it 5 % and expects SLOWER); no work, not projected
#include "cublas_gemm.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/kernels/spin.cuh>

#include <cstdint>
#include <string>

namespace {

constexpr int gemm_size = 8192;

template <class T>
void gemm_benchmark(gpucmp::state& st, gpucmp::precision p, bool tf32) {
  for (const char* axis : {"m", "n", "k"}) st.set_axis(axis, double(gemm_size));
  st.set_axis("dtype", gpucmp::to_string(p));
  st.set_provider("cuBLAS");
  gpucmp_bench::square_gemm<T> gemm(gemm_size, tf32);
  gemm.verify(st.stream());  // a wrong answer is never timed
  st.set_work(gemm.work(p));
  st.run(gemm);
}

void gemm_fp32(gpucmp::state& st) { gemm_benchmark<float>(st, gpucmp::precision::fp32, false); }
void gemm_tf32(gpucmp::state& st) { gemm_benchmark<float>(st, gpucmp::precision::tf32, true); }
void gemm_fp16(gpucmp::state& st) { gemm_benchmark<__half>(st, gpucmp::precision::fp16, false); }
void gemm_bf16(gpucmp::state& st) { gemm_benchmark<__nv_bfloat16>(st, gpucmp::precision::bf16, false); }

// 16-byte loads and stores, grid-stride.
__global__ void copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

// Copies `bytes` with `copy`, verifies the destination equals the source, then measures.
template <class Copy>
void copy_benchmark(gpucmp::state& st, const char* operation, const char* provider, Copy&& copy) {
  const auto bytes = static_cast<std::size_t>(st.range(0));
  st.set_axis("operation", operation);
  st.set_axis("bytes", double(bytes));
  st.set_sweep_axis("bytes");
  st.set_provider(provider);
  gpucmp::device_buffer<std::uint32_t> in(bytes / 4), out(bytes / 4, gpucmp::initial_fill::poison());
  copy(st.stream(), in.data(), out.data(), bytes);
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(st.stream()));
  if (in.to_host() != out.to_host()) throw gpucmp::error("copy verification: destination differs from source");
  st.add_bytes_read(double(bytes));
  st.add_bytes_written(double(bytes));
  st.run([&](cudaStream_t s) { copy(s, in.data(), out.data(), bytes); });
}

void copy_with_kernel(gpucmp::state& st) {
  const int blocks = 4 * st.device().sm_count;
  copy_benchmark(st, "copy/kernel", "gpucmp kernel", [blocks](cudaStream_t s, const std::uint32_t* in, std::uint32_t* out, std::size_t bytes) {
    copy_kernel<<<blocks, 512, 0, s>>>(reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), bytes / 16);
    GPUCMP_CUDA_CHECK_LAST("copy_kernel<<<4 x SMs, 512>>>");
  });
}

void copy_with_memcpy(gpucmp::state& st) {
  copy_benchmark(st, "copy/cudaMemcpyAsync", "CUDA runtime", [](cudaStream_t s, const std::uint32_t* in, std::uint32_t* out, std::size_t bytes) {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s));
  });
}

// No output to check: its time is what it produces, and spin_table checks gpucmp's timing of it.
void spin(gpucmp::state& st) {
  const double seconds = double(st.range(0)) * 1e-9;
  st.set_axis("operation", "spin");
  st.set_axis("duration_ns", double(st.range(0)));
  st.set_sweep_axis("duration_ns");
  st.set_provider("gpucmp kernel");
  st.run([seconds](cudaStream_t s) { gpucmp::kernels::launch_spin(s, seconds); });
}

}  // namespace

// Registered under the names reports line up by.
static const auto* registered_gemm_fp32 = gpucmp::register_benchmark("gemm/cublas/fp32/8192x8192x8192", gemm_fp32, {gpucmp::mode::graph});
static const auto* registered_gemm_tf32 = gpucmp::register_benchmark("gemm/cublas/tf32/8192x8192x8192", gemm_tf32, {gpucmp::mode::graph});
static const auto* registered_gemm_fp16 = gpucmp::register_benchmark("gemm/cublas/fp16/8192x8192x8192", gemm_fp16, {gpucmp::mode::graph});
static const auto* registered_gemm_bf16 = gpucmp::register_benchmark("gemm/cublas/bf16/8192x8192x8192", gemm_bf16, {gpucmp::mode::graph});
static const auto* registered_copy_kernel = gpucmp::register_benchmark("copy/kernel/none", copy_with_kernel, {gpucmp::mode::graph})
                                         ->RangeMultiplier(4)
                                         ->Range(16 << 20, std::int64_t{4} << 30);
static const auto* registered_copy_memcpy = gpucmp::register_benchmark("copy/cudaMemcpyAsync/none", copy_with_memcpy, {gpucmp::mode::graph})
                                         ->RangeMultiplier(4)
                                         ->Range(16 << 20, std::int64_t{4} << 30);

static const auto* registered_spin = gpucmp::register_benchmark("spin/globaltimer/none", spin, {gpucmp::mode::graph})
                                         ->Arg(20000)
                                         ->Arg(1000000);

GPUCMP_BENCHMARK_MAIN()
