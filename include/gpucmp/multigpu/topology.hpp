// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// How each pair of GPUs is connected, from NVML: NVLink (how many links, which version,
// directly or through NVSwitches) or else the PCIe path, in nvidia-smi topo -m's words (PIX,
// PXB, PHB, NODE, SYS). The P2P matrix prints it next to the measured bandwidth, so a slow pair
// shows why. The pair logic reads per-GPU link lists and is host-tested; read_gpu_topology()
// fills them from NVML (loaded at run time, power/nvml.hpp), needing no link-time dependency.
//
//   const gpucmp::gpu_topology t = gpucmp::read_gpu_topology({gpucmp::query_device(0), gpucmp::query_device(1)});
//   t.pairs[0][1].text();   // "NV18 (NVLink 4, through NVSwitch)" on an HGX H200
#pragma once

#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/power/nvml.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpucmp {

/// A PCI bus id in one spelling ("0000:3b:00.0"): CUDA writes a 4-digit domain, NVML an
/// 8-digit one and upper case. Returns "" for text that is not domain:bus:device.function.
inline std::string normal_bus_id(const std::string& id) {
  // domain ':' bus ':' device '.' function, each a run of hex digits.
  unsigned long part[4] = {0, 0, 0, 0};
  const char separators[3] = {':', ':', '.'};
  std::size_t at = 0;
  for (int k = 0; k < 4; ++k) {
    const std::size_t begin = at;
    while (at < id.size() && std::isxdigit(static_cast<unsigned char>(id[at]))) ++at;
    if (at == begin || at - begin > 8) return "";
    part[k] = std::strtoul(id.substr(begin, at - begin).c_str(), nullptr, 16);
    if (k < 3) {
      if (at >= id.size() || id[at] != separators[k]) return "";
      ++at;
    }
  }
  if (at != id.size()) return "";
  char text[48];
  std::snprintf(text, sizeof text, "%04lx:%02lx:%02lx.%lx", part[0], part[1], part[2], part[3]);
  return text;
}

/// One active NVLink of a GPU.
struct nvlink_link {
  unsigned version = 0;       ///< NVLink version (4 on Hopper, 3 on Ampere)
  bool to_switch = false;     ///< the far end is an NVSwitch
  std::string remote_bus_id;  ///< the far end's PCI bus id (normal_bus_id), a GPU's unless to_switch
};

/// What NVML says of one GPU's links.
struct gpu_links {
  std::string bus_id;               ///< this GPU's PCI bus id (normal_bus_id)
  std::vector<nvlink_link> nvlinks;  ///< its active NVLinks
};

/// The PCIe path between two GPUs (NVML's nvmlGpuTopologyLevel_t).
enum class pcie_path { unknown, board, single_switch, multiple_switches, host_bridge, numa_node, system };

/// nvidia-smi topo -m's word and what it means: "PXB (several PCIe switches)".
inline std::string to_string(pcie_path p) {
  switch (p) {
    case pcie_path::board: return "on one board";
    case pcie_path::single_switch: return "PIX (one PCIe switch)";
    case pcie_path::multiple_switches: return "PXB (several PCIe switches)";
    case pcie_path::host_bridge: return "PHB (through a host bridge)";
    case pcie_path::numa_node: return "NODE (host bridges of one NUMA node)";
    case pcie_path::system: return "SYS (across CPUs)";
    case pcie_path::unknown: break;
  }
  return "unknown";
}

/// NVML's topology level (0, 10, ..., 50) as a PCIe path; anything else is unknown.
inline pcie_path pcie_path_of(int level) {
  switch (level) {
    case 0: return pcie_path::board;
    case 10: return pcie_path::single_switch;
    case 20: return pcie_path::multiple_switches;
    case 30: return pcie_path::host_bridge;
    case 40: return pcie_path::numa_node;
    case 50: return pcie_path::system;
    default: return pcie_path::unknown;
  }
}

/// How two GPUs are connected.
struct pair_link {
  int nvlinks = 0;              ///< NVLinks between them (see nvlink_between)
  unsigned version = 0;         ///< the lowest NVLink version among them
  bool through_switch = false;  ///< through NVSwitches rather than GPU to GPU
  pcie_path pcie = pcie_path::unknown;  ///< the PCIe path (read where there is no NVLink)

  /// "NV18 (NVLink 4, through NVSwitch)", "NV4 (NVLink 3)" or the PCIe path.
  std::string text() const {
    if (nvlinks > 0) {
      return "NV" + std::to_string(nvlinks) + " (NVLink " + std::to_string(version) + (through_switch ? ", through NVSwitch)" : ")");
    }
    return pcie == pcie_path::unknown ? "unknown" : "PCIe " + to_string(pcie);
  }
};

/// The NVLinks between `a` and `b`: a's links whose far end is b, or, when both reach
/// NVSwitches (an NVSwitch fabric joins every pair of its GPUs), the fewer of their switch
/// links, which bound the pair's bandwidth.
inline pair_link nvlink_between(const gpu_links& a, const gpu_links& b) {
  // The links of `g` that `joins` accepts: how many, and their lowest version.
  struct count {
    int links = 0;
    unsigned lowest = 0;
  };
  auto links_of = [](const gpu_links& g, auto joins) {
    count c;
    for (const nvlink_link& l : g.nvlinks) {
      if (!joins(l)) continue;
      ++c.links;
      c.lowest = c.lowest == 0 ? l.version : std::min(c.lowest, l.version);
    }
    return c;
  };
  pair_link p;
  const count direct = links_of(a, [&](const nvlink_link& l) { return !l.to_switch && l.remote_bus_id == b.bus_id; });
  if (direct.links > 0) {
    p.nvlinks = direct.links;
    p.version = direct.lowest;
    return p;
  }
  const auto to_switch = [](const nvlink_link& l) { return l.to_switch; };
  const count a_switch = links_of(a, to_switch), b_switch = links_of(b, to_switch);
  if (a_switch.links > 0 && b_switch.links > 0) {
    p.nvlinks = std::min(a_switch.links, b_switch.links);
    p.version = std::min(a_switch.lowest, b_switch.lowest);
    p.through_switch = true;
  }
  return p;
}

/// Every pair's connection: pairs[i][j] for devices i != j (the diagonal is empty).
struct gpu_topology {
  std::vector<std::string> bus_ids;           ///< the devices' PCI bus ids (normal_bus_id)
  std::vector<std::vector<pair_link>> pairs;  ///< [i][j]
};

/// One GPU's active NVLinks from NVML (none where NVML does not report NVLink).
inline gpu_links read_gpu_links(const nvml_device& d, const std::string& bus_id) {
  gpu_links out;
  out.bus_id = normal_bus_id(bus_id);
  nvml_library& n = d.library();
  if (n.nvlink_state == nullptr) return out;
  for (unsigned link = 0; link < nvml_abi::nvlink_max_links; ++link) {
    int active = 0;
    if (n.nvlink_state(d.handle(), link, &active) != nvml_abi::success || active != nvml_abi::feature_enabled) continue;
    nvlink_link l;
    unsigned version = 0;
    if (n.nvlink_version != nullptr && n.nvlink_version(d.handle(), link, &version) == nvml_abi::success) l.version = version;
    int type = -1;
    if (n.nvlink_remote_type != nullptr && n.nvlink_remote_type(d.handle(), link, &type) == nvml_abi::success) {
      l.to_switch = type == nvml_abi::nvlink_device_switch;
    }
    nvml_abi::pci_info pci{};
    if (n.nvlink_remote_pci != nullptr && n.nvlink_remote_pci(d.handle(), link, &pci) == nvml_abi::success) {
      l.remote_bus_id = normal_bus_id(pci.bus_id);
    }
    out.nvlinks.push_back(l);
  }
  return out;
}

/// How every pair of `devices` is connected, from NVML. Throws unsupported (NVML's reason)
/// when NVML is not available or does not know a device.
inline gpu_topology read_gpu_topology(const std::vector<device_info>& devices, nvml_library& library = nvml_library::instance()) {
  std::vector<nvml_device> handles;
  std::vector<gpu_links> links;
  gpu_topology t;
  for (const device_info& d : devices) {
    handles.emplace_back(d, library);
    links.push_back(read_gpu_links(handles.back(), d.pci_bus_id));
    t.bus_ids.push_back(links.back().bus_id);
  }
  t.pairs.assign(devices.size(), std::vector<pair_link>(devices.size()));
  for (std::size_t i = 0; i < devices.size(); ++i) {
    for (std::size_t j = 0; j < devices.size(); ++j) {
      if (i == j) continue;
      pair_link p = nvlink_between(links[i], links[j]);
      int level = -1;
      if (library.common_ancestor != nullptr &&
          library.common_ancestor(handles[i].handle(), handles[j].handle(), &level) == nvml_abi::success) {
        p.pcie = pcie_path_of(level);
      }
      t.pairs[i][j] = p;
    }
  }
  return t;
}

}  // namespace gpucmp
