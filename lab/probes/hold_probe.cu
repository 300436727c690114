// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Which host call blocks behind a held stream? Under compute-sanitizer's initcheck, cold mode
// with the stream hold timed out in programs that read a large buffer
// (results/h200/reliability/sanitizers.md). This probe holds the stream with gpucmp's own
// stream_hold, makes one kind of call per round behind it and prints how long the host spent
// in that call: a call that waits for the stream returns only when the watchdog releases it
// (the hold's timeout), so it stands out. Then the engine itself measures the same launch,
// cold and hot, held and not. Built and run by lab/probes/hold-probe.sh.
//   hold_probe [TIMEOUT_S]
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/kernels/read.cuh>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/measure/stream_hold.hpp>

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace {

__global__ void never_launched_before(int* out) { *out = 1; }
__global__ void no_global_memory() {}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  const double timeout_s = argc > 1 ? std::atof(argv[1]) : 3.0;
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  int l2_bytes = 0;
  GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  cudaStream_t stream = nullptr;
  GPUCMP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t event = nullptr;
  cudaEvent_t second_event = nullptr;
  GPUCMP_CUDA_CHECK(cudaEventCreate(&event));
  GPUCMP_CUDA_CHECK(cudaEventCreate(&second_event));

  // As in the gbench fixture that timed out: 64 MiB written before, read by read_sum.
  const std::size_t read_floats = std::size_t{16} << 20;
  gpucmp::device_buffer<float> read_buffer(read_floats);  // random fill: initialized
  const int blocks = 1024;
  gpucmp::device_buffer<float> partial(blocks, gpucmp::initial_fill::uninitialized());
  gpucmp::device_buffer<unsigned char> flush(2 * std::size_t(l2_bytes), gpucmp::initial_fill::uninitialized());
  gpucmp::device_buffer<unsigned char> small(4096);
  gpucmp::device_buffer<unsigned char> small_copy(4096, gpucmp::initial_fill::uninitialized());
  gpucmp::device_buffer<int> flag(1, gpucmp::initial_fill::uninitialized());
  // Never written before their round: a first write changes what initcheck knows of a buffer.
  gpucmp::device_buffer<unsigned char> fresh_a(2 * std::size_t(l2_bytes), gpucmp::initial_fill::uninitialized());
  gpucmp::device_buffer<unsigned char> fresh_b(2 * std::size_t(l2_bytes), gpucmp::initial_fill::uninitialized());
  const auto read = [&] {
    gpucmp::kernels::launch_read_sum(stream, reinterpret_cast<const float4*>(read_buffer.data()), read_floats / 4,
                                     partial.data(), blocks);
  };
  read();  // loads read_sum's module outside any hold
  no_global_memory<<<1, 32, 0, stream>>>();
  GPUCMP_CUDA_CHECK_LAST("no_global_memory<<<1, 32>>>");
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));

  gpucmp::stream_hold hold;
  std::printf("CUDA_MODULE_LOADING=%s, hold timeout %.1f s, L2 %d bytes\n", loading ? loading : "(unset)", timeout_s,
              l2_bytes);
  std::printf("%-55s %12s %s\n", "call behind the held stream", "host ms", "released by");
  int blocked = 0;
  // One round: `before` (outside any hold), then `call` behind `holder`'s hold.
  const auto round_with = [&](const char* what, gpucmp::stream_hold& holder, const std::function<void()>& before,
                              const std::function<void()>& call) {
    before();
    holder.hold(stream, timeout_s);
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double host_s = seconds_since(t0);
    const bool in_time = holder.release();
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    blocked += in_time ? 0 : 1;
    std::printf("%-55s %12.3f %s\n", what, 1e3 * host_s, in_time ? "the host" : "the watchdog (the call waited)");
    std::fflush(stdout);
  };
  const auto round = [&](const char* what, const std::function<void()>& call) { round_with(what, hold, [] {}, call); };
  round("cudaEventRecord", [&] { GPUCMP_CUDA_CHECK(cudaEventRecord(event, stream)); });
  round("read_sum launch (module loaded before)", read);
  round("cudaMemsetAsync, 2 x L2 never written before", [&] {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(flush.data(), 1, flush.bytes(), stream));
  });
  round("cudaMemsetAsync, 2 x L2 again", [&] { GPUCMP_CUDA_CHECK(cudaMemsetAsync(flush.data(), 2, flush.bytes(), stream)); });
  round("cudaMemsetAsync, 4 KiB", [&] { GPUCMP_CUDA_CHECK(cudaMemsetAsync(small.data(), 3, small.bytes(), stream)); });
  round("cudaMemcpyAsync, 4 KiB device to device", [&] {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(small_copy.data(), small.data(), small.bytes(), cudaMemcpyDeviceToDevice, stream));
  });
  round("memset 2 x L2, then read_sum (a cold sample)", [&] {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(flush.data(), 4, flush.bytes(), stream));
    read();
  });
  round("memset of a buffer never written, then read_sum", [&] {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(fresh_a.data(), 5, fresh_a.bytes(), stream));
    read();
  });
  round("memset of a buffer never written, then a kernel without memory", [&] {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(fresh_b.data(), 6, fresh_b.bytes(), stream));
    no_global_memory<<<1, 32, 0, stream>>>();
    GPUCMP_CUDA_CHECK_LAST("no_global_memory<<<1, 32>>>");
  });
  round("the engine's cold sample: memset, event, read_sum, event", [&] {
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(flush.data(), 7, flush.bytes(), stream));
    GPUCMP_CUDA_CHECK(cudaEventRecord(event, stream));
    read();
    GPUCMP_CUDA_CHECK(cudaEventRecord(second_event, stream));
  });
  round("first launch of a kernel never launched before", [&] {
    never_launched_before<<<1, 1, 0, stream>>>(flag.data());
    GPUCMP_CUDA_CHECK_LAST("never_launched_before<<<1, 1>>>");
  });
  // What the engine does on its first cold measurement and these rounds do not: it
  // allocates the L2 flush buffer and makes its stream hold just before sampling.
  std::vector<gpucmp::device_buffer<unsigned char>> made_now;
  round_with("memset, read_sum; a 2 x L2 buffer allocated just before", hold,
             [&] { made_now.emplace_back(2 * std::size_t(l2_bytes), gpucmp::initial_fill::uninitialized()); },
             [&] {
               GPUCMP_CUDA_CHECK(cudaMemsetAsync(made_now.back().data(), 8, made_now.back().bytes(), stream));
               read();
             });
  round_with("memset, read_sum; allocated, then read_sum, before", hold,
             [&] {
               made_now.emplace_back(2 * std::size_t(l2_bytes), gpucmp::initial_fill::uninitialized());
               read();
               GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
             },
             [&] {
               GPUCMP_CUDA_CHECK(cudaMemsetAsync(made_now.back().data(), 9, made_now.back().bytes(), stream));
               read();
             });
  {
    gpucmp::stream_hold fresh_hold;
    round_with("memset, read_sum behind a stream hold made just before", fresh_hold, [] {}, [&] {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(flush.data(), 10, flush.bytes(), stream));
      read();
    });
  }
  std::printf("calls that waited for the held stream: %d\n", blocked);

  // The engine itself on the same launch, each mode with and without the hold: which of its
  // own steps waits is not visible from here, but whether it does is.
  // Cold and held twice: the first makes the engine's flush buffer and hold, the second
  // finds them made.
  gpucmp::engine engine;
  for (const gpucmp::mode m : {gpucmp::mode::cold, gpucmp::mode::cold, gpucmp::mode::hot}) {
    for (const bool held : {true, false}) {
      gpucmp::measure_options o;
      o.hold = held;
      o.hold_timeout_s = timeout_s;
      o.min_samples = 3;
      o.min_gpu_time_s = 0;
      const auto t0 = std::chrono::steady_clock::now();
      const gpucmp::measurement r = engine.try_measure(
          [&](cudaStream_t s) {
            gpucmp::kernels::launch_read_sum(s, reinterpret_cast<const float4*>(read_buffer.data()), read_floats / 4,
                                             partial.data(), blocks);
          },
          m, o);
      std::printf("engine, %s mode, %s: %s in %.2f s (%zu samples)%s%s\n", gpucmp::to_string(m),
                  held ? "held" : "not held", r.ok() ? "measured" : "failed", seconds_since(t0), r.gpu_s.size(),
                  r.ok() ? "" : ": ", r.ok() ? "" : r.message.c_str());
      std::fflush(stdout);
    }
  }
  GPUCMP_CUDA_CHECK(cudaEventDestroy(event));
  GPUCMP_CUDA_CHECK(cudaEventDestroy(second_event));
  GPUCMP_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "hold_probe: %s\n", e.what());
  return 1;
}
