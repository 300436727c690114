// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Hands one training run to scripts/training/compare_pytorch.py, which repeats it with
// PyTorch autograd from the same weights, batch and hyper-parameters:
//   definition.json         the network (layers, shapes), optimizer and precision
//   initial.safetensors     FP32 parameters and running statistics in torch's names and
//                           orders, the images (N x C x H x W, as stored) and the labels
//   gradients.safetensors   every parameter's gradient of the first step (unscaled)
//   after_step.safetensors  parameters and running statistics after that one step
//   losses.json             the loss of each of --steps steps on the same batch, from the
//                           initial weights, the skipped steps and the final loss scale
// Usage: training_dump --out=DIR [--model=resnet50|resnet18] [--precision=fp32|tf32|amp_fp16|bf16]
//                      [--batch=16] [--steps=50] [--layout=nhwc|nchw] [--learning_rate=0.1]
#include "program_flags.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/io/safetensors_writer.hpp>
#include <gpucmp/models/resnet18.hpp>
#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/training/training_network.cuh>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct settings {
  std::string out, model = "resnet50", precision = "fp32", layout = "nhwc";
  std::int64_t batch = 16, steps = 50;
  float learning_rate = 0.1f;
};

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) { return gpucmp_bench::flag_value(argv[i], flag); };
    if (const char* v = value("--out=")) s.out = v;
    else if (const char* v = value("--model=")) s.model = v;
    else if (const char* v = value("--precision=")) s.precision = v;
    else if (const char* v = value("--layout=")) s.layout = v;
    else if (const char* v = value("--batch=")) s.batch = std::stoll(v);
    else if (const char* v = value("--steps=")) s.steps = std::stoll(v);
    else if (const char* v = value("--learning_rate=")) s.learning_rate = std::stof(v);
    else throw gpucmp::invalid_argument("training_dump: unknown argument '" + arg + "'");
  }
  if (s.out.empty()) throw gpucmp::invalid_argument("training_dump: --out=DIR is required");
  if (s.steps < 1) throw gpucmp::invalid_argument("training_dump: --steps must be at least 1");
  return s;
}

gpucmp::training_options options_of(const settings& s) {
  gpucmp::training_options o;
  o.batch = s.batch;
  o.layout = gpucmp::parse_conv_layout(s.layout);
  o.sgd.learning_rate = s.learning_rate;
  if (s.precision == "amp_fp16") {
    o.dtype = gpucmp::conv_dtype::fp16;
    o.loss_scaling = true;
  } else if (s.precision == "fp32" || s.precision == "tf32" || s.precision == "bf16") {
    o.dtype = gpucmp::parse_conv_dtype(s.precision);
    o.loss_scaling = false;
  } else {
    throw gpucmp::invalid_argument("training_dump: unknown --precision '" + s.precision + "' (fp32, tf32, amp_fp16, bf16)");
  }
  return o;
}

std::vector<gpucmp::named_tensor> joined(std::vector<gpucmp::named_tensor> a, const std::vector<gpucmp::named_tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const settings s = parse(argc, argv);
    const gpucmp::network_definition def = s.model == "resnet18" ? gpucmp::resnet18_random(1)
                                           : s.model == "resnet50" ? gpucmp::resnet50_random(1)
                                                                   : throw gpucmp::invalid_argument("training_dump: unknown --model '" + s.model + "'");
    gpucmp::stream stream;
    gpucmp::training_network net(def, options_of(s), stream.get());
    std::printf("%s: built and verified in %.1f s\n", net.name().c_str(), net.build_seconds());
    {
      std::ofstream json(s.out + "/definition.json");
      json << net.definition_json() << "\n";
      if (!json) throw gpucmp::error(s.out + "/definition.json: cannot write");
    }
    gpucmp::write_safetensors(s.out + "/initial.safetensors", joined(net.parameters(stream.get()), net.batch_tensors(stream.get())));
    net.forward_backward(stream.get());
    gpucmp::write_safetensors(s.out + "/gradients.safetensors", net.gradients(stream.get()));
    net.reset(stream.get());
    std::vector<float> losses;
    for (std::int64_t k = 0; k < s.steps; ++k) {
      net.step(stream.get());
      losses.push_back(net.loss(stream.get()));
      if (k == 0) gpucmp::write_safetensors(s.out + "/after_step.safetensors", net.parameters(stream.get()));
    }
    const gpucmp::loss_scale_state scale = net.loss_scale(stream.get());
    std::ofstream json(s.out + "/losses.json");
    json.precision(9);
    json << "{\"losses\": [";
    for (std::size_t k = 0; k < losses.size(); ++k) json << (k ? ", " : "") << losses[k];
    json << "], \"skipped_steps\": " << scale.skipped_steps << ", \"final_loss_scale\": " << scale.scale << "}\n";
    if (!json) throw gpucmp::error(s.out + "/losses.json: cannot write");
    std::printf("%lld steps: loss %.6f -> %.6f, %lld skipped, final scale %g\n", static_cast<long long>(s.steps), losses.front(),
                losses.back(), static_cast<long long>(scale.skipped_steps), double(scale.scale));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "training_dump: %s\n", e.what());
    return 1;
  }
}
