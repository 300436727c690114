// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A benchmark program whose process has another CUPTI subscriber, as it has under Nsight
// Systems, Nsight Compute, compute-sanitizer or an in-process profiler. With
// GPUCMP_TEST_TAKE_CUPTI=1 it subscribes to CUPTI itself (as "gpucmp cupti_taken test")
// before any benchmark runs and holds the subscription to the end. One spin is registered
// in every mode; tests/gpu/check_cupti_taken.py checks that kernel mode is a typed
// unsupported naming the other subscriber and that the other modes are measured.
#include "test_kernels.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/measure/kernel_trace.hpp>

#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void spin(gpucmp::state& st) {
  st.run([](cudaStream_t s) { gpucmp_test::launch_spin(s, 20e-6); });
}

const bool registered = [] {
  using gpucmp::mode;
  gpucmp::register_benchmark("cupti_taken/spin", spin, {mode::kernel, mode::hot, mode::cold, mode::graph});
  return true;
}();

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Subscribes to CUPTI from the same libcupti gpucmp loads. Returns false with a message
// where that is not possible (then the test cannot stand up its premise and fails).
bool take_cupti() {
  for (const auto& name : gpucmp::detail::cupti_library_candidates()) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) continue;
    using subscribe_fn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*);
    auto subscribe = reinterpret_cast<subscribe_fn>(dlsym(handle, "cuptiSubscribe_v2"));
    if (subscribe == nullptr) continue;
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpucmp cupti_taken test";
    CUpti_SubscriberHandle subscriber = nullptr;
    const CUptiResult result = subscribe(&subscriber, &ignore_callback, nullptr, &params);
    if (result == CUPTI_SUCCESS) return true;
    std::fprintf(stderr, "cupti_taken: cuptiSubscribe_v2 from %s returned %d\n", name.c_str(), static_cast<int>(result));
    return false;
  }
  std::fprintf(stderr, "cupti_taken: no libcupti with cuptiSubscribe_v2 could be loaded\n");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const char* take = std::getenv("GPUCMP_TEST_TAKE_CUPTI");
  if (take != nullptr && std::strcmp(take, "1") == 0 && !take_cupti()) return 2;
  return gpucmp::benchmark_main(argc, argv);
}
