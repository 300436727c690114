// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// ResNet-50 v1.5 weight files: the torchvision tensor list and its parameter count, batch
// norm folding checked against an unfolded convolution + batch norm, and a full-size
// synthetic weight file read, folded and rejected for each kind of defect.
#include "catch.hpp"

#include <gpucmp/models/resnet50_weights.hpp>
#include <gpucmp/cuda/random.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

// A safetensors file of F16 tensors (name -> shape), values from a fixed random stream;
// running variances are positive. `skip`, `reshape` and `extra` inject defects.
struct synthetic_file {
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::string bytes;
};

std::uint16_t to_half_bits(float v) {
  // Round-to-nearest FP16 for values in [-4, 4] (normal range; enough for the test data).
  if (v == 0.0f) return 0;
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const int exponent = int((bits >> 23) & 0xFF) - 127 + 15;
  std::uint32_t mantissa = bits & 0x7FFFFFu;
  if (exponent <= 0) return std::uint16_t(sign);  // flush tiny values
  std::uint32_t half = sign | (std::uint32_t(exponent) << 10) | (mantissa >> 13);
  if (mantissa & 0x1000u) ++half;  // round half up on the dropped bits
  return std::uint16_t(half);
}

synthetic_file make_file(const std::string& skip = "", const std::string& reshape = "", const std::string& extra = "") {
  synthetic_file f;
  std::string header = "{";
  std::string data;
  std::uint64_t seed = 7;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, bool variance) {
    if (name == skip) return;
    if (name == reshape) shape.back() += 1;
    f.shapes[name] = shape;
    std::int64_t count = 1;
    for (auto d : shape) count *= d;
    const std::size_t begin = data.size();
    for (std::int64_t i = 0; i < count; ++i) {
      const double u = gpucmp::unit_interval(gpucmp::random_bits(seed, std::uint64_t(i)));
      const float v = variance ? float(0.5 + u) : float(2 * u - 1);
      const std::uint16_t h = to_half_bits(v);
      data.append(reinterpret_cast<const char*>(&h), 2);
    }
    ++seed;
    std::string dims;
    for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? "," : "") + std::to_string(shape[i]);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"F16\",\"shape\":[" + dims +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  };
  for (const auto& t : gpucmp::resnet50_expected_tensors()) {
    add(t.name, t.shape, t.name.size() > 12 && t.name.compare(t.name.size() - 12, 12, ".running_var") == 0);
  }
  if (!extra.empty()) add(extra, {4}, false);
  // torchvision's counters: I64 scalars, allowed and ignored.
  const std::size_t begin = data.size();
  data.append(8, '\0');
  header += ",\"bn1.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[" + std::to_string(begin) + "," +
            std::to_string(data.size()) + "]}}";
  f.bytes.assign(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.bytes[std::size_t(i)] = char((n >> (8 * i)) & 0xFF);
  f.bytes += header + data;
  return f;
}

}  // namespace

TEST_CASE("ResNet-50's state_dict tensors and their parameter count", "[models][resnet50]") {
  const auto tensors = gpucmp::resnet50_expected_tensors();
  CHECK(tensors.size() == 53 * 5 + 2);
  std::int64_t parameters = 0, statistics = 0;
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (auto d : t.shape) n *= d;
    (t.parameter ? parameters : statistics) += n;
  }
  CHECK(parameters == 25557032);  // torchvision's num_params
  CHECK(statistics == 2 * 26560);  // running mean and variance of every batch norm channel
  CHECK(gpucmp::batch_norm_of("conv1") == "bn1");
  CHECK(gpucmp::batch_norm_of("layer3.4.conv2") == "layer3.4.bn2");
  CHECK(gpucmp::batch_norm_of("layer2.0.downsample") == "layer2.0.downsample.1");
  CHECK(gpucmp::conv_weight_name("layer2.0.downsample") == "layer2.0.downsample.0.weight");
  CHECK(gpucmp::conv_weight_name("layer4.2.conv3") == "layer4.2.conv3.weight");
  CHECK_THROWS_AS(gpucmp::batch_norm_of("fc"), gpucmp::invalid_argument);
}

TEST_CASE("a folded convolution equals the convolution followed by its batch norm", "[models][folding]") {
  // 2 output channels, 3 input channels, 3x3 filters, one 5x5 image, padding 1.
  const int k = 2, c = 3, r = 3, hw = 5;
  std::vector<float> w(k * c * r * r), x(c * hw * hw);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(gpucmp::unit_interval(gpucmp::random_bits(1, i)) - 0.5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(gpucmp::unit_interval(gpucmp::random_bits(2, i)) - 0.5);
  gpucmp::batch_norm_params bn;
  bn.gamma = {1.5f, -0.75f};
  bn.beta = {0.25f, -1.0f};
  bn.running_mean = {0.1f, -0.2f};
  bn.running_var = {0.5f, 2.0f};
  auto conv = [&](const std::vector<float>& filters, int ko, int y, int xo) {
    double sum = 0;
    for (int ci = 0; ci < c; ++ci)
      for (int ri = 0; ri < r; ++ri)
        for (int si = 0; si < r; ++si) {
          const int yi = y - 1 + ri, xi = xo - 1 + si;
          if (yi < 0 || yi >= hw || xi < 0 || xi >= hw) continue;
          sum += double(filters[((ko * c + ci) * r + ri) * r + si]) * x[(ci * hw + yi) * hw + xi];
        }
    return sum;
  };
  const gpucmp::folded_conv folded = gpucmp::fold_batch_norm(w, k, bn);
  for (int ko = 0; ko < k; ++ko)
    for (int y = 0; y < hw; ++y)
      for (int xo = 0; xo < hw; ++xo) {
        const double reference = bn.gamma[ko] * (conv(w, ko, y, xo) - bn.running_mean[ko]) /
                                     std::sqrt(double(bn.running_var[ko]) + bn.epsilon) +
                                 bn.beta[ko];
        CHECK(conv(folded.weight, ko, y, xo) + folded.bias[ko] == Approx(reference).epsilon(1e-6).margin(1e-6));
      }
  CHECK_THROWS_WITH(gpucmp::fold_batch_norm(w, 3, bn), GPUCMP_CONTAINS("batch norm has 2 channels, the convolution 3"));
  CHECK_THROWS_WITH(gpucmp::fold_batch_norm(w, 4, bn), GPUCMP_CONTAINS("54 filter values do not split into 4"));
  bn.running_var[1] = -1.0f;
  CHECK_THROWS_WITH(gpucmp::fold_batch_norm(w, k, bn), GPUCMP_CONTAINS("channel 1 has running_var + eps <= 0"));
}

TEST_CASE("filters move from (K, C, R, S) to (K, R, S, C)", "[models][folding]") {
  std::vector<float> w(2 * 3 * 2 * 2);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(i);
  const auto krsc = gpucmp::kcrs_to_krsc(w, 2, 3, 2, 2);
  // (k=1, c=2, r=0, s=1) sits at ((1*3+2)*2+0)*2+1 = 21 in KCRS and ((1*2+0)*2+1)*3+2 = 17 in KRSC.
  CHECK(krsc[17] == 21.0f);
  CHECK_THROWS_AS(gpucmp::kcrs_to_krsc(w, 2, 3, 3, 3), gpucmp::invalid_argument);
}

TEST_CASE("a full ResNet-50 weight file is validated and read with its batch norms folded", "[models][resnet50]") {
  const synthetic_file f = make_file();
  const auto file = gpucmp::safetensors_file::parse(f.bytes, "resnet50.safetensors");
  const gpucmp::resnet50_folded_weights weights = gpucmp::load_resnet50_folded(file);
  REQUIRE(weights.convs.size() == 53);
  CHECK(weights.convs[0].weight.size() == 64 * 3 * 7 * 7);
  CHECK(weights.convs[0].bias.size() == 64);
  CHECK(weights.fc_weight.size() == 1000 * 2048);
  // The stem's channel 5, folded by hand from the file's own values.
  const auto w = file.read_float("conv1.weight", {64, 3, 7, 7});
  const auto g = file.read_float("bn1.weight", {64}), b = file.read_float("bn1.bias", {64});
  const auto m = file.read_float("bn1.running_mean", {64}), v = file.read_float("bn1.running_var", {64});
  const double s = g[5] / std::sqrt(double(v[5]) + 1e-5);
  CHECK(weights.convs[0].weight[5 * 147 + 3] == Approx(w[5 * 147 + 3] * s));
  CHECK(weights.convs[0].bias[5] == Approx(b[5] - m[5] * s));
}

TEST_CASE("defective ResNet-50 weight files name the tensor and the problem", "[models][resnet50]") {
  {
    const synthetic_file f = make_file("layer3.2.bn2.running_var");
    const auto file = gpucmp::safetensors_file::parse(f.bytes, "w.safetensors");
    CHECK_THROWS_WITH(gpucmp::validate_resnet50_weights(file),
                      GPUCMP_CONTAINS("w.safetensors: tensor 'layer3.2.bn2.running_var' is missing"));
  }
  {
    const synthetic_file f = make_file("", "layer4.0.downsample.0.weight");
    const auto file = gpucmp::safetensors_file::parse(f.bytes, "w.safetensors");
    CHECK_THROWS_WITH(gpucmp::validate_resnet50_weights(file),
                      GPUCMP_CONTAINS("tensor 'layer4.0.downsample.0.weight' has shape [2048, 1024, 1, 2], expected [2048, 1024, 1, 1]"));
  }
  {
    const synthetic_file f = make_file("", "", "head.weight");
    const auto file = gpucmp::safetensors_file::parse(f.bytes, "w.safetensors");
    CHECK_THROWS_WITH(gpucmp::validate_resnet50_weights(file),
                      GPUCMP_CONTAINS("tensor 'head.weight' is not part of ResNet-50 v1.5"));
  }
}
