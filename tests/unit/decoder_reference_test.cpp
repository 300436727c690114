// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// The FP64 decoder reference on the host: every gradient against central finite differences
// (a block's input and weight parts under a random projection of its output, with
// grouped-query attention, Llama 3.1's RoPE scaling and two sequences; a whole model's
// embedding, final norm and LM head under its cross-entropy, tied and untied, one label
// ignored); attention causal and kept within each sequence; PyTorch's AdamW step by hand
// (training/adamw.hpp), in double and float; bad shapes and labels named.
#include "catch.hpp"

#include <gpucmp/training/decoder_reference.hpp>

#include <cmath>
#include <random>

namespace {

namespace ref = gpucmp::reference;

gpucmp::decoder_config tiny() {
  gpucmp::decoder_config c;
  c.name = "tiny";
  c.hidden_size = 12;
  c.layers = 1;
  c.heads = 4;
  c.kv_heads = 2;  // two query heads share each K/V head
  c.head_dim = 4;
  c.intermediate_size = 10;
  c.vocab_size = 16;
  c.max_positions = 64;
  c.rope_theta = 10000;
  c.rope.factor = 8;  // Llama 3.1's scaling, with a short original context so every branch is used
  c.rope.original_positions = 16;
  c.norm_eps = 1e-5;
  return c;
}

void fill(std::vector<double>& v, std::mt19937_64& rng, double spread, double offset = 0) {
  std::uniform_real_distribution<double> u(-spread, spread);
  for (double& x : v) x = offset + u(rng);
}

ref::decoder_block_weights random_weights(const gpucmp::decoder_config& c, std::mt19937_64& rng) {
  ref::decoder_block_weights w = ref::decoder_block_weights::zeros(c);
  fill(w.attention_norm, rng, 0.3, 1.0);
  fill(w.mlp_norm, rng, 0.3, 1.0);
  fill(w.qkv.v, rng, 0.6);
  fill(w.o.v, rng, 0.4);
  fill(w.gate_up.v, rng, 0.6);
  fill(w.down.v, rng, 0.4);
  return w;
}

// L = sum(dy * y): its gradient is what the backward pass returns for dy.
double loss(const gpucmp::decoder_config& c, const ref::decoder_block_weights& w, const ref::matrix& x, std::int64_t sequence,
            const ref::matrix& dy) {
  ref::decoder_block_saved saved;
  const ref::matrix y = ref::decoder_block_forward(c, w, x, sequence, saved);
  double l = 0;
  for (std::size_t e = 0; e < y.v.size(); ++e) l += y.v[e] * dy.v[e];
  return l;
}

}  // namespace

TEST_CASE("the decoder block's gradients match finite differences", "[training][decoder]") {
  const gpucmp::decoder_config c = tiny();
  std::mt19937_64 rng(7);
  ref::decoder_block_weights w = random_weights(c, rng);
  const std::int64_t sequence = 5;
  ref::matrix x(2 * sequence, c.hidden_size), dy(2 * sequence, c.hidden_size);
  fill(x.v, rng, 1.0);
  fill(dy.v, rng, 1.0);
  ref::decoder_block_saved saved;
  ref::decoder_block_forward(c, w, x, sequence, saved);
  ref::decoder_block_weights grads = ref::decoder_block_weights::zeros(c);
  const ref::matrix dx = ref::decoder_block_backward(c, w, saved, dy, grads);
  const double h = 1e-5;
  auto check = [&](double& value, double analytic, const char* what, std::size_t index) {
    const double kept = value;
    value = kept + h;
    const double up = loss(c, w, x, sequence, dy);
    value = kept - h;
    const double down = loss(c, w, x, sequence, dy);
    value = kept;
    const double numeric = (up - down) / (2 * h);
    INFO(what << "[" << index << "]: analytic " << analytic << ", finite differences " << numeric);
    CHECK(std::fabs(analytic - numeric) <= 1e-7 * std::max(1.0, std::fabs(numeric)));
  };
  for (std::size_t e = 0; e < x.v.size(); e += 7) check(x.v[e], dx.v[e], "x", e);
  struct part {
    std::vector<double>* values;
    const std::vector<double>* gradients;
    const char* name;
  };
  const part parts[] = {{&w.attention_norm, &grads.attention_norm, "attention_norm"}, {&w.qkv.v, &grads.qkv.v, "qkv"},
                        {&w.o.v, &grads.o.v, "o"},          {&w.mlp_norm, &grads.mlp_norm, "mlp_norm"},
                        {&w.gate_up.v, &grads.gate_up.v, "gate_up"}, {&w.down.v, &grads.down.v, "down"}};
  for (const part& p : parts) {
    // Every Q, K and V head's rows are reached with stride 5 over the fused QKV matrix.
    for (std::size_t e = 0; e < p.values->size(); e += 5) check((*p.values)[e], (*p.gradients)[e], p.name, e);
  }
  // The gradients are not trivially small: a check of zeros against zeros would pass anything.
  double largest = 0;
  for (double g : grads.qkv.v) largest = std::max(largest, std::fabs(g));
  CHECK(largest > 1e-2);
}

TEST_CASE("the decoder block attends causally within each sequence", "[training][decoder]") {
  const gpucmp::decoder_config c = tiny();
  std::mt19937_64 rng(11);
  const ref::decoder_block_weights w = random_weights(c, rng);
  const std::int64_t sequence = 4;
  ref::matrix x(3 * sequence, c.hidden_size);
  fill(x.v, rng, 1.0);
  ref::decoder_block_saved saved;
  const ref::matrix y = ref::decoder_block_forward(c, w, x, sequence, saved);
  ref::matrix changed = x;
  for (std::int64_t i = 0; i < c.hidden_size; ++i) changed.at(sequence + 2, i) += 0.5;  // sequence 1, position 2
  const ref::matrix z = ref::decoder_block_forward(c, w, changed, sequence, saved);
  for (std::int64_t t = 0; t < x.rows; ++t) {
    double moved = 0;
    for (std::int64_t i = 0; i < c.hidden_size; ++i) moved = std::max(moved, std::fabs(z.at(t, i) - y.at(t, i)));
    INFO("token " << t);
    if (t >= sequence + 2 && t < 2 * sequence) {
      CHECK(moved > 1e-3);  // that token and the later ones of its sequence
    } else {
      CHECK(moved == 0);  // earlier positions, and the other sequences
    }
  }
  // The same tokens at another place in the batch give the same output (positions restart).
  ref::matrix first(sequence, c.hidden_size);
  for (std::int64_t t = 0; t < sequence; ++t)
    for (std::int64_t i = 0; i < c.hidden_size; ++i) first.at(t, i) = x.at(2 * sequence + t, i);
  const ref::matrix alone = ref::decoder_block_forward(c, w, first, sequence, saved);
  for (std::int64_t t = 0; t < sequence; ++t)
    for (std::int64_t i = 0; i < c.hidden_size; ++i) CHECK(alone.at(t, i) == Approx(y.at(2 * sequence + t, i)).epsilon(1e-12));
}

TEST_CASE("a whole decoder's loss and every gradient match finite differences, tied and untied", "[training][decoder]") {
  for (bool tied : {false, true}) {
    gpucmp::decoder_config c = tiny();
    c.tied_embeddings = tied;
    c.vocab_size = 24;
    std::mt19937_64 rng(tied ? 21 : 23);
    ref::decoder_block_weights block = random_weights(c, rng);
    ref::decoder_head_weights head = ref::decoder_head_weights::zeros(c);
    fill(head.embedding.v, rng, 1.0);
    fill(head.final_norm, rng, 0.3, 1.0);
    fill(head.lm_head.v, rng, 0.5);
    const std::int64_t sequence = 4;
    const std::vector<std::int32_t> tokens{3, 7, 7, 1, 20, 3, 0, 11};
    std::vector<std::int32_t> labels{7, 7, 1, ref::ignored_label, 3, 0, 11, 5};  // the next token; one ignored
    auto loss_of = [&]() {
      ref::decoder_block_saved bs;
      ref::decoder_head_saved hs;
      const ref::matrix x = ref::decoder_block_forward(c, block, ref::embedding_forward(head.embedding, tokens), sequence, bs);
      return ref::decoder_head_forward(c, head, x, labels, hs);
    };
    ref::decoder_block_saved bs;
    ref::decoder_head_saved hs;
    const ref::matrix x = ref::decoder_block_forward(c, block, ref::embedding_forward(head.embedding, tokens), sequence, bs);
    const double loss = ref::decoder_head_forward(c, head, x, labels, hs);
    CHECK(hs.counted == 7);
    CHECK(loss > 0);
    CHECK(loss == Approx(loss_of()).epsilon(1e-15));
    ref::decoder_head_weights head_grads = ref::decoder_head_weights::zeros(c);
    ref::decoder_block_weights block_grads = ref::decoder_block_weights::zeros(c);
    const ref::matrix dx = ref::decoder_head_backward(c, head, hs, labels, head_grads);
    ref::embedding_backward(ref::decoder_block_backward(c, block, bs, dx, block_grads), tokens, head_grads.embedding);
    const double h = 1e-5;
    auto check = [&](double& value, double analytic, const char* what, std::size_t index) {
      const double kept = value;
      value = kept + h;
      const double up = loss_of();
      value = kept - h;
      const double down = loss_of();
      value = kept;
      const double numeric = (up - down) / (2 * h);
      INFO((tied ? "tied " : "untied ") << what << "[" << index << "]: analytic " << analytic << ", finite differences " << numeric);
      CHECK(std::fabs(analytic - numeric) <= 1e-7 * std::max(1.0, std::fabs(numeric)));
    };
    for (std::size_t e = 0; e < head.embedding.v.size(); e += 7) check(head.embedding.v[e], head_grads.embedding.v[e], "embedding", e);
    for (std::size_t e = 0; e < head.final_norm.size(); ++e) check(head.final_norm[e], head_grads.final_norm[e], "final_norm", e);
    for (std::size_t e = 0; e < head.lm_head.v.size(); e += 5) check(head.lm_head.v[e], head_grads.lm_head.v[e], "lm_head", e);
    for (std::size_t e = 0; e < block.down.v.size(); e += 9) check(block.down.v[e], block_grads.down.v[e], "down", e);
    // A row of the embedding that no token uses gets no gradient but through a tied head.
    double unused = 0;
    for (std::int64_t i = 0; i < c.hidden_size; ++i) unused = std::max(unused, std::fabs(head_grads.embedding.at(2, i)));
    CHECK((unused > 0) == tied);
  }
  gpucmp::decoder_config c = tiny();
  c.vocab_size = 24;
  ref::decoder_head_weights head = ref::decoder_head_weights::zeros(c);
  ref::decoder_head_saved hs;
  const ref::matrix x(2, c.hidden_size);
  CHECK_THROWS_WITH(ref::decoder_head_forward(c, head, x, {ref::ignored_label, ref::ignored_label}, hs), GPUCMP_CONTAINS("no token has a label"));
  CHECK_THROWS_WITH(ref::decoder_head_forward(c, head, x, {1, 24}, hs), GPUCMP_CONTAINS("label 1 is 24, outside the vocabulary of 24"));
  CHECK_THROWS_WITH(ref::decoder_head_forward(c, head, x, {1}, hs), GPUCMP_CONTAINS("1 labels for 2 tokens"));
  CHECK_THROWS_WITH(ref::embedding_forward(head.embedding, {3, -1}), GPUCMP_CONTAINS("token 1 is -1, outside the vocabulary of 24"));
}

TEST_CASE("AdamW's step is PyTorch's: decay first, then the bias-corrected update", "[training][decoder]") {
  gpucmp::adamw_options o;
  o.learning_rate = 0.1;
  o.weight_decay = 0.5;
  double p = 2.0, m = 0, v = 0;
  gpucmp::adamw_update_reference(p, 0.4, m, v, 1, o);
  // Decay: 2 x (1 - 0.05) = 1.9. m = 0.04, v = 0.00016; corrected 0.4 and 0.16; step 0.1 x 0.4 / (0.4 + 1e-8).
  CHECK(m == Approx(0.04).epsilon(1e-12));
  CHECK(v == Approx(0.00016).epsilon(1e-12));
  CHECK(p == Approx(1.9 - 0.1 * 0.4 / (0.4 + 1e-8)).epsilon(1e-12));
  gpucmp::adamw_update_reference(p, -0.2, m, v, 2, o);
  const double m2 = 0.9 * 0.04 - 0.1 * 0.2, v2 = 0.999 * 0.00016 + 0.001 * 0.04;
  const double p2 = (1.9 - 0.1 * 0.4 / (0.4 + 1e-8)) * 0.95 - 0.1 / (1 - 0.81) * m2 / (std::sqrt(v2) / std::sqrt(1 - 0.998001) + 1e-8);
  CHECK(p == Approx(p2).epsilon(1e-12));
  // In float, as a GPU step keeps it: the same step within float's rounding.
  float pf = 2.0f, mf = 0, vf = 0;
  gpucmp::adamw_update_reference(pf, 0.4f, mf, vf, 1, o);
  CHECK(double(pf) == Approx(1.9 - 0.1 * 0.4 / (0.4 + 1e-8)).epsilon(1e-6));
  CHECK_THROWS_WITH(gpucmp::adamw_update_reference(p, 0.0, m, v, 0, o), GPUCMP_CONTAINS("step must be 1 or more, got 0"));
  o.beta2 = 1;
  CHECK_THROWS_WITH(o.validate(), GPUCMP_CONTAINS("beta2 must be in [0, 1)"));
}

TEST_CASE("the decoder block reference names a bad shape", "[training][decoder]") {
  const gpucmp::decoder_config c = tiny();
  ref::decoder_block_weights w = ref::decoder_block_weights::zeros(c);
  ref::decoder_block_saved saved;
  CHECK_THROWS_WITH(ref::decoder_block_forward(c, w, ref::matrix(6, 11), 3, saved),
                    GPUCMP_CONTAINS("x has 11 columns, the model's hidden size is 12"));
  CHECK_THROWS_WITH(ref::decoder_block_forward(c, w, ref::matrix(7, 12), 3, saved),
                    GPUCMP_CONTAINS("tokens 7 are not whole sequences of 3"));
  w.o = ref::matrix(12, 15);
  CHECK_THROWS_WITH(ref::decoder_block_forward(c, w, ref::matrix(6, 12), 3, saved), GPUCMP_CONTAINS("not tiny's"));
  w = ref::decoder_block_weights::zeros(c);
  ref::decoder_block_forward(c, w, ref::matrix(6, 12), 3, saved);
  ref::decoder_block_weights grads = ref::decoder_block_weights::zeros(c);
  CHECK_THROWS_WITH(ref::decoder_block_backward(c, w, saved, ref::matrix(3, 12), grads), GPUCMP_CONTAINS("dy's shape"));
}
