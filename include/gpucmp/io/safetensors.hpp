// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Reading model weights from a safetensors file (8-byte little-endian header length, a JSON
// header of name -> {dtype, shape, data_offsets}, then the raw data). Every malformed,
// truncated or mismatched file gives a weight_error naming the file, the tensor and the
// problem. Host-only.
#pragma once

#include <gpucmp/io/json.hpp>
#include <gpucmp/cuda/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// A weight file that cannot be used; the message names the file, the tensor and the problem.
class weight_error : public error {
 public:
  using error::error;
};

/// One tensor of a safetensors file.
struct tensor_entry {
  std::string name;                 ///< tensor name, e.g. "layer1.0.conv1.weight"
  std::string dtype;                ///< safetensors dtype: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2
  std::vector<std::int64_t> shape;  ///< dimensions
  std::uint64_t begin = 0;          ///< first byte in the data section
  std::uint64_t end = 0;            ///< one past the last byte

  /// Number of elements (1 for a scalar).
  std::uint64_t element_count() const noexcept {
    std::uint64_t n = 1;
    for (auto d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
  }
};

namespace detail {
/// Whether tensor or file name `text` ends with `tail` (".num_batches_tracked", ".json").
inline bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace detail

/// "[64, 3, 7, 7]".
inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace detail {

inline std::size_t safetensors_dtype_bytes(const std::string& dtype) noexcept {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

inline float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  }
  return sign ? -value : value;
}

inline float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace detail

/// A safetensors file held in memory, its header validated against its data.
class safetensors_file {
 public:
  /// Reads and validates `path`; throws weight_error.
  static safetensors_file open(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw weight_error(path + ": cannot open the weight file");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return parse(bytes.str(), path);
  }

  /// Validates the file content `bytes`, naming it `source` in errors; throws weight_error.
  static safetensors_file parse(std::string bytes, const std::string& source) {
    safetensors_file f;
    f.m_source = source;
    f.m_bytes = std::move(bytes);
    f.read_header();
    return f;
  }

  /// The name errors use for this file (its path).
  const std::string& source() const noexcept { return m_source; }

  /// Every tensor, in data order.
  const std::vector<tensor_entry>& tensors() const noexcept { return m_tensors; }

  /// The tensor `name`; throws weight_error when the file has none.
  const tensor_entry& find(const std::string& name) const {
    for (const auto& t : m_tensors) {
      if (t.name == name) return t;
    }
    throw weight_error(m_source + ": tensor '" + name + "' is missing");
  }

  /// The values of tensor `name` as float (from F32, F16 or BF16), after checking its shape
  /// is `expected_shape`; throws weight_error naming the tensor otherwise.
  std::vector<float> read_float(const std::string& name, const std::vector<std::int64_t>& expected_shape) const {
    const tensor_entry& t = find(name);
    if (t.shape != expected_shape) {
      throw weight_error(m_source + ": tensor '" + name + "' has shape " + shape_text(t.shape) + ", expected " +
                         shape_text(expected_shape));
    }
    const char* data = m_bytes.data() + m_data_offset + t.begin;
    std::vector<float> values(static_cast<std::size_t>(t.element_count()));
    if (t.dtype == "F32") {
      if (!values.empty()) std::memcpy(values.data(), data, values.size() * sizeof(float));  // an empty vector's data() may be null
    } else if (t.dtype == "F16" || t.dtype == "BF16") {
      for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        values[i] = t.dtype == "F16" ? detail::half_bits_to_float(bits) : detail::bfloat16_bits_to_float(bits);
      }
    } else {
      throw weight_error(m_source + ": tensor '" + name + "' is " + t.dtype + "; weights must be F32, F16 or BF16");
    }
    return values;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw weight_error(m_source + ": " + what); }

  void read_header() {
    if (m_bytes.size() < 8) {
      fail("truncated: " + std::to_string(m_bytes.size()) + " bytes, but a safetensors file starts with an 8-byte header length");
    }
    std::uint64_t header_length = 0;
    for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(m_bytes[i]);
    if (header_length > m_bytes.size() - 8) {
      fail("header length " + std::to_string(header_length) + " exceeds the " + std::to_string(m_bytes.size() - 8) +
           " bytes after it (truncated or not a safetensors file)");
    }
    m_data_offset = 8 + static_cast<std::size_t>(header_length);
    const std::uint64_t data_size = m_bytes.size() - m_data_offset;
    detail::json header;
    try {
      header = detail::parse_json(m_bytes.substr(8, static_cast<std::size_t>(header_length)));
    } catch (const detail::json_error& e) {
      fail(std::string("malformed header: ") + e.what());
    }
    if (!header.is_object()) fail("malformed header: not a JSON object");
    for (const auto& [name, entry] : header.members()) {
      if (name == "__metadata__") continue;
      tensor_entry t;
      t.name = name;
      const detail::json* dtype = entry.find("dtype");
      const detail::json* shape = entry.find("shape");
      const detail::json* offsets = entry.find("data_offsets");
      if (dtype == nullptr || !dtype->is_string() || shape == nullptr || !shape->is_array() || offsets == nullptr ||
          !offsets->is_array() || offsets->items().size() != 2) {
        fail("tensor '" + name + "': header entry needs dtype, shape and two data_offsets");
      }
      t.dtype = dtype->string();
      const std::size_t element_bytes = detail::safetensors_dtype_bytes(t.dtype);
      if (element_bytes == 0) fail("tensor '" + name + "': unknown dtype '" + t.dtype + "'");
      // Integers a double holds exactly; larger ones cannot describe bytes of a file in memory.
      const double max_integer = 9007199254740992.0;  // 2^53
      auto is_count = [&](const detail::json& v) {
        return v.is_number() && v.number() >= 0 && v.number() <= max_integer && v.number() == std::floor(v.number());
      };
      std::uint64_t elements = 1;
      for (const auto& d : shape->items()) {
        if (!is_count(d)) fail("tensor '" + name + "': shape must hold non-negative integers up to 2^53");
        t.shape.push_back(static_cast<std::int64_t>(d.number()));
        const auto extent = static_cast<std::uint64_t>(d.number());
        if (extent != 0 && elements > (std::uint64_t{1} << 53) / extent) {
          fail("tensor '" + name + "': shape " + shape_text(t.shape) + " has more elements than any file can hold");
        }
        elements *= extent;
      }
      const auto& o = offsets->items();
      if (!is_count(o[0]) || !is_count(o[1]) || o[1].number() < o[0].number()) {
        fail("tensor '" + name + "': data_offsets must be two increasing non-negative integers");
      }
      t.begin = static_cast<std::uint64_t>(o[0].number());
      t.end = static_cast<std::uint64_t>(o[1].number());
      if (t.end > data_size) {
        fail("tensor '" + name + "': data ends at byte " + std::to_string(t.end) + " but the file holds only " +
             std::to_string(data_size) + " bytes of data (truncated)");
      }
      const std::uint64_t needed = t.element_count() * element_bytes;
      if (t.end - t.begin != needed) {
        fail("tensor '" + name + "': " + t.dtype + " " + shape_text(t.shape) + " needs " + std::to_string(needed) +
             " bytes, its data_offsets span " + std::to_string(t.end - t.begin));
      }
      m_tensors.push_back(std::move(t));
    }
    // The data section is the tensors end to end, from byte 0 to its last byte: the format
    // forbids holes (bytes no tensor owns could hide a second file) and overlaps.
    std::sort(m_tensors.begin(), m_tensors.end(), [](const tensor_entry& a, const tensor_entry& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t covered = 0;
    for (std::size_t i = 0; i < m_tensors.size(); ++i) {
      const tensor_entry& t = m_tensors[i];
      if (t.begin < covered) {
        fail("tensors '" + m_tensors[i - 1].name + "' and '" + t.name + "' overlap in the data section");
      }
      if (t.begin > covered) {
        fail("bytes " + std::to_string(covered) + " to " + std::to_string(t.begin) + " of the data section, before tensor '" +
             t.name + "', belong to no tensor (the format allows no holes)");
      }
      covered = t.end;
    }
    if (covered != data_size) {
      fail("bytes " + std::to_string(covered) + " to " + std::to_string(data_size) +
           " of the data section, after the last tensor, belong to no tensor (the format allows no holes)");
    }
  }

  std::string m_source;
  std::string m_bytes;
  std::size_t m_data_offset = 0;
  std::vector<tensor_entry> m_tensors;
};

}  // namespace gpucmp
