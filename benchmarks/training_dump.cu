// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Hands one training run to scripts/training/compare_pytorch.py, which repeats it with
// PyTorch autograd from the same weights, batch and hyper-parameters:
//   definition.json         the network (layers, shapes), optimizer and precision
//   initial.safetensors     FP32 parameters and running statistics in torch's names and
//                           orders, the images (N x C x H x W, as stored) and the labels
//   gradients.safetensors   every parameter's gradient (unscaled) of the first step that
//                           was applied: with FP16 loss scaling the first steps can
//                           overflow and be skipped, leaving the weights as they were
//   after_step.safetensors  parameters and running statistics after that step
//   losses.json             the loss of each of --steps steps on the same batch, from the
//                           initial weights, the skipped steps, the final loss scale and
//                           the index of the first applied step
// Usage: training_dump --out=DIR [--model=resnet50|resnet18] [--precision=fp32|tf32|amp_fp16|bf16]
//                      [--batch=16] [--steps=50] [--layout=nhwc|nchw] [--learning_rate=0.1]
//                      [--residual_gamma=1]
// --residual_gamma sets the initial γ of the batch norms that close residual branches
// (training_options::residual_gamma; 0 is torchvision's zero_init_residual).
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
  float residual_gamma = 1.0f;
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
    else if (const char* v = value("--batch=")) s.batch = gpucmp_bench::whole_number(v, 1, 1 << 20, "training_dump", "--batch");
    else if (const char* v = value("--steps=")) s.steps = gpucmp_bench::whole_number(v, 1, 1 << 20, "training_dump", "--steps");
    else if (const char* v = value("--learning_rate=")) s.learning_rate = float(gpucmp_bench::real_number(v, 0, 1e3, "training_dump", "--learning_rate"));
    else if (const char* v = value("--residual_gamma=")) s.residual_gamma = float(gpucmp_bench::real_number(v, -1e3, 1e3, "training_dump", "--residual_gamma"));
    else throw gpucmp::invalid_argument("training_dump: unknown argument '" + arg + "'");
  }
  if (s.out.empty()) throw gpucmp::invalid_argument("training_dump: --out=DIR is required");
  return s;
}

gpucmp::training_options options_of(const settings& s) {
  gpucmp::training_options o;
  o.batch = s.batch;
  o.layout = gpucmp::parse_conv_layout(s.layout);
  o.sgd.learning_rate = s.learning_rate;
  o.residual_gamma = s.residual_gamma;
  if (s.precision == "amp_fp16") {
    o.dtype = gpucmp::numerics::fp16;
    o.loss_scaling = true;
  } else if (s.precision == "fp32" || s.precision == "tf32" || s.precision == "bf16") {
    o.dtype = gpucmp::parse_numerics(s.precision);
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
    net.reset(stream.get());  // the initial parameters, whatever the build's checks left
    std::vector<float> losses;
    std::int64_t first_applied = -1;
    for (std::int64_t k = 0; k < s.steps; ++k) {
      const gpucmp::loss_scale_state before = net.loss_scale(stream.get());
      net.step(stream.get());
      losses.push_back(net.loss(stream.get()));
      const gpucmp::loss_scale_state after = net.loss_scale(stream.get());
      if (first_applied < 0 && after.skipped_steps == before.skipped_steps) {
        // The SGD kernel leaves the gradients as the backward wrote them; gradients()
        // unscales them by the current scale, which must be the one this step used.
        if (after.scale != before.scale) throw gpucmp::error("training_dump: the loss scale changed on the first applied step");
        gpucmp::write_safetensors(s.out + "/gradients.safetensors", net.gradients(stream.get()));
        gpucmp::write_safetensors(s.out + "/after_step.safetensors", net.parameters(stream.get()));
        first_applied = k;
      }
    }
    if (first_applied < 0) throw gpucmp::error("training_dump: every one of the " + std::to_string(s.steps) + " steps was skipped");
    const gpucmp::loss_scale_state scale = net.loss_scale(stream.get());
    std::ofstream json(s.out + "/losses.json");
    json.precision(9);
    json << "{\"losses\": [";
    for (std::size_t k = 0; k < losses.size(); ++k) json << (k ? ", " : "") << losses[k];
    json << "], \"skipped_steps\": " << scale.skipped_steps << ", \"final_loss_scale\": " << scale.scale
         << ", \"first_applied_step\": " << first_applied << "}\n";
    if (!json) throw gpucmp::error(s.out + "/losses.json: cannot write");
    std::printf("%lld steps: loss %.6f -> %.6f, %lld skipped, final scale %g\n", static_cast<long long>(s.steps), losses.front(),
                losses.back(), static_cast<long long>(scale.skipped_steps), double(scale.scale));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "training_dump: %s\n", e.what());
    return 1;
  }
}
