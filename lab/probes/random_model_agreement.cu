// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What "top-1 agreement with FP32" measures on ResNet-50's random weights (the quantized
// issue's accuracy row), on the host: the FP64 reference layers run the network on images of
// two families, i.i.d. uniform pixels in [-2, 2] (what benchmarks/resnet50 fed until
// 2026-12-07) and models/calibration_images.hpp's structured ones (what it feeds since), once
// as they are and once with INT8 emulated (per-tensor activation ranges from max |x| over the
// calibration images, per-channel weight ranges, round to nearest, saturate). For each family:
// how many distinct classes FP32 gives, how often the emulated INT8 network agrees with it,
// and the largest logit error relative to FP32's largest logit, with logits as they are and
// centred as compare_logits centres them (each class's mean FP32 logit over the images taken
// out of both sides).
//   random_model_agreement [IMAGES (default 12)] [CALIBRATION IMAGES (default 8)] [uniform|structured]
// About 25 s a network pass on one core; passes run on every core.
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/models/calibration_images.hpp>
#include <gpucmp/models/logits_agreement.hpp>
#include <gpucmp/models/resnet50.hpp>
#include <gpucmp/training/reference_layers.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace ref = gpucmp::reference;

enum class family { uniform, structured };
const char* name_of(family f) { return f == family::uniform ? "i.i.d. uniform pixels" : "structured"; }

// Image `index` of `f` from random stream `seed`: 3 x 224 x 224.
ref::tensor make_image(family f, std::uint64_t seed, std::int64_t index) {
  ref::tensor x(1, 3, 224, 224);
  if (f == family::uniform) {
    for (std::size_t i = 0; i < x.v.size(); ++i) {
      x.v[i] = 4 * gpucmp::unit_interval(gpucmp::random_bits(seed, std::uint64_t(index) * x.v.size() + i)) - 2;
    }
  } else {
    const std::vector<float> image = gpucmp::random_calibration_images({3, 224, 224}, seed)(index, 1);
    std::copy(image.begin(), image.end(), x.v.begin());
  }
  return x;
}

// Rounds `v` to INT8 steps of max_abs / 127, saturated.
void emulate_int8(std::vector<double>& v, double max_abs) {
  if (max_abs <= 0) return;
  const double step = max_abs / 127;
  for (double& x : v) x = std::clamp(std::nearbyint(x / step), -128.0, 127.0) * step;
}

// Per tensor id: max |x| over the calibration images.
using ranges = std::map<int, double>;

// One pass: the logits. With `observed`, each stored tensor's max |x| is taken in; with
// `emulated`, each is rounded to INT8 with those ranges (weights already are).
std::vector<double> forward(const gpucmp::network_definition& def, ref::tensor x, ranges* observed, const ranges* emulated) {
  std::map<int, ref::tensor> t;
  auto store = [&](int id, ref::tensor v) {
    if (observed != nullptr) {
      double m = 0;
      for (double e : v.v) m = std::max(m, std::fabs(e));
      (*observed)[id] = std::max((*observed)[id], m);
    }
    if (emulated != nullptr) emulate_int8(v.v, emulated->at(id));
    t[id] = std::move(v);
  };
  store(def.input().id, std::move(x));
  std::vector<double> logits;
  for (const gpucmp::layer_definition& l : def.layers()) {
    const ref::tensor& in = t.at(l.input.id);
    if (l.kind == gpucmp::layer_kind::conv) {
      ref::tensor w(l.conv.out_channels, in.c, l.conv.kernel, l.conv.kernel);
      std::copy(l.weight.begin(), l.weight.end(), w.v.begin());
      ref::tensor y = ref::conv_forward(in, w, {l.conv.stride, l.conv.pad});
      const std::int64_t plane = y.h * y.w;
      for (std::size_t i = 0; i < y.v.size(); ++i) {
        double v = y.v[i] + l.bias[i / std::size_t(plane) % std::size_t(y.c)];
        if (l.residual.valid()) v += t.at(l.residual.id).v[i];
        y.v[i] = l.conv.relu ? std::max(v, 0.0) : v;
      }
      store(l.output.id, std::move(y));
    } else if (l.kind == gpucmp::layer_kind::max_pool) {
      t[l.output.id] = ref::max_pool_forward(in, l.pool_kernel, {l.pool_stride, l.pool_pad});
    } else if (l.kind == gpucmp::layer_kind::global_average_pool) {
      t[l.output.id] = ref::global_average_pool_forward(in);
    } else if (l.kind == gpucmp::layer_kind::linear) {
      ref::tensor w(l.out_features, in.c);
      std::copy(l.weight.begin(), l.weight.end(), w.v.begin());
      logits = ref::linear_forward(in, w, std::vector<double>(l.bias.begin(), l.bias.end())).v;
    } else {
      throw gpucmp::invalid_argument(std::string("random_model_agreement: no reference for ") + gpucmp::to_string(l.kind));
    }
  }
  return logits;
}

// f(i) for i in 0..count-1 on every core; the first exception is rethrown.
template <class F>
void on_every_core(int count, F f) {
  std::atomic<int> next{0};
  std::mutex failing;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i) {
    threads.emplace_back([&] {
      try {
        for (int j = next++; j < count; j = next++) f(j);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failing);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int images = argc > 1 ? std::atoi(argv[1]) : 12, calibration = argc > 2 ? std::atoi(argv[2]) : 8;
    if (images < 1 || calibration < 1) {
      throw gpucmp::invalid_argument("random_model_agreement: IMAGES and CALIBRATION must be >= 1");
    }
    const gpucmp::network_definition def = gpucmp::resnet50_random(1);
    gpucmp::network_definition int8 = def;  // weights rounded per output channel
    for (const gpucmp::layer_definition& l : def.layers()) {
      if (l.kind != gpucmp::layer_kind::conv) continue;
      std::vector<float>& w = int8.layer(l.name).weight;
      const std::size_t per = w.size() / std::size_t(l.conv.out_channels);
      for (std::size_t k = 0; k < std::size_t(l.conv.out_channels); ++k) {
        std::vector<double> row(w.begin() + std::ptrdiff_t(k * per), w.begin() + std::ptrdiff_t((k + 1) * per));
        double m = 0;
        for (double e : row) m = std::max(m, std::fabs(e));
        emulate_int8(row, m);
        std::copy(row.begin(), row.end(), w.begin() + std::ptrdiff_t(k * per));
      }
    }
    const std::string only = argc > 3 ? argv[3] : "";
    if (!only.empty() && only != "uniform" && only != "structured") {
      throw gpucmp::invalid_argument("random_model_agreement: the family is 'uniform' or 'structured', not '" + only + "'");
    }
    std::printf("| images | logits | FP32's top-1 classes | INT8 (emulated) agrees | max relative logit error |\n");
    std::printf("|---|---|---|---|---|\n");
    for (family f : {family::uniform, family::structured}) {
      if (!only.empty() && only != (f == family::uniform ? "uniform" : "structured")) continue;
      // Ranges over the calibration images (the calibration's seed, 1), then the accuracy images
      // (benchmarks/resnet50's seed, 99) in FP32 and in emulated INT8.
      std::vector<ranges> observed(static_cast<std::size_t>(calibration));
      on_every_core(calibration, [&](int i) { forward(def, make_image(f, 1, i), &observed[std::size_t(i)], nullptr); });
      ranges range;
      for (const ranges& r : observed)
        for (const auto& [id, m] : r) range[id] = std::max(range[id], m);
      std::vector<std::vector<double>> logits(static_cast<std::size_t>(2 * images));
      on_every_core(2 * images, [&](int j) {
        const ref::tensor x = make_image(f, 99, j / 2);
        logits[std::size_t(j)] = j % 2 == 0 ? forward(def, x, nullptr, nullptr) : forward(int8, x, nullptr, &range);
      });
      std::vector<float> fp32, emulated;
      for (int n = 0; n < images; ++n) {
        fp32.insert(fp32.end(), logits[std::size_t(2 * n)].begin(), logits[std::size_t(2 * n)].end());
        emulated.insert(emulated.end(), logits[std::size_t(2 * n + 1)].begin(), logits[std::size_t(2 * n + 1)].end());
      }
      const gpucmp::logits_agreement a = gpucmp::compare_logits(fp32, emulated, std::int64_t(logits[0].size()));
      std::printf("| %s | as they are | %lld of %d | %lld of %d | %.4f |\n", name_of(f), (long long)a.reference_classes, images,
                  (long long)a.same_top1, images, a.max_relative_error);
      std::printf("| %s | centred | %lld of %d | %lld of %d | %.4f |\n", name_of(f), (long long)a.centred_reference_classes,
                  images, (long long)a.centred_same_top1, images, a.centred_max_relative_error);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "random_model_agreement: %s\n", e.what());
    return 1;
  }
}
