// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A network_definition made runnable for one batch size and precision (components
// gpucmp::cudnn and gpucmp::cublas): it owns its weights, activations (NHWC by default, NCHW
// on request; buffers reused once a tensor is dead, models/network_memory.hpp), workspace and
// cuDNN/cuBLASLt handles, runs on any stream, and can be captured into a CUDA graph. Building
// it checks that everything fits first (a typed out_of_memory saying needed vs free), then
// searches each convolution shape's algorithms and verifies every layer on random input
// against an FP64 reference before anything is timed: a layer that fails is a
// verification_failed naming it.
//
//   gpucmp::network_options options;      // batch 32, FP16 by default
//   gpucmp::network net(def, options, stream);
//   net(stream);                          // eager: one launch per layer
//   auto g = net.capture(stream);         // or the whole forward pass as one CUDA graph
//   g.launch(stream);
#pragma once

#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/models/batch_norm_folding.hpp>
#include <gpucmp/models/fused_conv.cuh>
#include <gpucmp/models/layer_trace.hpp>
#include <gpucmp/models/linear.cuh>
#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/models/network_memory.hpp>
#include <gpucmp/models/pooling.cuh>
#include <gpucmp/models/softmax.cuh>
#include <gpucmp/ops/algorithm_search.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/specs/work.hpp>

#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// How a network is instantiated.
struct network_options {
  std::int64_t batch = 32;                              ///< images per forward pass
  numerics dtype = numerics::fp16;                  ///< activations' and weights' type and math
  /// Activations' and filters' layout. NHWC suits tensor cores; for FP32 without them cuDNN
  /// has only implicit-GEMM algorithms in NHWC, and Winograd and FFT in NCHW, so FP32
  /// networks run NCHW (docs/results/h200-models.md, "FP32: why the networks run NCHW").
  conv_layout layout = conv_layout::nhwc;
  algorithm_choice choice = algorithm_choice::search;   ///< per convolution shape
  search_options search = fast_search();                ///< how candidates are timed
  int candidates_per_path = 4;                          ///< per fusion path and shape
  /// Winograd and FFT algorithms may compete (they lose a few bits in the tensors' own
  /// precision, which each layer's transform-aware check allows; FP32 3x3 layers need them).
  bool allow_transform_algorithms = true;
  /// Each convolution runs on its own zeroed workspace (false: every convolution keeps the
  /// search's shared buffer; for experiments).
  bool private_workspaces = true;
  /// Which ways to run a convolution may compete (models/fused_conv.cuh).
  std::vector<fusion_path> fusion_paths = all_fusion_paths();
  /// Guard band after every activation buffer and workspace: the bytes a layer may write past
  /// its output without touching another tensor, checked by every verification.
  std::size_t guard_bytes = std::size_t{1} << 20;
  /// Largest workspace an algorithm may use (as ops/conv.cuh): the FP16 stem's fastest
  /// algorithm needs 2 MiB per image, so a smaller limit excludes it at large batches
  /// (docs/results/h200-models.md, "The stem").
  std::size_t workspace_limit = std::size_t{1} << 30;
  std::uint64_t input_seed = 7;                         ///< random input used by the verification

  /// A search of 3 short trials, no sustained warm-up: a network has dozens of shapes. No
  /// re-timing of close contenders and no sustained duel either: the networks' results in
  /// docs/results/h200-models.md were measured without them, and they stay off until a run
  /// shows what they change.
  static search_options fast_search() {
    search_options s;
    s.trials = 3;
    s.sustain_seconds = 0;
    s.refine_rounds = 0;
    s.duel_contenders = 0;
    return s;
  }
};

/// What one layer runs and how it was checked.
struct layer_report {
  std::string name;            ///< the definition's layer name
  std::string kind;            ///< "conv", "max_pool", ...
  std::string shape;           ///< e.g. "fp16_nhwc/n64_c64_h56_w56_k64_r3_s3_p1_u1/bias+relu" (conv)
  std::string algorithm;       ///< what runs (conv and linear)
  double searched_seconds = 0; ///< median per call in its search (0 when not searched)
  double flops = 0;            ///< per forward pass
  double bytes = 0;            ///< minimum device-memory traffic per forward pass (inputs, weights, output)
  verification check;          ///< its verification before any timing
};

namespace detail {

template <class T>
__global__ void nchw_float_to_nhwc_kernel(const float* in, T* out, std::int64_t n, std::int64_t c, std::int64_t hw) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n * c * hw;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = i % c, pixel = (i / c) % hw, ni = i / (c * hw);
    out[i] = from_double<T>(in[(ni * c + ci) * hw + pixel]);
  }
}

template <class T>
__global__ void float_to_kernel(const float* in, T* out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    out[i] = from_double<T>(in[i]);
  }
}

// Copies `images` (batch x C x H x W FP32 in torch's NCHW order) into a network's input of
// type T in `layout`; throws invalid_argument naming `network` for a wrong count. Synchronizes.
template <class T>
void upload_images(const std::vector<float>& images, const image_shape& in, std::int64_t batch, conv_layout layout, T* input,
                   const std::string& network, cudaStream_t stream) {
  if (images.size() != std::size_t(batch * in.elements())) {
    throw invalid_argument(network + ": set_input got " + std::to_string(images.size()) + " values, expected " +
                           std::to_string(batch) + " x " + in.text());
  }
  device_buffer<float> staging(images.size(), initial_fill::uninitialized());
  staging.copy_from_host(images);
  const unsigned blocks = grid_for(std::int64_t(images.size()));
  if (layout == conv_layout::nhwc) {
    nchw_float_to_nhwc_kernel<T><<<blocks, 256, 0, stream>>>(staging.data(), input, batch, in.c, in.h * in.w);
  } else {
    float_to_kernel<T><<<blocks, 256, 0, stream>>>(staging.data(), input, std::int64_t(images.size()));
  }
  GPUCMP_CUDA_CHECK_LAST("set_input conversion kernel");
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// FNV-1a over a device buffer's bytes (copied to the host).
inline std::uint64_t device_fingerprint(const void* data, std::size_t bytes) {
  std::vector<unsigned char> host(bytes);
  if (bytes != 0) GPUCMP_CUDA_CHECK(cudaMemcpy(host.data(), data, bytes, cudaMemcpyDeviceToHost));
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char b : host) h = (h ^ b) * 1099511628211ull;
  return h;
}
}  // namespace detail

/// A network ready to run: one batch size, one precision, one device.
class network {
 public:
  /// Plans memory, checks that it fits, uploads the parameters, builds and searches every
  /// layer and verifies it. Throws invalid_argument, unsupported, out_of_memory or
  /// verification_failed.
  network(const network_definition& definition, const network_options& options, cudaStream_t stream)
      : m_definition(definition), m_options(options) {
    if (options.batch <= 0) throw invalid_argument(definition.name() + ": batch must be positive");
    m_plan = plan_network_memory(m_definition, options.batch, options.dtype);
    check_fits();
    allocate_and_upload(stream);
    create_layers();
    search(stream);
    if (options.private_workspaces) give_layers_private_workspaces(stream);
    fill_random_input(stream);
    m_reports = verify(stream);
    for (std::size_t i = 0; i < m_reports.size(); ++i) require_passed(name() + " layer '" + m_reports[i].name + "'", m_reports[i].check);
    require_informative_output(stream);
  }
  network(const network&) = delete;
  network& operator=(const network&) = delete;

  /// Enqueues one forward pass on `stream` (eager: one or two launches per layer).
  void operator()(cudaStream_t stream) const {
    for (const auto& step : m_steps) step(stream);
  }
  /// Enqueues layer `index` alone (layers in order make a forward pass; with activation_values
  /// after each, a layer-by-layer trace).
  void run_layer(std::size_t index, cudaStream_t stream) const { m_steps.at(index)(stream); }
  /// Kernel mode layer by layer: `passes` forward passes on `stream`, launched layer by layer
  /// (not as a graph, whose launch CUPTI attributes as one), every kernel attributed to its
  /// layer (gpucmp/models/layer_trace.hpp). `tracer` comes from make_activity_tracer().
  network_trace trace_layers(activity_tracer& tracer, cudaStream_t stream, std::size_t passes = 20) const {
    return gpucmp::trace_layers(
        tracer, m_steps.size(), [&](std::size_t i) { run_layer(i, stream); },
        [&](std::size_t i) { return m_definition.layers().at(i).name; },
        [&] { GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream)); }, passes);
  }
  /// Tensor `t` as it is now, as FP32, batch x C x H x W flattened in NHWC order whatever the
  /// network's layout (valid for a layer's output right after the layer ran: buffers are
  /// reused once a tensor is dead).
  std::vector<float> activation_values(tensor_ref t, cudaStream_t stream) const {
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return values_in_nhwc_order(t);
  }
  /// Tensor `t`'s device memory, in the network's precision (FP32 for a linear or softmax
  /// output) and layout: valid for a layer's output right after the layer ran, as
  /// activation_values() is (calibration counts it there, models/calibration_run.cuh).
  const void* activation_data(tensor_ref t) const { return tensor(t); }
  /// The definition it runs.
  const network_definition& definition() const noexcept { return m_definition; }

  /// A forward pass that waits for each layer before starting the next (a diagnostic: its
  /// output differs from operator()'s only when some layer's work is not ordered on the
  /// stream, e.g. a library kernel on a stream of its own).
  void run_synchronized(cudaStream_t stream) const {
    for (const auto& step : m_steps) {
      step(stream);
      GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  /// The whole forward pass as one CUDA graph (replay with launch(stream)).
  graph_exec capture(cudaStream_t stream) const {
    const graph g = capture_graph(stream, [&](cudaStream_t s) { (*this)(s); });
    graph_exec exec(g.get());
    exec.upload(stream);
    return exec;
  }

  /// Replaces the input with `images`: batch x C x H x W FP32 in torch's NCHW order.
  void set_input(const std::vector<float>& images, cudaStream_t stream) {
    dispatch([&](auto zero) {
      detail::upload_images(images, m_definition.shape(m_definition.input()), m_options.batch, m_options.layout,
                            static_cast<decltype(zero)*>(tensor(m_definition.input())), name(), stream);
    });
    m_input_fingerprint = detail::device_fingerprint(tensor(m_definition.input()), tensor_bytes(m_definition.input()));
  }

  /// The output tensor after the last forward pass as FP32, batch x C x H x W flattened in
  /// NHWC order (logits: batch x classes). Synchronizes `stream`.
  std::vector<float> output(cudaStream_t stream) const {
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return values_in_nhwc_order(m_definition.output());
  }

  /// "resnet50/fp16/bs64"; "resnet50/fp32_nchw/bs64" in NCHW.
  std::string name() const {
    const std::string layout = m_options.layout == conv_layout::nhwc ? "" : std::string("_") + to_string(m_options.layout);
    return m_definition.name() + "/" + to_string(m_options.dtype) + layout + "/bs" + std::to_string(m_options.batch);
  }
  /// The options it was built with.
  const network_options& options() const noexcept { return m_options; }
  /// Every layer in execution order: what it runs, its search time and its verification.
  const std::vector<layer_report>& layers() const noexcept { return m_reports; }

  /// Runs the network layer by layer on the current input, checking each layer's output
  /// against an FP64 reference from its actual inputs (what the build did on random input;
  /// call it after set_input() to check on your own data). Returns every layer's report;
  /// throws only when a layer cannot run.
  /// With `every_output`, convolutions check every output on the GPU instead of a sample.
  std::vector<layer_report> verify(cudaStream_t stream, bool every_output = false) {
    std::vector<layer_report> reports;
    for (std::size_t i = 0; i < m_definition.layers().size(); ++i) reports.push_back(verify_layer(i, stream, every_output));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return reports;
  }

  /// Runs layer `index` alone on what its inputs hold now and checks its output (one step
  /// of verify(); the output stays for the next layer).
  layer_report verify_layer(std::size_t index, cudaStream_t stream, bool every_output = false) {
    const layer_definition& l = m_definition.layers().at(index);
    layer_report r;
    r.name = l.name;
    r.kind = to_string(l.kind);
    if (l.kind == layer_kind::conv) {
      const fused_conv& layer = *m_convs[index];
      r.shape = layer.candidates().name();
      const conv_problem p = conv_problem_of(l);
      r.flops = p.flops();
      r.bytes = double(activation_bytes(p.dtype)) * (p.x_elements() + p.w_elements() + p.y_elements() * (l.residual.valid() ? 2 : 1));
      r.algorithm = layer.algorithm().describe();
      r.searched_seconds = layer.algorithm().conv.searched_seconds;
      r.check = every_output ? layer.verify_every_output(stream) : layer.verify(stream);
    } else if (l.kind == layer_kind::linear) {
      const linear_layer& layer = *m_linears[index];
      r.shape = layer.name();
      const double in = double(m_definition.shape(l.input).c), rows = double(m_options.batch), out = double(l.out_features);
      r.flops = 2.0 * rows * in * out;
      r.bytes = double(activation_bytes(m_options.dtype)) * (rows * in + in * out) + 4.0 * (rows * out + out);
      r.algorithm = layer.describe();
      r.searched_seconds = layer.searched_seconds();
      r.check = layer.verify(stream);
    } else {
      r.shape = m_definition.shape(l.input).text() + " -> " + m_definition.shape(l.output).text();
      r.bytes = double(tensor_bytes(l.input) + tensor_bytes(l.output));
      r.check = verify_simple_layer(index, stream);
    }
    return r;
  }
  /// Device memory it holds: parameters, activations, workspace.
  std::size_t device_bytes() const noexcept {
    return m_plan.total(m_workspace_bytes + m_linear_workspace.bytes()) + m_plan.slot_bytes.size() * m_options.guard_bytes;
  }
  /// Where the activations live (buffer reuse) and what parameters take.
  const network_memory_plan& memory() const noexcept { return m_plan; }
  /// Names of the buffers a forward pass must never change (every layer's parameters, and the
  /// input since the last set_input()) whose contents did change: empty when all is well. A
  /// kernel writing through a wrong pointer damages them without failing any layer's check.
  std::vector<std::string> damaged_buffers() const {
    std::vector<std::string> damaged;
    const auto& layers = m_definition.layers();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (m_weights[i].bytes() == 0) continue;
      if (detail::device_fingerprint(m_weights[i].data(), m_weights[i].bytes()) != m_fingerprints[2 * i] ||
          detail::device_fingerprint(m_biases[i].data(), m_biases[i].bytes()) != m_fingerprints[2 * i + 1]) {
        damaged.push_back(layers[i].name + " parameters");
      }
    }
    if (m_input_fingerprint != 0 && detail::device_fingerprint(tensor(m_definition.input()), tensor_bytes(m_definition.input())) !=
                                        m_input_fingerprint) {
      damaged.push_back("the input");
    }
    return damaged;
  }

  /// Every candidate the searches timed, with its time or why it was rejected.
  const std::vector<candidate_time>& candidate_log() const noexcept { return m_candidate_log; }
  /// Seconds the build spent searching algorithms.
  double search_seconds() const noexcept { return m_search_seconds; }

  /// One forward pass's work: convolution and linear FLOPs (2 per multiply-add), images as items.
  gpucmp::work work() const {
    gpucmp::work w;
    w.flops = 2.0 * m_definition.macs_per_image() * double(m_options.batch);
    w.items = double(m_options.batch);
    w.arithmetic = peak_precision(m_options.dtype);
    return w;
  }

 private:
  using cudnn_handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;
  using lt_handle_t = detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;

  template <class F>
  void dispatch(F&& f) const {
    visit_floating_storage(types_of(m_options.dtype).output, f);
  }
  std::size_t tensor_bytes(tensor_ref t) const { return gpucmp::tensor_bytes(m_definition, t, m_options.batch, m_options.dtype); }
  void* tensor(tensor_ref t) const { return m_slot_data[m_plan.slot_of[std::size_t(t.id)]]; }

  // Tensor t's values as FP32 (after the stream is synchronized), reordered to NHWC when the
  // network runs NCHW, so callers see one order whatever the layout.
  std::vector<float> values_in_nhwc_order(tensor_ref t) const {
    const image_shape& shape = m_definition.shape(t);
    const std::size_t count = std::size_t(m_options.batch * shape.elements());
    std::vector<float> values(count);
    if (m_definition.float_from(t) || activation_bytes(m_options.dtype) == sizeof(float)) {
      GPUCMP_CUDA_CHECK(cudaMemcpy(values.data(), tensor(t), count * sizeof(float), cudaMemcpyDeviceToHost));
    } else {
      dispatch([&](auto zero) {
        using T = decltype(zero);
        std::vector<T> raw(count);
        GPUCMP_CUDA_CHECK(cudaMemcpy(raw.data(), tensor(t), count * sizeof(T), cudaMemcpyDeviceToHost));
        for (std::size_t i = 0; i < count; ++i) values[i] = float(to_double(raw[i]));
      });
    }
    const std::int64_t pixels = shape.h * shape.w;
    if (m_options.layout == conv_layout::nhwc || pixels == 1) return values;
    std::vector<float> nhwc(count);
    for (std::int64_t n = 0; n < m_options.batch; ++n)
      for (std::int64_t c = 0; c < shape.c; ++c)
        for (std::int64_t p = 0; p < pixels; ++p)
          nhwc[std::size_t((n * pixels + p) * shape.c + c)] = values[std::size_t((n * shape.c + c) * pixels + p)];
    return nhwc;
  }

  void check_fits() const {
    const double needed = double(m_plan.total(network_workspace_reserve) + m_plan.slot_bytes.size() * m_options.guard_bytes);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) {
      throw out_of_memory(std::size_t(needed), free_bytes, total_bytes,
                          name() + " (parameters " + std::to_string(m_plan.parameter_bytes >> 20) + " MiB, activations " +
                              std::to_string(m_plan.activation_bytes >> 20) + " MiB after buffer reuse, workspace reserve " +
                              std::to_string(network_workspace_reserve >> 20) + " MiB)");
    }
  }

  // Parameters to the device in the network's type: conv filters K,C,R,S as defined, reordered
  // to K,R,S,C in NHWC.
  void allocate_and_upload(cudaStream_t stream) {
    for (std::size_t b : m_plan.slot_bytes) {
      m_slots.emplace_back(b + m_options.guard_bytes, initial_fill::uninitialized());
      m_slot_data.push_back(m_slots.back().data());
    }
    const auto& layers = m_definition.layers();
    m_weights.resize(layers.size());
    m_biases.resize(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const layer_definition& l = layers[i];
      if (l.kind != layer_kind::conv && l.kind != layer_kind::linear) continue;
      std::vector<float> weight = l.weight;
      if (l.kind == layer_kind::conv && m_options.layout == conv_layout::nhwc) {
        const std::int64_t k = l.conv.out_channels, r = l.conv.kernel, c = std::int64_t(weight.size()) / (k * r * r);
        weight = kcrs_to_krsc(l.weight, k, c, r, r);
      }
      m_weights[i] = upload_as_network_type(weight, stream);
      m_biases[i] = l.kind == layer_kind::linear ? upload_float(l.bias) : upload_as_network_type(l.bias, stream);
    }
    m_fingerprints.assign(2 * layers.size(), 0);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      m_fingerprints[2 * i] = detail::device_fingerprint(m_weights[i].data(), m_weights[i].bytes());
      m_fingerprints[2 * i + 1] = detail::device_fingerprint(m_biases[i].data(), m_biases[i].bytes());
    }
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  device_buffer<unsigned char> upload_float(const std::vector<float>& values) {
    device_buffer<unsigned char> out(values.size() * sizeof(float), initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemcpy(out.data(), values.data(), out.bytes(), cudaMemcpyHostToDevice));
    GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());  // landed before any kernel on another stream reads it (buffer.hpp)
    return out;
  }
  device_buffer<unsigned char> upload_as_network_type(const std::vector<float>& values, cudaStream_t stream) {
    if (activation_bytes(m_options.dtype) == sizeof(float)) return upload_float(values);
    device_buffer<float> staging(values.size(), initial_fill::uninitialized());
    staging.copy_from_host(values);
    device_buffer<unsigned char> out(values.size() * activation_bytes(m_options.dtype), initial_fill::uninitialized());
    dispatch([&](auto zero) {
      using T = decltype(zero);
      detail::float_to_kernel<T><<<detail::grid_for(std::int64_t(values.size())), 256, 0, stream>>>(
          staging.data(), reinterpret_cast<T*>(out.data()), std::int64_t(values.size()));
    });
    GPUCMP_CUDA_CHECK_LAST("float_to_kernel");
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // staging dies here
    return out;
  }

  conv_problem conv_problem_of(const layer_definition& l) const {
    return conv_problem_for(m_definition, l, m_options.batch, m_options.dtype, m_options.layout);
  }

  // cuDNN candidate sets (one per distinct shape and epilogue), the linear layers, and the
  // workspace they share; then one step per layer.
  void create_layers() {
    cudnnHandle_t dnn = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&dnn));
    m_cudnn = cudnn_handle_t(dnn);
    cublasLtHandle_t lt = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtCreate(&lt));
    m_cublas = lt_handle_t(lt);
    const auto& layers = m_definition.layers();
    std::vector<std::shared_ptr<fused_conv_candidates>> sets(layers.size());
    std::size_t workspace = 0;  // the convolution search's, shared by the candidates
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const layer_definition& l = layers[i];
      if (l.kind != layer_kind::conv) continue;
      const conv_problem p = conv_problem_of(l);
      const conv_epilogue e{l.residual.valid(), l.conv.relu};
      const std::string key = std::string(to_string(p.dtype)) + "/" + p.shape_name() + "/" + to_string(e);
      auto found = m_sets.find(key);
      if (found == m_sets.end()) {
        found = m_sets.emplace(key, std::make_shared<fused_conv_candidates>(m_cudnn.get(), p, e, m_options.candidates_per_path,
                                                                            m_options.workspace_limit,
                                                                            m_options.allow_transform_algorithms,
                                                                            m_options.fusion_paths)).first;
        workspace = std::max(workspace, found->second->max_workspace());
      }
      sets[i] = found->second;
    }
    m_workspace = device_buffer<unsigned char>(workspace + m_options.guard_bytes, initial_fill::uninitialized());
    m_workspace_bytes = workspace;
    m_linear_workspace = device_buffer<unsigned char>(std::size_t{32} << 20, initial_fill::uninitialized());  // cuBLASLt's own
    GPUCMP_CUDA_CHECK(cudaMemset(m_linear_workspace.data(), 0, m_linear_workspace.bytes()));
    m_convs.resize(layers.size());
    m_linears.resize(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const layer_definition& l = layers[i];
      const image_shape& in = m_definition.shape(l.input);
      void* x = tensor(l.input);
      void* y = tensor(l.output);
      const std::int64_t n = m_options.batch;
      switch (l.kind) {
        case layer_kind::conv: {
          fused_conv_tensors t{x, m_weights[i].data(), m_biases[i].data(), l.residual.valid() ? tensor(l.residual) : nullptr, y};
          // Everything after y in its buffer, and the buffer's own guard band, belongs to no tensor.
          t.y_guard = m_plan.slot_bytes[m_plan.slot_of[std::size_t(l.output.id)]] + m_options.guard_bytes - tensor_bytes(l.output);
          m_convs[i] = std::make_unique<fused_conv>(sets[i], t, m_workspace.data(), m_workspace_bytes, m_options.guard_bytes);
          const fused_conv* layer = m_convs[i].get();
          m_steps.push_back([layer](cudaStream_t s) { (*layer)(s); });
          break;
        }
        case layer_kind::max_pool:
        case layer_kind::average_pool: {
          const pool_shape s{n, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, m_options.layout};
          const pool_kind kind = l.kind == layer_kind::max_pool ? pool_kind::max : pool_kind::average;
          dispatch([&](auto zero) {
            using T = decltype(zero);
            m_steps.push_back([kind, s, x, y](cudaStream_t st) { pool_forward(kind, s, static_cast<const T*>(x), static_cast<T*>(y), st); });
          });
          break;
        }
        case layer_kind::global_average_pool:
          dispatch([&](auto zero) {
            using T = decltype(zero);
            const std::int64_t pixels = in.h * in.w, c = in.c;
            const conv_layout layout = m_options.layout;
            m_steps.push_back([n, pixels, c, layout, x, y](cudaStream_t st) {
              global_average_pool_forward(n, pixels, c, static_cast<const T*>(x), static_cast<T*>(y), st, layout);
            });
          });
          break;
        case layer_kind::linear: {
          linear_tensors t{x, m_weights[i].data(), reinterpret_cast<const float*>(m_biases[i].data()), static_cast<float*>(y)};
          m_linears[i] = std::make_unique<linear_layer>(m_cublas.get(), n, in.c, l.out_features, m_options.dtype, t,
                                                        m_linear_workspace.data(), m_linear_workspace.bytes());
          const linear_layer* layer = m_linears[i].get();
          m_steps.push_back([layer](cudaStream_t s) { (*layer)(s); });
          break;
        }
        case layer_kind::softmax: {
          const std::int64_t cols = in.c;
          m_steps.push_back([n, cols, x, y](cudaStream_t st) {
            softmax_forward(n, cols, static_cast<const float*>(x), static_cast<float*>(y), st);
          });
          break;
        }
      }
    }
  }

  void fill_random_input(cudaStream_t stream) {
    dispatch([&](auto zero) {
      using T = decltype(zero);
      const tensor_ref in = m_definition.input();
      fill_uniform(static_cast<T*>(tensor(in)), std::size_t(m_options.batch * m_definition.shape(in).elements()),
                   m_options.input_seed, -1, 1, stream);
    });
  }

  // Layer by layer on random input: each convolution shape is searched once (later layers of
  // that shape reuse the choice, as does the linear layer its own), and every layer runs so
  // the next one searches on realistic activations. A search verifies what it picks.
  void search(cudaStream_t stream) {
    fill_random_input(stream);
    // The searches time through the process's engine of this device, on its stream; each
    // waits for what this stream queued (the layers before it) first.
    engine& searcher = shared_engine();
    const auto& layers = m_definition.layers();
    std::map<const fused_conv_candidates*, std::pair<std::size_t, double>> searched;
    const auto started = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].kind == layer_kind::conv) {
        fused_conv& layer = *m_convs[i];
        auto done = searched.find(&layer.candidates());
        if (done != searched.end()) {
          layer.use(done->second.first, done->second.second);
        } else if (m_options.choice == algorithm_choice::search) {
          gpucmp::search(layer, searcher, m_options.search);
          keep_search_log(layer.search_log());
          searched[&layer.candidates()] = {layer.chosen_index(), layer.algorithm().conv.searched_seconds};
        } else {
          layer.use(0, 0);
          searched[&layer.candidates()] = {0, 0.0};
        }
      } else if (layers[i].kind == layer_kind::linear && m_options.choice == algorithm_choice::search) {
        gpucmp::search(*m_linears[i], searcher, m_options.search);
        keep_search_log(m_linears[i]->search_log());
      }
      m_steps[i](stream);
    }
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }

  void keep_search_log(const std::vector<candidate_time>& log) {
    m_candidate_log.insert(m_candidate_log.end(), log.begin(), log.end());
  }

  // After the search: each convolution gets a private, zeroed workspace of what its algorithm
  // needs (plus a guard band; carve_private_workspaces says why), and cuBLASLt keeps its own.
  void give_layers_private_workspaces(cudaStream_t stream) {
    const auto& layers = m_definition.layers();
    const std::size_t guard = std::min<std::size_t>(m_options.guard_bytes, std::size_t{64} << 10);
    std::vector<std::size_t> convs, needs;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].kind != layer_kind::conv) continue;
      convs.push_back(i);
      needs.push_back(m_convs[i]->workspace_needed());
    }
    m_layer_workspaces = carve_private_workspaces(needs, guard, stream);
    m_workspace_bytes = m_layer_workspaces.buffer.bytes();
    for (std::size_t j = 0; j < convs.size(); ++j) m_convs[convs[j]]->rebind_workspace(m_layer_workspaces.at[j], needs[j], guard);
    m_workspace = device_buffer<unsigned char>();  // the search's shared buffer
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  // The last layer's output must carry information: an all-zero or constant output would make
  // every later comparison meaningless.
  void require_informative_output(cudaStream_t stream) {
    (*this)(stream);
    const std::vector<float> out = output(stream);
    const auto [low, high] = std::minmax_element(out.begin(), out.end());
    if (!(*high > *low) || !std::isfinite(*low) || !std::isfinite(*high)) {
      verification v;
      v.method = "the network's output is constant or not finite (min " + std::to_string(*low) + ", max " + std::to_string(*high) + ")";
      v.checked = v.failed = out.size();
      throw verification_failed(name(), v);
    }
  }

  // Pooling and softmax layers: poison, run, compare every output on the host.
  verification verify_simple_layer(std::size_t i, cudaStream_t stream) {
    const layer_definition& l = m_definition.layers()[i];
    const image_shape& in = m_definition.shape(l.input);
    const std::int64_t n = m_options.batch;
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(tensor(l.output), 0xFF, tensor_bytes(l.output), stream));
    m_steps[i](stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (l.kind == layer_kind::softmax) {
      std::vector<float> x(std::size_t(n * in.c)), y(x.size());
      GPUCMP_CUDA_CHECK(cudaMemcpy(x.data(), tensor(l.input), x.size() * sizeof(float), cudaMemcpyDeviceToHost));
      GPUCMP_CUDA_CHECK(cudaMemcpy(y.data(), tensor(l.output), y.size() * sizeof(float), cudaMemcpyDeviceToHost));
      return check_softmax(n, in.c, x, y);
    }
    verification v;
    dispatch([&](auto zero) {
      using T = decltype(zero);
      std::vector<T> x(tensor_bytes(l.input) / sizeof(T)), y(tensor_bytes(l.output) / sizeof(T));
      GPUCMP_CUDA_CHECK(cudaMemcpy(x.data(), tensor(l.input), tensor_bytes(l.input), cudaMemcpyDeviceToHost));
      GPUCMP_CUDA_CHECK(cudaMemcpy(y.data(), tensor(l.output), tensor_bytes(l.output), cudaMemcpyDeviceToHost));
      const tolerance tol = conv_tolerance(m_options.dtype);
      if (l.kind == layer_kind::global_average_pool) {
        v = check_global_average_pool(n, in.h * in.w, in.c, x, y, tol, m_options.layout);
      } else {
        const pool_shape s{n, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, m_options.layout};
        v = check_pool(l.kind == layer_kind::max_pool ? pool_kind::max : pool_kind::average, s, x, y, tol);
      }
    });
    return v;
  }

  network_definition m_definition;  // a copy: the caller's may go away
  network_options m_options;
  network_memory_plan m_plan;
  std::vector<device_buffer<unsigned char>> m_slots;
  std::vector<void*> m_slot_data;  // m_slots' pointers
  std::vector<device_buffer<unsigned char>> m_weights, m_biases;
  device_buffer<unsigned char> m_workspace;         // the search's, freed after it
  device_buffer<unsigned char> m_linear_workspace;  // cuBLASLt's
  private_workspaces m_layer_workspaces;  // the convolutions' own, after the search
  std::size_t m_workspace_bytes = 0;
  cudnn_handle_t m_cudnn;
  lt_handle_t m_cublas;
  std::map<std::string, std::shared_ptr<fused_conv_candidates>> m_sets;
  std::vector<std::unique_ptr<fused_conv>> m_convs;
  std::vector<std::unique_ptr<linear_layer>> m_linears;
  std::vector<std::function<void(cudaStream_t)>> m_steps;
  std::vector<layer_report> m_reports;
  std::vector<std::uint64_t> m_fingerprints;  // weights and biases at upload, two per layer
  std::uint64_t m_input_fingerprint = 0;      // the input at the last set_input (0: none yet)
  std::vector<candidate_time> m_candidate_log;
  double m_search_seconds = 0;
};

}  // namespace gpucmp
