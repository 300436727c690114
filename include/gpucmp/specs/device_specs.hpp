// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The datasheet figures of a device the program runs on: its device_info turned into the
// spec database's lookup (by name, then compute capability and memory, then derived).
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/specs/specs.hpp>

namespace gpucmp {

/// The spec database's facts for a device snapshot.
inline device_facts facts_of(const device_info& d) {
  device_facts f;
  f.name = d.name;
  f.cc_major = d.cc_major;
  f.cc_minor = d.cc_minor;
  f.memory_bytes = static_cast<double>(d.global_memory_bytes);
  f.sm_count = d.sm_count;
  f.sm_clock_max_hz = d.sm_clock_max_hz;
  f.memory_bandwidth_bytes_per_s = d.memory_bandwidth_bytes_per_s();
  f.l2_bytes = static_cast<double>(d.l2_bytes);
  return f;
}

/// The datasheet figures for the device `d` describes.
inline gpu_profile spec_for_device(const device_info& d) { return spec_for_device(facts_of(d)); }

}  // namespace gpucmp
