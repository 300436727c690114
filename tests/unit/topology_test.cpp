// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// GPU-to-GPU connections (multigpu/topology.hpp) from link lists written by hand: bus ids in
// CUDA's and NVML's spellings, NVLink GPU to GPU and through NVSwitches, the PCIe levels.
#include "catch.hpp"

#include <gpucmp/multigpu/topology.hpp>

namespace {

gpucmp::nvlink_link link_to(const std::string& bus, unsigned version = 4, bool to_switch = false) {
  gpucmp::nvlink_link l;
  l.version = version;
  l.to_switch = to_switch;
  l.remote_bus_id = gpucmp::normal_bus_id(bus);
  return l;
}

}  // namespace

TEST_CASE("CUDA's and NVML's bus ids read as one", "[unit][multigpu][topology]") {
  CHECK(gpucmp::normal_bus_id("0000:3b:00.0") == "0000:3b:00.0");
  CHECK(gpucmp::normal_bus_id("00000000:3B:00.0") == "0000:3b:00.0");  // NVML: 8-digit domain, upper case
  CHECK(gpucmp::normal_bus_id("0001:c1:1f.7") == "0001:c1:1f.7");
  CHECK(gpucmp::normal_bus_id("GPU-1234").empty());
  CHECK(gpucmp::normal_bus_id("0000:3b:00.0x").empty());
  CHECK(gpucmp::normal_bus_id("").empty());
}

TEST_CASE("NVLinks between two GPUs: direct links counted, an NVSwitch fabric at the fewer links, else none",
          "[unit][multigpu][topology]") {
  gpucmp::gpu_links a, b, c;
  a.bus_id = gpucmp::normal_bus_id("0000:18:00.0");
  b.bus_id = gpucmp::normal_bus_id("0000:2a:00.0");
  c.bus_id = gpucmp::normal_bus_id("0000:3a:00.0");
  // A100-style bridge: four NVLink 3 links from a to b, and one from a to c.
  for (int i = 0; i < 4; ++i) a.nvlinks.push_back(link_to("00000000:2A:00.0", 3));
  a.nvlinks.push_back(link_to("00000000:3A:00.0", 3));
  const gpucmp::pair_link ab = gpucmp::nvlink_between(a, b);
  CHECK(ab.nvlinks == 4);
  CHECK(ab.version == 3);
  CHECK_FALSE(ab.through_switch);
  CHECK(ab.text() == "NV4 (NVLink 3)");
  CHECK(gpucmp::nvlink_between(a, c).nvlinks == 1);
  CHECK(gpucmp::nvlink_between(b, c).nvlinks == 0);  // no link and no switch
  CHECK(gpucmp::nvlink_between(b, c).text() == "unknown");
  // HGX H200: 18 NVLink 4 links from each GPU into NVSwitches; one GPU with 2 links down.
  gpucmp::gpu_links h0, h1;
  h0.bus_id = gpucmp::normal_bus_id("0000:18:00.0");
  h1.bus_id = gpucmp::normal_bus_id("0000:2a:00.0");
  for (int i = 0; i < 18; ++i) h0.nvlinks.push_back(link_to("00000000:05:00.0", 4, true));
  for (int i = 0; i < 16; ++i) h1.nvlinks.push_back(link_to("00000000:06:00.0", 4, true));
  const gpucmp::pair_link fabric = gpucmp::nvlink_between(h0, h1);
  CHECK(fabric.nvlinks == 16);
  CHECK(fabric.through_switch);
  CHECK(fabric.text() == "NV16 (NVLink 4, through NVSwitch)");
  CHECK(gpucmp::nvlink_between(h1, h0).nvlinks == 16);  // symmetric
  CHECK(gpucmp::nvlink_between(h0, b).nvlinks == 0);    // only one side on the fabric
}

TEST_CASE("NVML's topology levels read as nvidia-smi topo's PCIe paths", "[unit][multigpu][topology]") {
  CHECK(gpucmp::pcie_path_of(10) == gpucmp::pcie_path::single_switch);
  CHECK(gpucmp::pcie_path_of(20) == gpucmp::pcie_path::multiple_switches);
  CHECK(gpucmp::pcie_path_of(30) == gpucmp::pcie_path::host_bridge);
  CHECK(gpucmp::pcie_path_of(40) == gpucmp::pcie_path::numa_node);
  CHECK(gpucmp::pcie_path_of(50) == gpucmp::pcie_path::system);
  CHECK(gpucmp::pcie_path_of(0) == gpucmp::pcie_path::board);
  CHECK(gpucmp::pcie_path_of(7) == gpucmp::pcie_path::unknown);
  gpucmp::pair_link pcie;
  pcie.pcie = gpucmp::pcie_path::system;
  CHECK(pcie.text() == "PCIe SYS (across CPUs)");
}

TEST_CASE("without NVML the topology is unsupported, by name", "[unit][multigpu][topology]") {
  gpucmp::nvml_library missing("libgpucmp-no-such-nvml.so");
  gpucmp::device_info d;
  d.pci_bus_id = "0000:18:00.0";
  CHECK_THROWS_WITH(gpucmp::read_gpu_topology({d}, missing), GPUCMP_CONTAINS("NVML not available"));
}
