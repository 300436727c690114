// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A traced training step summed by part (training/step_trace.hpp): parts from the pieces'
// names, sums, shares of the step and the order, on a trace built by hand.
#include "catch.hpp"

#include <gpucmp/training/step_trace.hpp>

#include <string>

namespace {

gpucmp::layer_trace piece(const std::string& name, double busy_s) {
  gpucmp::layer_trace l;
  l.layer = name;
  l.busy_s = busy_s;
  return l;
}

}  // namespace

TEST_CASE("a piece's part is its name before the first colon and space", "[unit][training]") {
  CHECK(gpucmp::step_part_of("weight gradient: layer1.0.conv1") == "weight gradient");
  CHECK(gpucmp::step_part_of("optimizer: loss-scale check, SGD, scale update") == "optimizer");
  CHECK(gpucmp::step_part_of("a: b: c") == "a");
  CHECK(gpucmp::step_part_of("unnamed") == "unnamed");
  CHECK(gpucmp::step_part_of("time:1") == "time:1");  // a colon without a space is part of the name
}

TEST_CASE("a traced step sums its pieces by part, largest first, as shares of the step", "[unit][training]") {
  gpucmp::network_trace trace;
  trace.busy_s = 10e-3;
  trace.layers = {piece("conv forward: conv1", 1e-3),          piece("batch norm forward: conv1", 0.5e-3),
                  piece("conv forward: layer1.0.conv1", 2e-3), piece("loss: softmax cross-entropy", 0.25e-3),
                  piece("weight gradient: layer1.0.conv1", 3e-3), piece("batch norm backward: conv1", 0.5e-3),
                  piece("optimizer: SGD", 0.25e-3)};
  const auto parts = gpucmp::times_by_part(trace);
  REQUIRE(parts.size() == 6);
  CHECK(parts[0].part == "conv forward");
  CHECK(parts[0].pieces == 2);
  CHECK(parts[0].busy_s == Approx(3e-3));
  CHECK(parts[0].share == Approx(0.3));
  CHECK(parts[1].part == "weight gradient");
  CHECK(parts[1].share == Approx(0.3));
  // Equal times keep the parts' alphabetical order.
  CHECK(parts[2].part == "batch norm backward");
  CHECK(parts[3].part == "batch norm forward");
  CHECK(parts[4].part == "loss");
  CHECK(parts[5].part == "optimizer");
  double shares = 0;
  for (const auto& p : parts) shares += p.share;
  CHECK(shares == Approx(0.75));  // the pieces' medians need not add up to the median pass
}

TEST_CASE("an empty trace has no parts and a zero-time trace no shares", "[unit][training]") {
  CHECK(gpucmp::times_by_part(gpucmp::network_trace{}).empty());
  gpucmp::network_trace idle;
  idle.layers = {piece("conv forward: conv1", 0.0)};
  const auto parts = gpucmp::times_by_part(idle);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].share == 0.0);
}
