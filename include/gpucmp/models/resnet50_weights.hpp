// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// ResNet-50 v1.5's weights as torchvision names them (state_dict), checked against the
// layer table before anything is uploaded, and read with every batch norm folded into its
// convolution. Every error names the file, the tensor and the problem. Host-only.
#pragma once

#include <gpucmp/data/resnet50_v1_5.hpp>
#include <gpucmp/models/batch_norm_folding.hpp>
#include <gpucmp/io/safetensors.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gpucmp {

/// One tensor a ResNet-50 v1.5 weight file must hold.
struct expected_tensor {
  std::string name;                 ///< torchvision state_dict name
  std::vector<std::int64_t> shape;  ///< its shape
  bool parameter = true;            ///< a learned parameter (false: a batch norm running statistic)
};

/// The batch norm that follows convolution `conv_name` ("conv1" -> "bn1",
/// "layer1.0.conv2" -> "layer1.0.bn2", "layer1.0.downsample" -> "layer1.0.downsample.1").
inline std::string batch_norm_of(const std::string& conv_name) {
  if (conv_name == "conv1") return "bn1";
  if (detail::ends_with(conv_name, ".downsample")) return conv_name + ".1";
  const std::size_t at = conv_name.rfind(".conv");
  if (at == std::string::npos) throw invalid_argument("batch_norm_of: '" + conv_name + "' is not a ResNet convolution");
  return conv_name.substr(0, at) + ".bn" + conv_name.substr(at + 5);
}

/// The state_dict name of convolution `conv_name`'s filters ("layer1.0.downsample" ->
/// "layer1.0.downsample.0.weight").
inline std::string conv_weight_name(const std::string& conv_name) {
  return conv_name + (detail::ends_with(conv_name, ".downsample") ? ".0.weight" : ".weight");
}

/// Every tensor of ResNet-50 v1.5's state_dict except the batch norms' num_batches_tracked
/// counters (unused at inference): 53 filters, 53 x 4 batch norm tensors, fc weight and bias.
inline std::vector<expected_tensor> resnet50_expected_tensors() {
  std::vector<expected_tensor> out;
  for (const data::conv_layer& l : data::resnet50_v1_5_convs) {
    out.push_back({conv_weight_name(l.name), {l.out_channels, l.in_channels, l.kernel, l.kernel}, true});
    const std::string bn = batch_norm_of(l.name);
    out.push_back({bn + ".weight", {l.out_channels}, true});
    out.push_back({bn + ".bias", {l.out_channels}, true});
    out.push_back({bn + ".running_mean", {l.out_channels}, false});
    out.push_back({bn + ".running_var", {l.out_channels}, false});
  }
  out.push_back({"fc.weight", {data::resnet50_fc_out, data::resnet50_fc_in}, true});
  out.push_back({"fc.bias", {data::resnet50_fc_out}, true});
  return out;
}

/// Checks that `file` holds every ResNet-50 v1.5 tensor with its shape and a float type, and
/// nothing unexpected besides num_batches_tracked; throws weight_error naming the first
/// problem (file, tensor, expected vs found).
inline void validate_resnet50_weights(const safetensors_file& file) {
  std::set<std::string> expected;
  for (const expected_tensor& t : resnet50_expected_tensors()) {
    expected.insert(t.name);
    const tensor_entry& entry = file.find(t.name);  // throws "... tensor 'x' is missing"
    if (entry.shape != t.shape) {
      throw weight_error(file.source() + ": tensor '" + t.name + "' has shape " + shape_text(entry.shape) + ", expected " +
                         shape_text(t.shape));
    }
    if (entry.dtype != "F32" && entry.dtype != "F16" && entry.dtype != "BF16") {
      throw weight_error(file.source() + ": tensor '" + t.name + "' is " + entry.dtype + "; weights must be F32, F16 or BF16");
    }
  }
  for (const tensor_entry& e : file.tensors()) {
    if (!expected.count(e.name) && !detail::ends_with(e.name, ".num_batches_tracked")) {
      throw weight_error(file.source() + ": tensor '" + e.name + "' is not part of ResNet-50 v1.5 (another model's file?)");
    }
  }
}

/// ResNet-50 v1.5 ready for inference: the 53 convolutions in execution order with their
/// batch norms folded in ((K, C, R, S) filters and a bias each), and the classifier.
struct resnet50_folded_weights {
  std::vector<folded_conv> convs;  ///< in data::resnet50_v1_5_convs order
  std::vector<float> fc_weight;    ///< 1000 x 2048, row-major (out, in)
  std::vector<float> fc_bias;      ///< 1000
};

/// Validates `file` and reads it with the batch norms folded (epsilon 1e-5, torchvision's).
inline resnet50_folded_weights load_resnet50_folded(const safetensors_file& file) {
  validate_resnet50_weights(file);
  resnet50_folded_weights out;
  for (const data::conv_layer& l : data::resnet50_v1_5_convs) {
    const std::vector<float> w =
        file.read_float(conv_weight_name(l.name), {l.out_channels, l.in_channels, l.kernel, l.kernel});
    const std::string bn = batch_norm_of(l.name);
    batch_norm_params p;
    p.gamma = file.read_float(bn + ".weight", {l.out_channels});
    p.beta = file.read_float(bn + ".bias", {l.out_channels});
    p.running_mean = file.read_float(bn + ".running_mean", {l.out_channels});
    p.running_var = file.read_float(bn + ".running_var", {l.out_channels});
    try {
      out.convs.push_back(fold_batch_norm(w, l.out_channels, p));
    } catch (const invalid_argument& e) {
      throw weight_error(file.source() + ": batch norm '" + bn + "': " + e.what());
    }
  }
  out.fc_weight = file.read_float("fc.weight", {data::resnet50_fc_out, data::resnet50_fc_in});
  out.fc_bias = file.read_float("fc.bias", {data::resnet50_fc_out});
  return out;
}

}  // namespace gpucmp
