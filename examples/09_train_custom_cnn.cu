// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Example 9: train your own CNN and time its training step. Describe the network as for
// inference (each convolution trains as conv -> batch norm -> add -> ReLU), give it a task,
// and register the step like any kernel: gpucmp builds forward, backward, loss scaling and
// SGD for the batch and precision, searches and verifies every layer, then times the whole
// step (eagerly, or as one CUDA graph).
//
// The task is fixed and synthetic: random images labelled by a random "teacher" network of
// the same shape (its logits centred over the batch, so the labels spread over the classes
// instead of all taking the class its biases favour). Before timing, the student trains 100
// steps on it and prints its loss falling.
//   09_train_custom_cnn [--loss_out=losses.json] [benchmark flags]
#include <gpucmp/bench.hpp>
#include <gpucmp/models/network.cuh>
#include <gpucmp/training/training_network.cuh>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t batch = 128;
constexpr std::int64_t classes = 10;

// A small residual CNN for 32 x 32 images.
gpucmp::network_definition my_cnn(std::uint64_t seed) {
  gpucmp::network_definition def("my_cnn", {3, 32, 32});
  // conv_spec: out_channels, kernel, stride, pad, relu
  auto x = def.conv(def.input(), {32, 3, 1, 1, true}, "stem");
  x = def.max_pool(x, 2, 2, 0, "pool");
  auto y = def.conv(x, {32, 3, 1, 1, true}, "block.conv1");
  x = def.conv(y, {32, 3, 1, 1, true}, "block.conv2", x);  // + shortcut, then ReLU
  x = def.conv(x, {64, 3, 2, 1, true}, "down");
  def.linear(def.global_average_pool(x, "gap"), classes, "fc");
  def.init_random(seed);
  return def;
}

struct task {
  std::vector<float> images;         // batch x 3 x 32 x 32
  std::vector<std::int32_t> labels;  // the teacher's
};

task teacher_task(cudaStream_t stream) {
  task t;
  t.images.resize(std::size_t(batch * 3 * 32 * 32));
  for (std::size_t i = 0; i < t.images.size(); ++i) t.images[i] = float(2 * gpucmp::unit_interval(gpucmp::random_bits(5, i)) - 1);
  gpucmp::network_options o;
  o.batch = batch;
  o.dtype = gpucmp::numerics::fp32;
  gpucmp::network teacher(my_cnn(1234), o, stream);  // searched and verified like any network
  teacher.set_input(t.images, stream);
  teacher(stream);
  const std::vector<float> logits = teacher.output(stream);
  std::vector<double> mean(classes, 0.0);
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < classes; ++c) mean[std::size_t(c)] += logits[std::size_t(n * classes + c)] / double(batch);
  for (std::int64_t n = 0; n < batch; ++n) {
    std::int32_t best = 0;
    for (std::int32_t c = 1; c < classes; ++c) {
      const auto at = [&](std::int32_t k) { return logits[std::size_t(n * classes + k)] - mean[std::size_t(k)]; };
      if (at(c) > at(best)) best = c;
    }
    t.labels.push_back(best);
  }
  return t;
}

std::string& loss_out() {
  static std::string path;
  return path;
}

// Built once (AMP FP16), trained 100 steps on the teacher's task, then timed in each mode.
gpucmp::training_network& student(cudaStream_t stream) {
  static std::unique_ptr<gpucmp::training_network> net;
  if (net) return *net;
  gpucmp::training_options o;
  o.batch = batch;
  o.dtype = gpucmp::numerics::fp16;  // with dynamic loss scaling
  o.sgd.learning_rate = 0.05f;
  net = std::make_unique<gpucmp::training_network>(my_cnn(1), o, stream);
  const task t = teacher_task(stream);
  net->set_batch(t.images, t.labels, stream);
  std::vector<float> losses;
  for (int k = 0; k < 100; ++k) {
    net->step(stream);
    losses.push_back(net->loss(stream));
  }
  std::printf("my_cnn: loss on the teacher's labels over 100 steps: %.4f -> %.4f (%lld skipped steps)\n", losses.front(),
              losses.back(), static_cast<long long>(net->loss_scale(stream).skipped_steps));
  if (!loss_out().empty()) {
    std::ofstream out(loss_out());
    out << "{\"network\": \"my_cnn\", \"losses\": [";
    for (std::size_t k = 0; k < losses.size(); ++k) out << (k ? ", " : "") << losses[k];
    out << "]}\n";
  }
  return *net;
}

void train_my_cnn(gpucmp::state& st) {
  gpucmp::training_network& net = student(st.stream());
  st.set_work(net.work());  // training FLOPs and images per step
  st.run([&net](cudaStream_t s) { net.step(s); });
}

}  // namespace

GPUCMP_BENCHMARK(train_my_cnn, gpucmp::mode::graph, gpucmp::mode::hot);

int main(int argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--loss_out=", 11) == 0) {
      loss_out() = argv[i] + 11;
    } else {
      argv[kept++] = argv[i];
    }
  }
  return gpucmp::benchmark_main(kept, argv);
}
