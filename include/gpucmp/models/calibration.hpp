// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Calibration of a quantized network: the range of each activation tensor, seen over N
// calibration images run in FP32, and the scale it gives an FP8 E4M3 or INT8 tensor. Two
// methods: the largest |x| (max-abs) and a percentile of |x| (values past it are clipped, so
// rare outliers do not spend the format's range). Deterministic: |x| is counted into
// logarithmic bins (64 a power of two, 1.1 % apart), so the result depends on the values
// alone, not on their order, the batch split or how many GPUs counted them (counts add). The
// table is kept as a small JSON file beside the weights, tied to the model and to a
// fingerprint of its weights; reading checks both and every tensor, and names what is wrong.
// Host code; the GPU counts with the same bins (activation_range::bin_of, callable from device
// code) where a tensor lives (models/activation_counts.cuh) and hands over its counts.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/io/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gpucmp {

/// How a tensor's range is chosen from its values.
enum class calibration_method {
  max_abs,     ///< the largest |x| seen
  percentile,  ///< the |x| that calibration_settings::percentile percent of the values do not exceed
};

/// "max_abs" or "percentile".
inline const char* to_string(calibration_method m) noexcept { return m == calibration_method::max_abs ? "max_abs" : "percentile"; }
/// The method named `text` ("max_abs" or "percentile"); throws invalid_argument otherwise.
inline calibration_method parse_calibration_method(const std::string& text) {
  if (text == "max_abs") return calibration_method::max_abs;
  if (text == "percentile") return calibration_method::percentile;
  throw invalid_argument("calibration method '" + text + "' is neither max_abs nor percentile");
}

/// How a network is calibrated.
struct calibration_settings {
  calibration_method method = calibration_method::percentile;
  double percentile = 99.99;  ///< percentile only: percent of |x| kept unclipped
  std::int64_t images = 512;  ///< calibration images (the FP32 network's inputs)
  std::uint64_t seed = 1;     ///< which images (random, as the logits check draws them)
};

/// The |x| values of one activation tensor, counted into logarithmic bins.
class activation_range {
 public:
  /// Bins a power of two, and the powers of two covered: |x| from 2^-64 to 2^64 (FP32
  /// activations of a sane network; smaller values count as zeros, larger ones are refused).
  static constexpr int bins_per_octave = 64;
  static constexpr int lowest_exponent = -64, highest_exponent = 64;
  static constexpr int bin_count = (highest_exponent - lowest_exponent) * bins_per_octave;

  /// The bin of |x| > 0 in range: floor(64 log2 |x|) from the lowest power; -1 below it.
  /// The same function on the GPU (its log2 and the host's may differ by a unit in the last
  /// place, which moves a value lying within that of a bin's edge).
  GPUCMP_HOST_DEVICE static int bin_of(double magnitude) noexcept {
    const double position = log2(magnitude) - lowest_exponent;
    if (position < 0) return -1;
    const double b = floor(position * bins_per_octave);
    return b < bin_count - 1 ? int(b) : bin_count - 1;
  }
  /// The largest |x| bin `b` holds (its upper edge).
  static double upper_edge(int b) noexcept { return std::exp2(double(b + 1) / bins_per_octave + lowest_exponent); }

  activation_range() : m_counts(std::size_t(bin_count), 0) {}

  /// Counts `n` values. Throws invalid_argument for a value that is not finite or past 2^64
  /// (a broken FP32 run; `what` names the tensor), leaving the counts as they were.
  void add(const float* values, std::size_t n, const std::string& what) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(values[i]) || std::fabs(double(values[i])) >= std::exp2(highest_exponent)) {
        throw invalid_argument("calibration of " + what + ": value " + std::to_string(values[i]) + " at " + std::to_string(i) +
                               " is not finite or is past 2^64 (the FP32 run is broken)");
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      const double a = std::fabs(double(values[i]));
      m_max = std::max(m_max, a);
      const int b = a > 0 ? bin_of(a) : -1;
      if (b < 0) {
        ++m_zeros;
      } else {
        ++m_counts[std::size_t(b)];
      }
    }
    m_count += n;
  }
  /// Adds counts made elsewhere in bin_of's bins (the GPU's, models/activation_counts.cuh):
  /// bin_count counts in `bins`, the values below the lowest bin in `zeros`, the largest |x|
  /// in `max_abs`. Throws invalid_argument naming `what` for another number of bins or a
  /// largest |x| that is not finite or is past 2^64, leaving the counts as they were.
  void add_counts(const std::vector<std::uint64_t>& bins, std::uint64_t zeros, double max_abs, const std::string& what) {
    if (bins.size() != m_counts.size()) {
      throw invalid_argument("calibration of " + what + ": " + std::to_string(bins.size()) + " bins, expected " +
                             std::to_string(m_counts.size()));
    }
    if (!(max_abs >= 0 && max_abs < std::exp2(highest_exponent))) {
      throw invalid_argument("calibration of " + what + ": largest |x| " + std::to_string(max_abs) +
                             " is not finite or is past 2^64 (the FP32 run is broken)");
    }
    std::uint64_t total = zeros;
    for (std::size_t b = 0; b < bins.size(); ++b) {
      m_counts[b] += bins[b];
      total += bins[b];
    }
    m_zeros += zeros;
    m_count += total;
    m_max = std::max(m_max, max_abs);
  }

  /// Adds another range's counts (another batch, another GPU).
  void merge(const activation_range& other) {
    for (std::size_t b = 0; b < m_counts.size(); ++b) m_counts[b] += other.m_counts[b];
    m_zeros += other.m_zeros;
    m_count += other.m_count;
    m_max = std::max(m_max, other.m_max);
  }

  /// Values counted.
  std::uint64_t count() const noexcept { return m_count; }
  /// The largest |x| counted (exactly).
  double max_abs() const noexcept { return m_max; }
  /// The smallest bin edge that `percent` of the counted |x| do not exceed, at most
  /// max_abs(); 0 when nothing non-zero was counted. Throws invalid_argument for a percent
  /// outside (0, 100].
  double percentile_abs(double percent) const {
    if (!(percent > 0 && percent <= 100)) throw invalid_argument("calibration: a percentile must be in (0, 100], got " + std::to_string(percent));
    const double wanted = std::ceil(double(m_count) * percent / 100);
    double seen = double(m_zeros);
    if (seen >= wanted) return 0;
    for (int b = 0; b < bin_count; ++b) {
      seen += double(m_counts[std::size_t(b)]);
      if (seen >= wanted) return std::min(upper_edge(b), m_max);
    }
    return m_max;
  }
  /// The range `settings` chooses.
  double range(const calibration_settings& settings) const {
    return settings.method == calibration_method::max_abs ? max_abs() : percentile_abs(settings.percentile);
  }

 private:
  std::vector<std::uint64_t> m_counts;
  std::uint64_t m_zeros = 0, m_count = 0;
  double m_max = 0;
};

/// The per-tensor scale of a symmetric format whose largest value is `format_max` (FP8 E4M3:
/// 448; INT8: 127) for a tensor of range `amax`: stored = round(x / scale). A tensor that was
/// all zeros gets 1 (any scale represents it).
inline double quantization_scale(double amax, double format_max) noexcept { return amax > 0 ? amax / format_max : 1.0; }

/// One output channel's largest |w| for each of `channels` channels of `per_channel` values
/// (weights laid out channel by channel, as a convolution's K x C x R x S or a linear layer's
/// out x in): the per-channel weight ranges INT8 quantization uses.
inline std::vector<double> per_channel_amax(const std::vector<float>& weights, std::int64_t channels, std::int64_t per_channel) {
  if (channels <= 0 || per_channel <= 0 || std::size_t(channels * per_channel) != weights.size()) {
    throw invalid_argument("per_channel_amax: " + std::to_string(weights.size()) + " weights are not " + std::to_string(channels) +
                           " channels of " + std::to_string(per_channel));
  }
  std::vector<double> out(std::size_t(channels), 0.0);
  for (std::int64_t c = 0; c < channels; ++c) {
    for (std::int64_t i = 0; i < per_channel; ++i) {
      out[std::size_t(c)] = std::max(out[std::size_t(c)], std::fabs(double(weights[std::size_t(c * per_channel + i)])));
    }
  }
  return out;
}

/// A fingerprint of weights (FNV-1a, 64 bits, over their FP32 bytes in order), as 16 hex
/// digits: a calibration file names the weights it was made with.
inline std::string weights_fingerprint(const std::vector<std::vector<float>>& tensors) {
  std::uint64_t h = 14695981039346656037ull;
  for (const auto& t : tensors) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(t.data());
    for (std::size_t i = 0; i < t.size() * sizeof(float); ++i) {
      h ^= bytes[i];
      h *= 1099511628211ull;
    }
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

/// A network's calibration: each activation tensor's range, and what it was made from.
struct calibration_table {
  std::string model;                     ///< the network ("resnet50_v1_5")
  std::string weights;                   ///< weights_fingerprint of its weights
  calibration_settings settings;         ///< how it was made
  std::map<std::string, double> ranges;  ///< tensor name -> its range (amax, > 0 or 0 for an all-zero tensor)
};

/// The file's JSON text.
inline std::string calibration_json(const calibration_table& t) {
  std::ostringstream out;
  out.precision(17);
  out << "{\n  \"format\": \"gpucmp-calibration\",\n  \"version\": 1,\n  \"model\": " << detail::json_quoted(t.model)
      << ",\n  \"weights\": " << detail::json_quoted(t.weights) << ",\n  \"method\": \"" << to_string(t.settings.method)
      << "\",\n  \"percentile\": " << t.settings.percentile << ",\n  \"images\": " << t.settings.images
      << ",\n  \"seed\": " << t.settings.seed << ",\n  \"ranges\": {";
  bool first = true;
  for (const auto& [name, amax] : t.ranges) {
    out << (first ? "\n" : ",\n") << "    " << detail::json_quoted(name) << ": " << amax;
    first = false;
  }
  out << "\n  }\n}\n";
  return out.str();
}

/// Writes `t` to `path`; throws error when it cannot.
inline void write_calibration(const std::string& path, const calibration_table& t) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << calibration_json(t);
  out.flush();
  if (!out) throw error(path + ": cannot write the calibration file");
}

/// Reads the calibration in `text` (named `source` in errors) made for `model` with weights of
/// fingerprint `weights`, holding a range for each of `tensors` and no other. Throws
/// invalid_argument naming the file and the problem: malformed JSON (with its position), not
/// a calibration file or another version, another model or other weights, a tensor missing or
/// unknown, a range that is negative or not finite, bad settings.
inline calibration_table parse_calibration(const std::string& text, const std::string& source, const std::string& model,
                                           const std::string& weights, const std::vector<std::string>& tensors) {
  auto fail = [&](const std::string& what) { throw invalid_argument(source + ": " + what); };
  detail::json doc;
  try {
    doc = detail::parse_json(text);
  } catch (const detail::json_error& e) {
    fail(std::string("malformed calibration file: ") + e.what());
  }
  auto string_of = [&](const char* key) -> std::string {
    const detail::json* v = doc.find(key);
    if (v == nullptr || !v->is_string()) fail(std::string("\"") + key + "\" is missing or not a string");
    return v->string();
  };
  auto number_of = [&](const char* key) -> double {
    const detail::json* v = doc.find(key);
    if (v == nullptr || !v->is_number()) fail(std::string("\"") + key + "\" is missing or not a number");
    return v->number();
  };
  if (!doc.is_object()) fail("not a calibration file (not a JSON object)");
  if (string_of("format") != "gpucmp-calibration") fail("not a gpucmp calibration file (format is not \"gpucmp-calibration\")");
  if (number_of("version") != 1) fail("calibration file version " + std::to_string(number_of("version")) + "; this gpucmp reads version 1");
  calibration_table t;
  t.model = string_of("model");
  if (t.model != model) fail("calibrated for model '" + t.model + "', not '" + model + "'");
  t.weights = string_of("weights");
  if (t.weights != weights) {
    fail("calibrated for other weights (fingerprint " + t.weights + ", these weights are " + weights + "): calibrate again");
  }
  const std::string method = string_of("method");
  try {
    t.settings.method = parse_calibration_method(method);
  } catch (const invalid_argument& e) {
    fail(e.what());
  }
  t.settings.percentile = number_of("percentile");
  if (!(t.settings.percentile > 0 && t.settings.percentile <= 100)) fail("percentile must be in (0, 100]");
  const double images = number_of("images"), seed = number_of("seed");
  if (!(images >= 1 && images <= 9.0e15) || images != std::floor(images)) fail("images must be a positive whole number");
  if (!(seed >= 0 && seed <= 9.0e15) || seed != std::floor(seed)) fail("seed must be a whole number >= 0");
  t.settings.images = std::int64_t(images);
  t.settings.seed = std::uint64_t(seed);
  const detail::json* ranges = doc.find("ranges");
  if (ranges == nullptr || !ranges->is_object()) fail("\"ranges\" is missing or not an object");
  for (const auto& [name, value] : ranges->members()) {
    if (std::find(tensors.begin(), tensors.end(), name) == tensors.end()) fail("tensor '" + name + "' is not one of " + model + "'s");
    if (!value.is_number() || !std::isfinite(value.number()) || value.number() < 0) {
      fail("tensor '" + name + "': its range must be a finite number >= 0");
    }
    t.ranges[name] = value.number();
  }
  for (const std::string& name : tensors) {
    if (!t.ranges.count(name)) fail("tensor '" + name + "' has no range (a file of an older network definition?)");
  }
  return t;
}

/// parse_calibration() of the file at `path`; throws invalid_argument naming it when it cannot
/// be read.
inline calibration_table read_calibration(const std::string& path, const std::string& model, const std::string& weights,
                                          const std::vector<std::string>& tensors) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw invalid_argument(path + ": cannot open the calibration file (calibrate first, or name another file)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_calibration(text.str(), path, model, weights, tensors);
}

}  // namespace gpucmp
