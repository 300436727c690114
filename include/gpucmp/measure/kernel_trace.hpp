// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Kernel mode's tracer: per-kernel GPU start/end timestamps from the CUPTI activity API, as
// Nsight Systems records them, without a profiler. Including this header registers the
// tracer with the engine (component gpucmp::cupti). libcupti is loaded at run time with
// dlopen, so a program built with it still starts, and runs every other mode, on a machine
// without CUPTI; there kernel mode is an "unsupported: kernel mode unavailable: ..." result.
#pragma once

#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/kernel_profile.hpp>

#include <cupti.h>  // types and constants only: every CUPTI function is reached through dlsym
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace gpucmp {

namespace detail {

#if CUPTI_API_VERSION >= 130000
using cupti_kernel_record = CUpti_ActivityKernel10;
using cupti_memcpy_record = CUpti_ActivityMemcpy6;
#else
using cupti_kernel_record = CUpti_ActivityKernel9;
using cupti_memcpy_record = CUpti_ActivityMemcpy5;
#endif
using cupti_memset_record = CUpti_ActivityMemset4;

/// The CUPTI functions kernel mode uses, resolved from a dlopen'ed libcupti.
struct cupti_functions {
  CUptiResult(CUPTIAPI* get_version)(uint32_t*) = nullptr;
  CUptiResult(CUPTIAPI* get_result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult(CUPTIAPI* activity_enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* activity_disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                                     CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult(CUPTIAPI* activity_flush_all)(uint32_t) = nullptr;
  CUptiResult(CUPTIAPI* activity_get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult(CUPTIAPI* activity_get_num_dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult(CUPTIAPI* push_external_correlation_id)(CUpti_ExternalCorrelationKind, uint64_t) = nullptr;
  CUptiResult(CUPTIAPI* pop_external_correlation_id)(CUpti_ExternalCorrelationKind, uint64_t*) = nullptr;
  CUptiResult(CUPTIAPI* subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*) = nullptr;
  CUptiResult(CUPTIAPI* unsubscribe)(CUpti_SubscriberHandle) = nullptr;
};

/// Where libcupti is looked for: $GPUCMP_CUPTI_LIBRARY, the library CMake found when the
/// program was configured, then the loader's search path and the usual toolkit folders.
inline std::vector<std::string> cupti_library_candidates() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("GPUCMP_CUPTI_LIBRARY"); env != nullptr && *env != '\0') names.emplace_back(env);
#ifdef GPUCMP_CUPTI_LIBRARY
  names.emplace_back(GPUCMP_CUPTI_LIBRARY);
#endif
  for (const char* name : {"libcupti.so", "libcupti.so.13", "libcupti.so.12", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                           "/usr/local/cuda/lib64/libcupti.so"}) {
    names.emplace_back(name);
  }
  return names;
}

/// Loads libcupti from the first of `candidates` that opens and resolves every function,
/// and checks its version against the headers gpucmp was compiled with. Throws unsupported
/// ("kernel mode unavailable: ...") naming what failed.
inline cupti_functions load_cupti(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& name : candidates) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += "\n  " + name + ": " + (why != nullptr ? why : "not found");
      continue;
    }
    cupti_functions f;
    std::string missing;
    auto resolve = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
      if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + symbol;
    };
    resolve(f.get_version, "cuptiGetVersion");
    resolve(f.get_result_string, "cuptiGetResultString");
    resolve(f.activity_enable, "cuptiActivityEnable");
    resolve(f.activity_disable, "cuptiActivityDisable");
    resolve(f.activity_register_callbacks, "cuptiActivityRegisterCallbacks");
    resolve(f.activity_flush_all, "cuptiActivityFlushAll");
    resolve(f.activity_get_next_record, "cuptiActivityGetNextRecord");
    resolve(f.activity_get_num_dropped_records, "cuptiActivityGetNumDroppedRecords");
    resolve(f.push_external_correlation_id, "cuptiActivityPushExternalCorrelationId");
    resolve(f.pop_external_correlation_id, "cuptiActivityPopExternalCorrelationId");
    resolve(f.subscribe, "cuptiSubscribe_v2");  // names the other subscriber when it fails
    resolve(f.unsubscribe, "cuptiUnsubscribe");
    if (!missing.empty()) {
      tried += "\n  " + name + ": lacks " + missing;
      continue;  // the handle stays open: unloading CUPTI is not supported
    }
    uint32_t version = 0;
    if (f.get_version(&version) != CUPTI_SUCCESS || version < CUPTI_API_VERSION) {
      tried += "\n  " + name + ": CUPTI API version " + std::to_string(version) + " is older than the " +
               std::to_string(CUPTI_API_VERSION) + " gpucmp was compiled against";
      continue;
    }
    return f;
  }
  throw unsupported("kernel mode unavailable: cannot load CUPTI (tried:" + tried + ")");
}

inline std::string memcpy_name(std::uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy DtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "[memcpy HtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "[memcpy PtoP]";
    default: return "[memcpy]";
  }
}

/// The process's one CUPTI activity session (CUPTI's activity buffers are process-wide).
/// Raw records arrive on CUPTI's buffer callbacks, are kept under a mutex, and are joined
/// with their external correlation ids (the sample ids) when collected.
class cupti_session {
  // The activity kinds kernel mode records. External correlation records carry the sample
  // ids, and CUPTI emits them only for API calls it records as RUNTIME or DRIVER activity
  // (seen on CUPTI 13.0: with neither enabled, no external correlation record arrives), so
  // both are enabled and their records discarded. They cost host time per API call only.
  static constexpr CUpti_ActivityKind traced_kinds[] = {
      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,          CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

 public:
  static cupti_session& instance() {
    static cupti_session session;
    return session;
  }

  void start() {
    std::lock_guard<std::mutex> lock(m_start_mutex);
    if (!m_functions) m_functions = std::make_unique<cupti_functions>(load_cupti(cupti_library_candidates()));
    subscribe();
    try {
      if (!m_callbacks_registered) {
        check(m_functions->activity_register_callbacks(&buffer_requested, &buffer_completed),
              "cuptiActivityRegisterCallbacks");
        m_callbacks_registered = true;
      }
      for (auto kind : traced_kinds) check(m_functions->activity_enable(kind), "cuptiActivityEnable");
    } catch (...) {
      stop();  // gives the subscription back
      throw;
    }
  }

  void begin_sample(std::uint64_t id) {
    check(m_functions->push_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
          "cuptiActivityPushExternalCorrelationId");
  }

  void end_sample() {
    uint64_t id = 0;
    check(m_functions->pop_external_correlation_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id),
          "cuptiActivityPopExternalCorrelationId");
  }

  std::vector<activity_record> collect() {
    check(m_functions->activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    std::lock_guard<std::mutex> lock(m_records_mutex);
    std::vector<activity_record> attributed;
    attributed.reserve(m_pending.size());
    for (auto& p : m_pending) {
      auto sample = m_sample_of_correlation.find(p.correlation_id);
      if (sample == m_sample_of_correlation.end()) continue;  // not enqueued inside a sample
      p.record.sample = sample->second;
      attributed.push_back(std::move(p.record));
    }
    m_pending.clear();
    m_sample_of_correlation.clear();
    return attributed;
  }

  std::size_t dropped_records() {
    size_t dropped = 0;
    if (m_functions && m_functions->activity_get_num_dropped_records(nullptr, 0, &dropped) != CUPTI_SUCCESS) return 0;
    return dropped;
  }

  void stop() noexcept {
    if (!m_functions) return;
    for (auto kind : traced_kinds) m_functions->activity_disable(kind);
    m_functions->activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (m_subscriber != nullptr) m_functions->unsubscribe(m_subscriber);
    m_subscriber = nullptr;
    std::lock_guard<std::mutex> lock(m_records_mutex);
    m_pending.clear();
    m_sample_of_correlation.clear();
  }

 private:
  struct pending_record {
    std::uint32_t correlation_id;
    activity_record record;
  };


  static void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

  // CUPTI allows one subscriber per process, and its documentation asks every client to
  // subscribe before it traces, so that two never share the process-wide activity buffers
  // (a second client's cuptiActivityRegisterCallbacks would silently take our records).
  // Nsight Systems, Nsight Compute, compute-sanitizer and cuda-gdb hold the subscription
  // too. Kernel mode holds it from start() to stop(); a taken one is a typed unsupported
  // naming the other subscriber, and every other mode still runs.
  void subscribe() {
    if (m_subscriber != nullptr) return;
    char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "gpucmp kernel mode";
    params.oldSubscriberName = other;
    params.oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN;
    const CUptiResult result = m_functions->subscribe(&m_subscriber, &ignore_callback, nullptr, &params);
    if (result == CUPTI_SUCCESS) return;
    m_subscriber = nullptr;
    if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      const std::string who = other[0] != '\0' ? std::string(" (") + other + ")" : std::string();
      throw unsupported("kernel mode unavailable: CUPTI is already taken by another subscriber" + who +
                        ", such as Nsight Systems, Nsight Compute, compute-sanitizer or a profiler in this "
                        "process; the other modes do not need it");
    }
    check(result, "cuptiSubscribe_v2");
  }

  void check(CUptiResult result, const char* call) const {
    if (result == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    if (m_functions->get_result_string(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
    std::string hint;
    if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
      hint = " (profiling is restricted to administrators: run as root or load the driver with "
             "NVreg_RestrictProfilingToAdminUsers=0)";
    } else if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || result == CUPTI_ERROR_NOT_INITIALIZED) {
      hint = " (another profiler, such as Nsight Compute or Nsight Systems, may be attached to this process)";
    }
    throw unsupported(std::string("kernel mode unavailable: ") + call + " failed: " + text + hint);
  }

  // The fields every CUPTI activity record of interest shares.
  template <class Record>
  static pending_record pending(const Record& r, activity_kind kind, std::string name) {
    pending_record p{r.correlationId, {}};
    p.record.kind = kind;
    p.record.name = std::move(name);
    p.record.start_ns = r.start;
    p.record.end_ns = r.end;
    p.record.stream_id = r.streamId;
    return p;
  }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    constexpr size_t bytes = size_t{8} << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
    *size = *buffer != nullptr ? bytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
    instance().consume(buffer, valid_bytes);
    std::free(buffer);
  }

  void consume(uint8_t* buffer, size_t valid_bytes) noexcept {
    if (buffer == nullptr || !m_functions) return;
    try {
      std::lock_guard<std::mutex> lock(m_records_mutex);
      CUpti_Activity* raw = nullptr;
      while (m_functions->activity_get_next_record(buffer, valid_bytes, &raw) == CUPTI_SUCCESS) {
        switch (raw->kind) {
          case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const auto* r = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(raw);
            if (r->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
              m_sample_of_correlation[r->correlationId] = r->externalId;
            }
            break;
          }
          case CUPTI_ACTIVITY_KIND_KERNEL:
          case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const auto* r = reinterpret_cast<const cupti_kernel_record*>(raw);
            pending_record p = pending(*r, activity_kind::kernel, demangle(r->name));
            p.record.grid[0] = static_cast<std::uint32_t>(r->gridX);
            p.record.grid[1] = static_cast<std::uint32_t>(r->gridY);
            p.record.grid[2] = static_cast<std::uint32_t>(r->gridZ);
            p.record.block[0] = static_cast<std::uint32_t>(r->blockX);
            p.record.block[1] = static_cast<std::uint32_t>(r->blockY);
            p.record.block[2] = static_cast<std::uint32_t>(r->blockZ);
            m_pending.push_back(std::move(p));
            break;
          }
          case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto* r = reinterpret_cast<const cupti_memcpy_record*>(raw);
            pending_record p = pending(*r, activity_kind::memcpy, memcpy_name(r->copyKind));
            p.record.bytes = r->bytes;
            m_pending.push_back(std::move(p));
            break;
          }
          case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto* r = reinterpret_cast<const cupti_memset_record*>(raw);
            pending_record p = pending(*r, activity_kind::memset, "[memset]");
            p.record.bytes = r->bytes;
            m_pending.push_back(std::move(p));
            break;
          }
          default:
            break;
        }
      }
    } catch (...) {
      // Out of memory while storing records: they are lost, and dropped_records() cannot
      // count them; nothing may escape into CUPTI's thread.
    }
  }

  std::mutex m_start_mutex;
  std::mutex m_records_mutex;
  std::unique_ptr<cupti_functions> m_functions;
  bool m_callbacks_registered = false;
  CUpti_SubscriberHandle m_subscriber = nullptr;
  std::vector<pending_record> m_pending;
  std::unordered_map<std::uint32_t, std::uint64_t> m_sample_of_correlation;
};

/// The activity_tracer kernel mode uses: a handle on the process's CUPTI session.
class cupti_tracer final : public activity_tracer {
 public:
  void start() override { cupti_session::instance().start(); }
  void begin_sample(std::uint64_t id) override { cupti_session::instance().begin_sample(id); }
  void end_sample() override { cupti_session::instance().end_sample(); }
  std::vector<activity_record> collect() override { return cupti_session::instance().collect(); }
  std::size_t dropped_records() override { return cupti_session::instance().dropped_records(); }
  void stop() noexcept override { cupti_session::instance().stop(); }
};

inline std::unique_ptr<activity_tracer> make_cupti_tracer() { return std::make_unique<cupti_tracer>(); }

/// Registers the CUPTI tracer when the program starts (in every translation unit that
/// includes this header; registering twice is harmless).
inline const bool cupti_tracer_registered = register_activity_tracer(&make_cupti_tracer);

}  // namespace detail

/// Makes kernel mode use CUPTI; including this header already does it, this states it.
inline void enable_kernel_mode() noexcept { register_activity_tracer(&detail::make_cupti_tracer); }

}  // namespace gpucmp
