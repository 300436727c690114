// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// NVML, loaded at run time: no link-time dependency on the driver's libnvidia-ml, so a
// machine without NVML (or without a GPU) gets a clear "not available" and everything else
// still works. The few NVML functions gpucmp reads are declared here with their ABI (nvml.h
// is not on every build machine; a test compares these declarations with nvml.h where it is).
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>

#include <dlfcn.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// NVML's ABI as gpucmp uses it (values as in nvml.h).
namespace nvml_abi {
using device_t = struct nvmlDevice_st*;  ///< nvmlDevice_t
using return_t = int;                    ///< nvmlReturn_t
inline constexpr return_t success = 0;                ///< NVML_SUCCESS
inline constexpr return_t error_not_supported = 3;    ///< NVML_ERROR_NOT_SUPPORTED
inline constexpr int clock_sm = 1;                    ///< NVML_CLOCK_SM
inline constexpr int clock_mem = 2;                   ///< NVML_CLOCK_MEM
inline constexpr int temperature_gpu = 0;             ///< NVML_TEMPERATURE_GPU
inline constexpr int feature_enabled = 1;             ///< NVML_FEATURE_ENABLED
inline constexpr unsigned nvlink_max_links = 18;      ///< NVML_NVLINK_MAX_LINKS
inline constexpr int nvlink_device_gpu = 0x00;        ///< NVML_NVLINK_DEVICE_TYPE_GPU
inline constexpr int nvlink_device_switch = 0x02;     ///< NVML_NVLINK_DEVICE_TYPE_SWITCH
/// nvmlPciInfo_t.
struct pci_info {
  char bus_id_legacy[16];     ///< busIdLegacy
  unsigned int domain;        ///< domain
  unsigned int bus;           ///< bus
  unsigned int device;        ///< device
  unsigned int pci_device_id;     ///< pciDeviceId
  unsigned int pci_sub_system_id;  ///< pciSubSystemId
  char bus_id[32];            ///< busId: "00000000:18:00.0"
};
}  // namespace nvml_abi

/// The loaded NVML library (one per process). Never throws: when NVML cannot be loaded or
/// initialised, available() is false and reason() says why.
class nvml_library {
 public:
  /// The process's NVML, loaded and initialised on first use (thread-safe). The library is
  /// libnvidia-ml.so.1, or the file GPUCMP_NVML_LIBRARY names (a path that does not exist
  /// shows how a run behaves on a machine without NVML).
  static nvml_library& instance() {
    static nvml_library library(library_name());
    return library;
  }

  /// Loads `soname` (tests pass a name that does not exist to see the absence path).
  explicit nvml_library(const char* soname) noexcept { load(soname); }
  ~nvml_library() {
    if (m_initialised && shutdown != nullptr) shutdown();  // status ignored: destructors never throw
    if (m_handle != nullptr) dlclose(m_handle);
  }
  nvml_library(const nvml_library&) = delete;
  nvml_library& operator=(const nvml_library&) = delete;

  /// True when NVML was loaded and initialised.
  bool available() const noexcept { return m_initialised; }
  /// Why NVML is not available ("" when it is).
  const std::string& reason() const noexcept { return m_reason; }

  /// NVML's message for `code`.
  std::string error_string(nvml_abi::return_t code) const {
    return error_text != nullptr ? std::string(error_text(code)) : "NVML error " + std::to_string(code);
  }

  // The functions, or nullptr when this NVML lacks one (optional ones are checked at use).
  nvml_abi::return_t (*init)() = nullptr;
  nvml_abi::return_t (*shutdown)() = nullptr;
  const char* (*error_text)(nvml_abi::return_t) = nullptr;
  nvml_abi::return_t (*handle_by_pci_bus_id)(const char*, nvml_abi::device_t*) = nullptr;
  nvml_abi::return_t (*power_usage)(nvml_abi::device_t, unsigned int*) = nullptr;                // mW
  nvml_abi::return_t (*total_energy)(nvml_abi::device_t, unsigned long long*) = nullptr;         // mJ
  nvml_abi::return_t (*enforced_power_limit)(nvml_abi::device_t, unsigned int*) = nullptr;       // mW
  nvml_abi::return_t (*clock_info)(nvml_abi::device_t, int, unsigned int*) = nullptr;            // MHz
  nvml_abi::return_t (*temperature)(nvml_abi::device_t, int, unsigned int*) = nullptr;           // C
  nvml_abi::return_t (*clock_event_reasons)(nvml_abi::device_t, unsigned long long*) = nullptr;  // bits
  nvml_abi::return_t (*ecc_mode)(nvml_abi::device_t, int*, int*) = nullptr;
  nvml_abi::return_t (*mig_mode)(nvml_abi::device_t, unsigned int*, unsigned int*) = nullptr;
  nvml_abi::return_t (*persistence_mode)(nvml_abi::device_t, int*) = nullptr;
  nvml_abi::return_t (*pcie_generation)(nvml_abi::device_t, unsigned int*) = nullptr;
  nvml_abi::return_t (*pcie_width)(nvml_abi::device_t, unsigned int*) = nullptr;
  nvml_abi::return_t (*driver_version)(char*, unsigned int) = nullptr;
  // NVLink and PCIe topology (multigpu/topology.hpp).
  nvml_abi::return_t (*nvlink_state)(nvml_abi::device_t, unsigned int, int*) = nullptr;
  nvml_abi::return_t (*nvlink_version)(nvml_abi::device_t, unsigned int, unsigned int*) = nullptr;
  nvml_abi::return_t (*nvlink_remote_pci)(nvml_abi::device_t, unsigned int, nvml_abi::pci_info*) = nullptr;
  nvml_abi::return_t (*nvlink_remote_type)(nvml_abi::device_t, unsigned int, int*) = nullptr;
  nvml_abi::return_t (*common_ancestor)(nvml_abi::device_t, nvml_abi::device_t, int*) = nullptr;

 private:
  static const char* library_name() noexcept {
    const char* chosen = std::getenv("GPUCMP_NVML_LIBRARY");
    return chosen != nullptr && *chosen != '\0' ? chosen : "libnvidia-ml.so.1";
  }

  template <class F>
  void bind(F& f, const char* name) noexcept {
    f = reinterpret_cast<F>(dlsym(m_handle, name));
  }

  void load(const char* soname) noexcept {
    m_handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (m_handle == nullptr) {
      const char* why = dlerror();
      m_reason = std::string("NVML not available: cannot load ") + soname + (why ? std::string(" (") + why + ")" : "");
      return;
    }
    bind(init, "nvmlInit_v2");
    bind(shutdown, "nvmlShutdown");
    bind(error_text, "nvmlErrorString");
    bind(handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
    bind(power_usage, "nvmlDeviceGetPowerUsage");
    bind(total_energy, "nvmlDeviceGetTotalEnergyConsumption");
    bind(enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    bind(clock_info, "nvmlDeviceGetClockInfo");
    bind(temperature, "nvmlDeviceGetTemperature");
    bind(clock_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (clock_event_reasons == nullptr) bind(clock_event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");  // older drivers
    bind(ecc_mode, "nvmlDeviceGetEccMode");
    bind(mig_mode, "nvmlDeviceGetMigMode");
    bind(persistence_mode, "nvmlDeviceGetPersistenceMode");
    bind(pcie_generation, "nvmlDeviceGetCurrPcieLinkGeneration");
    bind(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    bind(driver_version, "nvmlSystemGetDriverVersion");
    bind(nvlink_state, "nvmlDeviceGetNvLinkState");
    bind(nvlink_version, "nvmlDeviceGetNvLinkVersion");
    bind(nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    bind(nvlink_remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
    bind(common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    if (init == nullptr || handle_by_pci_bus_id == nullptr) {
      m_reason = std::string("NVML not available: ") + soname + " lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
      return;
    }
    const nvml_abi::return_t code = init();
    if (code != nvml_abi::success) {
      m_reason = "NVML not available: nvmlInit_v2 failed: " + error_string(code);
      return;
    }
    m_initialised = true;
  }

  void* m_handle = nullptr;
  bool m_initialised = false;
  std::string m_reason;
};

/// One GPU as NVML sees it; every reading is optional (std::nullopt where this GPU or driver
/// does not report it).
class nvml_device {
 public:
  /// The NVML device of `device` (matched by PCI bus id); throws unsupported naming why when
  /// NVML is not available or does not know the device.
  explicit nvml_device(const device_info& device, nvml_library& library = nvml_library::instance()) : m_nvml(library) {
    if (!m_nvml.available()) throw unsupported(m_nvml.reason());
    std::string bus_id = device.pci_bus_id;
    for (char& c : bus_id) c = char(std::toupper(static_cast<unsigned char>(c)));
    const nvml_abi::return_t code = m_nvml.handle_by_pci_bus_id(bus_id.c_str(), &m_device);
    if (code != nvml_abi::success) {
      throw unsupported("NVML has no device at PCI bus id " + bus_id + ": " + m_nvml.error_string(code));
    }
  }

  /// Power draw in W (on Ampere and later a driver-side average over about a second).
  std::optional<double> power_w() const {
    unsigned int mw = 0;
    return read(m_nvml.power_usage, mw) ? std::optional<double>(mw * 1e-3) : std::nullopt;
  }
  /// The driver's total-energy counter in J (since the driver loaded; Volta and later).
  std::optional<double> energy_j() const {
    unsigned long long mj = 0;
    return read(m_nvml.total_energy, mj) ? std::optional<double>(double(mj) * 1e-3) : std::nullopt;
  }
  /// The enforced power limit in W.
  std::optional<double> power_limit_w() const {
    unsigned int mw = 0;
    return read(m_nvml.enforced_power_limit, mw) ? std::optional<double>(mw * 1e-3) : std::nullopt;
  }
  /// Current SM clock in MHz.
  std::optional<unsigned> sm_clock_mhz() const { return clock(nvml_abi::clock_sm); }
  /// Current memory clock in MHz.
  std::optional<unsigned> memory_clock_mhz() const { return clock(nvml_abi::clock_mem); }
  /// GPU temperature in degrees C.
  std::optional<unsigned> temperature_c() const {
    unsigned int t = 0;
    if (m_nvml.temperature == nullptr) return std::nullopt;
    return m_nvml.temperature(m_device, nvml_abi::temperature_gpu, &t) == nvml_abi::success ? std::optional<unsigned>(t)
                                                                                            : std::nullopt;
  }
  /// The current clock-event ("throttle") reason bits (see clock_events.hpp).
  std::optional<std::uint64_t> clock_event_reasons() const {
    unsigned long long bits = 0;
    return read(m_nvml.clock_event_reasons, bits) ? std::optional<std::uint64_t>(bits) : std::nullopt;
  }
  /// ECC on device memory (current mode).
  std::optional<bool> ecc_enabled() const {
    int current = 0, pending = 0;
    if (m_nvml.ecc_mode == nullptr || m_nvml.ecc_mode(m_device, &current, &pending) != nvml_abi::success) return std::nullopt;
    return current == nvml_abi::feature_enabled;
  }
  /// MIG mode (current).
  std::optional<bool> mig_enabled() const {
    unsigned int current = 0, pending = 0;
    if (m_nvml.mig_mode == nullptr || m_nvml.mig_mode(m_device, &current, &pending) != nvml_abi::success) return std::nullopt;
    return current == 1;
  }
  /// Persistence mode.
  std::optional<bool> persistence_enabled() const {
    int mode = 0;
    if (m_nvml.persistence_mode == nullptr || m_nvml.persistence_mode(m_device, &mode) != nvml_abi::success) return std::nullopt;
    return mode == nvml_abi::feature_enabled;
  }
  /// Current PCIe generation and link width.
  std::optional<unsigned> pcie_generation() const {
    unsigned int v = 0;
    return read(m_nvml.pcie_generation, v) ? std::optional<unsigned>(v) : std::nullopt;
  }
  std::optional<unsigned> pcie_width() const {  ///< see pcie_generation()
    unsigned int v = 0;
    return read(m_nvml.pcie_width, v) ? std::optional<unsigned>(v) : std::nullopt;
  }
  /// NVML's handle, for calls across two devices (topology).
  nvml_abi::device_t handle() const noexcept { return m_device; }
  /// The library this device was opened with.
  nvml_library& library() const noexcept { return m_nvml; }
  /// The driver version string ("580.159").
  std::optional<std::string> driver_version() const {
    char text[96] = {};
    if (m_nvml.driver_version == nullptr || m_nvml.driver_version(text, sizeof text) != nvml_abi::success) return std::nullopt;
    return std::string(text);
  }

 private:
  template <class F, class T>
  bool read(F f, T& value) const {
    return f != nullptr && f(m_device, &value) == nvml_abi::success;
  }
  std::optional<unsigned> clock(int type) const {
    unsigned int mhz = 0;
    if (m_nvml.clock_info == nullptr) return std::nullopt;
    return m_nvml.clock_info(m_device, type, &mhz) == nvml_abi::success ? std::optional<unsigned>(mhz) : std::nullopt;
  }

  nvml_library& m_nvml;
  nvml_abi::device_t m_device = nullptr;
};

/// What NVML knows that differs between machines, as (key, value) pairs for every result
/// file: driver, power limit, persistence mode, MIG mode, PCIe link. Without NVML: one pair
/// ("nvml", why not).
inline std::vector<std::pair<std::string, std::string>> nvml_context(const device_info& d,
                                                                     nvml_library& library = nvml_library::instance()) {
  std::vector<std::pair<std::string, std::string>> out;
  try {
    const nvml_device n(d, library);
    auto on_off = [](bool v) { return std::string(v ? "on" : "off"); };
    if (auto v = n.driver_version()) out.emplace_back("nvidia_driver", *v);
    if (auto v = n.power_limit_w()) {
      char text[32];
      std::snprintf(text, sizeof text, "%.0f", *v);
      out.emplace_back("gpu_power_limit_w", text);
    }
    if (auto v = n.persistence_enabled()) out.emplace_back("gpu_persistence_mode", on_off(*v));
    // MIG on: results come from one instance; its profile is not recorded yet.
    if (auto v = n.mig_enabled()) out.emplace_back("gpu_mig_mode", on_off(*v));
    if (auto g = n.pcie_generation(), w = n.pcie_width(); g && w) {
      out.emplace_back("gpu_pcie_link", "gen" + std::to_string(*g) + " x" + std::to_string(*w));
    }
  } catch (const error& e) {
    out.emplace_back("nvml", e.what());
  }
  return out;
}

}  // namespace gpucmp
