// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A probe for the training issue's next lever (docs/training.md, "Not yet"): the batch norm
// backward, a third of the AMP FP16 step, fused into the data gradient that feeds it, as
// cuDNN's DgradDreluBNBwdWeight and dBNApply patterns do it. For a convolution whose input is
// ReLU(batch norm(x)) (x: the previous convolution's output, C channels), the backward of
// that batch norm and ReLU today is the data gradient dz, written, then batch norm backward
// reading dz and x twice (sums, then dx). Fused:
//   pass 1  dgrad(dy, w) -> dz (never stored) -> ReLU backward against
//           ((x - mean) * invstd) * scale + bias, recomputed -> dy_bn (stored) -> the batch norm's
//           weight backward: dscale, dbias and per channel A, B, C with dx = A dy_bn + B x + C
//   pass 2  dx = A dy_bn + B x + C (a pointwise graph)
// Per ResNet-50 forward shape past the stem it builds and plans both (heuristic mode A, then
// the fallback list), times them and the plain data gradient in graph mode on the measurement
// engine, and checks dy_bn, dscale, dbias and dx against references built from the plain data
// gradient (FP64 per-channel sums; dx from the textbook formula in FP32). One row per shape:
//   shape | dgrad us | fused dgrad+drelu+dBN us | dx apply us | engines | check
// The step's own batch norm backward per layer (training --layers_out) is what it competes
// with. Nothing here is used by the library yet.
//   conv_backward_probe [--batch=256] [--plans=4]
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

// uids: dy 1, w 2, dz (plain) 3, x 4, mean 5, invstd 6, scale 7, bias 8, dy_bn 9, dscale 10,
// dbias 11, A 12, B 13, C 14, dx 15; the virtual tensors 101 and up.
enum : std::int64_t {
  dy_uid = 1, w_uid, dz_uid, x_uid, mean_uid, invstd_uid, scale_uid, bias_uid, dy_bn_uid, dscale_uid, dbias_uid, a_uid, b_uid, c_uid,
  dx_uid
};

backend_descriptor relu_backward() {
  backend_descriptor d(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_RELU_BWD;
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  d.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  d.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  d.finalize("ReLU backward");
  return d;
}

struct tensor_shapes {
  std::vector<std::int64_t> x_dims, x_strides, y_dims, y_strides, channel_dims, channel_strides;
};

tensor_shapes shapes_of(const gpucmp::conv_problem& p) {
  return {{p.n, p.c, p.h, p.w}, nhwc_strides(p.c, p.h, p.w), {p.n, p.k, p.p(), p.q()}, nhwc_strides(p.k, p.p(), p.q()),
          {1, p.c, 1, 1}, {p.c, 1, p.c, p.c}};
}

// The data gradient dgrad(dy, w) -> dz: stored (uid 3) when `dz_out` is null, else into the
// virtual tensor *dz_out.
const backend_descriptor& add_dgrad(graph_plans& g, const gpucmp::conv_problem& p, const tensor_shapes& t,
                                    std::vector<cudnnBackendDescriptor_t>& ops, bool virtual_dz) {
  const auto& dy = g.keep(make_backend_tensor(dy_uid, CUDNN_DATA_HALF, t.y_dims, t.y_strides));
  const auto& w = g.keep(make_backend_tensor(w_uid, CUDNN_DATA_HALF, {p.k, p.c, p.r, p.s}, nhwc_strides(p.c, p.r, p.s)));
  const auto& dz = virtual_dz ? g.keep(make_backend_tensor(101, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true))
                              : g.keep(make_backend_tensor(dz_uid, CUDNN_DATA_HALF, t.x_dims, t.x_strides));
  const auto& conv = g.keep(gpucmp::detail::make_backend_convolution(p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1));
  const float alpha = 1.0f, beta = 0.0f;
  auto& op = g.keep(backend_descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR));
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, dz);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, dy);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  op.finalize("data-gradient operation");
  ops.push_back(op.get());
  return dz;
}

std::unique_ptr<graph_plans> build_dgrad(cudnnHandle_t handle, const gpucmp::conv_problem& p, std::size_t cap) {
  auto g = std::make_unique<graph_plans>();
  std::vector<cudnnBackendDescriptor_t> ops;
  add_dgrad(*g, p, shapes_of(p), ops, false);
  gpucmp::probe::finish(*g, handle, ops, cap);
  return g;
}

// Pass 1: dgrad -> ReLU backward against the recomputed batch norm output -> dy_bn -> the
// batch norm's weight backward.
std::unique_ptr<graph_plans> build_fused(cudnnHandle_t handle, const gpucmp::conv_problem& p, std::size_t cap) {
  auto g = std::make_unique<graph_plans>();
  const tensor_shapes t = shapes_of(p);
  std::vector<cudnnBackendDescriptor_t> ops;
  const auto& dz = add_dgrad(*g, p, t, ops, true);
  const auto channel = [&](std::int64_t uid) -> const backend_descriptor& {
    return g->keep(make_backend_tensor(uid, CUDNN_DATA_FLOAT, t.channel_dims, t.channel_strides));
  };
  const auto& x = g->keep(make_backend_tensor(x_uid, CUDNN_DATA_HALF, t.x_dims, t.x_strides));
  const auto& mean = channel(mean_uid);
  const auto& invstd = channel(invstd_uid);
  const auto& scale = channel(scale_uid);
  const auto& bias = channel(bias_uid);
  const auto& centred = g->keep(make_backend_tensor(102, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& normalised = g->keep(make_backend_tensor(103, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& scaled = g->keep(make_backend_tensor(104, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& bn_out = g->keep(make_backend_tensor(105, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& sub = g->keep(pointwise(CUDNN_POINTWISE_SUB));
  const auto& mul = g->keep(pointwise(CUDNN_POINTWISE_MUL));
  const auto& add = g->keep(pointwise(CUDNN_POINTWISE_ADD));
  ops.push_back(g->keep(pointwise_operation(sub, x, &mean, centred)).get());
  ops.push_back(g->keep(pointwise_operation(mul, centred, &invstd, normalised)).get());
  ops.push_back(g->keep(pointwise_operation(mul, normalised, &scale, scaled)).get());
  ops.push_back(g->keep(pointwise_operation(add, scaled, &bias, bn_out)).get());
  const auto& dy_bn = g->keep(make_backend_tensor(dy_bn_uid, CUDNN_DATA_HALF, t.x_dims, t.x_strides));
  const auto& drelu_mode = g->keep(relu_backward());
  auto& drelu = g->keep(backend_descriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  drelu.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, drelu_mode);
  drelu.set(CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, dz);
  drelu.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, bn_out);
  drelu.set(CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, dy_bn);
  drelu.finalize("ReLU backward operation");
  ops.push_back(drelu.get());
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  auto& weights = g->keep(backend_descriptor(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR));
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, x);
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, dy_bn);
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, mean);
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, invstd);
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, scale);
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, channel(dscale_uid));
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, channel(dbias_uid));
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, channel(a_uid));
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, channel(b_uid));
  weights.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, channel(c_uid));
  weights.finalize("batch norm weight-backward operation");
  ops.push_back(weights.get());
  gpucmp::probe::finish(*g, handle, ops, cap);
  return g;
}

// Pass 2: dx = A dy_bn + B x + C.
std::unique_ptr<graph_plans> build_apply(cudnnHandle_t handle, const gpucmp::conv_problem& p, std::size_t cap) {
  auto g = std::make_unique<graph_plans>();
  const tensor_shapes t = shapes_of(p);
  std::vector<cudnnBackendDescriptor_t> ops;
  const auto channel = [&](std::int64_t uid) -> const backend_descriptor& {
    return g->keep(make_backend_tensor(uid, CUDNN_DATA_FLOAT, t.channel_dims, t.channel_strides));
  };
  const auto& dy_bn = g->keep(make_backend_tensor(dy_bn_uid, CUDNN_DATA_HALF, t.x_dims, t.x_strides));
  const auto& x = g->keep(make_backend_tensor(x_uid, CUDNN_DATA_HALF, t.x_dims, t.x_strides));
  const auto& a = channel(a_uid);
  const auto& b = channel(b_uid);
  const auto& c = channel(c_uid);
  const auto& a_dy = g->keep(make_backend_tensor(106, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& b_x = g->keep(make_backend_tensor(107, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& both = g->keep(make_backend_tensor(108, CUDNN_DATA_FLOAT, t.x_dims, t.x_strides, true));
  const auto& dx = g->keep(make_backend_tensor(dx_uid, CUDNN_DATA_HALF, t.x_dims, t.x_strides));
  const auto& mul = g->keep(pointwise(CUDNN_POINTWISE_MUL));
  const auto& add = g->keep(pointwise(CUDNN_POINTWISE_ADD));
  ops.push_back(g->keep(pointwise_operation(mul, dy_bn, &a, a_dy)).get());
  ops.push_back(g->keep(pointwise_operation(mul, x, &b, b_x)).get());
  ops.push_back(g->keep(pointwise_operation(add, a_dy, &b_x, both)).get());
  ops.push_back(g->keep(pointwise_operation(add, both, &c, dx)).get());
  gpucmp::probe::finish(*g, handle, ops, cap);
  return g;
}

// The references from the plain dgrad's dz: per channel, FP64 sums of dy_bn and of
// dy_bn * x_hat, with dy_bn = dz where the batch norm's output is positive, else 0. One block
// of 256 per channel.
__global__ void reference_sums(const __half* dz, const __half* x, const float* mean, const float* invstd, const float* scale,
                               const float* bias, std::int64_t rows, std::int64_t channels, double* sum_dy, double* sum_dy_xhat) {
  const std::int64_t c = blockIdx.x;
  double s = 0, q = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const std::int64_t i = r * channels + c;
    const float x_hat = (__half2float(x[i]) - mean[c]) * invstd[c];
    const double g = x_hat * scale[c] + bias[c] > 0.0f ? double(__half2float(dz[i])) : 0.0;
    s += g;
    q += g * x_hat;
  }
  gpucmp::probe::block_sum_pair(s, q);
  if (threadIdx.x == 0) {
    sum_dy[c] = s;
    sum_dy_xhat[c] = q;
  }
}

// dy_bn and dx from the textbook formula: dx = scale * invstd * (dy_bn - dbias / M - x_hat * dscale / M).
__global__ void reference_gradients(const __half* dz, const __half* x, const float* mean, const float* invstd, const float* scale,
                                    const float* bias, const double* sum_dy, const double* sum_dy_xhat, std::int64_t count,
                                    std::int64_t channels, double rows, float* dy_bn, float* dx) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t c = i % channels;
    const float x_hat = (__half2float(x[i]) - mean[c]) * invstd[c];
    const float g = x_hat * scale[c] + bias[c] > 0.0f ? __half2float(dz[i]) : 0.0f;
    dy_bn[i] = g;
    dx[i] = scale[c] * invstd[c] * (g - float(sum_dy[c] / rows) - x_hat * float(sum_dy_xhat[c] / rows));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const gpucmp::probe::arguments args = gpucmp::probe::parse_arguments(argc, argv, "conv_backward_probe");
  if (!args.ok) return 2;
  const std::size_t cap = args.plans;
  try {
    const gpucmp::probe::cudnn_handle handle = gpucmp::probe::make_handle();
    std::printf("| shape | dgrad us | fused dgrad+drelu+dBN us | dx apply us | engines | check |\n|---|---|---|---|---|---|\n");
    for (const gpucmp::conv_problem& p : gpucmp::probe::resnet50_shapes(args.batch)) {
      const cudaStream_t stream = gpucmp::shared_engine().stream();
      const std::size_t xs = std::size_t(p.x_elements()), ws = std::size_t(p.w_elements()), ys = std::size_t(p.y_elements());
      const std::size_t cs = std::size_t(p.c);
      gpucmp::device_buffer<__half> dy(ys), w(ws), dz(xs), x(xs), dy_bn(xs), dx(xs);
      gpucmp::device_buffer<float> mean(cs), invstd(cs), scale(cs), bias(cs), dscale(cs), dbias(cs), a(cs), b(cs), c(cs), dy_bn_ref(xs),
          dx_ref(xs);
      gpucmp::fill_uniform(dy.data(), ys, 1, -1, 1, stream);
      gpucmp::fill_uniform(w.data(), ws, 2, -0.2, 0.2, stream);
      gpucmp::fill_uniform(x.data(), xs, 3, -1, 1, stream);
      gpucmp::fill_uniform(mean.data(), cs, 4, -0.1, 0.1, stream);
      gpucmp::fill_uniform(invstd.data(), cs, 5, 0.5, 2.0, stream);
      gpucmp::fill_uniform(scale.data(), cs, 6, 0.5, 1.5, stream);
      gpucmp::fill_uniform(bias.data(), cs, 7, -0.5, 0.5, stream);  // ReLU zeroes some of each channel, not all
      gpucmp::device_buffer<unsigned char> workspace(256, gpucmp::initial_fill::uninitialized());

      auto plain = build_dgrad(handle.get(), p, cap);
      const bindings plain_data{{dy.data(), w.data(), dz.data()}, {dy_uid, w_uid, dz_uid}};
      const auto t_plain = gpucmp::probe::time_plans(handle.get(), *plain, plain_data, workspace);
      std::unique_ptr<graph_plans> fused, apply;
      std::string why;
      try {
        fused = build_fused(handle.get(), p, cap);
        if (fused->plans.empty()) why = "fused: no plan";
      } catch (const gpucmp::error& e) {
        why = std::string("fused: ") + e.what();
      }
      try {
        apply = build_apply(handle.get(), p, cap);
        if (apply->plans.empty()) why += std::string(why.empty() ? "" : "; ") + "apply: no plan";
      } catch (const gpucmp::error& e) {
        why += std::string(why.empty() ? "" : "; ") + "apply: " + e.what();
      }
      const bindings fused_data{{dy.data(), w.data(), x.data(), mean.data(), invstd.data(), scale.data(), bias.data(), dy_bn.data(),
                                 dscale.data(), dbias.data(), a.data(), b.data(), c.data()},
                                {dy_uid, w_uid, x_uid, mean_uid, invstd_uid, scale_uid, bias_uid, dy_bn_uid, dscale_uid, dbias_uid,
                                 a_uid, b_uid, c_uid}};
      const bindings apply_data{{dy_bn.data(), x.data(), a.data(), b.data(), c.data(), dx.data()},
                                {dy_bn_uid, x_uid, a_uid, b_uid, c_uid, dx_uid}};
      gpucmp::probe::timed t_fused, t_apply;
      if (fused && !fused->plans.empty()) t_fused = gpucmp::probe::time_plans(handle.get(), *fused, fused_data, workspace);
      if (apply && !apply->plans.empty()) t_apply = gpucmp::probe::time_plans(handle.get(), *apply, apply_data, workspace);

      std::string check = why.empty() ? "not run" : why;
      if (std::isfinite(t_plain.seconds) && std::isfinite(t_fused.seconds) && std::isfinite(t_apply.seconds)) {
        gpucmp::probe::run_plan(handle.get(), *plain, t_plain.index, plain_data, workspace, stream);
        gpucmp::probe::run_plan(handle.get(), *fused, t_fused.index, fused_data, workspace, stream);
        gpucmp::probe::run_plan(handle.get(), *apply, t_apply.index, apply_data, workspace, stream);
        const std::int64_t rows = p.n * p.h * p.w;
        gpucmp::device_buffer<double> sum_dy(cs), sum_dy_xhat(cs);
        reference_sums<<<unsigned(p.c), 256, 0, stream>>>(dz.data(), x.data(), mean.data(), invstd.data(), scale.data(), bias.data(),
                                                         rows, p.c, sum_dy.data(), sum_dy_xhat.data());
        GPUCMP_CUDA_CHECK_LAST("reference_sums");
        reference_gradients<<<4096, 256, 0, stream>>>(dz.data(), x.data(), mean.data(), invstd.data(), scale.data(), bias.data(),
                                                      sum_dy.data(), sum_dy_xhat.data(), std::int64_t(xs), p.c, double(rows),
                                                      dy_bn_ref.data(), dx_ref.data());
        GPUCMP_CUDA_CHECK_LAST("reference_gradients");
        const double dy_bn_error = gpucmp::probe::relative_difference(dy_bn.data(), dy_bn_ref.data(), xs, stream);
        const double dx_error = gpucmp::probe::relative_difference(dx.data(), dx_ref.data(), xs, stream);
        // dbias = sum dy_bn, dscale = sum dy_bn x_hat: relative to the largest reference sum.
        const auto hs = dbias.to_host(), hq = dscale.to_host();
        const auto rs = sum_dy.to_host(), rq = sum_dy_xhat.to_host();
        double sum_error = 0, sum_scale = 0;
        for (std::size_t k = 0; k < cs; ++k) {
          const double e = std::max(std::fabs(hs[k] - rs[k]), std::fabs(hq[k] - rq[k]));
          sum_error = std::isnan(e) || e > sum_error ? e : sum_error;
          sum_scale = std::max({sum_scale, std::fabs(rs[k]), std::fabs(rq[k])});
        }
        char buf[220];
        std::snprintf(buf, sizeof buf, "dy_bn %.2e, dx %.2e of their max |value|; dscale and dbias %.2e of the largest sum",
                      dy_bn_error, dx_error, sum_error / (sum_scale + 1e-30));
        check = buf;
      }
      std::printf("| %s | %.2f | %.2f | %.2f | fused %s; apply %s | %s |\n", p.shape_name().c_str(), t_plain.seconds * 1e6,
                  t_fused.seconds * 1e6, t_apply.seconds * 1e6, t_fused.engines.c_str(), t_apply.engines.c_str(), check.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_backward_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
