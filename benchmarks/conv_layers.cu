// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Inference convolution layers in every precision a network can run them in, shape by shape:
// ResNet-50 v1.5's 23 distinct convolutions at batch 32 and 256 as the layer a network runs
// (models/conv_layer.cuh: conv + bias + ReLU; FP16 and BF16 through models/fused_conv.cuh,
// FP8 E4M3 and INT8 through models/quantized_conv.cuh with per-channel scales), each searched
// and verified against its FP64 reference before it is timed, so a row's ratio to the FP16
// row of its shape is what quantizing that layer buys. The stem also runs as its
// space-to-depth form (models/space_to_depth.hpp: a 4x4 stride-1 convolution over 16 channels,
// the same sums), which the quantized network runs: its rows beside the stem's say what that
// form buys in each precision, FP16's included. Names:
//   conv_layer/<dtype>_nhwc/<shape>/bias+relu
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/models/conv_layer.cuh>
#include <gpucmp/models/space_to_depth.hpp>
#include <gpucmp/ops/workload_shapes.hpp>

#include <cudnn.h>

#include <cstdint>
#include <vector>

namespace {

const bool registered = [] {
  gpucmp_bench::add_version_context("cudnn_version", cudnnGetVersion());
  using gpucmp::numerics;
  for (std::int64_t batch : {32, 256}) {
    for (numerics t : {numerics::fp16, numerics::bf16, numerics::fp8_e4m3, numerics::int8}) {
      std::vector<gpucmp::conv_problem> shapes = gpucmp::resnet50_conv_shapes(batch, t, gpucmp::conv_layout::nhwc);
      for (std::size_t i = 0, n = shapes.size(); i < n; ++i) {
        if (!gpucmp::space_to_depth_conv::refusal(shapes[i]).empty()) continue;
        shapes.push_back(gpucmp::space_to_depth_conv(shapes[i]).transformed);
      }
      for (const gpucmp::conv_problem& p : shapes) {
        const gpucmp::conv_layer_options options;
        const std::string name = std::string("conv_layer/") + gpucmp::to_string(t) + "_nhwc/" + p.shape_name() + "/" +
                                 gpucmp::to_string(options.epilogue);
        gpucmp::register_benchmark(name,
                                   [p, options](gpucmp::state& st) {
                                     gpucmp::conv_layer op(p, options, st.stream());
                                     gpucmp::run_verified(st, op);
                                   },
                                   {gpucmp::mode::graph});
      }
    }
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
