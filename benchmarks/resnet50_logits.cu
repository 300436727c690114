// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Runs gpucmp's ResNet-50 v1.5 on a batch of images and writes its logits, for the
// comparison with torchvision (scripts/models/compare-logits.py):
//   resnet50_logits WEIGHTS.safetensors IMAGES.safetensors DTYPE LOGITS.bin [--layout=nhwc|nchw]
//                   [--shared-workspace] [--paths=fused_graph,legacy_fused,conv_then_kernel] [--full-check]
//                   [--trace=PRECISION] [--layer-diff]
// IMAGES holds one F32 tensor "images" of N x 3 x 224 x 224 (torch's NCHW); LOGITS.bin gets
// N x 1000 little-endian float32. DTYPE is fp32, tf32, fp16 or bf16. Every layer is verified
// against an FP64 reference while the network is built and again on these images, and each
// layer's algorithm and check are printed. --layout picks the activations' layout
// (network_options::layout, NHWC by default). --shared-workspace keeps every convolution on the
// search's shared workspace (network_options::private_workspaces = false); --paths limits the
// ways convolutions may run (network_options::fusion_paths). After the forward pass the tool
// checks that no parameter or input buffer changed and that a second pass gives the same
// logits bit for bit. Diagnostics: --full-check checks every convolution output on these
// images (not a sample); --trace=fp32 runs a second network in that precision and compares
// every layer's output with it; --layer-diff compares every layer's output in the
// verification pass with the same layer's output in a plain forward pass, bit for bit. Exit
// status 1 on an error, 3 when a layer fails its check on these images or a buffer was damaged
// (the logits are written all the same).
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/io/safetensors.hpp>
#include <gpucmp/cuda/stream.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  bool shared_workspace = false;
  std::string trace_against;  // a second precision to compare every layer's output with
  bool layer_diff = false;
  bool full_check = false;
  gpucmp::conv_layout layout = gpucmp::conv_layout::nhwc;
  std::vector<gpucmp::fusion_path> paths = gpucmp::all_fusion_paths();
  bool usage_ok = argc >= 5;
  for (int i = 5; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--shared-workspace") {
      shared_workspace = true;
    } else if (arg == "--full-check") {
      full_check = true;
    } else if (arg == "--layer-diff") {
      layer_diff = true;
    } else if (arg.rfind("--layout=", 0) == 0) {
      try {
        layout = gpucmp::parse_conv_layout(arg.substr(9));
      } catch (const gpucmp::invalid_argument&) {
        usage_ok = false;
      }
    } else if (arg.rfind("--trace=", 0) == 0) {
      trace_against = arg.substr(8);
    } else if (arg.rfind("--paths=", 0) == 0) {
      paths.clear();
      std::string list = arg.substr(8) + ",";
      for (std::size_t at = 0, next; (next = list.find(',', at)) != std::string::npos; at = next + 1) {
        try {
          paths.push_back(gpucmp::parse_fusion_path(list.substr(at, next - at)));
        } catch (const gpucmp::invalid_argument&) {
          usage_ok = false;
        }
      }
    } else {
      usage_ok = false;
    }
  }
  if (!usage_ok) {
    std::fprintf(stderr,
                 "usage: resnet50_logits WEIGHTS.safetensors IMAGES.safetensors fp32|tf32|fp16|bf16 LOGITS.bin "
                 "[--layout=nhwc|nchw] [--shared-workspace] [--paths=...] [--full-check] [--trace=PRECISION] [--layer-diff]\n");
    return 2;
  }
  try {
    const gpucmp::network_definition def = gpucmp::resnet50_from_file(argv[1]);
    const gpucmp::safetensors_file images_file = gpucmp::safetensors_file::open(argv[2]);
    const gpucmp::tensor_entry& entry = images_file.find("images");
    if (entry.shape.size() != 4 || entry.shape[1] != 3 || entry.shape[2] != 224 || entry.shape[3] != 224) {
      throw gpucmp::invalid_argument(std::string(argv[2]) + ": 'images' has shape " + gpucmp::shape_text(entry.shape) +
                                     ", expected [N, 3, 224, 224]");
    }
    const std::vector<float> images = images_file.read_float("images", entry.shape);
    const std::string dtype_text = argv[3];
    const gpucmp::numerics dtype = gpucmp::parse_numerics(dtype_text);

    gpucmp::stream s;
    gpucmp::network_options options;
    options.batch = entry.shape[0];
    options.dtype = dtype;
    options.layout = layout;
    options.private_workspaces = !shared_workspace;
    options.fusion_paths = paths;
    gpucmp::network net(def, options, s.get());  // searches and verifies every layer
    net.set_input(images, s.get());
    const std::vector<gpucmp::layer_report> on_images = net.verify(s.get(), full_check);  // every layer, on these images
    net.set_input(images, s.get());
    net(s.get());
    const std::vector<float> logits = net.output(s.get());
    const std::vector<std::string> damaged = net.damaged_buffers();
    net(s.get());
    const bool repeatable = net.output(s.get()) == logits;
    net.run_synchronized(s.get());
    const std::vector<float> synchronized = net.output(s.get());
    double most = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) most = std::max(most, double(std::fabs(synchronized[i] - logits[i])));
    std::ofstream out(argv[4], std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
    if (!out) throw gpucmp::error(std::string("cannot write ") + argv[4]);
    std::size_t passed = 0;
    for (const auto& l : on_images) {
      passed += l.check.passed() ? 1 : 0;
      std::printf("  %s %s: %s: %s\n", l.name.c_str(), l.shape.c_str(), l.algorithm.c_str(), l.check.summary().c_str());
    }
    std::string damage;
    for (const auto& d : damaged) damage += " " + d + ";";
    std::printf("%s%s: %zu of %zu layers verified on these images; %s; second pass %s; layer-by-layer synchronized pass "
                "differs by at most %g; logits %zu x 1000 written to %s\n",
                net.name().c_str(), shared_workspace ? " (shared workspace)" : "", passed, on_images.size(),
                damaged.empty() ? "no parameter or input buffer changed" : ("CHANGED:" + damage).c_str(),
                repeatable ? "bit-identical" : "DIFFERENT", most, logits.size() / 1000, argv[4]);
    if (layer_diff) {
      // The verification pass and a plain forward pass run the same kernels on the same
      // inputs; only memory around the tensors differs (poisoned outputs, guard bands).
      auto fingerprint = [&](std::size_t i) {
        const std::vector<float> v = net.activation_values(def.layers()[i].output, s.get());
        std::uint64_t h = 1469598103934665603ull;
        for (float f : v) {
          std::uint32_t bits;
          std::memcpy(&bits, &f, 4);
          h = (h ^ bits) * 1099511628211ull;
        }
        return h;
      };
      std::vector<std::uint64_t> verified, plain;
      net.set_input(images, s.get());
      for (std::size_t i = 0; i < def.layers().size(); ++i) {
        net.verify_layer(i, s.get());
        verified.push_back(fingerprint(i));
      }
      net.set_input(images, s.get());
      for (std::size_t i = 0; i < def.layers().size(); ++i) {
        net.run_layer(i, s.get());
        plain.push_back(fingerprint(i));
      }
      std::string differing;
      for (std::size_t i = 0; i < verified.size(); ++i) {
        if (verified[i] != plain[i]) differing += " " + def.layers()[i].name;
      }
      std::printf("  layer-diff: outputs that differ between the verification pass and a plain pass:%s\n",
                  differing.empty() ? " none" : differing.c_str());
    }
    if (!trace_against.empty()) {
      // Both networks layer by layer on the same images: where do they part?
      gpucmp::network_options other = options;
      other.dtype = gpucmp::parse_numerics(trace_against);
      gpucmp::network ref(def, other, s.get());
      ref.set_input(images, s.get());
      net.set_input(images, s.get());
      for (std::size_t i = 0; i < def.layers().size(); ++i) {
        net.run_layer(i, s.get());
        ref.run_layer(i, s.get());
        const std::vector<float> a = net.activation_values(def.layers()[i].output, s.get());
        const std::vector<float> b = ref.activation_values(def.layers()[i].output, s.get());
        double diff = 0, scale = 0, mean_abs = 0;
        for (std::size_t e = 0; e < a.size(); ++e) {
          diff = std::max(diff, double(std::fabs(a[e] - b[e])));
          scale = std::max(scale, double(std::fabs(b[e])));
          mean_abs += std::fabs(b[e]) / double(a.size());
        }
        std::printf("  trace %s vs %s: %-22s max|ref| %.4g mean|ref| %.4g max|diff|/max|ref| %.3g\n", dtype_text.c_str(),
                    trace_against.c_str(), def.layers()[i].name.c_str(), scale, mean_abs, scale > 0 ? diff / scale : diff);
      }
    }
    return passed == on_images.size() && damaged.empty() && repeatable && most == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet50_logits: %s\n", e.what());
    return 1;
  }
}
