// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The training step's smaller layers against training/reference_layers.hpp's FP64 host
// references: the softmax cross-entropy loss and its scaled gradient (FP32 and FP16), with a
// bad label made visible as NaN; max pooling's argmax and the backward passes of max,
// average and global average pooling in both layouts, and the packed NHWC kernels against the
// generic ones bit for bit; a linear layer's three gradients.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/training/linear_gradients.cuh>
#include <gpucmp/training/loss.cuh>
#include <gpucmp/training/pool_gradients.cuh>
#include <gpucmp/training/reference_layers.hpp>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

template <class G>
double as_double(G v) {
  return double(float(v));
}

template <class G>
void check_loss(std::int64_t rows, std::int64_t classes, float scale) {
  INFO(rows << " x " << classes << ", gradient of " << sizeof(G) << " bytes, scale " << scale);
  gpucmp::stream s;
  std::vector<float> logits(std::size_t(rows * classes));
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = float(16 * gpucmp::unit_interval(gpucmp::random_bits(3, i)) - 8);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < labels.size(); ++r) labels[r] = std::int32_t(gpucmp::random_bits(4, r) % std::uint64_t(classes));
  gpucmp::device_buffer<float> logits_d(logits.size(), gpucmp::initial_fill::uninitialized()), scale_d(1, gpucmp::initial_fill::uninitialized()),
      loss_d(1, gpucmp::initial_fill::poison());
  gpucmp::device_buffer<std::int32_t> labels_d(labels.size(), gpucmp::initial_fill::uninitialized());
  gpucmp::device_buffer<G> dlogits_d(logits.size(), gpucmp::initial_fill::poison());
  gpucmp::device_buffer<double> rows_d(std::size_t(rows), gpucmp::initial_fill::poison());
  logits_d.copy_from_host(logits);
  labels_d.copy_from_host(labels);
  scale_d.copy_from_host(std::vector<float>{scale});
  gpucmp::softmax_cross_entropy(logits_d.data(), labels_d.data(), rows, classes, scale_d.data(), dlogits_d.data(), loss_d.data(),
                                rows_d.data(), s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);

  gpucmp::reference::tensor x(rows, classes), dx;
  for (std::size_t i = 0; i < logits.size(); ++i) x.v[i] = logits[i];
  std::vector<std::int64_t> labels64(labels.begin(), labels.end());
  const double loss = gpucmp::reference::softmax_cross_entropy(x, labels64, dx);
  CHECK(loss_d.to_host()[0] == Approx(loss).epsilon(1e-6));
  const std::vector<G> got = dlogits_d.to_host();
  const double out_eps = sizeof(G) == 2 ? std::ldexp(1.0, -11) : 1e-6;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = scale * dx.v[i];
    const double err = std::fabs(as_double(got[i]) - want) / (out_eps * std::fabs(want) + 1e-6 * scale / double(rows) + 1e-30);
    worst = std::max(worst, err);
  }
  INFO("worst gradient error / bound " << worst);
  CHECK(worst <= 1.0);

  // The same inputs give the same loss bit for bit (a fixed summation order).
  const float first = loss_d.to_host()[0];
  gpucmp::softmax_cross_entropy(logits_d.data(), labels_d.data(), rows, classes, scale_d.data(), dlogits_d.data(), loss_d.data(),
                                rows_d.data(), s.get());
  CHECK(loss_d.to_host()[0] == first);
}

}  // namespace

TEST_CASE("softmax cross-entropy and its scaled gradient match the FP64 reference", "[gpu][training][loss]") {
  check_loss<float>(7, 1000, 1.0f);
  check_loss<float>(300, 10, 1.0f);
  check_loss<__half>(64, 1000, 65536.0f);
  check_loss<__half>(3, 33, 128.0f);
}

TEST_CASE("a label outside the classes makes the loss NaN and bad sizes are refused", "[gpu][training][loss]") {
  gpucmp::stream s;
  gpucmp::device_buffer<float> logits(20, gpucmp::initial_fill::random(1)), loss(1, gpucmp::initial_fill::poison());
  gpucmp::device_buffer<std::int32_t> labels(2, gpucmp::initial_fill::uninitialized());
  labels.copy_from_host(std::vector<std::int32_t>{3, 10});  // 10 is not one of the 10 classes
  gpucmp::device_buffer<float> dlogits(20, gpucmp::initial_fill::poison());
  gpucmp::device_buffer<double> rows(2, gpucmp::initial_fill::poison());
  gpucmp::softmax_cross_entropy(logits.data(), labels.data(), 2, 10, nullptr, dlogits.data(), loss.data(), rows.data(), s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  CHECK(std::isnan(loss.to_host()[0]));
  const std::vector<float> g = dlogits.to_host();
  CHECK(std::isfinite(g[0]));   // row 0 is fine
  CHECK(std::isnan(g[10]));     // row 1 is not
  CHECK_THROWS_AS(gpucmp::softmax_cross_entropy(logits.data(), labels.data(), 0, 10, nullptr, dlogits.data(), loss.data(),
                                                rows.data(), s.get()),
                  gpucmp::invalid_argument);
}

namespace {

// NCHW reference tensor <-> device order of `layout`.
std::int64_t offset(gpucmp::conv_layout layout, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t C,
                    std::int64_t H, std::int64_t W) {
  return layout == gpucmp::conv_layout::nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}
std::vector<float> to_device_order(const gpucmp::reference::tensor& t, gpucmp::conv_layout layout) {
  std::vector<float> v(t.v.size());
  for (std::int64_t n = 0; n < t.n; ++n)
    for (std::int64_t c = 0; c < t.c; ++c)
      for (std::int64_t h = 0; h < t.h; ++h)
        for (std::int64_t w = 0; w < t.w; ++w) v[std::size_t(offset(layout, n, c, h, w, t.c, t.h, t.w))] = float(t.at(n, c, h, w));
  return v;
}
double worst_difference(const std::vector<float>& got, const gpucmp::reference::tensor& want, gpucmp::conv_layout layout) {
  const std::vector<float> w = to_device_order(want, layout);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - double(w[i])));
  return worst;
}
// Values k / 256 in [-1, 1]: exact in FP32, FP16 and BF16, so every type sees the reference's inputs.
gpucmp::reference::tensor random_tensor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::uint64_t seed) {
  gpucmp::reference::tensor t(n, c, h, w);
  for (std::size_t i = 0; i < t.v.size(); ++i) {
    t.v[i] = std::round(256 * (2 * gpucmp::unit_interval(gpucmp::random_bits(seed, i)) - 1)) / 256;
  }
  return t;
}

}  // namespace

namespace {

// Pooling of one shape twice: tensors 16-byte aligned (the packed NHWC kernels) and the same
// values one element off (the generic kernels); the two must agree bit for bit.
template <class T>
void check_packed_pooling(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t kernel, std::int64_t stride,
                          std::int64_t pad) {
  const gpucmp::pool_shape shape{n, c, h, w, kernel, stride, pad, gpucmp::conv_layout::nhwc};
  INFO(sizeof(T) << "-byte elements, n" << n << " c" << c << " h" << h << " w" << w << " k" << kernel << " s" << stride << " p" << pad);
  const std::size_t in = std::size_t(n * c * h * w), out = std::size_t(n * c * shape.p() * shape.q());
  // Values k / 8 in [-2, 2]: many ties inside a window, so the first-maximum rule is exercised.
  std::vector<T> x(in + 1), dy(out + 1);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = gpucmp::from_float<T>(float(std::round(32 * gpucmp::unit_interval(gpucmp::random_bits(41, i))) - 16) / 8);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = gpucmp::from_float<T>(float(2 * gpucmp::unit_interval(gpucmp::random_bits(42, i)) - 1));
  gpucmp::stream s;
  struct run {
    std::vector<unsigned char> y, argmax, dx_max, dx_average;
  };
  auto pool = [&](std::size_t offset) {
    gpucmp::device_buffer<T> xd(in + 1, gpucmp::initial_fill::uninitialized()), dyd(out + 1, gpucmp::initial_fill::uninitialized()),
        y(out + 1, gpucmp::initial_fill::poison()), dx(in + 1, gpucmp::initial_fill::poison());
    gpucmp::device_buffer<std::uint8_t> argmax(out + 1, gpucmp::initial_fill::poison());
    // The same values at `offset` (the host copies shifted with them).
    std::vector<T> xs(in + 1), dys(out + 1);
    std::copy(x.begin(), x.begin() + std::ptrdiff_t(in), xs.begin() + std::ptrdiff_t(offset));
    std::copy(dy.begin(), dy.begin() + std::ptrdiff_t(out), dys.begin() + std::ptrdiff_t(offset));
    xd.copy_from_host(xs);
    dyd.copy_from_host(dys);
    run r;
    auto bytes = [](const T* p, std::size_t count) {
      std::vector<unsigned char> v(count * sizeof(T));
      REQUIRE(cudaMemcpy(v.data(), p, v.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
      return v;
    };
    gpucmp::max_pool_forward_training(shape, xd.data() + offset, y.data() + offset, argmax.data() + offset, s.get());
    gpucmp::pool_backward(gpucmp::pool_kind::max, shape, dyd.data() + offset, argmax.data() + offset, dx.data() + offset, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    r.y = bytes(y.data() + offset, out);
    r.dx_max = bytes(dx.data() + offset, in);
    r.argmax.resize(out);
    REQUIRE(cudaMemcpy(r.argmax.data(), argmax.data() + offset, out, cudaMemcpyDeviceToHost) == cudaSuccess);
    gpucmp::pool_backward(gpucmp::pool_kind::average, shape, dyd.data() + offset, nullptr, dx.data() + offset, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    r.dx_average = bytes(dx.data() + offset, in);
    return r;
  };
  const run packed = pool(0), generic = pool(1);
  CHECK(packed.y == generic.y);
  CHECK(packed.argmax == generic.argmax);
  CHECK(packed.dx_max == generic.dx_max);
  CHECK(packed.dx_average == generic.dx_average);
  // And not vacuously: the maximum pooled is a window's element, and some gradient arrived.
  float largest_dx = 0;
  for (std::size_t i = 0; i < in; ++i) {
    T v;
    std::memcpy(&v, packed.dx_max.data() + i * sizeof(T), sizeof(T));
    largest_dx = std::max(largest_dx, std::fabs(gpucmp::to_float(v)));
  }
  CHECK(largest_dx > 0.1f);
}

}  // namespace

TEST_CASE("pooling's packed NHWC kernels give the generic kernels' results bit for bit", "[gpu][training][pooling]") {
  // ResNet's stem (3 x 3, stride 2, pad 1) on odd and even sizes, and a 2 x 2 window.
  check_packed_pooling<float>(3, 64, 23, 20, 3, 2, 1);
  check_packed_pooling<__half>(3, 64, 23, 20, 3, 2, 1);
  check_packed_pooling<__nv_bfloat16>(2, 16, 12, 13, 3, 2, 1);
  check_packed_pooling<float>(2, 8, 10, 10, 2, 2, 0);
  check_packed_pooling<__half>(2, 24, 9, 11, 2, 2, 0);
}

TEST_CASE("pooling's training passes match the FP64 references in both layouts", "[gpu][training][pooling]") {
  gpucmp::stream s;
  for (gpucmp::conv_layout layout : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw}) {
    INFO(gpucmp::to_string(layout));
    const gpucmp::reference::tensor x = random_tensor(2, 3, 7, 6, 31), dy_max = random_tensor(2, 3, 4, 3, 32);
    gpucmp::pool_shape shape;
    shape.n = 2;
    shape.c = 3;
    shape.h = 7;
    shape.w = 6;
    shape.kernel = 3;
    shape.stride = 2;
    shape.pad = 1;
    shape.layout = layout;
    REQUIRE(shape.p() == 4);
    REQUIRE(shape.q() == 3);
    const gpucmp::reference::conv_geometry g{2, 1};
    gpucmp::device_buffer<float> xd(x.v.size(), gpucmp::initial_fill::uninitialized()), y(24 * 3, gpucmp::initial_fill::poison()),
        dy(24 * 3, gpucmp::initial_fill::uninitialized()), dx(x.v.size(), gpucmp::initial_fill::poison());
    gpucmp::device_buffer<std::uint8_t> argmax(24 * 3, gpucmp::initial_fill::poison());
    xd.copy_from_host(to_device_order(x, layout));
    dy.copy_from_host(to_device_order(dy_max, layout));
    gpucmp::max_pool_forward_training(shape, xd.data(), y.data(), argmax.data(), s.get());
    gpucmp::pool_backward(gpucmp::pool_kind::max, shape, dy.data(), argmax.data(), dx.data(), s.get());
    CHECK(worst_difference(y.to_host(), gpucmp::reference::max_pool_forward(x, 3, g), layout) == 0);
    CHECK(worst_difference(dx.to_host(), gpucmp::reference::max_pool_backward(dy_max, x, 3, g), layout) <= 1e-6);
    gpucmp::pool_backward(gpucmp::pool_kind::average, shape, dy.data(), nullptr, dx.data(), s.get());
    CHECK(worst_difference(dx.to_host(), gpucmp::reference::average_pool_backward(dy_max, x, 3, g), layout) <= 1e-6);

    // Ties: a constant input sends each window's gradient to its first element.
    gpucmp::reference::tensor flat(2, 3, 7, 6);
    for (double& v : flat.v) v = 0.5;
    xd.copy_from_host(to_device_order(flat, layout));
    gpucmp::max_pool_forward_training(shape, xd.data(), y.data(), argmax.data(), s.get());
    gpucmp::pool_backward(gpucmp::pool_kind::max, shape, dy.data(), argmax.data(), dx.data(), s.get());
    CHECK(worst_difference(dx.to_host(), gpucmp::reference::max_pool_backward(dy_max, flat, 3, g), layout) <= 1e-6);

    // Global average pooling: 2 x 3 x 7 x 6 -> 2 x 3.
    const gpucmp::reference::tensor dy_gap = random_tensor(2, 3, 1, 1, 33);
    gpucmp::device_buffer<float> dyg(6, gpucmp::initial_fill::uninitialized());
    dyg.copy_from_host(to_device_order(dy_gap, layout));
    gpucmp::global_average_pool_backward(2, 42, 3, dyg.data(), dx.data(), s.get(), layout);
    CHECK(worst_difference(dx.to_host(), gpucmp::reference::global_average_pool_backward(dy_gap, x), layout) <= 1e-7);
  }
  gpucmp::pool_shape bad;
  bad.n = bad.c = bad.h = bad.w = 4;
  bad.kernel = 2;
  CHECK_THROWS_WITH(gpucmp::pool_backward<float>(gpucmp::pool_kind::max, bad, nullptr, nullptr, nullptr, s.get()),
                    GPUCMP_CONTAINS("argmax"));
}

TEST_CASE("a linear layer's data, weight and bias gradients match the FP64 reference", "[gpu][training][linear]") {
  gpucmp::stream s;
  cublasLtHandle_t raw = nullptr;
  REQUIRE(cublasLtCreate(&raw) == CUBLAS_STATUS_SUCCESS);
  gpucmp::detail::unique_handle<cublasLtHandle_t, cublasLtDestroy> handle(raw);
  const std::int64_t rows = 5, in = 40, out = 7;
  const gpucmp::reference::tensor x = random_tensor(rows, in, 1, 1, 41), w = random_tensor(out, in, 1, 1, 42),
                                  dy = random_tensor(rows, out, 1, 1, 43);
  gpucmp::reference::tensor dw_ref;
  std::vector<double> db_ref;
  const gpucmp::reference::tensor dx_ref = gpucmp::reference::linear_backward(dy, x, w, dw_ref, db_ref);
  gpucmp::device_buffer<unsigned char> workspace(std::size_t{4} << 20, gpucmp::initial_fill::uninitialized());
  auto run = [&](auto zero, gpucmp::numerics dtype, double allowed) {
    using T = decltype(zero);
    INFO(gpucmp::to_string(dtype));
    auto upload = [](const gpucmp::reference::tensor& t) {
      std::vector<T> v(t.v.size());
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = gpucmp::from_double<T>(t.v[i]);
      gpucmp::device_buffer<T> d(v.size(), gpucmp::initial_fill::uninitialized());
      d.copy_from_host(v);
      return d;
    };
    gpucmp::device_buffer<T> xd = upload(x), wd = upload(w), dyd = upload(dy), dx(std::size_t(rows * in), gpucmp::initial_fill::poison());
    gpucmp::device_buffer<float> dw(std::size_t(out * in), gpucmp::initial_fill::poison()), db(std::size_t(out), gpucmp::initial_fill::poison());
    gpucmp::linear_gradient_tensors t;
    t.x = xd.data();
    t.w = wd.data();
    t.dy = dyd.data();
    t.dx = dx.data();
    t.dw = dw.data();
    t.db = db.data();
    gpucmp::linear_backward back(handle.get(), rows, in, out, dtype, t, workspace.data(), workspace.size());
    back(s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    const std::vector<T> dx_got = dx.to_host();
    const std::vector<float> dw_got = dw.to_host(), db_got = db.to_host();
    double worst = 0;
    for (std::size_t i = 0; i < dx_got.size(); ++i) worst = std::max(worst, std::fabs(gpucmp::to_double(dx_got[i]) - dx_ref.v[i]));
    for (std::size_t i = 0; i < dw_got.size(); ++i) worst = std::max(worst, std::fabs(double(dw_got[i]) - dw_ref.v[i]));
    for (std::size_t i = 0; i < db_got.size(); ++i) worst = std::max(worst, std::fabs(double(db_got[i]) - db_ref[i]));
    INFO("worst absolute error " << worst);
    CHECK(worst <= allowed);
    const gpucmp::verification v = back.verify(s.get());
    INFO(v.summary());
    CHECK(v.passed());
  };
  // The inputs are exactly representable in each type; FP16 rounds dx on output (|dx| < 8).
  run(float{}, gpucmp::numerics::fp32, 1e-5);
  run(__half{}, gpucmp::numerics::fp16, 8 * std::ldexp(1.0, -11) + 1e-5);
}
