// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The training step's memory plan (training/training_memory.hpp) on the host: ResNet-50's
// parameters and optimizer state counted exactly (torchvision's 25,557,032 parameters), a
// small residual network's activations, gradient buffers and their reuse worked out by
// hand, the largest batch that fits, and the definitions a training step refuses.
#include "catch.hpp"

#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/training/training_memory.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace {

// 3x8x8 -> conv 4 (3x3) -> conv 4 (3x3, + its own input) -> global average pool -> linear 2.
gpucmp::network_definition small_residual() {
  gpucmp::network_definition def("small_residual", {3, 8, 8});
  auto x = def.conv(def.input(), {4, 3, 1, 1, true}, "a");
  x = def.conv(x, {4, 3, 1, 1, true}, "b", x);
  def.linear(def.global_average_pool(x, "gap"), 2, "fc");
  return def;
}

}  // namespace

TEST_CASE("ResNet-50's training parameters and optimizer state are torchvision's, counted exactly", "[training][memory]") {
  const gpucmp::network_definition def = gpucmp::resnet50_definition();
  const gpucmp::training_memory_plan fp16 = gpucmp::plan_training_memory(def, 256, gpucmp::numerics::fp16);
  const gpucmp::training_memory_plan fp32 = gpucmp::plan_training_memory(def, 256, gpucmp::numerics::fp32);
  // Filters, batch norms' gamma and beta (26,560 channels), fc weight and bias.
  CHECK(fp16.parameter_count == 25557032);
  CHECK(fp16.master_bytes == 4u * 25557032u);
  CHECK(fp16.momentum_bytes == fp16.master_bytes);
  const std::size_t filters = 25557032u - 2u * 26560u - 2048u * 1000u - 1000u;
  CHECK(fp16.model_copy_bytes == 2 * (filters + 2048u * 1000u));
  CHECK(fp32.model_copy_bytes == 0);  // FP32 and TF32 read the masters
  CHECK(fp16.gradient_bytes == 2 * filters + 4 * (2u * 26560u + 2048u * 1000u + 1000u));
  CHECK(fp16.statistics_bytes == 4u * 4u * 26560u);
  // Kept activations: the images, every layer's output and every convolution's output before
  // its batch norm. At batch 256 in FP16 the stem's output alone is 256 x 64 x 112 x 112 x 2.
  CHECK(fp16.conv_output_bytes[0] == 256u * 64u * 112u * 112u * 2u);
  CHECK(fp16.conv_gradient_scratch_bytes == fp16.conv_output_bytes[0]);
  CHECK(fp16.kept_bytes[0] == 256u * 3u * 224u * 224u * 2u);
  // Max pooling's winners: one byte per output of the 64 x 56 x 56 max pool.
  CHECK(fp16.pool_index_bytes == 256u * 64u * 56u * 56u);
  // FP32 doubles every tensor but the logits (FP32 in both) and the winners.
  const std::size_t logits = 256u * 1000u * 4u;
  CHECK(fp32.activation_bytes == 2 * (fp16.activation_bytes - fp16.pool_index_bytes) - logits + fp16.pool_index_bytes);
  // Reuse: gradients live only between their last reader and their producer.
  CHECK(fp16.activation_gradient_bytes < fp16.activation_gradient_bytes_without_reuse / 4);
  // Every block input's second gradient part comes from a data-gradient pass, which adds it in
  // place: no scratch. Added by a kernel instead, the scratch is the largest block input.
  CHECK(fp16.accumulate_scratch_bytes == 0);
  CHECK(gpucmp::plan_training_memory(def, 256, gpucmp::numerics::fp16, false).accumulate_scratch_bytes ==
        256u * 256u * 56u * 56u * 2u);
  CHECK(fp16.total() == fp16.parameter_state_bytes() + fp16.activation_bytes + fp16.gradient_buffer_bytes() +
                            fp16.loss_bytes + fp16.workspace_reserve);
}

TEST_CASE("a small residual network's training memory, worked out by hand", "[training][memory]") {
  const gpucmp::training_memory_plan p = gpucmp::plan_training_memory(small_residual(), 2, gpucmp::numerics::fp32);
  // a: 4x3x3x3 + gamma, beta; b: 4x4x3x3 + gamma, beta; fc: 2x4 + 2.
  CHECK(p.parameter_count == 116 + 152 + 10);
  CHECK(p.master_bytes == 4u * 278u);
  CHECK(p.gradient_bytes == 4u * 278u);
  CHECK(p.statistics_bytes == 4u * 4u * 8u);
  // Tensors at batch 2 (FP32, 256-byte rounded): images 1536, a 2048, b 2048, gap 256, fc 256;
  // both convolutions' outputs before batch norm: 2048 each.
  REQUIRE(p.kept_bytes.size() == 5);
  CHECK(p.kept_bytes[0] == 1536);
  CHECK(p.kept_bytes[1] == 2048);
  CHECK(p.kept_bytes[3] == 256);
  CHECK(p.activation_bytes == 1536 + 2048 + 2048 + 256 + 256 + 2048 + 2048);
  // Backward: fc (writes gap's gradient; the logits' is the loss's), gap (b's), b (a's, twice:
  // input and residual), a (none: it reads the images). Two buffers of 2048 serve all four.
  CHECK(p.gradient_slot_of[0] == SIZE_MAX);
  CHECK(p.gradient_slot_bytes.size() == 2);
  CHECK(p.activation_gradient_bytes == 4096);
  CHECK(p.activation_gradient_bytes_without_reuse == 256 + 256 + 2048 + 2048);
  CHECK(p.gradient_slot_of[1] != p.gradient_slot_of[2]);  // a's gradient is written while b's is read
  CHECK(p.conv_gradient_scratch_bytes == 2048);
  // a's output has two readers, b's batch norm (residual) first, then b's data gradient, which
  // adds its part in place; added by a kernel, it goes through a scratch tensor of a's size.
  CHECK(p.accumulate_scratch_bytes == 0);
  CHECK(gpucmp::plan_training_memory(small_residual(), 2, gpucmp::numerics::fp32, false).accumulate_scratch_bytes == 2048);
}

TEST_CASE("a tensor's gradient parts: data gradients add in place, other later parts use the scratch", "[training][memory]") {
  // ResNet-50: one in-place addition per bottleneck block (its input's second part), nothing
  // through the scratch.
  const gpucmp::gradient_parts_plan resnet = gpucmp::plan_gradient_parts(gpucmp::resnet50_definition(), true);
  CHECK(std::count(resnet.data_gradient_adds.begin(), resnet.data_gradient_adds.end(), true) == 16);
  CHECK(std::count(resnet.uses_scratch.begin(), resnet.uses_scratch.end(), true) == 0);
  CHECK(std::count(resnet.batch_norm_reads_two.begin(), resnet.batch_norm_reads_two.end(), true) == 0);
  // Without: the same 16 parts through the scratch, none in place.
  const gpucmp::gradient_parts_plan kernel = gpucmp::plan_gradient_parts(gpucmp::resnet50_definition(), false);
  CHECK(std::count(kernel.data_gradient_adds.begin(), kernel.data_gradient_adds.end(), true) == 0);
  CHECK(std::count(kernel.uses_scratch.begin(), kernel.uses_scratch.end(), true) == 16);

  // conv a -> max pool (3, stride 1: a's shape) -> conv c (+ a's output) -> gap -> linear. a's
  // output is read by the pool and by c's residual: c's part (its batch norm's) comes first,
  // the pool's second, through the scratch, and as the last part from the layer right after a,
  // a's batch norm may read both.
  gpucmp::network_definition def("pool_and_residual", {3, 8, 8});
  const auto a = def.conv(def.input(), {8, 3, 1, 1, true}, "a");
  const auto pooled = def.max_pool(a, 3, 1, 1, "pool");
  def.linear(def.global_average_pool(def.conv(pooled, {8, 3, 1, 1, true}, "c", a), "gap"), 2, "fc");
  for (bool in_conv : {true, false}) {
    const gpucmp::gradient_parts_plan parts = gpucmp::plan_gradient_parts(def, in_conv);
    CHECK(std::count(parts.data_gradient_adds.begin(), parts.data_gradient_adds.end(), true) == 0);
    REQUIRE(parts.uses_scratch.size() == 6);  // images, a, pool, c, gap, fc
    CHECK(parts.uses_scratch[std::size_t(a.id)]);
    CHECK(std::count(parts.uses_scratch.begin(), parts.uses_scratch.end(), true) == 1);
    CHECK(parts.batch_norm_reads_two[0]);
    CHECK(std::count(parts.batch_norm_reads_two.begin(), parts.batch_norm_reads_two.end(), true) == 1);
    // The scratch holds a's output: 2 x 8 x 8 x 8 FP32 = 4096 bytes.
    CHECK(gpucmp::plan_training_memory(def, 2, gpucmp::numerics::fp32, in_conv).accumulate_scratch_bytes == 4096);
  }
}

TEST_CASE("the largest training batch that fits is found, and definitions that cannot train are refused", "[training][memory]") {
  const gpucmp::network_definition def = gpucmp::resnet50_definition();
  const std::size_t free_bytes = std::size_t{40} << 30;
  const std::int64_t b = gpucmp::largest_training_batch_that_fits(def, gpucmp::numerics::fp16, free_bytes);
  REQUIRE(b > 1);
  CHECK(gpucmp::plan_training_memory(def, b, gpucmp::numerics::fp16).total() <= free_bytes);
  CHECK(gpucmp::plan_training_memory(def, b + 1, gpucmp::numerics::fp16).total() > free_bytes);
  CHECK(gpucmp::largest_training_batch_that_fits(def, gpucmp::numerics::fp16, 1 << 20) == 0);

  gpucmp::network_definition no_classifier("pool_last", {3, 8, 8});
  no_classifier.global_average_pool(no_classifier.conv(no_classifier.input(), {4, 3, 1, 1, true}), "gap");
  CHECK_THROWS_WITH(gpucmp::plan_training_memory(no_classifier, 2, gpucmp::numerics::fp16),
                    GPUCMP_CONTAINS("needs a linear layer last") && GPUCMP_CONTAINS("'gap'"));
  CHECK_THROWS_AS(gpucmp::plan_training_memory(small_residual(), 0, gpucmp::numerics::fp16), gpucmp::invalid_argument);
  // A final softmax is left out: the loss takes the logits.
  gpucmp::network_definition with_softmax = small_residual();
  with_softmax.softmax(with_softmax.output(), "probabilities");
  CHECK(gpucmp::plan_training_memory(with_softmax, 2, gpucmp::numerics::fp32).kept_bytes.size() == 5);
}
