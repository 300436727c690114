// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What cuDNN's plain INT8 convolution plans leave in their INT32 sums, beside the exact sums
// computed here: the question behind the one failure of the quantized layers' saturation test
// on the H200 (docs/results/h200-quantized.md: plain engines 0 and 28 wrong at 10,440 of
// 12,800 outputs, both alike). For one NHWC shape (default: the test's, 2 x 64 x 10 x 10, 64
// 3x3 filters, padding 1) it plans the convolution alone as models/quantized_conv.cuh does
// (fusion_path::conv_then_kernel) and, for every plan cuDNN offers, runs it on the test's
// operands and prints one markdown row: the engine, how many INT32 sums are exact, and which
// reading explains the rest: the sums clamped to INT8, the sums in NCHW order, the sums of the
// filters read as K x C x R x S, or none of these.
//   int8_conv_sums [N C H W K R [STRIDE]]
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/quantized_conv.cuh>
#include <gpucmp/ops/cudnn_status.hpp>

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// Exact sums of x (NHWC) and w (K x R x S x C, or K x C x R x S with `kcrs`), as y N x P x Q x K.
std::vector<std::int64_t> sums_of(const gpucmp::conv_problem& p, const std::vector<std::int8_t>& x,
                                  const std::vector<std::int8_t>& w, bool kcrs) {
  const std::int64_t P = p.p(), Q = p.q();
  std::vector<std::int64_t> y(std::size_t(p.n * P * Q * p.k), 0);
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t oh = 0; oh < P; ++oh)
      for (std::int64_t ow = 0; ow < Q; ++ow)
        for (std::int64_t k = 0; k < p.k; ++k) {
          std::int64_t sum = 0;
          for (std::int64_t r = 0; r < p.r; ++r)
            for (std::int64_t s = 0; s < p.s; ++s) {
              const std::int64_t ih = oh * p.stride_h - p.pad_h + r, iw = ow * p.stride_w - p.pad_w + s;
              if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
              for (std::int64_t c = 0; c < p.c; ++c) {
                const std::int64_t wi = kcrs ? ((k * p.c + c) * p.r + r) * p.s + s : ((k * p.r + r) * p.s + s) * p.c + c;
                sum += std::int64_t(x[std::size_t(((n * p.h + ih) * p.w + iw) * p.c + c)]) * w[std::size_t(wi)];
              }
            }
          y[std::size_t(((n * P + oh) * Q + ow) * p.k + k)] = sum;
        }
  return y;
}

// How many of `got` equal what `expected` gives for each output index.
std::size_t matches(const std::vector<std::int32_t>& got, const std::function<std::int64_t(std::size_t)>& expected) {
  std::size_t same = 0;
  for (std::size_t i = 0; i < got.size(); ++i) same += std::int64_t(got[i]) == expected(i);
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    gpucmp::conv_problem p;
    p.dtype = gpucmp::numerics::int8;
    p.n = 2, p.c = 64, p.h = p.w = 10, p.k = 64, p.r = p.s = 3;
    if (argc >= 7) {
      p.n = std::atoll(argv[1]), p.c = std::atoll(argv[2]), p.h = std::atoll(argv[3]), p.w = std::atoll(argv[4]);
      p.k = std::atoll(argv[5]), p.r = p.s = std::atoll(argv[6]);
    }
    if (argc >= 8) p.stride_h = p.stride_w = std::atoll(argv[7]);
    p.pad_h = p.pad_w = p.r / 2;
    gpucmp::stream stream;
    cudnnHandle_t raw = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&raw));
    const std::unique_ptr<std::remove_pointer_t<cudnnHandle_t>, decltype(&cudnnDestroy)> handle(raw, &cudnnDestroy);
    gpucmp::quantized_conv_operands ops(p, 0.25, 11, stream.get());  // the saturation test's operands
    gpucmp::device_buffer<unsigned char> workspace(std::size_t{256} << 20);
    const gpucmp::conv_epilogue epilogue{true, false};
    const std::vector<gpucmp::fusion_path> plain{gpucmp::fusion_path::conv_then_kernel};
    auto set = std::make_shared<const gpucmp::quantized_conv_candidates>(handle.get(), p, epilogue, 64, workspace.bytes(), plain);
    gpucmp::quantized_conv layer(set, ops.tensors(true, true), workspace.data(), workspace.bytes());
    std::vector<std::int8_t> x(ops.x.bytes()), w(ops.w.bytes());
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    GPUCMP_CUDA_CHECK(cudaMemcpy(x.data(), ops.x.data(), x.size(), cudaMemcpyDeviceToHost));
    GPUCMP_CUDA_CHECK(cudaMemcpy(w.data(), ops.w.data(), w.size(), cudaMemcpyDeviceToHost));
    const std::vector<std::int64_t> exact = sums_of(p, x, w, false), kcrs = sums_of(p, x, w, true);
    const std::int64_t P = p.p(), Q = p.q(), K = p.k;
    std::printf("%s: %zu plain plans\n\n", set->name().c_str(), layer.candidate_count());
    std::printf("| plan | exact | clamped to INT8 | NCHW order | filters as KCRS | first wrong (got / exact) |\n"
                "|---|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < layer.candidate_count(); ++i) {
      layer.select(i, stream.get());
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(ops.sums.data(), 0x55, ops.sums.bytes(), stream.get()));
      layer(stream.get());
      std::vector<std::int32_t> got(exact.size());
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      GPUCMP_CUDA_CHECK(cudaMemcpy(got.data(), ops.sums.data(), got.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
      const std::size_t same = matches(got, [&](std::size_t j) { return exact[j]; });
      const std::size_t clamped =
          matches(got, [&](std::size_t j) { return std::min<std::int64_t>(127, std::max<std::int64_t>(-128, exact[j])); });
      const std::size_t nchw = matches(got, [&](std::size_t j) {  // element j read as N x K x P x Q
        const std::int64_t q = std::int64_t(j) % Q, pp = (std::int64_t(j) / Q) % P, k = (std::int64_t(j) / (P * Q)) % K,
                           n = std::int64_t(j) / (P * Q * K);
        return exact[std::size_t(((n * P + pp) * Q + q) * K + k)];
      });
      const std::size_t as_kcrs = matches(got, [&](std::size_t j) { return kcrs[j]; });
      std::string first = "none";
      for (std::size_t j = 0; j < got.size(); ++j) {
        if (std::int64_t(got[j]) != exact[j]) {
          first = "#" + std::to_string(j) + ": " + std::to_string(got[j]) + " / " + std::to_string(exact[j]);
          break;
        }
      }
      std::printf("| %s | %zu of %zu | %zu | %zu | %zu | %s |\n", layer.describe_candidate(i).c_str(), same, got.size(), clamped,
                  nchw, as_kcrs, first.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "int8_conv_sums: %s\n", e.what());
    return 1;
  }
}
