// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Bandwidth sweep: verified device copy and triad kernels (launch shape tuned on this GPU),
// cudaMemcpyAsync device-to-device, and pinned host<->device copies, from 4 MiB (inside L2)
// to 4 GiB (1 GiB over the bus). Device bytes are read + written; host<->device copies count
// the bytes that cross the bus. Names: <op>/<provider>/none/<bytes per buffer>/<mode>.
// Hot mode is the comparison mode: inside a CUDA graph a device-to-device cudaMemcpyAsync
// becomes a memcpy node that runs slower than the same call on a stream (seen on the H200).
#include <gpucmp/bench.hpp>
#include <gpucmp/ops/memory.cuh>

#include <cstdint>
#include <string>

namespace {

void run_memory(gpucmp::state& st, gpucmp::memory_op op, std::size_t bytes) {
  gpucmp::memory_bandwidth m(op, bytes, st.stream());
  gpucmp::run_verified(st, m);  // the kernels' launch shape (threads x 16-byte loads) searched, every byte checked
}

const bool registered = [] {
  using gpucmp::memory_op;
  for (memory_op op : {memory_op::copy_kernel, memory_op::triad_kernel, memory_op::memcpy_d2d, memory_op::memcpy_h2d,
                       memory_op::memcpy_d2h}) {
    const bool host = op == memory_op::memcpy_h2d || op == memory_op::memcpy_d2h;
    const std::int64_t largest = host ? (std::int64_t{1} << 30) : (std::int64_t{4} << 30);
    for (std::int64_t bytes = std::int64_t{4} << 20; bytes <= largest; bytes *= 4) {
      gpucmp::register_benchmark(std::string(gpucmp::to_string(op)) + "/none/" + std::to_string(bytes),
                                 [op, bytes](gpucmp::state& st) { run_memory(st, op, std::size_t(bytes)); },
                                 {gpucmp::mode::hot, gpucmp::mode::graph});
    }
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
