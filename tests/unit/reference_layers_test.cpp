// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The FP64 reference layers (training/reference_layers.hpp) against central finite
// differences: for a loss L = sum(y * r) with random r, every analytic gradient (of the
// inputs and of the parameters) matches (L(v + h) - L(v - h)) / 2h at every element, to
// 1e-6 of the gradient's largest value. Small shapes with stride, padding and odd sizes.
#include "catch.hpp"

#include <gpucmp/training/reference_layers.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace {

using gpucmp::reference::tensor;

tensor random_tensor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::uint64_t seed) {
  tensor t(n, c, h, w);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& v : t.v) v = u(gen);
  return t;
}

std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double low = -1.0, double high = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = u(gen);
  return v;
}

double dot(const tensor& y, const tensor& r) {
  double s = 0;
  for (std::size_t i = 0; i < y.v.size(); ++i) s += y.v[i] * r.v[i];
  return s;
}

// Checks `analytic` (the gradient of loss() with respect to `values`) by central differences,
// every element.
void check_gradient(std::vector<double>& values, const std::vector<double>& analytic, const std::function<double()>& loss,
                    const char* what) {
  INFO(what);
  REQUIRE(analytic.size() == values.size());
  double largest = 0;
  for (double g : analytic) largest = std::max(largest, std::fabs(g));
  REQUIRE(largest > 0);  // a gradient of zeros would pass anything
  const double h = 1e-6;
  double worst = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double kept = values[i];
    values[i] = kept + h;
    const double up = loss();
    values[i] = kept - h;
    const double down = loss();
    values[i] = kept;
    worst = std::max(worst, std::fabs((up - down) / (2 * h) - analytic[i]));
  }
  CHECK(worst <= 1e-6 * largest);
}

}  // namespace

TEST_CASE("convolution's data and weight gradients match finite differences", "[training][reference]") {
  for (const gpucmp::reference::conv_geometry g : {gpucmp::reference::conv_geometry{1, 1}, gpucmp::reference::conv_geometry{2, 1},
                                                   gpucmp::reference::conv_geometry{2, 0}}) {
    INFO("stride " << g.stride << " pad " << g.pad);
    tensor x = random_tensor(2, 3, 7, 6, 1);
    tensor w = random_tensor(4, 3, 3, 3, 2);
    const tensor y0 = gpucmp::reference::conv_forward(x, w, g);
    CHECK(y0.h == (7 + 2 * g.pad - 3) / g.stride + 1);
    const tensor r = random_tensor(y0.n, y0.c, y0.h, y0.w, 3);
    auto loss = [&] { return dot(gpucmp::reference::conv_forward(x, w, g), r); };
    check_gradient(x.v, gpucmp::reference::conv_backward_data(r, w, x, g).v, loss, "dx");
    check_gradient(w.v, gpucmp::reference::conv_backward_weight(x, r, w, g).v, loss, "dw");
  }
}

TEST_CASE("batch norm in training mode: gradients match finite differences, running statistics follow torch's rule",
          "[training][reference]") {
  tensor x = random_tensor(3, 4, 5, 3, 4);
  for (double& v : x.v) v = 2 * v + 0.5;  // a mean and variance away from 0 and 1
  std::vector<double> gamma = random_vector(4, 5, 0.5, 1.5), beta = random_vector(4, 6);
  std::vector<double> running_mean(4, 0.0), running_var(4, 1.0);
  gpucmp::reference::batch_norm_saved saved;
  const tensor y0 = gpucmp::reference::batch_norm_train_forward(x, gamma, beta, 1e-5, 0.1, running_mean, running_var, saved);
  // Each channel of y has mean beta and (biased) variance gamma^2 * var / (var + eps).
  for (std::int64_t j = 0; j < 4; ++j) {
    double sum = 0;
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t p = 0; p < 5; ++p)
        for (std::int64_t q = 0; q < 3; ++q) sum += y0.at(i, j, p, q);
    CHECK(sum / 45 == Approx(beta[std::size_t(j)]).margin(1e-12));
  }
  // Running statistics: 0.9 old + 0.1 batch, the variance unbiased (n - 1 = 44).
  double mean0 = 0, squares0 = 0;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t p = 0; p < 5; ++p)
      for (std::int64_t q = 0; q < 3; ++q) mean0 += x.at(i, 0, p, q) / 45;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t p = 0; p < 5; ++p)
      for (std::int64_t q = 0; q < 3; ++q) squares0 += (x.at(i, 0, p, q) - mean0) * (x.at(i, 0, p, q) - mean0);
  CHECK(running_mean[0] == Approx(0.1 * mean0).epsilon(1e-12));
  CHECK(running_var[0] == Approx(0.9 + 0.1 * squares0 / 44).epsilon(1e-12));

  const tensor r = random_tensor(3, 4, 5, 3, 7);
  auto loss = [&] {
    std::vector<double> m(4, 0.0), v(4, 1.0);
    gpucmp::reference::batch_norm_saved s;
    return dot(gpucmp::reference::batch_norm_train_forward(x, gamma, beta, 1e-5, 0.1, m, v, s), r);
  };
  std::vector<double> dgamma, dbeta;
  const tensor dx = gpucmp::reference::batch_norm_backward(r, x, gamma, saved, dgamma, dbeta);
  check_gradient(x.v, dx.v, loss, "dx");
  check_gradient(gamma, dgamma, loss, "dgamma");
  check_gradient(beta, dbeta, loss, "dbeta");
}

TEST_CASE("ReLU and the poolings pass gradients as finite differences say", "[training][reference]") {
  tensor x = random_tensor(2, 3, 9, 8, 8);
  const gpucmp::reference::conv_geometry stem{2, 1};  // ResNet's max pool: 3x3, stride 2, pad 1
  SECTION("relu") {
    const tensor r = random_tensor(2, 3, 9, 8, 9);
    auto loss = [&] { return dot(gpucmp::reference::relu_forward(x), r); };
    check_gradient(x.v, gpucmp::reference::relu_backward(r, x).v, loss, "relu dx");
  }
  SECTION("max pool") {
    const tensor y0 = gpucmp::reference::max_pool_forward(x, 3, stem);
    CHECK(y0.h == 5);
    CHECK(y0.w == 4);
    const tensor r = random_tensor(y0.n, y0.c, y0.h, y0.w, 10);
    auto loss = [&] { return dot(gpucmp::reference::max_pool_forward(x, 3, stem), r); };
    check_gradient(x.v, gpucmp::reference::max_pool_backward(r, x, 3, stem).v, loss, "max pool dx");
  }
  SECTION("average pool") {
    const tensor y0 = gpucmp::reference::average_pool_forward(x, 3, stem);
    const tensor r = random_tensor(y0.n, y0.c, y0.h, y0.w, 11);
    auto loss = [&] { return dot(gpucmp::reference::average_pool_forward(x, 3, stem), r); };
    check_gradient(x.v, gpucmp::reference::average_pool_backward(r, x, 3, stem).v, loss, "average pool dx");
  }
  SECTION("global average pool") {
    const tensor r = random_tensor(2, 3, 1, 1, 12);
    auto loss = [&] { return dot(gpucmp::reference::global_average_pool_forward(x), r); };
    check_gradient(x.v, gpucmp::reference::global_average_pool_backward(r, x).v, loss, "global average pool dx");
  }
}

TEST_CASE("the linear layer and softmax cross-entropy: gradients match finite differences", "[training][reference]") {
  tensor x = random_tensor(3, 5, 1, 1, 13);
  tensor weight = random_tensor(4, 5, 1, 1, 14);
  std::vector<double> bias = random_vector(4, 15);
  const std::vector<std::int64_t> labels{2, 0, 3};
  // The loss of the classifier itself: linear then softmax cross-entropy.
  auto loss = [&] {
    tensor unused;
    return gpucmp::reference::softmax_cross_entropy(gpucmp::reference::linear_forward(x, weight, bias), labels, unused);
  };
  tensor dlogits;
  const double l0 = gpucmp::reference::softmax_cross_entropy(gpucmp::reference::linear_forward(x, weight, bias), labels, dlogits);
  CHECK(l0 > 0);
  // Each row of the gradient sums to 0 (softmax minus a one-hot).
  for (std::int64_t i = 0; i < 3; ++i) {
    double row = 0;
    for (std::int64_t k = 0; k < 4; ++k) row += dlogits.at(i, k, 0, 0);
    CHECK(row == Approx(0).margin(1e-15));
  }
  tensor dweight;
  std::vector<double> dbias;
  const tensor dx = gpucmp::reference::linear_backward(dlogits, x, weight, dweight, dbias);
  check_gradient(x.v, dx.v, loss, "dx");
  check_gradient(weight.v, dweight.v, loss, "dW");
  check_gradient(bias, dbias, loss, "db");
  // Uniform logits: the loss is log(classes).
  tensor flat(2, 10);
  tensor g;
  CHECK(gpucmp::reference::softmax_cross_entropy(flat, {0, 9}, g) == Approx(std::log(10.0)).epsilon(1e-14));
}

TEST_CASE("reference layers name the shape that is wrong", "[training][reference]") {
  const tensor x(1, 3, 4, 4), w(2, 4, 3, 3);
  CHECK_THROWS_WITH(gpucmp::reference::conv_forward(x, w, {}), GPUCMP_CONTAINS("x has 3 channels, w 4"));
  tensor logits(2, 5), d;
  CHECK_THROWS_WITH(gpucmp::reference::softmax_cross_entropy(logits, {0, 5}, d), GPUCMP_CONTAINS("label 5 is not one of the 5 classes"));
  std::vector<double> gamma(3), beta(3), m(3), v(3);
  gpucmp::reference::batch_norm_saved s;
  const tensor single(1, 3, 1, 1);
  CHECK_THROWS_WITH(gpucmp::reference::batch_norm_train_forward(single, gamma, beta, 1e-5, 0.1, m, v, s),
                    GPUCMP_CONTAINS("more than one value per channel"));
}
