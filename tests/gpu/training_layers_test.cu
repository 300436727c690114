// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The training step's smaller layers against training/reference_layers.hpp's FP64 host
// references: the softmax cross-entropy loss and its scaled gradient (FP32 and FP16), with a
// bad label made visible as NaN.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/training/loss.cuh>
#include <gpucmp/training/reference_layers.hpp>

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
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
