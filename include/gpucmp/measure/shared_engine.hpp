// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// One engine per device for the whole process, so that the benchmark adapter and the
// algorithm searches of operations built outside a benchmark share one stream, one set of
// events, one L2 flush buffer and one stream hold per device instead of allocating their own.
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/measure/engine.hpp>

#include <map>
#include <memory>
#include <mutex>

namespace gpucmp {

/// The process's engine on the calling thread's current device, created on first use and
/// kept until the process ends. An engine is not thread-safe: threads that measure at the
/// same time make engines of their own.
inline engine& shared_engine() {
  static std::mutex guard;
  static std::map<int, std::unique_ptr<engine>> engines;
  const int ordinal = current_device();
  const std::lock_guard<std::mutex> lock(guard);
  auto& slot = engines[ordinal];
  if (!slot) slot = std::make_unique<engine>(ordinal);
  return *slot;
}

}  // namespace gpucmp
