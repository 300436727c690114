// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A training step of a Llama-style decoder on the GPU: forward, backward and AdamW in BF16
// mixed precision (FP32 master weights, gradients and moments; the passes read a BF16 copy
// that AdamW writes), of some blocks alone (hidden states in, a fixed gradient of their
// output back: the issue's "one decoder layer") or of the whole model (embedding to the mean
// cross-entropy of next-token labels), as models/decoder_training_work.hpp counts it and
// models/decoder_training_memory.hpp sizes it. What it runs:
//   - the linear layers through cuBLASLt (its heuristic's first algorithm for each product):
//     y = x W^T with the residual add in the epilogue, dx = dy W, and dW = dy^T x written in
//     FP32 straight into the gradient buffer;
//   - attention through the cuDNN SDPA operation (ops/attention.cuh), searched and verified
//     once on its own tensors, then run forward with its softmax statistics and backward on
//     the step's; RMSNorm (ops/rmsnorm.cuh, keeping 1/rms), RoPE and SwiGLU (forward and
//     backward) on gpucmp's operations' kernels; the rest in training/decoder_training_kernels.cuh;
//   - Q, K and V from one fused QKV product, split for attention and their gradients merged
//     back for one data-gradient and one weight-gradient product.
// With activation checkpointing only each block's input is kept; the backward pass runs each
// block forward again (all but its last product, whose output the backward does not read)
// into one block's activations. step() replays the whole step as one CUDA graph. Checked
// against training/decoder_reference.hpp (FP64) by the GPU tests.
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/detail/unique_handle.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/io/safetensors_writer.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/models/decoder_kernels.cuh>
#include <gpucmp/models/decoder_training_memory.hpp>
#include <gpucmp/models/decoder_training_work.hpp>
#include <gpucmp/models/decoder_weights.hpp>
#include <gpucmp/ops/attention.cuh>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/rmsnorm.cuh>
#include <gpucmp/ops/rope.cuh>
#include <gpucmp/ops/swiglu.cuh>
#include <gpucmp/training/adamw.hpp>
#include <gpucmp/training/decoder_parameter_layout.hpp>
#include <gpucmp/training/decoder_training_kernels.cuh>
#include <gpucmp/training/linear_gradients.cuh>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpucmp {

/// How a decoder training step runs, beyond what it trains (decoder_training_options).
struct decoder_trainer_options {
  adamw_options adamw;                                 ///< the optimizer's settings
  std::uint64_t seed = 1;                              ///< the random weights', inputs' and labels'
  bool graphs = true;                                  ///< step() replays one captured CUDA graph (not on the legacy stream)
  algorithm_choice choice = algorithm_choice::search;  ///< how attention's backward plan is chosen
};

/// One decoder's training step on `batch` sequences of `sequence` tokens (file comment).
class decoder_trainer {
 public:
  using element = __nv_bfloat16;  ///< the activations' and the weights' copy's type

  /// Validates the model, shape and options (invalid_argument; unsupported for head_dim or
  /// hidden sizes that are not whole 16-byte rows), checks the step fits in free memory
  /// (out_of_memory with the bytes needed and free), allocates everything once, fills the
  /// master weights as the inference decoder does (linear layers uniform in +-1/sqrt(fan-in),
  /// norms in [0.5, 1.5), the embedding in [-1, 1)) and, for the whole model, random tokens
  /// with their next token as labels (the last one -100); for blocks, a random input and
  /// output gradient in [-1, 1). Attention's backward is searched and verified here.
  decoder_trainer(const decoder_config& model, std::int64_t batch, std::int64_t sequence,
                  const decoder_training_options& training = {}, const decoder_trainer_options& options = {},
                  cudaStream_t stream = nullptr)
      : m_model(model), m_batch(batch), m_sequence(sequence), m_tokens(batch * sequence), m_training(training), m_options(options),
        m_work(plan_decoder_training_work(model, batch, sequence, training)),
        m_layout(plan_decoder_parameters(model, training)) {
    options.adamw.validate();
    if (model.head_dim % 8 != 0 || model.hidden_size % 8 != 0) {
      throw unsupported("decoder training " + model.name + ": head_dim and hidden_size must be multiples of 8 (16-byte rows)");
    }
    if (m_tokens > 2147483647 / 2) throw invalid_argument("decoder training: batch x sequence is too large");
    m_attention_problem = attention_problem_of();
    const double needed = plan_decoder_training_memory(model, batch, sequence, training).total() +
                          attention::bytes_needed(m_attention_problem);
    std::size_t free_bytes = 0, total_bytes = 0;
    GPUCMP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (needed > double(free_bytes)) throw out_of_memory(std::size_t(needed), free_bytes, total_bytes, name());
    allocate(stream);
    fill(stream);
    build(stream);
  }

  /// "decoder_train/llama-3.2-1b/whole_model/b8_s4096" ("/checkpointing" appended with it).
  std::string name() const {
    std::string s = "decoder_train/" + m_model.name + "/" + to_string(m_training.scope);
    if (m_training.scope == decoder_training_scope::blocks) s += std::to_string(m_training.blocks);
    s += "/b" + std::to_string(m_batch) + "_s" + std::to_string(m_sequence);
    return m_training.checkpointing ? s + "/checkpointing" : s;
  }

  /// Replaces the whole model's tokens and labels (batch x sequence each, row-major; a label
  /// -100 has no loss). Throws invalid_argument for blocks, a count that does not match, an
  /// id or label outside the vocabulary, or no label at all.
  void set_tokens(const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& labels, cudaStream_t stream = nullptr) {
    if (!whole()) throw invalid_argument(name() + ": tokens are the whole model's input");
    if (std::int64_t(tokens.size()) != m_tokens || std::int64_t(labels.size()) != m_tokens) {
      throw invalid_argument(name() + ": " + std::to_string(tokens.size()) + " tokens and " + std::to_string(labels.size()) +
                             " labels for " + std::to_string(m_tokens) + " positions");
    }
    bool labelled = false;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] >= m_model.vocab_size) {
        throw invalid_argument(name() + ": token " + std::to_string(i) + " is id " + std::to_string(tokens[i]) +
                               ", outside the vocabulary of " + std::to_string(m_model.vocab_size));
      }
      if (labels[i] != -100 && (labels[i] < 0 || labels[i] >= m_model.vocab_size)) {
        throw invalid_argument(name() + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) +
                               ", outside the vocabulary of " + std::to_string(m_model.vocab_size) + " (-100: none)");
      }
      labelled = labelled || labels[i] != -100;
    }
    if (!labelled) throw invalid_argument(name() + ": no token has a label");
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_token_ids.data(), tokens.data(), tokens.size() * 4, cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_labels.data(), labels.data(), labels.size() * 4, cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors may go
  }

  /// Replaces the master weights and their BF16 copy with `checkpoint`'s (F32, F16 or BF16
  /// values), after checking it holds exactly what the model needs (weight_error naming the
  /// file and the tensor), and starts AdamW afresh (zero moments, step 0). Blocks alone take
  /// the checkpoint's first blocks.
  void load(const decoder_checkpoint& checkpoint, cudaStream_t stream = nullptr) {
    checkpoint.validate(m_model);
    for (const decoder_checkpoint_slice& s : decoder_checkpoint_slices(m_model, m_training)) {
      const std::vector<float> values = checkpoint.read_float(s.checkpoint_name, checkpoint_shape(s));
      float* to = m_master.data() + m_layout.at(s.tensor).offset + s.first_row * s.cols;
      GPUCMP_CUDA_CHECK(cudaMemcpyAsync(to, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // `values` goes at the end of this iteration
    }
    round_copy(m_master.data(), copy_at(0), m_layout.total, stream);
    for (device_buffer<float>* zeroed : {&m_first_moment, &m_second_moment}) {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(zeroed->data(), 0, zeroed->bytes(), stream));
    }
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_step.data(), 0, m_step.bytes(), stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  /// The master weights or the gradients of every checkpoint tensor the step trains, under
  /// Hugging Face's names and shapes (decoder_checkpoint_slices()), for safetensors: how a
  /// step is compared with PyTorch's (synchronizes the device).
  std::vector<named_tensor> checkpoint_tensors(bool gradients) const {
    std::vector<float> flat(std::size_t(m_layout.total));
    copy_out(flat.data(), gradients ? m_gradients.data() : m_master.data(), flat.size() * sizeof(float));
    std::vector<named_tensor> out;
    for (const decoder_checkpoint_slice& s : decoder_checkpoint_slices(m_model, m_training)) {
      const std::size_t first = std::size_t(m_layout.at(s.tensor).offset + s.first_row * s.cols);
      out.push_back({s.checkpoint_name, checkpoint_shape(s),
                     std::vector<float>(flat.begin() + std::ptrdiff_t(first), flat.begin() + std::ptrdiff_t(first + s.elements()))});
    }
    return out;
  }

  /// Enqueues the forward and backward passes: the loss (whole model) and every gradient.
  void forward_backward(cudaStream_t stream) {
    forward(stream);
    backward(stream);
  }

  /// Enqueues one training step: forward_backward() and AdamW, which writes the master
  /// weights, the moments and the BF16 copy the next step reads. With graphs (and a stream
  /// other than the legacy one), the first step is captured and every step replays it.
  void step(cudaStream_t stream) {
    if (!m_options.graphs || stream == nullptr) {
      run_step(stream);
      return;
    }
    if (!m_replay) {
      m_captured.emplace(capture_graph(stream, [&](cudaStream_t s) { run_step(s); }));
      m_replay.emplace(m_captured->get());
    }
    m_replay->launch(stream);
  }

  /// The whole model's last loss (synchronizes `stream`); throws invalid_argument for blocks.
  float loss(cudaStream_t stream = nullptr) const {
    if (!whole()) throw invalid_argument(name() + ": blocks alone have no loss");
    float value = 0;
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(&value, m_loss.data(), sizeof value, cudaMemcpyDeviceToHost, stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    return value;
  }

  /// A tensor's FP32 master weights, its BF16 copy (as floats) or its gradient, downloaded
  /// (synchronizes the device). Throws invalid_argument for an unknown name.
  std::vector<float> master(const std::string& tensor) const { return download(m_master.data(), m_layout.at(tensor)); }
  std::vector<float> weights(const std::string& tensor) const {
    const decoder_parameter& p = m_layout.at(tensor);
    std::vector<element> raw(std::size_t(p.elements()));
    copy_out(raw.data(), reinterpret_cast<const element*>(m_copy.data()) + p.offset, raw.size() * sizeof(element));
    std::vector<float> out(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) out[i] = __bfloat162float(raw[i]);
    return out;
  }
  std::vector<float> gradient(const std::string& tensor) const { return download(m_gradients.data(), m_layout.at(tensor)); }
  /// Blocks: the input hidden states and the output's gradient, tokens x hidden, as floats.
  std::vector<float> block_input() const { return download_rows(m_inputs.front().data()); }
  std::vector<float> output_gradient() const {
    if (whole()) throw invalid_argument(name() + ": the whole model's gradient comes from its loss");
    return download_rows(m_output_gradient.data());
  }

  const decoder_config& model() const noexcept { return m_model; }                  ///< what it trains
  const decoder_parameter_layout& parameters() const noexcept { return m_layout; }  ///< where each tensor lives
  const decoder_training_work& work() const noexcept { return m_work; }             ///< a step's FLOPs
  const decoder_training_options& training() const noexcept { return m_training; }  ///< what a step trains
  std::int64_t batch() const noexcept { return m_batch; }
  std::int64_t sequence() const noexcept { return m_sequence; }
  /// Device bytes it holds: its buffers, attention's own tensors and the workspaces.
  double allocated_bytes() const { return m_allocated + attention::bytes_needed(m_attention_problem); }
  const gpucmp::attention& attention_operation() const { return *m_attend; }  ///< the searched SDPA backward

 private:
  using lt_handle = detail::unique_handle<cublasLtHandle_t, cublasLtDestroy>;
  using bytes = device_buffer<std::uint8_t>;

  // A linear layer's three products on `rows` tokens, `in` -> `out` (linear_gradients.cuh's
  // column-major views): forward D (out x N) = W^T-view x X, data D (in x N) = W dY, weight
  // D (in x out) = X dY^T in FP32.
  struct linear_products {
    detail::lt_product forward, data, weight;
  };

  // What one block's forward pass keeps (its input lives in m_inputs).
  struct block_activations {
    bytes n1, q, k, v, attended, h1, n2, gate_up, act;
    device_buffer<float> inv_rms1, inv_rms2, stats;
    std::optional<attention_binding> backward;  // attention's backward on these tensors
  };

  // Hugging Face's shape of a slice: a norm's weight is a vector.
  static std::vector<std::int64_t> checkpoint_shape(const decoder_checkpoint_slice& s) {
    return s.rows == 1 ? std::vector<std::int64_t>{s.cols} : std::vector<std::int64_t>{s.rows, s.cols};
  }

  bool whole() const noexcept { return m_training.scope == decoder_training_scope::whole_model; }
  std::int64_t blocks() const noexcept { return m_training.blocks_of(m_model); }
  std::int64_t q_width() const noexcept { return m_model.heads * m_model.head_dim; }
  std::int64_t kv_width() const noexcept { return m_model.kv_heads * m_model.head_dim; }
  std::int64_t qkv_width() const noexcept { return q_width() + 2 * kv_width(); }

  attention_problem attention_problem_of() const {
    attention_problem a;
    a.batch = m_batch;
    a.q_heads = m_model.heads;
    a.kv_heads = m_model.kv_heads;
    a.head_dim = m_model.head_dim;
    a.seq_q = a.seq_kv = m_sequence;
    a.dtype = numerics::bf16;
    a.mask = attention_mask::causal;
    a.pass = attention_pass::backward;
    return a;
  }

  bytes rows(std::int64_t count, std::int64_t width) {
    m_allocated += double(count * width) * sizeof(element);
    return bytes(std::size_t(count * width) * sizeof(element), initial_fill::poison());
  }
  template <class V>
  device_buffer<V> values(std::int64_t count) {
    m_allocated += double(count) * sizeof(V);
    return device_buffer<V>(std::size_t(count), initial_fill::poison());
  }

  void allocate(cudaStream_t stream) {
    const std::int64_t t = m_tokens, h = m_model.hidden_size, m = m_model.intermediate_size, n = m_layout.total;
    m_master = values<float>(n);
    m_gradients = values<float>(n);
    m_first_moment = values<float>(n);
    m_second_moment = values<float>(n);
    m_copy = rows(1, n);
    m_step = values<std::int64_t>(1);
    for (device_buffer<float>* zeroed : {&m_gradients, &m_first_moment, &m_second_moment}) {
      GPUCMP_CUDA_CHECK(cudaMemsetAsync(zeroed->data(), 0, zeroed->bytes(), stream));  // the gaps stay 0
    }
    GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_step.data(), 0, m_step.bytes(), stream));
    for (std::int64_t l = 0; l <= blocks(); ++l) m_inputs.push_back(rows(t, h));  // each block's input, then the last output
    const std::int64_t sets = m_training.checkpointing ? 1 : blocks();
    for (std::int64_t l = 0; l < sets; ++l) {
      block_activations a;
      a.n1 = rows(t, h);
      a.q = rows(t, q_width());
      a.k = rows(t, kv_width());
      a.v = rows(t, kv_width());
      a.attended = rows(t, q_width());
      a.h1 = rows(t, h);
      a.n2 = rows(t, h);
      a.gate_up = rows(t, 2 * m);
      a.act = rows(t, m);
      a.inv_rms1 = values<float>(t);
      a.inv_rms2 = values<float>(t);
      a.stats = values<float>(m_batch * m_model.heads * m_sequence);
      m_activations.push_back(std::move(a));
    }
    m_qkv_rows = rows(t, qkv_width());
    m_d_qkv_rows = rows(t, qkv_width());
    m_dq = rows(t, q_width());
    m_dk = rows(t, kv_width());
    m_dv = rows(t, kv_width());
    m_d_attended = rows(t, q_width());
    m_d_act = rows(t, m);
    m_d_gate_up = rows(t, 2 * m);
    m_d_normed = rows(t, h);
    m_dh1 = rows(t, h);
    m_d_residual = rows(t, h);
    m_partials = values<float>(decoder_rmsnorm_partials(t) * h);
    m_positions = values<std::int32_t>(t);
    m_workspace_bytes = std::size_t(32) << 20;
    m_workspace = rows(1, std::int64_t(m_workspace_bytes / sizeof(element)));
    if (whole()) {
      m_token_ids = values<std::int32_t>(t);
      m_labels = values<std::int32_t>(t);
      m_final_normed = rows(t, h);
      m_final_inv_rms = values<float>(t);
      m_logits = rows(t, m_model.vocab_size);
      m_label_count = values<float>(1);
      m_row_loss = values<double>(t);
      m_loss = values<float>(1);
    } else {
      m_output_gradient = rows(t, h);
    }
  }

  // The seeded weights, the BF16 copy, positions and RoPE's table, and the inputs.
  void fill(cudaStream_t stream) {
    std::uint64_t k = 0;
    for (const decoder_parameter& p : m_layout.tensors) {
      const bool norm = p.rows == 1, embedding = p.name == "embedding";
      const double bound = embedding ? 1.0 : 1 / std::sqrt(double(p.cols));
      fill_uniform(m_master.data() + p.offset, std::size_t(p.elements()), m_options.seed * 1000 + k++, norm ? 0.5 : -bound,
                   norm ? 1.5 : bound, stream);
    }
    // The gaps between tensors: zero, so AdamW leaves them so.
    std::int64_t end = 0;
    for (const decoder_parameter& p : m_layout.tensors) {
      if (p.offset > end) GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_master.data() + end, 0, std::size_t(p.offset - end) * 4, stream));
      end = p.offset + p.elements();
    }
    if (m_layout.total > end) GPUCMP_CUDA_CHECK(cudaMemsetAsync(m_master.data() + end, 0, std::size_t(m_layout.total - end) * 4, stream));
    round_copy(m_master.data(), copy_at(0), m_layout.total, stream);
    std::vector<std::int32_t> positions(static_cast<std::size_t>(m_tokens));
    for (std::int64_t i = 0; i < m_tokens; ++i) positions[std::size_t(i)] = std::int32_t(i % m_sequence);
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_positions.data(), positions.data(), positions.size() * 4, cudaMemcpyHostToDevice, stream));
    rope_problem rows = decoder_rope(m_model, 1, numerics::bf16, m_sequence);
    const std::vector<float2> table = rope_table(rows);
    rows.backward = true;  // the same kernels rotate back with the sine negated
    const std::vector<float2> back = rope_table(rows);
    m_rope_table = values<float>(std::int64_t(2 * table.size()));
    m_rope_backward_table = values<float>(std::int64_t(2 * back.size()));
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_rope_table.data(), table.data(), m_rope_table.bytes(), cudaMemcpyHostToDevice, stream));
    GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_rope_backward_table.data(), back.data(), m_rope_backward_table.bytes(), cudaMemcpyHostToDevice,
                                      stream));
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors go at the end of this scope
    if (whole()) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(m_tokens)), labels(static_cast<std::size_t>(m_tokens));
      for (std::int64_t i = 0; i < m_tokens; ++i) {
        tokens[std::size_t(i)] = std::int32_t(random_bits(m_options.seed * 7 + 3, std::uint64_t(i)) % std::uint64_t(m_model.vocab_size));
      }
      for (std::int64_t i = 0; i < m_tokens; ++i) {
        const bool last = (i + 1) % m_sequence == 0;  // no next token in its sequence
        labels[std::size_t(i)] = last ? -100 : tokens[std::size_t(i + 1)];
      }
      if (m_sequence == 1) labels[0] = tokens[0];  // one-token sequences: something to learn
      set_tokens(tokens, labels, stream);
    } else {
      fill_uniform(as(m_inputs.front()), std::size_t(m_tokens * m_model.hidden_size), m_options.seed * 7 + 1, -1, 1, stream);
      fill_uniform(as(m_output_gradient), std::size_t(m_tokens * m_model.hidden_size), m_options.seed * 7 + 2, -1, 1, stream);
      GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
  }

  // The products, attention (searched and verified), and the kernels' problems.
  void build(cudaStream_t stream) {
    cublasLtHandle_t raw = nullptr;
    GPUCMP_CUBLAS_CHECK(cublasLtCreate(&raw));
    m_cublas = lt_handle(raw);
    const std::int64_t h = m_model.hidden_size, m = m_model.intermediate_size;
    m_qkv = products(h, qkv_width(), "qkv");
    m_o = products(q_width(), h, "o");
    m_gate_up = products(h, 2 * m, "gate_up");
    m_down = products(m, h, "down");
    if (whole()) m_head = products(h, m_model.vocab_size, "lm_head");
    attention_options settings;
    settings.choice = m_options.choice;
    // cuDNN's backward plans accumulate dQ in FP32 in their workspace (twice its size for the
    // engines seen): at 8 x 4,096 tokens of 32 heads of 128 that is over the 1 GiB default.
    const double dq_fp32 = 4.0 * double(m_tokens) * double(q_width());
    settings.workspace_limit = std::max(settings.workspace_limit, std::size_t(4 * dq_fp32));
    m_attend.emplace(m_attention_problem, settings, stream);
    prepare_verified(*m_attend);
    for (block_activations& a : m_activations) {
      attention_tensors t{a.q.data(), a.k.data(), a.v.data(), a.attended.data(), m_d_attended.data(), a.stats.data(),
                          m_dq.data(), m_dk.data(), m_dv.data()};
      a.backward.emplace(m_attend->bind(t));
    }
    m_norm = rmsnorm_problem{m_tokens, h, numerics::bf16, m_model.norm_eps, false};
    m_norm_shape = rmsnorm_shapes(m_norm).at(0);
    m_rope = decoder_rope(m_model, m_tokens, numerics::bf16, m_sequence);
    m_rope_shape = rope_shapes(m_rope).at(0);
    m_rope_backward = m_rope;
    m_rope_backward.backward = true;
    m_rope_backward_shape = rope_shapes(m_rope_backward).at(0);
    m_swiglu = swiglu_problem{m_tokens, m, numerics::bf16};
    m_swiglu_shape = swiglu_shapes(m_swiglu).at(0);
    m_swiglu_backward = m_swiglu;
    m_swiglu_backward.backward = true;
    m_swiglu_backward_shape = swiglu_shapes(m_swiglu_backward).at(0);
  }

  linear_products products(std::int64_t in, std::int64_t out, const std::string& layer) {
    const auto n = std::uint64_t(m_tokens), i = std::uint64_t(in), o = std::uint64_t(out);
    const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    const std::string what = "the decoder's " + layer + " (" + std::to_string(m_tokens) + " x " + std::to_string(in) + " -> " +
                             std::to_string(out) + ")";
    linear_products p;
    p.forward = detail::lt_product(m_cublas.get(), compute, CUBLAS_OP_T, CUBLAS_OP_N, CUDA_R_16BF, CUDA_R_16BF, i, o, i, n, o, n,
                                   m_workspace_bytes, "the forward product of " + what);
    p.data = detail::lt_product(m_cublas.get(), compute, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_16BF, CUDA_R_16BF, i, o, o, n, i, n,
                                m_workspace_bytes, "the data gradient of " + what);
    p.weight = detail::lt_product(m_cublas.get(), compute, CUBLAS_OP_N, CUBLAS_OP_T, CUDA_R_16BF, CUDA_R_32F, i, n, o, n, i, o,
                                  m_workspace_bytes, "the weight gradient of " + what);
    return p;
  }

  static element* as(bytes& b) noexcept { return reinterpret_cast<element*>(b.data()); }
  element* copy_at(std::int64_t offset) noexcept { return reinterpret_cast<element*>(m_copy.data()) + offset; }
  element* weight(std::int64_t block, const char* tensor) {
    return copy_at(m_layout.at("layers." + std::to_string(block) + "." + tensor).offset);
  }
  float* gradient_of(std::int64_t block, const char* tensor) {
    return m_gradients.data() + m_layout.at("layers." + std::to_string(block) + "." + tensor).offset;
  }
  block_activations& activations(std::int64_t block) { return m_activations[std::size_t(m_training.checkpointing ? 0 : block)]; }

  void forward_product(const linear_products& p, const void* w, const void* x, void* y, cudaStream_t stream, const void* add = nullptr) {
    p.forward(w, x, y, m_workspace.data(), m_workspace_bytes, stream, add);
  }
  // dx = dy W (when dx is not null), dW = dy^T x into `dw`.
  void backward_products(const linear_products& p, const void* w, const void* x, const void* dy, void* dx, float* dw, cudaStream_t stream) {
    if (dx != nullptr) p.data(w, dy, dx, m_workspace.data(), m_workspace_bytes, stream);
    p.weight(x, dy, dw, m_workspace.data(), m_workspace_bytes, stream);
  }

  void norm(const element* x, const element* w, element* y, float* inv_rms, cudaStream_t stream) const {
    rmsnorm_tensors<element> t;
    t.x = x;
    t.weight = w;
    t.y = y;
    t.inv_rms = inv_rms;
    run_rmsnorm(m_norm, m_norm_shape, t, stream);
  }

  // Block l's forward from m_inputs[l] into m_inputs[l + 1]; a recompute stops before the
  // down projection (the backward pass does not read the block's output).
  void block_forward(std::int64_t l, bool recompute, cudaStream_t stream) {
    block_activations& a = activations(l);
    element* x = as(m_inputs[std::size_t(l)]);
    const std::int64_t e = sizeof(element), q = q_width() * e / 16, kv = kv_width() * e / 16, row = qkv_width() * e / 16;
    norm(x, weight(l, "attention_norm"), as(a.n1), a.inv_rms1.data(), stream);
    forward_product(m_qkv, weight(l, "qkv"), a.n1.data(), m_qkv_rows.data(), stream);
    run_rope(m_rope, m_rope_shape, as(m_qkv_rows), m_positions.data(), reinterpret_cast<const float2*>(m_rope_table.data()), stream);
    detail::copy_rows(a.q.data(), m_qkv_rows.data(), m_tokens, q * 16, detail::dense_at{q, 0}, detail::dense_at{row, 0}, stream);
    detail::copy_rows(a.k.data(), m_qkv_rows.data(), m_tokens, kv * 16, detail::dense_at{kv, 0}, detail::dense_at{row, q}, stream);
    detail::copy_rows(a.v.data(), m_qkv_rows.data(), m_tokens, kv * 16, detail::dense_at{kv, 0}, detail::dense_at{row, q + kv}, stream);
    attention_tensors t{a.q.data(), a.k.data(), a.v.data(), a.attended.data()};
    t.stats = a.stats.data();
    m_attend->forward_with_statistics_on(t, stream);
    forward_product(m_o, weight(l, "o"), a.attended.data(), a.h1.data(), stream, x);  // h1 = x + attention
    norm(as(a.h1), weight(l, "mlp_norm"), as(a.n2), a.inv_rms2.data(), stream);
    forward_product(m_gate_up, weight(l, "gate_up"), a.n2.data(), a.gate_up.data(), stream);
    run_swiglu(m_swiglu, m_swiglu_shape, as(a.gate_up), as(a.act), stream);
    if (!recompute) forward_product(m_down, weight(l, "down"), a.act.data(), m_inputs[std::size_t(l + 1)].data(), stream, a.h1.data());
  }

  // Block l's backward: the gradient of its output in m_d_residual becomes its input's.
  void block_backward(std::int64_t l, cudaStream_t stream) {
    block_activations& a = activations(l);
    element* x = as(m_inputs[std::size_t(l)]);
    const std::int64_t t = m_tokens, h = m_model.hidden_size, e = sizeof(element);
    const std::int64_t q = q_width() * e / 16, kv = kv_width() * e / 16, row = qkv_width() * e / 16;
    backward_products(m_down, weight(l, "down"), a.act.data(), m_d_residual.data(), m_d_act.data(), gradient_of(l, "down"), stream);
    run_swiglu_backward(m_swiglu_backward, m_swiglu_backward_shape, as(a.gate_up), as(m_d_act), as(m_d_gate_up), stream);
    backward_products(m_gate_up, weight(l, "gate_up"), a.n2.data(), m_d_gate_up.data(), m_d_normed.data(), gradient_of(l, "gate_up"),
                      stream);
    rmsnorm_backward(as(m_d_normed), as(a.h1), weight(l, "mlp_norm"), a.inv_rms2.data(), as(m_d_residual), as(m_dh1), t, h, stream);
    rmsnorm_weight_gradient(as(m_d_normed), as(a.h1), a.inv_rms2.data(), t, h, m_partials.data(), gradient_of(l, "mlp_norm"), stream);
    backward_products(m_o, weight(l, "o"), a.attended.data(), m_dh1.data(), m_d_attended.data(), gradient_of(l, "o"), stream);
    m_attend->run(*a.backward, stream);
    detail::copy_rows(m_d_qkv_rows.data(), m_dq.data(), t, q * 16, detail::dense_at{row, 0}, detail::dense_at{q, 0}, stream);
    detail::copy_rows(m_d_qkv_rows.data(), m_dk.data(), t, kv * 16, detail::dense_at{row, q}, detail::dense_at{kv, 0}, stream);
    detail::copy_rows(m_d_qkv_rows.data(), m_dv.data(), t, kv * 16, detail::dense_at{row, q + kv}, detail::dense_at{kv, 0}, stream);
    run_rope(m_rope_backward, m_rope_backward_shape, as(m_d_qkv_rows), m_positions.data(),
             reinterpret_cast<const float2*>(m_rope_backward_table.data()), stream);
    backward_products(m_qkv, weight(l, "qkv"), a.n1.data(), m_d_qkv_rows.data(), m_d_normed.data(), gradient_of(l, "qkv"), stream);
    rmsnorm_backward(as(m_d_normed), x, weight(l, "attention_norm"), a.inv_rms1.data(), as(m_dh1), as(m_d_residual), t, h, stream);
    rmsnorm_weight_gradient(as(m_d_normed), x, a.inv_rms1.data(), t, h, m_partials.data(), gradient_of(l, "attention_norm"), stream);
  }

  const element* head_weights() {
    return copy_at(m_layout.at(m_model.tied_embeddings ? "embedding" : "lm_head").offset);
  }

  void forward(cudaStream_t stream) {
    const std::int64_t h = m_model.hidden_size;
    if (whole()) embed_tokens(m_inputs.front().data(), copy_at(m_layout.at("embedding").offset), m_token_ids.data(), m_tokens,
                              h * std::int64_t(sizeof(element)), stream);
    for (std::int64_t l = 0; l < blocks(); ++l) block_forward(l, false, stream);
    if (!whole()) return;
    norm(as(m_inputs.back()), copy_at(m_layout.at("final_norm").offset), as(m_final_normed), m_final_inv_rms.data(), stream);
    forward_product(m_head, head_weights(), m_final_normed.data(), m_logits.data(), stream);
    cross_entropy(as(m_logits), m_labels.data(), m_tokens, m_model.vocab_size, m_label_count.data(), m_row_loss.data(), m_loss.data(),
                  stream);
  }

  void backward(cudaStream_t stream) {
    const std::int64_t t = m_tokens, h = m_model.hidden_size;
    if (whole()) {
      float* d_head = m_gradients.data() + m_layout.at(m_model.tied_embeddings ? "embedding" : "lm_head").offset;
      backward_products(m_head, head_weights(), m_final_normed.data(), m_logits.data(), m_d_normed.data(), d_head, stream);
      const element* final_norm = copy_at(m_layout.at("final_norm").offset);
      float* d_final_norm = m_gradients.data() + m_layout.at("final_norm").offset;
      rmsnorm_backward(as(m_d_normed), as(m_inputs.back()), final_norm, m_final_inv_rms.data(), static_cast<const element*>(nullptr),
                       as(m_d_residual), t, h, stream);
      rmsnorm_weight_gradient(as(m_d_normed), as(m_inputs.back()), m_final_inv_rms.data(), t, h, m_partials.data(), d_final_norm, stream);
    } else {
      GPUCMP_CUDA_CHECK(cudaMemcpyAsync(m_d_residual.data(), m_output_gradient.data(), m_d_residual.bytes(), cudaMemcpyDeviceToDevice,
                                        stream));
    }
    for (std::int64_t l = blocks() - 1; l >= 0; --l) {
      if (m_training.checkpointing) block_forward(l, true, stream);
      block_backward(l, stream);
    }
    if (whole()) {
      const decoder_parameter& embedding = m_layout.at("embedding");
      float* d_embedding = m_gradients.data() + embedding.offset;
      if (!m_model.tied_embeddings) GPUCMP_CUDA_CHECK(cudaMemsetAsync(d_embedding, 0, std::size_t(embedding.elements()) * 4, stream));
      gpucmp::embedding_backward(as(m_d_residual), m_token_ids.data(), t, h, d_embedding, stream);
    }
  }

  void run_step(cudaStream_t stream) {
    forward_backward(stream);
    adamw_step(m_master.data(), m_gradients.data(), m_first_moment.data(), m_second_moment.data(), copy_at(0), m_layout.total,
               m_step.data(), m_options.adamw, stream);
  }

  void copy_out(void* to, const void* from, std::size_t n) const {
    GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
    GPUCMP_CUDA_CHECK(cudaMemcpy(to, from, n, cudaMemcpyDeviceToHost));
  }
  std::vector<float> download(const float* base, const decoder_parameter& p) const {
    std::vector<float> out(std::size_t(p.elements()));
    copy_out(out.data(), base + p.offset, out.size() * sizeof(float));
    return out;
  }
  std::vector<float> download_rows(const void* from) const {
    std::vector<element> raw(std::size_t(m_tokens * m_model.hidden_size));
    copy_out(raw.data(), from, raw.size() * sizeof(element));
    std::vector<float> out(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) out[i] = __bfloat162float(raw[i]);
    return out;
  }

  decoder_config m_model;
  std::int64_t m_batch, m_sequence, m_tokens;
  decoder_training_options m_training;
  decoder_trainer_options m_options;
  decoder_training_work m_work;
  decoder_parameter_layout m_layout;
  attention_problem m_attention_problem;
  double m_allocated = 0;
  // Flat parameter buffers (m_layout's offsets) and the step count.
  device_buffer<float> m_master, m_gradients, m_first_moment, m_second_moment;
  bytes m_copy;
  device_buffer<std::int64_t> m_step;
  // Activations: each block's input (and the last output), and what the blocks keep.
  std::vector<bytes> m_inputs;
  std::vector<block_activations> m_activations;
  // The backward pass's scratch.
  bytes m_qkv_rows, m_d_qkv_rows, m_dq, m_dk, m_dv, m_d_attended, m_d_act, m_d_gate_up, m_d_normed, m_dh1, m_d_residual;
  device_buffer<float> m_partials;
  device_buffer<std::int32_t> m_positions;
  device_buffer<float> m_rope_table, m_rope_backward_table;  // (cos, sin) pairs of `sequence` positions; (cos, -sin)
  // The whole model's.
  device_buffer<std::int32_t> m_token_ids, m_labels;
  bytes m_final_normed, m_logits;
  device_buffer<float> m_final_inv_rms, m_label_count, m_loss;
  device_buffer<double> m_row_loss;
  // Blocks': the fixed gradient of their output.
  bytes m_output_gradient;
  // Libraries and problems.
  lt_handle m_cublas;
  bytes m_workspace;
  std::size_t m_workspace_bytes = 0;
  linear_products m_qkv, m_o, m_gate_up, m_down, m_head;
  std::optional<gpucmp::attention> m_attend;
  rmsnorm_problem m_norm;
  launch_shape m_norm_shape;
  rope_problem m_rope, m_rope_backward;
  launch_shape m_rope_shape, m_rope_backward_shape;
  swiglu_problem m_swiglu, m_swiglu_backward;
  launch_shape m_swiglu_shape, m_swiglu_backward_shape;
  std::optional<graph> m_captured;
  std::optional<graph_exec> m_replay;
};

}  // namespace gpucmp
