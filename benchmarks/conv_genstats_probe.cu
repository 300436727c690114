// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A probe for the training issue's next lever (docs/training.md, "Not yet"): does cuDNN run a
// forward convolution with batch norm's statistics in its epilogue (a backend graph
// conv -> gen-stats: y, and per channel sum(y) and sum(y^2) in FP32) on this GPU, for
// ResNet-50's forward shapes, and how fast against the plain convolution? Per shape it
// builds both graphs, finalizes the plans heuristic mode A and the fallback list offer
// (runtime-compiled engines compile here), times the first --plans of each in graph mode on
// the measurement engine, checks the fastest fused plan's y against the fastest plain plan's
// y and its sums against an FP64 reduction of its own y, and prints one row:
//   shape | plain us | fused us | fused / plain | engines | check
// A shape no engine fuses prints "no engine". Nothing here is used by the library yet.
//   conv_genstats_probe [--batch=256] [--plans=4]
#include "backend_probe.cuh"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_backend.hpp>
#include <gpucmp/ops/cudnn_legacy.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/workload_shapes.hpp>

#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using gpucmp::probe::bindings;
using gpucmp::probe::graph_plans;

// conv(x, w) -> y, and with `stats` gen-stats(y) -> sum, squares; uids x 1, w 2, y 3, sum 4, squares 5.
std::unique_ptr<graph_plans> build(cudnnHandle_t handle, const gpucmp::conv_problem& p, bool stats, std::size_t cap) {
  using gpucmp::detail::backend_descriptor;
  using gpucmp::probe::nhwc_strides;
  auto g = std::make_unique<graph_plans>();
  const auto& x = g->keep(gpucmp::detail::make_backend_tensor(1, CUDNN_DATA_HALF, {p.n, p.c, p.h, p.w}, nhwc_strides(p.c, p.h, p.w)));
  const auto& w = g->keep(gpucmp::detail::make_backend_tensor(2, CUDNN_DATA_HALF, {p.k, p.c, p.r, p.s}, nhwc_strides(p.c, p.r, p.s)));
  const auto& y =
      g->keep(gpucmp::detail::make_backend_tensor(3, CUDNN_DATA_HALF, {p.n, p.k, p.p(), p.q()}, nhwc_strides(p.k, p.p(), p.q())));
  const auto& conv = g->keep(gpucmp::detail::make_backend_convolution(p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1));
  const float alpha = 1.0f, beta = 0.0f;
  auto& conv_op = g->keep(backend_descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
  conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  conv_op.finalize("convolution operation");
  std::vector<cudnnBackendDescriptor_t> ops{conv_op.get()};
  if (stats) gpucmp::probe::add_genstats(*g, y, p.k, 4, 5, ops);
  gpucmp::probe::finish(*g, handle, ops, cap);
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const gpucmp::probe::arguments args = gpucmp::probe::parse_arguments(argc, argv, "conv_genstats_probe");
  if (!args.ok) return 2;
  const std::size_t cap = args.plans;
  try {
    const gpucmp::probe::cudnn_handle handle = gpucmp::probe::make_handle();
    std::printf("| shape | plain us | fused us | fused / plain | fused engines | check |\n|---|---|---|---|---|---|\n");
    for (const gpucmp::conv_problem& p : gpucmp::probe::resnet50_shapes(args.batch)) {
      const cudaStream_t stream = gpucmp::shared_engine().stream();
      gpucmp::device_buffer<__half> x(std::size_t(p.x_elements())), w(std::size_t(p.w_elements())),
          y_plain(std::size_t(p.y_elements())), y(std::size_t(p.y_elements()));
      gpucmp::fill_uniform(x.data(), x.size(), 1, -1, 1, stream);
      gpucmp::fill_uniform(w.data(), w.size(), 2, -0.2, 0.2, stream);
      gpucmp::device_buffer<float> sum(std::size_t(p.k)), squares(std::size_t(p.k));
      gpucmp::device_buffer<unsigned char> workspace(256, gpucmp::initial_fill::uninitialized());
      std::string row = "| " + p.shape_name() + " | ";
      auto plain = build(handle.get(), p, false, cap);
      const bindings plain_data{{x.data(), w.data(), y_plain.data()}, {1, 2, 3}};
      const gpucmp::probe::timed t_plain = gpucmp::probe::time_plans(handle.get(), *plain, plain_data, workspace);
      std::unique_ptr<graph_plans> fused;
      std::string why;
      try {
        fused = build(handle.get(), p, true, cap);
      } catch (const gpucmp::error& e) {
        why = e.what();
      }
      if (!fused || fused->plans.empty()) {
        std::printf("%s%.2f | no engine | | | %s |\n", row.c_str(), t_plain.seconds * 1e6, why.c_str());
        continue;
      }
      const bindings fused_data{{x.data(), w.data(), y.data(), sum.data(), squares.data()}, {1, 2, 3, 4, 5}};
      const gpucmp::probe::timed t_fused = gpucmp::probe::time_plans(handle.get(), *fused, fused_data, workspace);
      // The check: the fastest fused plan's y against the fastest plain plan's, and its sums
      // against an FP64 reduction of its own y, once on poisoned sums (does the epilogue
      // overwrite them?) and once on zeroed ones (or must they start at zero?).
      std::string check = "not run";
      if (std::isfinite(t_fused.seconds) && std::isfinite(t_plain.seconds)) {
        gpucmp::probe::run_plan(handle.get(), *plain, t_plain.index, plain_data, workspace, stream);
        const std::int64_t rows = p.n * p.p() * p.q();
        gpucmp::device_buffer<double> s64(std::size_t(p.k)), q64(std::size_t(p.k));
        // Worst error of the sums, relative to sqrt(rows * sum y^2) and to sum y^2.
        const auto sums_error = [&](unsigned char fill_byte) {
          GPUCMP_CUDA_CHECK(cudaMemsetAsync(sum.data(), fill_byte, sum.size() * sizeof(float), stream));
          GPUCMP_CUDA_CHECK(cudaMemsetAsync(squares.data(), fill_byte, squares.size() * sizeof(float), stream));
          gpucmp::probe::run_plan(handle.get(), *fused, t_fused.index, fused_data, workspace, stream);
          gpucmp::probe::channel_sums<<<unsigned(p.k), 256, 0, stream>>>(y.data(), rows, p.k, s64.data(), q64.data());
          GPUCMP_CUDA_CHECK_LAST("channel_sums");
          GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
          const auto fs = sum.to_host(), fq = squares.to_host();
          const auto rs = s64.to_host(), rq = q64.to_host();
          double sum_err = 0, sq_err = 0;
          for (std::size_t c = 0; c < fs.size(); ++c) {
            const double a = std::fabs(fs[c] - rs[c]) / (std::sqrt(rq[c] * double(rows)) + 1e-30);
            const double b = std::fabs(fq[c] - rq[c]) / (rq[c] + 1e-30);
            sum_err = std::isnan(a) || a > sum_err ? a : sum_err;
            sq_err = std::isnan(b) || b > sq_err ? b : sq_err;
          }
          return std::make_pair(sum_err, sq_err);
        };
        const auto poisoned = sums_error(0xFF), zeroed = sums_error(0);
        const auto a = y.to_host(), b = y_plain.to_host();
        double y_diff = 0;
        for (std::size_t i = 0; i < a.size(); ++i) y_diff = std::max(y_diff, std::fabs(double(__half2float(a[i])) - double(__half2float(b[i]))));
        char buf[240];
        std::snprintf(buf, sizeof buf,
                      "max |y - plain y| %.3g; on zeroed sums: sum error %.2e of sqrt(n sum y^2), sum y^2 error %.2e; "
                      "on poisoned sums: %.2e, %.2e",
                      y_diff, zeroed.first, zeroed.second, poisoned.first, poisoned.second);
        check = buf;
      }
      std::printf("%s%.2f | %.2f | %.3f | %s | %s |\n", row.c_str(), t_plain.seconds * 1e6, t_fused.seconds * 1e6,
                  t_fused.seconds / t_plain.seconds, t_fused.engines.c_str(), check.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_genstats_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
