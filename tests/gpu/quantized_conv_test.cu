// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Quantized convolution layers (models/quantized_conv.cuh): FP8 E4M3 and INT8 with
// per-channel scales, each path cuDNN offers (and cuBLASLt's matmul for 1x1 INT8 layers, and
// every tile of gpucmp's implicit GEMM) checked at every output against the double reference, the scales' effect checked (a
// saturating output, a wrong scale caught), and bad problems refused by name.
#include "catch.hpp"
#include "model_test_helpers.hpp"
#include "search_pace.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/cuda/warpgroup_mma.cuh>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/quantized_conv.cuh>
#include <gpucmp/ops/elements.cuh>

#include <cublasLt.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using gpucmp_test::cublaslt_handle;
using gpucmp_test::cudnn_handle;
using gpucmp_test::make_cublaslt_handle;
using gpucmp_test::make_cudnn_handle;

// A layer's random operands (quantized_conv_operands) and a 64 MiB workspace.
struct quantized_buffers : gpucmp::quantized_conv_operands {
  gpucmp::device_buffer<unsigned char> ws;
  quantized_buffers(const gpucmp::conv_problem& p, double headroom, cudaStream_t stream)
      : gpucmp::quantized_conv_operands(p, headroom, 11, stream), ws(std::size_t{64} << 20) {}
};

gpucmp::conv_problem layer(gpucmp::numerics t, std::int64_t c, std::int64_t k, std::int64_t rs, std::int64_t stride) {
  gpucmp::conv_problem p;
  p.n = 2;
  p.c = c;
  p.h = p.w = 10;
  p.k = k;
  p.r = p.s = rs;
  p.pad_h = p.pad_w = rs / 2;
  p.stride_h = p.stride_w = stride;
  p.dtype = t;
  return p;
}

// Each candidate of `q` (all of the path whose descriptions start with `path`) verified at every
// output, on operands made with `headroom` (named in the messages).
void check_every_candidate(gpucmp::quantized_conv& q, double headroom, const char* path, cudaStream_t s) {
  const gpucmp::conv_problem& p = q.candidates().problem();
  for (std::size_t i = 0; i < q.candidate_count(); ++i) {
    q.select(i, s);
    const gpucmp::verification v = q.verify(s, true);
    INFO(q.name() << " headroom " << headroom << ": " << q.describe_candidate(i) << ": " << v.summary());
    CHECK(v.passed());
    CHECK(v.checked == std::size_t(p.y_elements()));
    CHECK(q.describe_candidate(i).rfind(path, 0) == 0);
  }
}

// A search over every candidate of `set`, a layer with a residual and ReLU on `buf`'s operands:
// some candidates but not all are of the path whose descriptions start with `path`, and the
// choice verifies at every output.
void check_search_among_all(std::shared_ptr<gpucmp::quantized_conv_candidates> set, quantized_buffers& buf, const char* path,
                            cudaStream_t s) {
  gpucmp::quantized_conv q(std::move(set), buf.tensors(true), buf.ws.data(), buf.ws.bytes());
  std::size_t on_path = 0;
  for (std::size_t i = 0; i < q.candidate_count(); ++i) on_path += q.describe_candidate(i).rfind(path, 0) == 0;
  CHECK(on_path >= 1);
  CHECK(on_path < q.candidate_count());
  gpucmp::search(q, gpucmp::shared_engine(), gpucmp_test::paced(gpucmp::network_options::fast_search()));
  INFO(q.algorithm().describe());
  CHECK(q.verify(s, true).passed());
}

}  // namespace

TEST_CASE("quantized convolution layers verify in FP8 and INT8 on every path cuDNN offers", "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle handle = make_cudnn_handle();
  for (gpucmp::numerics t : gpucmp::quantized_conv_numerics) {
    // ResNet-50's kinds of layer: 3x3, 1x1 widening, 1x1 strided (the shortcut's projection).
    for (const gpucmp::conv_problem& p : {layer(t, 64, 64, 3, 1), layer(t, 64, 256, 1, 1), layer(t, 128, 256, 1, 2)}) {
      quantized_buffers buf(p, 1.5, s.get());
      for (gpucmp::conv_epilogue e : {gpucmp::conv_epilogue{false, true}, gpucmp::conv_epilogue{true, true},
                                      gpucmp::conv_epilogue{false, false}}) {
        int paths_ran = 0;
        for (gpucmp::fusion_path path : {gpucmp::fusion_path::fused_graph, gpucmp::fusion_path::conv_then_kernel}) {
          std::shared_ptr<gpucmp::quantized_conv_candidates> set;
          try {
            set = std::make_shared<gpucmp::quantized_conv_candidates>(handle.get(), p, e, 4, buf.ws.bytes(),
                                                                      std::vector<gpucmp::fusion_path>{path});
          } catch (const gpucmp::unsupported& u) {
            WARN(to_string(t) << " " << p.shape_name() << " " << to_string(e) << " " << to_string(path)
                                       << " refused: " << u.what());
            continue;
          }
          gpucmp::quantized_conv q(set, buf.tensors(e.residual), buf.ws.data(), buf.ws.bytes());
          try {  // a search none of whose candidates verifies fails this path, not the other formats'
            gpucmp::search(q, gpucmp::shared_engine(), gpucmp_test::paced(gpucmp::network_options::fast_search()));
          } catch (const gpucmp::error& failed) {
            FAIL_CHECK(set->name() << " " << to_string(path) << ": " << failed.what());
            continue;
          }
          const gpucmp::verification v = q.verify(s.get(), true);
          INFO(set->name() << ": " << q.algorithm().describe() << ": " << v.summary());
          CHECK(v.passed());
          CHECK(v.checked == std::size_t(p.y_elements()));
          CHECK(q.algorithm().path == path);
          CHECK(!q.search_log().empty());
          ++paths_ran;
        }
        // The plain INT8 convolution with INT32 sums is cuDNN's long-standing path; FP8 must
        // run one way or the other on a GPU with FP8 tensor cores.
        INFO(to_string(t) << " " << p.shape_name() << " " << to_string(e));
        CHECK(paths_ran >= 1);
      }
    }
  }
}

TEST_CASE("a quantized layer saturates as the reference does, and its check catches a wrong scale", "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle handle = make_cudnn_handle();
  for (gpucmp::numerics t : gpucmp::quantized_conv_numerics) {
    const gpucmp::conv_problem p = layer(t, 64, 64, 3, 1);
    const gpucmp::conv_epilogue e{true, false};  // no ReLU: both signs saturate
    quantized_buffers buf(p, 0.25, s.get());     // real values past 2x the format's top
    auto set = std::make_shared<gpucmp::quantized_conv_candidates>(handle.get(), p, e, 2, buf.ws.bytes());
    gpucmp::quantized_conv q(set, buf.tensors(true, true), buf.ws.data(), buf.ws.bytes());
    for (std::size_t i = 0; i < q.candidate_count(); ++i) {
      q.select(i, s.get());
      const gpucmp::verification v = q.verify(s.get(), true);
      INFO(set->name() << ": " << q.describe_candidate(i) << ": " << v.summary());
      CHECK(v.passed());
    }
    // Outputs at the format's top prove the saturation was exercised.
    const std::vector<unsigned char> raw = buf.y.to_host();
    std::size_t at_top = 0;
    for (unsigned char b : raw) {
      // INT8 127 or -128; FP8 E4M3 +-448 (0x7E, 0xFE).
      at_top += t == gpucmp::numerics::int8 ? (b == 0x7F || b == 0x80) : ((b & 0x7F) == 0x7E);
    }
    CHECK(at_top > raw.size() / 20);
    // With room to spare (nothing saturates even at twice the scale), the layer run with its
    // output scale doubled and checked against the right scale's reference is wrong at most
    // outputs, and the check must say so.
    quantized_buffers roomy(p, 4, s.get());
    gpucmp::quantized_conv right(set, roomy.tensors(true, true), roomy.ws.data(), roomy.ws.bytes());
    const gpucmp::verification right_check = right.verify(s.get(), true);
    INFO(right_check.summary());
    CHECK(right_check.passed());
    if (!right_check.passed()) continue;  // the other format still runs
    gpucmp::quantized_conv_tensors wrong = roomy.tensors(true, true);
    gpucmp::device_buffer<float> doubled(1);
    doubled.copy_from_host(std::vector<float>{float(2 * roomy.output_scale.to_host()[0])});
    wrong.output_scale = doubled.data();
    gpucmp::quantized_conv run_wrong(set, wrong, roomy.ws.data(), roomy.ws.bytes());
    run_wrong(s.get());
    const gpucmp::verification caught = right.check_output(s.get(), true);
    INFO(caught.summary());
    CHECK_FALSE(caught.passed());
    CHECK(caught.failed > caught.checked / 2);
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  }
}

TEST_CASE("a quantized convolution refuses other recipes, NCHW and missing tensors by name", "[gpu][models][quantized]") {
  const cudnn_handle handle = make_cudnn_handle();
  gpucmp::conv_problem p = layer(gpucmp::numerics::fp16, 64, 64, 3, 1);
  CHECK_THROWS_WITH(gpucmp::quantized_conv_candidates(handle.get(), p, {}, 2, 0), GPUCMP_CONTAINS("does not run fp16"));
  p.dtype = gpucmp::numerics::int8;
  p.layout = gpucmp::conv_layout::nchw;
  CHECK_THROWS_WITH(gpucmp::quantized_conv_candidates(handle.get(), p, {}, 2, 0), GPUCMP_CONTAINS("run NHWC"));
  p.layout = gpucmp::conv_layout::nhwc;
  p.k = 0;
  CHECK_THROWS_WITH(gpucmp::quantized_conv_candidates(handle.get(), p, {}, 2, 0), GPUCMP_CONTAINS("must be positive"));
}

TEST_CASE("a 1x1 INT8 layer runs as one cuBLASLt matmul: every candidate verified at every output, saturating too",
          "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle dnn = make_cudnn_handle();
  const cublaslt_handle lt = make_cublaslt_handle();
  const gpucmp::quantized_conv_libraries libraries{dnn.get(), lt.get()};
  const std::vector<gpucmp::fusion_path> matmul_only{gpucmp::fusion_path::cublaslt_matmul};
  gpucmp::conv_problem larger = layer(gpucmp::numerics::int8, 64, 128, 1, 1);
  larger.n = 4;
  larger.h = larger.w = 28;
  // Widening, narrowing (ResNet-50's conv3 and conv1 kinds), and a batch of 3,136 pixels.
  for (const gpucmp::conv_problem& p :
       {layer(gpucmp::numerics::int8, 64, 256, 1, 1), layer(gpucmp::numerics::int8, 256, 64, 1, 1), larger}) {
    for (double headroom : {1.5, 0.25}) {  // 0.25: real values past 2x INT8's top, both signs saturate without ReLU
      quantized_buffers buf(p, headroom, s.get());
      for (gpucmp::conv_epilogue e : {gpucmp::conv_epilogue{false, true}, gpucmp::conv_epilogue{true, true},
                                      gpucmp::conv_epilogue{false, false}, gpucmp::conv_epilogue{true, false}}) {
        auto set = std::make_shared<gpucmp::quantized_conv_candidates>(libraries, p, e, 4, buf.ws.bytes(), matmul_only);
        REQUIRE(set->size() >= 1);
        gpucmp::quantized_conv q(set, buf.tensors(e.residual), buf.ws.data(), buf.ws.bytes());
        check_every_candidate(q, headroom, "cuBLASLt matmul: algo ", s.get());
        gpucmp::search(q, gpucmp::shared_engine(), gpucmp_test::paced(gpucmp::network_options::fast_search()));
        CHECK(q.algorithm().path == gpucmp::fusion_path::cublaslt_matmul);
        CHECK(q.verify(s.get(), true).passed());
      }
    }
  }
  // Beside cuDNN's paths, the search may pick any of the three; the choice verifies.
  const gpucmp::conv_problem p = layer(gpucmp::numerics::int8, 64, 256, 1, 1);
  quantized_buffers buf(p, 1.5, s.get());
  auto all = std::make_shared<gpucmp::quantized_conv_candidates>(libraries, p, gpucmp::conv_epilogue{true, true}, 4,
                                                                  buf.ws.bytes());
  check_search_among_all(all, buf, "cuBLASLt", s.get());
}

TEST_CASE("the matmul path refuses what it cannot run, by name", "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle dnn = make_cudnn_handle();
  const cublaslt_handle lt = make_cublaslt_handle();
  const gpucmp::quantized_conv_libraries libraries{dnn.get(), lt.get()};
  const std::vector<gpucmp::fusion_path> matmul_only{gpucmp::fusion_path::cublaslt_matmul};
  CHECK_THROWS_WITH(
      gpucmp::quantized_conv_candidates(libraries, layer(gpucmp::numerics::int8, 64, 64, 3, 1), {}, 2, 0, matmul_only),
      GPUCMP_CONTAINS("1x1, stride-1"));
  CHECK_THROWS_WITH(
      gpucmp::quantized_conv_candidates(libraries, layer(gpucmp::numerics::int8, 128, 256, 1, 2), {}, 2, 0, matmul_only),
      GPUCMP_CONTAINS("1x1, stride-1"));
  CHECK_THROWS_WITH(
      gpucmp::quantized_conv_candidates(libraries, layer(gpucmp::numerics::fp8_e4m3, 64, 256, 1, 1), {}, 2, 0, matmul_only),
      GPUCMP_CONTAINS("INT8 layers only"));
  CHECK_THROWS_WITH(gpucmp::quantized_conv_candidates(gpucmp::quantized_conv_libraries{dnn.get(), nullptr},
                                                      layer(gpucmp::numerics::int8, 64, 256, 1, 1), {}, 2, 0, matmul_only),
                    GPUCMP_CONTAINS("no cuBLASLt handle"));
  // A layer bound without the pre-multiplied scales has no matmul to run.
  const gpucmp::conv_problem p = layer(gpucmp::numerics::int8, 64, 256, 1, 1);
  quantized_buffers buf(p, 1.5, s.get());
  auto set = std::make_shared<gpucmp::quantized_conv_candidates>(libraries, p, gpucmp::conv_epilogue{}, 2, buf.ws.bytes(),
                                                                  matmul_only);
  gpucmp::quantized_conv_tensors t = buf.tensors(false);
  t.matmul_alpha = nullptr;
  CHECK_THROWS_WITH(gpucmp::quantized_conv(set, t, buf.ws.data(), buf.ws.bytes()), GPUCMP_CONTAINS("matmul path's scales"));
}

TEST_CASE("gpucmp's implicit GEMM: every tile verifies at every output in INT8 and FP8, 1x1 and 3x3, strided, with tails",
          "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle dnn = make_cudnn_handle();
  const std::vector<gpucmp::fusion_path> kernel_only{gpucmp::fusion_path::gpucmp_implicit_gemm};
  int major = 0, minor = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) == cudaSuccess);
  // On Hopper built as sm_90a (the build's default there) the wgmma tiles are candidates too.
  const bool warpgroup = gpucmp::warpgroup_mma_compiled();
  if (major == 9 && minor == 0 && !warpgroup) {
    WARN("wgmma tiles left out: this program's compute capability 9.0 code is not sm_90a (CMAKE_CUDA_ARCHITECTURES 90a)");
  }
  for (gpucmp::numerics t : gpucmp::quantized_conv_numerics) {
    if (t == gpucmp::numerics::fp8_e4m3 && major < 9) {
      WARN("FP8 left out: compute capability " << major << ".x (the kernel's FP8 needs 8.9; Hopper checks it)");
      continue;
    }
    gpucmp::conv_problem widening = layer(t, 64, 256, 1, 1);  // 3,136 pixels: a last tile of 64 rows
    widening.n = 4;
    widening.h = widening.w = 28;
    gpucmp::conv_problem deep = layer(t, 320, 96, 1, 1);  // 5 blocks of 64 channels through 3 buffers; K past 64
    gpucmp::conv_problem odd = layer(t, 48, 80, 1, 2);    // C below one block, K no tile's multiple, stride 2
    odd.h = 11;
    gpucmp::conv_problem dilated = layer(t, 32, 48, 3, 1);  // taps 2 apart, padding 2 (edges read zeros)
    dilated.dilation_h = dilated.dilation_w = 2;
    dilated.pad_h = dilated.pad_w = 2;
    gpucmp::conv_problem stem_like = layer(t, 16, 64, 7, 2);  // 7x7, stride 2, padding 3: four taps a block
    stem_like.h = stem_like.w = 20;
    gpucmp::conv_problem straddling = layer(t, 48, 32, 3, 1);  // blocks of 64 across taps of 48 channels
    for (const gpucmp::conv_problem& p : {widening, layer(t, 256, 64, 1, 1), deep, odd, layer(t, 64, 64, 3, 1),
                                          layer(t, 128, 128, 3, 2), dilated, stem_like, straddling}) {
      for (double headroom : {1.5, 0.25}) {  // 0.25: real values past the format's top saturate
        quantized_buffers buf(p, headroom, s.get());
        for (gpucmp::conv_epilogue e : {gpucmp::conv_epilogue{false, true}, gpucmp::conv_epilogue{true, true},
                                        gpucmp::conv_epilogue{false, false}, gpucmp::conv_epilogue{true, false}}) {
          auto set = std::make_shared<gpucmp::quantized_conv_candidates>(dnn.get(), p, e, 4, buf.ws.bytes(), kernel_only);
          REQUIRE(set->size() >= 1);
          gpucmp::quantized_conv q(set, buf.tensors(e.residual), buf.ws.data(), buf.ws.bytes());
          check_every_candidate(q, headroom, "gpucmp implicit GEMM: ", s.get());
          std::size_t wgmma = 0;
          for (std::size_t i = 0; i < q.candidate_count(); ++i) {
            wgmma += q.describe_candidate(i).find("wgmma") != std::string::npos;
          }
          CHECK((wgmma > 0) == warpgroup);
        }
      }
    }
  }
  // Beside cuDNN's paths the search picks by time, and its choice verifies.
  for (const gpucmp::conv_problem& p :
       {layer(gpucmp::numerics::int8, 64, 256, 1, 1), layer(gpucmp::numerics::int8, 64, 64, 3, 1)}) {
    quantized_buffers buf(p, 1.5, s.get());
    auto all = std::make_shared<gpucmp::quantized_conv_candidates>(dnn.get(), p, gpucmp::conv_epilogue{true, true}, 4,
                                                                    buf.ws.bytes(), gpucmp::quantized_fusion_paths());
    check_search_among_all(all, buf, "gpucmp implicit GEMM", s.get());
  }
}

TEST_CASE("gpucmp's implicit GEMM: overlapped tiles walk several tiles of rows, each verified at every output",
          "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle dnn = make_cudnn_handle();
  const std::vector<gpucmp::fusion_path> kernel_only{gpucmp::fusion_path::gpucmp_implicit_gemm};
  int major = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  for (gpucmp::numerics t : gpucmp::quantized_conv_numerics) {
    if (t == gpucmp::numerics::fp8_e4m3 && major < 9) continue;  // as the test above says
    // 36 x 57 x 57 = 116,964 pixels: 914 tiles of 128 rows, the last of 100, more than twice the
    // blocks any GPU up to 132 multiprocessors runs at once (so each walks two or more); one
    // block of the reduction (1x1 over 64 channels) and nine (3x3).
    gpucmp::conv_problem one = layer(t, 64, 64, 1, 1), nine = layer(t, 64, 64, 3, 1);
    for (gpucmp::conv_problem* p : {&one, &nine}) {
      p->n = 36;
      p->h = p->w = 57;
    }
    const std::int64_t row_tiles = (one.n * one.p() * one.q() + 127) / 128;
    for (const gpucmp::conv_problem& p : {one, nine}) {
      quantized_buffers buf(p, 1.5, s.get());
      for (gpucmp::conv_epilogue e : {gpucmp::conv_epilogue{true, true}, gpucmp::conv_epilogue{false, false}}) {
        auto set = std::make_shared<gpucmp::quantized_conv_candidates>(dnn.get(), p, e, 4, buf.ws.bytes(), kernel_only);
        gpucmp::quantized_conv q(set, buf.tensors(e.residual), buf.ws.data(), buf.ws.bytes());
        std::size_t overlapped = 0;
        for (std::size_t i = 0; i < q.candidate_count(); ++i) {
          const std::string d = q.describe_candidate(i);
          const std::size_t at = d.find("overlapped (");
          if (at == std::string::npos) continue;
          ++overlapped;
          const long rows = std::stol(d.substr(at + 12));  // "overlapped (N blocks of rows)"
          INFO(d);
          CHECK(rows >= 1);
          CHECK(rows * 2 <= row_tiles);  // every block makes at least two tiles
        }
        CHECK(overlapped == 2);  // mma.sync's 128 x 128 and 128 x 64
        check_every_candidate(q, 1.5, "gpucmp implicit GEMM: ", s.get());
      }
    }
  }
  // 84 x 224 x 224 = 4,214,784 pixels: 65,856 tiles of 64 rows, past a grid's 65,535 along y.
  // The 64 x 64 tile is left out, the others (128 rows and more, or overlapped) run and verify.
  gpucmp::conv_problem many = layer(gpucmp::numerics::int8, 16, 16, 1, 1);
  many.n = 84;
  many.h = many.w = 224;
  quantized_buffers buf(many, 1.5, s.get());
  auto set = std::make_shared<gpucmp::quantized_conv_candidates>(dnn.get(), many, gpucmp::conv_epilogue{false, true}, 4,
                                                                  buf.ws.bytes(), kernel_only);
  gpucmp::quantized_conv q(set, buf.tensors(false), buf.ws.data(), buf.ws.bytes());
  REQUIRE(q.candidate_count() >= 2);
  for (std::size_t i = 0; i < q.candidate_count(); ++i) CHECK(q.describe_candidate(i).find(" 64x64x64 tile") == std::string::npos);
  check_every_candidate(q, 1.5, "gpucmp implicit GEMM: ", s.get());
}

TEST_CASE("gpucmp's implicit GEMM refuses what it cannot run, by name", "[gpu][models][quantized]") {
  gpucmp::stream s;
  const cudnn_handle dnn = make_cudnn_handle();
  const std::vector<gpucmp::fusion_path> kernel_only{gpucmp::fusion_path::gpucmp_implicit_gemm};
  CHECK_THROWS_WITH(
      gpucmp::quantized_conv_candidates(dnn.get(), layer(gpucmp::numerics::int8, 40, 64, 1, 1), {}, 2, 0, kernel_only),
      GPUCMP_CONTAINS("gpucmp's kernel needs C and K multiples of 16"));
  gpucmp::conv_problem grouped = layer(gpucmp::numerics::int8, 64, 64, 3, 1);
  grouped.groups = 2;
  CHECK(gpucmp::quantized_kernel_refusal(grouped, 9, 0).find("ungrouped") != std::string::npos);
  CHECK(gpucmp::quantized_kernel_refusal(layer(gpucmp::numerics::fp8_e4m3, 64, 64, 1, 1), 8, 6).find("8.9") != std::string::npos);
  CHECK(gpucmp::quantized_kernel_refusal(layer(gpucmp::numerics::fp16, 64, 64, 1, 1), 9, 0).find("not fp16") !=
        std::string::npos);
  CHECK(gpucmp::quantized_kernel_refusal(layer(gpucmp::numerics::int8, 64, 64, 3, 2), 9, 0).empty());
  gpucmp::conv_problem far = layer(gpucmp::numerics::int8, 64, 64, 3, 1);
  far.dilation_w = 1 << 19;
  CHECK(gpucmp::quantized_kernel_refusal(far, 9, 0).find("2^20 pixels") != std::string::npos);
  // Tensors off 16-byte alignment leave the kernel nothing to run, and say so.
  const gpucmp::conv_problem p = layer(gpucmp::numerics::int8, 64, 64, 1, 1);
  quantized_buffers buf(p, 1.5, s.get());
  auto set = std::make_shared<gpucmp::quantized_conv_candidates>(dnn.get(), p, gpucmp::conv_epilogue{}, 2, buf.ws.bytes(),
                                                                  kernel_only);
  gpucmp::quantized_conv_tensors t = buf.tensors(false);
  t.y = static_cast<unsigned char*>(t.y) + 8;
  CHECK_THROWS_WITH(gpucmp::quantized_conv(set, t, buf.ws.data(), buf.ws.bytes()), GPUCMP_CONTAINS("16-byte aligned"));
}
