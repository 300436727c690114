// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The interface kernel mode measures through: something that records per-kernel GPU
// activity and attributes it to samples. The engine depends only on this interface;
// <gpucmp/measure/kernel_trace.hpp> provides the CUPTI implementation and registers it, so a
// program that does not include it (or a machine without CUPTI) still runs every other mode.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/kernel_profile.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// Records GPU activity (kernels, memcpys, memsets) with GPU timestamps.
class activity_tracer {
 public:
  virtual ~activity_tracer() = default;
  /// Starts recording; throws unsupported ("kernel mode unavailable: ...") when it cannot.
  virtual void start() = 0;
  /// Activities enqueued by this thread from now until end_sample() belong to sample `id`.
  virtual void begin_sample(std::uint64_t id) = 0;
  /// Ends the attribution begun by begin_sample().
  virtual void end_sample() = 0;
  /// Returns the records of completed activities since the last collect(); call after
  /// synchronizing the work. Records of activities not attributed to a sample are dropped.
  virtual std::vector<activity_record> collect() = 0;
  /// Records CUPTI reported as dropped since start().
  virtual std::size_t dropped_records() = 0;
  /// Stops recording (never throws): later measurements run untraced.
  virtual void stop() noexcept = 0;
};

/// Makes the process's activity tracer; throws unsupported when none can be made.
using activity_tracer_factory = std::unique_ptr<activity_tracer> (*)();

namespace detail {
/// The registered factory; nullptr until <gpucmp/measure/kernel_trace.hpp> is included somewhere.
inline activity_tracer_factory& registered_tracer_factory() noexcept {
  static activity_tracer_factory factory = nullptr;
  return factory;
}
}  // namespace detail

/// A tracer from the registered factory; throws unsupported naming what to include and link
/// when none is registered (the program did not include <gpucmp/measure/kernel_trace.hpp>).
inline std::unique_ptr<activity_tracer> make_activity_tracer() {
  const activity_tracer_factory factory = detail::registered_tracer_factory();
  if (factory == nullptr) {
    throw unsupported(
        "kernel mode unavailable: no activity tracer is registered (include <gpucmp/measure/kernel_trace.hpp> and link "
        "gpucmp::cupti)");
  }
  return factory();
}

/// Registers the factory kernel mode uses (kernel_trace.hpp does this for CUPTI; tests may
/// register a fake). Returns true so it can initialise a variable at static-init time.
inline bool register_activity_tracer(activity_tracer_factory factory) noexcept {
  detail::registered_tracer_factory() = factory;
  return true;
}

}  // namespace gpucmp
