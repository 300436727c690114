// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Writes named FP32 tensors as a safetensors file (an 8-byte little-endian header length, a
// JSON header of names, dtypes, shapes and data offsets, then the data), the format
// io/safetensors.hpp reads and torch loads: how a training run hands its parameters,
// gradients and batch to the PyTorch comparison. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/io/safetensors.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace gpucmp {

/// One tensor to write: its name, shape (row-major) and FP32 values.
struct named_tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

/// The safetensors bytes of `tensors`, in their order. Throws invalid_argument for an empty
/// or repeated name, a name with a quote or backslash, or values that do not fill the shape.
inline std::string safetensors_bytes(const std::vector<named_tensor>& tensors) {
  std::string header = "{";
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const named_tensor& t : tensors) {
    if (t.name.empty() || t.name.find_first_of("\"\\") != std::string::npos) {
      throw invalid_argument("safetensors: tensor name '" + t.name + "' is empty or has a quote or backslash");
    }
    if (!names.insert(t.name).second) throw invalid_argument("safetensors: two tensors are named '" + t.name + "'");
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) {
      if (d < 0) throw invalid_argument("safetensors: tensor '" + t.name + "' has a negative extent");
      count *= d;
    }
    if (std::size_t(count) != t.values.size()) {
      throw invalid_argument("safetensors: tensor '" + t.name + "' has " + std::to_string(t.values.size()) + " values for shape " +
                             shape_text(t.shape));
    }
    if (header.size() > 1) header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"F32\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    const std::uint64_t end = offset + 4 * std::uint64_t(count);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';  // the data starts 8-byte aligned
  std::string bytes(8, '\0');
  const std::uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes[std::size_t(i)] = char((length >> (8 * i)) & 0xFF);
  bytes += header;
  for (const named_tensor& t : tensors) {
    const std::size_t at = bytes.size();
    bytes.resize(at + 4 * t.values.size());
    if (!t.values.empty()) std::memcpy(&bytes[at], t.values.data(), 4 * t.values.size());
  }
  return bytes;
}

/// Writes `tensors` to `path`; throws invalid_argument as safetensors_bytes(), error when the
/// file cannot be written.
inline void write_safetensors(const std::string& path, const std::vector<named_tensor>& tensors) {
  const std::string bytes = safetensors_bytes(tensors);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw error(path + ": cannot write the safetensors file");
}

}  // namespace gpucmp
