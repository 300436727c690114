// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The model API on the GPU: fused convolution layers in every precision, epilogue and layout
// (including the 3-channel stem) verified, and every fusion path in NCHW; pooling and softmax
// against host references with a corrupted output caught, NCHW pooling against NHWC pooling;
// a small CNN's logits against a whole-network FP64 reference on the host in both layouts;
// eager and CUDA-graph runs bit-identical; ResNet-50 v1.5 built and verified, and traced
// layer by layer in kernel mode; and an impossible batch reported as a typed out-of-memory
// with the largest batch that fits.
#include "catch.hpp"
#include "model_test_helpers.hpp"
#include "search_pace.hpp"
#include "small_cnn.hpp"

#include <gpucmp/measure/engine.hpp>
#if GPUCMP_TEST_KERNEL_MODE
#include <gpucmp/measure/kernel_trace.hpp>
#endif
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/network_memory.hpp>
#include <gpucmp/models/resnet18.hpp>
#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

const gpucmp::numerics all_dtypes[] = {gpucmp::numerics::fp32, gpucmp::numerics::tf32, gpucmp::numerics::fp16,
                                         gpucmp::numerics::bf16};

using gpucmp_test::small_cnn;

// The whole network in double on the host, from FP32 parameters and an NCHW input (the
// reference the network's logits must match within the precision's error).
std::vector<double> host_forward(const gpucmp::network_definition& def, std::int64_t batch, const std::vector<float>& input) {
  std::vector<std::vector<double>> t(def.layers().size() + 1);
  const auto& in = def.shape(def.input());
  t[0].resize(input.size());
  for (std::int64_t n = 0; n < batch; ++n)  // NCHW -> NHWC
    for (std::int64_t c = 0; c < in.c; ++c)
      for (std::int64_t p = 0; p < in.h * in.w; ++p) t[0][std::size_t((n * in.h * in.w + p) * in.c + c)] = input[std::size_t((n * in.c + c) * in.h * in.w + p)];
  for (const auto& l : def.layers()) {
    const auto& xs = def.shape(l.input);
    const auto& ys = def.shape(l.output);
    const std::vector<double>& x = t[std::size_t(l.input.id)];
    std::vector<double>& y = t[std::size_t(l.output.id)];
    y.assign(std::size_t(batch * ys.elements()), 0.0);
    for (std::int64_t n = 0; n < batch; ++n) {
      if (l.kind == gpucmp::layer_kind::linear) {
        for (std::int64_t o = 0; o < ys.c; ++o) {
          double s = l.bias[std::size_t(o)];
          for (std::int64_t i = 0; i < xs.c; ++i) s += double(l.weight[std::size_t(o * xs.c + i)]) * x[std::size_t(n * xs.c + i)];
          y[std::size_t(n * ys.c + o)] = s;
        }
        continue;
      }
      if (l.kind == gpucmp::layer_kind::softmax) {
        double most = -INFINITY, sum = 0;
        for (std::int64_t c = 0; c < xs.c; ++c) most = std::max(most, x[std::size_t(n * xs.c + c)]);
        for (std::int64_t c = 0; c < xs.c; ++c) sum += std::exp(x[std::size_t(n * xs.c + c)] - most);
        for (std::int64_t c = 0; c < xs.c; ++c) y[std::size_t(n * xs.c + c)] = std::exp(x[std::size_t(n * xs.c + c)] - most) / sum;
        continue;
      }
      for (std::int64_t p = 0; p < ys.h; ++p)
        for (std::int64_t q = 0; q < ys.w; ++q)
          for (std::int64_t k = 0; k < ys.c; ++k) {
            const std::size_t at = std::size_t(((n * ys.h + p) * ys.w + q) * ys.c + k);
            auto xat = [&](std::int64_t h, std::int64_t w, std::int64_t c) { return x[std::size_t(((n * xs.h + h) * xs.w + w) * xs.c + c)]; };
            if (l.kind == gpucmp::layer_kind::conv) {
              const std::int64_t r = l.conv.kernel;
              double s = l.bias[std::size_t(k)];
              for (std::int64_t c = 0; c < xs.c; ++c)
                for (std::int64_t i = 0; i < r; ++i)
                  for (std::int64_t j = 0; j < r; ++j) {
                    const std::int64_t h = p * l.conv.stride - l.conv.pad + i, w = q * l.conv.stride - l.conv.pad + j;
                    if (h < 0 || h >= xs.h || w < 0 || w >= xs.w) continue;
                    s += double(l.weight[std::size_t(((k * xs.c + c) * r + i) * r + j)]) * xat(h, w, c);
                  }
              if (l.residual.valid()) s += t[std::size_t(l.residual.id)][at];
              y[at] = l.conv.relu ? std::max(s, 0.0) : s;
            } else if (l.kind == gpucmp::layer_kind::global_average_pool) {
              double s = 0;
              for (std::int64_t h = 0; h < xs.h; ++h)
                for (std::int64_t w = 0; w < xs.w; ++w) s += xat(h, w, k);
              y[at] = s / double(xs.h * xs.w);
            } else {
              double best = -INFINITY, s = 0;
              for (std::int64_t i = 0; i < l.pool_kernel; ++i)
                for (std::int64_t j = 0; j < l.pool_kernel; ++j) {
                  const std::int64_t h = p * l.pool_stride - l.pool_pad + i, w = q * l.pool_stride - l.pool_pad + j;
                  if (h < 0 || h >= xs.h || w < 0 || w >= xs.w) continue;
                  best = std::max(best, xat(h, w, k));
                  s += xat(h, w, k);
                }
              y[at] = l.kind == gpucmp::layer_kind::max_pool ? best : s / double(l.pool_kernel * l.pool_kernel);
            }
          }
    }
  }
  return t.back();
}

using gpucmp_test::random_values;

}  // namespace

namespace {

using gpucmp_test::cudnn_handle;
using gpucmp_test::make_cudnn_handle;

// One fused layer's tensors for problem p, random in [-1, 1) (z too), and a 64 MiB workspace.
struct layer_buffers {
  gpucmp::device_buffer<unsigned char> x, w, b, z, y, ws;

  layer_buffers(const gpucmp::conv_problem& p, cudaStream_t stream)
      : x(bytes(p, p.x_elements())), w(bytes(p, p.w_elements())), b(bytes(p, p.k)), z(bytes(p, p.y_elements())),
        y(bytes(p, p.y_elements())), ws(std::size_t{64} << 20) {
    std::uint64_t seed = 1;
    for (auto* buf : {&x, &w, &b, &z}) {
      switch (p.dtype) {
        case gpucmp::numerics::fp16: fill<__half>(*buf, seed++, stream); break;
        case gpucmp::numerics::bf16: fill<__nv_bfloat16>(*buf, seed++, stream); break;
        default: fill<float>(*buf, seed++, stream); break;
      }
    }
  }
  gpucmp::fused_conv_tensors tensors(bool residual) { return {x.data(), w.data(), b.data(), residual ? z.data() : nullptr, y.data()}; }

 private:
  static std::size_t bytes(const gpucmp::conv_problem& p, std::int64_t elements) {
    return std::size_t(elements) * gpucmp::activation_bytes(p.dtype);
  }
  template <class T>
  static void fill(gpucmp::device_buffer<unsigned char>& buf, std::uint64_t seed, cudaStream_t stream) {
    gpucmp::fill_uniform(reinterpret_cast<T*>(buf.data()), buf.bytes() / sizeof(T), seed, -1, 1, stream);
  }
};

}  // namespace

TEST_CASE("fused convolution layers verify in every precision, epilogue and layout", "[gpu][models]") {
  gpucmp::stream s;
  const cudnn_handle handle = make_cudnn_handle();
  for (gpucmp::conv_layout layout : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw}) {
    for (gpucmp::numerics t : all_dtypes) {
      for (std::int64_t c : {3, 32}) {  // the 3-channel stem has no fused engine: another path must win
        for (gpucmp::conv_epilogue e : {gpucmp::conv_epilogue{false, true}, gpucmp::conv_epilogue{true, true},
                                        gpucmp::conv_epilogue{false, false}}) {
          gpucmp::conv_problem p;
          p.layout = layout;
          p.n = 2;  // small enough that every output is checked
          p.c = c;
          p.h = p.w = 10;
          p.k = 32;
          p.r = p.s = 3;
          p.pad_h = p.pad_w = 1;
          p.dtype = t;
          layer_buffers buf(p, s.get());
          auto set = std::make_shared<gpucmp::fused_conv_candidates>(handle.get(), p, e, 4, buf.ws.bytes());
          gpucmp::fused_conv layer(set, buf.tensors(e.residual), buf.ws.data(), buf.ws.bytes());
          gpucmp::search(layer, gpucmp::shared_engine(), gpucmp_test::paced(gpucmp::network_options::fast_search()));
          const std::vector<gpucmp::candidate_time>& log = layer.search_log();
          const gpucmp::verification v = layer.verify(s.get());
          INFO(set->name() << ": " << layer.algorithm().describe() << ": " << v.summary());
          CHECK(v.passed());
          CHECK(v.checked == std::size_t(p.y_elements()));
          const gpucmp::verification all = layer.verify_every_output(s.get());  // the same, compared on the GPU
          INFO(all.summary());
          CHECK(all.passed());
          CHECK(all.checked == std::size_t(p.y_elements()));
          CHECK(layer.algorithm().conv.searched_seconds > 0);
          // Every path that ran was verified or rejected: nothing slower than the choice is unverified.
          CHECK(!log.empty());
        }
      }
    }
  }
}

TEST_CASE("in NCHW every fusion path that cuDNN offers runs and verifies", "[gpu][models]") {
  gpucmp::stream s;
  const cudnn_handle handle = make_cudnn_handle();
  gpucmp::conv_problem p;
  p.n = 2;
  p.c = 32;
  p.h = p.w = 12;
  p.k = 48;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.layout = gpucmp::conv_layout::nchw;
  for (gpucmp::numerics t : {gpucmp::numerics::fp32, gpucmp::numerics::fp16}) {
    p.dtype = t;
    layer_buffers buf(p, s.get());
    for (gpucmp::conv_epilogue e : {gpucmp::conv_epilogue{true, true}, gpucmp::conv_epilogue{false, false}}) {
      for (gpucmp::fusion_path path : gpucmp::all_fusion_paths()) {
        std::shared_ptr<gpucmp::fused_conv_candidates> set;
        try {
          set = std::make_shared<gpucmp::fused_conv_candidates>(handle.get(), p, e, 4, buf.ws.bytes(), true,
                                                                std::vector<gpucmp::fusion_path>{path});
        } catch (const gpucmp::unsupported& u) {
          // Only the fused graph may be missing (no engine fuses it); the other two always exist.
          INFO(u.what());
          CHECK(path == gpucmp::fusion_path::fused_graph);
          continue;
        }
        gpucmp::fused_conv layer(set, buf.tensors(e.residual), buf.ws.data(), buf.ws.bytes());
        gpucmp::search(layer, gpucmp::shared_engine(), gpucmp_test::paced(gpucmp::network_options::fast_search()));
        const gpucmp::verification v = layer.verify_every_output(s.get());
        INFO(set->name() << ": " << layer.algorithm().describe() << ": " << v.summary());
        CHECK(set->name().find("_nchw/") != std::string::npos);
        CHECK(layer.algorithm().path == path);
        CHECK(v.passed());
      }
    }
  }
}

TEST_CASE("pooling and softmax match host references and a corrupted output is caught", "[gpu][models]") {
  gpucmp::stream s;
  const gpucmp::tolerance tol = gpucmp::conv_tolerance(gpucmp::numerics::fp16);
  // 24 channels take the 16-byte vector kernel, 5 the scalar one.
  for (const gpucmp::pool_shape& each : {gpucmp::pool_shape{2, 24, 9, 11, 3, 2, 1}, gpucmp::pool_shape{2, 5, 9, 11, 3, 2, 1}}) {
    gpucmp::device_buffer<__half> px(std::size_t(each.n * each.h * each.w * each.c)), py(std::size_t(each.n * each.p() * each.q() * each.c));
    gpucmp::fill_uniform(px.data(), px.size(), 9, -4, 4, s.get());
    for (gpucmp::pool_kind kind : {gpucmp::pool_kind::max, gpucmp::pool_kind::average}) {
      gpucmp::pool_forward(kind, each, px.data(), py.data(), s.get());
      REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
      const std::vector<__half> xh = px.to_host();
      std::vector<__half> yh = py.to_host();
      const gpucmp::verification v = gpucmp::check_pool(kind, each, xh, yh, tol);
      INFO(each.c << " channels: " << v.summary());
      CHECK(v.passed());
      yh[17] = __float2half(float(gpucmp::to_double(yh[17])) + 0.25f);
      const gpucmp::verification bad = gpucmp::check_pool(kind, each, xh, yh, tol);
      CHECK(bad.failed == 1);
      CHECK_THAT(bad.worst_where, GPUCMP_CONTAINS("output 17"));
    }
  }
  const gpucmp::pool_shape shape{2, 24, 9, 11, 3, 2, 1};
  gpucmp::device_buffer<__half> x(std::size_t(shape.n * shape.h * shape.w * shape.c));
  gpucmp::fill_uniform(x.data(), x.size(), 9, -4, 4, s.get());
  gpucmp::device_buffer<__half> gap(std::size_t(shape.n * shape.c));
  gpucmp::global_average_pool_forward(shape.n, shape.h * shape.w, shape.c, x.data(), gap.data(), s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  CHECK(gpucmp::check_global_average_pool(shape.n, shape.h * shape.w, shape.c, x.to_host(), gap.to_host(), tol).passed());

  // NCHW pooling and global average pooling give the NHWC results, permuted (an independent
  // check: check_pool shares pool_window's indexing with the kernels).
  {
    const std::int64_t pixels = shape.h * shape.w, out_pixels = shape.p() * shape.q();
    std::vector<__half> nhwc_in = x.to_host(), nchw_in(nhwc_in.size());
    for (std::int64_t n = 0; n < shape.n; ++n)
      for (std::int64_t c = 0; c < shape.c; ++c)
        for (std::int64_t q = 0; q < pixels; ++q)
          nchw_in[std::size_t((n * shape.c + c) * pixels + q)] = nhwc_in[std::size_t((n * pixels + q) * shape.c + c)];
    gpucmp::device_buffer<__half> xc(nchw_in.size()), yc(std::size_t(shape.n * out_pixels * shape.c)), yn(yc.size()), gapc(gap.size());
    xc.copy_from_host(nchw_in);
    gpucmp::pool_shape nchw = shape;
    nchw.layout = gpucmp::conv_layout::nchw;
    for (gpucmp::pool_kind kind : {gpucmp::pool_kind::max, gpucmp::pool_kind::average}) {
      gpucmp::pool_forward(kind, shape, x.data(), yn.data(), s.get());
      gpucmp::pool_forward(kind, nchw, xc.data(), yc.data(), s.get());
      REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
      const std::vector<__half> a = yn.to_host(), b = yc.to_host();
      // A max is exact; an average may round differently (the NHWC vector kernel sums in FP32,
      // the NCHW kernel in double), by at most one unit in the last place of FP16.
      std::size_t differ = 0;
      for (std::int64_t n = 0; n < shape.n; ++n)
        for (std::int64_t c = 0; c < shape.c; ++c)
          for (std::int64_t q = 0; q < out_pixels; ++q) {
            const double u = gpucmp::to_double(a[std::size_t((n * out_pixels + q) * shape.c + c)]);
            const double v = gpucmp::to_double(b[std::size_t((n * shape.c + c) * out_pixels + q)]);
            const double allowed = kind == gpucmp::pool_kind::max ? 0.0 : 0x1p-10 * std::max(std::fabs(u), std::fabs(v)) + 0x1p-24;
            differ += !(std::fabs(u - v) <= allowed);
          }
      INFO(gpucmp::to_string(kind));
      CHECK(differ == 0);
      CHECK(gpucmp::check_pool(kind, nchw, nchw_in, b, tol).passed());
    }
    gpucmp::global_average_pool_forward(shape.n, pixels, shape.c, xc.data(), gapc.data(), s.get(), gpucmp::conv_layout::nchw);
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    const std::vector<__half> gap_nhwc = gap.to_host(), gap_nchw = gapc.to_host();
    std::size_t gap_differ = 0;  // N x C either way, the same FP32 sums in the same order
    for (std::size_t i = 0; i < gap_nhwc.size(); ++i) gap_differ += gpucmp::to_double(gap_nhwc[i]) != gpucmp::to_double(gap_nchw[i]);
    CHECK(gap_differ == 0);
    CHECK(gpucmp::check_global_average_pool(shape.n, pixels, shape.c, nchw_in, gapc.to_host(), tol, gpucmp::conv_layout::nchw).passed());
  }

  const std::int64_t rows = 3, cols = 1000;
  gpucmp::device_buffer<float> logits(std::size_t(rows * cols)), probs(std::size_t(rows * cols));
  gpucmp::fill_uniform(logits.data(), logits.size(), 11, -30, 30, s.get());
  gpucmp::softmax_forward(rows, cols, logits.data(), probs.data(), s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  std::vector<float> p = probs.to_host();
  CHECK(gpucmp::check_softmax(rows, cols, logits.to_host(), p).passed());
  const auto largest = std::max_element(p.begin(), p.begin() + cols);  // row 0's most likely class
  *largest *= 1.001f;
  const gpucmp::verification bad = gpucmp::check_softmax(rows, cols, logits.to_host(), p);
  CHECK(bad.failed == 1);
  CHECK_THAT(bad.worst_where, GPUCMP_CONTAINS("row 0, column " + std::to_string(largest - p.begin())));
}

namespace {

// A device buffer's bytes as elements of T, on the host.
template <class T>
std::vector<T> elements_of(const gpucmp::device_buffer<unsigned char>& bytes) {
  const std::vector<unsigned char> raw = bytes.to_host();
  std::vector<T> out(raw.size() / sizeof(T));
  std::memcpy(static_cast<void*>(out.data()), raw.data(), raw.size());
  return out;
}

// Pools random values of T (all negative when `negative`: a maximum that started from zero, or
// counted the padding, would show) and checks every output against the host reference. Bytes
// on the device, as device_buffer fills no FP8 of its own.
template <class T>
void check_pooling_of(gpucmp::pool_kind kind, const gpucmp::pool_shape& shape, double low, double high, const gpucmp::tolerance& tol,
                      cudaStream_t stream) {
  const std::size_t in = std::size_t(shape.n * shape.h * shape.w * shape.c), out = std::size_t(shape.n * shape.p() * shape.q() * shape.c);
  gpucmp::device_buffer<unsigned char> x(in * sizeof(T)), y(out * sizeof(T));
  T* const xt = reinterpret_cast<T*>(x.data());
  T* const yt = reinterpret_cast<T*>(y.data());
  gpucmp::fill_uniform(xt, in, 21, low, high, stream);
  gpucmp::fill_uniform(yt, out, 22, 0, 1, stream);  // an output never written would show
  gpucmp::pool_forward(kind, shape, static_cast<const T*>(xt), yt, stream);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  const gpucmp::verification v = gpucmp::check_pool(kind, shape, elements_of<T>(x), elements_of<T>(y), tol);
  INFO(sizeof(T) << "-byte elements, " << gpucmp::to_string(kind) << ", n" << shape.n << " c" << shape.c << " h" << shape.h << " w"
                 << shape.w << " k" << shape.kernel << " s" << shape.stride << " p" << shape.pad << ", values in [" << low << ", "
                 << high << "]: " << v.summary());
  CHECK(v.checked == out);
  CHECK(v.passed());
}

}  // namespace

TEST_CASE("max pooling is exact in every stored type, 16-byte vectors and the scalar kernel, padding never winning",
          "[gpu][models]") {
  gpucmp::stream s;
  // 64 channels fill 16-byte vectors in every type (ResNet's stem pooling is 3x3 stride 2 pad
  // 1); 20 leave INT8 and FP8 on the scalar kernel; odd planes put windows over both edges.
  const gpucmp::pool_shape shapes[] = {{3, 64, 17, 15, 3, 2, 1}, {2, 64, 9, 12, 5, 1, 2}, {2, 20, 7, 9, 3, 2, 1}, {1, 64, 8, 8, 2, 2, 0}};
  const auto max = gpucmp::pool_kind::max;
  for (const gpucmp::pool_shape& shape : shapes) {
    for (const bool negative : {false, true}) {
      const double low = negative ? -9 : -4, high = negative ? -1 : 4;
      check_pooling_of<float>(max, shape, low, high, gpucmp::conv_tolerance(gpucmp::numerics::fp32), s.get());
      check_pooling_of<__nv_bfloat16>(max, shape, low, high, gpucmp::conv_tolerance(gpucmp::numerics::bf16), s.get());
      check_pooling_of<__half>(max, shape, low, high, gpucmp::conv_tolerance(gpucmp::numerics::fp16), s.get());
      check_pooling_of<std::int8_t>(max, shape, negative ? -128 : -100, negative ? -1 : 127,
                                    gpucmp::conv_tolerance(gpucmp::numerics::int8), s.get());
      check_pooling_of<__nv_fp8_e4m3>(max, shape, low * 40, high * 40, gpucmp::conv_tolerance(gpucmp::numerics::fp8_e4m3), s.get());
    }
    // Averages in the floating types, which sum in FP32 (the quantized network pools only maxima).
    check_pooling_of<float>(gpucmp::pool_kind::average, shape, -4, 4, gpucmp::conv_tolerance(gpucmp::numerics::fp32), s.get());
    check_pooling_of<__nv_bfloat16>(gpucmp::pool_kind::average, shape, -4, 4, gpucmp::conv_tolerance(gpucmp::numerics::bf16), s.get());
  }
  // A window that could lie wholly in the padding is refused before anything runs.
  gpucmp::pool_shape wide{3, 64, 17, 15, 7, 2, 4};  // padding 4 of a 7-wide window
  gpucmp::device_buffer<__half> x(std::size_t(3 * 17 * 15 * 64)), y(std::size_t(3 * 17 * 15 * 64));
  CHECK_THROWS_WITH(gpucmp::pool_forward(max, wide, x.data(), y.data(), s.get()), GPUCMP_CONTAINS("must be at most half the kernel"));
}

TEST_CASE("a small CNN's logits match a whole-network FP64 reference in both layouts and graph equals eager", "[gpu][models]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = small_cnn(false);
  const std::int64_t batch = 5;
  const std::vector<float> images = random_values(std::size_t(batch * 3 * 20 * 20), 21);
  const std::vector<double> reference = host_forward(def, batch, images);
  for (gpucmp::conv_layout layout : {gpucmp::conv_layout::nhwc, gpucmp::conv_layout::nchw})
  for (gpucmp::numerics t : all_dtypes) {
    gpucmp::network_options o;
    o.batch = batch;
    o.dtype = t;
    o.layout = layout;
    gpucmp::network net(def, gpucmp_test::paced(o), s.get());
    INFO(net.name());
    for (const auto& l : net.layers()) {
      INFO(l.name << ": " << l.algorithm << ": " << l.check.summary());
      CHECK(l.check.passed());
    }
    net.set_input(images, s.get());
    net(s.get());
    const std::vector<float> eager = net.output(s.get());
    // Relative to the logits' scale: precision-dependent (inputs and activations round to T).
    const double scale = std::fabs(*std::max_element(reference.begin(), reference.end(),
                                                     [](double a, double b) { return std::fabs(a) < std::fabs(b); }));
    const double allowed = t == gpucmp::numerics::fp32 ? 1e-5 : t == gpucmp::numerics::bf16 ? 3e-2 : 5e-3;
    double worst = 0;
    for (std::size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, std::fabs(double(eager[i]) - reference[i]) / scale);
    INFO("worst error / max |logit| = " << worst);
    CHECK(worst <= allowed);
    CHECK(scale > 0.01);  // not a degenerate network
    gpucmp::graph_exec g = net.capture(s.get());
    g.launch(s.get());
    CHECK(net.output(s.get()) == eager);  // same kernels, same order: bit-identical
  }
}

TEST_CASE("softmax as the last layer gives probabilities", "[gpu][models]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = small_cnn(true);
  gpucmp::network_options o;
  o.batch = 3;
  gpucmp::network net(def, gpucmp_test::paced(o), s.get());
  net(s.get());
  const std::vector<float> probs = net.output(s.get());
  REQUIRE(probs.size() == 30);
  for (int r = 0; r < 3; ++r) {
    double sum = 0;
    for (int c = 0; c < 10; ++c) sum += probs[std::size_t(r * 10 + c)];
    CHECK(sum == Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("ResNet-50 v1.5 builds, verifies every layer and reuses activation memory", "[gpu][models][resnet50]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = gpucmp::resnet50_random(1);
  gpucmp::network_options o;
  o.batch = 2;
  gpucmp::network net(def, gpucmp_test::paced(o), s.get());
  CHECK(net.layers().size() == 56);
  for (const auto& l : net.layers()) CHECK(l.check.passed());
  CHECK(net.memory().activation_bytes < net.memory().activation_bytes_without_reuse / 4);
  CHECK(net.work().flops == 2.0 * 4089184256.0 * 2);
  net(s.get());
  const std::vector<float> logits = net.output(s.get());
  REQUIRE(logits.size() == 2000);
  CHECK(net.damaged_buffers().empty());  // no kernel wrote into parameters
  net.run_synchronized(s.get());
  CHECK(net.output(s.get()) == logits);  // every layer's work is ordered on the stream
  CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  CHECK(*std::max_element(logits.begin(), logits.end()) > *std::min_element(logits.begin(), logits.end()));
}

TEST_CASE("ResNet-18 builds, verifies every layer and its logits match a whole-network FP64 reference", "[gpu][models][resnet18]") {
  // The model added by following docs/architecture.md's "Adding a model".
  gpucmp::stream s;
  const gpucmp::network_definition def = gpucmp::resnet18_random(2);
  const std::vector<float> image = random_values(std::size_t(3 * 224 * 224), 5);
  const std::vector<double> reference = host_forward(def, 1, image);
  const double scale = std::fabs(*std::max_element(reference.begin(), reference.end(),
                                                   [](double a, double b) { return std::fabs(a) < std::fabs(b); }));
  REQUIRE(scale > 0.01);  // not a degenerate network
  gpucmp::network_options o;
  o.batch = 1;
  gpucmp::network net(def, gpucmp_test::paced(o), s.get());
  CHECK(net.layers().size() == 23);  // 20 convolutions, two pools, fc
  for (const auto& l : net.layers()) {
    INFO(l.name << ": " << l.algorithm << ": " << l.check.summary());
    CHECK(l.check.passed());
  }
  CHECK(net.work().flops == 2.0 * 1814073344.0);
  net.set_input(image, s.get());
  gpucmp::graph_exec g = net.capture(s.get());
  g.launch(s.get());
  const std::vector<float> logits = net.output(s.get());
  REQUIRE(logits.size() == 1000);
  double worst = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::fabs(double(logits[i]) - reference[i]) / scale);
  INFO("worst error / max |logit| = " << worst);
  CHECK(worst <= 1e-2);  // FP16 activations through 18 layers
}

#if GPUCMP_TEST_KERNEL_MODE
TEST_CASE("kernel mode layer by layer: every ResNet-50 layer's kernels add up to the whole pass", "[gpu][models][resnet50][cupti]") {
  gpucmp::engine eng;
  const gpucmp::network_definition def = gpucmp::resnet50_random(1);
  gpucmp::network_options o;
  o.batch = 16;
  o.dtype = gpucmp::numerics::fp16;
  gpucmp::network net(def, o, eng.stream());
  const auto tracer = gpucmp::make_activity_tracer();
  const gpucmp::network_trace t = net.trace_layers(*tracer, eng.stream(), 10);
  CHECK(t.passes == 10);
  CHECK(t.dropped_records == 0);
  REQUIRE(t.layers.size() == 56);
  CHECK(t.layers.front().layer == "conv1");
  CHECK(t.layers.back().layer == "fc");
  double sum = 0, shares = 0;
  for (const auto& l : t.layers) {
    INFO(l.layer);
    CHECK_FALSE(l.kernels.empty());  // every layer launches at least one kernel
    CHECK(l.busy_s > 0);
    GPUCMP_CHECK_TIMING(l.busy_s < 2e-3);  // no layer of a batch-16 FP16 pass takes milliseconds on a datacentre GPU
    sum += l.busy_s;
    shares += l.share;
  }
  // The layers' medians add up to about the median pass; the pass launched eagerly spans at
  // least its busy time (one stream: no overlap).
  CHECK(sum == Approx(t.busy_s).epsilon(0.05));
  CHECK(shares == Approx(sum / t.busy_s));
  CHECK(t.eager_span_s >= 0.99 * t.busy_s);
  // The same pass measured whole by the engine in kernel mode: busy time against busy time,
  // both from per-kernel timestamps, a few seconds apart (clocks may move between them).
  const gpucmp::measurement whole = eng.measure(net, gpucmp::mode::kernel);
  GPUCMP_CHECK_TIMING(whole.gpu.median == Approx(t.busy_s).epsilon(0.10));
  // A graph replay launches the same kernels without the host: it is no slower than the
  // host-launched pass's span, which holds the launch gaps a graph removes. (Graph time
  // against the traced busy time is no law: that busy time was read under CUPTI tracing,
  // at other clocks, and read 667 us against a 632 us replay on the H200.)
  const gpucmp::measurement graph = eng.measure(net, gpucmp::mode::graph);
  INFO("graph replay " << graph.gpu.median * 1e6 << " us, eager span " << t.eager_span_s * 1e6 << " us, busy "
                       << t.busy_s * 1e6 << " us");
  GPUCMP_CHECK_TIMING(graph.gpu.median <= 1.05 * t.eager_span_s);
}
#endif

TEST_CASE("an impossible batch is a typed out-of-memory and the largest batch that fits is found", "[gpu][models][resnet50][api_error]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = gpucmp::resnet50_random(1);
  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  const std::int64_t largest = gpucmp::largest_batch_that_fits(def, gpucmp::numerics::fp16, free_bytes);
  CHECK(largest > 256);
  gpucmp::network_options o;
  o.batch = largest * 2;
  try {
    gpucmp::network net(def, gpucmp_test::paced(o), s.get());
    FAIL("batch " << o.batch << " should not fit");
  } catch (const gpucmp::out_of_memory& e) {
    CHECK(e.requested_bytes() > e.free_bytes());
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("resnet50/fp16/bs" + std::to_string(o.batch)));
  }
  // Nothing is left broken: a small batch still builds and runs.
  o.batch = 1;
  gpucmp::network net(def, gpucmp_test::paced(o), s.get());
  net(s.get());
  CHECK(net.output(s.get()).size() == 1000);
}
