// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Inference convolution layers in every precision a network can run them in, shape by shape:
// ResNet-50 v1.5's 23 distinct convolutions at batch 32 and 256 as the layer a network runs
// (models/conv_layer.cuh: conv + bias + ReLU; FP16 and BF16 through models/fused_conv.cuh,
// FP8 E4M3 and INT8 through models/quantized_conv.cuh with per-channel scales), each searched
// and verified against its FP64 reference before it is timed, so a row's ratio to the FP16
// row of its shape is what quantizing that layer buys. Names:
//   conv_layer/<dtype>_nhwc/<shape>/bias+relu
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/models/conv_layer.cuh>
#include <gpucmp/ops/workload_shapes.hpp>

#include <cudnn.h>

#include <cstdint>

namespace {

const bool registered = [] {
  gpucmp_bench::add_version_context("cudnn_version", cudnnGetVersion());
  using gpucmp::numerics;
  for (std::int64_t batch : {32, 256}) {
    for (numerics t : {numerics::fp16, numerics::bf16, numerics::fp8_e4m3, numerics::int8}) {
      for (const gpucmp::conv_problem& p : gpucmp::resnet50_conv_shapes(batch, t, gpucmp::conv_layout::nhwc)) {
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
