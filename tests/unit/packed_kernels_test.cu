// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The packed NHWC kernels' per-thread work (training/pool_gradients.cuh, batch_norm.cuh,
// inference pooling's vector kernel in models/pooling.cuh, and the quantized stem's
// space-to-depth input in models/space_to_depth_quantize.cuh) run on the host, thread by thread,
// against straightforward host loops or the host reference: their index arithmetic, tie rule,
// masks and row coverage are checked where there is no GPU. Integer-valued data keep every
// float sum exact, so the comparisons are exact.
#include "catch.hpp"
#include "stride_two_stem.hpp"

#include <gpucmp/models/pooling.cuh>
#include <gpucmp/models/space_to_depth_quantize.cuh>
#include <gpucmp/ops/packed_elements.cuh>
#include <gpucmp/training/batch_norm.cuh>
#include <gpucmp/training/pool_gradients.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

// Value i of a deterministic sequence of small integers in [-range, range].
float small_integer(std::uint64_t seed, std::size_t i, int range) {
  return float(int(gpucmp::random_bits(seed, i) % std::uint64_t(2 * range + 1)) - range);
}

template <class T>
std::vector<gpucmp::packed<T>> packs_of(const std::vector<float>& values) {
  constexpr int width = gpucmp::packed<T>::width;
  std::vector<gpucmp::packed<T>> p(values.size() / width);
  for (std::size_t i = 0; i < values.size(); ++i) p[i / width].v[i % width] = gpucmp::from_float<T>(values[i]);
  return p;
}

template <class T>
float at(const std::vector<gpucmp::packed<T>>& p, std::size_t element) {
  constexpr int width = gpucmp::packed<T>::width;
  return gpucmp::to_float(p[element / width].v[element % width]);
}

template <class T>
void check_pooling(int n, int c, int h, int w, int kernel, int stride, int pad) {
  constexpr int width = gpucmp::packed<T>::width;
  INFO(sizeof(T) << "-byte elements, n" << n << " c" << c << " h" << h << " w" << w << " k" << kernel << " s" << stride << " p" << pad);
  const gpucmp::pool_shape shape{n, c, h, w, kernel, stride, pad, gpucmp::conv_layout::nhwc};
  const int p = int(shape.p()), q = int(shape.q());
  std::vector<float> xv(std::size_t(n) * h * w * c), dyv(std::size_t(n) * p * q * c);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = small_integer(1, i, 3);  // 7 values: ties in most windows
  for (std::size_t i = 0; i < dyv.size(); ++i) dyv[i] = small_integer(2, i, 8);
  const auto x = packs_of<T>(xv), dy = packs_of<T>(dyv);
  std::vector<gpucmp::packed<T>> y(dyv.size() / width), dx(xv.size() / width), dx_average(xv.size() / width);
  std::vector<std::uint8_t> argmax(dyv.size());
  // The dims the launcher gives the kernels (host vectors are 16-byte aligned, as device buffers).
  gpucmp::detail::nhwc_pool_dims d{};
  REQUIRE(gpucmp::detail::packed_pool_dims<T>(shape, {x.data(), y.data(), dy.data(), dx.data()}, argmax.data(), d));
  for (int i = 0; i < int(y.size()); ++i) gpucmp::detail::max_pool_argmax_packed_at(d, x.data(), y.data(), argmax.data(), i);
  for (int i = 0; i < int(dx.size()); ++i) {
    gpucmp::detail::pool_backward_packed_at(gpucmp::pool_kind::max, d, dy.data(), argmax.data(), dx.data(), i);
    gpucmp::detail::pool_backward_packed_at(gpucmp::pool_kind::average, d, dy.data(), nullptr, dx_average.data(), i);
  }
  // Host loops: the first maximum in row-major window order wins; its gradient goes there.
  std::vector<float> want_dx(xv.size(), 0.0f), want_average(xv.size(), 0.0f);
  int mismatches = 0;
  for (int ni = 0; ni < n; ++ni)
    for (int pi = 0; pi < p; ++pi)
      for (int qi = 0; qi < q; ++qi)
        for (int ci = 0; ci < c; ++ci) {
          const std::size_t o = ((std::size_t(ni) * p + pi) * q + qi) * c + ci;
          float best = 0;
          int where = -1;
          std::size_t best_at = 0;
          for (int r = 0; r < kernel; ++r)
            for (int t = 0; t < kernel; ++t) {
              const int hi = pi * stride - pad + r, wi = qi * stride - pad + t;
              if (hi < 0 || hi >= h || wi < 0 || wi >= w) continue;
              const std::size_t e = ((std::size_t(ni) * h + hi) * w + wi) * c + ci;
              want_average[e] += dyv[o] / float(kernel * kernel);
              if (where < 0 || xv[e] > best) {
                best = xv[e];
                where = r * kernel + t;
                best_at = e;
              }
            }
          want_dx[best_at] += dyv[o];
          if (at(y, o) != best || argmax[o] != where) ++mismatches;
        }
  CHECK(mismatches == 0);
  int dx_mismatches = 0, average_mismatches = 0;
  for (std::size_t e = 0; e < xv.size(); ++e) {
    if (at(dx, e) != want_dx[e]) ++dx_mismatches;
    if (at(dx_average, e) != gpucmp::to_float(gpucmp::from_float<T>(want_average[e]))) ++average_mismatches;
  }
  CHECK(dx_mismatches == 0);
  CHECK(average_mismatches == 0);
}

// The packed batch norm kernels' threads over one layer, against per-element host loops.
template <class T>
void check_batch_norm(int rows, int c, bool residual, bool relu) {
  constexpr int width = gpucmp::packed<T>::width;
  INFO(sizeof(T) << "-byte elements, " << rows << " rows x " << c << " channels" << (residual ? ", residual" : "")
                 << (relu ? ", relu" : ""));
  const int row_packs = c / width, packs = rows * row_packs;
  const std::size_t count = std::size_t(rows) * c;
  std::vector<float> xv(count), zv(count), dyv(count), dy2v(count), a(c), b(c), c1(c), c2(c), c3(c), mean(c);
  for (std::size_t i = 0; i < count; ++i) {
    xv[i] = small_integer(3, i, 6);
    zv[i] = small_integer(4, i, 2);
    dyv[i] = small_integer(5, i, 4);
    dy2v[i] = small_integer(6, i, 4);
  }
  for (int k = 0; k < c; ++k) {
    a[std::size_t(k)] = small_integer(7, std::size_t(k), 2);
    b[std::size_t(k)] = small_integer(8, std::size_t(k), 3);
    c1[std::size_t(k)] = small_integer(9, std::size_t(k), 2);
    c2[std::size_t(k)] = small_integer(10, std::size_t(k), 2);
    c3[std::size_t(k)] = small_integer(11, std::size_t(k), 2);
    mean[std::size_t(k)] = small_integer(12, std::size_t(k), 2);
  }
  const auto x = packs_of<T>(xv), z = packs_of<T>(zv), dy = packs_of<T>(dyv), dy2 = packs_of<T>(dy2v);
  const std::size_t pack_count = static_cast<std::size_t>(packs);
  std::vector<gpucmp::packed<T>> y(pack_count), dx(pack_count), dz(pack_count);
  std::vector<std::uint8_t> mask(pack_count, 0xAB);
  for (int i = 0; i < packs; ++i) {
    gpucmp::detail::bn_apply_packed_at(x.data(), residual ? z.data() : nullptr, y.data(), relu ? mask.data() : nullptr, a.data(),
                                       b.data(), row_packs, relu, i);
  }
  for (int i = 0; i < packs; ++i) {
    gpucmp::detail::bn_apply_gradient_packed_at(x.data(), y.data(), relu ? mask.data() : nullptr, dy.data(), dy2.data(), dx.data(),
                                                residual ? dz.data() : nullptr, c1.data(), c2.data(), c3.data(), row_packs, relu, i);
  }
  int y_bad = 0, mask_bad = 0, dx_bad = 0, dz_bad = 0;
  std::vector<double> want_s1(std::size_t(c), 0.0), want_s2(std::size_t(c), 0.0), want_f1(std::size_t(c), 0.0),
      want_f2(std::size_t(c), 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t ch = i % std::size_t(c);
    float v = xv[i] * a[ch] + b[ch] + (residual ? zv[i] : 0.0f);
    if (relu) v = v > 0 ? v : 0.0f;
    if (at(y, i) != v) ++y_bad;
    const bool positive = v > 0;
    if (relu && (((mask[i / width] >> (i % width)) & 1u) != 0) != positive) ++mask_bad;
    const float e = relu && !positive ? 0.0f : dyv[i] + dy2v[i];
    if (residual && at(dz, i) != e) ++dz_bad;
    if (at(dx, i) != gpucmp::to_float(gpucmp::from_float<T>(e * c1[ch] + xv[i] * c2[ch] + c3[ch]))) ++dx_bad;
    want_s1[ch] += e;
    want_s2[ch] += double(e) * (xv[i] - mean[ch]);
    const double d = xv[i] - xv[ch];  // forward: shifted by row 0's value
    want_f1[ch] += d;
    want_f2[ch] += d * d;
  }
  CHECK(y_bad == 0);
  CHECK(mask_bad == 0);
  CHECK(dx_bad == 0);
  CHECK(dz_bad == 0);

  // The sums kernel's grid as batch_norm_training launches it: lanes = gcd(row packs, 256),
  // 256 / lanes rows per block pass, a few splits; every row must be counted exactly once.
  const int lanes = std::gcd(row_packs, 256), tall = 256 / lanes, splits = 3;
  auto sums = [&](bool backward) {
    std::vector<double> s1(std::size_t(c), 0.0), s2(std::size_t(c), 0.0);
    for (int split = 0; split < splits; ++split)
      for (int block = 0; block < row_packs / lanes; ++block)
        for (int thread = 0; thread < 256; ++thread) {
          float t1[width] = {}, t2[width] = {};
          const int pack = block * lanes + thread % lanes;
          gpucmp::detail::bn_accumulate_packed(x.data(), y.data(), relu ? mask.data() : nullptr, backward ? dy.data() : nullptr,
                                               backward ? dy2.data() : nullptr, mean.data(), rows, row_packs, pack,
                                               split * tall + thread / lanes, splits * tall, relu, t1, t2);
          for (int k = 0; k < width; ++k) {
            s1[std::size_t(pack * width + k)] += t1[k];
            s2[std::size_t(pack * width + k)] += t2[k];
          }
        }
    return std::make_pair(s1, s2);
  };
  const auto [f1, f2] = sums(false);
  const auto [b1, b2] = sums(true);
  CHECK(f1 == want_f1);
  CHECK(f2 == want_f2);
  CHECK(b1 == want_s1);
  CHECK(b2 == want_s2);
}

// Inference pooling's vector kernel (models/pooling.cuh) thread by thread on the host, every
// output against check_pool's reference: max in every stored type (all-negative values too: a
// maximum that started from zero or counted the padding would show), averages in the floating
// types.
template <class T>
void check_vector_pooling(gpucmp::pool_kind kind, const gpucmp::pool_shape& shape, bool negative, const gpucmp::tolerance& tol) {
  INFO(sizeof(T) << "-byte elements, " << gpucmp::to_string(kind) << ", n" << shape.n << " c" << shape.c << " h" << shape.h << " w"
                 << shape.w << " k" << shape.kernel << " s" << shape.stride << " p" << shape.pad << (negative ? ", negative" : ""));
  const std::size_t in = std::size_t(shape.n * shape.h * shape.w * shape.c), out = std::size_t(shape.n * shape.p() * shape.q() * shape.c);
  std::vector<uint4> x_storage((in * sizeof(T) + 15) / 16), y_storage((out * sizeof(T) + 15) / 16);  // 16-byte aligned
  T* x = reinterpret_cast<T*>(x_storage.data());
  T* y = reinterpret_cast<T*>(y_storage.data());
  for (std::size_t i = 0; i < in; ++i) {
    const float v = small_integer(11, i, 20) / 4;  // steps of 0.25, exact in every type here
    x[i] = gpucmp::from_double<T>(negative ? -1 - std::fabs(v) : v);
  }
  gpucmp::detail::pool_vector_dims d{};
  REQUIRE(gpucmp::detail::pool_vector_dims_for(shape, x, y, d));
  CHECK(std::size_t(d.count) * (16 / sizeof(T)) == out);
  for (int i = 0; i < d.count; ++i) gpucmp::detail::pool_vector_at(kind, d, static_cast<const T*>(x), y, i);
  const gpucmp::verification v = gpucmp::check_pool(kind, shape, std::vector<T>(x, x + in), std::vector<T>(y, y + out), tol);
  INFO(v.summary());
  CHECK(v.checked == out);
  CHECK(v.passed());
}

}  // namespace

TEST_CASE("inference pooling's vector threads match the host reference in FP32, BF16, FP16, INT8 and FP8", "[packed][pooling]") {
  using gpucmp::numerics;
  // ResNet's stem window over odd planes; 5x5 stride 1 with padding 2; 3 vectors of INT8 a pixel
  // (a divisor that is no power of two); 2x2 windows without padding.
  const gpucmp::pool_shape shapes[] = {{2, 64, 9, 11, 3, 2, 1}, {1, 32, 7, 8, 5, 1, 2}, {3, 48, 6, 5, 3, 2, 1}, {1, 16, 8, 8, 2, 2, 0}};
  for (const gpucmp::pool_shape& shape : shapes) {
    for (const bool negative : {false, true}) {
      check_vector_pooling<float>(gpucmp::pool_kind::max, shape, negative, gpucmp::conv_tolerance(numerics::fp32));
      check_vector_pooling<__nv_bfloat16>(gpucmp::pool_kind::max, shape, negative, gpucmp::conv_tolerance(numerics::bf16));
      check_vector_pooling<__half>(gpucmp::pool_kind::max, shape, negative, gpucmp::conv_tolerance(numerics::fp16));
      check_vector_pooling<std::int8_t>(gpucmp::pool_kind::max, shape, negative, gpucmp::conv_tolerance(numerics::int8));
      check_vector_pooling<__nv_fp8_e4m3>(gpucmp::pool_kind::max, shape, negative, gpucmp::conv_tolerance(numerics::fp8_e4m3));
    }
    check_vector_pooling<float>(gpucmp::pool_kind::average, shape, false, gpucmp::conv_tolerance(numerics::fp32));
    check_vector_pooling<__half>(gpucmp::pool_kind::average, shape, false, gpucmp::conv_tolerance(numerics::fp16));
    check_vector_pooling<__nv_bfloat16>(gpucmp::pool_kind::average, shape, false, gpucmp::conv_tolerance(numerics::bf16));
  }
  // Where the vector kernel does not apply, the scalar kernel runs instead.
  alignas(16) std::int8_t bytes[64] = {};
  gpucmp::detail::pool_vector_dims d{};
  const gpucmp::pool_shape resnet{1, 64, 1, 1, 1, 1, 0};
  CHECK(gpucmp::detail::pool_vector_dims_for(resnet, bytes, bytes, d));
  CHECK_FALSE(gpucmp::detail::pool_vector_dims_for(gpucmp::pool_shape{1, 24, 1, 1, 1, 1, 0}, bytes, bytes, d));  // 24 of 16 bytes
  CHECK_FALSE(gpucmp::detail::pool_vector_dims_for(resnet, bytes + 1, bytes, d));                              // unaligned
  gpucmp::pool_shape nchw = resnet;
  nchw.layout = gpucmp::conv_layout::nchw;
  CHECK_FALSE(gpucmp::detail::pool_vector_dims_for(nchw, bytes, bytes, d));
}

TEST_CASE("packed max pooling's threads give the host loops' maxima, argmax and gradients", "[packed][pooling]") {
  check_pooling<float>(2, 8, 9, 11, 3, 2, 1);     // ResNet's stem window, odd sizes
  check_pooling<__half>(2, 16, 10, 7, 3, 2, 1);
  check_pooling<float>(1, 4, 8, 8, 2, 2, 0);      // one pack of FP32 channels, 2 x 2 windows
  check_pooling<__half>(1, 8, 5, 6, 3, 1, 1);     // overlapping windows, stride 1
}

TEST_CASE("packed batch norm threads give the host loops' outputs, masks, gradients and sums", "[packed][batch_norm]") {
  // Rows enough that each thread takes several (3 splits of `tall` rows per pass).
  check_batch_norm<float>(200, 64, true, true);    // 16 packs per row: lanes 16, 16 rows per block pass
  check_batch_norm<float>(1600, 12, false, true);  // 3 packs per row: lanes 1, 256 rows per block pass
  check_batch_norm<__half>(300, 64, false, false);
  check_batch_norm<__half>(35, 2048, true, true);  // 256 packs per row: one row per block pass
}

namespace {

// Every pixel of the space-to-depth image made by space_to_depth_pixel against the image's
// definition, X'(a, b, (dy, dx, c)) = quantize(x(2a + dy - off, 2b + dx - off, c) / scale), zero
// outside x and past 4C channels, byte for byte.
template <class Stored>
void check_space_to_depth_pixels(const gpucmp::conv_problem& p) {
  const gpucmp::space_to_depth_conv g(p);
  const gpucmp::conv_problem &o = g.original, &t = g.transformed;
  INFO(p.shape_name() << " as " << t.shape_name());
  std::vector<__half> x(std::size_t(o.n * o.h * o.w * o.c));
  // Values from -100 to 100 at an inverse scale of 1.5: INT8 rounds and saturates at 127.
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = __float2half(small_integer(7, i, 100) + 0.25f);
  const float inverse = 1.5f;
  const gpucmp::detail::space_to_depth_dims d = gpucmp::detail::space_to_depth_dims_for(g);
  REQUIRE(d.pixels == t.n * t.h * t.w);
  std::size_t nonzero = 0, mismatches = 0;
  for (int i = 0; i < d.pixels; ++i) {
    const uint4 got = gpucmp::detail::space_to_depth_pixel<Stored>(x.data(), d, inverse, i);
    unsigned char bytes[16];
    std::memcpy(bytes, &got, 16);
    const std::int64_t b = i % t.w, a = (i / t.w) % t.h, n = i / (t.w * t.h);
    for (int at = 0; at < 16; ++at) {
      const std::int64_t block = at / o.c, c = at % o.c, dy = block / 2, dx = block % 2;
      const std::int64_t row = 2 * a + dy - g.offset, col = 2 * b + dx - g.offset;
      unsigned char want = 0;
      if (block < 4 && row >= 0 && row < o.h && col >= 0 && col < o.w) {
        const Stored q = gpucmp::detail::quantize_saturated<Stored>(
            __half2float(x[std::size_t(((n * o.h + row) * o.w + col) * o.c + c)]) * inverse);
        std::memcpy(&want, static_cast<const void*>(&q), 1);
      }
      nonzero += want != 0;
      mismatches += bytes[at] != want;
    }
  }
  CHECK(mismatches == 0);
  CHECK(nonzero > std::size_t(d.pixels));  // the data are not all zeros
}

using gpucmp_test::stride_two_stem;

}  // namespace

TEST_CASE("the quantized stem's input, pixel by pixel, is its space-to-depth image in INT8 and FP8",
          "[space_to_depth][quantized]") {
  // ResNet-50's stem small (7x7, pad 3: offset 1), odd and even images, pad 2 (offset 0), 1 to 4 channels.
  for (const gpucmp::conv_problem& p : {stride_two_stem(3, 20, 20, 7, 3), stride_two_stem(3, 17, 22, 7, 3),
                                        stride_two_stem(4, 9, 11, 5, 2), stride_two_stem(1, 8, 9, 3, 1),
                                        stride_two_stem(2, 10, 7, 3, 0)}) {
    check_space_to_depth_pixels<std::int8_t>(p);
    check_space_to_depth_pixels<__nv_fp8_e4m3>(p);
  }
  // An image of 2^31 pixels or more is refused by name (its indices are 32-bit).
  gpucmp::conv_problem huge = stride_two_stem(3, 1 << 14, 1 << 14, 7, 3);
  huge.n = 64;
  CHECK_THROWS_WITH(gpucmp::detail::space_to_depth_dims_for(gpucmp::space_to_depth_conv(huge)),
                    GPUCMP_CONTAINS("has 2^31 pixels or more"));
}
