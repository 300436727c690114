// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Fuzzes the --gpucmp_* flag parser on command lines made of the input's lines: it never
// throws, keeps argv[0] and every other argument in order, and leaves no --gpucmp_ flag.
#include <gpucmp/gbench/flags.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"fuzz"};
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      args.push_back(current);
      current.clear();
    } else if (c != '\0') {
      current += c;
    }
  }
  args.push_back(current);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  const gpucmp::detail::gpucmp_flags flags = gpucmp::detail::take_gpucmp_flags(argc, argv.data());
  // What is left: argv[0], then the arguments that are not gpucmp flags, in their order.
  std::vector<std::string> expected{"fuzz"};
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].rfind("--gpucmp_", 0) != 0) expected.push_back(args[i]);
  }
  if (argc != static_cast<int>(expected.size())) __builtin_trap();
  for (int i = 0; i < argc; ++i) {
    if (expected[static_cast<std::size_t>(i)] != argv[static_cast<std::size_t>(i)]) __builtin_trap();
  }
  if (flags.batch > 256 || flags.cooldown_s < 0 || flags.timeout_s < 0 || flags.window_s > 600) __builtin_trap();
  return 0;
}
