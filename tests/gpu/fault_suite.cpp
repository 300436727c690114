// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A benchmark program that meets the faults a long suite can meet, in this order: an
// allocation that does not fit in the middle of a sweep, a benchmark that runs past its
// time budget (--gpucmp_timeout_s), and a kernel that traps (a sticky error that makes the
// CUDA context unusable). tests/gpu/check_fault_suite.py runs it and checks that every
// result measured before each fault is in the JSON output, that each fault is a typed cell,
// that the run goes on (or, after the trap, skips without touching the GPU) and that it
// exits non-zero naming the benchmark that failed.
#include "test_kernels.hpp"

#include <gpucmp/bench.hpp>

#include <cstddef>

namespace {

void spin(gpucmp::state& st) {
  st.run([](cudaStream_t s) { gpucmp_test::launch_spin(s, 20e-6); });
}

// Allocates range(0) bytes, then times a spin: the middle size cannot fit on any GPU.
void sweep(gpucmp::state& st) {
  gpucmp::device_buffer<char> bytes(static_cast<std::size_t>(st.range(0)), gpucmp::initial_fill::uninitialized());
  st.run([](cudaStream_t s) { gpucmp_test::launch_spin(s, 20e-6); });
}

// 5 ms spins with a sample floor that would take 50 s: only the time budget ends it.
void slow(gpucmp::state& st) {
  st.options().min_samples = 10000;
  st.options().max_samples = 10000;
  st.options().batch = 1;
  st.options().max_wall_time_s = 120;
  st.run([](cudaStream_t s) { gpucmp_test::launch_spin(s, 5e-3); });
}

void trap(gpucmp::state& st) { st.run(gpucmp_test::launch_trap); }

// Google Benchmark runs them in the order they were registered.
const bool registered = [] {
  gpucmp::register_benchmark("fault/1_before", spin);
  gpucmp::register_benchmark("fault/2_sweep", sweep)->Arg(1 << 20)->Arg(std::int64_t{1} << 50)->Arg(1 << 21);
  gpucmp::register_benchmark("fault/3_slow", slow);
  gpucmp::register_benchmark("fault/4_after_timeout", spin);
  gpucmp::register_benchmark("fault/5_trap", trap);
  gpucmp::register_benchmark("fault/6_after_trap", spin);
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
