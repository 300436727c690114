// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NVTX ranges, so a program opened in Nsight Systems shows gpucmp's structure (benchmark,
// warm-up, samples; later model layers). NVTX3 is header-only and ships with the CUDA
// toolkit; without a tool attached a range costs a few nanoseconds. Define GPUCMP_NO_NVTX
// to compile the ranges out.
#pragma once

#ifndef GPUCMP_NO_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include <string>

namespace gpucmp {

/// Pushes an NVTX range in the "gpucmp" domain for its lifetime (on the calling thread).
class nvtx_range {
 public:
  /// Opens a range named `name`.
  explicit nvtx_range(const std::string& name) noexcept {
#ifndef GPUCMP_NO_NVTX
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = name.c_str();
    nvtxDomainRangePushEx(domain(), &attributes);
#else
    (void)name;
#endif
  }
  ~nvtx_range() {
#ifndef GPUCMP_NO_NVTX
    nvtxDomainRangePop(domain());
#endif
  }
  nvtx_range(const nvtx_range&) = delete;
  nvtx_range& operator=(const nvtx_range&) = delete;

#ifndef GPUCMP_NO_NVTX
 private:
  static nvtxDomainHandle_t domain() noexcept {
    static const nvtxDomainHandle_t handle = nvtxDomainCreateA("gpucmp");
    return handle;
  }
#endif
};

}  // namespace gpucmp
