// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The small Llama-style geometry the decoder's GPU tests run (grouped-query attention, two
// blocks, a 1,000-token vocabulary): small enough for an FP64 reference on the host.
#pragma once

#include <gpucmp/models/decoder_config.hpp>

inline gpucmp::decoder_config small_decoder_config(bool tied) {
  gpucmp::decoder_config c;
  c.name = tied ? "small-tied" : "small";
  c.hidden_size = 256;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 512;
  c.vocab_size = 1000;
  c.max_positions = 512;
  c.tied_embeddings = tied;
  c.rope_theta = 10000;
  return c;
}
