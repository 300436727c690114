// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// FP64 reference layers for training, forward and backward, on the host: what the GPU's
// gradients are checked against on small shapes (and what the host tests check against
// finite differences). Plain loops over NCHW tensors, written for clarity, not speed: a
// 2x16x8x8 convolution's gradients take milliseconds. Conventions are PyTorch's: batch norm
// in training mode normalises with the biased batch variance and updates the running
// variance with the unbiased one; average pooling counts padding as zeros; the loss is the
// mean softmax cross-entropy over the batch. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace gpucmp {
namespace reference {

/// An NCHW tensor of doubles (a flat vector is N x C x 1 x 1).
struct tensor {
  std::int64_t n = 0, c = 0, h = 1, w = 1;
  std::vector<double> v;  ///< n * c * h * w values, NCHW order

  tensor() = default;
  /// A zero tensor of that shape.
  tensor(std::int64_t n_, std::int64_t c_, std::int64_t h_ = 1, std::int64_t w_ = 1)
      : n(n_), c(c_), h(h_), w(w_), v(std::size_t(n_ * c_ * h_ * w_), 0.0) {}
  /// Element (i, j, y, x).
  double& at(std::int64_t i, std::int64_t j, std::int64_t y, std::int64_t x) { return v[index(i, j, y, x)]; }
  double at(std::int64_t i, std::int64_t j, std::int64_t y, std::int64_t x) const { return v[index(i, j, y, x)]; }
  /// Same extents as `o`.
  bool same_shape(const tensor& o) const noexcept { return n == o.n && c == o.c && h == o.h && w == o.w; }

 private:
  std::size_t index(std::int64_t i, std::int64_t j, std::int64_t y, std::int64_t x) const {
    return std::size_t(((i * c + j) * h + y) * w + x);
  }
};

/// A convolution's geometry (square kernel, equal stride and padding in both dimensions).
struct conv_geometry {
  std::int64_t stride = 1;  ///< in both dimensions
  std::int64_t pad = 0;     ///< zero padding in both dimensions
};

namespace detail {
inline void require_shape(bool ok, const std::string& what) {
  if (!ok) throw invalid_argument("reference: " + what);
}
inline std::int64_t conv_out(std::int64_t in, std::int64_t k, const conv_geometry& g) { return (in + 2 * g.pad - k) / g.stride + 1; }
}  // namespace detail

/// y = conv(x, w): x N x C x H x W, w K x C x R x S (torch's order), no bias.
inline tensor conv_forward(const tensor& x, const tensor& w, const conv_geometry& g) {
  detail::require_shape(x.c == w.c, "conv_forward: x has " + std::to_string(x.c) + " channels, w " + std::to_string(w.c));
  tensor y(x.n, w.n, detail::conv_out(x.h, w.h, g), detail::conv_out(x.w, w.w, g));
  for (std::int64_t i = 0; i < y.n; ++i)
    for (std::int64_t k = 0; k < y.c; ++k)
      for (std::int64_t p = 0; p < y.h; ++p)
        for (std::int64_t q = 0; q < y.w; ++q) {
          double sum = 0;
          for (std::int64_t c = 0; c < x.c; ++c)
            for (std::int64_t r = 0; r < w.h; ++r)
              for (std::int64_t s = 0; s < w.w; ++s) {
                const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
                if (yy >= 0 && yy < x.h && xx >= 0 && xx < x.w) sum += x.at(i, c, yy, xx) * w.at(k, c, r, s);
              }
          y.at(i, k, p, q) = sum;
        }
  return y;
}

/// dx of conv_forward for output gradient dy (the data gradient); `x_shape` gives dx's extents.
inline tensor conv_backward_data(const tensor& dy, const tensor& w, const tensor& x_shape, const conv_geometry& g) {
  detail::require_shape(dy.c == w.n, "conv_backward_data: dy has " + std::to_string(dy.c) + " channels, w outputs " + std::to_string(w.n));
  tensor dx(x_shape.n, x_shape.c, x_shape.h, x_shape.w);
  for (std::int64_t i = 0; i < dy.n; ++i)
    for (std::int64_t k = 0; k < dy.c; ++k)
      for (std::int64_t p = 0; p < dy.h; ++p)
        for (std::int64_t q = 0; q < dy.w; ++q)
          for (std::int64_t c = 0; c < dx.c; ++c)
            for (std::int64_t r = 0; r < w.h; ++r)
              for (std::int64_t s = 0; s < w.w; ++s) {
                const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
                if (yy >= 0 && yy < dx.h && xx >= 0 && xx < dx.w) dx.at(i, c, yy, xx) += dy.at(i, k, p, q) * w.at(k, c, r, s);
              }
  return dx;
}

/// dw of conv_forward for output gradient dy (the weight gradient); `w_shape` gives dw's extents.
inline tensor conv_backward_weight(const tensor& x, const tensor& dy, const tensor& w_shape, const conv_geometry& g) {
  detail::require_shape(x.c == w_shape.c && dy.c == w_shape.n, "conv_backward_weight: channels of x, dy and w disagree");
  tensor dw(w_shape.n, w_shape.c, w_shape.h, w_shape.w);
  for (std::int64_t i = 0; i < dy.n; ++i)
    for (std::int64_t k = 0; k < dy.c; ++k)
      for (std::int64_t p = 0; p < dy.h; ++p)
        for (std::int64_t q = 0; q < dy.w; ++q)
          for (std::int64_t c = 0; c < x.c; ++c)
            for (std::int64_t r = 0; r < dw.h; ++r)
              for (std::int64_t s = 0; s < dw.w; ++s) {
                const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
                if (yy >= 0 && yy < x.h && xx >= 0 && xx < x.w) dw.at(k, c, r, s) += dy.at(i, k, p, q) * x.at(i, c, yy, xx);
              }
  return dw;
}

/// What batch norm's training-mode forward pass keeps for the backward pass.
struct batch_norm_saved {
  std::vector<double> mean;     ///< per channel, over N, H and W
  std::vector<double> inv_std;  ///< 1 / sqrt(biased variance + eps), per channel
};

/// Batch norm in training mode: y = gamma (x - mean) * inv_std + beta with the batch's
/// statistics; `running_mean` and `running_var` move by `momentum` toward the batch mean
/// and the unbiased batch variance (torch's rule). Returns y; `saved` gets the statistics.
inline tensor batch_norm_train_forward(const tensor& x, const std::vector<double>& gamma, const std::vector<double>& beta,
                                       double eps, double momentum, std::vector<double>& running_mean,
                                       std::vector<double>& running_var, batch_norm_saved& saved) {
  const std::size_t c = std::size_t(x.c);
  detail::require_shape(gamma.size() == c && beta.size() == c && running_mean.size() == c && running_var.size() == c,
                        "batch_norm_train_forward: one gamma, beta and running statistic per channel");
  const double count = double(x.n * x.h * x.w);
  detail::require_shape(count > 1, "batch_norm_train_forward: needs more than one value per channel");
  saved.mean.assign(c, 0.0);
  saved.inv_std.assign(c, 0.0);
  tensor y(x.n, x.c, x.h, x.w);
  for (std::int64_t j = 0; j < x.c; ++j) {
    double sum = 0;
    for (std::int64_t i = 0; i < x.n; ++i)
      for (std::int64_t p = 0; p < x.h; ++p)
        for (std::int64_t q = 0; q < x.w; ++q) sum += x.at(i, j, p, q);
    const double mean = sum / count;
    double squares = 0;
    for (std::int64_t i = 0; i < x.n; ++i)
      for (std::int64_t p = 0; p < x.h; ++p)
        for (std::int64_t q = 0; q < x.w; ++q) squares += (x.at(i, j, p, q) - mean) * (x.at(i, j, p, q) - mean);
    const double biased = squares / count;
    const double inv_std = 1.0 / std::sqrt(biased + eps);
    saved.mean[std::size_t(j)] = mean;
    saved.inv_std[std::size_t(j)] = inv_std;
    running_mean[std::size_t(j)] = (1 - momentum) * running_mean[std::size_t(j)] + momentum * mean;
    running_var[std::size_t(j)] = (1 - momentum) * running_var[std::size_t(j)] + momentum * squares / (count - 1);
    for (std::int64_t i = 0; i < x.n; ++i)
      for (std::int64_t p = 0; p < x.h; ++p)
        for (std::int64_t q = 0; q < x.w; ++q)
          y.at(i, j, p, q) = gamma[std::size_t(j)] * (x.at(i, j, p, q) - mean) * inv_std + beta[std::size_t(j)];
  }
  return y;
}

/// Batch norm's training-mode backward pass: dx, and dgamma and dbeta per channel.
inline tensor batch_norm_backward(const tensor& dy, const tensor& x, const std::vector<double>& gamma,
                                  const batch_norm_saved& saved, std::vector<double>& dgamma, std::vector<double>& dbeta) {
  detail::require_shape(dy.same_shape(x), "batch_norm_backward: dy and x differ in shape");
  const double count = double(x.n * x.h * x.w);
  dgamma.assign(std::size_t(x.c), 0.0);
  dbeta.assign(std::size_t(x.c), 0.0);
  tensor dx(x.n, x.c, x.h, x.w);
  for (std::int64_t j = 0; j < x.c; ++j) {
    const double mean = saved.mean[std::size_t(j)], inv_std = saved.inv_std[std::size_t(j)];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t i = 0; i < x.n; ++i)
      for (std::int64_t p = 0; p < x.h; ++p)
        for (std::int64_t q = 0; q < x.w; ++q) {
          const double xhat = (x.at(i, j, p, q) - mean) * inv_std;
          sum_dy += dy.at(i, j, p, q);
          sum_dy_xhat += dy.at(i, j, p, q) * xhat;
        }
    dgamma[std::size_t(j)] = sum_dy_xhat;
    dbeta[std::size_t(j)] = sum_dy;
    for (std::int64_t i = 0; i < x.n; ++i)
      for (std::int64_t p = 0; p < x.h; ++p)
        for (std::int64_t q = 0; q < x.w; ++q) {
          const double xhat = (x.at(i, j, p, q) - mean) * inv_std;
          dx.at(i, j, p, q) = gamma[std::size_t(j)] * inv_std / count * (count * dy.at(i, j, p, q) - sum_dy - xhat * sum_dy_xhat);
        }
  }
  return dx;
}

/// max(x, 0).
inline tensor relu_forward(const tensor& x) {
  tensor y = x;
  for (double& v : y.v) v = std::max(v, 0.0);
  return y;
}

/// dx of relu_forward: dy where x > 0, else 0.
inline tensor relu_backward(const tensor& dy, const tensor& x) {
  detail::require_shape(dy.same_shape(x), "relu_backward: dy and x differ in shape");
  tensor dx = dy;
  for (std::size_t i = 0; i < dx.v.size(); ++i) dx.v[i] = x.v[i] > 0 ? dy.v[i] : 0.0;
  return dx;
}

/// Max pooling over kernel x kernel windows (padding never wins: it counts as -infinity).
inline tensor max_pool_forward(const tensor& x, std::int64_t kernel, const conv_geometry& g) {
  tensor y(x.n, x.c, detail::conv_out(x.h, kernel, g), detail::conv_out(x.w, kernel, g));
  for (std::int64_t i = 0; i < x.n; ++i)
    for (std::int64_t j = 0; j < x.c; ++j)
      for (std::int64_t p = 0; p < y.h; ++p)
        for (std::int64_t q = 0; q < y.w; ++q) {
          double best = -std::numeric_limits<double>::infinity();
          for (std::int64_t r = 0; r < kernel; ++r)
            for (std::int64_t s = 0; s < kernel; ++s) {
              const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
              if (yy >= 0 && yy < x.h && xx >= 0 && xx < x.w) best = std::max(best, x.at(i, j, yy, xx));
            }
          y.at(i, j, p, q) = best;
        }
  return y;
}

/// dx of max_pool_forward: each window's gradient goes to its maximum (the first one, on ties).
inline tensor max_pool_backward(const tensor& dy, const tensor& x, std::int64_t kernel, const conv_geometry& g) {
  tensor dx(x.n, x.c, x.h, x.w);
  for (std::int64_t i = 0; i < dy.n; ++i)
    for (std::int64_t j = 0; j < dy.c; ++j)
      for (std::int64_t p = 0; p < dy.h; ++p)
        for (std::int64_t q = 0; q < dy.w; ++q) {
          double best = -std::numeric_limits<double>::infinity();
          std::int64_t by = -1, bx = -1;
          for (std::int64_t r = 0; r < kernel; ++r)
            for (std::int64_t s = 0; s < kernel; ++s) {
              const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
              if (yy >= 0 && yy < x.h && xx >= 0 && xx < x.w && x.at(i, j, yy, xx) > best) {
                best = x.at(i, j, yy, xx);
                by = yy;
                bx = xx;
              }
            }
          if (by >= 0) dx.at(i, j, by, bx) += dy.at(i, j, p, q);
        }
  return dx;
}

/// Average pooling over kernel x kernel windows, padding counted as zeros (torch's default).
inline tensor average_pool_forward(const tensor& x, std::int64_t kernel, const conv_geometry& g) {
  tensor y(x.n, x.c, detail::conv_out(x.h, kernel, g), detail::conv_out(x.w, kernel, g));
  const double area = double(kernel * kernel);
  for (std::int64_t i = 0; i < x.n; ++i)
    for (std::int64_t j = 0; j < x.c; ++j)
      for (std::int64_t p = 0; p < y.h; ++p)
        for (std::int64_t q = 0; q < y.w; ++q) {
          double sum = 0;
          for (std::int64_t r = 0; r < kernel; ++r)
            for (std::int64_t s = 0; s < kernel; ++s) {
              const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
              if (yy >= 0 && yy < x.h && xx >= 0 && xx < x.w) sum += x.at(i, j, yy, xx);
            }
          y.at(i, j, p, q) = sum / area;
        }
  return y;
}

/// dx of average_pool_forward.
inline tensor average_pool_backward(const tensor& dy, const tensor& x_shape, std::int64_t kernel, const conv_geometry& g) {
  tensor dx(x_shape.n, x_shape.c, x_shape.h, x_shape.w);
  const double area = double(kernel * kernel);
  for (std::int64_t i = 0; i < dy.n; ++i)
    for (std::int64_t j = 0; j < dy.c; ++j)
      for (std::int64_t p = 0; p < dy.h; ++p)
        for (std::int64_t q = 0; q < dy.w; ++q)
          for (std::int64_t r = 0; r < kernel; ++r)
            for (std::int64_t s = 0; s < kernel; ++s) {
              const std::int64_t yy = p * g.stride - g.pad + r, xx = q * g.stride - g.pad + s;
              if (yy >= 0 && yy < dx.h && xx >= 0 && xx < dx.w) dx.at(i, j, yy, xx) += dy.at(i, j, p, q) / area;
            }
  return dx;
}

/// The mean over H and W of every channel: N x C x H x W -> N x C x 1 x 1.
inline tensor global_average_pool_forward(const tensor& x) {
  tensor y(x.n, x.c);
  for (std::int64_t i = 0; i < x.n; ++i)
    for (std::int64_t j = 0; j < x.c; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < x.h; ++p)
        for (std::int64_t q = 0; q < x.w; ++q) sum += x.at(i, j, p, q);
      y.at(i, j, 0, 0) = sum / double(x.h * x.w);
    }
  return y;
}

/// dx of global_average_pool_forward: each output's gradient spread evenly over its plane.
inline tensor global_average_pool_backward(const tensor& dy, const tensor& x_shape) {
  tensor dx(x_shape.n, x_shape.c, x_shape.h, x_shape.w);
  for (std::int64_t i = 0; i < dx.n; ++i)
    for (std::int64_t j = 0; j < dx.c; ++j)
      for (std::int64_t p = 0; p < dx.h; ++p)
        for (std::int64_t q = 0; q < dx.w; ++q) dx.at(i, j, p, q) = dy.at(i, j, 0, 0) / double(dx.h * dx.w);
  return dx;
}

/// y = x W^T + b: x N x in (flat), W out x in (torch's order, as a tensor out x in x 1 x 1), b out.
inline tensor linear_forward(const tensor& x, const tensor& weight, const std::vector<double>& bias) {
  const std::int64_t in = x.c * x.h * x.w;
  detail::require_shape(weight.c == in && std::int64_t(bias.size()) == weight.n, "linear_forward: W is out x in, b has out values");
  tensor y(x.n, weight.n);
  for (std::int64_t i = 0; i < x.n; ++i)
    for (std::int64_t o = 0; o < weight.n; ++o) {
      double sum = bias[std::size_t(o)];
      for (std::int64_t k = 0; k < in; ++k) sum += x.v[std::size_t(i * in + k)] * weight.at(o, k, 0, 0);
      y.at(i, o, 0, 0) = sum;
    }
  return y;
}

/// linear_forward's gradients: returns dx (x's shape); dweight and dbias are filled.
inline tensor linear_backward(const tensor& dy, const tensor& x, const tensor& weight, tensor& dweight, std::vector<double>& dbias) {
  const std::int64_t in = x.c * x.h * x.w;
  tensor dx(x.n, x.c, x.h, x.w);
  dweight = tensor(weight.n, weight.c);
  dbias.assign(std::size_t(weight.n), 0.0);
  for (std::int64_t i = 0; i < x.n; ++i)
    for (std::int64_t o = 0; o < weight.n; ++o) {
      const double g = dy.at(i, o, 0, 0);
      dbias[std::size_t(o)] += g;
      for (std::int64_t k = 0; k < in; ++k) {
        dx.v[std::size_t(i * in + k)] += g * weight.at(o, k, 0, 0);
        dweight.at(o, k, 0, 0) += g * x.v[std::size_t(i * in + k)];
      }
    }
  return dx;
}

/// Mean softmax cross-entropy of `logits` (N x classes) against integer labels; `dlogits`
/// gets its gradient, (softmax - one_hot) / N.
inline double softmax_cross_entropy(const tensor& logits, const std::vector<std::int64_t>& labels, tensor& dlogits) {
  detail::require_shape(std::int64_t(labels.size()) == logits.n, "softmax_cross_entropy: one label per row");
  const std::int64_t classes = logits.c * logits.h * logits.w;
  dlogits = tensor(logits.n, logits.c, logits.h, logits.w);
  double loss = 0;
  for (std::int64_t i = 0; i < logits.n; ++i) {
    const std::int64_t label = labels[std::size_t(i)];
    detail::require_shape(label >= 0 && label < classes, "softmax_cross_entropy: label " + std::to_string(label) +
                                                             " is not one of the " + std::to_string(classes) + " classes");
    const double* row = logits.v.data() + i * classes;
    const double top = *std::max_element(row, row + classes);
    double sum = 0;
    for (std::int64_t k = 0; k < classes; ++k) sum += std::exp(row[k] - top);
    loss += std::log(sum) + top - row[label];
    for (std::int64_t k = 0; k < classes; ++k) {
      dlogits.v[std::size_t(i * classes + k)] = (std::exp(row[k] - top) / sum - (k == label ? 1.0 : 0.0)) / double(logits.n);
    }
  }
  return loss / double(logits.n);
}

}  // namespace reference
}  // namespace gpucmp
