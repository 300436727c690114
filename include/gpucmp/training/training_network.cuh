// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A network_definition made trainable for one batch size and precision (components
// gpucmp::cudnn and gpucmp::cublas): a whole training step (forward, loss, backward, loss
// scaling, optimizer) on synthetic or given data, eagerly or as one CUDA graph.
//
// Training reads a definition's convolution layer as torch's conv -> batch norm -> (add) ->
// (ReLU): the filter has no bias; the definition's bias becomes the batch norm's beta (gamma
// starts at 1, the running statistics at 0 and 1). A final softmax is left out (the loss
// takes the logits); the last trained layer must be linear.
//
// Precisions: FP32 (no tensor cores), TF32, FP16 with dynamic loss scaling (torch's AMP),
// BF16 without. Master weights, momentum, batch norm parameters and statistics, the
// classifier's weight and bias gradients are FP32; activations, filters' copies and filter
// gradients are in the precision's type.
//
// Building one plans the memory (training/training_memory.hpp) and checks that it fits (a
// typed out_of_memory), allocates it, and for every convolution shape searches and verifies
// the forward, data-gradient and weight-gradient algorithms on random tensors of the full
// size (ops/conv.cuh), then binds each layer to its tensors; every batch norm's path (cuDNN's
// persistent kernels or gpucmp's, the latter also from statistics its convolution writes:
// training_options::statistics_in_conv) is timed, verified at full size and chosen; the classifier
// is searched and both its passes verified. Parameters are then reset to their initial
// values, so a built network starts from the definition's weights.
//
//   gpucmp::training_options o;           // batch 64, FP16 with loss scaling by default
//   gpucmp::training_network net(def, o, stream);
//   net.step(stream);                     // eager: forward, loss, backward, optimizer
//   auto g = net.capture(stream);         // or the whole step as one CUDA graph
//   g.launch(stream);
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/io/safetensors_writer.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/models/layer_trace.hpp>
#include <gpucmp/models/linear.cuh>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/models/pooling.cuh>
#include <gpucmp/ops/conv.cuh>
#include <gpucmp/ops/conv_problem.hpp>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/packed_elements.cuh>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>
#include <gpucmp/training/batch_norm.cuh>
#include <gpucmp/training/gradient_buckets.hpp>
#include <gpucmp/training/linear_gradients.cuh>
#include <gpucmp/training/loss.cuh>
#include <gpucmp/training/loss_scale.cuh>
#include <gpucmp/training/pool_gradients.cuh>
#include <gpucmp/training/sgd.cuh>
#include <gpucmp/training/storage.cuh>
#include <gpucmp/training/training_memory.hpp>
#include <gpucmp/training/training_work.hpp>

#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp {

/// Where a convolution's batch norm gets its per-channel statistics in the forward pass
/// (training_options::statistics_in_conv).
enum class conv_statistics {
  off,       ///< the batch norm reads the convolution's output once more for them
  /// Per layer, whichever the search times faster over the convolution and its batch norm
  /// together: the plain pass with every batch norm path, or the pass that also writes the
  /// statistics (cuDNN's gen-stats in its epilogue, FP16/BF16 NHWC) with gpucmp's kernels
  /// normalising from them (batch_norm_training::forward_from_sums).
  searched,
  /// The statistics from the convolution wherever cuDNN fuses them; every batch norm runs
  /// gpucmp's kernels (cuDNN's persistent ones take no statistics). For tests and A/B runs.
  always,
};

/// "off", "searched", "always".
inline const char* to_string(conv_statistics s) noexcept {
  switch (s) {
    case conv_statistics::off: return "off";
    case conv_statistics::searched: return "searched";
    case conv_statistics::always: return "always";
  }
  return "?";
}

/// The mode a to_string() name stands for; throws invalid_argument naming the text.
inline conv_statistics parse_conv_statistics(const std::string& text) {
  for (conv_statistics s : {conv_statistics::off, conv_statistics::searched, conv_statistics::always}) {
    if (text == to_string(s)) return s;
  }
  throw invalid_argument("conv statistics must be off, searched or always, got '" + text + "'");
}

/// How a training step is set up.
struct training_options {
  std::int64_t batch = 64;                 ///< images per step
  numerics dtype = numerics::fp16;     ///< activations' and filters' type and math
  conv_layout layout = conv_layout::nhwc;  ///< activations' and filters' layout
  /// FP16 only: dynamic loss scaling, as torch's GradScaler (BF16, TF32 and FP32 never scale).
  bool loss_scaling = true;
  loss_scale_options loss_scale;           ///< GradScaler's defaults
  sgd_options sgd;                         ///< momentum 0.9, weight decay 5e-5, learning rate 0.1
  batch_norm_options batch_norm;           ///< torch's eps and momentum
  /// Which batch norm paths may compete (each is timed and verified per shape).
  std::vector<batch_norm_path> batch_norm_paths{batch_norm_path::cudnn_persistent, batch_norm_path::gpucmp_kernels};
  search_options search = network_options::fast_search();  ///< how candidates are timed
  /// Of each cuDNN API, per pass and shape; 16 as the ops' search_options::max_candidates. The
  /// heuristics rank the accumulating data gradients (beta 1) poorly: on the H200 at batch 256
  /// 4 candidates left layer1's 1x1 ones at 355 us, 16 found 276 us (docs/results/h200-training.md, eighth run).
  int candidates_per_pass = 16;
  std::size_t workspace_limit = std::size_t{1} << 30;      ///< largest workspace an algorithm may use
  std::uint64_t data_seed = 7;             ///< synthetic images and labels
  /// Initial γ of each batch norm that closes a residual branch (a conv with a residual
  /// input); the others start at 1. 0 is torchvision's zero_init_residual: each block starts
  /// as the identity, which keeps a deep network's gradients well conditioned (verification).
  float residual_gamma = 1.0f;
  /// A tensor's second gradient from a convolution's data-gradient pass is added by the pass
  /// itself (cuDNN beta = 1, searched and verified that way) instead of written to a scratch
  /// tensor and added by a separate kernel (ResNet-50: one addition per bottleneck block).
  bool accumulate_in_conv = true;
  /// Where each batch norm's forward statistics come from (conv_statistics): by default the
  /// search decides per layer between reading x for them and the convolution's epilogue.
  conv_statistics statistics_in_conv = conv_statistics::searched;

  /// True when the step scales its loss (FP16 with loss_scaling).
  bool scales_loss() const noexcept { return loss_scaling && dtype == numerics::fp16; }
};

/// "amp_fp16", "bf16", "tf32", "fp32" (and "fp16" without loss scaling).
inline std::string training_precision_name(const training_options& o) {
  return o.scales_loss() ? "amp_fp16" : to_string(o.dtype);
}

/// What one layer of a training network runs and how it was checked.
struct training_layer_report {
  std::string name;             ///< the definition's layer name
  std::string kind;             ///< "conv", "max_pool", ...
  std::string shape;            ///< conv: the problem's name; others: input -> output
  std::string forward;          ///< conv and linear: the algorithm
  std::string data_gradient;    ///< conv: the algorithm ("" for a layer that reads the images)
  std::string weight_gradient;  ///< conv: the algorithm
  std::string batch_norm;       ///< conv: the batch norm's path
  std::vector<std::string> checks;  ///< every verification that ran for it, passed
};

namespace detail {

// out = a + b, element by element (out may be a).
template <class T>
__global__ void add_kernel(const T* a, const T* b, T* out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count; i += std::int64_t(gridDim.x) * blockDim.x) {
    out[i] = from_double<T>(float(to_double(a[i])) + float(to_double(b[i])));
  }
}

inline unsigned elementwise_grid(std::int64_t count) {
  return unsigned(std::max<std::int64_t>(1, std::min<std::int64_t>((count + 255) / 256, 132 * 16)));
}

// add_kernel over 16-byte packs (the same float sums, rounded once): the scalar kernel ran
// ResNet-50's 16 gradient sums at batch 256 in FP16 in 4.4 ms on the H200, about twice what
// their bytes take.
template <class T>
__global__ void add_packed_kernel(const packed<T>* a, const packed<T>* b, packed<T>* out, std::int64_t packs) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < packs; i += std::int64_t(gridDim.x) * blockDim.x) {
    const packed<T> x = a[i], y = b[i];
    packed<T> sum;
    for (int k = 0; k < packed<T>::width; ++k) sum.v[k] = from_float<T>(to_float(x.v[k]) + to_float(y.v[k]));
    out[i] = sum;
  }
}

// out = a + b (out may be a): packed where the pointers allow it, the tail element by element.
template <class T>
void launch_add(const T* a, const T* b, T* out, std::int64_t count, cudaStream_t stream) {
  std::int64_t done = 0;
  if constexpr (packable_v<T>) {
    if (all_packable({a, b, out})) {
      const std::int64_t packs = count / packed<T>::width;
      if (packs > 0) {
        add_packed_kernel<T><<<elementwise_grid(packs), 256, 0, stream>>>(reinterpret_cast<const packed<T>*>(a),
                                                                          reinterpret_cast<const packed<T>*>(b),
                                                                          reinterpret_cast<packed<T>*>(out), packs);
        GPUCMP_CUDA_CHECK_LAST("add_packed_kernel");
      }
      done = packs * packed<T>::width;
    }
  }
  if (done < count) {
    add_kernel<T><<<elementwise_grid(count - done), 256, 0, stream>>>(a + done, b + done, out + done, count - done);
    GPUCMP_CUDA_CHECK_LAST("add_kernel");
  }
}

// A batch norm layer's paths as a searchable operation (ops/operation.hpp): a candidate runs
// the forward and the backward pass on the layer's tensors. When the output's gradient comes
// in two parts (tensors.dy2), gpucmp's kernels sum them as they read; cuDNN's path pays for
// the sum first (`sum` writes dy + dy2 to `summed`), as the step will. Where the layer's
// convolution can also write the statistics (conv_statistics::searched), every candidate
// runs its convolution too, so the plain pass with each path and the fused pass with the
// statistics taken from it (from_sums) are timed alike.
struct batch_norm_search {
  std::vector<std::unique_ptr<batch_norm_training>> paths;
  std::vector<bool> from_sums;                   // per path: forward_from_sums() after fused_conv
  batch_norm_tensors tensors;
  void* workspace = nullptr;
  void* reserve = nullptr;
  void* summed = nullptr;                        // dy + dy2 for cuDNN's path
  std::function<void(cudaStream_t)> sum;         // writes it
  std::function<void(cudaStream_t)> plain_conv;  // writes tensors.x (empty: x as it is)
  std::function<void(cudaStream_t)> fused_conv;  // writes tensors.x and the sums below
  const float* sums = nullptr;                   // per channel: sum, then squares
  std::size_t current = 0;
  search_choice chosen;

  std::string name() const { return paths.front()->name(); }
  std::size_t candidate_count() const noexcept { return paths.size(); }
  std::string describe_candidate(std::size_t i) const {
    return std::string(to_string(paths.at(i)->path())) + (from_sums.at(i) ? ", statistics from the convolution" : "");
  }
  void select(std::size_t i, cudaStream_t) { current = i; }
  batch_norm_tensors for_current() const {
    if (tensors.dy2 == nullptr || paths[current]->path() == batch_norm_path::gpucmp_kernels) return tensors;
    batch_norm_tensors t = tensors;
    t.dy = summed;
    t.dy2 = nullptr;
    return t;
  }
  const float* squares() const noexcept { return sums + paths.front()->shape().c; }
  void operator()(cudaStream_t stream) {
    const batch_norm_tensors t = for_current();
    if (from_sums[current]) {
      fused_conv(stream);
      paths[current]->forward_from_sums(t, sums, squares(), workspace, reserve, stream);
    } else {
      if (plain_conv) plain_conv(stream);
      paths[current]->forward(t, workspace, reserve, stream);
    }
    if (t.dy != tensors.dy) sum(stream);
    paths[current]->backward(t, workspace, reserve, stream);
  }
  verification verify(cudaStream_t stream) {
    const batch_norm_tensors t = for_current();
    if (t.dy != tensors.dy) sum(stream);
    if (from_sums[current]) fused_conv(stream);  // x and its sums, written together
    const batch_norm_verification v = paths[current]->verify(t, workspace, reserve, stream, from_sums[current] ? sums : nullptr,
                                                             from_sums[current] ? squares() : nullptr);
    return v.forward.passed() ? v.backward : v.forward;
  }
  void adopt_search(const search_choice& c, std::vector<candidate_time> log) {
    chosen = c;
    current = c.index;
    timings = std::move(log);
  }
  const std::vector<candidate_time>& search_log() const noexcept { return timings; }
  std::vector<candidate_time> timings;  ///< every timing of its search
};

}  // namespace detail

/// A network's training step, ready to run (file comment).
class training_network {
 public:
  /// Plans and checks memory, allocates, searches and verifies every layer, and resets the
  /// parameters to the definition's. Throws invalid_argument (a definition that cannot
  /// train, bad options), unsupported, out_of_memory (needed vs free) or verification_failed
  /// (naming the layer and pass).
  training_network(const network_definition& definition, const training_options& options, cudaStream_t stream)
      : m_definition(definition), m_options(options) {
    if (options.batch <= 1) throw invalid_argument(definition.name() + ": a training batch needs at least 2 images (batch norm)");
    if (options.candidates_per_pass < 1) throw invalid_argument(definition.name() + ": candidates_per_pass must be at least 1");
    if (options.batch_norm_paths.empty()) throw invalid_argument(definition.name() + ": no batch norm path may compete");
    if (options.statistics_in_conv == conv_statistics::always) m_options.batch_norm_paths = {batch_norm_path::gpucmp_kernels};
    if (!std::isfinite(options.residual_gamma)) throw invalid_argument(definition.name() + ": residual_gamma must be finite");
    options.sgd.validate();
    options.loss_scale.validate();
    m_plan = plan_training_memory(m_definition, options.batch, options.dtype, options.accumulate_in_conv);
    m_logits = detail::training_logits(m_definition);
    m_trained = std::size_t(m_logits.id);
    check_fits();
    const auto started = std::chrono::steady_clock::now();
    create_handles();
    lay_out_parameters();
    allocate();
    reset(stream);  // the checks below read real parameters
    build_layers(stream);
    reset(stream);
    fill_synthetic_batch(stream);
    m_build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  training_network(const training_network&) = delete;
  training_network& operator=(const training_network&) = delete;

  /// Enqueues one training step: forward, loss, backward, optimizer (and the loss scale's
  /// check and update with FP16 loss scaling). Nothing synchronizes the host.
  void step(cudaStream_t stream) const {
    forward_backward(stream);
    optimize(stream);
  }
  /// Enqueues the optimizer part of a step alone (the loss scale's check, SGD, its update):
  /// what data-parallel training runs after averaging the gradients across GPUs.
  void optimize(cudaStream_t stream) const { m_optimizer_step(stream); }

  /// The parameter gradients as two contiguous arrays, for collectives across GPUs: the
  /// filters' (in the precision's type) and the rest (FP32).
  struct gradient_arrays {
    void* filters = nullptr;
    std::size_t filter_count = 0;  ///< elements of numerics's storage type
    float* rest = nullptr;
    std::size_t rest_count = 0;
  };
  gradient_arrays gradient_storage() const {
    return {const_cast<unsigned char*>(m_filter_gradients.data()), m_filter_count, const_cast<float*>(m_float_gradients.data()),
            m_float_gradients.size()};
  }
  /// Enqueues forward, loss and backward only: the gradients of the current parameters
  /// (scaled by the loss scale with FP16 loss scaling), for checks against a reference.
  void forward_backward(cudaStream_t stream) const {
    forward_and_loss(stream);
    for (const auto& b : m_backward) b.run(stream);
  }
  /// forward_backward() in parts, for data-parallel training's overlap: the forward pass and
  /// the loss, then each backward piece in order; gradients_final_after(j) are the parameter
  /// gradients (spans of gradient_storage()'s arrays) that piece j finishes, each in exactly
  /// one piece.
  void forward_and_loss(cudaStream_t stream) const {
    for (const auto& f : m_forward) f.run(stream);
    m_loss(stream);
  }
  std::size_t backward_pieces() const noexcept { return m_backward.size(); }  ///< see forward_and_loss()
  void run_backward_piece(std::size_t j, cudaStream_t stream) const { m_backward.at(j).run(stream); }  ///< see forward_and_loss()
  /// See forward_and_loss().
  const std::vector<std::vector<gradient_span>>& gradients_final_after() const noexcept { return m_backward_final; }
  /// Steps traced piece by piece in kernel mode: one untraced step, then `passes` steps whose
  /// pieces (forward, loss, backward, optimizer, in order) each launch inside their own tracer
  /// sample, so every kernel's time on the GPU's clock is the piece's that launched it. Pieces
  /// are named "<part>: <layer>" (training/step_trace.hpp sums them by part). The steps train
  /// the network: reset() afterwards where its state matters. `tracer` comes from
  /// make_activity_tracer() (gpucmp/measure/kernel_trace.hpp).
  network_trace trace_step(activity_tracer& tracer, cudaStream_t stream, std::size_t passes = 10) const {
    const step_piece loss{"loss: softmax cross-entropy", m_loss};
    const step_piece optimizer{std::string("optimizer: ") + (m_scale ? "loss-scale check, SGD, scale update" : "SGD"), m_optimizer_step};
    std::vector<const step_piece*> order;
    for (const auto& f : m_forward) order.push_back(&f);
    order.push_back(&loss);
    for (const auto& b : m_backward) order.push_back(&b);
    order.push_back(&optimizer);
    return gpucmp::trace_layers(
        tracer, order.size(), [&](std::size_t i) { order[i]->run(stream); }, [&](std::size_t i) { return order[i]->name; },
        [&] { GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream)); }, passes);
  }
  /// The whole step as one CUDA graph (replay with launch(stream)); replays continue from the
  /// state the network is in.
  graph_exec capture(cudaStream_t stream) const {
    const graph g = capture_graph(stream, [&](cudaStream_t s) { step(s); });
    return graph_exec(g.get());
  }

  /// Back to the definition's parameters, zero momentum, running statistics 0 and 1, the
  /// initial loss scale and no steps taken (on `stream`; synchronizes it).
  void reset(cudaStream_t stream) {
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_master.data(), m_initial_master.data(), m_initial_master.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_momentum.data(), 0, m_momentum.bytes(), stream));
    refresh_model_copies(stream);
    const std::size_t channels = m_statistics.size() / 4;
    std::vector<float> statistics(m_statistics.size(), 0.0f);
    for (std::size_t c = 0; c < channels; ++c) statistics[channels + c] = 1.0f;  // running variances
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_statistics.data(), statistics.data(), statistics.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, stream));
    if (m_scale) m_scale->reset(stream);
    if (m_reset_optimizer) m_reset_optimizer(stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `statistics` is a local
  }

  /// Replaces the batch: `images` N x C x H x W (torch's order, FP32) and one label per image
  /// in [0, classes). Throws invalid_argument naming what is wrong.
  void set_batch(const std::vector<float>& images, const std::vector<std::int32_t>& labels, cudaStream_t stream) {
    const image_shape& in = m_definition.shape(m_definition.input());
    const std::size_t expected = std::size_t(m_options.batch * in.elements());
    if (images.size() != expected) {
      throw invalid_argument(name() + ": set_batch got " + std::to_string(images.size()) + " image values, expected " +
                             std::to_string(expected));
    }
    if (labels.size() != std::size_t(m_options.batch)) {
      throw invalid_argument(name() + ": set_batch got " + std::to_string(labels.size()) + " labels for a batch of " +
                             std::to_string(m_options.batch));
    }
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] < 0 || labels[i] >= classes()) {
        throw invalid_argument(name() + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) + ", not one of the " +
                               std::to_string(classes()) + " classes");
      }
    }
    // Converted on the device with inference's kernels (models/network.cuh: set_input).
    device_buffer<float> staging(expected, initial_fill::uninitialized());
    staging.copy_from_host(images);
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* input = static_cast<T*>(activation(m_definition.input()));
      const unsigned blocks = detail::elementwise_grid(std::int64_t(expected));
      if (m_options.layout == conv_layout::nhwc) {
        detail::nchw_float_to_nhwc_kernel<T><<<blocks, 256, 0, stream>>>(staging.data(), input, m_options.batch, in.c, in.h * in.w);
      } else {
        detail::float_to_kernel<T><<<blocks, 256, 0, stream>>>(staging.data(), input, std::int64_t(expected));
      }
    });
    GPUCMP_CUDA_CHECK_LAST("set_batch conversion kernel");
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_labels.data(), labels.data(), labels.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `staging` and `labels` are the caller's or local
  }

  /// The last step's mean loss (synchronizes `stream`).
  float loss(cudaStream_t stream) const {
    float v = 0;
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(&v, m_loss_value.data(), sizeof v, cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }
  /// Loss scaling's state (scale, skipped steps); the initial state without loss scaling.
  loss_scale_state loss_scale(cudaStream_t stream) const {
    if (!m_scale) {
      loss_scale_state s;
      s.scale = 1.0f;
      return s;
    }
    return m_scale->read(stream);
  }

  /// The FP32 master parameters and batch norms' running statistics in torch's names, shapes
  /// and orders: "<conv>.weight" (K x C x R x S), "<conv>.bn.weight", ".bn.bias",
  /// ".bn.running_mean", ".bn.running_var", "<linear>.weight" and ".bias".
  std::vector<named_tensor> parameters(cudaStream_t stream) const { return named(read_floats(m_master.data(), m_master.size(), stream), true, stream); }
  /// The gradients of the parameters (of the loss, unscaled) as the last backward pass left
  /// them, in parameters()' names (no running statistics). Synchronizes `stream`.
  std::vector<named_tensor> gradients(cudaStream_t stream) const {
    std::vector<float> all(m_master.size());
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> a(m_filter_count);
      GPUCMP_CUDA_CHECK(cudaMemcpyAsync(a.data(), m_filter_gradients.data(), a.size() * sizeof(T), cudaMemcpyDeviceToHost, stream));
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
      for (std::size_t i = 0; i < a.size(); ++i) all[i] = float(to_double(a[i]));
    });
    const std::vector<float> rest = read_floats(m_float_gradients.data(), m_master.size() - m_filter_count, stream);
    std::copy(rest.begin(), rest.end(), all.begin() + std::ptrdiff_t(m_filter_count));
    const float scale = loss_scale(stream).scale;
    for (float& g : all) g /= scale;
    return named(all, false, stream);
  }
  /// The current batch: "images" (N x C x H x W, FP32 from the precision's type) and "labels" (as FP32).
  std::vector<named_tensor> batch_tensors(cudaStream_t stream) const {
    const image_shape& in = m_definition.shape(m_definition.input());
    const std::size_t count = std::size_t(m_options.batch * in.elements());
    std::vector<float> stored(count), images(count);
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T> raw(count);
      GPUCMP_CUDA_CHECK(cudaMemcpyAsync(raw.data(), activation(m_definition.input()), count * sizeof(T), cudaMemcpyDeviceToHost, stream));
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
      for (std::size_t i = 0; i < count; ++i) stored[i] = float(to_double(raw[i]));
    });
    const std::int64_t hw = in.h * in.w;
    for (std::int64_t n = 0; n < m_options.batch; ++n)
      for (std::int64_t c = 0; c < in.c; ++c)
        for (std::int64_t p = 0; p < hw; ++p) {
          const std::int64_t to = (n * in.c + c) * hw + p;
          const std::int64_t from = m_options.layout == conv_layout::nhwc ? (n * hw + p) * in.c + c : to;
          images[std::size_t(to)] = stored[std::size_t(from)];
        }
    std::vector<std::int32_t> labels(std::size_t(m_options.batch));
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(labels.data(), m_labels.data(), labels.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return {{"images", {m_options.batch, in.c, in.h, in.w}, images},
            {"labels", {m_options.batch}, std::vector<float>(labels.begin(), labels.end())}};
  }

  /// The definition as JSON (layers, shapes and settings), for a framework to rebuild the
  /// same network: what scripts/training/compare_pytorch.py reads.
  std::string definition_json() const {
    std::ostringstream j;
    const image_shape& in = m_definition.shape(m_definition.input());
    j << "{\"name\": \"" << m_definition.name() << "\", \"input\": [" << in.c << ", " << in.h << ", " << in.w << "], \"layers\": [";
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = m_definition.layers()[i];
      j << (i ? ", " : "") << "{\"name\": \"" << l.name << "\", \"kind\": \"" << to_string(l.kind) << "\", \"input\": " << l.input.id
        << ", \"output\": " << l.output.id << ", \"residual\": " << (l.residual.valid() ? l.residual.id : -1);
      if (l.kind == layer_kind::conv) {
        j << ", \"out_channels\": " << l.conv.out_channels << ", \"kernel\": " << l.conv.kernel << ", \"stride\": " << l.conv.stride
          << ", \"pad\": " << l.conv.pad << ", \"relu\": " << (l.conv.relu ? "true" : "false");
      } else if (l.kind == layer_kind::max_pool || l.kind == layer_kind::average_pool) {
        j << ", \"kernel\": " << l.pool_kernel << ", \"stride\": " << l.pool_stride << ", \"pad\": " << l.pool_pad;
      } else if (l.kind == layer_kind::linear) {
        j << ", \"out_features\": " << l.out_features;
      }
      j << "}";
    }
    j << "], \"batch_norm\": {\"eps\": " << m_options.batch_norm.eps << ", \"momentum\": " << m_options.batch_norm.momentum
      << "}, \"sgd\": {\"learning_rate\": " << m_options.sgd.learning_rate << ", \"momentum\": " << m_options.sgd.momentum
      << ", \"weight_decay\": " << m_options.sgd.weight_decay << ", \"nesterov\": " << (m_options.sgd.nesterov ? "true" : "false")
      << "}, \"precision\": \"" << training_precision_name(m_options) << "\", \"layout\": \"" << to_string(m_options.layout)
      << "\", \"batch\": " << m_options.batch << "}";
    return j.str();
  }

  /// "resnet50 training amp_fp16 nhwc batch 256".
  std::string name() const {
    return m_definition.name() + " training " + training_precision_name(m_options) + " " + to_string(m_options.layout) + " batch " +
           std::to_string(m_options.batch);
  }
  /// One step's declared work: training_flops_per_image() x batch (training/training_work.hpp).
  gpucmp::work work() const {
    gpucmp::work w;
    w.flops = training_flops_per_image(m_definition).total() * double(m_options.batch);
    w.items = double(m_options.batch);
    w.arithmetic = peak_precision(m_options.dtype);
    return w;
  }
  /// Classes the loss takes.
  std::int32_t classes() const { return std::int32_t(m_definition.shape(m_logits).c); }
  /// The options it was built with.
  const training_options& options() const noexcept { return m_options; }
  /// The definition it trains.
  const network_definition& definition() const noexcept { return m_definition; }
  /// The memory plan it allocated.
  const training_memory_plan& memory() const noexcept { return m_plan; }
  /// Device bytes it allocated: the plan's buffers plus the real workspaces and cuDNN's
  /// batch norm reserves (instead of the plan's reserve).
  std::size_t device_bytes() const noexcept { return m_plan.total() - m_plan.workspace_reserve + workspace_bytes(); }
  /// Workspace bytes: the convolutions' shared one, cuBLASLt's, batch norms' and their reserves.
  std::size_t workspace_bytes() const noexcept {
    return m_conv_workspace.bytes() + m_linear_workspace.bytes() + m_bn_workspace.bytes() + m_bn_reserve.bytes();
  }
  /// Every trained layer: what runs and how it was checked.
  const std::vector<training_layer_report>& layers() const noexcept { return m_reports; }
  /// Seconds the build took (searches and verifications included).
  double build_seconds() const noexcept { return m_build_seconds; }

 private:
  using cudnn_handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;
  using lt_handle_t = detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;
  using step_fn = std::function<void(cudaStream_t)>;
  // One launch group of the step, named "<part>: <layer>" for kernel-mode traces.
  struct step_piece {
    std::string name;
    step_fn run;
  };

  // Where one layer's parameters live: master indexes (filters first, then the FP32-gradient
  // group) and device pointers.
  struct parameter_slots {
    std::size_t filter = 0, filter_count = 0;          // conv: index in the filter group
    std::size_t gamma = 0, beta = 0, channels = 0;      // conv: master indexes of its batch norm
    std::size_t weight = 0, weight_count = 0, bias = 0; // linear: master indexes
    std::size_t statistics = 0;                         // conv: first channel in the statistics arrays
  };

  void check_fits() const {
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (m_plan.total() > free_bytes) throw out_of_memory(m_plan.total(), free_bytes, total_bytes, name());
  }

  void create_handles() {
    cudnnHandle_t dnn = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&dnn));
    m_cudnn = cudnn_handle_t(dnn);
    cublasLtHandle_t lt = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtCreate(&lt));
    m_cublas = lt_handle_t(lt);
  }

  // Master order: every filter (in the layout's filter order: K x R x S x C for NHWC), then
  // the batch norms' gammas and betas and the linear layers' weights and biases.
  void lay_out_parameters() {
    const auto& layers = m_definition.layers();
    m_slots.assign(m_trained, {});
    std::size_t filters = 0;
    for (std::size_t i = 0; i < m_trained; ++i) {
      if (layers[i].kind != layer_kind::conv) continue;
      m_slots[i].filter = filters;
      m_slots[i].filter_count = layers[i].weight.size();
      filters += layers[i].weight.size();
    }
    m_filter_count = filters;
    std::size_t next = filters, channels = 0;
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = layers[i];
      if (l.kind == layer_kind::conv) {
        m_slots[i].channels = std::size_t(l.conv.out_channels);
        m_slots[i].gamma = next;
        m_slots[i].beta = next + m_slots[i].channels;
        m_slots[i].statistics = channels;
        next += 2 * m_slots[i].channels;
        channels += m_slots[i].channels;
      } else if (l.kind == layer_kind::linear) {
        m_slots[i].weight = next;
        m_slots[i].weight_count = l.weight.size();
        m_slots[i].bias = next + l.weight.size();
        next += l.weight.size() + l.bias.size();
      }
    }
    m_initial_master.assign(next, 0.0f);
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = layers[i];
      if (l.kind == layer_kind::conv) {
        const std::vector<float> filter = to_filter_layout(l);
        std::copy(filter.begin(), filter.end(), m_initial_master.begin() + std::ptrdiff_t(m_slots[i].filter));
        for (std::size_t c = 0; c < m_slots[i].channels; ++c) {
          m_initial_master[m_slots[i].gamma + c] = l.residual.valid() ? m_options.residual_gamma : 1.0f;
          m_initial_master[m_slots[i].beta + c] = l.bias[c];
        }
      } else if (l.kind == layer_kind::linear) {
        std::copy(l.weight.begin(), l.weight.end(), m_initial_master.begin() + std::ptrdiff_t(m_slots[i].weight));
        std::copy(l.bias.begin(), l.bias.end(), m_initial_master.begin() + std::ptrdiff_t(m_slots[i].bias));
      }
    }
    m_channels = channels;
  }

  // A conv layer's filter (torch's K x C x R x S) in the layout's order.
  std::vector<float> to_filter_layout(const layer_definition& l) const {
    if (m_options.layout == conv_layout::nchw) return l.weight;
    const std::int64_t k = l.conv.out_channels, r = l.conv.kernel, c = std::int64_t(l.weight.size()) / (k * r * r);
    std::vector<float> out(l.weight.size());
    for (std::int64_t ki = 0; ki < k; ++ki)
      for (std::int64_t ci = 0; ci < c; ++ci)
        for (std::int64_t ri = 0; ri < r; ++ri)
          for (std::int64_t si = 0; si < r; ++si)
            out[std::size_t(((ki * r + ri) * r + si) * c + ci)] = l.weight[std::size_t(((ki * c + ci) * r + ri) * r + si)];
    return out;
  }
  // And back.
  std::vector<float> from_filter_layout(const layer_definition& l, const float* values) const {
    const std::int64_t k = l.conv.out_channels, r = l.conv.kernel, c = std::int64_t(l.weight.size()) / (k * r * r);
    std::vector<float> out(l.weight.size());
    for (std::int64_t ki = 0; ki < k; ++ki)
      for (std::int64_t ci = 0; ci < c; ++ci)
        for (std::int64_t ri = 0; ri < r; ++ri)
          for (std::int64_t si = 0; si < r; ++si) {
            const std::int64_t torch = ((ki * c + ci) * r + ri) * r + si;
            const std::int64_t ours = m_options.layout == conv_layout::nchw ? torch : ((ki * r + ri) * r + si) * c + ci;
            out[std::size_t(torch)] = values[ours];
          }
    return out;
  }

  void allocate() {
    const std::size_t e = activation_bytes(m_options.dtype);
    const bool low = m_options.dtype == numerics::fp16 || m_options.dtype == numerics::bf16;
    const std::size_t params = m_initial_master.size();
    m_master = device_buffer<float>(params, initial_fill::uninitialized());
    m_momentum = device_buffer<float>(params, initial_fill::uninitialized());
    std::size_t linear_weights = 0;
    for (const auto& s : m_slots) linear_weights += s.weight_count;
    if (low) m_model = device_buffer<unsigned char>((m_filter_count + linear_weights) * e, initial_fill::uninitialized());
    m_filter_gradients = device_buffer<unsigned char>(std::max<std::size_t>(m_filter_count, 1) * e, initial_fill::uninitialized());
    m_float_gradients = device_buffer<float>(params - m_filter_count, initial_fill::uninitialized());
    m_statistics = device_buffer<float>(4 * m_channels, initial_fill::uninitialized());
    m_activations.clear();
    for (std::size_t b : m_plan.kept_bytes) m_activations.emplace_back(b, initial_fill::uninitialized());
    m_conv_outputs.clear();
    m_pool_indexes.clear();
    for (std::size_t i = 0; i < m_trained; ++i) {
      m_conv_outputs.emplace_back(m_plan.conv_output_bytes[i], initial_fill::uninitialized());
      const bool max_pool = m_definition.layers()[i].kind == layer_kind::max_pool;
      m_pool_indexes.emplace_back(max_pool ? std::size_t(m_options.batch * m_definition.shape(m_definition.layers()[i].output).elements())
                                           : 0,
                                  initial_fill::uninitialized());
    }
    m_gradient_slots.clear();
    for (std::size_t b : m_plan.gradient_slot_bytes) m_gradient_slots.emplace_back(b, initial_fill::uninitialized());
    m_conv_scratch = device_buffer<unsigned char>(std::max<std::size_t>(m_plan.conv_gradient_scratch_bytes, 256), initial_fill::uninitialized());
    m_accumulate_scratch = device_buffer<unsigned char>(std::max<std::size_t>(m_plan.accumulate_scratch_bytes, 256), initial_fill::uninitialized());
    m_labels = device_buffer<std::int32_t>(std::size_t(m_options.batch), initial_fill::uninitialized());
    m_row_loss = device_buffer<double>(std::size_t(m_options.batch), initial_fill::uninitialized());
    m_loss_value = device_buffer<float>(1, initial_fill::uninitialized());
    m_linear_workspace = device_buffer<unsigned char>(std::size_t{32} << 20, initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemset(m_linear_workspace.data(), 0, m_linear_workspace.bytes()));
    if (m_options.scales_loss()) m_scale = std::make_unique<dynamic_loss_scale>(m_options.loss_scale, nullptr);
  }

  void* activation(tensor_ref t) const { return const_cast<unsigned char*>(m_activations.at(std::size_t(t.id)).data()); }
  void* gradient(tensor_ref t) const {
    const std::size_t slot = m_plan.gradient_slot_of.at(std::size_t(t.id));
    if (slot == SIZE_MAX) throw invalid_argument(name() + ": tensor " + std::to_string(t.id) + " has no gradient");
    return const_cast<unsigned char*>(m_gradient_slots[slot].data());
  }
  float* master(std::size_t index) const { return const_cast<float*>(m_master.data()) + index; }
  float* float_gradient(std::size_t master_index) const {
    return const_cast<float*>(m_float_gradients.data()) + (master_index - m_filter_count);
  }
  // The copy of master values [index, index + count) the passes read: the model arena (FP16,
  // BF16) or the master itself. Filters sit at their filter index, linear weights after all
  // filters in their order.
  void* model(std::size_t master_index, bool filter) const {
    if (m_model.bytes() == 0) return master(master_index);
    const std::size_t e = activation_bytes(m_options.dtype);
    std::size_t at = master_index;
    if (!filter) {
      at = m_filter_count;
      for (const auto& s : m_slots) {
        if (s.weight_count == 0) continue;
        if (s.weight == master_index) break;
        at += s.weight_count;
      }
    }
    return const_cast<unsigned char*>(m_model.data()) + at * e;
  }
  float* statistics(std::size_t which, std::size_t first_channel) const {  // 0 running mean, 1 running var, 2 saved mean, 3 saved 1/std
    return const_cast<float*>(m_statistics.data()) + which * m_channels + first_channel;
  }

  void refresh_model_copies(cudaStream_t stream) {
    if (m_model.bytes() == 0) return;
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (m_filter_count != 0) {
        detail::float_to_kernel<T><<<detail::elementwise_grid(std::int64_t(m_filter_count)), 256, 0, stream>>>(
            m_master.data(), static_cast<T*>(model(0, true)), std::int64_t(m_filter_count));
        GPUCMP_CUDA_CHECK_LAST("model copy kernel");
      }
      for (const auto& s : m_slots) {
        if (s.weight_count == 0) continue;
        detail::float_to_kernel<T><<<detail::elementwise_grid(std::int64_t(s.weight_count)), 256, 0, stream>>>(
            master(s.weight), static_cast<T*>(model(s.weight, false)), std::int64_t(s.weight_count));
        GPUCMP_CUDA_CHECK_LAST("model copy kernel");
      }
    });
  }

  conv_problem conv_problem_of(const layer_definition& l) const {
    return conv_problem_for(m_definition, l, m_options.batch, m_options.dtype, m_options.layout);
  }

  void fill_synthetic_batch(cudaStream_t stream) {
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      const tensor_ref in = m_definition.input();
      fill_uniform(static_cast<T*>(activation(in)), std::size_t(m_options.batch * m_definition.shape(in).elements()),
                   m_options.data_seed, -1, 1, stream);
    });
    std::vector<std::int32_t> labels(std::size_t(m_options.batch));
    for (std::size_t i = 0; i < labels.size(); ++i) {
      labels[i] = std::int32_t(random_bits(m_options.data_seed + 1, i) % std::uint64_t(classes()));
    }
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_labels.data(), labels.data(), labels.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `labels` is a local
  }

  // Fills a device tensor of the precision's type with random values in [low, high).
  void fill(void* p, std::size_t bytes, std::uint64_t seed, double low, double high, cudaStream_t stream) const {
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      fill_uniform(static_cast<T*>(p), bytes / sizeof(T), seed, low, high, stream);
    });
  }

  // Every layer: searched and verified passes, bound to the network's tensors; then the
  // forward, backward and optimizer steps in order.
  void build_layers(cudaStream_t stream) {
    const auto& layers = m_definition.layers();
    m_reports.assign(m_trained, {});
    for (std::size_t i = 0; i < m_trained; ++i) {
      m_reports[i].name = layers[i].name;
      m_reports[i].kind = to_string(layers[i].kind);
      m_reports[i].shape = m_definition.shape(layers[i].input).text() + " -> " + m_definition.shape(layers[i].output).text();
    }
    plan_gradient_contributions();
    search_convolutions(stream);
    choose_batch_norms(stream);
    build_linears(stream);
    build_steps();
    build_optimizer(stream);
  }

  // Each (shape, pass) once: its own random tensors at full size, searched and verified,
  // then released; layers bind the chosen algorithm to theirs, on one shared workspace.
  void search_convolutions(cudaStream_t stream) {
    const auto& layers = m_definition.layers();
    std::size_t workspace = 0;
    const conv_direction passes[] = {conv_direction::forward, conv_direction::backward_data, conv_direction::backward_filter};
    m_fused_statistics.assign(m_trained, false);
    m_statistics_candidate.assign(m_trained, false);
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = layers[i];
      if (l.kind != layer_kind::conv) continue;
      const conv_problem p = conv_problem_of(l);
      m_reports[i].shape = std::string(to_string(p.dtype)) + "_" + to_string(p.layout) + "/" + p.shape_name();
      for (conv_direction d : passes) {
        if (d == conv_direction::backward_data && l.input.id == m_definition.input().id) continue;  // nobody needs the images' gradient
        const bool accumulate = adds_in_place(d, i);
        // The forward pass with the statistics in its epilogue, where cuDNN fuses them.
        if (d == conv_direction::forward && statistics_may_fuse()) {
          search_fused_forward(i, stream, workspace);
          if (m_statistics_candidate[i] && m_options.statistics_in_conv == conv_statistics::always) {
            m_fused_statistics[i] = true;
            report_fused_forward(i);
            continue;  // no plain pass: the batch norm always normalises from these sums
          }
        }
        const std::string key = conv_key(d, i);
        auto found = m_convs.find(key);
        if (found == m_convs.end()) {
          conv_options o = conv_search_options(i);
          o.direction = d;
          o.accumulate = accumulate;
          found = add_searched_conv(key, p, o, "layer '" + l.name + "' " + to_string(d), stream, workspace);
        }
        const std::string algorithm = found->second->algorithm().describe() + (accumulate ? ", adding in place (beta 1)" : "");
        (d == conv_direction::forward ? m_reports[i].forward
         : d == conv_direction::backward_data ? m_reports[i].data_gradient
                                              : m_reports[i].weight_gradient) = algorithm;
        m_reports[i].checks.push_back(std::string(to_string(d)) + ": " + m_conv_checks[key]);
      }
    }
    m_conv_workspace = device_buffer<unsigned char>(std::max<std::size_t>(workspace, 256), initial_fill::uninitialized());
    GPUCMP_CUDA_CHECK(cudaMemset(m_conv_workspace.data(), 0, m_conv_workspace.bytes()));
    // Per layer that may fuse: its channels' sum and sum of squares, the epilogue's output.
    m_conv_sums.clear();
    for (std::size_t i = 0; i < m_trained; ++i) {
      const std::size_t k = m_statistics_candidate[i] ? std::size_t(layers[i].conv.out_channels) : 0;
      m_conv_sums.emplace_back(2 * k, initial_fill::uninitialized());
    }
  }

  // Layer `i`'s convolution options for the build's search (the direction and epilogue are
  // the caller's).
  conv_options conv_search_options(std::size_t i) const {
    conv_options o;
    o.choice = algorithm_choice::search;
    o.search = m_options.search;
    o.search.max_candidates = m_options.candidates_per_pass;
    o.workspace_limit = m_options.workspace_limit;
    o.seed = 17 + i;
    return o;
  }

  // Searches, verifies (throwing verification_failed naming `what`) and keeps under `key` a
  // convolution on its own tensors, then releases them; `workspace` grows to what it needs.
  std::map<std::string, std::unique_ptr<conv>>::iterator add_searched_conv(const std::string& key, const conv_problem& p,
                                                                          const conv_options& o, const std::string& what,
                                                                          cudaStream_t stream, std::size_t& workspace) {
    auto c = std::make_unique<conv>(p, o, stream);
    gpucmp::search(*c, shared_engine(), o.search);
    const verification v = c->verify(stream);
    require_passed(name() + " " + what, v);
    m_conv_checks[key] = v.summary();
    c->release_tensors();
    workspace = std::max(workspace, c->algorithm().workspace);
    return m_convs.emplace(key, std::move(c)).first;
  }

  // Whether forward passes may write their batch norm's statistics: asked for, a type and
  // layout cuDNN's gen-stats fusion takes, and gpucmp's batch norm kernels allowed (they
  // normalise from the sums).
  bool statistics_may_fuse() const {
    const auto& paths = m_options.batch_norm_paths;
    return m_options.statistics_in_conv != conv_statistics::off && m_options.layout == conv_layout::nhwc &&
           (m_options.dtype == numerics::fp16 || m_options.dtype == numerics::bf16) &&
           std::find(paths.begin(), paths.end(), batch_norm_path::gpucmp_kernels) != paths.end();
  }
  std::string fused_key(std::size_t layer) const { return "fwd+statistics/" + m_reports[layer].shape; }
  // Layer `layer`'s report: its forward pass is the one that writes the statistics.
  void report_fused_forward(std::size_t layer) {
    m_reports[layer].forward = m_convs.at(fused_key(layer))->algorithm().describe() + ", batch norm statistics in its epilogue";
  }

  // Layer `i`'s forward pass with the statistics in its epilogue: searched and verified once
  // per shape (y against an FP64 reference, the sums against an FP64 reduction of y). A shape
  // cuDNN refuses, or whose fused pass fails its check, keeps the plain pass (reported).
  void search_fused_forward(std::size_t i, cudaStream_t stream, std::size_t& workspace) {
    const layer_definition& l = m_definition.layers()[i];
    const std::string& shape = m_reports[i].shape;
    const std::string key = fused_key(i);
    if (!m_convs.count(key) && !m_statistics_refused.count(shape)) {
      conv_options o = conv_search_options(i);
      o.statistics = true;
      try {
        add_searched_conv(key, conv_problem_of(l), o, "layer '" + l.name + "' forward with statistics", stream, workspace);
      } catch (const unsupported& e) {
        m_statistics_refused[shape] = e.what();
      } catch (const verification_failed& e) {
        m_statistics_refused[shape] = std::string("failed its check: ") + e.what();
      }
    }
    if (m_convs.count(key)) {
      m_statistics_candidate[i] = true;
      m_reports[i].checks.push_back("forward with statistics: " + m_conv_checks[key]);
    } else {
      m_reports[i].checks.push_back("statistics in the epilogue refused: " + m_statistics_refused[shape]);
    }
  }

  // Whether `layer`'s pass `d` adds its result in place (a data gradient's second part).
  bool adds_in_place(conv_direction d, std::size_t layer) const {
    return d == conv_direction::backward_data && m_data_gradient_adds[layer];
  }
  // "<pass>[+accumulate]/<shape>": one searched conv per pass, shape and beta.
  std::string conv_key(conv_direction d, std::size_t layer) const {
    return std::string(to_string(d)) + (adds_in_place(d, layer) ? "+accumulate" : "") + "/" + m_reports[layer].shape;
  }
  const conv& searched(conv_direction d, std::size_t layer) const { return *m_convs.at(conv_key(d, layer)); }

  // Each batch norm: the paths options allow and cuDNN takes, timed (forward + backward) and
  // verified at full size on the layer's own tensors filled with random values; where the
  // convolution may write the statistics (search_fused_forward), also gpucmp's kernels
  // normalising from them, every candidate timed with its convolution. Layers of one shape
  // (and one convolution, where it takes part) reuse the first's choice and are verified
  // themselves.
  void choose_batch_norms(cudaStream_t stream) {
    const auto& layers = m_definition.layers();
    m_bns.clear();
    m_bns.resize(m_trained);
    std::size_t workspace = 0;
    std::map<std::string, std::pair<batch_norm_path, bool>> chosen;  // key -> path, from the sums
    // Shapes and paths first: the workspace must exist before anything runs.
    std::vector<std::vector<std::unique_ptr<batch_norm_training>>> candidates(m_trained);
    std::vector<std::vector<bool>> from_sums(m_trained);
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = layers[i];
      if (l.kind != layer_kind::conv) continue;
      const image_shape& out = m_definition.shape(l.output);
      const batch_norm_shape shape{m_options.batch, out.c, out.h, out.w, m_options.dtype, m_options.layout, l.residual.valid(), l.conv.relu};
      for (batch_norm_path path : m_options.batch_norm_paths) {
        if (!batch_norm_training::support(shape, path).empty()) continue;
        // gpucmp's kernels from the convolution's sums: instead of reading x (always) or as
        // one more candidate (searched).
        const bool fused = path == batch_norm_path::gpucmp_kernels && m_statistics_candidate[i];
        const bool always = fused && m_options.statistics_in_conv == conv_statistics::always;
        for (bool sums : {false, true}) {
          if ((sums && !fused) || (!sums && always)) continue;
          try {
            candidates[i].push_back(std::make_unique<batch_norm_training>(m_cudnn.get(), shape, path, m_options.batch_norm));
          } catch (const unsupported&) {
            break;  // cuDNN's size query refused the shape
          }
          from_sums[i].push_back(sums);
          workspace = std::max(workspace, candidates[i].back()->workspace_bytes());
        }
      }
      if (candidates[i].empty()) throw unsupported(name() + ": no batch norm path runs layer '" + l.name + "' (" + shape.name() + ")");
    }
    m_bn_workspace = device_buffer<unsigned char>(std::max<std::size_t>(workspace, 256), initial_fill::uninitialized());
    // One reserve per layer (cuDNN keeps the ReLU mask in it from forward to backward).
    std::size_t reserves = 0;
    m_bn_reserve_offset.assign(m_trained, 0);
    for (std::size_t i = 0; i < m_trained; ++i) {
      m_bn_reserve_offset[i] = reserves;
      std::size_t most = 0;
      for (const auto& c : candidates[i]) most = std::max(most, c->reserve_bytes());
      reserves += (most + 255) / 256 * 256;
    }
    m_bn_reserve = device_buffer<unsigned char>(std::max<std::size_t>(reserves, 256), initial_fill::uninitialized());
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = layers[i];
      if (l.kind != layer_kind::conv) continue;
      batch_norm_tensors t = bn_tensors(i);
      // Random data in every tensor the check reads; dz goes to a buffer of its own.
      const std::size_t bytes = m_plan.conv_output_bytes[i];
      fill(const_cast<void*>(t.x), bytes, 100 + i, 1, 3, stream);
      fill(const_cast<void*>(t.dy), bytes, 200 + i, -1, 1, stream);
      if (t.z != nullptr) fill(const_cast<void*>(t.z), bytes, 300 + i, -1, 1, stream);
      device_buffer<unsigned char> dz_check(l.residual.valid() ? bytes : 0, initial_fill::uninitialized());
      if (l.residual.valid()) t.dz = dz_check.data();
      t.dx = m_conv_scratch.data();
      detail::batch_norm_search search;
      search.tensors = t;
      search.workspace = m_bn_workspace.data();
      search.reserve = m_bn_reserve.data() + m_bn_reserve_offset[i];
      // An output gradient in two parts: the second in the accumulate scratch (random here).
      device_buffer<unsigned char> summed(m_second_gradient[i] ? bytes : 0, initial_fill::uninitialized());
      if (m_second_gradient[i]) {
        fill(m_accumulate_scratch.data(), bytes, 400 + i, -1, 1, stream);
        search.tensors.dy2 = m_accumulate_scratch.data();
        search.summed = summed.data();
        const void* a = t.dy;
        const void* b = m_accumulate_scratch.data();
        void* out = summed.data();
        const std::int64_t count = m_options.batch * m_definition.shape(l.output).elements();
        search.sum = visit_storage(m_options.dtype, [&](auto zero) -> step_fn {
          using T = decltype(zero);
          return [a, b, out, count](cudaStream_t st) {
            detail::launch_add(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), count, st);
          };
        });
      }
      // Where the convolution may write the statistics, each candidate runs its convolution
      // on random input and the layer's filter (real parameters: reset() ran before).
      std::string key = candidates[i].front()->shape().name() + (m_second_gradient[i] ? "+dy2" : "");
      std::unique_ptr<conv::binding> plain_pass, fused_pass;
      if (m_statistics_candidate[i]) {
        key += " after " + m_reports[i].shape;
        fill(activation(l.input), m_plan.kept_bytes[std::size_t(l.input.id)], 500 + i, -1, 1, stream);
        void* x = activation(l.input);
        void* w = model(m_slots[i].filter, true);
        float* sums = m_conv_sums[i].data();
        fused_pass = std::make_unique<conv::binding>(m_convs.at(fused_key(i))->bind(
            {x, w, m_conv_outputs[i].data(), sums, sums + l.conv.out_channels}, m_conv_workspace.data(), m_conv_workspace.bytes()));
        search.fused_conv = [p = fused_pass.get()](cudaStream_t st) { (*p)(st); };
        search.sums = sums;
        if (!m_fused_statistics[i]) {  // searched: the plain pass competes (conv_statistics::always has none)
          plain_pass = std::make_unique<conv::binding>(searched(conv_direction::forward, i).bind(
              {x, w, m_conv_outputs[i].data()}, m_conv_workspace.data(), m_conv_workspace.bytes()));
          search.plain_conv = [p = plain_pass.get()](cudaStream_t st) { (*p)(st); };
        }
      }
      auto before = chosen.find(key);
      for (std::size_t c = 0; c < candidates[i].size(); ++c) {
        // A shape already timed: its choice, verified on this layer's tensors.
        if (before != chosen.end() && (candidates[i][c]->path() != before->second.first || from_sums[i][c] != before->second.second)) continue;
        search.paths.push_back(std::move(candidates[i][c]));
        search.from_sums.push_back(from_sums[i][c]);
      }
      if (search.paths.size() > 1) {
        gpucmp::search(search, shared_engine(), m_options.search);
      }
      const verification v = search.verify(stream);
      const bool fused = search.from_sums[search.current];
      const std::string path = search.describe_candidate(search.current);
      require_passed(name() + " layer '" + l.name + "' batch norm (" + path + ")", v);
      m_bns[i] = std::move(search.paths[search.current]);
      m_fused_statistics[i] = fused;
      chosen.emplace(key, std::make_pair(m_bns[i]->path(), fused));
      m_reports[i].batch_norm = path;
      if (fused) report_fused_forward(i);
      m_reports[i].checks.push_back("batch norm: " + v.summary());
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // dz_check and summed are freed next
    }
  }

  batch_norm_tensors bn_tensors(std::size_t i) const {
    const layer_definition& l = m_definition.layers()[i];
    const parameter_slots& s = m_slots[i];
    batch_norm_tensors t;
    t.x = m_conv_outputs[i].data();
    t.z = l.residual.valid() ? activation(l.residual) : nullptr;
    t.y = activation(l.output);
    t.gamma = master(s.gamma);
    t.beta = master(s.beta);
    t.running_mean = statistics(0, s.statistics);
    t.running_var = statistics(1, s.statistics);
    t.saved_mean = statistics(2, s.statistics);
    t.saved_inv_std = statistics(3, s.statistics);
    t.dy = gradient(l.output);
    t.dx = const_cast<unsigned char*>(m_conv_scratch.data());
    t.dgamma = float_gradient(s.gamma);
    t.dbeta = float_gradient(s.beta);
    return t;
  }

  // The classifier: forward searched and verified (models/linear.cuh), backward verified,
  // on random inputs.
  void build_linears(cudaStream_t stream) {
    const auto& layers = m_definition.layers();
    m_linear_forward.resize(m_trained);
    m_linear_backward.resize(m_trained);
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = layers[i];
      if (l.kind != layer_kind::linear) continue;
      const std::int64_t in = m_definition.shape(l.input).c;
      const parameter_slots& s = m_slots[i];
      fill(activation(l.input), m_plan.kept_bytes[std::size_t(l.input.id)], 400 + i, 0, 1, stream);
      refresh_model_copies(stream);
      linear_tensors f{activation(l.input), model(s.weight, false), master(s.bias), static_cast<float*>(activation(l.output))};
      m_linear_forward[i] = std::make_unique<linear_layer>(m_cublas.get(), m_options.batch, in, l.out_features, m_options.dtype, f,
                                                           m_linear_workspace.data(), m_linear_workspace.bytes());
      gpucmp::search(*m_linear_forward[i], shared_engine(), m_options.search);
      const verification forward = m_linear_forward[i]->verify(stream);
      require_passed(name() + " layer '" + l.name + "' forward", forward);
      linear_gradient_tensors b;
      b.x = activation(l.input);
      b.w = model(s.weight, false);
      b.dy = gradient(l.output);
      b.dx = l.input.id == m_definition.input().id ? nullptr : gradient(l.input);  // any buffer of its size: bound below
      b.dw = float_gradient(s.weight);
      b.db = float_gradient(s.bias);
      fill(const_cast<void*>(b.dy), std::size_t(m_options.batch * l.out_features) * activation_bytes(m_options.dtype), 500 + i, -1, 1, stream);
      const linear_backward check(m_cublas.get(), m_options.batch, in, l.out_features, m_options.dtype, b, m_linear_workspace.data(),
                                  m_linear_workspace.bytes());
      const verification backward = check.verify(stream);
      require_passed(name() + " layer '" + l.name + "' backward", backward);
      m_reports[i].shape = m_linear_forward[i]->name();
      m_reports[i].forward = m_linear_forward[i]->describe();
      m_reports[i].data_gradient = m_reports[i].weight_gradient = "cuBLASLt heuristic rank 0";
      m_reports[i].checks.push_back("forward: " + forward.summary());
      m_reports[i].checks.push_back("backward: " + backward.summary());
    }
  }

  // Where the backward pass of a layer writes the gradient of tensor `t` it contributes: the
  // gradient itself for the first contribution (in backward order), else the accumulate
  // scratch, then either added in at once (accumulate) or, when the next layer back produced
  // `t` and its batch norm sums two output gradients as it reads (deferred), left there for it.
  struct contribution {
    void* target = nullptr;
    bool accumulate = false;
  };
  // `layer` is the contributing layer; `last` says this is its last contribution.
  contribution contribute(tensor_ref t, std::vector<bool>& written, std::size_t layer, bool last) const {
    if (!written[std::size_t(t.id)]) {
      written[std::size_t(t.id)] = true;
      return {gradient(t), false};
    }
    const std::size_t producer = std::size_t(t.id) - 1;
    const bool deferred = last && std::size_t(t.id) == layer && m_second_gradient[producer] && m_bns[producer] &&
                          m_bns[producer]->path() == batch_norm_path::gpucmp_kernels;
    return {const_cast<unsigned char*>(m_accumulate_scratch.data()), !deferred};
  }

  // Which data-gradient passes add their part in place and which batch norms may read two
  // parts: plan_gradient_parts (training_memory.hpp), the walk the memory plan sized the
  // accumulate scratch by; build_steps() follows it.
  void plan_gradient_contributions() {
    gradient_parts_plan parts = plan_gradient_parts(m_definition, m_options.accumulate_in_conv);
    m_data_gradient_adds = std::move(parts.data_gradient_adds);
    m_second_gradient = std::move(parts.batch_norm_reads_two);
  }

  step_fn add_into(tensor_ref t) const {
    void* dst = gradient(t);
    const void* src = m_accumulate_scratch.data();
    const std::int64_t count = m_options.batch * m_definition.shape(t).elements();
    return visit_storage(m_options.dtype, [&](auto zero) -> step_fn {
      using T = decltype(zero);
      return [dst, src, count](cudaStream_t s) {
        detail::launch_add(static_cast<const T*>(dst), static_cast<const T*>(src), static_cast<T*>(dst), count, s);
      };
    });
  }

  void build_steps() {
    const auto& layers = m_definition.layers();
    const std::int64_t n = m_options.batch;
    m_forward.clear();
    m_backward.clear();
    m_backward_final.clear();
    // The gradients backward piece m_backward.size() - 1 finishes (data-parallel buckets).
    auto finishes = [this](std::vector<gradient_span> spans) {
      m_backward_final.resize(m_backward.size());
      m_backward_final.back() = std::move(spans);
    };
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      // Forward.
      for (std::size_t i = 0; i < m_trained; ++i) {
        const layer_definition& l = layers[i];
        const image_shape& in = m_definition.shape(l.input);
        void* x = activation(l.input);
        void* y = activation(l.output);
        switch (l.kind) {
          case layer_kind::conv: {
            const batch_norm_training* bn = m_bns[i].get();
            const batch_norm_tensors t = bn_tensors(i);
            void* ws = m_bn_workspace.data();
            void* reserve = m_bn_reserve.data() + m_bn_reserve_offset[i];
            // A fused pass writes the statistics in its epilogue and the batch norm normalises
            // from them; a plain pass leaves the batch norm to reduce its output itself.
            const bool fused = m_fused_statistics[i];
            float* sum = fused ? m_conv_sums[i].data() : nullptr;
            float* squares = fused ? sum + l.conv.out_channels : nullptr;
            const conv& pass_conv = fused ? *m_convs.at(fused_key(i)) : searched(conv_direction::forward, i);
            m_bindings.push_back(std::make_unique<conv::binding>(pass_conv.bind(
                {x, model(m_slots[i].filter, true), m_conv_outputs[i].data(), sum, squares}, m_conv_workspace.data(),
                m_conv_workspace.bytes())));
            const conv::binding* pass = m_bindings.back().get();
            m_forward.push_back({"conv forward: " + l.name, [pass](cudaStream_t s) { (*pass)(s); }});
            m_forward.push_back({"batch norm forward: " + l.name, [bn, t, sum, squares, ws, reserve](cudaStream_t s) {
                                   if (sum)
                                     bn->forward_from_sums(t, sum, squares, ws, reserve, s);
                                   else
                                     bn->forward(t, ws, reserve, s);
                                 }});
            break;
          }
          case layer_kind::max_pool: {
            const pool_shape s{n, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, m_options.layout};
            std::uint8_t* argmax = m_pool_indexes[i].data();
            m_forward.push_back({"max pool forward: " + l.name, [s, x, y, argmax](cudaStream_t st) {
              max_pool_forward_training(s, static_cast<const T*>(x), static_cast<T*>(y), argmax, st);
            }});
            break;
          }
          case layer_kind::average_pool: {
            const pool_shape s{n, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, m_options.layout};
            m_forward.push_back({"average pool forward: " + l.name, [s, x, y](cudaStream_t st) {
              pool_forward(pool_kind::average, s, static_cast<const T*>(x), static_cast<T*>(y), st);
            }});
            break;
          }
          case layer_kind::global_average_pool: {
            const std::int64_t pixels = in.h * in.w, c = in.c;
            const conv_layout layout = m_options.layout;
            m_forward.push_back({"global average pool forward: " + l.name, [n, pixels, c, layout, x, y](cudaStream_t st) {
              global_average_pool_forward(n, pixels, c, static_cast<const T*>(x), static_cast<T*>(y), st, layout);
            }});
            break;
          }
          case layer_kind::linear: {
            const linear_layer* layer = m_linear_forward[i].get();
            m_forward.push_back({"linear forward: " + l.name, [layer](cudaStream_t s) { (*layer)(s); }});
            break;
          }
          case layer_kind::softmax: throw invalid_argument(name() + ": softmax '" + l.name + "' must be last");
        }
      }
      // The loss: the logits' gradient, scaled, in the precision's type.
      {
        const float* logits = static_cast<const float*>(activation(m_logits));
        const std::int32_t* labels = m_labels.data();
        const float* scale = m_scale ? m_scale->scale() : nullptr;
        T* dlogits = static_cast<T*>(gradient(m_logits));
        float* loss = m_loss_value.data();
        double* rows = m_row_loss.data();
        const std::int64_t classes_ = this->classes();
        m_loss = [logits, labels, n, classes_, scale, dlogits, loss, rows](cudaStream_t s) {
          softmax_cross_entropy(logits, labels, n, classes_, scale, dlogits, loss, rows, s);
        };
      }
      // Backward, last layer first.
      std::vector<bool> written(m_trained + 1, false);
      written[std::size_t(m_logits.id)] = true;
      for (std::size_t k = m_trained; k-- > 0;) {
        const layer_definition& l = layers[k];
        const image_shape& in = m_definition.shape(l.input);
        const bool input_gradient = l.input.id != m_definition.input().id;
        const void* dy = gradient(l.output);
        switch (l.kind) {
          case layer_kind::conv: {
            batch_norm_tensors t = bn_tensors(k);
            if (m_second_gradient[k] && m_bns[k]->path() == batch_norm_path::gpucmp_kernels) t.dy2 = m_accumulate_scratch.data();
            contribution residual;
            if (l.residual.valid()) {
              residual = contribute(l.residual, written, k, !input_gradient);
              t.dz = residual.target;
            }
            const batch_norm_training* bn = m_bns[k].get();
            void* ws = m_bn_workspace.data();
            void* reserve = m_bn_reserve.data() + m_bn_reserve_offset[k];
            m_backward.push_back({"batch norm backward: " + l.name, [bn, t, ws, reserve](cudaStream_t s) { bn->backward(t, ws, reserve, s); }});
            finishes({{false, m_slots[k].gamma - m_filter_count, m_slots[k].channels},
                      {false, m_slots[k].beta - m_filter_count, m_slots[k].channels}});
            if (residual.accumulate) m_backward.push_back({"gradient add: " + l.name, add_into(l.residual)});
            void* dconv = m_conv_scratch.data();
            m_bindings.push_back(std::make_unique<conv::binding>(searched(conv_direction::backward_filter, k).bind(
                {activation(l.input), reinterpret_cast<T*>(m_filter_gradients.data()) + m_slots[k].filter, dconv}, m_conv_workspace.data(),
                m_conv_workspace.bytes())));
            const conv::binding* weight_pass = m_bindings.back().get();
            m_backward.push_back({"weight gradient: " + l.name, [weight_pass](cudaStream_t s) { (*weight_pass)(s); }});
            finishes({{true, m_slots[k].filter, m_slots[k].filter_count}});
            if (input_gradient) {
              // Added in place by the pass itself (beta = 1), or the first part, or to the scratch.
              const contribution into = m_data_gradient_adds[k] ? contribution{gradient(l.input), false} : contribute(l.input, written, k, true);
              m_bindings.push_back(std::make_unique<conv::binding>(searched(conv_direction::backward_data, k).bind(
                  {into.target, model(m_slots[k].filter, true), dconv}, m_conv_workspace.data(), m_conv_workspace.bytes())));
              const conv::binding* data_pass = m_bindings.back().get();
              m_backward.push_back({"data gradient: " + l.name, [data_pass](cudaStream_t s) { (*data_pass)(s); }});
              if (into.accumulate) m_backward.push_back({"gradient add: " + l.name, add_into(l.input)});
            }
            break;
          }
          case layer_kind::max_pool:
          case layer_kind::average_pool: {
            if (!input_gradient) break;
            const pool_shape s{n, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, m_options.layout};
            const pool_kind kind = l.kind == layer_kind::max_pool ? pool_kind::max : pool_kind::average;
            const std::uint8_t* argmax = m_pool_indexes[k].data();
            const contribution into = contribute(l.input, written, k, true);
            void* dx = into.target;
            m_backward.push_back({std::string(kind == pool_kind::max ? "max" : "average") + " pool backward: " + l.name,
                                  [kind, s, dy, argmax, dx](cudaStream_t st) {
                                    pool_backward(kind, s, static_cast<const T*>(dy), argmax, static_cast<T*>(dx), st);
                                  }});
            if (into.accumulate) m_backward.push_back({"gradient add: " + l.name, add_into(l.input)});
            break;
          }
          case layer_kind::global_average_pool: {
            if (!input_gradient) break;
            const std::int64_t pixels = in.h * in.w, c = in.c;
            const conv_layout layout = m_options.layout;
            const contribution into = contribute(l.input, written, k, true);
            void* dx = into.target;
            m_backward.push_back({"global average pool backward: " + l.name, [n, pixels, c, layout, dy, dx](cudaStream_t st) {
              global_average_pool_backward(n, pixels, c, static_cast<const T*>(dy), static_cast<T*>(dx), st, layout);
            }});
            if (into.accumulate) m_backward.push_back({"gradient add: " + l.name, add_into(l.input)});
            break;
          }
          case layer_kind::linear: {
            const parameter_slots& s = m_slots[k];
            linear_gradient_tensors b;
            b.x = activation(l.input);
            b.w = model(s.weight, false);
            b.dy = dy;
            contribution into;
            if (input_gradient) into = contribute(l.input, written, k, true);
            b.dx = into.target;
            b.dw = float_gradient(s.weight);
            b.db = float_gradient(s.bias);
            m_linear_backward[k] = std::make_unique<linear_backward>(m_cublas.get(), n, in.c, l.out_features, m_options.dtype, b,
                                                                     m_linear_workspace.data(), m_linear_workspace.bytes());
            const linear_backward* pass = m_linear_backward[k].get();
            m_backward.push_back({"linear backward: " + l.name, [pass](cudaStream_t st) { (*pass)(st); }});
            finishes({{false, s.weight - m_filter_count, s.weight_count},
                      {false, s.bias - m_filter_count, std::size_t(l.out_features)}});
            if (into.accumulate) m_backward.push_back({"gradient add: " + l.name, add_into(l.input)});
            break;
          }
          case layer_kind::softmax: break;  // refused in the forward loop
        }
      }
    });
    m_backward_final.resize(m_backward.size());
  }

  // Two fused SGD launches: the filters (gradients in the precision's type, rewriting their
  // copies), and the FP32-gradient parameters (batch norms, linear layers). With loss
  // scaling the gradients are checked for infinities and NaNs first and the scale updated last.
  void build_optimizer(cudaStream_t stream) {
    visit_storage(m_options.dtype, [&](auto zero) {
      using T = decltype(zero);
      const bool low = m_model.bytes() != 0;
      std::vector<optimizer_tensor<T, T>> filters;
      std::vector<optimizer_tensor<float, T>> rest;
      for (std::size_t i = 0; i < m_trained; ++i) {
        const parameter_slots& s = m_slots[i];
        if (s.filter_count != 0) {
          optimizer_tensor<T, T> t;
          t.master = master(s.filter);
          t.gradient = reinterpret_cast<const T*>(m_filter_gradients.data()) + s.filter;
          t.momentum = m_momentum.data() + s.filter;
          t.model_copy = low ? static_cast<T*>(model(s.filter, true)) : nullptr;
          t.count = s.filter_count;
          filters.push_back(t);
        }
        auto add_float = [&](std::size_t index, std::size_t count, T* copy) {
          optimizer_tensor<float, T> t;
          t.master = master(index);
          t.gradient = float_gradient(index);
          t.momentum = m_momentum.data() + index;
          t.model_copy = copy;
          t.count = count;
          rest.push_back(t);
        };
        if (s.channels != 0) add_float(s.gamma, 2 * s.channels, nullptr);  // gamma and beta are adjacent
        if (s.weight_count != 0) {
          add_float(s.weight, s.weight_count, low ? static_cast<T*>(model(s.weight, false)) : nullptr);
          add_float(s.bias, m_definition.layers()[i].bias.size(), nullptr);
        }
      }
      std::shared_ptr<multi_tensor_sgd<T, T>> filter_sgd;
      if (!filters.empty()) filter_sgd = std::make_shared<multi_tensor_sgd<T, T>>(filters, m_options.sgd, stream);
      auto rest_sgd = std::make_shared<multi_tensor_sgd<float, T>>(rest, m_options.sgd, stream);
      dynamic_loss_scale* scale = m_scale.get();
      const T* filter_gradients = reinterpret_cast<const T*>(m_filter_gradients.data());
      const std::size_t filter_count = m_filter_count;
      const float* float_gradients = m_float_gradients.data();
      const std::size_t float_count = m_float_gradients.size();
      m_optimizer_step = [filter_sgd, rest_sgd, scale, filter_gradients, filter_count, float_gradients, float_count](cudaStream_t s) {
        if (scale != nullptr) {
          scale->check(filter_gradients, filter_count, s);
          scale->check(float_gradients, float_count, s);
        }
        const float* factor = scale != nullptr ? scale->scale() : nullptr;
        const std::int32_t* skip = scale != nullptr ? scale->skip_step() : nullptr;
        if (filter_sgd) filter_sgd->step(s, factor, skip);
        rest_sgd->step(s, factor, skip);
        if (scale != nullptr) scale->update(s);
      };
      m_reset_optimizer = [filter_sgd, rest_sgd](cudaStream_t s) {
        if (filter_sgd) filter_sgd->reset(s);
        rest_sgd->reset(s);
      };
    });
  }

  std::vector<float> read_floats(const float* p, std::size_t count, cudaStream_t stream) const {
    std::vector<float> v(count);
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(v.data(), p, count * sizeof(float), cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
  }

  // Master-ordered values as torch-named tensors (with the running statistics when asked).
  std::vector<named_tensor> named(const std::vector<float>& values, bool with_statistics, cudaStream_t stream) const {
    std::vector<named_tensor> out;
    const std::vector<float> stats = with_statistics ? read_floats(m_statistics.data(), m_statistics.size(), stream) : std::vector<float>();
    for (std::size_t i = 0; i < m_trained; ++i) {
      const layer_definition& l = m_definition.layers()[i];
      const parameter_slots& s = m_slots[i];
      if (l.kind == layer_kind::conv) {
        const std::int64_t k = l.conv.out_channels, r = l.conv.kernel, c = std::int64_t(l.weight.size()) / (k * r * r);
        out.push_back({l.name + ".weight", {k, c, r, r}, from_filter_layout(l, values.data() + s.filter)});
        const auto channel = [&](std::size_t first) {
          return std::vector<float>(values.begin() + std::ptrdiff_t(first), values.begin() + std::ptrdiff_t(first + s.channels));
        };
        out.push_back({l.name + ".bn.weight", {k}, channel(s.gamma)});
        out.push_back({l.name + ".bn.bias", {k}, channel(s.beta)});
        if (with_statistics) {
          for (int which : {0, 1}) {
            const auto first = stats.begin() + std::ptrdiff_t(std::size_t(which) * m_channels + s.statistics);
            out.push_back({l.name + (which == 0 ? ".bn.running_mean" : ".bn.running_var"), {k},
                           std::vector<float>(first, first + std::ptrdiff_t(s.channels))});
          }
        }
      } else if (l.kind == layer_kind::linear) {
        const std::int64_t in = std::int64_t(l.weight.size()) / l.out_features;
        out.push_back({l.name + ".weight", {l.out_features, in},
                       std::vector<float>(values.begin() + std::ptrdiff_t(s.weight), values.begin() + std::ptrdiff_t(s.weight + s.weight_count))});
        out.push_back({l.name + ".bias", {l.out_features},
                       std::vector<float>(values.begin() + std::ptrdiff_t(s.bias), values.begin() + std::ptrdiff_t(s.bias + l.bias.size()))});
      }
    }
    return out;
  }

  network_definition m_definition;
  training_options m_options;
  training_memory_plan m_plan;
  tensor_ref m_logits;
  std::size_t m_trained = 0;  // layers up to the logits
  double m_build_seconds = 0;
  cudnn_handle_t m_cudnn;
  lt_handle_t m_cublas;
  std::vector<parameter_slots> m_slots;
  std::size_t m_filter_count = 0, m_channels = 0;
  std::vector<float> m_initial_master;
  device_buffer<float> m_master, m_momentum, m_float_gradients, m_statistics, m_loss_value;
  device_buffer<unsigned char> m_model, m_filter_gradients;
  std::vector<device_buffer<unsigned char>> m_activations, m_conv_outputs, m_gradient_slots;
  std::vector<device_buffer<std::uint8_t>> m_pool_indexes;
  device_buffer<unsigned char> m_conv_scratch, m_accumulate_scratch, m_conv_workspace, m_linear_workspace, m_bn_workspace, m_bn_reserve;
  std::vector<std::size_t> m_bn_reserve_offset;
  device_buffer<std::int32_t> m_labels;
  device_buffer<double> m_row_loss;
  std::map<std::string, std::unique_ptr<conv>> m_convs;  // "<pass>/<shape>": searched, tensors released
  std::map<std::string, std::string> m_conv_checks;
  std::vector<std::unique_ptr<conv::binding>> m_bindings;
  std::vector<std::unique_ptr<batch_norm_training>> m_bns;
  std::vector<bool> m_second_gradient;     // layer -> its output gradient may arrive in two parts (plan_gradient_contributions)
  std::vector<bool> m_data_gradient_adds;  // conv layer -> its data-gradient pass adds to its input's gradient (the same)
  // training_options::statistics_in_conv: per layer, whether its forward pass writes its batch
  // norm's statistics (then m_conv_sums[layer] holds sum, then squares), whether it could,
  // and the shapes cuDNN refused (or whose fused pass failed its check).
  std::vector<bool> m_fused_statistics;
  std::vector<bool> m_statistics_candidate;  // layer -> its fused forward pass was searched and verified
  std::vector<device_buffer<float>> m_conv_sums;
  std::map<std::string, std::string> m_statistics_refused;
  std::vector<std::unique_ptr<linear_layer>> m_linear_forward;
  std::vector<std::unique_ptr<linear_backward>> m_linear_backward;
  std::unique_ptr<dynamic_loss_scale> m_scale;
  std::vector<step_piece> m_forward, m_backward;
  std::vector<std::vector<gradient_span>> m_backward_final;  // per backward piece: the gradients it finishes
  step_fn m_loss, m_optimizer_step, m_reset_optimizer;
  std::vector<training_layer_report> m_reports;
};

}  // namespace gpucmp
