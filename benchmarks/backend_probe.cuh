// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What the cuDNN fusion probes share (conv_genstats_probe, conv_prologue_probe): a backend
// operation graph with the descriptors it refers to kept alive, its plans, variant packs,
// each plan timed in graph mode on the measurement engine, and an FP64 per-channel
// reduction of an NHWC tensor for checking gen-stats' sums.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/ops/cudnn_backend.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/workload_shapes.hpp>

#include "program_flags.hpp"

#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace gpucmp::probe {

/// Sums s and q over a block of 256 threads; thread 0 returns with the totals.
__device__ inline void block_sum_pair(double& s, double& q) {
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
  s = ss[0];
  q = qq[0];
}

// Per channel of an NHWC tensor: FP64 sum and sum of squares (one block of 256 per channel).
__global__ void channel_sums(const __half* y, std::int64_t rows, std::int64_t channels, double* sum, double* squares) {
  const std::int64_t c = blockIdx.x;
  double s = 0, q = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const double v = __half2float(y[r * channels + c]);
    s += v;
    q += v * v;
  }
  block_sum_pair(s, q);
  if (threadIdx.x == 0) {
    sum[c] = s;
    squares[c] = q;
  }
}

/// The probes' command line: --batch=N (default 256) and --plans=N, how many plans of each
/// graph are finalized and timed (default 4).
struct arguments {
  std::int64_t batch = 256;
  std::size_t plans = 4;
  bool ok = true;  ///< false after an unknown argument (named on stderr)
};

inline arguments parse_arguments(int argc, char** argv, const char* program) {
  arguments a;
  try {
    for (int i = 1; i < argc; ++i) {
      if (const char* v = gpucmp_bench::flag_value(argv[i], "--batch=")) {
        a.batch = gpucmp_bench::whole_number(v, 1, 1 << 16, program, "--batch");
      } else if (const char* v = gpucmp_bench::flag_value(argv[i], "--plans=")) {
        a.plans = std::size_t(gpucmp_bench::whole_number(v, 1, 1024, program, "--plans"));
      } else {
        std::fprintf(stderr, "%s: unknown argument %s (--batch=N --plans=N)\n", program, argv[i]);
        a.ok = false;
      }
    }
  } catch (const gpucmp::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    a.ok = false;
  }
  return a;
}

/// An owned cuDNN handle.
using cudnn_handle = std::unique_ptr<cudnnContext, decltype(&cudnnDestroy)>;

inline cudnn_handle make_handle() {
  cudnnHandle_t raw = nullptr;
  GPUCMP_CUDNN_CHECK(cudnnCreate(&raw));
  return cudnn_handle(raw, &cudnnDestroy);
}

/// ResNet-50's forward convolution shapes at `batch`, FP16 NHWC, each once; the stem (3
/// channels) left out.
inline std::vector<conv_problem> resnet50_shapes(std::int64_t batch) {
  std::vector<conv_problem> out;
  std::set<std::string> seen;
  for (const conv_problem& p : resnet50_conv_shapes(batch, conv_dtype::fp16, conv_layout::nhwc)) {
    if (seen.insert(p.shape_name()).second && p.c % 8 == 0) out.push_back(p);
  }
  return out;
}

/// An operation graph, the tensors and operations it refers to (kept alive with it) and
/// its finalized plans.
struct graph_plans {
  std::deque<detail::backend_descriptor> parts;  // a deque: references to its elements stay valid
  detail::backend_descriptor graph;
  std::vector<detail::backend_plan> plans;

  /// Keeps `d` alive with the graph; returns it.
  detail::backend_descriptor& keep(detail::backend_descriptor d) {
    parts.push_back(std::move(d));
    return parts.back();
  }
};

/// Finalizes `g.graph` from `operations` and its plans (heuristic mode A, then the fallback
/// list, the first `cap`), leaving out reduced-precision reductions.
inline void finish(graph_plans& g, cudnnHandle_t handle, const std::vector<cudnnBackendDescriptor_t>& operations, std::size_t cap) {
  g.graph = detail::backend_descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, std::int64_t(operations.size()), operations.data());
  g.graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  g.graph.finalize("operation graph");
  g.plans = detail::heuristic_plans(
      handle, g.graph,
      [](const std::vector<cudnnBackendNumericalNote_t>& notes) {
        return std::find(notes.begin(), notes.end(), CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) == notes.end();
      },
      std::size_t{1} << 30, cap);
}

/// gen-stats(y) -> per-channel sum and sum of squares (FP32 [1, k, 1, 1], uids `sum_uid` and
/// `squares_uid`), appended to `ops`.
inline void add_genstats(graph_plans& g, const detail::backend_descriptor& y, std::int64_t k, std::int64_t sum_uid,
                         std::int64_t squares_uid, std::vector<cudnnBackendDescriptor_t>& ops) {
  const auto& sum = g.keep(detail::make_backend_tensor(sum_uid, CUDNN_DATA_FLOAT, {1, k, 1, 1}, {k, 1, k, k}));
  const auto& squares = g.keep(detail::make_backend_tensor(squares_uid, CUDNN_DATA_FLOAT, {1, k, 1, 1}, {k, 1, k, k}));
  ops.push_back(g.keep(detail::make_genstats_operation(y, sum, squares)).get());
}

/// A finalized variant pack.
inline detail::backend_descriptor pack(void* const* pointers, const std::int64_t* uids, std::int64_t count, void* workspace) {
  detail::backend_descriptor v(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  v.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, pointers);
  v.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
  v.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  v.finalize("variant pack");
  return v;
}

/// A graph's data: pointers and their uids, in the same order.
struct bindings {
  std::vector<void*> pointers;
  std::vector<std::int64_t> uids;
};

struct timed {
  double seconds = std::numeric_limits<double>::infinity();
  std::size_t index = 0;
  std::string engines;  ///< every plan's engine, "!" after one that failed to run
};

/// Graph-mode median per call of each plan, and the fastest one's index. A plan that fails
/// to run is left out.
inline timed time_plans(cudnnHandle_t handle, graph_plans& g, const bindings& b, device_buffer<unsigned char>& workspace) {
  timed best;
  measure_options o;
  o.min_samples = 5;
  o.max_samples = 20;
  for (std::size_t i = 0; i < g.plans.size(); ++i) {
    auto& plan = g.plans[i];
    if (plan.workspace > workspace.bytes()) workspace = device_buffer<unsigned char>(plan.workspace, initial_fill::uninitialized());
    const auto variant = pack(b.pointers.data(), b.uids.data(), std::int64_t(b.pointers.size()), workspace.data());
    const auto launch = [&](cudaStream_t s) {
      GPUCMP_CUDNN_CHECK(cudnnSetStream(handle, s));
      GPUCMP_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan->get(), variant.get()));
    };
    const measurement m = shared_engine().try_measure(launch, mode::graph, o);
    const bool ok = m.status == result_status::ok;
    best.engines += (best.engines.empty() ? "" : " ") + std::to_string(plan.engine) + (ok ? "" : "!");
    if (ok && m.gpu.median < best.seconds) {
      best.seconds = m.gpu.median;
      best.index = i;
    }
  }
  return best;
}

/// Runs plan `index` of `g` once on `stream`.
inline void run_plan(cudnnHandle_t handle, graph_plans& g, std::size_t index, const bindings& b,
                     device_buffer<unsigned char>& workspace, cudaStream_t stream) {
  const auto variant = pack(b.pointers.data(), b.uids.data(), std::int64_t(b.pointers.size()), workspace.data());
  GPUCMP_CUDNN_CHECK(cudnnSetStream(handle, stream));
  GPUCMP_CUDNN_CHECK(cudnnBackendExecute(handle, g.plans[index].plan->get(), variant.get()));
}

/// A finalized pointwise descriptor computing in FP32.
inline detail::backend_descriptor pointwise(cudnnPointwiseMode_t mode) {
  detail::backend_descriptor d(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  d.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  d.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
  d.finalize("pointwise");
  return d;
}

/// A finalized pointwise operation: in (op b) -> out, or op(in) -> out without b.
inline detail::backend_descriptor pointwise_operation(const detail::backend_descriptor& mode, const detail::backend_descriptor& in,
                                                      const detail::backend_descriptor* b, const detail::backend_descriptor& out) {
  detail::backend_descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, mode);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, in);
  if (b != nullptr) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out);
  op.finalize("pointwise operation");
  return op;
}

// max |a - b| and max |b| over n values, as the bits of non-negative floats (which order as
// unsigned integers); a NaN difference counts as the largest.
template <class A, class B>
__global__ void max_abs_difference(const A* a, const B* b, std::size_t n, unsigned* difference, unsigned* magnitude) {
  float d = 0, m = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float va = float(a[i]), vb = float(b[i]);
    const float e = fabsf(va - vb);
    d = (e != e) ? INFINITY : fmaxf(d, e);
    m = fmaxf(m, fabsf(vb));
  }
  atomicMax(difference, __float_as_uint(d));
  atomicMax(magnitude, __float_as_uint(m));
}

/// max |a - b| / max |b| over two device arrays of n values, computed on the GPU.
template <class A, class B>
double relative_difference(const A* a, const B* b, std::size_t n, cudaStream_t stream) {
  device_buffer<unsigned> out(2);
  GPUCMP_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, 2 * sizeof(unsigned), stream));
  max_abs_difference<<<1024, 256, 0, stream>>>(a, b, n, out.data(), out.data() + 1);
  GPUCMP_CUDA_CHECK_LAST("max_abs_difference");
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto bits = out.to_host();
  float d = 0, m = 0;
  std::memcpy(&d, &bits[0], sizeof d);
  std::memcpy(&m, &bits[1], sizeof m);
  return double(d) / (double(m) + 1e-30);
}

/// NHWC strides of an [n, c, h, w] tensor, dimensions in NCHW order.
inline std::vector<std::int64_t> nhwc_strides(std::int64_t c, std::int64_t h, std::int64_t w) { return {c * h * w, 1, w * c, c}; }

}  // namespace gpucmp::probe
