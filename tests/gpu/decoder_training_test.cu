// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The decoder's training step (training/decoder_training.cuh) against the FP64 reference of
// training/decoder_reference.hpp, fed the step's own BF16 weights, inputs and labels: the loss
// and every tensor's gradient, for the whole model (tied and untied LM heads, ignored labels)
// and for blocks alone; checkpointing gives the forward's loss bit for bit and the same
// gradients; AdamW moves the master weights as torch's rule does and the BF16 copy follows
// them; a captured step replays and the loss falls on a fixed batch; bad tokens, labels and
// shapes are refused by name.
#include "catch.hpp"
#include "model_test_helpers.hpp"
#include "small_decoder.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/decoder_training_memory.hpp>
#include <gpucmp/training/decoder_reference.hpp>
#include <gpucmp/training/decoder_training.cuh>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

namespace ref = gpucmp::reference;

gpucmp::decoder_trainer_options quick_options() {
  gpucmp::decoder_trainer_options o;
  o.choice = gpucmp::algorithm_choice::heuristic;  // attention's own tests cover the search
  return o;
}

using gpucmp_test::as_double;

ref::matrix as_matrix(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  ref::matrix m(rows, cols);
  for (std::size_t i = 0; i < v.size(); ++i) m.v[i] = double(v[i]);
  return m;
}

ref::decoder_block_weights block_weights(const gpucmp::decoder_trainer& t, std::int64_t l) {
  ref::decoder_block_weights w = ref::decoder_block_weights::zeros(t.model());
  const std::string b = "layers." + std::to_string(l) + ".";
  w.attention_norm = as_double(t.weights(b + "attention_norm"));
  w.qkv = as_matrix(t.weights(b + "qkv"), w.qkv.rows, w.qkv.cols);
  w.o = as_matrix(t.weights(b + "o"), w.o.rows, w.o.cols);
  w.mlp_norm = as_double(t.weights(b + "mlp_norm"));
  w.gate_up = as_matrix(t.weights(b + "gate_up"), w.gate_up.rows, w.gate_up.cols);
  w.down = as_matrix(t.weights(b + "down"), w.down.rows, w.down.cols);
  return w;
}

// ||got - want|| / ||want|| over a tensor, with want not all zero.
double relative_error(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += want[i] * want[i];
  }
  INFO(what << ": the reference gradient is all zero");
  REQUIRE(norm > 0);
  return std::sqrt(diff / norm);
}

// Each block tensor's gradient against the reference's, within `bound` (relative L2).
void check_block_gradients(const gpucmp::decoder_trainer& t, std::int64_t l, ref::decoder_block_weights& g, double bound) {
  const std::string b = "layers." + std::to_string(l) + ".";
  const std::pair<const char*, const std::vector<double>*> tensors[] = {
      {"attention_norm", &g.attention_norm}, {"qkv", &g.qkv.v}, {"o", &g.o.v},
      {"mlp_norm", &g.mlp_norm},             {"gate_up", &g.gate_up.v}, {"down", &g.down.v}};
  for (const auto& [name, want] : tensors) {
    const double e = relative_error(t.gradient(b + name), *want, b + name);
    INFO(b << name << ": relative error " << e << ", bound " << bound);
    CHECK(e <= bound);
  }
}

struct batch_of_tokens {
  std::vector<std::int32_t> tokens, labels;
};

// Random ids, each labelled with the next one in its sequence; a sequence's last token and
// every seventh are not labelled (-100).
batch_of_tokens random_tokens(std::int64_t batch, std::int64_t sequence, std::int64_t vocab, std::uint64_t seed) {
  batch_of_tokens b;
  for (std::int64_t i = 0; i < batch * sequence; ++i) {
    b.tokens.push_back(std::int32_t(gpucmp::random_bits(seed, std::uint64_t(i)) % std::uint64_t(vocab)));
  }
  for (std::int64_t i = 0; i < batch * sequence; ++i) {
    const bool last = (i + 1) % sequence == 0;
    b.labels.push_back(last || i % 7 == 3 ? -100 : b.tokens[std::size_t(i + 1)]);
  }
  return b;
}

// BF16 activations stored between every operation, through two blocks and back: a few
// percent of a gradient's norm (the loss's own rounding is far smaller).
constexpr double gradient_bound = 0.03;

}  // namespace

TEST_CASE("decoder training: a whole-model step's loss and gradients match the FP64 reference", "[gpu][models][decoder_training]") {
  gpucmp::stream s;
  const std::int64_t batch = 2, sequence = 96;
  for (bool tied : {false, true}) {
    const gpucmp::decoder_config c = small_decoder_config(tied);
    INFO(c.name);
    gpucmp::decoder_training_options training;
    training.scope = gpucmp::decoder_training_scope::whole_model;
    gpucmp::decoder_trainer t(c, batch, sequence, training, quick_options(), s.get());
    const batch_of_tokens data = random_tokens(batch, sequence, c.vocab_size, 11);
    t.set_tokens(data.tokens, data.labels, s.get());
    t.forward_backward(s.get());
    const float loss = t.loss(s.get());

    ref::decoder_head_weights head = ref::decoder_head_weights::zeros(c);
    head.embedding = as_matrix(t.weights("embedding"), c.vocab_size, c.hidden_size);
    head.final_norm = as_double(t.weights("final_norm"));
    if (!tied) head.lm_head = as_matrix(t.weights("lm_head"), c.vocab_size, c.hidden_size);
    std::vector<ref::decoder_block_weights> blocks;
    std::vector<ref::decoder_block_saved> saved(std::size_t(c.layers));
    ref::matrix x = ref::embedding_forward(head.embedding, data.tokens);
    for (std::int64_t l = 0; l < c.layers; ++l) {
      blocks.push_back(block_weights(t, l));
      x = ref::decoder_block_forward(c, blocks.back(), x, sequence, saved[std::size_t(l)]);
    }
    ref::decoder_head_saved head_saved;
    const double want = ref::decoder_head_forward(c, head, x, data.labels, head_saved);
    INFO("loss " << loss << ", reference " << want);
    CHECK(std::abs(double(loss) - want) <= 0.01 * want);
    ref::decoder_head_weights head_grads = ref::decoder_head_weights::zeros(c);
    ref::matrix dx = ref::decoder_head_backward(c, head, head_saved, data.labels, head_grads);
    for (std::int64_t l = c.layers - 1; l >= 0; --l) {
      ref::decoder_block_weights g = ref::decoder_block_weights::zeros(c);
      dx = ref::decoder_block_backward(c, blocks[std::size_t(l)], saved[std::size_t(l)], dx, g);
      check_block_gradients(t, l, g, gradient_bound);
    }
    ref::embedding_backward(dx, data.tokens, head_grads.embedding);
    CHECK(relative_error(t.gradient("final_norm"), head_grads.final_norm, "final_norm") <= gradient_bound);
    CHECK(relative_error(t.gradient("embedding"), head_grads.embedding.v, "embedding") <= gradient_bound);
    if (!tied) CHECK(relative_error(t.gradient("lm_head"), head_grads.lm_head.v, "lm_head") <= gradient_bound);
  }
}

TEST_CASE("decoder training: blocks alone match the reference, with checkpointing and without", "[gpu][models][decoder_training]") {
  gpucmp::stream s;
  const gpucmp::decoder_config c = small_decoder_config(false);
  const std::int64_t batch = 2, sequence = 64;
  for (bool checkpointing : {false, true}) {
    INFO("checkpointing " << checkpointing);
    gpucmp::decoder_training_options training;
    training.blocks = 2;
    training.checkpointing = checkpointing;
    gpucmp::decoder_trainer t(c, batch, sequence, training, quick_options(), s.get());
    t.forward_backward(s.get());
    ref::matrix x = as_matrix(t.block_input(), batch * sequence, c.hidden_size);
    std::vector<ref::decoder_block_weights> blocks;
    std::vector<ref::decoder_block_saved> saved(2);
    for (std::int64_t l = 0; l < 2; ++l) {
      blocks.push_back(block_weights(t, l));
      x = ref::decoder_block_forward(c, blocks.back(), x, sequence, saved[std::size_t(l)]);
    }
    ref::matrix dy = as_matrix(t.output_gradient(), batch * sequence, c.hidden_size);
    for (std::int64_t l = 1; l >= 0; --l) {
      ref::decoder_block_weights g = ref::decoder_block_weights::zeros(c);
      dy = ref::decoder_block_backward(c, blocks[std::size_t(l)], saved[std::size_t(l)], dy, g);
      check_block_gradients(t, l, g, gradient_bound);
    }
  }
}

TEST_CASE("decoder training: checkpointing keeps the loss bit for bit and the gradients", "[gpu][models][decoder_training]") {
  gpucmp::stream s;
  const gpucmp::decoder_config c = small_decoder_config(true);
  gpucmp::decoder_training_options plain;
  plain.scope = gpucmp::decoder_training_scope::whole_model;
  gpucmp::decoder_training_options checkpointed = plain;
  checkpointed.checkpointing = true;
  gpucmp::decoder_trainer a(c, 2, 128, plain, quick_options(), s.get());
  gpucmp::decoder_trainer b(c, 2, 128, checkpointed, quick_options(), s.get());
  CHECK(b.allocated_bytes() < a.allocated_bytes());
  // The memory plan counts what a trainer holds, all but the workspaces: cuDNN's, and for the
  // plan's workspace_bytes the trainer's own 32 MiB.
  for (const auto& [trainer, options] : {std::pair<const gpucmp::decoder_trainer*, gpucmp::decoder_training_options>{&a, plain},
                                         {&b, checkpointed}}) {
    const gpucmp::decoder_training_memory_plan plan = gpucmp::plan_decoder_training_memory(c, 2, 128, options);
    const double held = plan.total() - plan.attention_workspace_bytes - plan.workspace_bytes + 32.0 * 1048576;
    INFO((options.checkpointing ? "checkpointed" : "plain") << ": planned " << held << " B, held " << trainer->allocated_bytes() << " B");
    CHECK(held == Approx(trainer->allocated_bytes()).epsilon(0.02));
  }
  a.forward_backward(s.get());
  b.forward_backward(s.get());
  CHECK(a.loss(s.get()) == b.loss(s.get()));
  for (const gpucmp::decoder_parameter& p : a.parameters().tensors) {
    const std::vector<float> ga = a.gradient(p.name);
    const double e = relative_error(b.gradient(p.name), as_double(ga), p.name);
    INFO(p.name << ": relative difference " << e);
    CHECK(e <= 1e-3);  // cuDNN's dQ and the embedding's sums may add in another order; nothing else differs
  }
}

TEST_CASE("decoder training: AdamW moves the master weights by torch's rule and the BF16 copy follows",
          "[gpu][models][decoder_training]") {
  gpucmp::stream s;
  const gpucmp::decoder_config c = small_decoder_config(false);
  gpucmp::decoder_training_options training;
  training.scope = gpucmp::decoder_training_scope::whole_model;
  gpucmp::decoder_trainer_options options = quick_options();
  options.adamw.learning_rate = 1e-3;
  options.adamw.weight_decay = 0.1;
  gpucmp::decoder_trainer t(c, 2, 64, training, options, s.get());
  const char* names[] = {"layers.1.qkv", "final_norm", "lm_head"};
  std::vector<std::vector<float>> before;
  for (const char* name : names) before.push_back(t.master(name));
  t.step(s.get());  // the first: both moments start at zero
  for (std::size_t k = 0; k < before.size(); ++k) {
    INFO(names[k]);
    const std::vector<float> gradient = t.gradient(names[k]), after = t.master(names[k]), copy = t.weights(names[k]);
    std::size_t moved = 0;
    for (std::size_t i = 0; i < after.size(); ++i) {
      float p = before[k][i], m = 0, v = 0;
      gpucmp::adamw_update_reference<float>(p, gradient[i], m, v, 1, options.adamw);
      INFO("element " << i);
      REQUIRE(std::abs(after[i] - p) <= 1e-6f * (1 + std::abs(p)));
      REQUIRE(copy[i] == __bfloat162float(__float2bfloat16(after[i])));
      moved += after[i] != before[k][i] ? 1 : 0;
    }
    CHECK(moved > after.size() / 2);
  }
}

TEST_CASE("decoder training: a captured step replays and the loss falls on a fixed batch", "[gpu][models][decoder_training]") {
  gpucmp::stream s;
  const gpucmp::decoder_config c = small_decoder_config(true);
  for (bool checkpointing : {false, true}) {
    INFO("checkpointing " << checkpointing);
    gpucmp::decoder_training_options training;
    training.scope = gpucmp::decoder_training_scope::whole_model;
    training.checkpointing = checkpointing;
    gpucmp::decoder_trainer_options options = quick_options();
    options.adamw.learning_rate = 3e-3;
    gpucmp::decoder_trainer t(c, 2, 128, training, options, s.get());
    std::vector<float> losses;
    for (int i = 0; i < 30; ++i) {
      t.step(s.get());
      losses.push_back(t.loss(s.get()));
    }
    INFO("first loss " << losses.front() << ", last " << losses.back());
    CHECK(std::isfinite(losses.back()));
    CHECK(losses.front() > 0.9 * std::log(double(c.vocab_size)));  // random weights: near uniform
    CHECK(losses.back() < 0.5 * losses.front());
    CHECK(losses[10] < losses.front());
  }
}

TEST_CASE("decoder training: bad tokens, labels and shapes are refused by name", "[gpu][models][decoder_training]") {
  gpucmp::stream s;
  const gpucmp::decoder_config c = small_decoder_config(false);
  gpucmp::decoder_training_options whole;
  whole.scope = gpucmp::decoder_training_scope::whole_model;
  gpucmp::decoder_trainer t(c, 1, 32, whole, quick_options(), s.get());
  batch_of_tokens data = random_tokens(1, 32, c.vocab_size, 5);
  data.tokens[3] = 1000;
  CHECK_THROWS_WITH(t.set_tokens(data.tokens, data.labels, s.get()), GPUCMP_CONTAINS("token 3 is id 1000"));
  data.tokens[3] = 1;
  data.labels[4] = -2;
  CHECK_THROWS_WITH(t.set_tokens(data.tokens, data.labels, s.get()), GPUCMP_CONTAINS("label 4 is -2"));
  CHECK_THROWS_WITH(t.set_tokens(data.tokens, std::vector<std::int32_t>(32, -100), s.get()), GPUCMP_CONTAINS("no token has a label"));
  CHECK_THROWS_WITH(t.set_tokens(data.tokens, std::vector<std::int32_t>(31, 1), s.get()), GPUCMP_CONTAINS("31 labels"));
  gpucmp::decoder_trainer blocks(c, 1, 32, {}, quick_options(), s.get());
  CHECK_THROWS_AS(blocks.set_tokens(data.tokens, data.labels, s.get()), gpucmp::invalid_argument);
  CHECK_THROWS_AS(blocks.loss(s.get()), gpucmp::invalid_argument);
  CHECK_THROWS_WITH(gpucmp::decoder_trainer(c, 1, 1024, whole, quick_options(), s.get()), GPUCMP_CONTAINS("longer than"));
  gpucmp::decoder_training_options too_many;
  too_many.blocks = 3;
  CHECK_THROWS_WITH(gpucmp::decoder_trainer(c, 1, 32, too_many, quick_options(), s.get()), GPUCMP_CONTAINS("blocks must be 1 to"));
}
