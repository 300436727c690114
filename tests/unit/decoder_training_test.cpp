// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A decoder training step on the host: its FLOPs under MFU's convention (6 a weight a token
// for the linear layers, attention's backward 2.5x its causal forward, the LM head on every
// token when the whole model trains, checkpointing's recomputed pass beside the model's
// FLOPs, never in them), its memory part by part (18 bytes a trained parameter, a block's
// kept activations, checkpointing keeping block inputs and one block run again), what
// checkpointing saves on a whole model and costs on one block, the largest batch each way,
// bad arguments named.
#include "catch.hpp"

#include <gpucmp/models/decoder_training_memory.hpp>
#include <gpucmp/models/decoder_weights.hpp>
#include <gpucmp/training/decoder_parameter_layout.hpp>
#include <gpucmp/specs/specs.hpp>

TEST_CASE("a decoder training step's FLOPs: forward, backward, and checkpointing's second forward", "[models][decoder]") {
  const gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3-8b");
  gpucmp::decoder_training_options o;  // one block
  const gpucmp::decoder_training_work w = gpucmp::plan_decoder_training_work(m, 8, 4096, o);
  CHECK(w.tokens == 32768);
  const double linear = 2.0 * 218103808 * 32768;   // one block's 218,103,808 linear weights
  const double attention = 1099511627776.0;        // 4 x 32 heads x 128 x 4096^2 / 2 x 8 = 2^40
  CHECK(w.forward_flops == linear + attention);
  CHECK(w.backward_flops == 2 * linear + 2.5 * attention);
  CHECK(w.model_flops() == 6.0 * 218103808 * 32768 + 3.5 * attention);
  CHECK(w.attention_flops == 3.5 * attention);
  CHECK(w.recompute_flops == 0);
  CHECK(w.hardware_flops() == w.model_flops());
  o.checkpointing = true;
  const gpucmp::decoder_training_work c = gpucmp::plan_decoder_training_work(m, 8, 4096, o);
  CHECK(c.model_flops() == w.model_flops());  // MFU's numerator does not change
  CHECK(c.recompute_flops == w.forward_flops);
  CHECK(c.hardware_flops() == w.model_flops() + w.forward_flops);
  const gpucmp::work as = c.as_work(gpucmp::precision::bf16);
  CHECK(as.flops == c.model_flops());
  CHECK(as.items == 32768);
  // The whole model: every block, and the LM head (2 x vocab x hidden a token) three times.
  o = {};
  o.scope = gpucmp::decoder_training_scope::whole_model;
  const gpucmp::decoder_training_work all = gpucmp::plan_decoder_training_work(m, 1, 2048, o);
  const double head = 2.0 * 128256 * 4096 * 2048;
  CHECK(all.forward_flops == 32 * 2.0 * 218103808 * 2048 + 32 * 4.0 * 32 * 128 * (2048.0 * 2048 / 2) + head);
  CHECK(all.backward_flops == 2 * (32 * 2.0 * 218103808 * 2048 + head) + 2.5 * 32 * 4.0 * 32 * 128 * (2048.0 * 2048 / 2));
  // The usual 6N rule over the non-embedding weights, and attention beside it.
  CHECK(all.model_flops() == Approx(6.0 * (32 * 218103808.0 + 128256.0 * 4096) * 2048 + all.attention_flops).epsilon(1e-12));
}

TEST_CASE("a decoder training step's memory, part by part", "[models][decoder]") {
  const gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3-8b");
  gpucmp::decoder_training_options o;
  const gpucmp::decoder_training_memory_plan p = gpucmp::plan_decoder_training_memory(m, 8, 4096, o);
  CHECK(p.trained_parameters == 218103808.0 + 2 * 4096);  // the linear layers and both norms
  CHECK(p.parameter_state_bytes == 18 * p.trained_parameters);
  // A token of a block: x, norm(x), the residual after attention and its norm (4 x 4096), Q, K
  // and V (4096 + 2 x 1024), O (4096), gate, up and SwiGLU (3 x 14336) in BF16; two 1/rms and
  // 32 softmax statistics in FP32: 139,400 bytes.
  CHECK(p.block_activation_bytes == 32768.0 * 139400);
  CHECK(p.kept_activation_bytes == p.block_activation_bytes + 32768.0 * 4096 * 2);  // and the block's output
  CHECK(p.recompute_bytes == 0);
  // The scratch: QKV rows and their gradient, dQ dK dV, dO, dSwiGLU, d(gate|up), three
  // residual-width gradients and the block's output gradient.
  CHECK(p.gradient_bytes == 32768.0 * 2 * (3 * 6144 + 4096 + 3 * 14336 + 4 * 4096));
  CHECK(p.head_bytes == 0);
  // The attention operation's Q, O, dO, dQ (4 x 4096) and K, V, dK, dV (4 x 1024) in BF16 and
  // its 32 statistics a token; cuDNN's workspace twice dQ in FP32.
  CHECK(p.attention_bytes == 32768.0 * (2 * (4 * 4096 + 4 * 1024) + 4 * 32));
  CHECK(p.attention_workspace_bytes == 2 * 32768.0 * 4096 * 4);
  CHECK(p.workspace_bytes == 256.0 * 1048576);
  CHECK(p.total() == 16819568640.0);
  // Less the workspaces, 15.48 GB: the H100's step held 15.5 (docs/results/h100-decoder-training.md).
  CHECK(p.total() - p.attention_workspace_bytes - p.workspace_bytes == Approx(15.48e9).epsilon(0.001));
  // One block checkpointed holds its input and output and one block's own either way: no saving.
  o.checkpointing = true;
  const gpucmp::decoder_training_memory_plan c = gpucmp::plan_decoder_training_memory(m, 8, 4096, o);
  CHECK(c.kept_activation_bytes == 2 * 32768.0 * 4096 * 2);
  CHECK(c.recompute_bytes == p.block_activation_bytes - 32768.0 * 4096 * 2);
  CHECK(c.total() == p.total());
}

TEST_CASE("checkpointing a whole decoder keeps one block's activations, and a larger batch fits", "[models][decoder]") {
  const gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3.2-1b");  // 16 blocks, tied LM head
  gpucmp::decoder_training_options o;
  o.scope = gpucmp::decoder_training_scope::whole_model;
  const gpucmp::decoder_training_memory_plan p = gpucmp::plan_decoder_training_memory(m, 4, 4096, o);
  CHECK(p.trained_parameters == 1235814400.0);
  CHECK(p.parameter_state_bytes == 18 * 1235814400.0);
  // BF16 logits of every token (their gradient over them), the final norm's output, its 1/rms,
  // token ids, labels and FP64 losses.
  CHECK(p.head_bytes == 16384.0 * (2 * 128256 + 2 * 2048 + 4 + 16));
  CHECK(p.kept_activation_bytes == 16 * p.block_activation_bytes + 16384.0 * 2048 * 2);
  o.checkpointing = true;
  const gpucmp::decoder_training_memory_plan c = gpucmp::plan_decoder_training_memory(m, 4, 4096, o);
  CHECK(c.kept_activation_bytes == 17 * 16384.0 * 2048 * 2);  // each block's input, the last output
  CHECK(p.total() - c.total() == Approx(15 * (p.block_activation_bytes - 16384.0 * 2048 * 2)).epsilon(1e-12));
  // On an H200, the largest batch each way: checkpointing fits more, and each is the edge.
  const double capacity = gpucmp::usable_memory_bytes(*gpucmp::find_spec_by_key("h200_sxm"));
  o.checkpointing = false;
  const std::int64_t plain = gpucmp::largest_decoder_training_batch(m, 4096, capacity, o);
  REQUIRE(plain >= 1);
  CHECK(gpucmp::plan_decoder_training_memory(m, plain, 4096, o).total() <= capacity);
  CHECK(gpucmp::plan_decoder_training_memory(m, plain + 1, 4096, o).total() > capacity);
  o.checkpointing = true;
  const std::int64_t checkpointed = gpucmp::largest_decoder_training_batch(m, 4096, capacity, o);
  CHECK(checkpointed > 2 * plain);
  CHECK(gpucmp::plan_decoder_training_memory(m, checkpointed + 1, 4096, o).total() > capacity);
  // Llama 3 70B's parameter state alone (1.3 TB) fits no GPU.
  CHECK(gpucmp::largest_decoder_training_batch(gpucmp::decoder_preset("llama-3-70b"), 4096, capacity, o) == 0);
}

TEST_CASE("a decoder training step's bad arguments are named", "[models][decoder]") {
  const gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3-8b");
  gpucmp::decoder_training_options o;
  CHECK_THROWS_WITH(gpucmp::plan_decoder_training_work(m, 0, 16, o), GPUCMP_CONTAINS("batch must be positive, got 0"));
  CHECK_THROWS_WITH(gpucmp::plan_decoder_training_memory(m, 1, 0, o), GPUCMP_CONTAINS("sequence must be positive, got 0"));
  CHECK_THROWS_WITH(gpucmp::plan_decoder_training_work(m, 1, 16384, o),
                    GPUCMP_CONTAINS("sequence 16384 is longer than llama-3-8b's 8192 positions"));
  o.blocks = 0;
  CHECK_THROWS_WITH(gpucmp::plan_decoder_training_work(m, 1, 16, o), GPUCMP_CONTAINS("blocks must be 1 to the model's 32, got 0"));
  o.blocks = 33;
  CHECK_THROWS_WITH(gpucmp::plan_decoder_training_memory(m, 1, 16, o), GPUCMP_CONTAINS("got 33"));
  o.blocks = 1;
  o.workspace_bytes = -1;
  CHECK_THROWS_WITH(gpucmp::plan_decoder_training_work(m, 1, 16, o), GPUCMP_CONTAINS("workspace_bytes"));
  CHECK(std::string(gpucmp::to_string(gpucmp::decoder_training_scope::whole_model)) == "whole_model");
}

TEST_CASE("a decoder training step's flat parameter layout: every tensor once, aligned, in order", "[models][decoder]") {
  gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3.2-1b");  // tied
  gpucmp::decoder_training_options whole;
  whole.scope = gpucmp::decoder_training_scope::whole_model;
  const gpucmp::decoder_parameter_layout tied = gpucmp::plan_decoder_parameters(m, whole);
  CHECK(tied.tensors.size() == std::size_t(6 * m.layers + 2));  // no lm_head
  CHECK(tied.parameters() == m.parameters());
  CHECK_THROWS_WITH(tied.at("lm_head"), GPUCMP_CONTAINS("no tensor 'lm_head'"));
  std::int64_t end = 0;
  for (const gpucmp::decoder_parameter& p : tied.tensors) {
    INFO(p.name);
    CHECK(p.offset % gpucmp::decoder_parameter_alignment == 0);
    CHECK(p.offset >= end);              // in order, never overlapping
    CHECK(p.offset - end < gpucmp::decoder_parameter_alignment);  // gaps only to align
    end = p.offset + p.elements();
  }
  CHECK(tied.total >= end);
  CHECK(tied.total % gpucmp::decoder_parameter_alignment == 0);
  const gpucmp::decoder_parameter& qkv = tied.at("layers.3.qkv");
  CHECK(qkv.rows == (32 + 2 * 8) * 64);
  CHECK(qkv.cols == 2048);
  CHECK(tied.at("layers.15.down").rows == 2048);
  CHECK(tied.at("layers.15.down").cols == 8192);
  CHECK(tied.at("embedding").offset > tied.at("layers.15.down").offset);
  m.tied_embeddings = false;
  const gpucmp::decoder_parameter_layout untied = gpucmp::plan_decoder_parameters(m, whole);
  CHECK(untied.at("lm_head").elements() == m.vocab_size * m.hidden_size);
  CHECK(untied.parameters() == m.parameters());
  gpucmp::decoder_training_options two;
  two.blocks = 2;
  const gpucmp::decoder_parameter_layout blocks = gpucmp::plan_decoder_parameters(m, two);
  CHECK(blocks.tensors.size() == 12);
  CHECK(blocks.parameters() == 2 * (m.block_linear_parameters() + 2 * m.hidden_size));
  CHECK_THROWS_AS(blocks.at("embedding"), gpucmp::invalid_argument);
  two.blocks = 17;
  CHECK_THROWS_WITH(gpucmp::plan_decoder_parameters(m, two), GPUCMP_CONTAINS("blocks must be 1 to the model's 16"));
}

TEST_CASE("a Hugging Face checkpoint's tensors map onto the training layout, fused rows and all", "[models][decoder]") {
  gpucmp::decoder_config m = gpucmp::decoder_preset("llama-3-8b");  // untied
  gpucmp::decoder_training_options whole;
  whole.scope = gpucmp::decoder_training_scope::whole_model;
  const std::vector<gpucmp::decoder_checkpoint_slice> slices = gpucmp::decoder_checkpoint_slices(m, whole);
  const std::vector<gpucmp::decoder_tensor> names = gpucmp::decoder_checkpoint_tensors(m);
  REQUIRE(slices.size() == names.size());
  const gpucmp::decoder_parameter_layout layout = gpucmp::plan_decoder_parameters(m, whole);
  std::int64_t covered = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    INFO(names[i].name);
    CHECK(slices[i].checkpoint_name == names[i].name);  // the checkpoint's order and names
    std::int64_t n = 1;
    for (std::int64_t e : names[i].shape) n *= e;
    CHECK(slices[i].elements() == n);
    const gpucmp::decoder_parameter& p = layout.at(slices[i].tensor);
    CHECK(slices[i].cols == p.cols);
    CHECK(slices[i].first_row + slices[i].rows <= p.rows);
    covered += slices[i].elements();
  }
  CHECK(covered == layout.parameters());  // every trained element once
  const auto find = [&](const std::string& name) {
    for (const auto& s : slices) {
      if (s.checkpoint_name == name) return s;
    }
    FAIL("no slice " << name);
    return slices.front();
  };
  CHECK(find("model.layers.31.self_attn.k_proj.weight").tensor == "layers.31.qkv");
  CHECK(find("model.layers.31.self_attn.k_proj.weight").first_row == 4096);
  CHECK(find("model.layers.31.self_attn.v_proj.weight").first_row == 4096 + 1024);
  CHECK(find("model.layers.0.mlp.up_proj.weight").first_row == 14336);
  CHECK(find("lm_head.weight").tensor == "lm_head");
  gpucmp::decoder_training_options one;  // blocks alone: the first block's nine tensors
  const std::vector<gpucmp::decoder_checkpoint_slice> block = gpucmp::decoder_checkpoint_slices(m, one);
  CHECK(block.size() == 9);
  CHECK(block.front().checkpoint_name == "model.layers.0.input_layernorm.weight");
}
