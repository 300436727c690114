// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Per-kernel GPU activity and what gpucmp derives from it: busy time, span and idle gaps of
// each sample, and a breakdown of a measured callable into its kernels. Plain host code with
// no CUPTI dependency: kernel_trace.hpp fills these records from CUPTI, and tests build them
// by hand.
#pragma once

#include <gpucmp/measure/statistics.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__GNUC__) || defined(__clang__)
#include <cxxabi.h>
#endif

namespace gpucmp {

/// What a GPU activity record describes.
enum class activity_kind {
  kernel,  ///< a kernel execution
  memcpy,  ///< a copy (device-to-device, host-to-device, ...)
  memset,  ///< a memset
};

/// "kernel", "memcpy", "memset".
inline const char* to_string(activity_kind k) noexcept {
  switch (k) {
    case activity_kind::kernel: return "kernel";
    case activity_kind::memcpy: return "memcpy";
    case activity_kind::memset: return "memset";
  }
  return "unknown";
}

/// One GPU activity with its GPU timestamps, attributed to the sample (launch of the
/// measured callable) during which it was enqueued.
struct activity_record {
  activity_kind kind = activity_kind::kernel;  ///< kernel, memcpy or memset
  std::string name;            ///< demangled kernel name, or "[memcpy DtoD]" / "[memset]"
  std::uint64_t start_ns = 0;  ///< GPU start timestamp
  std::uint64_t end_ns = 0;    ///< GPU end timestamp
  std::uint32_t stream_id = 0; ///< CUPTI stream id
  std::uint64_t sample = 0;    ///< index of the launch of the measured callable it belongs to
  std::uint32_t grid[3] = {0, 0, 0};   ///< grid dimensions (kernels)
  std::uint32_t block[3] = {0, 0, 0};  ///< block dimensions (kernels)
  std::uint64_t bytes = 0;     ///< bytes copied or set (memcpy, memset)

  /// Duration in seconds.
  double duration_s() const noexcept { return end_ns > start_ns ? static_cast<double>(end_ns - start_ns) * 1e-9 : 0.0; }
};

/// Busy time, span and idle time of the activities of one launch of a measured callable.
struct activity_times {
  double busy_s = 0;   ///< sum of activity durations (overlapping activities count fully)
  double span_s = 0;   ///< first start to last end
  double idle_s = 0;   ///< time inside the span when no activity ran (gaps between kernels)
  std::size_t activities = 0;  ///< number of activities
};

/// Busy time, span and idle gaps of `records` (the activities of one launch).
inline activity_times times_of(std::vector<activity_record> records) {
  activity_times t;
  t.activities = records.size();
  if (records.empty()) return t;
  std::sort(records.begin(), records.end(),
            [](const activity_record& a, const activity_record& b) { return a.start_ns < b.start_ns; });
  std::uint64_t covered_ns = 0, run_start = records.front().start_ns, run_end = records.front().end_ns;
  for (const auto& r : records) {
    t.busy_s += r.duration_s();
    if (r.start_ns > run_end) {  // a gap: close the current run of overlapping activities
      covered_ns += run_end - run_start;
      run_start = r.start_ns;
      run_end = r.end_ns;
    } else {
      run_end = std::max(run_end, r.end_ns);
    }
  }
  covered_ns += run_end - run_start;
  std::uint64_t last_end = 0;
  for (const auto& r : records) last_end = std::max(last_end, r.end_ns);
  const std::uint64_t span_ns = last_end - records.front().start_ns;
  t.span_s = static_cast<double>(span_ns) * 1e-9;
  t.idle_s = static_cast<double>(span_ns - covered_ns) * 1e-9;
  return t;
}

/// For each of `records` (the activities of one launch, any order; the result in the same
/// order), the time it adds to the launch's covered time: its end less the later of its start
/// and the latest end of the activities that started before it, or 0. They sum to the span
/// less the idle time. A kernel launched early that waits for the one before it
/// (programmatic dependent launch) counts its waiting in its duration but not here: only what
/// runs past that kernel's end is its own.
inline std::vector<double> exposed_times(const std::vector<activity_record>& records) {
  std::vector<std::size_t> order(records.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return records[a].start_ns != records[b].start_ns ? records[a].start_ns < records[b].start_ns
                                                      : records[a].end_ns < records[b].end_ns;
  });
  std::vector<double> exposed(records.size(), 0.0);
  std::uint64_t covered_until = 0;
  for (std::size_t i : order) {
    const activity_record& r = records[i];
    const std::uint64_t from = std::max(r.start_ns, covered_until);
    if (r.end_ns > from) exposed[i] = static_cast<double>(r.end_ns - from) * 1e-9;
    covered_until = std::max(covered_until, r.end_ns);
  }
  return exposed;
}

/// One line of a breakdown: all activities of one name.
struct kernel_stat {
  std::string name;               ///< demangled kernel name, or "[memcpy ...]" / "[memset]"
  activity_kind kind = activity_kind::kernel;  ///< what it is
  std::size_t count = 0;          ///< activities of this name
  double per_launch = 0;          ///< count per launch of the measured callable
  double total_s = 0;             ///< summed duration
  double median_s = 0;            ///< median duration of one activity
  double share = 0;               ///< total_s over the busy time of all activities (0..1)
  /// Summed exposed_times() of its activities: overlapped kernels' time charged once, so a
  /// kernel that mostly waited for the one before it shows what it ran past that one's end.
  double exposed_s = 0;
  double exposed_share = 0;       ///< exposed_s over all activities' exposed time (0..1)
};

/// Aggregates activities by name as they arrive, keeping one duration per activity (not
/// the records), so long measurements of short kernels stay small.
class breakdown_accumulator {
 public:
  /// Adds one activity and the time it added to its launch's covered time (exposed_times()).
  void add(const activity_record& r, double exposed_s) {
    auto& group = m_groups[r.name];
    group.kind = r.kind;
    group.durations_s.push_back(r.duration_s());
    group.exposed_s += exposed_s;
    m_busy_s += r.duration_s();
    m_exposed_s += exposed_s;
  }
  /// Adds the activities of one launch.
  void add_launch(const std::vector<activity_record>& records) {
    const std::vector<double> exposed = exposed_times(records);
    for (std::size_t i = 0; i < records.size(); ++i) add(records[i], exposed[i]);
  }

  /// The breakdown, largest total first; `launches` is the number of launches of the
  /// measured callable the activities came from.
  std::vector<kernel_stat> result(std::size_t launches) const {
    std::vector<kernel_stat> stats;
    for (const auto& [name, group] : m_groups) {
      kernel_stat s;
      s.name = name;
      s.kind = group.kind;
      s.count = group.durations_s.size();
      s.per_launch = launches > 0 ? static_cast<double>(s.count) / static_cast<double>(launches) : 0.0;
      for (double d : group.durations_s) s.total_s += d;
      s.median_s = summarize(group.durations_s).median;
      s.share = m_busy_s > 0 ? s.total_s / m_busy_s : 0.0;
      s.exposed_s = group.exposed_s;
      s.exposed_share = m_exposed_s > 0 ? s.exposed_s / m_exposed_s : 0.0;
      stats.push_back(std::move(s));
    }
    std::sort(stats.begin(), stats.end(), [](const kernel_stat& a, const kernel_stat& b) {
      return a.total_s != b.total_s ? a.total_s > b.total_s : a.name < b.name;
    });
    return stats;
  }

 private:
  struct group_data {
    activity_kind kind = activity_kind::kernel;
    std::vector<double> durations_s;
    double exposed_s = 0;
  };
  std::map<std::string, group_data> m_groups;
  double m_busy_s = 0, m_exposed_s = 0;
};

/// Aggregates `records` by name, largest total first; `launches` is the number of launches
/// of the measured callable they came from.
inline std::vector<kernel_stat> breakdown(const std::vector<activity_record>& records, std::size_t launches) {
  std::map<std::uint64_t, std::vector<activity_record>> by_launch;
  for (const auto& r : records) by_launch[r.sample].push_back(r);
  breakdown_accumulator acc;
  for (const auto& [sample, launch] : by_launch) acc.add_launch(launch);
  return acc.result(launches);
}

/// The human-readable form of a C++ symbol ("_Z4spinm" -> "spin(unsigned long)"); names
/// that are not mangled (cuBLAS's "sm90_xmma_...") come back unchanged.
inline std::string demangle(const char* symbol) {
  if (symbol == nullptr) return "";
#if defined(__GNUC__) || defined(__clang__)
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(symbol, nullptr, nullptr, &status), std::free);
  if (status == 0 && text) return text.get();
#endif
  return symbol;
}

/// What kernel mode adds to a measurement: the per-launch span and idle time and the
/// breakdown by kernel. The per-launch busy time is the measurement's gpu_s.
struct kernel_profile {
  std::vector<double> span_s;           ///< per launch: first activity start to last end
  std::vector<double> idle_s;           ///< per launch: gaps inside the span
  std::vector<double> traced_event_s;   ///< per batch: event-timed seconds per launch while tracing (tracing overhead)
  summary span;                         ///< summary of span_s
  summary idle;                         ///< summary of idle_s
  summary traced_event;                 ///< summary of traced_event_s
  std::vector<kernel_stat> kernels;     ///< breakdown over every timed launch
  std::size_t launches_without_activity = 0;  ///< launches whose callable enqueued no traced activity
  std::size_t dropped_records = 0;      ///< records CUPTI reported as dropped (buffers full)
};

}  // namespace gpucmp
