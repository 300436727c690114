// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A small residual CNN run quantized (models/quantized_network.cuh) in INT8 and FP8 E4M3 from
// its own calibration: every layer verified while it is built, each convolution's precision
// and reason in the plan, and its logits beside the FP32 network's on the same images (top-1
// agreement and the largest relative error) and layer by layer (models/layer_errors.hpp); a
// layer forced to FP16 by the plan's rule still gives the same logits.
#include "catch.hpp"
#include "search_pace.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/calibration_run.cuh>
#include <gpucmp/models/layer_errors.hpp>
#include <gpucmp/models/logits_agreement.hpp>
#include <gpucmp/models/network.cuh>
#include <gpucmp/models/quantized_network.cuh>

#include <map>
#include <string>
#include <vector>

namespace {

// Stem (7x7, stride 2: space-to-depth when quantized), max pool, two residual blocks (the
// first ending in a 1x1 that may run as a cuBLASLt matmul, the second strided, with a
// projection), global average pool, linear: the layer kinds of a ResNet, small enough to
// build in seconds.
gpucmp::network_definition small_resnet() {
  gpucmp::network_definition def("small_resnet", {3, 64, 64});
  auto x = def.conv(def.input(), {32, 7, 2, 3, true}, "stem");
  x = def.max_pool(x, 3, 2, 1, "pool");
  auto y = def.conv(x, {32, 3, 1, 1, true}, "block1.conv1");
  x = def.conv(y, {32, 1, 1, 0, true}, "block1.conv2", x);
  auto shortcut = def.conv(x, {64, 1, 2, 0, false}, "block2.down");
  y = def.conv(x, {64, 3, 2, 1, true}, "block2.conv1");
  x = def.conv(y, {64, 3, 1, 1, true}, "block2.conv2", shortcut);
  y = def.conv(x, {64, 3, 1, 1, true}, "block3.conv1");
  x = def.conv(y, {64, 3, 1, 1, true}, "block3.conv2", x);  // block2.conv2's shape and epilogue
  x = def.global_average_pool(x, "gap");
  def.linear(x, 100, "fc");
  def.init_random(11);
  return def;
}

}  // namespace

TEST_CASE("a quantized network verifies every layer and keeps the FP32 network's top-1", "[gpu][models][quantized]") {
  gpucmp::stream s;
  const gpucmp::network_definition def = small_resnet();
  gpucmp::calibration_settings settings;
  settings.images = 64;
  settings.method = gpucmp::calibration_method::max_abs;
  const gpucmp::calibration_table cal = gpucmp::calibrate(def, settings, 32, s.get());
  // The FP32 network's logits on other images than the calibration's.
  gpucmp::network_options fp32;
  fp32.batch = 32;
  fp32.dtype = gpucmp::numerics::fp32;
  fp32.layout = gpucmp::conv_layout::nchw;
  gpucmp::network reference(def, fp32, s.get());
  const std::vector<float> images = gpucmp::random_calibration_images(def.shape(def.input()), 99)(0, 32);
  reference.set_input(images, s.get());
  reference(s.get());
  const std::vector<float> expected = reference.output(s.get());
  for (gpucmp::numerics format : gpucmp::quantized_network_numerics) {
    for (bool by_time : {false, true}) {
      gpucmp::quantized_network_options options;
      options.batch = 32;
      options.choose_by_time = by_time;
      options.search = gpucmp_test::paced(options.search);
      gpucmp::quantized_network net(def, gpucmp::quantization_plan(def, cal, format), options, s.get());
      INFO(net.name() << (by_time ? ", by time" : ", quantized where it runs") << "\n" << net.plan().report());
      for (const gpucmp::layer_report& r : net.layers()) {
        if (r.kind == "conv" || r.kind == "linear") CHECK(r.check.passed());
      }
      // A layer of a shape and epilogue searched before runs that search's verdict.
      std::map<std::string, const gpucmp::layer_report*> first_of_shape;
      std::size_t repeated = 0;
      for (const gpucmp::layer_report& r : net.layers()) {
        if (r.kind != "conv") continue;
        const auto [at, fresh] = first_of_shape.emplace(r.shape, &r);
        if (fresh) continue;
        ++repeated;
        INFO(r.name << " repeats " << at->second->name << "'s " << r.shape);
        CHECK(r.algorithm == at->second->algorithm);
        CHECK(r.searched_seconds == at->second->searched_seconds);
      }
      if (!by_time) CHECK(repeated == 1);
      std::size_t quantized = 0;
      for (const gpucmp::quantized_layer& q : net.plan().layers()) {
        quantized += q.precision == format;
        CHECK(!q.reason.empty());
        if (q.precision == gpucmp::numerics::fp16) CHECK(q.reason != "calibrated");
      }
      if (!by_time) {
        CHECK(quantized == net.plan().layers().size());
        CHECK(net.layers().front().algorithm.find("space-to-depth") != std::string::npos);
      }
      net.set_input(images, s.get());
      net(s.get());
      const std::vector<float> eager = net.output(s.get());
      const gpucmp::logits_agreement a = gpucmp::compare_logits(expected, eager, 100);
      INFO("top-1 agreement " << a.top1_agreement() << ", max relative error " << a.max_relative_error);
      CHECK(a.max_relative_error < (format == gpucmp::numerics::int8 ? 0.1 : 0.2));
      CHECK(a.top1_agreement() >= 0.75);
      // The same pass replayed as one CUDA graph gives the same logits, bit for bit.
      gpucmp::graph_exec g = net.capture(s.get());
      g.launch(s.get());
      const gpucmp::logits_agreement replay = gpucmp::compare_logits(eager, net.output(s.get()), 100);
      CHECK(replay.max_relative_error == 0);
      CHECK(replay.same_top1 == 32);
      if (!by_time) {
        // Layer by layer beside the FP32 network on 8 of the images (last: it sets the input):
        // the stem is a few rounding steps off, not exact, and the last row is the logits'
        // error measured above.
        const std::size_t per_image = std::size_t(def.shape(def.input()).elements());
        const std::vector<gpucmp::layer_error> rows = gpucmp::layer_errors(
            reference, net, std::vector<float>(images.begin(), images.begin() + 8 * per_image), s.get());
        REQUIRE(rows.size() == def.layers().size());
        CHECK(rows.front().layer == "stem");
        CHECK(rows.front().error.relative_rms > 0);
        CHECK(rows.front().error.relative_rms < (format == gpucmp::numerics::int8 ? 0.05 : 0.1));
        const gpucmp::logits_agreement first8 =
            gpucmp::compare_logits(std::vector<float>(expected.begin(), expected.begin() + 800),
                                   std::vector<float>(eager.begin(), eager.begin() + 800), 100);
        CHECK(rows.back().layer == "fc");
        CHECK(rows.back().error.max_relative == Approx(first8.max_relative_error).epsilon(0.01));
      }
    }
  }
}

TEST_CASE("a quantized network refuses average pooling and a bad batch by name", "[gpu][models][quantized]") {
  gpucmp::stream s;
  gpucmp::network_definition def("with_average", {16, 8, 8});
  auto x = def.conv(def.input(), {16, 3, 1, 1, true}, "conv");
  def.average_pool(x, 2, 2, 0, "avg");
  def.init_random(1);
  gpucmp::calibration_table cal;
  for (const std::string& name : gpucmp::calibration_tensors(def)) cal.ranges[name] = 1.0;
  gpucmp::quantized_network_options options;
  CHECK_THROWS_WITH(gpucmp::quantized_network(def, gpucmp::quantization_plan(def, cal, gpucmp::numerics::int8), options, s.get()),
                    GPUCMP_CONTAINS("layer 'avg': average pooling does not run quantized"));
  options.batch = 0;
  CHECK_THROWS_WITH(gpucmp::quantized_network(def, gpucmp::quantization_plan(def, cal, gpucmp::numerics::int8), options, s.get()),
                    GPUCMP_CONTAINS("with_average: batch must be positive"));
}
