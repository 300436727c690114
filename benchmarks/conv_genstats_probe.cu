// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A probe for the training issue's next lever (docs/training.md, "Not yet"): does cuDNN run a
// forward convolution with batch norm's statistics in its epilogue (a backend graph
// conv -> gen-stats: y, and per channel sum(y) and sum(y^2) in FP32) on this GPU, for
// ResNet-50's forward shapes, and how fast against the plain convolution? Per shape it
// builds both graphs, finalizes the plans heuristic mode A and the fallback list offer
// (runtime-compiled engines compile here), times the first --plans of each in graph mode on
// the measurement engine, checks the fastest fused plan's y against the fastest plain plan's
// y and its sums against an FP64 reduction of its own y, and prints one row:
//   shape | plain us | fused us | fused / plain | engines | check
// A shape no engine fuses prints "no engine". Nothing here is used by the library yet.
//   conv_genstats_probe [--batch=256] [--plans=4]
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cudnn_backend.hpp>
#include <gpucmp/ops/cudnn_legacy.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/workload_shapes.hpp>

#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

// Per channel of an NHWC tensor: FP64 sum and sum of squares (one block per channel).
__global__ void channel_sums(const __half* y, std::int64_t rows, std::int64_t channels, double* sum, double* squares) {
  const std::int64_t c = blockIdx.x;
  double s = 0, q = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const double v = __half2float(y[r * channels + c]);
    s += v;
    q += v * v;
  }
  __shared__ double ss[256], qq[256];
  ss[threadIdx.x] = s;
  qq[threadIdx.x] = q;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      ss[threadIdx.x] += ss[threadIdx.x + half];
      qq[threadIdx.x] += qq[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sum[c] = ss[0];
    squares[c] = qq[0];
  }
}

struct graph_plans {
  gpucmp::detail::backend_descriptor x, w, y, sum, squares, conv, conv_op, stats_op, graph;
  std::vector<gpucmp::detail::backend_plan> plans;
};

// conv(x, w) -> y, and with `stats` gen-stats(y) -> sum, squares; uids x 1, w 2, y 3, sum 4, squares 5.
std::unique_ptr<graph_plans> build(cudnnHandle_t handle, const gpucmp::conv_problem& p, bool stats, std::size_t cap) {
  using gpucmp::detail::backend_descriptor;
  auto g = std::make_unique<graph_plans>();
  const auto strides = [](std::int64_t c, std::int64_t h, std::int64_t w) {
    return std::vector<std::int64_t>{c * h * w, 1, w * c, c};  // NHWC, dimensions in NCHW order
  };
  g->x = gpucmp::detail::make_backend_tensor(1, CUDNN_DATA_HALF, {p.n, p.c, p.h, p.w}, strides(p.c, p.h, p.w));
  g->w = gpucmp::detail::make_backend_tensor(2, CUDNN_DATA_HALF, {p.k, p.c, p.r, p.s}, strides(p.c, p.r, p.s));
  g->y = gpucmp::detail::make_backend_tensor(3, CUDNN_DATA_HALF, {p.n, p.k, p.p(), p.q()}, strides(p.k, p.p(), p.q()));
  g->conv = gpucmp::detail::make_backend_convolution(p.pad_h, p.pad_w, p.stride_h, p.stride_w, 1, 1);
  const float alpha = 1.0f, beta = 0.0f;
  g->conv_op = backend_descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  g->conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, g->x);
  g->conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, g->w);
  g->conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, g->y);
  g->conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, g->conv);
  g->conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  g->conv_op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  g->conv_op.finalize("convolution operation");
  std::vector<cudnnBackendDescriptor_t> ops{g->conv_op.get()};
  if (stats) {
    g->sum = gpucmp::detail::make_backend_tensor(4, CUDNN_DATA_FLOAT, {1, p.k, 1, 1}, {p.k, 1, p.k, p.k});
    g->squares = gpucmp::detail::make_backend_tensor(5, CUDNN_DATA_FLOAT, {1, p.k, 1, 1}, {p.k, 1, p.k, p.k});
    const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    g->stats_op = backend_descriptor(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    g->stats_op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
    g->stats_op.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    g->stats_op.set(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, g->y);
    g->stats_op.set(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, g->sum);
    g->stats_op.set(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, g->squares);
    g->stats_op.finalize("gen-stats operation");
    ops.push_back(g->stats_op.get());
  }
  g->graph = backend_descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g->graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, std::int64_t(ops.size()), ops.data());
  g->graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  g->graph.finalize("operation graph");
  g->plans = gpucmp::detail::heuristic_plans(
      handle, g->graph,
      [](const std::vector<cudnnBackendNumericalNote_t>& notes) {
        return std::find(notes.begin(), notes.end(), CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) == notes.end();
      },
      std::size_t{1} << 30, cap);
  return g;
}

gpucmp::detail::backend_descriptor pack(void* const* pointers, const std::int64_t* uids, std::int64_t count, void* workspace) {
  gpucmp::detail::backend_descriptor v(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  v.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, pointers);
  v.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
  v.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  v.finalize("variant pack");
  return v;
}

struct timed {
  double seconds = std::numeric_limits<double>::infinity();
  std::size_t index = 0;
  std::string engines;
};

// Graph-mode median per call of each plan; the fastest one's index. A plan that fails to run
// is left out (its engine is listed with "!").
timed time_plans(cudnnHandle_t handle, graph_plans& g, void* const* pointers, const std::int64_t* uids, std::int64_t count,
                 gpucmp::device_buffer<unsigned char>& workspace) {
  timed best;
  gpucmp::measure_options o;
  o.min_samples = 5;
  o.max_samples = 20;
  for (std::size_t i = 0; i < g.plans.size(); ++i) {
    auto& plan = g.plans[i];
    if (plan.workspace > workspace.bytes()) workspace = gpucmp::device_buffer<unsigned char>(plan.workspace, gpucmp::initial_fill::uninitialized());
    const auto variant = pack(pointers, uids, count, workspace.data());
    const auto launch = [&](cudaStream_t s) {
      GPUCMP_CUDNN_CHECK(cudnnSetStream(handle, s));
      GPUCMP_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan->get(), variant.get()));
    };
    const gpucmp::measurement m = gpucmp::shared_engine().try_measure(launch, gpucmp::mode::graph, o);
    const bool ok = m.status == gpucmp::result_status::ok;
    best.engines += (best.engines.empty() ? "" : " ") + std::to_string(plan.engine) + (ok ? "" : "!");
    if (ok && m.gpu.median < best.seconds) {
      best.seconds = m.gpu.median;
      best.index = i;
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t batch = 256;
  std::size_t cap = 4;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batch=", 8) == 0) batch = std::atoll(argv[i] + 8);
    else if (std::strncmp(argv[i], "--plans=", 8) == 0) cap = std::size_t(std::atoll(argv[i] + 8));
    else {
      std::fprintf(stderr, "conv_genstats_probe: unknown argument %s (--batch=N --plans=N)\n", argv[i]);
      return 2;
    }
  }
  try {
    cudnnHandle_t raw = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&raw));
    std::unique_ptr<cudnnContext, decltype(&cudnnDestroy)> handle(raw, &cudnnDestroy);
    std::printf("| shape | plain us | fused us | fused / plain | fused engines | check |\n|---|---|---|---|---|---|\n");
    std::set<std::string> seen;
    for (const gpucmp::conv_problem& p : gpucmp::resnet50_conv_shapes(batch, gpucmp::conv_dtype::fp16, gpucmp::conv_layout::nhwc)) {
      if (!seen.insert(p.shape_name()).second || p.c % 8 != 0) continue;  // once per shape; the stem's 3 channels aside
      const cudaStream_t stream = gpucmp::shared_engine().stream();
      gpucmp::device_buffer<__half> x(std::size_t(p.x_elements())), w(std::size_t(p.w_elements())),
          y_plain(std::size_t(p.y_elements())), y(std::size_t(p.y_elements()));
      gpucmp::fill_uniform(x.data(), x.size(), 1, -1, 1, stream);
      gpucmp::fill_uniform(w.data(), w.size(), 2, -0.2, 0.2, stream);
      gpucmp::device_buffer<float> sum(std::size_t(p.k)), squares(std::size_t(p.k));
      gpucmp::device_buffer<unsigned char> workspace(256, gpucmp::initial_fill::uninitialized());
      std::string row = "| " + p.shape_name() + " | ";
      auto plain = build(handle.get(), p, false, cap);
      void* plain_ptrs[3] = {x.data(), w.data(), y_plain.data()};
      const std::int64_t plain_uids[3] = {1, 2, 3};
      const timed t_plain = time_plans(handle.get(), *plain, plain_ptrs, plain_uids, 3, workspace);
      std::unique_ptr<graph_plans> fused;
      std::string why;
      try {
        fused = build(handle.get(), p, true, cap);
      } catch (const gpucmp::error& e) {
        why = e.what();
      }
      if (!fused || fused->plans.empty()) {
        std::printf("%s%.2f | no engine | | | %s |\n", row.c_str(), t_plain.seconds * 1e6, why.c_str());
        continue;
      }
      void* fused_ptrs[5] = {x.data(), w.data(), y.data(), sum.data(), squares.data()};
      const std::int64_t fused_uids[5] = {1, 2, 3, 4, 5};
      const timed t_fused = time_plans(handle.get(), *fused, fused_ptrs, fused_uids, 5, workspace);
      // The check: the fastest fused plan's y against the fastest plain plan's, and its sums
      // against an FP64 reduction of its own y, once on poisoned sums (does the epilogue
      // overwrite them?) and once on zeroed ones (or must they start at zero?).
      std::string check = "not run";
      if (std::isfinite(t_fused.seconds) && std::isfinite(t_plain.seconds)) {
        const auto run = [&](graph_plans& g, std::size_t index, void* const* pointers, const std::int64_t* uids, std::int64_t count) {
          const auto variant = pack(pointers, uids, count, workspace.data());
          GPUCMP_CUDNN_CHECK(cudnnSetStream(handle.get(), stream));
          GPUCMP_CUDNN_CHECK(cudnnBackendExecute(handle.get(), g.plans[index].plan->get(), variant.get()));
        };
        run(*plain, t_plain.index, plain_ptrs, plain_uids, 3);
        const std::int64_t rows = p.n * p.p() * p.q();
        gpucmp::device_buffer<double> s64(std::size_t(p.k)), q64(std::size_t(p.k));
        // Worst error of the sums, relative to sqrt(rows * sum y^2) and to sum y^2.
        const auto sums_error = [&](unsigned char fill_byte) {
          GPUCMP_CUDA_CHECK(cudaMemsetAsync(sum.data(), fill_byte, sum.size() * sizeof(float), stream));
          GPUCMP_CUDA_CHECK(cudaMemsetAsync(squares.data(), fill_byte, squares.size() * sizeof(float), stream));
          run(*fused, t_fused.index, fused_ptrs, fused_uids, 5);
          channel_sums<<<unsigned(p.k), 256, 0, stream>>>(y.data(), rows, p.k, s64.data(), q64.data());
          GPUCMP_CUDA_CHECK_LAST("channel_sums");
          GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
          const auto fs = sum.to_host(), fq = squares.to_host();
          const auto rs = s64.to_host(), rq = q64.to_host();
          double sum_err = 0, sq_err = 0;
          for (std::size_t c = 0; c < fs.size(); ++c) {
            const double a = std::fabs(fs[c] - rs[c]) / (std::sqrt(rq[c] * double(rows)) + 1e-30);
            const double b = std::fabs(fq[c] - rq[c]) / (rq[c] + 1e-30);
            sum_err = std::isnan(a) || a > sum_err ? a : sum_err;
            sq_err = std::isnan(b) || b > sq_err ? b : sq_err;
          }
          return std::make_pair(sum_err, sq_err);
        };
        const auto poisoned = sums_error(0xFF), zeroed = sums_error(0);
        const auto a = y.to_host(), b = y_plain.to_host();
        double y_diff = 0;
        for (std::size_t i = 0; i < a.size(); ++i) y_diff = std::max(y_diff, std::fabs(double(__half2float(a[i])) - double(__half2float(b[i]))));
        char buf[240];
        std::snprintf(buf, sizeof buf,
                      "max |y - plain y| %.3g; on zeroed sums: sum error %.2e of sqrt(n sum y^2), sum y^2 error %.2e; "
                      "on poisoned sums: %.2e, %.2e",
                      y_diff, zeroed.first, zeroed.second, poisoned.first, poisoned.second);
        check = buf;
      }
      std::printf("%s%.2f | %.2f | %.3f | %s | %s |\n", row.c_str(), t_plain.seconds * 1e6, t_fused.seconds * 1e6,
                  t_fused.seconds / t_plain.seconds, t_fused.engines.c_str(), check.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conv_genstats_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
