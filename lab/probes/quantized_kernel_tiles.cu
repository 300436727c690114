// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Where gpucmp's quantized implicit GEMM (models/quantized_conv_kernel.cuh) stands on
// ResNet-50's convolutions, tile by tile, beside cuDNN: the question after its first H100 run,
// where it won only the 64->256 1x1 layers with a residual, by 4 %, and its 3x3 and stem ran at
// a fraction of the tensor cores' rate (docs/results/h100-quantized.md). For each distinct
// layer (the epilogue the network gives it) at one batch it prints one markdown row: the
// fastest verified plan of cuDNN's fused graph, then each tile of gpucmp's kernel, each
// verified at 16,384 sampled outputs before it is timed (20 launches in a CUDA graph, the
// median of 7 replays), with the bytes the layer must move (x, w, z and y once each) over its
// time and its tera-operations per second. A filter names the layers to run (a substring of
// their names), so that ncu can profile a few launches (lab/runs/quantized-check.sh, part ncu).
//   quantized_kernel_tiles [BATCH [int8|fp8 [LAYER-FILTER]]]   (default: 32 int8, every layer)
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/quantized_conv.cuh>
#include <gpucmp/ops/cudnn_status.hpp>

#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// One of ResNet-50's distinct convolutions at batch 1 and the epilogue its network gives it.
struct layer {
  const char* name;
  std::int64_t c, k, hw, rs, stride, pad;
  gpucmp::conv_epilogue epilogue;
};

constexpr gpucmp::conv_epilogue relu{false, true}, residual{true, true}, bias_only{false, false};

// The stem as the quantized network runs it: on its space-to-depth image (models/space_to_depth.hpp).
const layer resnet50_layers[] = {
    {"conv1 (space-to-depth)", 16, 64, 113, 4, 1, 1, relu},
    {"layer1.0.conv1", 64, 64, 56, 1, 1, 0, relu},
    {"layer1.x.conv1", 256, 64, 56, 1, 1, 0, relu},
    {"layer1.x.conv2", 64, 64, 56, 3, 1, 1, relu},
    {"layer1.x.conv3", 64, 256, 56, 1, 1, 0, residual},
    {"layer1.0.downsample", 64, 256, 56, 1, 1, 0, bias_only},
    {"layer2.0.conv1", 256, 128, 56, 1, 1, 0, relu},
    {"layer2.0.conv2", 128, 128, 56, 3, 2, 1, relu},
    {"layer2.0.downsample", 256, 512, 56, 1, 2, 0, bias_only},
    {"layer2.x.conv1", 512, 128, 28, 1, 1, 0, relu},
    {"layer2.x.conv2", 128, 128, 28, 3, 1, 1, relu},
    {"layer2.x.conv3", 128, 512, 28, 1, 1, 0, residual},
    {"layer3.x.conv2", 256, 256, 14, 3, 1, 1, relu},
    {"layer3.x.conv3", 256, 1024, 14, 1, 1, 0, residual},
    {"layer4.x.conv2", 512, 512, 7, 3, 1, 1, relu},
    {"layer4.x.conv3", 512, 2048, 7, 1, 1, 0, residual},
};

struct cudnn_deleter {
  void operator()(cudnnHandle_t h) const noexcept { cudnnDestroy(h); }
};

// Median microseconds of one launch: 20 in a CUDA graph, 7 replays.
template <class Launch>
double time_us(cudaStream_t stream, Launch&& launch) {
  gpucmp::graph captured = gpucmp::capture_graph(stream, [&](cudaStream_t on) {
    for (int l = 0; l < 20; ++l) launch(on);
  });
  gpucmp::graph_exec exec(captured.get());
  exec.launch(stream);
  std::vector<double> us;
  for (int rep = 0; rep < 7; ++rep) {
    gpucmp::event start, stop;
    start.record(stream);
    exec.launch(stream);
    stop.record(stream);
    stop.synchronize();
    us.push_back(gpucmp::elapsed_s(start, stop) * 1e6 / 20);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Each candidate of `path` verified, then timed: "us" per candidate ("-" where it failed, with why).
struct timed {
  std::vector<std::string> names;
  std::vector<double> us;  // < 0: did not verify
  std::string failures;
};

timed run_path(cudnnHandle_t handle, const gpucmp::conv_problem& p, const gpucmp::conv_epilogue& e, gpucmp::fusion_path path,
               gpucmp::quantized_conv_operands& ops, gpucmp::device_buffer<unsigned char>& ws, cudaStream_t stream) {
  timed t;
  std::shared_ptr<gpucmp::quantized_conv_candidates> set;
  try {
    set = std::make_shared<gpucmp::quantized_conv_candidates>(handle, p, e, 8, ws.bytes(),
                                                              std::vector<gpucmp::fusion_path>{path});
  } catch (const gpucmp::unsupported& u) {
    t.failures = u.what();
    return t;
  }
  gpucmp::quantized_conv q(set, ops.tensors(e.residual), ws.data(), ws.bytes());
  for (std::size_t i = 0; i < q.candidate_count(); ++i) {
    q.select(i, stream);
    t.names.push_back(q.describe_candidate(i));
    const gpucmp::verification v = q.verify(stream);
    if (!v.passed()) {
      t.us.push_back(-1);
      t.failures += (t.failures.empty() ? "" : "; ") + q.describe_candidate(i) + ": " + v.summary();
      continue;
    }
    t.us.push_back(time_us(stream, [&](cudaStream_t on) { q(on); }));
  }
  return t;
}

double best(const timed& t) {
  double b = -1;
  for (double u : t.us) {
    if (u >= 0 && (b < 0 || u < b)) b = u;
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::int64_t batch = argc > 1 ? std::atoll(argv[1]) : 32;
    const std::string format = argc > 2 ? argv[2] : "int8";
    const std::string filter = argc > 3 ? argv[3] : "";
    if (batch <= 0 || (format != "int8" && format != "fp8")) {
      std::fprintf(stderr, "usage: quantized_kernel_tiles [BATCH [int8|fp8 [LAYER-FILTER]]]\n");
      return 2;
    }
    const gpucmp::numerics dtype = format == "int8" ? gpucmp::numerics::int8 : gpucmp::numerics::fp8_e4m3;
    cudnnHandle_t raw = nullptr;
    GPUCMP_CUDNN_CHECK(cudnnCreate(&raw));
    std::unique_ptr<std::remove_pointer_t<cudnnHandle_t>, cudnn_deleter> handle(raw);
    gpucmp::stream st;
    gpucmp::device_buffer<unsigned char> ws(std::size_t{256} << 20);
    std::printf("| layer (%s, batch %lld) | shape | cuDNN fused graph us | gpucmp best us | over cuDNN | its GB/s | its TOPS | "
                "each tile us |\n|---|---|---|---|---|---|---|---|\n",
                format.c_str(), static_cast<long long>(batch));
    for (const layer& l : resnet50_layers) {
      if (!filter.empty() && std::string(l.name).find(filter) == std::string::npos) continue;
      gpucmp::conv_problem p;
      p.n = batch;
      p.c = l.c;
      p.k = l.k;
      p.h = p.w = l.hw;
      p.r = p.s = l.rs;
      p.stride_h = p.stride_w = l.stride;
      p.pad_h = p.pad_w = l.pad;
      p.dtype = dtype;
      gpucmp::quantized_conv_operands ops(p, 1.5, 7, st.get());
      const timed dnn = run_path(handle.get(), p, l.epilogue, gpucmp::fusion_path::fused_graph, ops, ws, st.get());
      const timed own = run_path(handle.get(), p, l.epilogue, gpucmp::fusion_path::gpucmp_implicit_gemm, ops, ws, st.get());
      const double d = best(dnn), g = best(own);
      const double bytes = p.x_elements() + p.w_elements() + p.y_elements() * (l.epilogue.residual ? 2.0 : 1.0);
      const double ops_count = 2.0 * p.y_elements() * double(l.c * l.rs * l.rs);
      std::string tiles;
      for (std::size_t i = 0; i < own.us.size(); ++i) {
        char cell[96];
        const std::string n = own.names[i].substr(own.names[i].find(": ") + 2);
        // The tile's shape, and whether it walks several tiles of rows (the same shape may do both).
        const std::string label = n.substr(0, n.find(" tile")) + (n.find("overlapped") != std::string::npos ? " overlapped" : "");
        std::snprintf(cell, sizeof cell, "%s%s %s", tiles.empty() ? "" : "; ", label.c_str(),
                      own.us[i] < 0 ? "failed" : std::to_string(own.us[i]).substr(0, 5).c_str());
        tiles += cell;
      }
      char dnn_cell[32] = "-", g_cell[32] = "-", ratio[32] = "-", rate[32] = "-", tops[32] = "-";
      if (d > 0) std::snprintf(dnn_cell, sizeof dnn_cell, "%.2f", d);
      if (g > 0) {
        std::snprintf(g_cell, sizeof g_cell, "%.2f", g);
        std::snprintf(rate, sizeof rate, "%.0f", bytes / (g * 1e3));
        std::snprintf(tops, sizeof tops, "%.0f", ops_count / (g * 1e6));
      }
      if (d > 0 && g > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", d / g);
      std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", l.name, p.shape_name().c_str(), dnn_cell, g_cell, ratio, rate,
                  tops, tiles.c_str());
      if (!dnn.failures.empty() || !own.failures.empty()) {
        std::fprintf(stderr, "%s: cuDNN: %s; gpucmp: %s\n", l.name, dnn.failures.c_str(), own.failures.c_str());
      }
    }
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(st.get()));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantized_kernel_tiles: %s\n", e.what());
    return 1;
  }
}
