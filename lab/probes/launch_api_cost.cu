// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Host time of the runtime calls launch_decode_attention makes on every launch (the device
// check and the dynamic shared memory attribute), each the mean of 200,000 calls: whether they
// are worth moving out of the launch path (ops/decode_attention_kernel.cuh says what was found).
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/decode_attention_kernel.cuh>

#include <chrono>
#include <cstdio>

int main() {
  using clock = std::chrono::steady_clock;
  const auto kernel = gpucmp::detail::decode_attention_kernel<__nv_bfloat16, 128, 4>;
  const int bytes = gpucmp::detail::decode_attention_shared_bytes<128>;
  constexpr int calls = 200000;
  try {
    GPUCMP_CUDA_CHECK(cudaFree(nullptr));  // the context first
    int device = 0, major = 0;
    cudaFuncAttributes attributes{};
    auto mean_ns = [&](auto call) {
      const auto start = clock::now();
      for (int i = 0; i < calls; ++i) GPUCMP_CUDA_CHECK(call());
      return std::chrono::duration<double, std::nano>(clock::now() - start).count() / calls;
    };
    const double get_device = mean_ns([&] { return cudaGetDevice(&device); });
    const double get_attribute = mean_ns([&] { return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device); });
    const double set_attribute =
        mean_ns([&] { return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); });
    const double get_attributes = mean_ns([&] { return cudaFuncGetAttributes(&attributes, kernel); });
    std::printf("cudaGetDevice %.1f ns, cudaDeviceGetAttribute %.1f ns, cudaFuncSetAttribute %.1f ns, cudaFuncGetAttributes %.1f ns\n",
                get_device, get_attribute, set_attribute, get_attributes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_api_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
