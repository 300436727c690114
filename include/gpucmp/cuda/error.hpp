// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Error types and the CUDA return-code check. Every failure gpucmp reports is a
// gpucmp::error subclass whose message says what failed and where; the runners
// (engine, Google Benchmark adapter) turn them into typed results, never exit().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace gpucmp {

/// Base of every exception gpucmp throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A CUDA runtime call failed; carries the call's text, location and error code.
class cuda_error : public error {
 public:
  cuda_error(cudaError_t code, std::string expression, std::string file, int line, bool sticky)
      : error(format(code, expression, file, line, sticky)),
        m_code(code),
        m_expression(std::move(expression)),
        m_file(std::move(file)),
        m_line(line),
        m_sticky(sticky) {}

  /// The CUDA error code.
  cudaError_t code() const noexcept { return m_code; }
  /// The expression (or description of the step) that failed.
  const std::string& expression() const noexcept { return m_expression; }
  /// Source file of the check.
  const std::string& file() const noexcept { return m_file; }
  /// Source line of the check.
  int line() const noexcept { return m_line; }
  /// True when the CUDA context is corrupted (e.g. illegal address) and the process must stop using the GPU.
  bool sticky() const noexcept { return m_sticky; }

 private:
  static std::string format(cudaError_t code, const std::string& expression, const std::string& file,
                            int line, bool sticky) {
    std::string msg = "CUDA error ";
    msg += cudaGetErrorName(code);
    msg += " (";
    msg += cudaGetErrorString(code);
    msg += ") in '";
    msg += expression;
    msg += "' at ";
    msg += file;
    msg += ':';
    msg += std::to_string(line);
    if (sticky) msg += " [sticky: the CUDA context is unusable; restart the process]";
    return msg;
  }

  cudaError_t m_code;
  std::string m_expression;
  std::string m_file;
  int m_line;
  bool m_sticky;
};

/// A device allocation did not fit; says how much was needed and how much was free.
class out_of_memory : public error {
 public:
  out_of_memory(std::size_t requested_bytes, std::size_t free_bytes, std::size_t total_bytes,
                const std::string& what_for)
      : error(format(requested_bytes, free_bytes, total_bytes, what_for)),
        m_requested_bytes(requested_bytes),
        m_free_bytes(free_bytes),
        m_total_bytes(total_bytes) {}

  /// Bytes the failed allocation asked for.
  std::size_t requested_bytes() const noexcept { return m_requested_bytes; }
  /// Free device memory when the allocation failed.
  std::size_t free_bytes() const noexcept { return m_free_bytes; }
  /// Total device memory.
  std::size_t total_bytes() const noexcept { return m_total_bytes; }

 private:
  static std::string gib(std::size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return buf;
  }
  static std::string format(std::size_t requested, std::size_t free, std::size_t total,
                            const std::string& what_for) {
    // requested == 0: a library allocated internally and did not say how much.
    const std::string needed = requested != 0 ? gib(requested) : std::string("more than is free");
    return "oom: " + what_for + " needs " + needed + ", " + gib(free) + " free of " + gib(total);
  }

  std::size_t m_requested_bytes;
  std::size_t m_free_bytes;
  std::size_t m_total_bytes;
};

/// The requested operation cannot run on this GPU or build (e.g. "fp8 needs sm_89+").
class unsupported : public error {
 public:
  explicit unsupported(const std::string& reason) : error("unsupported: " + reason) {}
};

/// Options or arguments that make no sense; the message names the field and the rule.
class invalid_argument : public error {
 public:
  explicit invalid_argument(const std::string& reason) : error("invalid argument: " + reason) {}
};

/// A math library (cuBLAS, cuBLASLt, cuDNN) call failed; the message names the call and status.
class library_error : public error {
 public:
  using error::error;
};

/// A held stream was not released by the measured code in time: it blocked on its own stream.
class hold_timeout : public error {
 public:
  using error::error;
};

/// A measurement ran past its time budget (measure_options::timeout_s); the message says
/// how long it ran and in which phase.
class timeout_error : public error {
 public:
  explicit timeout_error(const std::string& reason) : error("timeout: " + reason) {}
};

namespace detail {

/// True for the errors that leave the CUDA context unusable: every later call fails too.
inline bool is_sticky(cudaError_t code) noexcept {
  switch (code) {
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* expression, const char* file,
                                          int line) {
  // Clear a non-sticky error so the next call starts clean; a sticky one cannot be cleared.
  cudaGetLastError();
  throw cuda_error(code, expression, file, line, is_sticky(code));
}

inline void check_cuda(cudaError_t code, const char* expression, const char* file, int line) {
  if (code != cudaSuccess) throw_cuda_error(code, expression, file, line);
}

}  // namespace detail
}  // namespace gpucmp

/// Evaluates a CUDA runtime call once and throws gpucmp::cuda_error when it fails.
#define GPUCMP_CUDA_CHECK(expr) ::gpucmp::detail::check_cuda((expr), #expr, __FILE__, __LINE__)

/// Throws gpucmp::cuda_error if the last kernel launch (or asynchronous call) failed.
#define GPUCMP_CUDA_CHECK_LAST(what) ::gpucmp::detail::check_cuda(cudaGetLastError(), (what), __FILE__, __LINE__)
