// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A probe for the training issue's next lever (docs/training.md, "Not yet"): can a batch
// norm's apply pass (z = ReLU(s * x + b), per channel s and b) move into the next
// convolution's prologue, so that z is never written and read? cuDNN documents the patterns
// (its ConvBNfprop and ConvBNwgrad engines, full pattern only on sm_90): forward,
// scale -> bias -> ReLU -> conv -> gen-stats; weight gradient, scale -> bias -> ReLU -> wgrad
// (z recomputed from x, since z was never stored). Per ResNet-50 forward shape past the stem
// it builds, plans (heuristic mode A, then the fallback list; runtime-compiled engines compile
// here) and times in graph mode on the measurement engine:
//   fprop   conv + gen-stats on a stored z (what the training step runs today), and the
//           prologue graph on x;
//   apply   the pass the prologue saves: z = ReLU(s * x + b) over the whole tensor (a plain
//           kernel here; the step's own is batch_norm_training's);
//   wgrad   the weight gradient on z, and the prologue graph on x.
// Checks: the prologue graph's y against the plain pass's y on z computed by the apply
// kernel (relative to max |y|), its sums against an FP64 reduction of its own y, and its dw
// against the plain wgrad's. s and b are FP16, as the patterns require. The virtual tensors
// between the nodes are tried in FP32, then FP16 where FP32 found no engine. One row per
// shape:
//   shape | fprop us | prologue fprop us | apply us | saved us | wgrad us | prologue wgrad us | engines | check
// Nothing here is used by the library yet.
//   conv_prologue_probe [--batch=256] [--plans=4]
#include "backend_probe.cuh"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_backend.hpp>
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
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using gpucmp::detail::backend_descriptor;
using gpucmp::detail::make_backend_tensor;
using gpucmp::probe::bindings;
using gpucmp::probe::graph_plans;
using gpucmp::probe::nhwc_strides;
using gpucmp::probe::pointwise;
using gpucmp::probe::pointwise_operation;

// uids: x 1, w / dw 2, y / dy 3, sum 4, squares 5, s 6, b 7; the virtual tensors 101-103.
enum : std::int64_t { x_uid = 1, w_uid = 2, y_uid = 3, sum_uid = 4, squares_uid = 5, s_uid = 6, b_uid = 7 };

// z = ReLU(s * x + b) per channel of an NHWC tensor, in FP32, rounded to FP16 once.
__global__ void apply_scale_bias_relu(const __half* x, const __half* s, const __half* b, __half* z, std::int64_t count,
                                      std::int64_t channels) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t c = i % channels;
    const float v = __half2float(s[c]) * __half2float(x[i]) + __half2float(b[c]);
    z[i] = __float2half_rn(v > 0.0f ? v : 0.0f);
  }
}

enum class pass { fprop, wgrad };

// The graph of one pass: with `prologue`, x -> scale -> bias -> ReLU -> (virtual z, of type
// `between`) feeds the convolution; without, the stored z (uid 1) does. fprop: conv(z, w) -> y
// and gen-stats(y) -> sum, squares; wgrad: wgrad(z, dy) -> dw.
std::unique_ptr<graph_plans> build(cudnnHandle_t handle, const gpucmp::conv_problem& p, pass which, bool prologue,
                                   cudnnDataType_t between, std::size_t cap) {
  auto g = std::make_unique<graph_plans>();
  const std::vector<std::int64_t> x_dims{p.n, p.c, p.h, p.w}, x_strides = nhwc_strides(p.c, p.h, p.w);
  const std::vector<std::int64_t> channel_dims{1, p.c, 1, 1}, channel_strides{p.c, 1, p.c, p.c};
  std::vector<cudnnBackendDescriptor_t> ops;
  const backend_descriptor* z = &g->keep(make_backend_tensor(x_uid, CUDNN_DATA_HALF, x_dims, x_strides));
  if (prologue) {
    const auto& s = g->keep(make_backend_tensor(s_uid, CUDNN_DATA_HALF, channel_dims, channel_strides));
    const auto& b = g->keep(make_backend_tensor(b_uid, CUDNN_DATA_HALF, channel_dims, channel_strides));
    const auto& scaled = g->keep(make_backend_tensor(101, between, x_dims, x_strides, true));
    const auto& biased = g->keep(make_backend_tensor(102, between, x_dims, x_strides, true));
    const auto& activated = g->keep(make_backend_tensor(103, between, x_dims, x_strides, true));
    const auto& mul = g->keep(pointwise(CUDNN_POINTWISE_MUL));
    const auto& add = g->keep(pointwise(CUDNN_POINTWISE_ADD));
    const auto& relu = g->keep(pointwise(CUDNN_POINTWISE_RELU_FWD));
    ops.push_back(g->keep(pointwise_operation(mul, *z, &s, scaled)).get());
    ops.push_back(g->keep(pointwise_operation(add, scaled, &b, biased)).get());
    ops.push_back(g->keep(pointwise_operation(relu, biased, nullptr, activated)).get());
    z = &activated;
  }
  const auto& w = g->keep(make_backend_tensor(w_uid, CUDNN_DATA_HALF, {p.k, p.c, p.r, p.s}, nhwc_strides(p.c, p.r, p.s)));
  const auto& y = g->keep(make_backend_tensor(y_uid, CUDNN_DATA_HALF, {p.n, p.k, p.p(), p.q()}, nhwc_strides(p.k, p.p(), p.q())));
  const auto& conv = g->keep(gpucmp::detail::make_backend_convolution(p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1));
  const float alpha = 1.0f, beta = 0.0f;
  if (which == pass::fprop) {
    auto& op = g->keep(backend_descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *z);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    op.finalize("convolution operation");
    ops.push_back(op.get());
    gpucmp::probe::add_genstats(*g, y, p.k, sum_uid, squares_uid, ops);
  } else {
    auto& op = g->keep(backend_descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR));
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, *z);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, w);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, y);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    op.finalize("weight-gradient operation");
    ops.push_back(op.get());
  }
  gpucmp::probe::finish(*g, handle, ops, cap);
  return g;
}

// The prologue graph with FP32 between its nodes, else with FP16; null and `why` where
// neither finalizes or gets a plan.
std::unique_ptr<graph_plans> build_prologue(cudnnHandle_t handle, const gpucmp::conv_problem& p, pass which, std::size_t cap,
                                            std::string& between, std::string& why) {
  for (const cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF}) {
    try {
      auto g = build(handle, p, which, true, type, cap);
      if (!g->plans.empty()) {
        between = type == CUDNN_DATA_FLOAT ? "fp32" : "fp16";
        return g;
      }
      why += std::string(why.empty() ? "" : "; ") + (type == CUDNN_DATA_FLOAT ? "fp32" : "fp16") + ": no plan";
    } catch (const gpucmp::error& e) {
      why += std::string(why.empty() ? "" : "; ") + (type == CUDNN_DATA_FLOAT ? "fp32: " : "fp16: ") + e.what();
    }
  }
  return nullptr;
}

// max |a - b| / max |b| over two FP16 tensors.
double relative_difference(const gpucmp::device_buffer<__half>& a, const gpucmp::device_buffer<__half>& b) {
  const auto ha = a.to_host(), hb = b.to_host();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ha.size(); ++i) {
    const double va = __half2float(ha[i]), vb = __half2float(hb[i]);
    diff = std::isnan(va) || std::fabs(va - vb) > diff ? std::fabs(va - vb) : diff;
    scale = std::max(scale, std::fabs(vb));
  }
  return diff / (scale + 1e-30);
}

}  // namespace

int main(int argc, char** argv) {
  const gpucmp::probe::arguments args = gpucmp::probe::parse_arguments(argc, argv, "conv_prologue_probe");
  if (!args.ok) return 2;
  const std::size_t cap = args.plans;
  try {
    const gpucmp::probe::cudnn_handle handle = gpucmp::probe::make_handle();
    std::printf("| shape | fprop us | prologue fprop us | apply us | saved us | wgrad us | prologue wgrad us | engines | check |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    double total_saved_fprop = 0, total_wgrad_cost = 0;
    for (const gpucmp::conv_problem& p : gpucmp::probe::resnet50_shapes(args.batch)) {
      const cudaStream_t stream = gpucmp::shared_engine().stream();
      const std::size_t xs = std::size_t(p.x_elements()), ws = std::size_t(p.w_elements()), ys = std::size_t(p.y_elements());
      gpucmp::device_buffer<__half> x(xs), z(xs), w(ws), s(std::size_t(p.c)), b(std::size_t(p.c)), y_plain(ys), y(ys), dy(ys),
          dw_plain(ws), dw(ws);
      gpucmp::fill_uniform(x.data(), xs, 1, -1, 1, stream);
      gpucmp::fill_uniform(w.data(), ws, 2, -0.2, 0.2, stream);
      gpucmp::fill_uniform(s.data(), s.size(), 3, 0.5, 1.5, stream);
      gpucmp::fill_uniform(b.data(), b.size(), 4, -0.5, 0.5, stream);  // ReLU zeroes some of each channel, not all
      gpucmp::fill_uniform(dy.data(), ys, 5, -1, 1, stream);
      gpucmp::device_buffer<float> sum(std::size_t(p.k)), squares(std::size_t(p.k));
      gpucmp::device_buffer<unsigned char> workspace(256, gpucmp::initial_fill::uninitialized());
      const unsigned blocks = unsigned(std::min<std::size_t>((xs + 255) / 256, 4096));
      const auto apply = [&](cudaStream_t st) {
        apply_scale_bias_relu<<<blocks, 256, 0, st>>>(x.data(), s.data(), b.data(), z.data(), std::int64_t(xs), p.c);
        GPUCMP_CUDA_CHECK_LAST("apply_scale_bias_relu");
      };
      gpucmp::measure_options o;
      o.min_samples = 5;
      o.max_samples = 20;
      const gpucmp::measurement m_apply = gpucmp::shared_engine().try_measure(apply, gpucmp::mode::graph, o);
      apply(stream);  // z for the plain passes and the checks

      auto fprop = build(handle.get(), p, pass::fprop, false, CUDNN_DATA_FLOAT, cap);
      auto wgrad = build(handle.get(), p, pass::wgrad, false, CUDNN_DATA_FLOAT, cap);
      const bindings fprop_data{{z.data(), w.data(), y_plain.data(), sum.data(), squares.data()},
                                {x_uid, w_uid, y_uid, sum_uid, squares_uid}};
      const bindings wgrad_data{{z.data(), dw_plain.data(), dy.data()}, {x_uid, w_uid, y_uid}};
      const auto t_fprop = gpucmp::probe::time_plans(handle.get(), *fprop, fprop_data, workspace);
      const auto t_wgrad = gpucmp::probe::time_plans(handle.get(), *wgrad, wgrad_data, workspace);

      std::string fprop_between, fprop_why, wgrad_between, wgrad_why;
      auto fused_fprop = build_prologue(handle.get(), p, pass::fprop, cap, fprop_between, fprop_why);
      auto fused_wgrad = build_prologue(handle.get(), p, pass::wgrad, cap, wgrad_between, wgrad_why);
      const bindings fused_fprop_data{{x.data(), w.data(), y.data(), sum.data(), squares.data(), s.data(), b.data()},
                                      {x_uid, w_uid, y_uid, sum_uid, squares_uid, s_uid, b_uid}};
      const bindings fused_wgrad_data{{x.data(), dw.data(), dy.data(), s.data(), b.data()}, {x_uid, w_uid, y_uid, s_uid, b_uid}};
      gpucmp::probe::timed t_fused_fprop, t_fused_wgrad;
      if (fused_fprop) t_fused_fprop = gpucmp::probe::time_plans(handle.get(), *fused_fprop, fused_fprop_data, workspace);
      if (fused_wgrad) t_fused_wgrad = gpucmp::probe::time_plans(handle.get(), *fused_wgrad, fused_wgrad_data, workspace);

      // The checks, on the fastest plan of each.
      std::string check;
      char buf[200];
      if (fused_fprop && std::isfinite(t_fused_fprop.seconds) && std::isfinite(t_fprop.seconds)) {
        gpucmp::probe::run_plan(handle.get(), *fprop, t_fprop.index, fprop_data, workspace, stream);
        gpucmp::probe::run_plan(handle.get(), *fused_fprop, t_fused_fprop.index, fused_fprop_data, workspace, stream);
        const std::int64_t rows = p.n * p.p() * p.q();
        gpucmp::device_buffer<double> s64(std::size_t(p.k)), q64(std::size_t(p.k));
        gpucmp::probe::channel_sums<<<unsigned(p.k), 256, 0, stream>>>(y.data(), rows, p.k, s64.data(), q64.data());
        GPUCMP_CUDA_CHECK_LAST("channel_sums");
        GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
        const auto fs = sum.to_host(), fq = squares.to_host();
        const auto rs = s64.to_host(), rq = q64.to_host();
        double sums_error = 0;
        for (std::size_t c = 0; c < fs.size(); ++c) {
          const double e = std::max(std::fabs(fs[c] - rs[c]) / (std::sqrt(rq[c] * double(rows)) + 1e-30),
                                    std::fabs(fq[c] - rq[c]) / (rq[c] + 1e-30));
          sums_error = std::isnan(e) || e > sums_error ? e : sums_error;
        }
        std::snprintf(buf, sizeof buf, "fprop (%s between): y %.2e of max |y|, sums %.2e", fprop_between.c_str(),
                      relative_difference(y, y_plain), sums_error);
        check += buf;
      } else {
        check += "fprop: " + (fprop_why.empty() ? std::string("not run") : fprop_why);
      }
      if (fused_wgrad && std::isfinite(t_fused_wgrad.seconds) && std::isfinite(t_wgrad.seconds)) {
        gpucmp::probe::run_plan(handle.get(), *wgrad, t_wgrad.index, wgrad_data, workspace, stream);
        gpucmp::probe::run_plan(handle.get(), *fused_wgrad, t_fused_wgrad.index, fused_wgrad_data, workspace, stream);
        GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
        std::snprintf(buf, sizeof buf, "; wgrad (%s between): dw %.2e of max |dw|", wgrad_between.c_str(),
                      relative_difference(dw, dw_plain));
        check += buf;
      } else {
        check += "; wgrad: " + (wgrad_why.empty() ? std::string("not run") : wgrad_why);
      }
      const double apply_us = m_apply.status == gpucmp::result_status::ok ? m_apply.gpu.median * 1e6 : NAN;
      const double saved = (t_fprop.seconds + m_apply.gpu.median - t_fused_fprop.seconds) * 1e6;
      if (std::isfinite(saved)) total_saved_fprop += saved;
      if (std::isfinite(t_fused_wgrad.seconds) && std::isfinite(t_wgrad.seconds)) {
        total_wgrad_cost += (t_fused_wgrad.seconds - t_wgrad.seconds) * 1e6;
      }
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | fprop %s; wgrad %s | %s |\n", p.shape_name().c_str(),
                  t_fprop.seconds * 1e6, t_fused_fprop.seconds * 1e6, apply_us, saved, t_wgrad.seconds * 1e6,
                  t_fused_wgrad.seconds * 1e6, t_fused_fprop.engines.c_str(), t_fused_wgrad.engines.c_str(), check.c_str());
      std::fflush(stdout);
    }
    std::printf("\nOver the distinct shapes (each once): the forward prologue saves %.1f us (fprop + apply - prologue fprop); "
                "the weight gradient's prologue costs %.1f us (prologue wgrad - wgrad).\n",
                total_saved_fprop, total_wgrad_cost);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_prologue_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
