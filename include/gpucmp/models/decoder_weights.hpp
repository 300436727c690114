// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A Llama-style decoder's checkpoint as Hugging Face stores it: the tensors a configuration
// needs under their Hugging Face names and shapes (decoder_checkpoint_tensors), and a
// checkpoint — one .safetensors file, or the shards a model.safetensors.index.json names —
// checked against a configuration before anything is loaded: every tensor present exactly
// once, with its shape and a float type, in the file the index says, and nothing another model
// would have. Each problem is an error naming the file and the tensor. Host-only.
#pragma once

#include <gpucmp/io/json.hpp>
#include <gpucmp/io/safetensors.hpp>
#include <gpucmp/models/decoder_config.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// One tensor a decoder's checkpoint holds.
struct decoder_tensor {
  std::string name;                 ///< Hugging Face's: "model.layers.0.self_attn.q_proj.weight"
  std::vector<std::int64_t> shape;  ///< row-major; a linear layer's is (out_features, in_features)
};

/// Every tensor `c` needs, in Hugging Face's names: the embedding, each block's norms and
/// Q/K/V/O and gate/up/down projections, the final norm, and the LM head unless tied.
/// Their elements add up to c.parameters().
inline std::vector<decoder_tensor> decoder_checkpoint_tensors(const decoder_config& c) {
  c.validate();
  const std::int64_t h = c.hidden_size, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim, m = c.intermediate_size;
  std::vector<decoder_tensor> out{{"model.embed_tokens.weight", {c.vocab_size, h}}};
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    out.push_back({l + "input_layernorm.weight", {h}});
    out.push_back({l + "self_attn.q_proj.weight", {q, h}});
    out.push_back({l + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({l + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({l + "self_attn.o_proj.weight", {h, q}});
    out.push_back({l + "post_attention_layernorm.weight", {h}});
    out.push_back({l + "mlp.gate_proj.weight", {m, h}});
    out.push_back({l + "mlp.up_proj.weight", {m, h}});
    out.push_back({l + "mlp.down_proj.weight", {h, m}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tied_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

/// A decoder checkpoint: one or more safetensors files and which holds each tensor.
class decoder_checkpoint {
 public:
  /// Opens `path`: a .safetensors file, or a Hugging Face model.safetensors.index.json whose
  /// weight_map names each tensor's shard (opened from the index's folder). Throws
  /// weight_error naming the file and the problem (unreadable, malformed, a shard that is
  /// missing or does not hold what the index says).
  static decoder_checkpoint open(const std::string& path) {
    if (!detail::ends_with(path, ".json")) return of({safetensors_file::open(path)});
    std::ifstream in(path, std::ios::binary);
    if (!in) throw weight_error(path + ": cannot open the checkpoint index");
    std::ostringstream text;
    text << in.rdbuf();
    detail::json index;
    try {
      index = detail::parse_json(text.str());
    } catch (const detail::json_error& e) {
      throw weight_error(path + ": malformed index: " + e.what());
    }
    const detail::json* map = index.find("weight_map");
    if (map == nullptr || !map->is_object()) throw weight_error(path + ": the index has no weight_map object");
    const std::string folder = path.find('/') == std::string::npos ? std::string() : path.substr(0, path.rfind('/') + 1);
    std::map<std::string, std::string> wanted;  // tensor -> shard
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : map->members()) {
      if (!shard.is_string() || shard.string().empty() || shard.string().find('/') != std::string::npos) {
        throw weight_error(path + ": tensor '" + tensor + "' is mapped to something that is not a file name in the index's folder");
      }
      wanted[tensor] = shard.string();
      shards.insert(shard.string());
    }
    std::vector<safetensors_file> files;
    for (const std::string& shard : shards) files.push_back(safetensors_file::open(folder + shard));
    decoder_checkpoint c = of(std::move(files));
    for (const auto& [tensor, shard] : wanted) {
      const auto at = c.m_where.find(tensor);
      if (at == c.m_where.end() || c.m_files[at->second].source() != folder + shard) {
        throw weight_error(path + ": the index puts tensor '" + tensor + "' in " + shard + ", which does not hold it");
      }
    }
    for (const auto& [tensor, file] : c.m_where) {
      if (!wanted.count(tensor)) {
        throw weight_error(path + ": tensor '" + tensor + "' of " + c.m_files[file].source() + " is not in the index");
      }
    }
    return c;
  }

  /// A checkpoint of files already read. Throws weight_error when two hold the same tensor.
  static decoder_checkpoint of(std::vector<safetensors_file> files) {
    decoder_checkpoint c;
    c.m_files = std::move(files);
    for (std::size_t f = 0; f < c.m_files.size(); ++f) {
      for (const tensor_entry& t : c.m_files[f].tensors()) {
        const auto [at, inserted] = c.m_where.emplace(t.name, f);
        if (!inserted) {
          throw weight_error("tensor '" + t.name + "' is in both " + c.m_files[at->second].source() + " and " + c.m_files[f].source());
        }
      }
    }
    return c;
  }

  /// Checks the checkpoint holds every tensor `config` needs with its shape and a float type
  /// (F32, F16, BF16), and nothing else but the rotary frequencies some exports keep
  /// ("rotary_emb.inv_freq", recomputed here from the configuration); throws weight_error
  /// naming the first problem (file, tensor, expected against found).
  void validate(const decoder_config& config) const {
    std::set<std::string> expected;
    for (const decoder_tensor& t : decoder_checkpoint_tensors(config)) {
      expected.insert(t.name);
      const auto at = m_where.find(t.name);
      if (at == m_where.end()) throw weight_error(where() + ": tensor '" + t.name + "' is missing (" + config.name + ")");
      const safetensors_file& file = m_files[at->second];
      const tensor_entry& entry = file.find(t.name);
      if (entry.shape != t.shape) {
        throw weight_error(file.source() + ": tensor '" + t.name + "' has shape " + shape_text(entry.shape) + ", " + config.name +
                           " needs " + shape_text(t.shape));
      }
      if (entry.dtype != "F32" && entry.dtype != "F16" && entry.dtype != "BF16") {
        throw weight_error(file.source() + ": tensor '" + t.name + "' is " + entry.dtype + "; weights must be F32, F16 or BF16");
      }
    }
    for (const auto& [name, file] : m_where) {
      if (!expected.count(name) && !detail::ends_with(name, ".rotary_emb.inv_freq")) {
        throw weight_error(m_files[file].source() + ": tensor '" + name + "' is not part of " + config.name +
                           " (another model's checkpoint, or another configuration?)");
      }
    }
  }

  /// The values of tensor `name` as float, its shape checked against `shape`; throws
  /// weight_error naming the tensor.
  std::vector<float> read_float(const std::string& name, const std::vector<std::int64_t>& shape) const {
    const auto at = m_where.find(name);
    if (at == m_where.end()) throw weight_error(where() + ": tensor '" + name + "' is missing");
    return m_files[at->second].read_float(name, shape);
  }

  /// The files, in the order read.
  const std::vector<safetensors_file>& files() const noexcept { return m_files; }

 private:
  std::string where() const {
    if (m_files.size() == 1) return m_files[0].source();
    return "the checkpoint (" + std::to_string(m_files.size()) + " files)";
  }

  std::vector<safetensors_file> m_files;
  std::map<std::string, std::size_t> m_where;  // tensor -> file
};

}  // namespace gpucmp
