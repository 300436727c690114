// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NCCL result codes turned into gpucmp's typed errors (component gpucmp::nccl): an invalid
// argument or usage is invalid_argument, the rest a library_error naming the call, the result
// and NCCL's own last message, which usually says why.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <nccl.h>

#include <string>

namespace gpucmp::detail {

inline void check_nccl(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  const std::string why = last != nullptr && *last != '\0' ? std::string(": ") + last : std::string();
  const std::string message = std::string("NCCL ") + ncclGetErrorString(result) + " in " + what + why;
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) throw invalid_argument(message);
  throw library_error(message);
}

}  // namespace gpucmp::detail

/// Evaluates an NCCL call once and throws a gpucmp error naming it when it fails.
#define GPUCMP_NCCL_CHECK(expr) ::gpucmp::detail::check_nccl((expr), #expr)
