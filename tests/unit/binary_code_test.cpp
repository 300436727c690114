// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuda/binary_code.hpp: the architecture lists nvcc and CMake write, and how a GPU of each
// compute capability gets code from them (native, JIT-compiled PTX, nothing).
#include "catch.hpp"

#include <gpucmp/cuda/binary_code.hpp>

#include <string>
#include <vector>

TEST_CASE("architecture lists read as nvcc and CMake write them; a GPU runs native code, JIT-compiled PTX or nothing",
          "[binary_code]") {
  CHECK(gpucmp::parse_arch_list("800,900") == std::vector<int>{800, 900});
  CHECK(gpucmp::parse_arch_list("80;90") == std::vector<int>{});  // not a comma list: nothing read
  CHECK(gpucmp::parse_arch_list("90, 8.6") == std::vector<int>{900, 860});
  CHECK(gpucmp::parse_arch_list("1000,abc,80-real,9.05") == std::vector<int>{1000});
  CHECK(gpucmp::parse_arch_list("").empty());
  using gpucmp::gpu_code;
  // An H200 (9.0): sm_90 code runs as is; sm_80 only is JIT-compiled from PTX; sm_100 only: nothing.
  CHECK(gpucmp::gpu_code_for("800,900", 9, 0) == gpu_code::native);
  CHECK(gpucmp::gpu_code_for("800", 9, 0) == gpu_code::ptx_jit);
  CHECK(gpucmp::gpu_code_for("520,750", 9, 0) == gpu_code::ptx_jit);  // CMake's old defaults
  CHECK(gpucmp::gpu_code_for("1000", 9, 0) == gpu_code::none);
  // Machine code for 8.0 runs on 8.6 (same family, not newer); 8.6 code does not run on 8.0.
  CHECK(gpucmp::gpu_code_for("800", 8, 6) == gpu_code::native);
  CHECK(gpucmp::gpu_code_for("860", 8, 0) == gpu_code::none);
  CHECK(gpucmp::gpu_code_for("", 9, 0) == gpu_code::unknown);
  CHECK(std::string(gpucmp::to_string(gpu_code::ptx_jit)) == "ptx_jit");
  // Under a C++ compiler the macro is empty: the architectures are unknown.
  CHECK(std::string(GPUCMP_CUDA_ARCH_LIST).empty());
}
