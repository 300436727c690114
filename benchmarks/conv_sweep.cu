// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Convolution sweep: verified cuDNN convolutions (forward, backward-data, backward-filter)
// over the 23 distinct ResNet-50 v1.5 shapes at batch 32 and 256 and DeepBench's
// representative shapes, FP16/BF16/TF32/FP32, NHWC (and NCHW for FP32). Names:
// conv_<pass>/<provider>/<dtype>_<layout>/<shape>/<mode>; provider "cudnn" is the timed
// search over both cuDNN APIs' candidates (backend engine configurations and legacy
// algorithms), "cudnn_heuristic" the backend heuristic's first choice, "cudnn_backend" and
// "cudnn_legacy" the search restricted to one API (the last three for forward FP16 only).
#include "library_versions.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/workload_shapes.hpp>

#include <string>
#include <vector>

namespace {

void run_conv(gpucmp::state& st, const gpucmp::conv_problem& problem, gpucmp::conv_direction direction,
              gpucmp::algorithm_choice choice, gpucmp::conv_api api) {
  gpucmp::conv_options options;
  options.direction = direction;
  options.choice = choice;
  options.api = api;
  gpucmp::conv op(problem, options, st.stream());
  gpucmp::run_verified(st, op);  // search (unless the heuristic is asked for), verify, declare, time
}

void register_conv(const gpucmp::conv_problem& p, gpucmp::conv_direction d, gpucmp::algorithm_choice choice,
                   gpucmp::conv_api api = gpucmp::conv_api::any) {
  const std::string provider = api == gpucmp::conv_api::legacy                 ? "cudnn_legacy"
                               : api == gpucmp::conv_api::backend               ? "cudnn_backend"
                               : choice == gpucmp::algorithm_choice::search ? "cudnn"
                                                                             : "cudnn_heuristic";
  const std::string name = std::string("conv_") + gpucmp::to_string(d) + "/" + provider + "/" + gpucmp::to_string(p.dtype) +
                           "_" + gpucmp::to_string(p.layout) + "/" + p.shape_name();
  gpucmp::register_benchmark(name, [p, d, choice, api](gpucmp::state& st) { run_conv(st, p, d, choice, api); }, {gpucmp::mode::graph});
}

const bool registered = [] {
  gpucmp_bench::add_version_context("cudnn_version", cudnnGetVersion());
  using namespace gpucmp;
  const conv_direction passes[] = {conv_direction::forward, conv_direction::backward_data, conv_direction::backward_filter};
  struct variant {
    numerics dtype;
    conv_layout layout;
  };
  const variant variants[] = {{numerics::fp16, conv_layout::nhwc}, {numerics::bf16, conv_layout::nhwc},
                              {numerics::tf32, conv_layout::nhwc}, {numerics::fp32, conv_layout::nchw}};
  for (const variant& v : variants) {
    for (conv_direction d : passes) {
      std::vector<conv_problem> shapes = resnet50_conv_shapes(32, v.dtype, v.layout);
      for (const auto& p : resnet50_conv_shapes(256, v.dtype, v.layout)) shapes.push_back(p);
      for (const auto& p : deepbench_conv_shapes(v.dtype, v.layout)) shapes.push_back(p);
      for (const auto& p : shapes) {
        register_conv(p, d, algorithm_choice::search);
        if (d == conv_direction::forward && v.dtype == numerics::fp16) {
          register_conv(p, d, algorithm_choice::heuristic);
          register_conv(p, d, algorithm_choice::search, conv_api::legacy);
          register_conv(p, d, algorithm_choice::search, conv_api::backend);
        }
      }
    }
  }
  return true;
}();

}  // namespace

GPUCMP_BENCHMARK_MAIN()
