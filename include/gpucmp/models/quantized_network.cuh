// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A CNN run quantized (components gpucmp::cudnn and gpucmp::cublas): its convolutions in FP8
// E4M3 or INT8 as a quantization_plan scales them (models/quantization_plan.hpp), on
// activations stored in that format, NHWC. Each convolution is searched both ways, quantized
// (models/quantized_conv.cuh: cuDNN, or cuBLASLt for 1x1 INT8 layers) and in FP16
// (models/fused_conv.cuh), and runs the faster that verified, FP16's time counting the
// dequantization of its inputs and the quantization of its output around it; the plan records
// which precision each layer ran in and why. A stem over few channels runs quantized on its
// input's space-to-depth image (models/space_to_depth.hpp). A max pool runs on the stored
// values (a max rounds nothing); the global average pool dequantizes into FP16, and the
// classifier runs in FP16 with FP32 logits (models/linear.cuh). Every layer is verified
// against its FP64 reference while the network is built, before anything is timed; then each
// convolution gets a workspace of its own.
//
//   gpucmp::calibration_table cal = gpucmp::calibrate(def, settings, 32, stream);
//   gpucmp::quantized_network net(def, gpucmp::quantization_plan(def, cal, gpucmp::numerics::int8), {}, stream);
//   net(stream);                         // or net.capture(stream) for one CUDA graph
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/models/batch_norm_folding.hpp>
#include <gpucmp/models/fused_conv.cuh>
#include <gpucmp/models/layer_trace.hpp>
#include <gpucmp/models/linear.cuh>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/network_definition.hpp>
#include <gpucmp/models/pooling.cuh>
#include <gpucmp/models/quantization_plan.hpp>
#include <gpucmp/models/space_to_depth.hpp>
#include <gpucmp/models/space_to_depth_quantize.cuh>
#include <gpucmp/models/quantized_conv.cuh>
#include <gpucmp/models/softmax.cuh>
#include <gpucmp/ops/cublas_status.hpp>
#include <gpucmp/ops/cudnn_status.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/specs/work.hpp>

#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpucmp {

/// How a quantized network is built.
struct quantized_network_options {
  std::int64_t batch = 32;                                 ///< images per forward pass
  search_options search = network_options::fast_search();  ///< how each layer's candidates are timed
  int candidates_per_path = 8;                             ///< per way of running a layer
  std::size_t workspace_limit = std::size_t{1} << 30;      ///< largest workspace a candidate may use
  /// A convolution runs in FP16 where FP16 is faster (both searched); false: only where the
  /// quantized layer cannot run.
  bool choose_by_time = true;
  /// A stride-2 stem over at most 4 channels runs quantized as a stride-1 convolution over its
  /// input's space-to-depth image, written as the input is quantized (models/space_to_depth.hpp).
  bool space_to_depth_stem = true;
  std::uint64_t input_seed = 7;  ///< random input the build searches and verifies on
};

namespace detail {

// The conversions move 8 elements a thread (16 bytes of FP16, 8 of the stored type): with
// 1- and 2-byte accesses a Hopper SM keeps too few bytes in flight to approach the copy rate,
// and the stem's output alone is 0.6 GB of traffic at batch 256. Counts not a multiple of 8
// end in a scalar tail; the buffers are device allocations, 256-byte aligned.
inline constexpr std::int64_t conversion_vector = 8;

// Stored -> FP16, real = stored * scale.
template <class Stored>
__global__ void dequantize_kernel(const Stored* in, __half* out, std::int64_t count, float scale) {
  const std::int64_t vectors = count / conversion_vector, stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  for (std::int64_t v = first; v < vectors; v += stride) {
    const uint2 raw = reinterpret_cast<const uint2*>(in)[v];
    const Stored* stored = reinterpret_cast<const Stored*>(&raw);
    uint4 packed;
    __half* half = reinterpret_cast<__half*>(&packed);
#pragma unroll
    for (int j = 0; j < conversion_vector; ++j) half[j] = __float2half(static_cast<float>(stored[j]) * scale);
    reinterpret_cast<uint4*>(out)[v] = packed;
  }
  for (std::int64_t i = vectors * conversion_vector + first; i < count; i += stride) {
    out[i] = __float2half(static_cast<float>(in[i]) * scale);
  }
}

// FP16 -> stored, stored = quantize_saturated(real * inverse_scale).
template <class Stored>
__global__ void quantize_kernel(const __half* in, Stored* out, std::int64_t count, float inverse_scale) {
  const std::int64_t vectors = count / conversion_vector, stride = std::int64_t(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  for (std::int64_t v = first; v < vectors; v += stride) {
    const uint4 packed = reinterpret_cast<const uint4*>(in)[v];
    const __half* half = reinterpret_cast<const __half*>(&packed);
    uint2 raw;
    Stored* stored = reinterpret_cast<Stored*>(&raw);
#pragma unroll
    for (int j = 0; j < conversion_vector; ++j) stored[j] = quantize_saturated<Stored>(__half2float(half[j]) * inverse_scale);
    reinterpret_cast<uint2*>(out)[v] = raw;
  }
  for (std::int64_t i = vectors * conversion_vector + first; i < count; i += stride) {
    out[i] = quantize_saturated<Stored>(__half2float(in[i]) * inverse_scale);
  }
}

// Threads for a conversion of `count` elements.
inline unsigned conversion_grid(std::int64_t count) { return grid_for((count + conversion_vector - 1) / conversion_vector); }

// The mean over the pixels of each image's channel (NHWC), dequantized, in FP16.
template <class Stored>
__global__ void dequantize_average_kernel(const Stored* in, __half* out, std::int64_t n, std::int64_t pixels, std::int64_t c,
                                          float scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n * c; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t ci = i % c, ni = i / c;
    float sum = 0;
    for (std::int64_t p = 0; p < pixels; ++p) sum += to_float(in[(ni * pixels + p) * c + ci]);
    out[i] = __float2half(sum * scale / float(pixels));
  }
}

}  // namespace detail

/// A network_definition run quantized for one batch size (this header's opening comment).
class quantized_network {
 public:
  /// Uploads the quantized parameters, builds, searches and verifies every layer layer by
  /// layer on random input (each layer searched on the activations the layers before it made),
  /// and settles each convolution's precision in the plan. Throws invalid_argument for a batch
  /// that is not positive, unsupported for a layer kind it does not run quantized (average
  /// pooling), verification_failed naming a layer whose check failed.
  quantized_network(const network_definition& def, quantization_plan plan, const quantized_network_options& options,
                    cudaStream_t stream)
      : m_definition(def), m_plan(std::move(plan)), m_options(options) {
    if (options.batch <= 0) throw invalid_argument(def.name() + ": batch must be positive");
    cudnnHandle_t dnn = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&dnn));
    m_cudnn = cudnn_handle_t(dnn);
    cublasLtHandle_t lt = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtCreate(&lt));
    m_cublas = lt_handle_t(lt);
    m_linear_workspace = device_buffer<unsigned char>(std::size_t{32} << 20);
    GPUCMP_CUDA_CHECK(cudaMemset(m_linear_workspace.data(), 0, m_linear_workspace.bytes()));
    allocate_tensors();
    fill_input(stream);
    for (std::size_t i = 0; i < def.layers().size(); ++i) {
      m_layer_steps.push_back(m_steps.size());
      build_layer(i, stream);
    }
    m_layer_steps.push_back(m_steps.size());
    give_layers_private_workspaces(stream);
  }
  quantized_network(const quantized_network&) = delete;
  quantized_network& operator=(const quantized_network&) = delete;

  /// Enqueues one forward pass on `stream`.
  void operator()(cudaStream_t stream) const {
    for (const auto& step : m_steps) step(stream);
  }
  /// Enqueues layer `index` alone: its steps (the first convolution's include the input's
  /// quantization); layers in order make a forward pass.
  void run_layer(std::size_t index, cudaStream_t stream) const {
    for (std::size_t s = m_layer_steps.at(index); s < m_layer_steps.at(index + 1); ++s) m_steps[s](stream);
  }
  /// Kernel mode layer by layer, as network::trace_layers: `passes` forward passes launched
  /// layer by layer, every kernel attributed to its layer (gpucmp/models/layer_trace.hpp).
  network_trace trace_layers(activity_tracer& tracer, cudaStream_t stream, std::size_t passes = 20) const {
    return gpucmp::trace_layers(
        tracer, m_definition.layers().size(), [&](std::size_t i) { run_layer(i, stream); },
        [&](std::size_t i) { return m_definition.layers().at(i).name; },
        [&] { GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream)); }, passes);
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
    detail::upload_images(images, m_definition.shape(m_definition.input()), m_options.batch, conv_layout::nhwc,
                          m_input_half.data(), name(), stream);
  }
  /// The logits (or softmax) after the last forward pass, batch x classes FP32. Synchronizes.
  std::vector<float> output(cudaStream_t stream) const {
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    const tensor_ref out = m_definition.output();
    std::vector<float> v(std::size_t(m_options.batch * m_definition.shape(out).elements()));
    GPUCMP_CUDA_CHECK(
        cudaMemcpy(v.data(), m_tensors[std::size_t(out.id)].data(), v.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }

  /// Tensor `t` after the last forward pass (or the layers run since), FP32, batch x H x W x C:
  /// a stored tensor dequantized (stored value x its plan scale), the global average pool's
  /// FP16 and the logits as they are, the input as set_input gave it (in FP16). Every tensor
  /// has a buffer of its own, so every layer's output stays readable after the pass
  /// (models/layer_errors.hpp compares them with an FP32 network's). Synchronizes.
  std::vector<float> activation_values(tensor_ref t, cudaStream_t stream) const {
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return values_of(t);
  }

  /// How it was built.
  const quantized_network_options& options() const noexcept { return m_options; }
  /// The definition it runs (the caller's, which outlives it).
  const network_definition& definition() const noexcept { return m_definition; }
  /// "resnet50/int8/bs32".
  std::string name() const {
    return m_definition.name() + "/" + to_string(m_plan.format()) + "/bs" + std::to_string(m_options.batch);
  }
  /// The plan, each convolution's precision and why settled.
  const quantization_plan& plan() const noexcept { return m_plan; }
  /// Every layer in execution order: what it runs, its search time and its verification.
  const std::vector<layer_report>& layers() const noexcept { return m_reports; }
  /// One forward pass's work: convolution and linear FLOPs, images as items, at the format's rate.
  gpucmp::work work() const {
    gpucmp::work w;
    w.flops = 2.0 * m_definition.macs_per_image() * double(m_options.batch);
    w.items = double(m_options.batch);
    w.arithmetic = peak_precision(m_plan.format());
    return w;
  }

 private:
  using cudnn_handle_t = detail::unique_handle<cudnnHandle_t, cudnnDestroy>;
  using lt_handle_t = detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;

  // One convolution's device state, both ways it may run.
  struct conv_state {
    device_buffer<unsigned char> weight_q, weight_half, bias_half;
    device_buffer<float> bias, dequantize, residual_scale, output_scale;
    device_buffer<float> matmul_alpha, matmul_bias;  // the matmul path's scales (quantized_conv_tensors)
    std::unique_ptr<quantized_conv> quantized;
    std::unique_ptr<fused_conv> half;
  };
  // What the layers of one (shape, epilogue) share, as the FP16 network's do: the candidate
  // sets, built once, and each way's search verdict (the candidate's index in its set, its
  // time), which a later layer of that shape runs without a search where its tensors allow
  // (each layer is still verified on its own). ResNet-50 has 53 convolutions of 24 such pairs,
  // and each quantized search times gpucmp's tiles beside cuDNN's and cuBLASLt's plans.
  using search_verdict = std::optional<std::pair<std::size_t, double>>;
  struct shape_search {
    std::shared_ptr<const quantized_conv_candidates> quantized;  // null: not built yet, or none (why_none)
    std::string why_none;
    search_verdict quantized_verdict;
    std::shared_ptr<const fused_conv_candidates> half;
    search_verdict half_verdict;
  };

  bool int8() const noexcept { return m_plan.format() == numerics::int8; }
  std::size_t stored_bytes() const noexcept { return element_bytes(quantized_storage(m_plan.format())); }
  std::int64_t elements(tensor_ref t) const { return m_options.batch * m_definition.shape(t).elements(); }
  void* data(tensor_ref t) const { return const_cast<unsigned char*>(m_tensors[std::size_t(t.id)].data()); }
  double tensor_scale(tensor_ref t) const {  // the plan's scale of a stored tensor
    for (const quantized_layer& q : m_plan.layers()) {
      for (const layer_definition& l : m_definition.layers()) {
        if (l.name != q.name) continue;
        if (l.output.id == t.id) return q.output_scale;
        if (l.input.id == t.id) return q.input_scale;
        if (l.residual.valid() && l.residual.id == t.id) return q.residual_scale;
      }
    }
    throw invalid_argument(name() + ": no scale for tensor " + std::to_string(t.id));
  }
  template <class F>
  void with_stored(F&& f) const {
    if (int8()) {
      f(std::int8_t{});
    } else {
      f(__nv_fp8_e4m3{});
    }
  }

  // Every tensor its own buffer in its type: stored bytes up to the global average pool, FP16
  // after it, FP32 logits; the input also in FP16 (set_input's, and an FP16 stem's). Scratch
  // for FP16 layers: their input, residual and output in FP16, as large as the largest tensor.
  void allocate_tensors() {
    const std::size_t count = m_definition.layers().size() + 1;
    m_tensors.resize(count);
    std::int64_t largest = elements(m_definition.input());
    m_tensors[std::size_t(m_definition.input().id)] = device_buffer<unsigned char>(std::size_t(largest) * stored_bytes());
    for (const layer_definition& l : m_definition.layers()) {
      std::size_t bytes_per = stored_bytes();
      if (l.kind == layer_kind::global_average_pool) bytes_per = sizeof(__half);
      if (l.kind == layer_kind::linear || l.kind == layer_kind::softmax) bytes_per = sizeof(float);
      if (l.kind == layer_kind::average_pool) {
        throw unsupported(name() + ": layer '" + l.name +
                          "': average pooling does not run quantized (max and global average pooling do)");
      }
      m_tensors[std::size_t(l.output.id)] = device_buffer<unsigned char>(std::size_t(elements(l.output)) * bytes_per);
      largest = std::max(largest, elements(l.output));
    }
    m_input_half = device_buffer<__half>(std::size_t(elements(m_definition.input())));
    for (auto* b : {&m_scratch_x, &m_scratch_z, &m_scratch_y}) *b = device_buffer<__half>(std::size_t(largest));
    // The unfused quantized path's sums (FP32 or INT32) of the largest output, and one
    // workspace of the limit's size: the layers run one after another and are bound to both
    // as they are built.
    m_accumulator = device_buffer<unsigned char>(std::size_t(largest) * 4);
    m_workspace = device_buffer<unsigned char>(m_options.workspace_limit);
    GPUCMP_CUDA_CHECK(cudaMemset(m_workspace.data(), 0, m_workspace.bytes()));
  }

  void fill_input(cudaStream_t stream) {
    fill_uniform(m_input_half.data(), m_input_half.size(), m_options.input_seed, -2, 2, stream);
  }

  // The step that makes the stored input from the FP16 one (the network's first step): the
  // stored input tensor, or a space-to-depth stem's image.
  void add_input_quantization(const space_to_depth_conv* s2d) {
    const tensor_ref in = m_definition.input();
    const float inverse = float(1.0 / tensor_scale(in));
    const std::int64_t n = elements(in);
    const __half* from = m_input_half.data();
    void* to = s2d ? m_input_s2d.data() : data(in);
    with_stored([&](auto zero) {
      using Stored = decltype(zero);
      if (s2d) {
        // space_to_depth_conv always makes 16 channels of at most 4 x 4 (one 16-byte vector a pixel).
        const detail::space_to_depth_dims d = detail::space_to_depth_dims_for(*s2d);
        m_steps.push_back([from, to, d, inverse](cudaStream_t s) {
          detail::quantize_space_to_depth_kernel<Stored><<<detail::grid_for(d.pixels), 256, 0, s>>>(
              from, static_cast<Stored*>(to), d, inverse);
          GPUCMP_CUDA_CHECK_LAST("quantize_space_to_depth_kernel");
        });
        return;
      }
      m_steps.push_back([from, to, n, inverse](cudaStream_t s) {
        detail::quantize_kernel<Stored><<<detail::conversion_grid(n), 256, 0, s>>>(from, static_cast<Stored*>(to), n, inverse);
        GPUCMP_CUDA_CHECK_LAST("quantize_kernel");
      });
    });
  }

  void build_layer(std::size_t i, cudaStream_t stream) {
    const layer_definition& l = m_definition.layers()[i];
    const std::size_t first_step = m_steps.size();
    layer_report r;
    r.name = l.name;
    r.kind = to_string(l.kind);
    r.shape = m_definition.shape(l.input).text() + " -> " + m_definition.shape(l.output).text();
    switch (l.kind) {
      case layer_kind::conv: build_conv(i, stream, r); break;
      case layer_kind::max_pool: {
        const image_shape& in = m_definition.shape(l.input);
        const pool_shape s{m_options.batch, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, conv_layout::nhwc};
        const void* x = data(l.input);
        void* y = data(l.output);
        with_stored([&](auto zero) {
          using Stored = decltype(zero);
          m_steps.push_back([s, x, y](cudaStream_t st) {
            pool_forward(pool_kind::max, s, static_cast<const Stored*>(x), static_cast<Stored*>(y), st);
          });
        });
        break;
      }
      case layer_kind::global_average_pool: {
        const image_shape& in = m_definition.shape(l.input);
        const std::int64_t n = m_options.batch, pixels = in.h * in.w, c = in.c;
        const float scale = float(tensor_scale(l.input));
        const void* x = data(l.input);
        __half* y = static_cast<__half*>(data(l.output));
        with_stored([&](auto zero) {
          using Stored = decltype(zero);
          m_steps.push_back([n, pixels, c, scale, x, y](cudaStream_t st) {
            detail::dequantize_average_kernel<Stored><<<detail::grid_for(n * c), 256, 0, st>>>(
                static_cast<const Stored*>(x), y, n, pixels, c, scale);
            GPUCMP_CUDA_CHECK_LAST("dequantize_average_kernel");
          });
        });
        break;
      }
      case layer_kind::linear: {
        const std::int64_t in = m_definition.shape(l.input).c;
        std::vector<__half> w(l.weight.size());
        for (std::size_t j = 0; j < w.size(); ++j) w[j] = __float2half(l.weight[j]);
        m_linear_weights.emplace_back(w.size());
        m_linear_weights.back().copy_from_host(w);
        m_linear_biases.emplace_back(l.bias.size());
        m_linear_biases.back().copy_from_host(l.bias);
        linear_tensors t{data(l.input), m_linear_weights.back().data(), m_linear_biases.back().data(),
                         static_cast<float*>(data(l.output))};
        m_linears.push_back(std::make_unique<linear_layer>(m_cublas.get(), m_options.batch, in, l.out_features, numerics::fp16, t,
                                                           m_linear_workspace.data(), m_linear_workspace.bytes()));
        linear_layer& layer = *m_linears.back();
        gpucmp::search(layer, shared_engine(), m_options.search);
        r.algorithm = layer.describe();
        r.searched_seconds = layer.searched_seconds();
        r.check = layer.verify(stream);
        m_steps.push_back([&layer](cudaStream_t s) { layer(s); });
        break;
      }
      case layer_kind::softmax: {
        const std::int64_t n = m_options.batch, cols = m_definition.shape(l.input).c;
        const float* x = static_cast<const float*>(data(l.input));
        float* y = static_cast<float*>(data(l.output));
        m_steps.push_back([n, cols, x, y](cudaStream_t st) { softmax_forward(n, cols, x, y, st); });
        break;
      }
      case layer_kind::average_pool: break;  // refused in allocate_tensors
    }
    // Run what was added, so the next layer searches and verifies on this layer's output.
    for (std::size_t s = first_step; s < m_steps.size(); ++s) m_steps[s](stream);
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (l.kind != layer_kind::conv && l.kind != layer_kind::linear) r.check = verify_simple_layer(l);
    require_passed(name() + " layer '" + l.name + "'", r.check);
    m_reports.push_back(std::move(r));
  }

  // A pooling or softmax layer's output, just made, against the host reference at every output:
  // the max pool exactly in the stored type; the global average pool (stored in, FP16 out) as
  // the mean of the dequantized inputs, within FP32 sums and one rounding to FP16.
  verification verify_simple_layer(const layer_definition& l) const {
    const image_shape& in = m_definition.shape(l.input);
    const std::int64_t n = m_options.batch;
    if (l.kind == layer_kind::softmax) return check_softmax(n, in.c, values_of(l.input), values_of(l.output));
    if (l.kind == layer_kind::global_average_pool) {
      return check_global_average_pool(n, in.h * in.w, in.c, values_of(l.input), values_of(l.output),
                                       conv_tolerance(numerics::fp16));
    }
    verification v;  // a max pool, exactly in the stored type
    with_stored([&](auto zero) {
      using Stored = decltype(zero);
      std::vector<Stored> x(std::size_t(elements(l.input))), y(std::size_t(elements(l.output)));
      GPUCMP_CUDA_CHECK(cudaMemcpy(x.data(), data(l.input), x.size() * sizeof(Stored), cudaMemcpyDeviceToHost));
      GPUCMP_CUDA_CHECK(cudaMemcpy(y.data(), data(l.output), y.size() * sizeof(Stored), cudaMemcpyDeviceToHost));
      const pool_shape s{n, in.c, in.h, in.w, l.pool_kernel, l.pool_stride, l.pool_pad, conv_layout::nhwc};
      v = check_pool(pool_kind::max, s, x, y, conv_tolerance(m_plan.format()));
    });
    return v;
  }

  // Tensor `t` on the host as FP32 (activation_values), in the type its producer stores.
  std::vector<float> values_of(tensor_ref t) const {
    const std::size_t count = std::size_t(elements(t));
    std::vector<float> values(count);
    const auto copy = [&](auto zero, const void* from, double scale) {
      using T = decltype(zero);
      std::vector<T> raw(count);
      GPUCMP_CUDA_CHECK(cudaMemcpy(static_cast<void*>(raw.data()), from, count * sizeof(T), cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < count; ++i) values[i] = float(to_double(raw[i]) * scale);
    };
    if (t.id == m_definition.input().id) {
      copy(__half{}, m_input_half.data(), 1.0);
      return values;
    }
    for (const layer_definition& l : m_definition.layers()) {
      if (l.output.id != t.id) continue;
      if (l.kind == layer_kind::global_average_pool) {
        copy(__half{}, data(t), 1.0);
      } else if (l.kind == layer_kind::linear || l.kind == layer_kind::softmax) {
        GPUCMP_CUDA_CHECK(cudaMemcpy(values.data(), data(t), count * sizeof(float), cudaMemcpyDeviceToHost));
      } else {
        with_stored([&](auto zero) { copy(zero, data(t), tensor_scale(t)); });
      }
      return values;
    }
    throw invalid_argument(name() + ": no tensor " + std::to_string(t.id));
  }

  // Both ways searched (the quantized one where cuDNN runs it), the faster kept; its steps added.
  void build_conv(std::size_t i, cudaStream_t stream, layer_report& r) {
    const layer_definition& l = m_definition.layers()[i];
    const quantized_layer& q = m_plan.layer(l.name);
    const conv_epilogue e{l.residual.valid(), l.conv.relu};
    const bool first = l.input.id == m_definition.input().id;
    m_convs.push_back(std::make_unique<conv_state>());
    conv_state& c = *m_convs.back();
    c.bias = device_buffer<float>(l.bias.size());
    c.bias.copy_from_host(l.bias);
    c.dequantize = device_buffer<float>(q.dequantize.size());
    c.dequantize.copy_from_host(q.dequantize);
    c.residual_scale = device_buffer<float>(1);
    c.residual_scale.copy_from_host(std::vector<float>{float(q.residual_scale)});
    c.output_scale = device_buffer<float>(1);
    c.output_scale.copy_from_host(std::vector<float>{float(1.0 / q.output_scale)});
    const conv_problem shape = conv_problem_for(m_definition, l, m_options.batch, m_plan.format(), conv_layout::nhwc);
    // The matmul path's pre-multiplied scales, for the layers it runs (1x1 INT8).
    const bool matmul = matmul_conv_refusal(shape).empty();
    if (matmul) {
      std::vector<float> alpha(q.dequantize.size()), bias(l.bias.size());
      for (std::size_t k = 0; k < alpha.size(); ++k) alpha[k] = float(q.dequantize[k] / q.output_scale);
      for (std::size_t k = 0; k < bias.size(); ++k) bias[k] = float(l.bias[k] / q.output_scale);
      c.matmul_alpha = device_buffer<float>(alpha.size());
      c.matmul_alpha.copy_from_host(alpha);
      c.matmul_bias = device_buffer<float>(bias.size());
      c.matmul_bias.copy_from_host(bias);
    }
    // A stem over few channels runs quantized on its input's space-to-depth image.
    std::optional<space_to_depth_conv> s2d;
    if (first && m_options.space_to_depth_stem && space_to_depth_conv::refusal(shape).empty()) {
      s2d.emplace(shape);
      m_input_s2d = device_buffer<unsigned char>(std::size_t(s2d->transformed.x_elements()) * stored_bytes());
    }
    std::vector<std::uint8_t> wq = m_plan.quantized_weights(l.name);
    if (s2d) wq = s2d->transform_filters(wq);
    c.weight_q = device_buffer<unsigned char>(wq.size());
    GPUCMP_CUDA_CHECK(cudaMemcpy(c.weight_q.data(), wq.data(), wq.size(), cudaMemcpyHostToDevice));
    // The stored input, for a quantized stem (an FP16 stem reads the FP16 input).
    if (first) add_input_quantization(s2d ? &*s2d : nullptr);
    // The quantized layer.
    const conv_problem& quantized_shape = s2d ? s2d->transformed : shape;
    shape_search& seen = m_shape_searches[conv_layer_name(quantized_shape, e)];
    std::string why_not;
    double quantized_seconds = INFINITY;
    try {
      if (!seen.quantized) {
        if (!seen.why_none.empty()) throw unsupported(seen.why_none);
        seen.quantized = std::make_shared<const quantized_conv_candidates>(
            quantized_conv_libraries{m_cudnn.get(), m_cublas.get()}, quantized_shape, e, m_options.candidates_per_path,
            m_options.workspace_limit);
      }
      quantized_conv_tensors t;
      t.x = s2d ? static_cast<const void*>(m_input_s2d.data()) : data(l.input);
      t.w = c.weight_q.data();
      t.bias = c.bias.data();
      t.residual = e.residual ? data(l.residual) : nullptr;
      t.y = data(l.output);
      t.dequantize = c.dequantize.data();
      t.residual_scale = c.residual_scale.data();
      t.output_scale = c.output_scale.data();
      t.accumulator = m_accumulator.data();
      if (matmul) {
        t.matmul_alpha = c.matmul_alpha.data();
        t.matmul_bias = c.matmul_bias.data();
        t.matmul_beta = float(q.residual_scale / q.output_scale);
      }
      if (first) m_steps.back()(stream);  // the stored input the search reads
      c.quantized = std::make_unique<quantized_conv>(seen.quantized, t, m_workspace.data(), m_workspace.bytes());
      quantized_seconds = choose(*c.quantized, seen.quantized_verdict);
    } catch (const unsupported& u) {
      why_not = u.what();
      if (!seen.quantized) seen.why_none = why_not;  // no set for this shape: the next layer of it is told so at once
      c.quantized.reset();
    }
    // FP16, where it must or may compete.
    double half_seconds = INFINITY;
    if (!c.quantized || m_options.choose_by_time) {
      conv_problem p16 = shape;
      p16.dtype = numerics::fp16;
      const std::vector<float> krsc = kcrs_to_krsc(l.weight, p16.k, p16.c, p16.r, p16.s);
      std::vector<__half> w16(krsc.size()), b16(l.bias.size());
      for (std::size_t j = 0; j < krsc.size(); ++j) w16[j] = __float2half(krsc[j]);
      for (std::size_t j = 0; j < b16.size(); ++j) b16[j] = __float2half(l.bias[j]);
      c.weight_half = device_buffer<unsigned char>(w16.size() * sizeof(__half));
      GPUCMP_CUDA_CHECK(cudaMemcpy(c.weight_half.data(), w16.data(), c.weight_half.bytes(), cudaMemcpyHostToDevice));
      c.bias_half = device_buffer<unsigned char>(b16.size() * sizeof(__half));
      GPUCMP_CUDA_CHECK(cudaMemcpy(c.bias_half.data(), b16.data(), c.bias_half.bytes(), cudaMemcpyHostToDevice));
      if (!seen.half) {
        seen.half = std::make_shared<const fused_conv_candidates>(m_cudnn.get(), p16, e, m_options.candidates_per_path,
                                                                  m_options.workspace_limit);
      }
      // Its FP16 inputs: the FP16 image for the stem, else the stored input dequantized.
      for (const std::function<void(cudaStream_t)>& step : dequantize_steps(l, first)) step(stream);
      const fused_conv_tensors t{first ? static_cast<const void*>(m_input_half.data()) : m_scratch_x.data(), c.weight_half.data(),
                                 c.bias_half.data(), e.residual ? m_scratch_z.data() : nullptr, m_scratch_y.data()};
      c.half = std::make_unique<fused_conv>(seen.half, t, m_workspace.data(), m_workspace.bytes());
      half_seconds = choose(*c.half, seen.half_verdict);
    }
    // Each way's cost is all it adds to the pass: FP16 also dequantizes its inputs and
    // quantizes its output (as much memory traffic as a stage-1 layer's convolution: the
    // first H200 run, which compared the convolutions alone, ran 14 of 53 layers in FP16 and
    // the network at 0.67x FP16's speed), and a quantized stem also quantizes the input.
    double conversion_seconds = 0, input_seconds = 0;
    if (c.quantized && m_options.choose_by_time && half_seconds < quantized_seconds) {
      std::vector<std::function<void(cudaStream_t)>> around = dequantize_steps(l, first);
      around.push_back(quantize_step(l.output, q.output_scale));
      conversion_seconds = time_steps(around);
      if (first) input_seconds = time_steps({m_steps.back()});
    }
    const bool quantized =
        c.quantized && !(m_options.choose_by_time && half_seconds + conversion_seconds < quantized_seconds + input_seconds);
    if (quantized) {
      c.half.reset();
      conv_state* state = &c;
      m_steps.push_back([state](cudaStream_t s) { (*state->quantized)(s); });
      r.algorithm = (s2d ? "on its space-to-depth image, as " + s2d->transformed.shape_name() + ": " : std::string()) +
                    c.quantized->algorithm().describe();
      r.searched_seconds = c.quantized->algorithm().conv.searched_seconds;
      r.check = c.quantized->verify(stream);
    } else {
      char why[160];
      if (c.quantized) {
        std::snprintf(why, sizeof why, "FP16 faster: %.1f + %.1f converting against %.1f + %.1f us", half_seconds * 1e6,
                      conversion_seconds * 1e6, quantized_seconds * 1e6, input_seconds * 1e6);
      } else {
        std::snprintf(why, sizeof why, "%s", ("no quantized plan: " + why_not).substr(0, 150).c_str());
      }
      m_plan.fall_back(l.name, why);
      c.quantized.reset();
      if (first) m_steps.pop_back();  // an FP16 stem reads the FP16 input: no stored input needed
      for (std::function<void(cudaStream_t)>& step : dequantize_steps(l, first)) m_steps.push_back(std::move(step));
      conv_state* state = &c;
      m_steps.push_back([state](cudaStream_t s) { (*state->half)(s); });
      r.algorithm = "fp16 " + c.half->algorithm().describe();
      r.searched_seconds = c.half->algorithm().conv.searched_seconds;
      r.check = c.half->verify(stream);
      m_steps.push_back(quantize_step(l.output, q.output_scale));
    }
    const conv_problem p = conv_problem_for(m_definition, l, m_options.batch, m_plan.layer(l.name).precision, conv_layout::nhwc);
    r.shape = conv_layer_name(p, e);
    r.flops = p.flops();
  }

  // After the build: each convolution its own zeroed workspace of what its choice needs, in
  // place of the one the search shared (network.cuh's reason: engines 39 and 41 keep state in
  // their workspace between calls, and a later layer's cuDNN or cuBLASLt call would overwrite
  // it), and the search's workspace freed.
  void give_layers_private_workspaces(cudaStream_t stream) {
    std::vector<std::size_t> needs;
    for (const std::unique_ptr<conv_state>& c : m_convs) {
      needs.push_back(c->quantized ? c->quantized->workspace_needed() : c->half->workspace_needed());
    }
    m_layer_workspaces = carve_private_workspaces(needs, 0, stream);
    for (std::size_t j = 0; j < m_convs.size(); ++j) {
      conv_state& c = *m_convs[j];
      if (c.quantized) {
        c.quantized->rebind_workspace(m_layer_workspaces.at[j], needs[j]);
      } else {
        c.half->rebind_workspace(m_layer_workspaces.at[j], needs[j]);
      }
    }
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    m_workspace = device_buffer<unsigned char>();
  }

  // Runs the verdict an earlier layer of this shape's search gave, where `layer` can run it,
  // else searches and keeps its verdict for the next; returns the chosen candidate's time.
  template <class Layer>
  double choose(Layer& layer, search_verdict& verdict) {
    if (verdict && layer.can_run(verdict->first)) {
      layer.use(verdict->first, verdict->second);
      return verdict->second;
    }
    const double seconds = gpucmp::search(layer, shared_engine(), m_options.search).seconds;
    verdict = std::make_pair(layer.chosen_index(), seconds);
    return seconds;
  }

  // Median seconds of `steps` run back to back, timed as a search times a candidate.
  double time_steps(const std::vector<std::function<void(cudaStream_t)>>& steps) const {
    GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    candidate_timer timer(shared_engine(), m_options.search);
    return timer.time(0, [&](cudaStream_t s) {
      for (const std::function<void(cudaStream_t)>& step : steps) step(s);
    });
  }

  // An FP16 layer's inputs from the stored tensors: x (not for the stem) and z into scratch.
  std::vector<std::function<void(cudaStream_t)>> dequantize_steps(const layer_definition& l, bool first) const {
    std::vector<std::function<void(cudaStream_t)>> steps;
    auto add = [&](tensor_ref t, __half* to) {
      const std::int64_t n = elements(t);
      const float scale = float(tensor_scale(t));
      const void* from = data(t);
      with_stored([&](auto zero) {
        using Stored = decltype(zero);
        steps.push_back([from, to, n, scale](cudaStream_t s) {
          detail::dequantize_kernel<Stored>
              <<<detail::conversion_grid(n), 256, 0, s>>>(static_cast<const Stored*>(from), to, n, scale);
          GPUCMP_CUDA_CHECK_LAST("dequantize_kernel");
        });
      });
    };
    if (!first) add(l.input, const_cast<__half*>(m_scratch_x.data()));
    if (l.residual.valid()) add(l.residual, const_cast<__half*>(m_scratch_z.data()));
    return steps;
  }

  // An FP16 layer's output (in scratch) quantized into its stored tensor.
  std::function<void(cudaStream_t)> quantize_step(tensor_ref out, double scale) const {
    const std::int64_t n = elements(out);
    const float inverse = float(1.0 / scale);
    const __half* from = m_scratch_y.data();
    void* to = data(out);
    std::function<void(cudaStream_t)> step;
    with_stored([&](auto zero) {
      using Stored = decltype(zero);
      step = [from, to, n, inverse](cudaStream_t s) {
        detail::quantize_kernel<Stored><<<detail::conversion_grid(n), 256, 0, s>>>(from, static_cast<Stored*>(to), n, inverse);
        GPUCMP_CUDA_CHECK_LAST("quantize_kernel");
      };
    });
    return step;
  }

  const network_definition& m_definition;
  quantization_plan m_plan;
  quantized_network_options m_options;
  cudnn_handle_t m_cudnn;
  lt_handle_t m_cublas;
  std::vector<device_buffer<unsigned char>> m_tensors;  // by tensor id
  device_buffer<__half> m_input_half, m_scratch_x, m_scratch_z, m_scratch_y;
  device_buffer<unsigned char> m_input_s2d;  // a space-to-depth stem's stored input
  device_buffer<unsigned char> m_workspace, m_accumulator, m_linear_workspace;
  private_workspaces m_layer_workspaces;  // each convolution's own, after the build
  std::vector<std::unique_ptr<conv_state>> m_convs;
  std::map<std::string, shape_search> m_shape_searches;  // by conv_layer_name, during the build
  std::vector<device_buffer<__half>> m_linear_weights;
  std::vector<device_buffer<float>> m_linear_biases;
  std::vector<std::unique_ptr<linear_layer>> m_linears;
  std::vector<std::function<void(cudaStream_t)>> m_steps;
  std::vector<std::size_t> m_layer_steps;  // layer i's steps are [m_layer_steps[i], m_layer_steps[i + 1])
  std::vector<layer_report> m_reports;
};

}  // namespace gpucmp
