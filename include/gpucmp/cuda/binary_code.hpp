// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Which GPU code a binary carries, and how the running GPU gets machine code from it. A binary
// built for older architectures only (CMake's default is 52 or 75, whatever GPU it later runs
// on) still runs on a newer GPU: the driver JIT-compiles its PTX at load, and the timings are
// those of code never tuned for that GPU. gpucmp records the architectures in every result
// file and warns when the GPU runs JIT-compiled PTX. Pure host code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

// The architectures nvcc compiles this translation unit for ("800,900"): nvcc defines
// __CUDA_ARCH_LIST__ in the host pass too (CUDA 11.5 and later); "" under a C++ compiler.
#define GPUCMP_DETAIL_STRINGIZE_LIST(...) #__VA_ARGS__
#define GPUCMP_DETAIL_STRINGIZE(...) GPUCMP_DETAIL_STRINGIZE_LIST(__VA_ARGS__)
#ifdef __CUDA_ARCH_LIST__
#define GPUCMP_CUDA_ARCH_LIST GPUCMP_DETAIL_STRINGIZE(__CUDA_ARCH_LIST__)
#else
#define GPUCMP_CUDA_ARCH_LIST ""
#endif

namespace gpucmp {

/// How the running GPU gets machine code from a binary.
enum class gpu_code {
  native,   ///< machine code for its architecture family, no newer than it (sm_90 on a 9.0 GPU)
  ptx_jit,  ///< only older families: the driver JIT-compiles their PTX at load
  none,     ///< only newer architectures: nothing it can run
  unknown,  ///< the architectures are not known (main compiled by the C++ compiler)
};

/// "native", "ptx_jit", "none", "unknown".
inline const char* to_string(gpu_code c) noexcept {
  switch (c) {
    case gpu_code::native: return "native";
    case gpu_code::ptx_jit: return "ptx_jit";
    case gpu_code::none: return "none";
    case gpu_code::unknown: return "unknown";
  }
  return "unknown";
}

/// The architectures in `list` ("800,900" as __CUDA_ARCH_LIST__ writes them; "90" and "9.0"
/// read as 900), each compute capability x 100; an item that is none of these is skipped.
inline std::vector<int> parse_arch_list(const std::string& list) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    std::string item;
    for (char ch : list.substr(start, end - start)) {
      if (ch != ' ') item += ch;
    }
    start = end + 1;
    const std::size_t dot = item.find('.');
    const std::string digits = dot == std::string::npos ? item : item.substr(0, dot) + item.substr(dot + 1);
    if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    int value = std::stoi(digits);
    if (dot != std::string::npos) {
      if (item.size() - dot != 2) continue;  // "9.0": one digit after the dot
      value *= 10;
    } else if (digits.size() <= 2) {
      value *= 10;  // "90": a compute capability as CMake writes it
    }
    if (value >= 100 && value < 2000) out.push_back(value);
  }
  return out;
}

/// How a GPU of compute capability major.minor gets code from a binary built for `list`.
/// Machine code for sm_XY runs on X.Z for Z >= Y; anything older runs as JIT-compiled PTX
/// (assuming the PTX is embedded, as CMake's plain "80" does; "80-real" carries none).
inline gpu_code gpu_code_for(const std::string& list, int major, int minor) {
  const std::vector<int> archs = parse_arch_list(list);
  if (archs.empty()) return gpu_code::unknown;
  const int device = major * 100 + minor * 10;
  bool older = false;
  for (int a : archs) {
    if (a / 100 == major && a <= device) return gpu_code::native;
    older = older || a <= device;
  }
  return older ? gpu_code::ptx_jit : gpu_code::none;
}

}  // namespace gpucmp
