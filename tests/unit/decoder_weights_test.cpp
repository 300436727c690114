// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A Llama-style decoder's checkpoint and configuration on the host: Hugging Face's tensor
// names and shapes (their elements are the parameter count), a checkpoint of one file or of
// shards behind an index checked against a configuration (a missing tensor, a wrong shape, a
// foreign tensor, a tensor in two shards, an index that disagrees with its shards, each named),
// and config.json read into a configuration (Llama 3.1 8B's own file; bad keys named).
#include "catch.hpp"

#include <gpucmp/io/safetensors_writer.hpp>
#include <gpucmp/models/decoder_weights.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

gpucmp::decoder_config tiny(bool tied = false) {
  gpucmp::decoder_config c;
  c.name = "tiny";
  c.hidden_size = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 48;
  c.vocab_size = 50;
  c.max_positions = 128;
  c.tied_embeddings = tied;
  return c;
}

std::vector<gpucmp::named_tensor> tensors_of(const gpucmp::decoder_config& c) {
  std::vector<gpucmp::named_tensor> out;
  float next = 0;
  for (const gpucmp::decoder_tensor& t : gpucmp::decoder_checkpoint_tensors(c)) {
    const std::int64_t n = std::accumulate(t.shape.begin(), t.shape.end(), std::int64_t{1}, std::multiplies<>());
    std::vector<float> values(static_cast<std::size_t>(n));
    for (float& v : values) v = (next += 1) / 1024;
    out.push_back({t.name, t.shape, values});
  }
  return out;
}

// A fresh folder under TMPDIR (or /tmp), removed with what it holds at the end of the test.
struct scratch_folder {
  std::string path;
  std::vector<std::string> files;
  scratch_folder() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/gpucmp-decoder-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  std::string file(const std::string& name) {
    files.push_back(path + "/" + name);
    return files.back();
  }
  ~scratch_folder() {
    for (const std::string& f : files) std::remove(f.c_str());
    rmdir(path.c_str());
  }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace

TEST_CASE("a decoder's checkpoint tensors are Hugging Face's and add up to its parameters", "[models][decoder]") {
  for (const gpucmp::decoder_config& c : gpucmp::decoder_presets()) {
    INFO(c.name);
    std::int64_t elements = 0;
    for (const auto& t : gpucmp::decoder_checkpoint_tensors(c)) {
      elements += std::accumulate(t.shape.begin(), t.shape.end(), std::int64_t{1}, std::multiplies<>());
    }
    CHECK(elements == c.parameters());
  }
  const auto t = gpucmp::decoder_checkpoint_tensors(gpucmp::decoder_preset("llama-3-8b"));
  REQUIRE(t.size() == 1 + 32 * 9 + 2);
  CHECK(t[0].name == "model.embed_tokens.weight");
  CHECK(t[3].name == "model.layers.0.self_attn.k_proj.weight");
  CHECK(t[3].shape == std::vector<std::int64_t>{1024, 4096});
  CHECK(t.back().name == "lm_head.weight");
  CHECK(gpucmp::decoder_checkpoint_tensors(gpucmp::decoder_preset("llama-3.2-1b")).back().name == "model.norm.weight");  // tied
}

TEST_CASE("a one-file checkpoint is checked against its configuration, each problem named", "[models][decoder]") {
  scratch_folder dir;
  const gpucmp::decoder_config c = tiny();
  std::vector<gpucmp::named_tensor> tensors = tensors_of(c);
  const std::string good = dir.file("model.safetensors");
  gpucmp::write_safetensors(good, tensors);
  const gpucmp::decoder_checkpoint checkpoint = gpucmp::decoder_checkpoint::open(good);
  CHECK_NOTHROW(checkpoint.validate(c));
  const std::vector<float> norm = checkpoint.read_float("model.norm.weight", {32});
  CHECK(norm.size() == 32);
  CHECK(norm[0] > 0);
  // A missing tensor.
  auto without = tensors;
  without.erase(without.begin() + 6);  // model.layers.0.post_attention_layernorm.weight
  const std::string missing = dir.file("missing.safetensors");
  gpucmp::write_safetensors(missing, without);
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(missing).validate(c),
                    GPUCMP_CONTAINS("missing.safetensors: tensor 'model.layers.0.post_attention_layernorm.weight' is missing (tiny)"));
  // A shape of another configuration (8 KV heads' K projection).
  auto wrong = tensors;
  wrong[3].shape = {64, 32};
  wrong[3].values.resize(64 * 32, 0.5f);
  const std::string shaped = dir.file("shape.safetensors");
  gpucmp::write_safetensors(shaped, wrong);
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(shaped).validate(c),
                    GPUCMP_CONTAINS("tensor 'model.layers.0.self_attn.k_proj.weight' has shape [64, 32], tiny needs [16, 32]"));
  // A tensor of another model (a third layer), and the tied variant that lacks lm_head.
  auto extra = tensors;
  extra.push_back({"model.layers.2.input_layernorm.weight", {32}, std::vector<float>(32, 1.0f)});
  const std::string foreign = dir.file("foreign.safetensors");
  gpucmp::write_safetensors(foreign, extra);
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(foreign).validate(c),
                    GPUCMP_CONTAINS("tensor 'model.layers.2.input_layernorm.weight' is not part of tiny"));
  auto tied = tensors_of(tiny(true));
  tied.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, std::vector<float>(4, 1.0f)});  // some exports keep it
  const std::string tied_file = dir.file("tied.safetensors");
  gpucmp::write_safetensors(tied_file, tied);
  CHECK_NOTHROW(gpucmp::decoder_checkpoint::open(tied_file).validate(tiny(true)));
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(tied_file).validate(c), GPUCMP_CONTAINS("tensor 'lm_head.weight' is missing"));
}

TEST_CASE("a sharded checkpoint is read through its index, and disagreements are named", "[models][decoder]") {
  scratch_folder dir;
  const gpucmp::decoder_config c = tiny();
  const std::vector<gpucmp::named_tensor> tensors = tensors_of(c);
  const std::vector<gpucmp::named_tensor> first(tensors.begin(), tensors.begin() + 10), second(tensors.begin() + 10, tensors.end());
  gpucmp::write_safetensors(dir.file("model-00001-of-00002.safetensors"), first);
  gpucmp::write_safetensors(dir.file("model-00002-of-00002.safetensors"), second);
  auto index_text = [&](const std::string& moved_tensor, const std::string& moved_to) {
    std::string map;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      std::string shard = i < 10 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
      if (tensors[i].name == moved_tensor) shard = moved_to;
      map += std::string(map.empty() ? "" : ",") + "\"" + tensors[i].name + "\": \"" + shard + "\"";
    }
    return "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {" + map + "}}";
  };
  const std::string index = dir.file("model.safetensors.index.json");
  write_text(index, index_text("", ""));
  const gpucmp::decoder_checkpoint checkpoint = gpucmp::decoder_checkpoint::open(index);
  CHECK(checkpoint.files().size() == 2);
  CHECK_NOTHROW(checkpoint.validate(c));
  CHECK(checkpoint.read_float("lm_head.weight", {50, 32}).size() == 50 * 32);
  // The index puts a tensor in the other shard.
  write_text(index, index_text("model.norm.weight", "model-00001-of-00002.safetensors"));
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(index),
                    GPUCMP_CONTAINS("the index puts tensor 'model.norm.weight' in model-00001-of-00002.safetensors, which does not hold it"));
  // A shard the index names that is not there.
  write_text(index, index_text("model.norm.weight", "model-00003-of-00002.safetensors"));
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(index), GPUCMP_CONTAINS("model-00003-of-00002.safetensors: cannot open"));
  // Malformed, and without a weight map.
  write_text(index, "{\"weight_map\": ");
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(index), GPUCMP_CONTAINS("model.safetensors.index.json: malformed index"));
  write_text(index, "{\"metadata\": {}}");
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(index), GPUCMP_CONTAINS("the index has no weight_map object"));
  // One tensor in two shards.
  gpucmp::write_safetensors(dir.file("model-00002-of-00002.safetensors"), std::vector<gpucmp::named_tensor>(tensors.begin() + 9, tensors.end()));
  write_text(index, index_text("", ""));
  CHECK_THROWS_WITH(gpucmp::decoder_checkpoint::open(index), GPUCMP_CONTAINS("tensor '" + tensors[9].name + "' is in both"));
}

TEST_CASE("a Hugging Face config.json is read into a decoder configuration", "[models][decoder]") {
  // Llama 3.1 8B's config.json (meta-llama/Llama-3.1-8B), its keys as published.
  const std::string llama31 = R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000, "eos_token_id": 128001,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0",
    "use_cache": true, "vocab_size": 128256})";
  const gpucmp::decoder_config c = gpucmp::decoder_config_from_json(llama31, "config.json", "llama-3.1-8b");
  const gpucmp::decoder_config preset = gpucmp::decoder_preset("llama-3.1-8b");
  CHECK(c.parameters() == preset.parameters());
  CHECK(c.head_dim == 128);  // hidden / heads, as the file gives no head_dim
  CHECK(c.kv_heads == 8);
  CHECK(c.max_positions == 131072);
  CHECK(c.rope.factor == 8);
  CHECK(c.rope.original_positions == 8192);
  CHECK(c.norm_eps == 1e-5);
  CHECK(!c.tied_embeddings);
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json("{\"hidden_size\": 8}", "c.json", "x"),
                    GPUCMP_CONTAINS("c.json: num_hidden_layers is missing"));
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json(R"({"model_type": "mistral"})", "c.json", "x"),
                    GPUCMP_CONTAINS("model_type is 'mistral', not 'llama'"));
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json("{\"hidden_size\": \"4096\"}", "c.json", "x"),
                    GPUCMP_CONTAINS("hidden_size must be a number"));
  std::string dynamic = llama31;
  dynamic.replace(dynamic.find("\"llama3\""), 8, "\"dynamic\"");
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json(dynamic, "c.json", "x"), GPUCMP_CONTAINS("rope_type 'llama3'"));
  std::string odd = llama31;
  odd.replace(odd.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 5");
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json(odd, "c.json", "x"), GPUCMP_CONTAINS("heads 32 is not a multiple of kv_heads 5"));
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json("{\"hidden", "c.json", "x"), GPUCMP_CONTAINS("c.json: malformed JSON"));
  // transformers 5 writes the base and the scaling into rope_parameters.
  auto swap_text = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  std::string v5 = swap_text(llama31, "\"rope_scaling\"", "\"rope_parameters\"");
  v5 = swap_text(v5, "\"rope_theta\": 500000.0,", "");
  v5 = swap_text(v5, "\"rope_type\": \"llama3\"", "\"rope_type\": \"llama3\", \"rope_theta\": 500000.0");
  const gpucmp::decoder_config c5 = gpucmp::decoder_config_from_json(v5, "config.json", "llama-3.1-8b");
  CHECK(c5.rope_theta == 500000);
  CHECK(c5.rope.factor == 8);
  CHECK(c5.rope.original_positions == 8192);
  const std::string plain = R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 512,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "tie_word_embeddings": true})";
  const gpucmp::decoder_config small = gpucmp::decoder_config_from_json(plain, "config.json", "small");
  CHECK(small.rope_theta == 10000);
  CHECK(small.rope.factor == 1);  // no scaling
  CHECK(small.tied_embeddings);
  const std::string yarn = swap_text(plain, "\"default\"", "\"yarn\"");
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json(yarn, "c.json", "x"), GPUCMP_CONTAINS("rope_parameters.rope_type must be 'default' or 'llama3'"));
  const std::string no_theta = swap_text(plain, "\"rope_theta\": 10000.0, ", "");
  CHECK_THROWS_WITH(gpucmp::decoder_config_from_json(no_theta, "c.json", "x"), GPUCMP_CONTAINS("c.json: rope_theta is missing"));
}
