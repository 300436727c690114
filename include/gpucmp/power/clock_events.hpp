// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Why a GPU's clocks are below their maximum: the driver's clock-event ("throttle") reason
// bits decoded into names, and the question a benchmark asks of them — was this sample taken
// while the GPU was slowed for power or heat? Host-only; NVML reads the bits.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gpucmp {

/// One clock-event reason bit as NVML defines it (nvmlClocksEventReason*).
struct clock_event_reason {
  std::uint64_t bit;    ///< the mask bit
  const char* name;     ///< short name used in results
  bool throttles;       ///< true when it means slowed for power or heat (not idle or a setting)
};

/// Every reason NVML reports, in bit order.
inline constexpr clock_event_reason clock_event_reasons[] = {
    {0x001, "gpu_idle", false},                // nothing to do: clocks drop by design
    {0x002, "applications_clocks", false},     // application clocks setting
    {0x004, "sw_power_cap", true},             // power capping by the driver
    {0x008, "hw_slowdown", true},              // hardware slowdown (factor 2 or more)
    {0x010, "sync_boost", false},              // sync boost group
    {0x020, "sw_thermal_slowdown", true},      // driver keeping temperatures in limits
    {0x040, "hw_thermal_slowdown", true},      // hardware thermal slowdown
    {0x080, "hw_power_brake_slowdown", true},  // external power brake
    {0x100, "display_clock_setting", false},   // display clock setting
};

/// The names of the bits set in `mask` ("unknown_0x..." for bits NVML may add later).
inline std::vector<std::string> decode_clock_events(std::uint64_t mask) {
  std::vector<std::string> names;
  std::uint64_t known = 0;
  for (const auto& r : clock_event_reasons) {
    known |= r.bit;
    if (mask & r.bit) names.emplace_back(r.name);
  }
  for (int b = 0; b < 64; ++b) {
    const std::uint64_t bit = std::uint64_t{1} << b;
    if ((mask & bit) && !(known & bit)) {
      char text[32];
      std::snprintf(text, sizeof text, "unknown_0x%llx", static_cast<unsigned long long>(bit));
      names.emplace_back(text);
    }
  }
  return names;
}

/// True when `mask` says the clocks were reduced for power or heat, which makes a timing
/// sample unrepresentative of the GPU's capability.
inline bool is_throttled(std::uint64_t mask) noexcept {
  for (const auto& r : clock_event_reasons) {
    if (r.throttles && (mask & r.bit)) return true;
  }
  return false;
}

}  // namespace gpucmp
