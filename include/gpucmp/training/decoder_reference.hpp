// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// FP64 reference of a Llama-style decoder for training, forward and backward, on the host:
// one block, and the embedding, final norm, LM head and cross-entropy around the blocks. What
// a GPU training step's gradients are checked against on small shapes (and what the host tests
// check against finite differences); the AdamW step that follows is training/adamw.hpp's
// adamw_update_reference<double>. Conventions are Hugging Face's LlamaForCausalLM's:
//   h1 = x + Attention(RoPE(RMSNorm(x) Wqkv^T)) Wo^T,  y = h1 + (SiLU(g) * u) Wdown^T with
//   [g | u] = RMSNorm(h1) Wgate_up^T; RMSNorm y = x / sqrt(mean(x^2) + eps) * w; RoPE rotates
//   (i, i + d/2) pairs of each head by position / theta^(2i/d) (Llama 3.1's scaling from the
//   configuration); attention causal within each sequence, grouped-query, scaled by 1/sqrt(d);
//   the loss is the mean cross-entropy of each token's label over the tokens that have one
//   (-100: none), the logits RMSNorm(last block's output) times the LM head (the embedding
//   when tied).
// Plain loops over row-major matrices, written for clarity: a block of a few dozen values a
// token takes microseconds. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/models/decoder_config.hpp>
#include <gpucmp/ops/rope_problem.hpp>
#include <gpucmp/training/adamw.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {
namespace reference {

/// A row-major matrix of doubles.
struct matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> v;  ///< rows * cols values, row after row

  matrix() = default;
  /// A zero matrix of that shape.
  matrix(std::int64_t rows_, std::int64_t cols_) : rows(rows_), cols(cols_), v(std::size_t(rows_ * cols_), 0.0) {}
  double& at(std::int64_t i, std::int64_t j) { return v[std::size_t(i * cols + j)]; }
  double at(std::int64_t i, std::int64_t j) const { return v[std::size_t(i * cols + j)]; }
};

/// One decoder block's weights (and, in the same shape, their gradients), in the fused layout
/// gpucmp's decoder keeps: Q, K and V projections stacked as rows, gate and up stacked.
struct decoder_block_weights {
  std::vector<double> attention_norm;  ///< hidden
  matrix qkv;                          ///< (heads + 2 kv_heads) head_dim x hidden: Q rows, then K, then V
  matrix o;                            ///< hidden x heads head_dim
  std::vector<double> mlp_norm;        ///< hidden
  matrix gate_up;                      ///< 2 intermediate x hidden: gate rows, then up
  matrix down;                         ///< hidden x intermediate

  /// Zeros in the shapes `model` gives a block.
  static decoder_block_weights zeros(const decoder_config& model) {
    const std::int64_t h = model.hidden_size, q = model.heads * model.head_dim, kv = model.kv_heads * model.head_dim;
    decoder_block_weights w;
    w.attention_norm.assign(std::size_t(h), 0.0);
    w.qkv = matrix(q + 2 * kv, h);
    w.o = matrix(h, q);
    w.mlp_norm.assign(std::size_t(h), 0.0);
    w.gate_up = matrix(2 * model.intermediate_size, h);
    w.down = matrix(h, model.intermediate_size);
    return w;
  }
  /// Every value, in the order above (for optimizers and comparisons).
  std::vector<double*> values() {
    std::vector<double*> out;
    for (std::vector<double>* part : {&attention_norm, &qkv.v, &o.v, &mlp_norm, &gate_up.v, &down.v}) {
      for (double& x : *part) out.push_back(&x);
    }
    return out;
  }
};

/// What a block's forward pass keeps for its backward pass.
struct decoder_block_saved {
  std::int64_t sequence = 0;  ///< tokens a sequence
  matrix x, n1, qkv, attention, h1, n2, gate_up, swiglu;  ///< qkv after RoPE; attention before Wo
  std::vector<double> inv_rms1, inv_rms2;                 ///< each token's 1 / rms of x and of h1
  std::vector<double> probabilities;  ///< softmax of each (sequence, head, query, key <= query), in that order
};

namespace detail {

inline void require_block(bool ok, const std::string& what) {
  if (!ok) throw invalid_argument("decoder block reference: " + what);
}

inline matrix linear_forward(const matrix& x, const matrix& w) {  // y = x W^T
  matrix y(x.rows, w.rows);
  for (std::int64_t t = 0; t < x.rows; ++t)
    for (std::int64_t o = 0; o < w.rows; ++o) {
      double s = 0;
      for (std::int64_t i = 0; i < x.cols; ++i) s += x.at(t, i) * w.at(o, i);
      y.at(t, o) = s;
    }
  return y;
}

inline matrix linear_backward(const matrix& dy, const matrix& x, const matrix& w, matrix& dw) {  // dx = dy W, dW += dy^T x
  matrix dx(x.rows, x.cols);
  for (std::int64_t t = 0; t < x.rows; ++t)
    for (std::int64_t o = 0; o < w.rows; ++o) {
      const double g = dy.at(t, o);
      for (std::int64_t i = 0; i < x.cols; ++i) {
        dx.at(t, i) += g * w.at(o, i);
        dw.at(o, i) += g * x.at(t, i);
      }
    }
  return dx;
}

inline matrix rms_norm_forward(const matrix& x, const std::vector<double>& w, double eps, std::vector<double>& inv_rms) {
  matrix y(x.rows, x.cols);
  inv_rms.assign(std::size_t(x.rows), 0.0);
  for (std::int64_t t = 0; t < x.rows; ++t) {
    double squares = 0;
    for (std::int64_t i = 0; i < x.cols; ++i) squares += x.at(t, i) * x.at(t, i);
    const double r = 1 / std::sqrt(squares / double(x.cols) + eps);
    inv_rms[std::size_t(t)] = r;
    for (std::int64_t i = 0; i < x.cols; ++i) y.at(t, i) = x.at(t, i) * r * w[std::size_t(i)];
  }
  return y;
}

// dx_i = r w_i dy_i - x_i r^3 / n sum_j w_j dy_j x_j; dw_i += dy_i x_i r.
inline matrix rms_norm_backward(const matrix& dy, const matrix& x, const std::vector<double>& w,
                                const std::vector<double>& inv_rms, std::vector<double>& dw) {
  matrix dx(x.rows, x.cols);
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const double r = inv_rms[std::size_t(t)];
    double dot = 0;
    for (std::int64_t i = 0; i < x.cols; ++i) dot += w[std::size_t(i)] * dy.at(t, i) * x.at(t, i);
    for (std::int64_t i = 0; i < x.cols; ++i) {
      dx.at(t, i) = r * w[std::size_t(i)] * dy.at(t, i) - x.at(t, i) * r * r * r * dot / double(x.cols);
      dw[std::size_t(i)] += dy.at(t, i) * x.at(t, i) * r;
    }
  }
  return dx;
}

// Rotates the Q and K heads of each row of `qkv` by +angle (forward) or -angle (backward: the
// rotation's transpose), the position being the token's place in its sequence.
inline void rope_rotate(matrix& qkv, const decoder_config& c, std::int64_t sequence, double sign) {
  const std::vector<double> frequencies = decoder_rope(c, 1).inverse_frequencies();
  const std::int64_t half = c.head_dim / 2;
  for (std::int64_t t = 0; t < qkv.rows; ++t) {
    const double position = double(t % sequence);
    for (std::int64_t head = 0; head < c.heads + c.kv_heads; ++head) {  // Q heads, then K heads
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = sign * position * frequencies[std::size_t(i)];
        double& a = qkv.at(t, head * c.head_dim + i);
        double& b = qkv.at(t, head * c.head_dim + i + half);
        const double a0 = a, b0 = b;
        a = a0 * std::cos(angle) - b0 * std::sin(angle);
        b = b0 * std::cos(angle) + a0 * std::sin(angle);
      }
    }
  }
}

inline double silu(double g) { return g / (1 + std::exp(-g)); }

}  // namespace detail

/// The block's output for `x` (tokens x hidden: sequences of `sequence` tokens one after the
/// other), keeping in `saved` what the backward pass needs. Throws invalid_argument naming a
/// shape that does not match `model`.
inline matrix decoder_block_forward(const decoder_config& model, const decoder_block_weights& w, const matrix& x,
                                    std::int64_t sequence, decoder_block_saved& saved) {
  model.validate();
  const decoder_block_weights shape = decoder_block_weights::zeros(model);
  detail::require_block(x.cols == model.hidden_size, "x has " + std::to_string(x.cols) + " columns, the model's hidden size is " +
                                                         std::to_string(model.hidden_size));
  detail::require_block(sequence > 0 && x.rows > 0 && x.rows % sequence == 0,
                        "tokens " + std::to_string(x.rows) + " are not whole sequences of " + std::to_string(sequence));
  detail::require_block(w.attention_norm.size() == shape.attention_norm.size() && w.mlp_norm.size() == shape.mlp_norm.size() &&
                            w.qkv.rows == shape.qkv.rows && w.qkv.cols == shape.qkv.cols && w.o.rows == shape.o.rows &&
                            w.o.cols == shape.o.cols && w.gate_up.rows == shape.gate_up.rows &&
                            w.gate_up.cols == shape.gate_up.cols && w.down.rows == shape.down.rows && w.down.cols == shape.down.cols,
                        "the weights' shapes are not " + model.name + "'s");
  const std::int64_t d = model.head_dim, q_width = model.heads * d, kv_width = model.kv_heads * d;
  const std::int64_t group = model.heads / model.kv_heads, mlp = model.intermediate_size;
  const double scale = 1 / std::sqrt(double(d));
  saved = {};
  saved.sequence = sequence;
  saved.x = x;
  saved.n1 = detail::rms_norm_forward(x, w.attention_norm, model.norm_eps, saved.inv_rms1);
  saved.qkv = detail::linear_forward(saved.n1, w.qkv);
  detail::rope_rotate(saved.qkv, model, sequence, 1);
  saved.attention = matrix(x.rows, q_width);
  for (std::int64_t first = 0; first < x.rows; first += sequence) {
    for (std::int64_t head = 0; head < model.heads; ++head) {
      const std::int64_t k_col = q_width + (head / group) * d, v_col = q_width + kv_width + (head / group) * d;
      for (std::int64_t i = 0; i < sequence; ++i) {
        std::vector<double> p(std::size_t(i + 1));
        double top = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::int64_t e = 0; e < d; ++e) s += saved.qkv.at(first + i, head * d + e) * saved.qkv.at(first + j, k_col + e);
          p[std::size_t(j)] = s * scale;
          top = std::max(top, p[std::size_t(j)]);
        }
        for (double& s : p) sum += (s = std::exp(s - top));
        for (std::int64_t j = 0; j <= i; ++j) {
          const double prob = p[std::size_t(j)] / sum;
          saved.probabilities.push_back(prob);
          for (std::int64_t e = 0; e < d; ++e) saved.attention.at(first + i, head * d + e) += prob * saved.qkv.at(first + j, v_col + e);
        }
      }
    }
  }
  saved.h1 = detail::linear_forward(saved.attention, w.o);
  for (std::size_t e = 0; e < saved.h1.v.size(); ++e) saved.h1.v[e] += x.v[e];
  saved.n2 = detail::rms_norm_forward(saved.h1, w.mlp_norm, model.norm_eps, saved.inv_rms2);
  saved.gate_up = detail::linear_forward(saved.n2, w.gate_up);
  saved.swiglu = matrix(x.rows, mlp);
  for (std::int64_t t = 0; t < x.rows; ++t)
    for (std::int64_t i = 0; i < mlp; ++i) saved.swiglu.at(t, i) = detail::silu(saved.gate_up.at(t, i)) * saved.gate_up.at(t, mlp + i);
  matrix y = detail::linear_forward(saved.swiglu, w.down);
  for (std::size_t e = 0; e < y.v.size(); ++e) y.v[e] += saved.h1.v[e];
  return y;
}

/// The gradient of the block's input for the gradient `dy` of its output, adding the weights'
/// gradients to `grads` (zeros(model) for one step's).
inline matrix decoder_block_backward(const decoder_config& model, const decoder_block_weights& w, const decoder_block_saved& saved,
                                     const matrix& dy, decoder_block_weights& grads) {
  detail::require_block(dy.rows == saved.x.rows && dy.cols == saved.x.cols, "dy's shape is not the block's output's");
  const std::int64_t d = model.head_dim, q_width = model.heads * d, kv_width = model.kv_heads * d;
  const std::int64_t group = model.heads / model.kv_heads, mlp = model.intermediate_size, sequence = saved.sequence;
  const double scale = 1 / std::sqrt(double(d));
  // MLP: y = h1 + swiglu Wdown^T.
  const matrix dswiglu = detail::linear_backward(dy, saved.swiglu, w.down, grads.down);
  matrix dgate_up(dy.rows, 2 * mlp);
  for (std::int64_t t = 0; t < dy.rows; ++t)
    for (std::int64_t i = 0; i < mlp; ++i) {
      const double g = saved.gate_up.at(t, i), u = saved.gate_up.at(t, mlp + i), sigma = 1 / (1 + std::exp(-g));
      dgate_up.at(t, i) = dswiglu.at(t, i) * u * sigma * (1 + g * (1 - sigma));
      dgate_up.at(t, mlp + i) = dswiglu.at(t, i) * detail::silu(g);
    }
  const matrix dn2 = detail::linear_backward(dgate_up, saved.n2, w.gate_up, grads.gate_up);
  matrix dh1 = detail::rms_norm_backward(dn2, saved.h1, w.mlp_norm, saved.inv_rms2, grads.mlp_norm);
  for (std::size_t e = 0; e < dh1.v.size(); ++e) dh1.v[e] += dy.v[e];
  // Attention: h1 = x + attention Wo^T.
  const matrix dattention = detail::linear_backward(dh1, saved.attention, w.o, grads.o);
  matrix dqkv(dy.rows, q_width + 2 * kv_width);
  std::size_t at = 0;  // saved.probabilities, in the forward pass's order
  for (std::int64_t first = 0; first < dy.rows; first += sequence) {
    for (std::int64_t head = 0; head < model.heads; ++head) {
      const std::int64_t k_col = q_width + (head / group) * d, v_col = q_width + kv_width + (head / group) * d;
      for (std::int64_t i = 0; i < sequence; ++i) {
        const double* p = &saved.probabilities[at];
        at += std::size_t(i + 1);
        std::vector<double> dp(std::size_t(i + 1));
        double weighted = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::int64_t e = 0; e < d; ++e) {
            s += dattention.at(first + i, head * d + e) * saved.qkv.at(first + j, v_col + e);
            dqkv.at(first + j, v_col + e) += p[j] * dattention.at(first + i, head * d + e);
          }
          dp[std::size_t(j)] = s;
          weighted += p[j] * s;
        }
        for (std::int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[std::size_t(j)] - weighted) * scale;
          for (std::int64_t e = 0; e < d; ++e) {
            dqkv.at(first + i, head * d + e) += ds * saved.qkv.at(first + j, k_col + e);
            dqkv.at(first + j, k_col + e) += ds * saved.qkv.at(first + i, head * d + e);
          }
        }
      }
    }
  }
  detail::rope_rotate(dqkv, model, sequence, -1);
  const matrix dn1 = detail::linear_backward(dqkv, saved.n1, w.qkv, grads.qkv);
  matrix dx = detail::rms_norm_backward(dn1, saved.x, w.attention_norm, saved.inv_rms1, grads.attention_norm);
  for (std::size_t e = 0; e < dx.v.size(); ++e) dx.v[e] += dh1.v[e];
  return dx;
}

/// The weights around the blocks: the token embedding, the final RMSNorm and the LM head (the
/// embedding itself when the model ties them).
struct decoder_head_weights {
  matrix embedding;                ///< vocab x hidden
  std::vector<double> final_norm;  ///< hidden
  matrix lm_head;                  ///< vocab x hidden; empty when tied

  /// Zeros in the shapes `model` gives them.
  static decoder_head_weights zeros(const decoder_config& model) {
    decoder_head_weights w;
    w.embedding = matrix(model.vocab_size, model.hidden_size);
    w.final_norm.assign(std::size_t(model.hidden_size), 0.0);
    if (!model.tied_embeddings) w.lm_head = matrix(model.vocab_size, model.hidden_size);
    return w;
  }
};

/// What the head's forward pass keeps for its backward pass.
struct decoder_head_saved {
  matrix x, normed, probabilities;  ///< the last block's output, its norm, each token's softmax
  std::vector<double> inv_rms;
  double counted = 0;  ///< tokens with a label (the loss's mean is over them)
};

/// Hugging Face's label that a token has none (CrossEntropyLoss's ignore_index).
inline constexpr std::int32_t ignored_label = -100;

/// The embedding rows of `tokens` (tokens x hidden). Throws invalid_argument for an id outside
/// the vocabulary.
inline matrix embedding_forward(const matrix& embedding, const std::vector<std::int32_t>& tokens) {
  matrix x(std::int64_t(tokens.size()), embedding.cols);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    detail::require_block(tokens[t] >= 0 && tokens[t] < embedding.rows,
                          "token " + std::to_string(t) + " is " + std::to_string(tokens[t]) + ", outside the vocabulary of " +
                              std::to_string(embedding.rows));
    for (std::int64_t i = 0; i < embedding.cols; ++i) x.at(std::int64_t(t), i) = embedding.at(tokens[t], i);
  }
  return x;
}

/// Adds each row of dx to the embedding gradient's row of its token.
inline void embedding_backward(const matrix& dx, const std::vector<std::int32_t>& tokens, matrix& d_embedding) {
  for (std::size_t t = 0; t < tokens.size(); ++t)
    for (std::int64_t i = 0; i < dx.cols; ++i) d_embedding.at(tokens[t], i) += dx.at(std::int64_t(t), i);
}

/// The mean cross-entropy of `labels` (one a token; ignored_label: none) under logits =
/// RMSNorm(x) W^T, W the LM head (or the embedding when tied), as transformers'
/// LlamaForCausalLM computes its loss from shifted labels. Throws invalid_argument for a
/// label outside the vocabulary, a count that does not match, or no label at all.
inline double decoder_head_forward(const decoder_config& model, const decoder_head_weights& w, const matrix& x,
                                   const std::vector<std::int32_t>& labels, decoder_head_saved& saved) {
  detail::require_block(std::int64_t(labels.size()) == x.rows, std::to_string(labels.size()) + " labels for " + std::to_string(x.rows) +
                                                                  " tokens");
  const matrix& head = model.tied_embeddings ? w.embedding : w.lm_head;
  detail::require_block(head.rows == model.vocab_size && head.cols == model.hidden_size, "the LM head's shape is not " + model.name + "'s");
  saved = {};
  saved.x = x;
  saved.normed = detail::rms_norm_forward(x, w.final_norm, model.norm_eps, saved.inv_rms);
  const matrix logits = detail::linear_forward(saved.normed, head);
  saved.probabilities = matrix(x.rows, model.vocab_size);
  double loss = 0;
  for (std::int64_t t = 0; t < x.rows; ++t) {
    double top = -INFINITY, sum = 0;
    for (std::int64_t v = 0; v < model.vocab_size; ++v) top = std::max(top, logits.at(t, v));
    for (std::int64_t v = 0; v < model.vocab_size; ++v) sum += (saved.probabilities.at(t, v) = std::exp(logits.at(t, v) - top));
    for (std::int64_t v = 0; v < model.vocab_size; ++v) saved.probabilities.at(t, v) /= sum;
    const std::int32_t label = labels[std::size_t(t)];
    if (label == ignored_label) continue;
    detail::require_block(label >= 0 && label < model.vocab_size, "label " + std::to_string(t) + " is " + std::to_string(label) +
                                                                      ", outside the vocabulary of " + std::to_string(model.vocab_size));
    loss += -(logits.at(t, label) - top - std::log(sum));
    saved.counted += 1;
  }
  detail::require_block(saved.counted > 0, "no token has a label");
  return loss / saved.counted;
}

/// The gradient of decoder_head_forward's loss with respect to x, adding the final norm's and
/// the LM head's gradients to `grads` (the LM head's into grads.embedding when tied).
inline matrix decoder_head_backward(const decoder_config& model, const decoder_head_weights& w, const decoder_head_saved& saved,
                                    const std::vector<std::int32_t>& labels, decoder_head_weights& grads) {
  const matrix& head = model.tied_embeddings ? w.embedding : w.lm_head;
  matrix& d_head = model.tied_embeddings ? grads.embedding : grads.lm_head;
  matrix d_logits = saved.probabilities;  // softmax - one-hot, over the counted tokens' mean
  for (std::int64_t t = 0; t < d_logits.rows; ++t) {
    const std::int32_t label = labels[std::size_t(t)];
    for (std::int64_t v = 0; v < d_logits.cols; ++v) {
      d_logits.at(t, v) = label == ignored_label ? 0.0 : (d_logits.at(t, v) - (v == label ? 1.0 : 0.0)) / saved.counted;
    }
  }
  const matrix d_normed = detail::linear_backward(d_logits, saved.normed, head, d_head);
  return detail::rms_norm_backward(d_normed, saved.x, w.final_norm, saved.inv_rms, grads.final_norm);
}

}  // namespace reference
}  // namespace gpucmp
