// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A verified cuDNN convolution (component gpucmp::cudnn): forward, backward-data or
// backward-filter, NCHW or NHWC, FP32 / TF32 / FP16 / BF16; an operation of
// ops/operation.hpp. One object owns its cuDNN handle, its graph (ops/conv_graph.hpp) and
// legacy descriptors, tensors (inputs random, output poisoned), workspace and candidates: the
// graph's execution plans (ops/cudnn_graph.hpp) and the legacy API's algorithms within the
// workspace limit. The legacy API stays beside the graph API as a second source of
// candidates, not for what the graph cannot express: its heuristic reaches algorithms the
// graph's heuristics rank low or leave out, and it runs some shapes fastest
// (docs/results/h200-models.md, "The stem"), so the search times both.
// choose_algorithm() runs cuDNN's first choice or a search that times them through the
// engine and keeps the fastest that verifies; the object records API, engine or algorithm,
// numerical notes or math type, and workspace. verify() compares the
// output with a double reference: every output on the CPU for small problems, a random
// sample (first and last included) on the GPU for large ones.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/conv_graph.hpp>
#include <gpucmp/ops/cudnn_graph.hpp>
#include <gpucmp/ops/cudnn_legacy.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/specs/work.hpp>

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp {

/// Which cuDNN API runs the convolution.
enum class conv_api {
  any,      ///< both below: the search times the candidates of each (the default)
  backend,  ///< the graph API (through cudnn-frontend): the execution plans cuDNN's heuristics offer
  legacy,   ///< cudnnConvolutionForward and friends: one configuration per algorithm enum
};

/// "any", "backend", "legacy".
inline const char* to_string(conv_api api) noexcept {
  switch (api) {
    case conv_api::any: return "any";
    case conv_api::backend: return "backend";
    case conv_api::legacy: return "legacy";
  }
  return "unknown";
}

/// Settings of a conv.
struct conv_options {
  conv_direction direction = conv_direction::forward;  ///< which pass
  conv_api api = conv_api::any;                        ///< which cuDNN API
  algorithm_choice choice = algorithm_choice::search;  ///< heuristic's first choice, or timed search
  search_options search;                               ///< how the search times candidates
  std::size_t workspace_limit = std::size_t{1} << 30;  ///< largest workspace an algorithm may use
  std::uint64_t seed = 1;                              ///< inputs' random stream
  /// The pass adds its result to what the output holds (cuDNN's beta = 1) instead of
  /// overwriting it: a tensor's second gradient added by the data-gradient pass itself, with
  /// no separate addition. Searched, timed and verified that way (on a random prior output).
  bool accumulate = false;
  /// Forward, backend API only: the pass also writes, per output channel, the sum and the sum
  /// of squares of y in FP32 (cuDNN's gen-stats in the convolution's epilogue: batch norm's
  /// statistics without reading y again). Searched, timed and verified that way (the sums
  /// against an FP64 reduction of the y the pass wrote); conv_tensors::sum and squares.
  bool statistics = false;
};

/// The cuDNN algorithm a conv runs, as recorded in its results.
struct conv_algorithm {
  conv_api api = conv_api::backend;  ///< which API runs it
  int algo = -1;                ///< legacy: cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t value
  std::int64_t engine = -1;     ///< backend: the engine's global index
  std::string knobs;            ///< backend: the engine's knob choices, "k2=3,k3=0" (cudnn_plan::knobs)
  std::string name;             ///< legacy: e.g. "IMPLICIT_PRECOMP_GEMM"; backend: "engine 12"
  std::string math;             ///< legacy: "TENSOR_OP", "FMA", ...; backend: the plan's notes (cudnn_plan::notes)
  std::size_t workspace = 0;    ///< workspace bytes it uses
  int heuristic_rank = 0;       ///< its place in the heuristic's list (0 = first choice)
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< how it was chosen
  double searched_seconds = 0;  ///< its median per call during the search (0 if not searched)

  /// "cuDNN engine 12 {k2=3,k3=0} [TENSOR_CORE] ws 0 B (search: heuristic rank 3)" or
  /// "cuDNN legacy IMPLICIT_PRECOMP_GEMM (1) math TENSOR_OP ws 0 B (heuristic: heuristic rank 0)".
  std::string describe() const {
    std::ostringstream s;
    if (api == conv_api::backend) {
      s << "cuDNN " << name << (knobs.empty() ? "" : " {" + knobs + "}") << " [" << math << "]";
    } else {
      s << "cuDNN legacy " << name << " (" << algo << ") math " << math;
    }
    s << " ws " << workspace << " B (" << to_string(chosen_by) << ": heuristic rank " << heuristic_rank << ")";
    return s.str();
  }
};

namespace detail {

inline const char* cudnn_math_name(cudnnMathType_t m) noexcept {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA";
  }
  return "unknown";
}

inline std::string cudnn_algo_name(conv_direction d, int algo) {
  static const char* const fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                    "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const bwd_data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const bwd_filter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                                           "FFT_TILING"};
  const char* const* names = d == conv_direction::forward ? fwd : d == conv_direction::backward_data ? bwd_data : bwd_filter;
  const int count = d == conv_direction::forward ? 8 : d == conv_direction::backward_data ? 6 : 7;
  return algo >= 0 && algo < count ? names[algo] : "ALGO_" + std::to_string(algo);
}

// Transform algorithms lose a few bits per term (see conv_tolerance()).
inline bool is_transform_algorithm(const conv_algorithm& a) {
  const std::string& text = a.api == conv_api::backend ? a.math : a.name;
  return text.find("FFT") != std::string::npos || text.find("WINOGRAD") != std::string::npos;
}

/// Shape and layout of one convolution, for the reference.
struct conv_geometry {
  std::int64_t n, c, h, w, k, r, s, p, q, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  bool nhwc;
  __host__ __device__ std::int64_t x_at(std::int64_t ni, std::int64_t ci, std::int64_t hi, std::int64_t wi) const {
    return nhwc ? ((ni * h + hi) * w + wi) * c + ci : ((ni * c + ci) * h + hi) * w + wi;
  }
  __host__ __device__ std::int64_t y_at(std::int64_t ni, std::int64_t ki, std::int64_t pi, std::int64_t qi) const {
    return nhwc ? ((ni * p + pi) * q + qi) * k + ki : ((ni * k + ki) * p + pi) * q + qi;
  }
  __host__ __device__ std::int64_t w_at(std::int64_t ki, std::int64_t ci, std::int64_t ri, std::int64_t si) const {
    const std::int64_t cg = c / groups;
    return nhwc ? ((ki * r + ri) * s + si) * cg + ci : ((ki * cg + ci) * r + ri) * s + si;
  }
};

/// p's shape and layout, as the reference kernels read them.
inline conv_geometry conv_geometry_of(const conv_problem& p) noexcept {
  return {p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.p(), p.q(), p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
          p.groups, p.layout == conv_layout::nhwc};
}

/// The outputs (logical indices, ascending) a check compares: all `outputs` when `every` or
/// when there are at most 16,384, else 16,384 distinct ones drawn from random stream `seed`,
/// the first and the last among them.
inline std::vector<std::int64_t> checked_outputs(std::int64_t outputs, std::uint64_t seed, bool every = false) {
  std::vector<std::int64_t> picked;
  if (every || outputs <= 16384) {
    for (std::int64_t i = 0; i < outputs; ++i) picked.push_back(i);
    return picked;
  }
  std::set<std::int64_t> set{0, outputs - 1};
  for (std::uint64_t t = 0; set.size() < 16384; ++t) set.insert(std::int64_t(random_bits(seed, t) % std::uint64_t(outputs)));
  picked.assign(set.begin(), set.end());
  return picked;
}

// Terms start, start + step, ... of output `out` (logical NCHW-ordered index of the pass's
// output) of pass `d`; adds to sum and squares.
template <class T>
__host__ __device__ void conv_reference_terms(conv_direction d, const conv_geometry& g, const T* x, const T* wt,
                                              const T* y, std::int64_t out, std::int64_t start, std::int64_t step,
                                              double& sum, double& squares) {
  const std::int64_t cg = g.c / g.groups, kg = g.k / g.groups;
  if (d == conv_direction::forward) {
    const std::int64_t qi = out % g.q, pi = (out / g.q) % g.p, ki = (out / (g.q * g.p)) % g.k, ni = out / (g.q * g.p * g.k);
    const std::int64_t group = ki / kg;
    for (std::int64_t t = start; t < cg * g.r * g.s; t += step) {
      const std::int64_t si = t % g.s, ri = (t / g.s) % g.r, ci = t / (g.s * g.r);
      const std::int64_t hi = pi * g.stride_h - g.pad_h + ri * g.dil_h, wi = qi * g.stride_w - g.pad_w + si * g.dil_w;
      if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
      const double v = to_double(x[g.x_at(ni, group * cg + ci, hi, wi)]) * to_double(wt[g.w_at(ki, ci, ri, si)]);
      sum += v;
      squares += v * v;
    }
  } else if (d == conv_direction::backward_data) {
    const std::int64_t wi = out % g.w, hi = (out / g.w) % g.h, ci = (out / (g.w * g.h)) % g.c, ni = out / (g.w * g.h * g.c);
    const std::int64_t group = ci / cg, cl = ci % cg;
    for (std::int64_t t = start; t < kg * g.r * g.s; t += step) {
      const std::int64_t si = t % g.s, ri = (t / g.s) % g.r, kl = t / (g.s * g.r);
      const std::int64_t ph = hi + g.pad_h - ri * g.dil_h, qw = wi + g.pad_w - si * g.dil_w;
      if (ph < 0 || qw < 0 || ph % g.stride_h != 0 || qw % g.stride_w != 0) continue;
      const std::int64_t pi = ph / g.stride_h, qi = qw / g.stride_w;
      if (pi >= g.p || qi >= g.q) continue;
      const std::int64_t ki = group * kg + kl;
      const double v = to_double(y[g.y_at(ni, ki, pi, qi)]) * to_double(wt[g.w_at(ki, cl, ri, si)]);
      sum += v;
      squares += v * v;
    }
  } else {
    const std::int64_t si = out % g.s, ri = (out / g.s) % g.r, cl = (out / (g.s * g.r)) % cg, ki = out / (g.s * g.r * cg);
    const std::int64_t group = ki / kg;
    for (std::int64_t t = start; t < g.n * g.p * g.q; t += step) {
      const std::int64_t qi = t % g.q, pi = (t / g.q) % g.p, ni = t / (g.q * g.p);
      const std::int64_t hi = pi * g.stride_h - g.pad_h + ri * g.dil_h, wi = qi * g.stride_w - g.pad_w + si * g.dil_w;
      if (hi < 0 || hi >= g.h || wi < 0 || wi >= g.w) continue;
      const double v = to_double(x[g.x_at(ni, group * cg + cl, hi, wi)]) * to_double(y[g.y_at(ni, ki, pi, qi)]);
      sum += v;
      squares += v * v;
    }
  }
}

// Storage offset of output `out` (logical NCHW-ordered) of pass `d`.
__host__ __device__ inline std::int64_t conv_output_offset(conv_direction d, const conv_geometry& g, std::int64_t out) {
  if (d == conv_direction::forward) {
    return g.y_at(out / (g.q * g.p * g.k), (out / (g.q * g.p)) % g.k, (out / g.q) % g.p, out % g.q);
  }
  if (d == conv_direction::backward_data) {
    return g.x_at(out / (g.w * g.h * g.c), (out / (g.w * g.h)) % g.c, (out / g.w) % g.h, out % g.w);
  }
  const std::int64_t cg = g.c / g.groups;
  return g.w_at(out / (g.s * g.r * cg), (out / (g.s * g.r)) % cg, (out / g.s) % g.r, out % g.s);
}

// One warp per checked output; `prior` (or null): what an accumulating pass added to, whose
// value at each output goes to `prior_at`.
template <class T>
__global__ void conv_reference_kernel(conv_direction d, conv_geometry g, const T* x, const T* wt, const T* y, const T* prior,
                                      const std::int64_t* outputs, std::size_t count, double* reference, double* l2,
                                      double* got, double* prior_at) {
  const std::size_t warp = (blockIdx.x * std::size_t(blockDim.x) + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  if (warp >= count) return;  // whole warps leave together
  double sum = 0, squares = 0;
  conv_reference_terms(d, g, x, wt, y, outputs[warp], lane, 32, sum, squares);
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
    squares += __shfl_down_sync(0xffffffffu, squares, offset);
  }
  if (lane == 0) {
    const T* out = d == conv_direction::forward ? y : d == conv_direction::backward_data ? x : wt;
    const std::int64_t at = conv_output_offset(d, g, outputs[warp]);
    prior_at[warp] = prior != nullptr ? to_double(prior[at]) : 0.0;
    reference[warp] = sum + prior_at[warp];
    l2[warp] = sqrt(squares);
    got[warp] = to_double(out[at]);
  }
}

// Per output channel of y (n x k x p*q values, NHWC or NCHW): the FP64 sums of y, y^2 and
// y^4, the reference of conv_options::statistics. One block of 256 threads per channel.
template <class T>
__global__ void conv_channel_sums(const T* y, std::int64_t n, std::int64_t k, std::int64_t pixels, bool nhwc, double* out) {
  const std::int64_t c = blockIdx.x;
  double s1 = 0, s2 = 0, s4 = 0;
  for (std::int64_t i = threadIdx.x; i < n * pixels; i += blockDim.x) {
    const std::int64_t image = i / pixels, pixel = i % pixels;
    const double v = to_double(y[nhwc ? (image * pixels + pixel) * k + c : (image * k + c) * pixels + pixel]);
    s1 += v;
    s2 += v * v;
    s4 += v * v * v * v;
  }
  __shared__ double part[3][256];
  part[0][threadIdx.x] = s1;
  part[1][threadIdx.x] = s2;
  part[2][threadIdx.x] = s4;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      for (int j = 0; j < 3; ++j) part[j][threadIdx.x] += part[j][threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int j = 0; j < 3; ++j) out[3 * c + j] = part[j][0];
  }
}

}  // namespace detail

/// Device tensors a pass runs on, as the pass names them: x, w and y forward; dx, w and dy
/// backward-data; x, dw and dy backward-filter. In the problem's layout and precision.
struct conv_tensors {
  void* x = nullptr;  ///< x (dx backward-data)
  void* w = nullptr;  ///< w (dw backward-filter)
  void* y = nullptr;  ///< y (dy backward)
  float* sum = nullptr;      ///< conv_options::statistics: per channel, sum of y (K values)
  float* squares = nullptr;  ///< conv_options::statistics: per channel, sum of y^2 (K values)
};

/// One verified cuDNN convolution pass on the current device. An operation
/// (ops/operation.hpp): construction prepares it and times nothing; choose_algorithm() or
/// search() picks the algorithm it runs.
class conv {
  // One algorithm the conv can run: a legacy algorithm with its math type, or a plan of the
  // graph.
  struct candidate {
    conv_algorithm info;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // legacy API
    std::size_t plan = 0;                       // backend API: its index in m_graph
  };

 public:
  /// Prepares `problem`: validates it, checks that this GPU supports its precision and that
  /// its tensors fit in memory, allocates and fills them on `stream`, and enumerates the
  /// candidates: cuDNN's first choice with algorithm_choice::heuristic; each API's top
  /// candidates within the workspace limit with search. It runs candidate 0 until a search
  /// picks another. Throws invalid_argument, unsupported, or out_of_memory.
  conv(const conv_problem& problem, const conv_options& options = {}, cudaStream_t stream = nullptr)
      : m_problem(problem), m_options(options) {
    m_problem.validate();
    const device_info dev = query_current_device();
    const std::string unsupported_reason = support(m_problem, m_options, dev);
    if (!unsupported_reason.empty()) throw unsupported(unsupported_reason);
    check_fits(dev);
    create_descriptors();
    allocate_and_fill(stream);
    enumerate_candidates();
    select(0, stream);
  }

  /// "" when `device` can run `problem` in its precision, else why not. Allocates nothing.
  static std::string support(const conv_problem& problem, const conv_options& options, const device_info& device) {
    if (const int needed = minimum_compute_capability(problem.dtype); device.cc_major * 10 + device.cc_minor < needed) {
      return std::string(to_string(problem.dtype)) + " convolutions need sm_" + std::to_string(needed) + "+, this GPU is sm_" +
             std::to_string(device.cc_major * 10 + device.cc_minor);
    }
    if (options.statistics) {
      if (options.direction != conv_direction::forward || options.accumulate || options.api == conv_api::legacy) {
        return "statistics in the epilogue: a forward pass on the backend API that does not accumulate";
      }
      if (device.cc_major < 8) return "statistics in the epilogue: cuDNN fuses them on sm_80+ only";
    }
    return {};
  }

  /// Device bytes of its tensors (x, w, y); the workspace comes on top, at most
  /// options.workspace_limit, as large as the largest candidate needs. Allocates nothing.
  static double bytes_needed(const conv_problem& problem, const conv_options& options) {
    const double prior = options.accumulate ? double(output_elements(problem, options.direction)) : 0.0;
    const double sums = options.statistics ? 2.0 * 4.0 * double(problem.k) : 0.0;
    const double output_element = double(element_bytes(types_of(problem.dtype).output));
    return problem.x_bytes() + problem.w_bytes() + problem.y_bytes() + output_element * prior + sums;
  }

  /// Enqueues the pass on `stream` with the selected algorithm.
  void operator()(cudaStream_t stream) {
    require_tensors();
    launch(m_all[m_current], stream);
  }

  /// Runs the pass once on a poisoned output (with options.accumulate, on the random prior
  /// output it adds to) and compares it with a double reference.
  verification verify(cudaStream_t stream) {
    require_tensors();
    prepare_output(stream);
    (*this)(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return check_output(stream);
  }

  /// How many candidates were enumerated (1 with algorithm_choice::heuristic).
  std::size_t candidate_count() const noexcept { return m_all.size(); }
  /// What candidate `i` runs, for the search log.
  std::string describe_candidate(std::size_t i) const { return m_all.at(i).info.describe(); }
  /// Candidate `i`'s cuDNN API: the search re-times the fastest of each
  /// (search_options::refine_group_margin).
  int candidate_group(std::size_t i) const { return int(m_all.at(i).info.api); }
  /// Runs candidate `i` from now on (its verification tolerance comes with it).
  void select(std::size_t i, cudaStream_t /*stream*/) {
    if (i >= m_all.size()) throw invalid_argument("conv::select: no candidate " + std::to_string(i));
    m_current = i;
    m_chosen = m_all[i].info;
  }
  /// Whether its options ask for a timed search.
  algorithm_choice choice() const noexcept { return m_options.choice; }
  /// How its options ask it to be searched.
  const search_options& search_settings() const noexcept { return m_options.search; }
  /// Keeps a search's verdict and timings.
  void adopt_search(const search_choice& chosen, std::vector<candidate_time> log) {
    select(chosen.index, nullptr);
    m_chosen.chosen_by = algorithm_choice::search;
    m_chosen.searched_seconds = chosen.seconds;
    m_search_log = std::move(log);
  }

  /// Compares the output as it is now with a double reference (verify() without the run).
  verification check_output(cudaStream_t stream) const {
    // x, w and y share one type in every recipe a convolution takes (conv_numerics).
    return visit_floating_storage(types_of(m_problem.dtype).output, [&](auto zero) { return compare<decltype(zero)>(stream); });
  }

  /// The problem.
  const conv_problem& problem() const noexcept { return m_problem; }
  /// Whether the pass adds to its output (options.accumulate).
  bool accumulates() const noexcept { return m_options.accumulate; }
  /// Which pass.
  conv_direction direction() const noexcept { return m_options.direction; }
  /// The algorithm it runs.
  const conv_algorithm& algorithm() const noexcept { return m_chosen; }
  /// Every timing of its search (empty until a search ran).
  const std::vector<candidate_time>& search_log() const noexcept { return m_search_log; }
  /// "conv_fwd/cudnn/fp16_nhwc/n32_c64_h56_w56_k64_r3_s3_p1_u1".
  /// "conv_dgrad+accumulate/..." when it adds to its output.
  std::string name() const {
    return std::string("conv_") + to_string(m_options.direction) + (m_options.accumulate ? "+accumulate" : "") +
           (m_options.statistics ? "+statistics" : "") + "/cudnn/" +
           to_string(m_problem.dtype) + "_" +
           to_string(m_problem.layout) + "/" + m_problem.shape_name();
  }
  /// Its problem's axes (conv_problem::axes) and its pass, what runs it and the versions
  /// that did, for its row.
  std::vector<axis> axes() const {
    std::vector<axis> a = m_problem.axes();
    a.push_back(axis::of("pass", to_string(m_options.direction)));
    a.push_back(axis::of("accumulate", m_options.accumulate ? 1.0 : 0.0));
    a.push_back(axis::of("statistics", m_options.statistics ? 1.0 : 0.0));
    a.push_back(axis::of("choice", to_string(m_options.choice)));
    a.push_back(axis::of("api", to_string(m_options.api)));
    return a;
  }
  std::string provider() const { return "cuDNN"; }  ///< see axes()
  std::vector<std::pair<std::string, std::string>> libraries() const { return cudnn_libraries(); }  ///< see axes()

  /// One call's work: direct-convolution FLOPs, each operand read once (the prior output too
  /// when it accumulates), the result written once.
  gpucmp::work work() const {
    gpucmp::work w;
    const conv_problem& p = m_problem;
    w.flops = p.flops();
    switch (m_options.direction) {
      case conv_direction::forward: w.bytes_read = p.x_bytes() + p.w_bytes(); w.bytes_written = p.y_bytes(); break;
      case conv_direction::backward_data: w.bytes_read = p.y_bytes() + p.w_bytes(); w.bytes_written = p.x_bytes(); break;
      case conv_direction::backward_filter: w.bytes_read = p.x_bytes() + p.y_bytes(); w.bytes_written = p.w_bytes(); break;
    }
    if (m_options.accumulate) w.bytes_read += w.bytes_written;
    w.arithmetic = peak_precision(p.dtype);
    return w;
  }

  /// Device pointers to x (dx), w (dw) and y (dy).
  void* x() noexcept { return m_x.data(); }
  void* w() noexcept { return m_w.data(); }  ///< see x()
  void* y() noexcept { return m_y.data(); }  ///< see x()

  /// The chosen algorithm bound to another set of tensors: what a network's layer runs, once
  /// this conv (one per shape) searched and verified the algorithm on its own random tensors.
  /// Holds the conv's handle, descriptors and plan: the conv must outlive it.
  class binding {
   public:
    /// Enqueues the pass on the bound tensors.
    void operator()(cudaStream_t stream) const { m_owner->run(m_candidate, m_tensors, m_workspace, m_workspace_bytes, m_pack, stream); }
    /// The algorithm it runs.
    const conv_algorithm& algorithm() const noexcept { return m_owner->m_chosen; }
    /// The tensors it runs on.
    const conv_tensors& tensors() const noexcept { return m_tensors; }

   private:
    friend class conv;
    binding(const conv* owner, candidate c, const conv_tensors& t, void* workspace, std::size_t workspace_bytes)
        : m_owner(owner), m_candidate(std::move(c)), m_tensors(t), m_workspace(workspace), m_workspace_bytes(workspace_bytes),
          m_pack(owner->variant_pack(t)) {}
    const conv* m_owner;
    candidate m_candidate;
    conv_tensors m_tensors;
    void* m_workspace;
    std::size_t m_workspace_bytes;
    cudnn_variant_pack m_pack;
  };

  /// The chosen algorithm on `t`, with `workspace` of `workspace_bytes` (at least
  /// algorithm().workspace). Throws invalid_argument for a null tensor or a small workspace.
  binding bind(const conv_tensors& t, void* workspace, std::size_t workspace_bytes) const {
    if (t.x == nullptr || t.w == nullptr || t.y == nullptr) throw invalid_argument(name() + ": bind needs x, w and y");
    if (m_options.statistics && (t.sum == nullptr || t.squares == nullptr)) {
      throw invalid_argument(name() + ": bind needs sum and squares (statistics in the epilogue)");
    }
    if (workspace_bytes < m_chosen.workspace || (m_chosen.workspace != 0 && workspace == nullptr)) {
      throw invalid_argument(name() + ": bind got a " + std::to_string(workspace_bytes) + " B workspace, the algorithm needs " +
                             std::to_string(m_chosen.workspace) + " B");
    }
    return binding(this, m_all[m_current], t, workspace, workspace_bytes);
  }

  /// Frees its own tensors and workspace once its layers are bound (they run on theirs);
  /// operator() and verify() throw afterwards.
  void release_tensors() {
    m_x = device_buffer<unsigned char>();
    m_w = device_buffer<unsigned char>();
    m_y = device_buffer<unsigned char>();
    m_prior = device_buffer<unsigned char>();
    m_sum = device_buffer<float>();
    m_squares = device_buffer<float>();
    m_workspace = device_buffer<unsigned char>();
    m_pack.clear();
    m_released = true;
  }

 private:
  using handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;

  void require_tensors() const {
    if (m_released) throw invalid_argument(name() + ": its tensors were released (run its bindings)");
  }
  bool math_allowed(cudnnMathType_t m) const noexcept {
    return m_problem.dtype != numerics::fp32 || m == CUDNN_FMA_MATH;
  }

  void check_fits(const device_info& dev) const {
    const double needed = bytes_needed(m_problem, m_options);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name() + " on " + dev.name);
  }

  void create_descriptors() {
    cudnnHandle_t h = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&h));
    m_handle = handle_t(h);
    m_legacy = detail::make_legacy_conv_descriptors(m_problem, name());
  }

  void allocate_and_fill(cudaStream_t stream) {
    const conv_problem& p = m_problem;
    const tensor_types& types = types_of(p.dtype);
    m_x = device_buffer<unsigned char>(std::size_t(p.x_elements()) * element_bytes(types.input), initial_fill::uninitialized());
    m_w = device_buffer<unsigned char>(std::size_t(p.w_elements()) * element_bytes(types.weight), initial_fill::uninitialized());
    m_y = device_buffer<unsigned char>(std::size_t(p.y_elements()) * element_bytes(types.output), initial_fill::uninitialized());
    auto fill = [&](device_buffer<unsigned char>& b, element_type type, std::uint64_t seed) {
      visit_floating_storage(type, [&](auto zero) {
        using T = decltype(zero);
        fill_uniform(reinterpret_cast<T*>(b.data()), b.bytes() / sizeof(T), seed, -1, 1, stream);
      });
    };
    // Inputs random, output poisoned: which is which depends on the pass.
    if (m_options.direction != conv_direction::backward_data) fill(m_x, types.input, 3 * m_options.seed);
    if (m_options.direction != conv_direction::backward_filter) fill(m_w, types.weight, 3 * m_options.seed + 1);
    if (m_options.direction != conv_direction::forward) fill(m_y, types.output, 3 * m_options.seed + 2);
    if (m_options.accumulate) {
      m_prior = device_buffer<unsigned char>(output().bytes(), initial_fill::uninitialized());
      fill(m_prior, types.output, 3 * m_options.seed + 3);
    }
    if (m_options.statistics) {
      m_sum = device_buffer<float>(std::size_t(p.k), initial_fill::poison());
      m_squares = device_buffer<float>(std::size_t(p.k), initial_fill::poison());
    }
    prepare_output(stream);
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  static std::int64_t output_elements(const conv_problem& p, conv_direction d) noexcept {
    return d == conv_direction::forward ? p.y_elements() : d == conv_direction::backward_data ? p.x_elements() : p.w_elements();
  }
  device_buffer<unsigned char>& output() noexcept {
    return m_options.direction == conv_direction::forward ? m_y : m_options.direction == conv_direction::backward_data ? m_x : m_w;
  }
  // Poisoned (NaN in every precision), so an output never written fails; an accumulating
  // pass starts from its random prior instead, which the check adds to the reference. The
  // statistics are poisoned too: an engine that adds into them rather than writing them
  // fails its check, so run() need not zero them before each pass.
  void prepare_output(cudaStream_t stream) {
    auto& out = output();
    if (m_options.accumulate) {
      GPUCMP_CUDA_CHECK(cudaMemcpyAsync(out.data(), m_prior.data(), out.bytes(), cudaMemcpyDeviceToDevice, stream));
    } else {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xFF, out.bytes(), stream));
    }
    if (m_options.statistics) {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_sum.data(), 0xFF, m_sum.bytes(), stream));
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_squares.data(), 0xFF, m_squares.bytes(), stream));
    }
  }

  void launch(const candidate& c, cudaStream_t stream) {
    const conv_tensors own{m_x.data(), m_w.data(), m_y.data(), m_sum.data(), m_squares.data()};
    if (m_pack.empty()) m_pack = variant_pack(own);
    run(c, own, m_workspace.data(), m_workspace.bytes(), m_pack, stream);
  }

  // The plans' tensors bound to `t`, by uid.
  cudnn_variant_pack variant_pack(const conv_tensors& t) const {
    namespace uid = detail::conv_uid;
    cudnn_variant_pack pack{{uid::x, t.x}, {uid::w, t.w}, {uid::y, t.y}};
    if (m_options.statistics) {
      pack[uid::sum] = t.sum;
      pack[uid::squares] = t.squares;
    }
    return pack;
  }

  // Enqueues candidate `c` on tensors `t` (`pack` binds them for the graph API).
  void run(const candidate& c, const conv_tensors& t, void* ws, std::size_t ws_bytes, const cudnn_variant_pack& pack,
           cudaStream_t stream) const {
    // The statistics are written, not zeroed first: verify() poisons them (prepare_output).
    GPUCMP_CUDNN_CHECK(cudnnSetStream(m_handle.get(), stream));
    if (c.info.api == conv_api::backend) {
      m_graph->execute(m_handle.get(), c.plan, pack, ws);
      return;
    }
    GPUCMP_CUDNN_CHECK(cudnnSetConvolutionMathType(m_legacy.conv.get(), c.math));
    const float alpha = 1.0f, beta = m_options.accumulate ? 1.0f : 0.0f;
    const int algo = c.info.algo;
    switch (m_options.direction) {
      case conv_direction::forward:
        GPUCMP_CUDNN_CHECK(cudnnConvolutionForward(m_handle.get(), &alpha, m_legacy.x.get(), t.x, m_legacy.w.get(), t.w,
                                                   m_legacy.conv.get(), cudnnConvolutionFwdAlgo_t(algo), ws, ws_bytes, &beta,
                                                   m_legacy.y.get(), t.y));
        break;
      case conv_direction::backward_data:
        GPUCMP_CUDNN_CHECK(cudnnConvolutionBackwardData(m_handle.get(), &alpha, m_legacy.w.get(), t.w, m_legacy.y.get(), t.y,
                                                        m_legacy.conv.get(), cudnnConvolutionBwdDataAlgo_t(algo), ws, ws_bytes,
                                                        &beta, m_legacy.x.get(), t.x));
        break;
      case conv_direction::backward_filter:
        GPUCMP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(m_handle.get(), &alpha, m_legacy.x.get(), t.x, m_legacy.y.get(), t.y,
                                                          m_legacy.conv.get(), cudnnConvolutionBwdFilterAlgo_t(algo), ws,
                                                          ws_bytes, &beta, m_legacy.w.get(), t.w));
        break;
    }
  }

  // The legacy heuristic's candidates (algorithm, math type, workspace), best first.
  std::vector<candidate> legacy_candidates() {
    std::vector<candidate> out;
    auto take = [&](const auto* perf, int returned) {
      for (int i = 0; i < returned; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > m_options.workspace_limit ||
            !math_allowed(perf[i].mathType)) {
          continue;
        }
        candidate c;
        c.info.api = conv_api::legacy;
        c.info.algo = int(perf[i].algo);
        c.info.name = detail::cudnn_algo_name(m_options.direction, c.info.algo);
        c.info.math = detail::cudnn_math_name(perf[i].mathType);
        c.info.workspace = perf[i].memory;
        c.info.heuristic_rank = i;
        c.math = perf[i].mathType;
        out.push_back(std::move(c));
      }
    };
    constexpr int max_algos = 16;
    int returned = 0;
    switch (m_options.direction) {
      case conv_direction::forward: {
        cudnnConvolutionFwdAlgoPerf_t perf[max_algos];
        GPUCMP_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(m_handle.get(), m_legacy.x.get(), m_legacy.w.get(),
                                                                  m_legacy.conv.get(), m_legacy.y.get(), max_algos,
                                                                  &returned, perf));
        take(perf, returned);
        break;
      }
      case conv_direction::backward_data: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[max_algos];
        GPUCMP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(m_handle.get(), m_legacy.w.get(), m_legacy.y.get(),
                                                                       m_legacy.conv.get(), m_legacy.x.get(), max_algos,
                                                                       &returned, perf));
        take(perf, returned);
        break;
      }
      case conv_direction::backward_filter: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[max_algos];
        GPUCMP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(m_handle.get(), m_legacy.x.get(),
                                                                         m_legacy.y.get(), m_legacy.conv.get(),
                                                                         m_legacy.w.get(), max_algos, &returned, perf));
        take(perf, returned);
        break;
      }
    }
    return out;
  }

  // The plain pass as a graph, and the pass with its accumulation or statistics as operations
  // (ops/conv_graph.hpp). Defined at the end of this header, in host compilation passes only
  // (ops/cudnn_graph.hpp).
  void describe_graph(cudnn_frontend::graph::Graph& g) const;
  void describe_operations(cudnn_operations& ops) const;

  // The graph API's execution plans, the first `limit` that build within the workspace limit
  // and the precision's numerics (FP32 forbids tensor cores and converting its inputs down).
  // A pass that adds to its output (beta 1) or takes batch norm's statistics in its epilogue
  // (gen-stats in FP32 math) is what the graph API cannot express: cudnn-frontend's operation
  // builders describe it (ops/conv_graph.hpp), planned by the same rules.
  std::vector<candidate> backend_candidates(std::size_t limit) {
    const cudnn_numerics policy{m_problem.dtype != numerics::fp32, true};
    if (m_options.accumulate || m_options.statistics) {
      m_graph = cudnn_graph::of_operations(
          m_handle.get(),
          [this](cudnn_operations& ops) { describe_operations(ops); },
          policy, m_options.workspace_limit, limit, name());
    } else {
      m_graph = std::make_shared<const cudnn_graph>(
          m_handle.get(), [this](cudnn_frontend::graph::Graph& g) { describe_graph(g); }, policy, m_options.workspace_limit,
          limit, name());
    }
    std::vector<candidate> out;
    for (std::size_t i = 0; i < m_graph->size(); ++i) {
      const cudnn_plan& p = m_graph->plan(i);
      candidate c;
      c.info.api = conv_api::backend;
      c.info.engine = p.engine;
      c.info.knobs = p.knobs;
      c.info.name = "engine " + std::to_string(p.engine) + (p.fallback ? " (fallback)" : "");
      c.info.math = p.notes();
      c.info.workspace = p.workspace;
      c.info.heuristic_rank = p.heuristic_rank;
      c.plan = i;
      out.push_back(std::move(c));
    }
    return out;
  }

  // Each API's list, best first, cut to the search's size; with conv_api::any both are
  // timed, since neither API wins everywhere (docs/results/h200-models.md, "The stem"). One
  // workspace, as large as the largest candidate needs, so pointers never change.
  void enumerate_candidates() {
    const std::size_t limit =
        m_options.choice == algorithm_choice::heuristic ? 1 : std::size_t(std::max(1, m_options.search.max_candidates));
    m_all.clear();
    auto take = [&](std::vector<candidate> list) {
      if (list.size() > limit) list.resize(limit);
      for (auto& c : list) m_all.push_back(std::move(c));
    };
    const bool legacy_too = !m_options.statistics &&  // the legacy API has no statistics epilogue
        (m_options.api == conv_api::legacy || (m_options.api == conv_api::any && m_options.choice == algorithm_choice::search));
    std::string graph_refused;
    if (m_options.api != conv_api::legacy) {
      try {
        take(backend_candidates(limit));
      } catch (const unsupported& e) {
        if (!legacy_too) throw;
        graph_refused = std::string("; the graph API: ") + e.what();  // the legacy API may still run it
      }
    }
    if (legacy_too) take(legacy_candidates());
    if (m_all.empty()) {
      throw unsupported("no cuDNN algorithm for " + name() + " within a " +
                        std::to_string(m_options.workspace_limit >> 20) + " MiB workspace" + graph_refused);
    }
    if (m_options.choice == algorithm_choice::heuristic) m_all.resize(1);
    std::size_t workspace = 0;
    for (const auto& c : m_all) workspace = std::max(workspace, c.info.workspace);
    if (workspace != 0) m_workspace = device_buffer<unsigned char>(workspace, initial_fill::uninitialized());
  }

  template <class T>
  verification compare(cudaStream_t stream) const {
    const conv_problem& p = m_problem;
    const conv_direction d = m_options.direction;
    const detail::conv_geometry g = detail::conv_geometry_of(p);
    const double outputs = double(output_elements(p, d));
    const double length = p.reduction_length(d);
    const bool on_cpu = outputs * length <= double(1 << 26);
    const bool everything = on_cpu || outputs <= 16384;
    const std::vector<std::int64_t> picked = detail::checked_outputs(std::int64_t(outputs), 77, everything);
    const std::size_t count = picked.size();
    std::vector<double> ref(count), l2(count), got(count), prior_at(count, 0.0);
    if (on_cpu) {
      const auto to_vector = [](const device_buffer<unsigned char>& b) {
        std::vector<T> v(b.bytes() / sizeof(T));
        GPUCMP_CUDA_CHECK(cudaMemcpy(v.data(), b.data(), b.bytes(), cudaMemcpyDeviceToHost));
        return v;
      };
      const std::vector<T> x = to_vector(m_x), w = to_vector(m_w), y = to_vector(m_y);
      const std::vector<T> prior = m_options.accumulate ? to_vector(m_prior) : std::vector<T>();
      const std::vector<T>& out = d == conv_direction::forward ? y : d == conv_direction::backward_data ? x : w;
      for (std::size_t e = 0; e < count; ++e) {
        double sum = 0, squares = 0;
        detail::conv_reference_terms(d, g, x.data(), w.data(), y.data(), picked[e], 0, 1, sum, squares);
        const std::size_t at = std::size_t(detail::conv_output_offset(d, g, picked[e]));
        prior_at[e] = prior.empty() ? 0.0 : to_double(prior[at]);
        ref[e] = sum + prior_at[e];  // an accumulating pass added its result to it
        l2[e] = std::sqrt(squares);
        got[e] = to_double(out[at]);
      }
    } else {
      device_buffer<std::int64_t> picked_d(count, initial_fill::uninitialized());
      picked_d.copy_from_host(picked);
      device_buffer<double> ref_d(count, initial_fill::poison()), l2_d(count, initial_fill::poison()),
          got_d(count, initial_fill::poison()), prior_d(count, initial_fill::poison());
      const unsigned threads = 256;
      detail::conv_reference_kernel<T><<<unsigned((count * 32 + threads - 1) / threads), threads, 0, stream>>>(
          d, g, reinterpret_cast<const T*>(m_x.data()), reinterpret_cast<const T*>(m_w.data()),
          reinterpret_cast<const T*>(m_y.data()), m_options.accumulate ? reinterpret_cast<const T*>(m_prior.data()) : nullptr,
          picked_d.data(), count, ref_d.data(), l2_d.data(), got_d.data(), prior_d.data());
      GPUCMP_CUDA_CHECK_LAST("conv_reference_kernel");
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
      ref = ref_d.to_host();
      l2 = l2_d.to_host();
      got = got_d.to_host();
      prior_at = prior_d.to_host();
    }
    verification v;
    v.method = std::string(on_cpu ? "FP64 CPU reference, " : "FP64 GPU reference, ") +
               (everything ? "every output" : "16384 random outputs incl. first and last") +
               (m_options.accumulate ? ", added to a random prior output" : "");
    const tolerance tol = conv_tolerance(p.dtype, detail::is_transform_algorithm(m_chosen));
    for (std::size_t e = 0; e < count; ++e) {
      const double bound = m_options.accumulate ? tol.bound_added(ref[e], ref[e] - prior_at[e], l2[e], length)
                                                : tol.bound(ref[e], l2[e], length);
      const double err = std::fabs(got[e] - ref[e]);
      const bool note = !(err <= bound) || v.checked == 0 || err / bound > v.worst_ratio;
      v.add(got[e], ref[e], bound, note ? "output " + std::to_string(picked[e]) + " (NCHW order)" : std::string());
    }
    if (m_options.statistics) check_statistics<T>(v, tol, stream);
    return v;
  }

  // conv_options::statistics: the sums the pass wrote against an FP64 reduction of the y it
  // wrote. The epilogue sums its FP32 values before y is rounded to the output type, in FP32
  // (tensor-core accumulation: two units per addition, as conv_tolerance() says), in an order
  // of its own, then adds each tile's partial sums into the channel's total, a chain of FP32
  // additions each off by up to u32 of the running total (at most rows / 64 of them: a tile
  // holds 64 rows or more). Per channel, with S_j = sum y^j and A = sqrt(rows S2) >= sum |y|:
  //   |sum - S1|     <= u32 |S1| + 8 (u_acc sqrt(rows) + u_out / 2) sqrt(S2) + 8 u32 sqrt(rows / 64) A
  //   |squares - S2| <= u32 S2   + 8 (u_acc sqrt(rows) + u_out) sqrt(S4)     + 8 u32 sqrt(rows / 64) S2
  // (on the H200 the 7x7 stem's 3.2 M rows per channel put its sum of squares 1e-5 off:
  // a running total's rounding, which the element-wise terms alone held to 7e-6).
  template <class T>
  void check_statistics(verification& v, const tolerance& tol, cudaStream_t stream) const {
    const conv_problem& p = m_problem;
    const std::int64_t pixels = p.p() * p.q();
    device_buffer<double> sums(std::size_t(3 * p.k), initial_fill::poison());
    detail::conv_channel_sums<T><<<unsigned(p.k), 256, 0, stream>>>(reinterpret_cast<const T*>(m_y.data()), p.n, p.k, pixels,
                                                                     p.layout == conv_layout::nhwc, sums.data());
    GPUCMP_CUDA_CHECK_LAST("conv_channel_sums");
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<double> ref = sums.to_host();
    const std::vector<float> sum = m_sum.to_host(), squares = m_squares.to_host();
    const double rows = double(p.n * pixels), u32 = std::ldexp(1.0, -24), walk = tol.accumulate_eps * std::sqrt(rows);
    const double chain = u32 * std::sqrt(std::max(1.0, rows / 64));
    for (std::size_t c = 0; c < sum.size(); ++c) {
      const double s1 = ref[3 * c], s2 = ref[3 * c + 1], s4 = ref[3 * c + 2];
      v.add(sum[c], s1,
            u32 * std::fabs(s1) + tol.sigmas * ((walk + tol.output_eps / 2) * std::sqrt(s2) + chain * std::sqrt(rows * s2)),
            "channel " + std::to_string(c) + "'s sum");
      v.add(squares[c], s2, u32 * s2 + tol.sigmas * ((walk + tol.output_eps) * std::sqrt(s4) + chain * s2),
            "channel " + std::to_string(c) + "'s sum of squares");
    }
    v.method += ", and the statistics against an FP64 reduction of y";
  }

  conv_problem m_problem;
  conv_options m_options;
  handle_t m_handle;
  detail::legacy_conv_descriptors m_legacy;
  std::shared_ptr<const cudnn_graph> m_graph;  // the graph API's plans (shared with nothing; const once built)
  cudnn_variant_pack m_pack;                    // its own tensors, bound once
  device_buffer<unsigned char> m_x, m_w, m_y, m_workspace;
  device_buffer<unsigned char> m_prior;  // what an accumulating pass adds to (options.accumulate)
  device_buffer<float> m_sum, m_squares;                    // its own statistics (conv_options::statistics)
  std::vector<candidate> m_all;
  std::size_t m_current = 0;
  conv_algorithm m_chosen;
  std::vector<candidate_time> m_search_log;
  bool m_released = false;
};

#if GPUCMP_CUDNN_FRONTEND_VISIBLE
inline void conv::describe_graph(cudnn_frontend::graph::Graph& g) const {
  detail::conv_output(detail::add_convolution(g, m_problem, m_options.direction), m_problem,
                      detail::conv_output_uid(m_options.direction));
}
inline void conv::describe_operations(cudnn_operations& ops) const {
  detail::add_convolution_operations(ops, m_problem, m_options.direction, m_options.accumulate, m_options.statistics);
}
#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

}  // namespace gpucmp
