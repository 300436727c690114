// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Batch norm in training mode (training/batch_norm.cuh): gpucmp's kernels against the FP64
// host reference of training/reference_layers.hpp (an independent check of the layer's own
// verify()), verify() passing in every precision, layout and epilogue, cuDNN's persistent
// NHWC kernels where cuDNN takes the shape, and CUDA-graph replay equal to eager.
#include "catch.hpp"
#include "model_test_helpers.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/training/batch_norm.cuh>
#include <gpucmp/training/reference_layers.hpp>

#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using gpucmp_test::cudnn_handle;
using gpucmp_test::make_cudnn_handle;

// Every tensor of one layer, on the device, with random x, z, dy and parameters.
struct bn_buffers {
  gpucmp::device_buffer<unsigned char> x, z, y, dy, dx, dz, workspace, reserve;
  gpucmp::device_buffer<float> gamma, beta, running_mean, running_var, saved_mean, saved_inv_std, dgamma, dbeta;

  bn_buffers(const gpucmp::batch_norm_training& bn, cudaStream_t stream)
      : x(bytes(bn), gpucmp::initial_fill::uninitialized()),
        z(bytes(bn), gpucmp::initial_fill::uninitialized()),
        y(bytes(bn), gpucmp::initial_fill::poison()),
        dy(bytes(bn), gpucmp::initial_fill::uninitialized()),
        dx(bytes(bn), gpucmp::initial_fill::poison()),
        dz(bytes(bn), gpucmp::initial_fill::poison()),
        workspace(std::max<std::size_t>(bn.workspace_bytes(), 1), gpucmp::initial_fill::uninitialized()),
        reserve(std::max<std::size_t>(bn.reserve_bytes(), 1), gpucmp::initial_fill::uninitialized()),
        gamma(channels(bn), gpucmp::initial_fill::uninitialized()),
        beta(channels(bn), gpucmp::initial_fill::uninitialized()),
        running_mean(channels(bn), gpucmp::initial_fill::uninitialized()),
        running_var(channels(bn), gpucmp::initial_fill::uninitialized()),
        saved_mean(channels(bn), gpucmp::initial_fill::poison()),
        saved_inv_std(channels(bn), gpucmp::initial_fill::poison()),
        dgamma(channels(bn), gpucmp::initial_fill::poison()),
        dbeta(channels(bn), gpucmp::initial_fill::poison()) {
    const std::size_t n = std::size_t(bn.shape().elements());
    gpucmp::visit_storage(bn.shape().dtype, [&](auto zero) {
      using T = decltype(zero);
      // An offset mean (2) so a variance computed without centring would cancel.
      gpucmp::fill_uniform(reinterpret_cast<T*>(x.data()), n, 11, 1.0, 3.0, stream);
      gpucmp::fill_uniform(reinterpret_cast<T*>(z.data()), n, 12, -1.0, 1.0, stream);
      gpucmp::fill_uniform(reinterpret_cast<T*>(dy.data()), n, 13, -1.0, 1.0, stream);
    });
    gpucmp::fill_uniform(gamma.data(), channels(bn), 14, 0.5, 1.5, stream);
    gpucmp::fill_uniform(beta.data(), channels(bn), 15, -0.5, 0.5, stream);
    gpucmp::fill_uniform(running_mean.data(), channels(bn), 16, -0.1, 0.1, stream);
    gpucmp::fill_uniform(running_var.data(), channels(bn), 17, 0.9, 1.1, stream);
    // Not REQUIRE: a Catch2 v3 assertion in this constructor sends cudafe++ (CUDA 13) into an
    // endless loop; the exception reaches Catch2 all the same.
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  static std::size_t bytes(const gpucmp::batch_norm_training& bn) {
    return std::size_t(bn.shape().elements()) * gpucmp::activation_bytes(bn.shape().dtype);
  }
  static std::size_t channels(const gpucmp::batch_norm_training& bn) { return std::size_t(bn.shape().c); }

  gpucmp::batch_norm_tensors tensors(bool residual) {
    gpucmp::batch_norm_tensors t;
    t.x = x.data();
    t.z = residual ? z.data() : nullptr;
    t.y = y.data();
    t.gamma = gamma.data();
    t.beta = beta.data();
    t.running_mean = running_mean.data();
    t.running_var = running_var.data();
    t.saved_mean = saved_mean.data();
    t.saved_inv_std = saved_inv_std.data();
    t.dy = dy.data();
    t.dx = dx.data();
    t.dz = residual ? dz.data() : nullptr;
    t.dgamma = dgamma.data();
    t.dbeta = dbeta.data();
    return t;
  }
};

const gpucmp::numerics batch_norm_dtypes[] = {gpucmp::numerics::fp32, gpucmp::numerics::fp16, gpucmp::numerics::bf16};

struct epilogue {
  bool residual, relu;
};
const epilogue all_epilogues[] = {{false, false}, {false, true}, {true, true}, {true, false}};

}  // namespace

TEST_CASE("batch norm training kernels match the FP64 host reference in both layouts", "[gpu][training][batch_norm]") {
  gpucmp::stream s;
  cudnn_handle handle = make_cudnn_handle();
  for (gpucmp::conv_layout layout : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw})
  for (epilogue e : all_epilogues) {
    gpucmp::batch_norm_shape shape{3, 5, 4, 6, gpucmp::numerics::fp32, layout, e.residual, e.relu};
    gpucmp::batch_norm_training bn(handle.get(), shape, gpucmp::batch_norm_path::gpucmp_kernels);
    INFO(bn.name());
    bn_buffers b(bn, s.get());
    auto as_floats = [&](const gpucmp::device_buffer<unsigned char>& d) {
      std::vector<float> v(d.size() / sizeof(float));
      REQUIRE(cudaMemcpy(v.data(), d.data(), v.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
      return v;
    };
    // The host reference in NCHW, from the device's values.
    auto to_reference = [&](const std::vector<float>& v) {
      gpucmp::reference::tensor t(shape.n, shape.c, shape.h, shape.w);
      for (std::int64_t n = 0; n < shape.n; ++n)
        for (std::int64_t c = 0; c < shape.c; ++c)
          for (std::int64_t h = 0; h < shape.h; ++h)
            for (std::int64_t w = 0; w < shape.w; ++w) {
              const std::int64_t i = layout == gpucmp::conv_layout::nhwc ? ((n * shape.h + h) * shape.w + w) * shape.c + c
                                                                         : ((n * shape.c + c) * shape.h + h) * shape.w + w;
              t.at(n, c, h, w) = v[std::size_t(i)];
            }
      return t;
    };
    const gpucmp::reference::tensor rx = to_reference(as_floats(b.x)), rz = to_reference(as_floats(b.z)),
                                    rdy = to_reference(as_floats(b.dy));
    const std::vector<float> g = b.gamma.to_host(), be = b.beta.to_host(), rm0 = b.running_mean.to_host(),
                             rv0 = b.running_var.to_host();
    std::vector<double> gamma(g.begin(), g.end()), beta(be.begin(), be.end()), rm(rm0.begin(), rm0.end()), rv(rv0.begin(), rv0.end());
    gpucmp::reference::batch_norm_saved saved;
    gpucmp::reference::tensor pre = gpucmp::reference::batch_norm_train_forward(rx, gamma, beta, 1e-5, 0.1, rm, rv, saved);
    if (e.residual)
      for (std::size_t i = 0; i < pre.v.size(); ++i) pre.v[i] += rz.v[i];
    const gpucmp::reference::tensor ry = e.relu ? gpucmp::reference::relu_forward(pre) : pre;
    const gpucmp::reference::tensor dpre = e.relu ? gpucmp::reference::relu_backward(rdy, pre) : rdy;
    std::vector<double> dgamma, dbeta;
    const gpucmp::reference::tensor rdx = gpucmp::reference::batch_norm_backward(dpre, rx, gamma, saved, dgamma, dbeta);

    const gpucmp::batch_norm_tensors t = b.tensors(e.residual);
    bn.forward(t, b.workspace.data(), b.reserve.data(), s.get());
    bn.backward(t, b.workspace.data(), b.reserve.data(), s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    auto close = [](double got, double want, double scale) { return std::fabs(got - want) <= 1e-5 * (std::fabs(want) + scale); };
    const gpucmp::reference::tensor y = to_reference(as_floats(b.y)), dx = to_reference(as_floats(b.dx));
    for (std::size_t i = 0; i < y.v.size(); ++i) {
      INFO("element " << i);
      CHECK(close(y.v[i], ry.v[i], 1.0));
      CHECK(close(dx.v[i], rdx.v[i], 1.0));
    }
    if (e.residual) {
      const gpucmp::reference::tensor dz = to_reference(as_floats(b.dz));
      for (std::size_t i = 0; i < dz.v.size(); ++i) CHECK(dz.v[i] == dpre.v[i]);
    }
    const std::vector<float> got_dgamma = b.dgamma.to_host(), got_dbeta = b.dbeta.to_host(), got_rm = b.running_mean.to_host(),
                             got_rv = b.running_var.to_host(), got_mean = b.saved_mean.to_host(), got_inv = b.saved_inv_std.to_host();
    for (std::size_t c = 0; c < std::size_t(shape.c); ++c) {
      INFO("channel " << c);
      CHECK(close(got_dgamma[c], dgamma[c], 1.0));
      CHECK(close(got_dbeta[c], dbeta[c], 1.0));
      CHECK(close(got_rm[c], rm[c], 1.0));
      CHECK(close(got_rv[c], rv[c], 1.0));
      CHECK(close(got_mean[c], saved.mean[c], 1.0));
      CHECK(close(got_inv[c], saved.inv_std[c], 0.0));
    }
  }
}

TEST_CASE("batch norm training verifies in every precision, layout and epilogue, on both paths where they run",
          "[gpu][training][batch_norm]") {
  gpucmp::stream s;
  cudnn_handle handle = make_cudnn_handle();
  int cudnn_runs = 0;
  for (gpucmp::batch_norm_path path : {gpucmp::batch_norm_path::gpucmp_kernels, gpucmp::batch_norm_path::cudnn_persistent})
  for (gpucmp::conv_layout layout : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw})
  for (gpucmp::numerics dtype : batch_norm_dtypes)
  for (epilogue e : all_epilogues)
  for (std::int64_t c : {64, 6}) {
    // ResNet-like: 64 channels over 8 x 28 x 28, and an odd small shape.
    const gpucmp::batch_norm_shape shape{c == 64 ? 8 : 5, c, c == 64 ? 28 : 3, c == 64 ? 28 : 7, dtype, layout, e.residual, e.relu};
    INFO(shape.name() << " on " << gpucmp::to_string(path));
    const std::string reason = gpucmp::batch_norm_training::support(shape, path);
    if (!reason.empty()) {
      CHECK(path == gpucmp::batch_norm_path::cudnn_persistent);  // gpucmp's kernels take everything
      continue;
    }
    std::unique_ptr<gpucmp::batch_norm_training> bn;
    try {
      bn = std::make_unique<gpucmp::batch_norm_training>(handle.get(), shape, path);
    } catch (const gpucmp::unsupported& u) {
      WARN("cuDNN refused " << shape.name() << ": " << u.what());
      continue;
    }
    bn_buffers b(*bn, s.get());
    const gpucmp::batch_norm_verification v = bn->verify(b.tensors(e.residual), b.workspace.data(), b.reserve.data(), s.get());
    INFO("forward: " << v.forward.summary());
    INFO("backward: " << v.backward.summary());
    CHECK(v.passed());
    gpucmp::batch_norm_tensors two = b.tensors(e.residual);
    two.dy2 = b.z.data();  // a second output gradient (random), summed on the fly
    if (path == gpucmp::batch_norm_path::gpucmp_kernels) {
      const gpucmp::batch_norm_verification v2 = bn->verify(two, b.workspace.data(), b.reserve.data(), s.get());
      INFO("with dy2, backward: " << v2.backward.summary());
      CHECK(v2.passed());
    } else {
      CHECK_THROWS_WITH(bn->backward(two, b.workspace.data(), b.reserve.data(), s.get()), GPUCMP_CONTAINS("add the second to dy first"));
    }
    if (path == gpucmp::batch_norm_path::cudnn_persistent) ++cudnn_runs;
  }
  // cuDNN documents the persistent NHWC FP16 path with ReLU and add + ReLU: it must run here.
  CHECK(cudnn_runs > 0);
}

TEST_CASE("a batch norm's forward and backward replay from a CUDA graph bit for bit, and bad tensors are refused",
          "[gpu][training][batch_norm]") {
  gpucmp::stream s;
  cudnn_handle handle = make_cudnn_handle();
  const gpucmp::batch_norm_shape shape{16, 64, 14, 14, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc, true, true};
  gpucmp::batch_norm_training bn(handle.get(), shape, gpucmp::batch_norm_path::gpucmp_kernels);
  bn_buffers b(bn, s.get());
  const gpucmp::batch_norm_tensors t = b.tensors(true);
  const std::vector<float> rm = b.running_mean.to_host(), rv = b.running_var.to_host();
  bn.forward(t, b.workspace.data(), b.reserve.data(), s.get());
  bn.backward(t, b.workspace.data(), b.reserve.data(), s.get());
  const std::vector<unsigned char> eager_y = b.y.to_host(), eager_dx = b.dx.to_host();
  const std::vector<float> eager_dgamma = b.dgamma.to_host();
  // Back to the running statistics before the step, then the same step from a graph.
  REQUIRE(cudaMemcpy(b.running_mean.data(), rm.data(), rm.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(b.running_var.data(), rv.data(), rv.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  const gpucmp::graph g = gpucmp::capture_graph(s.get(), [&](cudaStream_t cs) {
    bn.forward(t, b.workspace.data(), b.reserve.data(), cs);
    bn.backward(t, b.workspace.data(), b.reserve.data(), cs);
  });
  gpucmp::graph_exec step(g.get());
  step.launch(s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  CHECK(b.y.to_host() == eager_y);
  CHECK(b.dx.to_host() == eager_dx);
  CHECK(b.dgamma.to_host() == eager_dgamma);

  gpucmp::batch_norm_tensors missing = t;
  missing.z = nullptr;
  CHECK_THROWS_WITH(bn.forward(missing, b.workspace.data(), nullptr, s.get()), GPUCMP_CONTAINS("and z"));
  // The ReLU's mask from forward to backward: a byte per pack of 8 FP16 channels, required.
  CHECK(bn.reserve_bytes() == std::size_t(shape.elements() / 8));
  CHECK_THROWS_WITH(bn.forward(t, b.workspace.data(), nullptr, s.get()), GPUCMP_CONTAINS("reserve"));
  CHECK_THROWS_WITH(bn.backward(t, b.workspace.data(), nullptr, s.get()), GPUCMP_CONTAINS("reserve"));
  CHECK_THROWS_AS(gpucmp::batch_norm_training(handle.get(), {0, 64, 14, 14}, gpucmp::batch_norm_path::gpucmp_kernels),
                  gpucmp::invalid_argument);
  CHECK_THROWS_AS(gpucmp::batch_norm_training(handle.get(), {1, 64, 1, 1}, gpucmp::batch_norm_path::gpucmp_kernels),
                  gpucmp::invalid_argument);  // one value per channel
  const gpucmp::batch_norm_shape nchw{2, 64, 4, 4, gpucmp::numerics::fp16, gpucmp::conv_layout::nchw, false, true};
  CHECK_THAT(gpucmp::batch_norm_training::support(nchw, gpucmp::batch_norm_path::cudnn_persistent), GPUCMP_CONTAINS("NHWC only"));
  CHECK_THROWS_AS(gpucmp::batch_norm_training(handle.get(), nchw, gpucmp::batch_norm_path::cudnn_persistent), gpucmp::unsupported);
}

TEST_CASE("batch norm's forward from a convolution's per-channel sums gives forward()'s statistics and output",
          "[gpu][training][batch_norm]") {
  gpucmp::stream s;
  const cudnn_handle handle = make_cudnn_handle();
  for (bool residual : {false, true}) {
    const gpucmp::batch_norm_shape shape{4, 64, 7, 9, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc, residual, true};
    gpucmp::batch_norm_training bn(handle.get(), shape, gpucmp::batch_norm_path::gpucmp_kernels, {});
    bn_buffers own(bn, s.get()), from_sums(bn, s.get());  // the same random tensors (same seeds)
    bn.forward(own.tensors(residual), own.workspace.data(), own.reserve.data(), s.get());
    // The sums a convolution's epilogue would write: FP32, per channel, from x as stored.
    const std::vector<unsigned char> raw = from_sums.x.to_host();
    const __half* x = reinterpret_cast<const __half*>(raw.data());
    std::vector<double> s1(64, 0.0), s2(64, 0.0);
    for (std::int64_t i = 0; i < shape.elements(); ++i) {
      const double v = __half2float(x[i]);
      s1[std::size_t(i % 64)] += v;
      s2[std::size_t(i % 64)] += v * v;
    }
    gpucmp::device_buffer<float> sum(64), squares(64);
    sum.copy_from_host(std::vector<float>(s1.begin(), s1.end()));
    squares.copy_from_host(std::vector<float>(s2.begin(), s2.end()));
    bn.forward_from_sums(from_sums.tensors(residual), sum.data(), squares.data(), from_sums.workspace.data(),
                         from_sums.reserve.data(), s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    // x sits at mean 2 with variance 1/3: E[x^2] - E[x]^2 from FP32 sums keeps about 6 digits.
    const auto near = [](const std::vector<float>& a, const std::vector<float>& b, double relative) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!(std::fabs(double(a[i]) - double(b[i])) <= relative * std::fabs(double(b[i])) + 1e-7)) return false;
      }
      return true;
    };
    INFO((residual ? "bn+add+relu" : "bn+relu"));
    CHECK(near(from_sums.saved_mean.to_host(), own.saved_mean.to_host(), 1e-6));
    CHECK(near(from_sums.saved_inv_std.to_host(), own.saved_inv_std.to_host(), 1e-4));
    CHECK(near(from_sums.running_mean.to_host(), own.running_mean.to_host(), 1e-6));
    CHECK(near(from_sums.running_var.to_host(), own.running_var.to_host(), 1e-4));
    // y within an FP16 step of forward()'s at its scale, 1 (the statistics differ in their
    // last bits, which can move a value near 0 across the ReLU).
    const std::vector<unsigned char> ya = from_sums.y.to_host(), yb = own.y.to_host();
    const __half* a = reinterpret_cast<const __half*>(ya.data());
    const __half* b = reinterpret_cast<const __half*>(yb.data());
    double worst = 0;
    for (std::int64_t i = 0; i < shape.elements(); ++i) {
      const double va = __half2float(a[i]), vb = __half2float(b[i]);
      worst = std::max(worst, std::fabs(va - vb) / (std::max(std::fabs(vb), 1.0) * std::ldexp(1.0, -10)));
    }
    INFO("worst difference of y: " << worst << " FP16 steps");
    CHECK(worst <= 1.0);
  }
  // Refused: no sums, or cuDNN's path.
  const gpucmp::batch_norm_shape shape{4, 64, 7, 9, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc, false, true};
  gpucmp::batch_norm_training cudnn(handle.get(), shape, gpucmp::batch_norm_path::cudnn_persistent, {});
  bn_buffers b(cudnn, s.get());
  gpucmp::device_buffer<float> sum(64), squares(64);
  CHECK_THROWS_AS(cudnn.forward_from_sums(b.tensors(false), sum.data(), squares.data(), b.workspace.data(), b.reserve.data(), s.get()),
                  gpucmp::invalid_argument);
  gpucmp::batch_norm_training mine(handle.get(), shape, gpucmp::batch_norm_path::gpucmp_kernels, {});
  bn_buffers m(mine, s.get());
  CHECK_THROWS_AS(mine.forward_from_sums(m.tensors(false), nullptr, squares.data(), m.workspace.data(), m.reserve.data(), s.get()),
                  gpucmp::invalid_argument);
}

TEST_CASE("batch norm's check holds with gamma 0 on both paths and from the sums, and still catches sums 1 % off",
          "[gpu][training][batch_norm]") {
  // The zero-init residual start sets a residual layer's gamma to 0; a bound that divided by
  // gamma was NaN and failed every dx (the H200, 2026-12-03).
  gpucmp::stream s;
  const cudnn_handle handle = make_cudnn_handle();
  const gpucmp::batch_norm_shape shape{4, 64, 7, 9, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc, true, true};
  for (auto path : {gpucmp::batch_norm_path::cudnn_persistent, gpucmp::batch_norm_path::gpucmp_kernels}) {
    gpucmp::batch_norm_training bn(handle.get(), shape, path, {});
    bn_buffers b(bn, s.get());
    REQUIRE(cudaMemsetAsync(b.gamma.data(), 0, b.gamma.bytes(), s.get()) == cudaSuccess);
    const gpucmp::batch_norm_verification v = bn.verify(b.tensors(true), b.workspace.data(), b.reserve.data(), s.get());
    INFO(bn.name() << ": " << v.forward.summary() << "; " << v.backward.summary());
    CHECK(v.forward.passed());
    CHECK(v.backward.passed());
  }
  gpucmp::batch_norm_training bn(handle.get(), shape, gpucmp::batch_norm_path::gpucmp_kernels, {});
  bn_buffers b(bn, s.get());
  // The sums of x as stored (a convolution's would be of y before rounding: within the bound).
  const std::vector<unsigned char> raw = b.x.to_host();
  const __half* x = reinterpret_cast<const __half*>(raw.data());
  std::vector<float> s1(64, 0.0f), s2(64, 0.0f);
  {
    std::vector<double> d1(64, 0.0), d2(64, 0.0);
    for (std::int64_t i = 0; i < shape.elements(); ++i) {
      const double v = __half2float(x[i]);
      d1[std::size_t(i % 64)] += v;
      d2[std::size_t(i % 64)] += v * v;
    }
    for (std::size_t c = 0; c < 64; ++c) {
      s1[c] = float(d1[c]);
      s2[c] = float(d2[c]);
    }
  }
  gpucmp::device_buffer<float> sum(64), squares(64);
  for (float gamma : {1.0f, 0.0f}) {
    gpucmp::fill_uniform(b.gamma.data(), 64, 14, double(gamma), double(gamma), s.get());
    sum.copy_from_host(s1);
    squares.copy_from_host(s2);
    const gpucmp::batch_norm_verification v =
        bn.verify(b.tensors(true), b.workspace.data(), b.reserve.data(), s.get(), sum.data(), squares.data());
    INFO("gamma " << gamma << ": " << v.forward.summary() << "; " << v.backward.summary());
    CHECK(v.forward.passed());
    CHECK(v.backward.passed());
  }
  // One channel's sum 1 % off: its mean and output are wrong, and the check says so.
  std::vector<float> wrong = s1;
  wrong[5] *= 1.01f;
  sum.copy_from_host(wrong);
  squares.copy_from_host(s2);
  const gpucmp::batch_norm_verification bad =
      bn.verify(b.tensors(true), b.workspace.data(), b.reserve.data(), s.get(), sum.data(), squares.data());
  INFO(bad.forward.summary());
  CHECK_FALSE(bad.forward.passed());
}
