// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// cuDNN convolutions: all three passes, both layouts, every precision, with strides,
// padding, dilation and groups, verified against the FP64 references (CPU for small
// problems, GPU samples for large ones); corrupted outputs are caught; bad input is typed.
#include "catch.hpp"
#include "search_pace.hpp"

#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/workload_shapes.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <string>

namespace {

gpucmp::conv_problem small_problem() {
  gpucmp::conv_problem p;
  p.n = 2;
  p.c = 8;
  p.h = 11;
  p.w = 9;
  p.k = 16;
  p.r = 3;
  p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.stride_h = p.stride_w = 2;
  return p;
}

// The verification cases check the convolution that the search chose. A short search (a few
// candidates of each API, one timing each, no sustain, re-timing or duel) keeps them quick:
// at the defaults these three cases took 39 s of the ops tests' 74 s on the H200. The
// search's rules (choose_fastest_verified, shared with the GEMM) have their own cases in
// ops_gemm_test.cu.
gpucmp::search_options short_search() {
  gpucmp::search_options s;
  s.max_candidates = 4;
  s.trials = 1;
  s.sustain_seconds = 0;
  s.refine_rounds = 0;
  s.duel_contenders = 0;
  return s;
}

}  // namespace

TEST_CASE("every pass, layout and precision passes verification", "[gpu][ops][conv]") {
  gpucmp::stream s;
  for (auto d : {gpucmp::conv_direction::forward, gpucmp::conv_direction::backward_data,
                 gpucmp::conv_direction::backward_filter}) {
    for (auto t : {gpucmp::numerics::fp32, gpucmp::numerics::tf32, gpucmp::numerics::fp16, gpucmp::numerics::bf16}) {
      for (auto l : {gpucmp::conv_layout::nchw, gpucmp::conv_layout::nhwc}) {
        gpucmp::conv_problem p = small_problem();
        p.dtype = t;
        p.layout = l;
        for (auto api : {gpucmp::conv_api::backend, gpucmp::conv_api::legacy, gpucmp::conv_api::any}) {
          gpucmp::conv_options o;
          o.direction = d;
          o.api = api;
          o.search = short_search();
          gpucmp::conv c(p, o, s.get());
          gpucmp::choose_algorithm(c);
          INFO(c.name() << ": " << c.algorithm().describe());
          const gpucmp::verification v = c.verify(s.get());
          INFO(v.summary());
          CHECK(v.passed());
          CHECK(v.method.find("CPU") != std::string::npos);
          CHECK(!c.algorithm().name.empty());
          if (api != gpucmp::conv_api::any) CHECK(c.algorithm().api == api);
          CHECK(c.algorithm().chosen_by == gpucmp::algorithm_choice::search);
          CHECK(!c.search_log().empty());
          if (t == gpucmp::numerics::fp32) {  // no tensor cores for true FP32
            CHECK(c.algorithm().math.find("TENSOR") == std::string::npos);
          }
        }
      }
    }
  }
}

TEST_CASE("a searched convolution bound to other tensors computes what it verified, in every pass and API",
          "[gpu][ops][conv]") {
  gpucmp::stream s;
  for (auto d : {gpucmp::conv_direction::forward, gpucmp::conv_direction::backward_data,
                 gpucmp::conv_direction::backward_filter}) {
    for (auto api : {gpucmp::conv_api::backend, gpucmp::conv_api::legacy}) {
      gpucmp::conv_problem p = small_problem();
      p.dtype = gpucmp::numerics::fp16;
      p.layout = gpucmp::conv_layout::nhwc;
      gpucmp::conv_options o;
      o.direction = d;
      o.api = api;
      o.search = short_search();
      gpucmp::conv c(p, o, s.get());
      gpucmp::choose_algorithm(c);
      INFO(c.name() << ": " << c.algorithm().describe());
      REQUIRE(c.verify(s.get()).passed());
      // The layer's own tensors: copies of the conv's inputs, a poisoned output.
      const std::size_t e = 2, xb = std::size_t(p.x_elements()) * e, wb = std::size_t(p.w_elements()) * e,
                        yb = std::size_t(p.y_elements()) * e;
      gpucmp::device_buffer<unsigned char> x(xb, gpucmp::initial_fill::uninitialized()), w(wb, gpucmp::initial_fill::uninitialized()),
          y(yb, gpucmp::initial_fill::uninitialized()), ws(std::max<std::size_t>(c.algorithm().workspace, 1), gpucmp::initial_fill::uninitialized());
      REQUIRE(cudaMemcpy(x.data(), c.x(), xb, cudaMemcpyDeviceToDevice) == cudaSuccess);
      REQUIRE(cudaMemcpy(w.data(), c.w(), wb, cudaMemcpyDeviceToDevice) == cudaSuccess);
      REQUIRE(cudaMemcpy(y.data(), c.y(), yb, cudaMemcpyDeviceToDevice) == cudaSuccess);
      gpucmp::device_buffer<unsigned char>& out = d == gpucmp::conv_direction::forward ? y : d == gpucmp::conv_direction::backward_data ? x : w;
      const std::vector<unsigned char> expected = [&] {
        std::vector<unsigned char> v(out.size());
        const void* own = d == gpucmp::conv_direction::forward ? c.y() : d == gpucmp::conv_direction::backward_data ? c.x() : c.w();
        REQUIRE(cudaMemcpy(v.data(), own, v.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        return v;
      }();
      REQUIRE(cudaMemset(out.data(), 0xFF, out.size()) == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the legacy stream's memset lands first
      const gpucmp::conv::binding layer = c.bind({x.data(), w.data(), y.data()}, ws.data(), ws.size());
      c.release_tensors();
      layer(s.get());
      REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
      // Same algorithm, same inputs: the same output (weight gradients may sum in another
      // order when the algorithm splits the reduction, so those are compared as FP16 values).
      const std::vector<unsigned char> got = out.to_host();
      std::size_t differ = 0;
      for (std::size_t i = 0; i + 1 < got.size(); i += 2) {
        __half a, b;
        std::memcpy(&a, &got[i], 2);
        std::memcpy(&b, &expected[i], 2);
        const float fa = __half2float(a), fb = __half2float(b);
        if (!(std::fabs(fa - fb) <= 2e-3f * (std::fabs(fb) + 1.0f))) ++differ;
      }
      CHECK(differ == 0);
      CHECK(layer.algorithm().name == c.algorithm().name);
      CHECK_THROWS_AS(c(s.get()), gpucmp::invalid_argument);  // its own tensors are gone
    }
  }
  gpucmp::conv c(small_problem(), {}, s.get());
  CHECK_THROWS_WITH(c.bind({nullptr, c.w(), c.y()}, nullptr, 0), GPUCMP_CONTAINS("needs x, w and y"));
}

namespace {
void* output_of(gpucmp::conv& c) {
  return c.direction() == gpucmp::conv_direction::forward ? c.y() : c.direction() == gpucmp::conv_direction::backward_data ? c.x() : c.w();
}
}  // namespace

TEST_CASE("an accumulating pass adds its result to what its output held (beta 1), and the check knows it", "[gpu][ops][conv]") {
  // Both APIs add with beta 1 (the backend's plans through cudnn-frontend's operation
  // builders: its graph API's convolution nodes always overwrite), and so does the default,
  // which searches both.
  gpucmp::stream s;
  for (auto d : {gpucmp::conv_direction::forward, gpucmp::conv_direction::backward_data,
                 gpucmp::conv_direction::backward_filter}) {
    for (auto t : {gpucmp::numerics::fp32, gpucmp::numerics::fp16}) {
      for (auto api : {gpucmp::conv_api::backend, gpucmp::conv_api::legacy, gpucmp::conv_api::any}) {
        gpucmp::conv_problem p = small_problem();
        p.dtype = t;
        p.layout = gpucmp::conv_layout::nhwc;
        gpucmp::conv_options o;
        o.direction = d;
        o.api = api;
        o.search = short_search();
        o.accumulate = true;
        gpucmp::conv acc(p, o, s.get());
        CHECK(acc.accumulates());
        CHECK(acc.name().find("+accumulate/") != std::string::npos);
        gpucmp::choose_algorithm(acc);
        INFO(acc.name() << ": " << acc.algorithm().describe());
        if (api != gpucmp::conv_api::any) CHECK(acc.algorithm().api == api);
        const gpucmp::verification v = acc.verify(s.get());
        INFO(v.summary());
        CHECK(v.passed());
        CHECK(v.method.find("prior") != std::string::npos);
        // The same pass without beta on the same inputs: its output lacks the prior, and the
        // accumulating pass's check must reject it.
        o.accumulate = false;
        o.api = gpucmp::conv_api::legacy;
        gpucmp::conv plain(p, o, s.get());
        REQUIRE(plain.verify(s.get()).passed());
        const gpucmp::conv_problem& q = acc.problem();
        const std::int64_t out_elements = d == gpucmp::conv_direction::forward         ? q.y_elements()
                                          : d == gpucmp::conv_direction::backward_data ? q.x_elements()
                                                                                       : q.w_elements();
        const std::size_t bytes = std::size_t(out_elements) * gpucmp::activation_bytes(t);
        REQUIRE(cudaMemcpy(output_of(acc), output_of(plain), bytes, cudaMemcpyDeviceToDevice) == cudaSuccess);
        CHECK_FALSE(acc.check_output(s.get()).passed());
      }
    }
  }
  // A ResNet-50 data gradient at batch 8 (layer1's 256 -> 64 1x1, a block input's second part):
  // checked on the GPU reference's samples.
  const auto shapes = gpucmp::resnet50_conv_shapes(8, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc);
  const auto found = std::find_if(shapes.begin(), shapes.end(),
                                  [](const gpucmp::conv_problem& q) { return q.c == 256 && q.k == 64 && q.r == 1 && q.h == 56; });
  REQUIRE(found != shapes.end());
  const gpucmp::conv_problem p = *found;
  gpucmp::conv_options o;
  o.direction = gpucmp::conv_direction::backward_data;
  o.search = short_search();
  o.accumulate = true;
  gpucmp::conv acc(p, o, s.get());
  gpucmp::choose_algorithm(acc);
  const gpucmp::verification v = acc.verify(s.get());
  INFO(acc.name() << ": " << acc.algorithm().describe() << ": " << v.summary());
  CHECK(v.passed());
  CHECK(v.method.find("GPU") != std::string::npos);
}

TEST_CASE("a forward pass with batch norm's statistics in its epilogue writes y and per-channel sums an FP64 check holds",
          "[gpu][ops][conv]") {
  gpucmp::stream s;
  // Refused where cuDNN has no such epilogue: other passes, accumulation, the legacy API.
  gpucmp::conv_options refused;
  refused.statistics = true;
  refused.direction = gpucmp::conv_direction::backward_data;
  CHECK_THROWS_AS(gpucmp::conv(small_problem(), refused, s.get()), gpucmp::unsupported);
  refused.direction = gpucmp::conv_direction::forward;
  refused.api = gpucmp::conv_api::legacy;
  CHECK_THROWS_AS(gpucmp::conv(small_problem(), refused, s.get()), gpucmp::unsupported);
  // ResNet-50's 1x1 and 3x3 forward shapes at batch 8 in FP16 NHWC (the stem's 3 channels aside).
  int fused = 0;
  std::string refusals;
  for (const auto& p : gpucmp::resnet50_conv_shapes(8, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc)) {
    if (p.c % 8 != 0 || !(p.h == 56 || p.h == 14)) continue;  // layer1 and layer3: a 1x1 and a 3x3 of each
    gpucmp::conv_options o;
    o.statistics = true;
    o.search = short_search();
    std::unique_ptr<gpucmp::conv> c;
    try {
      c = std::make_unique<gpucmp::conv>(p, o, s.get());
    } catch (const gpucmp::unsupported& e) {
      refusals += std::string(e.what()) + "\n";
      continue;
    }
    CHECK(c->name().find("+statistics/") != std::string::npos);
    gpucmp::choose_algorithm(*c);
    const gpucmp::verification v = c->verify(s.get());
    INFO(c->name() << ": " << c->algorithm().describe() << ": " << v.summary());
    CHECK(v.passed());
    CHECK(v.method.find("statistics") != std::string::npos);
    // Bound to other tensors and run twice: the sums are this call's, not added to the last's.
    const std::size_t xs = std::size_t(p.x_elements()), ws = std::size_t(p.w_elements()), ys = std::size_t(p.y_elements());
    gpucmp::device_buffer<__half> x(xs), w(ws), y(ys, gpucmp::initial_fill::poison());
    gpucmp::device_buffer<float> sum(std::size_t(p.k), gpucmp::initial_fill::poison()),
        squares(std::size_t(p.k), gpucmp::initial_fill::poison());
    gpucmp::device_buffer<unsigned char> workspace(std::max<std::size_t>(c->algorithm().workspace, 256));
    const auto bound = c->bind({x.data(), w.data(), y.data(), sum.data(), squares.data()}, workspace.data(), workspace.bytes());
    bound(s.get());
    bound(s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    const std::vector<__half> yh = y.to_host();
    const std::vector<float> got = sum.to_host(), got_squares = squares.to_host();
    const std::int64_t rows = p.n * p.p() * p.q();
    for (std::int64_t k = 0; k < p.k; k += 7) {
      double s1 = 0, s2 = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double v1 = __half2float(yh[std::size_t(r * p.k + k)]);
        s1 += v1;
        s2 += v1 * v1;
      }
      INFO("channel " << k << ": sum " << got[std::size_t(k)] << " vs " << s1 << ", squares " << got_squares[std::size_t(k)] << " vs " << s2);
      CHECK(std::fabs(got[std::size_t(k)] - s1) <= 1e-3 * std::sqrt(double(rows) * s2));
      CHECK(std::fabs(got_squares[std::size_t(k)] - s2) <= 1e-3 * s2);
    }
    ++fused;
  }
  // cuDNN fuses gen-stats into convolutions on sm_80 and later (its SBRCS sample): at least
  // one of these shapes must run so.
  INFO("refused:\n" << refusals);
  CHECK(fused > 0);
  // BF16 too: gen-stats in FP32 math over a BF16 y.
  int fused_bf16 = 0;
  std::string refusals_bf16;
  for (const auto& p : gpucmp::resnet50_conv_shapes(8, gpucmp::numerics::bf16, gpucmp::conv_layout::nhwc)) {
    if (p.c % 8 != 0 || p.h != 56) continue;
    gpucmp::conv_options o;
    o.statistics = true;
    o.search = short_search();
    try {
      gpucmp::conv c(p, o, s.get());
      gpucmp::choose_algorithm(c);
      const gpucmp::verification v = c.verify(s.get());
      INFO(c.name() << ": " << c.algorithm().describe() << ": " << v.summary());
      CHECK(v.passed());
      ++fused_bf16;
    } catch (const gpucmp::unsupported& e) {
      refusals_bf16 += std::string(e.what()) + "\n";
    }
  }
  INFO("refused in BF16:\n" << refusals_bf16);
  CHECK(fused_bf16 > 0);
}

TEST_CASE("dilation and groups are verified", "[gpu][ops][conv]") {
  gpucmp::stream s;
  for (auto d : {gpucmp::conv_direction::forward, gpucmp::conv_direction::backward_data,
                 gpucmp::conv_direction::backward_filter}) {
    gpucmp::conv_problem p = small_problem();
    p.dilation_h = p.dilation_w = 2;
    p.pad_h = p.pad_w = 2;
    p.groups = 4;
    p.dtype = gpucmp::numerics::fp16;
    gpucmp::conv_options o;
    o.direction = d;
    o.search = short_search();
    gpucmp::conv c(p, o, s.get());
    gpucmp::choose_algorithm(c);
    const gpucmp::verification v = c.verify(s.get());
    INFO(c.name() << ": " << v.summary());
    CHECK(v.passed());
  }
}

TEST_CASE("ResNet-50 shapes at batch 8 pass verification against the GPU reference", "[gpu][ops][conv]") {
  gpucmp::stream s;
  int checked = 0;
  for (const auto& p : gpucmp::resnet50_conv_shapes(8, gpucmp::numerics::fp16, gpucmp::conv_layout::nhwc)) {
    for (auto d : {gpucmp::conv_direction::forward, gpucmp::conv_direction::backward_data,
                   gpucmp::conv_direction::backward_filter}) {
      gpucmp::conv_options o;
      o.direction = d;
      o.search = short_search();
      gpucmp::conv c(p, o, s.get());
      gpucmp::choose_algorithm(c);
      const gpucmp::verification v = c.verify(s.get());
      INFO(c.name() << ": " << c.algorithm().describe() << ": " << v.summary());
      CHECK(v.passed());
      checked += v.method.find("GPU") != std::string::npos;
    }
  }
  CHECK(checked > 0);  // the large ones used the GPU reference
}

TEST_CASE("a corrupted convolution output fails verification", "[gpu][ops][conv]") {
  gpucmp::stream s;
  for (std::int64_t batch : {2, 16}) {
    gpucmp::conv_problem p = small_problem();
    p.n = batch;
    p.c = 64;
    p.k = 64;
    p.h = p.w = 56;
    p.stride_h = p.stride_w = 1;
    p.dtype = gpucmp::numerics::fp32;
    p.layout = gpucmp::conv_layout::nchw;
    gpucmp::conv c(p, gpucmp_test::paced(gpucmp::conv_options{}), s.get());
    gpucmp::choose_algorithm(c);
    const gpucmp::verification before = c.verify(s.get());
    INFO(c.algorithm().describe() << ": " << before.summary());
    REQUIRE(before.passed());
    const float bad = 1e4f;  // output 0 is always checked
    REQUIRE(cudaMemcpy(c.y(), &bad, sizeof bad, cudaMemcpyHostToDevice) == cudaSuccess);
    const gpucmp::verification v = c.check_output(s.get());
    CHECK_FALSE(v.passed());
    CHECK(v.failed == 1);
    CHECK(v.worst_where == "output 0 (NCHW order)");
  }
}

TEST_CASE("bad convolutions get typed errors that say what is wrong", "[gpu][ops][conv]") {
  gpucmp::stream s;
  gpucmp::conv_problem p = small_problem();
  p.groups = 3;
  CHECK_THROWS_WITH(gpucmp::conv(p, {}, s.get()), GPUCMP_CONTAINS("groups (3) must divide c (8)"));
  gpucmp::conv_problem huge = small_problem();
  huge.n = 4096;
  huge.c = huge.k = 1024;
  huge.h = huge.w = 224;  // 4096 x 1024 x 224 x 224 FP16: 420 GB per tensor
  try {
    gpucmp::conv c(huge, {}, s.get());
    FAIL("the convolution fit in memory");
  } catch (const gpucmp::out_of_memory& e) {
    CHECK(e.requested_bytes() > e.free_bytes());
    CHECK_THAT(std::string(e.what()), GPUCMP_CONTAINS("conv_fwd/cudnn/fp16_nhwc") && GPUCMP_CONTAINS("free of"));
  }
  gpucmp::conv_options tiny;
  tiny.workspace_limit = 0;
  gpucmp::conv c(small_problem(), gpucmp_test::paced(tiny), s.get());  // algorithms without workspace exist
  gpucmp::choose_algorithm(c);
  CHECK(c.algorithm().workspace == 0);
  CHECK(c.verify(s.get()).passed());
}
