// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A small CNN with every layer kind, for the model tests on the host and the GPU: stem with 3
// channels, residual block, strided conv, both poolings, global average pooling, linear,
// softmax (optional). Random parameters, seed 5.
#pragma once

#include <gpucmp/models/network_definition.hpp>

namespace gpucmp_test {

inline gpucmp::network_definition small_cnn(bool with_softmax = false) {
  gpucmp::network_definition def("small_cnn", {3, 20, 20});
  auto x = def.conv(def.input(), {16, 3, 1, 1, true}, "stem");
  x = def.max_pool(x, 3, 2, 1, "pool");
  auto y = def.conv(x, {16, 3, 1, 1, true}, "block.conv1");
  x = def.conv(y, {16, 1, 1, 0, true}, "block.conv2", x);
  x = def.conv(x, {32, 3, 2, 1, false}, "down");
  x = def.average_pool(x, 2, 1, 0, "avg");
  x = def.global_average_pool(x, "gap");
  x = def.linear(x, 10, "fc");
  if (with_softmax) def.softmax(x, "softmax");
  def.init_random(5);
  return def;
}

}  // namespace gpucmp_test
