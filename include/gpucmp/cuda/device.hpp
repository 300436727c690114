// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Device selection and a snapshot of the facts a comparison must state: name, UUID,
// SMs, L2, memory, clocks, driver and runtime. Attributes are read with
// cudaDeviceGetAttribute because CUDA 13 removed several cudaDeviceProp fields.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <string>

namespace gpucmp {

/// Number of CUDA devices; 0 when there is none or no usable driver (never throws).
inline int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

/// Why no CUDA device can be used ("" when one can), e.g. "no CUDA device: cudaErrorNoDevice (...)".
inline std::string no_device_reason() {
  int count = 0;
  const cudaError_t code = cudaGetDeviceCount(&count);
  if (code != cudaSuccess) {
    cudaGetLastError();
    // The runtime answers "insufficient driver" both without a driver and with an old one;
    // the driver's version (0: none installed) tells them apart.
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) {
      cudaGetLastError();
      driver = 0;
    }
    if (driver == 0) {
      return std::string("no CUDA device: no NVIDIA driver found (the CUDA driver library is not installed or cannot be "
                         "loaded; ") + cudaGetErrorName(code) + ")";
    }
    if (code == cudaErrorInsufficientDriver) {
      int runtime = 0;
      if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) cudaGetLastError();
      return "no CUDA device: the NVIDIA driver supports CUDA " + std::to_string(driver / 1000) + "." +
             std::to_string(driver % 1000 / 10) + ", older than this program's CUDA runtime " + std::to_string(runtime / 1000) +
             "." + std::to_string(runtime % 1000 / 10) + ": update the driver";
    }
    return std::string("no CUDA device: ") + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")";
  }
  if (count == 0) return "no CUDA device: the driver reports 0 devices";
  return "";
}

/// Makes `ordinal` the calling thread's current device; throws if it does not exist.
inline void select_device(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    throw invalid_argument("device ordinal " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(count) + " CUDA devices)");
  }
  GPUCMP_CUDA_CHECK(cudaSetDevice(ordinal));
}

/// The calling thread's current device ordinal.
inline int current_device() {
  int ordinal = 0;
  GPUCMP_CUDA_CHECK(cudaGetDevice(&ordinal));
  return ordinal;
}

/// Makes a device current for a scope and restores the previous one on exit.
class device_guard {
 public:
  /// Switches the calling thread to device `ordinal`.
  explicit device_guard(int ordinal) : m_previous(current_device()) {
    if (ordinal != m_previous) GPUCMP_CUDA_CHECK(cudaSetDevice(ordinal));
  }
  ~device_guard() { cudaSetDevice(m_previous); }  // errors ignored: destructors never throw
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int m_previous;
};

/// Facts about one device, read once; plain values, safe to copy and compare.
struct device_info {
  int ordinal = -1;                      ///< CUDA device ordinal
  std::string name;                      ///< driver's device name, e.g. "NVIDIA H200"
  std::string uuid;                      ///< "GPU-xxxxxxxx-xxxx-..." as nvidia-smi prints it
  std::string pci_bus_id;                ///< "0000:3b:00.0"
  int cc_major = 0;                      ///< compute capability, major
  int cc_minor = 0;                      ///< compute capability, minor
  int sm_count = 0;                      ///< streaming multiprocessors
  std::size_t l2_bytes = 0;              ///< L2 cache size
  std::size_t global_memory_bytes = 0;   ///< total device memory
  std::size_t free_memory_bytes = 0;     ///< free device memory when the snapshot was taken
  int memory_bus_width_bits = 0;         ///< memory bus width
  double sm_clock_max_hz = 0;            ///< peak SM clock the driver reports
  double memory_clock_max_hz = 0;        ///< peak memory clock the driver reports
  bool ecc_enabled = false;              ///< ECC on device memory
  int driver_version = 0;                ///< e.g. 13000 for a CUDA 13.0 driver
  int runtime_version = 0;               ///< CUDA runtime this program runs with

  /// "9.0"
  std::string compute_capability() const { return std::to_string(cc_major) + "." + std::to_string(cc_minor); }
  /// Theoretical DRAM bandwidth from the reported memory clock and bus width (double data rate).
  double memory_bandwidth_bytes_per_s() const { return 2.0 * memory_clock_max_hz * memory_bus_width_bits / 8.0; }
};

/// "13.0" from a CUDA version integer such as 13000.
inline std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

namespace detail {
inline int device_attribute(cudaDeviceAttr attribute, int ordinal) {
  int value = 0;
  GPUCMP_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, ordinal));
  return value;
}

inline std::string format_uuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return buf;
}
}  // namespace detail

/// Reads the facts of device `ordinal`. Makes no device current; the free-memory figure
/// is read on the current device only when `ordinal` is current.
inline device_info query_device(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    throw invalid_argument("device ordinal " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(count) + " CUDA devices)");
  }
  device_info info;
  info.ordinal = ordinal;
  cudaDeviceProp prop{};
  GPUCMP_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  info.name = prop.name;
  info.uuid = detail::format_uuid(prop.uuid);
  char bus[32] = {};
  GPUCMP_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof bus), ordinal));
  info.pci_bus_id = bus;
  info.cc_major = detail::device_attribute(cudaDevAttrComputeCapabilityMajor, ordinal);
  info.cc_minor = detail::device_attribute(cudaDevAttrComputeCapabilityMinor, ordinal);
  info.sm_count = detail::device_attribute(cudaDevAttrMultiProcessorCount, ordinal);
  info.l2_bytes = static_cast<std::size_t>(detail::device_attribute(cudaDevAttrL2CacheSize, ordinal));
  info.global_memory_bytes = prop.totalGlobalMem;
  info.memory_bus_width_bits = detail::device_attribute(cudaDevAttrGlobalMemoryBusWidth, ordinal);
  info.sm_clock_max_hz = 1e3 * detail::device_attribute(cudaDevAttrClockRate, ordinal);
  info.memory_clock_max_hz = 1e3 * detail::device_attribute(cudaDevAttrMemoryClockRate, ordinal);
  info.ecc_enabled = detail::device_attribute(cudaDevAttrEccEnabled, ordinal) != 0;
  GPUCMP_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  GPUCMP_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  if (current_device() == ordinal) {
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    info.free_memory_bytes = free_bytes;
  }
  return info;
}

/// Facts of the calling thread's current device.
inline device_info query_current_device() { return query_device(current_device()); }

}  // namespace gpucmp
