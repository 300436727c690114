// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Fuzzes the JSON reader: any input either parses or throws json_error; nothing else may
// happen (no crash, no other exception, no undefined behaviour).
#include <gpucmp/io/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace {
// Walks the parsed value, so every member and element is touched.
std::size_t count(const gpucmp::detail::json& v) {
  std::size_t n = 1;
  for (const auto& item : v.items()) n += count(item);
  for (const auto& [key, member] : v.members()) n += key.size() + count(member);
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const gpucmp::detail::json root = gpucmp::detail::parse_json(text);
    volatile std::size_t touched = count(root);  // every value is read, so ASan sees each one
    (void)touched;
  } catch (const gpucmp::detail::json_error&) {
    // malformed input, reported with its position: the expected outcome
  }
  return 0;
}
