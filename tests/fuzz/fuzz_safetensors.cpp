// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Fuzzes the safetensors reader: a file either validates, and then every float tensor it
// lists can be read with its own shape, or it throws weight_error.
#include <gpucmp/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = gpucmp::safetensors_file::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const auto& t : file.tensors()) {
      if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16") {
        if (file.read_float(t.name, t.shape).size() != t.element_count()) __builtin_trap();
      }
    }
  } catch (const gpucmp::weight_error&) {
    // a malformed, truncated or mismatched file, named: the expected outcome
  }
  return 0;
}
