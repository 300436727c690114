// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 8: your own CNN as a benchmark, in a few lines. Describe the layers (batch norm
// folded into each convolution's bias), give weights (random here; set layer(name).weight and
// .bias to load yours), and register it like any kernel: gpucmp builds it for the batch and
// precision, searches and verifies every layer, then times the forward pass.
//   08_custom_cnn --benchmark_filter=graph
#include <gpucmp/bench.hpp>
#include <gpucmp/models/network.cuh>

namespace {

// A small residual CNN for 64 x 64 images and 100 classes.
gpucmp::network_definition my_cnn() {
  gpucmp::network_definition def("my_cnn", {3, 64, 64});
  // conv_spec: out_channels, kernel, stride, pad, relu
  auto x = def.conv(def.input(), {64, 3, 2, 1, true});
  for (int block = 0; block < 3; ++block) {
    auto y = def.conv(x, {64, 3, 1, 1, true});
    x = def.conv(y, {64, 3, 1, 1, true}, "block" + std::to_string(block), x);  // + shortcut, then ReLU
  }
  x = def.max_pool(x, 2, 2);
  x = def.linear(def.global_average_pool(x), 100);
  def.init_random(42);
  return def;
}

void my_cnn_batch_128(gpucmp::state& st) {
  static const gpucmp::network_definition def = my_cnn();
  gpucmp::network_options options;
  options.batch = 128;
  options.dtype = gpucmp::numerics::fp16;
  gpucmp::network net(def, options, st.stream());  // searches and verifies every layer
  st.set_work(net.work());  // FLOPs and images per forward pass
  st.run(net);
}

}  // namespace

GPUCMP_BENCHMARK(my_cnn_batch_128, gpucmp::mode::graph, gpucmp::mode::hot);
GPUCMP_BENCHMARK_MAIN()
