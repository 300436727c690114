// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A warpgroup's tensor-core matrix multiply (wgmma.mma_async, Hopper: compute capability 9.0
// compiled as sm_90a): four warps multiply a 64 x 32 tile of A by a 32 x N tile of B, both read
// from shared memory through descriptors, INT8 into INT32 or FP8 E4M3 into FP32. Hopper's
// tensor cores reach their full rate only through it (NVIDIA's Hopper tuning guide), and one
// instruction does what takes mma.sync N / 2 instructions and their ldmatrix loads, which leaves
// a kernel's warps the issue slots for its own loads; mma.sync on sm_90 has no FP8 at all
// (ptxas emulates it through FP16). The operands here are
// K-major (each row contiguous along the reduction, as an NHWC convolution's x and KRSC w are)
// without a swizzle: 8 x 16-byte core matrices, 128 contiguous bytes each.
// Accumulator layout (PTX's): thread l of warp w of the group holds, for each 8 columns j,
// d[4j], d[4j+1] at row 16 w + l / 4, columns 8 j + 2 (l % 4) and the next; d[4j+2], d[4j+3]
// eight rows below: per 8 columns, mma.sync m16n8's.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>

// Defined where the device code being compiled has wgmma: sm_90a (arch-specific features).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPUCMP_WARPGROUP_MMA 1
#endif

namespace gpucmp {

/// A shared-memory operand for wgmma, K-major without a swizzle: `start` (16-byte aligned) holds
/// the core matrix of rows 0-7 and the first 16 bytes of K; the next 16 bytes of K lie
/// `k_step_bytes` further, the next 8 rows `row_group_bytes` further. PTX's matrix descriptor:
/// addresses and offsets in 16-byte units in bits 0-13, 16-29 and 32-45; swizzle mode 0.
__device__ inline std::uint64_t shared_matrix_descriptor(const void* start, unsigned k_step_bytes,
                                                         unsigned row_group_bytes) {
  const unsigned at = unsigned(__cvta_generic_to_shared(start));
  return std::uint64_t((at >> 4) & 0x3fff) | std::uint64_t((k_step_bytes >> 4) & 0x3fff) << 16 |
         std::uint64_t((row_group_bytes >> 4) & 0x3fff) << 32;
}

/// Makes this thread's ordinary shared-memory writes (cp.async's too, once waited for) visible
/// to wgmma, which reads through the async proxy; a barrier then covers the other threads'.
__device__ inline void fence_shared_for_async_proxy() {
#if defined(GPUCMP_WARPGROUP_MMA)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/// Orders the warpgroup's earlier register accesses before the wgmma that follow (wgmma.fence):
/// before the first of a batch, and whenever the accumulators were touched in between.
__device__ inline void warpgroup_mma_fence() {
#if defined(GPUCMP_WARPGROUP_MMA)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

/// Closes the wgmma issued since the last call into one group.
__device__ inline void warpgroup_mma_commit() {
#if defined(GPUCMP_WARPGROUP_MMA)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

/// Waits until at most `Pending` of the warpgroup's groups are still running (the older ones have
/// written their accumulators and read their shared memory).
template <int Pending>
__device__ inline void warpgroup_mma_wait() {
#if defined(GPUCMP_WARPGROUP_MMA)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
#endif
}

/// Pins `d` (wgmma's accumulators) in place for the compiler: no read or move of them is
/// scheduled across this point, so none falls between a wgmma and the wait for it (ptxas would
/// then wait after every wgmma: "wgmma.mma_async instructions are serialized").
template <class Sum, int N>
__device__ inline void warpgroup_hold(Sum (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if constexpr (std::is_same_v<Sum, float>) {
      asm volatile("" : "+f"(d[i])::"memory");
    } else {
      asm volatile("" : "+r"(d[i])::"memory");
    }
  }
}

namespace detail {
#define GPUCMP_WGMMA_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define GPUCMP_WGMMA_D128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63}"
#define GPUCMP_WGMMA_D256 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, " \
  "%113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

#define GPUCMP_WGMMA_8(c, d, i) \
  c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3]), c(d[i + 4]), c(d[i + 5]), c(d[i + 6]), c(d[i + 7])
#define GPUCMP_WGMMA_32(c, d, i) \
  GPUCMP_WGMMA_8(c, d, i), GPUCMP_WGMMA_8(c, d, i + 8), GPUCMP_WGMMA_8(c, d, i + 16), GPUCMP_WGMMA_8(c, d, i + 24)
#define GPUCMP_WGMMA_ACC64(c, d) GPUCMP_WGMMA_32(c, d, 0)
#define GPUCMP_WGMMA_ACC128(c, d) GPUCMP_WGMMA_32(c, d, 0), GPUCMP_WGMMA_32(c, d, 32)
#define GPUCMP_WGMMA_ACC256(c, d) GPUCMP_WGMMA_ACC128(c, d), GPUCMP_WGMMA_32(c, d, 64), GPUCMP_WGMMA_32(c, d, 96)
}  // namespace detail

/// d += A B for one warpgroup: A 64 x 32 and B (N x 32, K-major) in shared memory as `a` and `b`
/// describe them (shared_matrix_descriptor), N 64, 128 or 256; INT8 into int (Sum) or FP8 E4M3
/// into float. Asynchronous: the accumulators are the warpgroup's again after
/// warpgroup_mma_commit and warpgroup_mma_wait.
template <int N, class Sum>
__device__ inline void warpgroup_mma_64xNx32(Sum (&d)[N / 2], std::uint64_t a, std::uint64_t b) {
  static_assert(N == 64 || N == 128 || N == 256, "warpgroup_mma_64xNx32: N is 64, 128 or 256");
  static_assert(std::is_same_v<Sum, int> || std::is_same_v<Sum, float>, "warpgroup_mma_64xNx32: INT8 (int) or FP8 (float)");
#if defined(GPUCMP_WARPGROUP_MMA)
  // One wgmma: the accumulators %0.. in D, then the descriptors at operands A and B, then
  // scale-d (1: d += A B) at S; FP8 also takes A's and B's signs (1, 1).
#define GPUCMP_WGMMA_ISSUE(N, TYPES, C, SIGNS, A, B, S)                                                          \
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %" #S ", 0; wgmma.mma_async.sync.aligned.m64n" #N "k32." TYPES " " \
               GPUCMP_WGMMA_D##N ", %" #A ", %" #B ", p" SIGNS "; }"                                             \
               : GPUCMP_WGMMA_ACC##N(C, d)                                                                      \
               : "l"(a), "l"(b), "r"(1))
  constexpr bool int8 = std::is_same_v<Sum, int>;
  if constexpr (N == 64 && int8) {
    GPUCMP_WGMMA_ISSUE(64, "s32.s8.s8", "+r", "", 32, 33, 34);
  } else if constexpr (N == 64) {
    GPUCMP_WGMMA_ISSUE(64, "f32.e4m3.e4m3", "+f", ", 1, 1", 32, 33, 34);
  } else if constexpr (N == 128 && int8) {
    GPUCMP_WGMMA_ISSUE(128, "s32.s8.s8", "+r", "", 64, 65, 66);
  } else if constexpr (N == 128) {
    GPUCMP_WGMMA_ISSUE(128, "f32.e4m3.e4m3", "+f", ", 1, 1", 64, 65, 66);
  } else if constexpr (int8) {
    GPUCMP_WGMMA_ISSUE(256, "s32.s8.s8", "+r", "", 128, 129, 130);
  } else {
    GPUCMP_WGMMA_ISSUE(256, "f32.e4m3.e4m3", "+f", ", 1, 1", 128, 129, 130);
  }
#undef GPUCMP_WGMMA_ISSUE
#else
  (void)d;
  (void)a;
  (void)b;
  __trap();  // the host runs these only where warpgroup_mma_compiled says so
#endif
}

#undef GPUCMP_WGMMA_D64
#undef GPUCMP_WGMMA_D128
#undef GPUCMP_WGMMA_D256
#undef GPUCMP_WGMMA_8
#undef GPUCMP_WGMMA_32
#undef GPUCMP_WGMMA_ACC64
#undef GPUCMP_WGMMA_ACC128
#undef GPUCMP_WGMMA_ACC256

namespace detail {
template <int = 0>
__global__ void warpgroup_mma_probe(int* compiled) {
#if defined(GPUCMP_WARPGROUP_MMA)
  *compiled = 1;
#else
  *compiled = 0;
#endif
}
}  // namespace detail

/// Whether the device code this program runs on the current GPU has wgmma: compute capability
/// 9.0 and built as sm_90a (CMAKE_CUDA_ARCHITECTURES 90a; plain 90 or PTX of an older
/// architecture has none). Asked once per device, by a one-thread kernel.
inline bool warpgroup_mma_compiled() {
  int device = 0, major = 0, minor = 0;
  GPUCMP_CUDA_CHECK(cudaGetDevice(&device));
  GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0) return false;
  static std::mutex lock;
  static std::map<int, bool> known;
  const std::lock_guard<std::mutex> hold(lock);
  if (const auto it = known.find(device); it != known.end()) return it->second;
  device_buffer<int> flag(1, initial_fill::poison());  // all ones: not 1, should the kernel not write
  detail::warpgroup_mma_probe<><<<1, 1>>>(flag.data());
  GPUCMP_CUDA_CHECK_LAST("warpgroup_mma_probe");
  return known[device] = flag.to_host().at(0) == 1;
}

}  // namespace gpucmp
