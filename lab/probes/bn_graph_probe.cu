// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Which batch-norm training graphs cudnn-frontend plans on this GPU, and how fast they run
// beside the two paths training/batch_norm.cuh has (cuDNN's persistent legacy kernels and
// gpucmp's kernels): the question before batch norm moves onto ops/cudnn_graph.hpp (the
// architecture issue). For one shape (default ResNet-50's first batch norm at batch 32, FP16
// NHWC) it describes each forward and backward variant below, plans it through cudnn_graph
// (heuristic mode A, then the fallback list), times every plan through gpucmp's engine (graph
// mode) and prints one markdown row per variant: plans, the best plan's engine
// and time, its rate over the bytes the pass must move, or why cuDNN refused it. Then the
// two existing paths on the same tensors, and how far the graph's outputs are from gpucmp's
// kernels' (the semantics: inverse standard deviation saved, running variance unbiased).
//   bn_graph_probe [N C H W [fp16|bf16]]
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/measure/shared_engine.hpp>
#include <gpucmp/ops/cudnn_graph.hpp>
#include <gpucmp/ops/elements.cuh>
#include <gpucmp/training/batch_norm.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace bn_probe {

// The probe's tensors, bound by these uids in every variant.
namespace uid {
constexpr std::int64_t x = 1, z = 2, y = 3, dy = 4, dy2 = 5, dx = 6, dz = 7, mask = 8;
constexpr std::int64_t scale = 10, bias = 11, running_mean = 12, running_var = 13, next_mean = 14, next_var = 15;
constexpr std::int64_t saved_mean = 16, saved_inv_var = 17, dscale = 18, dbias = 19;
}  // namespace uid

struct probe_shape {
  std::int64_t n = 32, c = 64, h = 112, w = 112;
  gpucmp::numerics dtype = gpucmp::numerics::fp16;
  std::int64_t elements() const { return n * c * h * w; }
};

// The device buffers every variant binds (activations in the shape's type, the rest FP32).
struct probe_tensors {
  gpucmp::device_buffer<unsigned char> x, z, y, dy, dy2, dx, dz, mask;
  gpucmp::device_buffer<float> scale, bias, running_mean, running_var, next_mean, next_var, saved_mean, saved_inv_var, dscale,
      dbias;

  probe_tensors(const probe_shape& s, cudaStream_t stream) {
    const std::size_t bytes = std::size_t(s.elements()) * gpucmp::activation_bytes(s.dtype);
    const auto activations = [&](std::uint64_t seed) {
      gpucmp::device_buffer<unsigned char> b(bytes, gpucmp::initial_fill::uninitialized());
      gpucmp::visit_storage(s.dtype, [&](auto zero) {
        using T = decltype(zero);
        gpucmp::fill_uniform(reinterpret_cast<T*>(b.data()), b.bytes() / sizeof(T), seed, -2, 2, stream);
      });
      return b;
    };
    x = activations(1), z = activations(2), y = activations(3), dy = activations(4), dy2 = activations(5);
    dx = activations(6), dz = activations(7);
    mask = gpucmp::device_buffer<unsigned char>(std::size_t(s.elements()), gpucmp::initial_fill::uninitialized());
    const auto channels = [&](std::uint64_t seed, double low, double high) {
      gpucmp::device_buffer<float> b(std::size_t(s.c), gpucmp::initial_fill::uninitialized());
      gpucmp::fill_uniform(b.data(), b.size(), seed, low, high, stream);
      return b;
    };
    scale = channels(10, 0.5, 1.5), bias = channels(11, -0.5, 0.5), running_mean = channels(12, -0.1, 0.1);
    running_var = channels(13, 0.9, 1.1), next_mean = channels(14, 0, 1), next_var = channels(15, 0, 1);
    saved_mean = channels(16, 0, 1), saved_inv_var = channels(17, 0, 1), dscale = channels(18, 0, 1), dbias = channels(19, 0, 1);
  }

  gpucmp::cudnn_variant_pack pack() {
    return {{uid::x, x.data()},
            {uid::z, z.data()},
            {uid::y, y.data()},
            {uid::dy, dy.data()},
            {uid::dy2, dy2.data()},
            {uid::dx, dx.data()},
            {uid::dz, dz.data()},
            {uid::mask, mask.data()},
            {uid::scale, scale.data()},
            {uid::bias, bias.data()},
            {uid::running_mean, running_mean.data()},
            {uid::running_var, running_var.data()},
            {uid::next_mean, next_mean.data()},
            {uid::next_var, next_var.data()},
            {uid::saved_mean, saved_mean.data()},
            {uid::saved_inv_var, saved_inv_var.data()},
            {uid::dscale, dscale.data()},
            {uid::dbias, dbias.data()}};
  }
};

// gpucmp's own measurement of `run` in graph mode (the mode the product's rows report): its
// median GPU time, with the engine's warm-up and noise-based stopping.
double graph_seconds(const std::function<void(cudaStream_t)>& run) {
  return gpucmp::shared_engine().measure(run, gpucmp::mode::graph).gpu.median;
}

void print_row(const std::string& variant, const std::string& plans, const std::string& best, double seconds, double bytes) {
  if (seconds > 0) {
    std::printf("| %s | %s | %s | %.1f | %.0f |\n", variant.c_str(), plans.c_str(), best.c_str(), seconds * 1e6, bytes / seconds / 1e9);
  } else {
    std::printf("| %s | %s | %s | - | - |\n", variant.c_str(), plans.c_str(), best.c_str());
  }
  std::fflush(stdout);
}

struct forward_variant {
  const char* name;
  bool add, relu, mask;
};

struct backward_variant {
  const char* name;
  enum class relu_from { none, mask, y } relu;
  bool dz_out, second_gradient;
};

// What cuDNN is given, in cudnn-frontend's terms: defined in the host pass only
// (ops/cudnn_graph.hpp's opening comment), as an operation's describing function is.
void describe_forward(cudnn_frontend::graph::Graph& g, const probe_shape& s, const forward_variant& v, float eps, float momentum);
void describe_backward(cudnn_frontend::graph::Graph& g, const probe_shape& s, const backward_variant& v);

#if GPUCMP_CUDNN_FRONTEND_VISIBLE
namespace fe = cudnn_frontend;
using tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

fe::DataType_t frontend_type(gpucmp::numerics t) {
  return gpucmp::types_of(t).output == gpucmp::element_type::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

tensor activation(fe::graph::Graph& g, const probe_shape& s, std::int64_t id, const char* name,
                  fe::DataType_t type) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(id)
                      .set_dim({s.n, s.c, s.h, s.w})
                      .set_stride({s.c * s.h * s.w, 1, s.c * s.w, s.c})
                      .set_data_type(type));
}

tensor per_channel(fe::graph::Graph& g, const probe_shape& s, std::int64_t id, const char* name) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(id)
                      .set_dim({1, s.c, 1, 1})
                      .set_stride({s.c, 1, s.c, s.c})
                      .set_data_type(fe::DataType_t::FLOAT));
}

void mark(const tensor& t, std::int64_t id, fe::DataType_t type) { t->set_output(true).set_uid(id).set_data_type(type); }

void describe_forward(fe::graph::Graph& g, const probe_shape& s, const forward_variant& v, float eps, float momentum) {
  const fe::DataType_t io = frontend_type(s.dtype);
  g.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  const tensor x = activation(g, s, uid::x, "x", io);
  tensor mean = per_channel(g, s, uid::running_mean, "running_mean"), var = per_channel(g, s, uid::running_var, "running_var");
  tensor epsilon = g.tensor(eps), mom = g.tensor(momentum);
  auto options = fe::graph::Batchnorm_attributes().set_name("bn").set_epsilon(epsilon).set_previous_running_stats(mean, var, mom);
  auto [bn, saved_mean, saved_inv_var, next_mean, next_var] =
      g.batchnorm(x, per_channel(g, s, uid::scale, "scale"), per_channel(g, s, uid::bias, "bias"), options);
  mark(saved_mean, uid::saved_mean, fe::DataType_t::FLOAT);
  mark(saved_inv_var, uid::saved_inv_var, fe::DataType_t::FLOAT);
  mark(next_mean, uid::next_mean, fe::DataType_t::FLOAT);
  mark(next_var, uid::next_var, fe::DataType_t::FLOAT);
  tensor out = bn;
  if (v.add) out = g.pointwise(out, activation(g, s, uid::z, "z", io), fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  if (v.mask) {
    tensor zero = g.tensor(0.0f);
    mark(g.pointwise(out, zero, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::CMP_GT)), uid::mask,
         fe::DataType_t::BOOLEAN);
  }
  if (v.relu) out = g.pointwise(out, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  mark(out, uid::y, io);
}

void describe_backward(fe::graph::Graph& g, const probe_shape& s, const backward_variant& v) {
  const fe::DataType_t io = frontend_type(s.dtype);
  g.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  tensor grad = activation(g, s, uid::dy, "dy", io);
  if (v.second_gradient) {
    grad = g.pointwise(grad, activation(g, s, uid::dy2, "dy2", io), fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  if (v.relu == backward_variant::relu_from::mask) {
    grad = g.pointwise(grad, activation(g, s, uid::mask, "mask", fe::DataType_t::BOOLEAN),
                       fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
  } else if (v.relu == backward_variant::relu_from::y) {
    grad = g.pointwise(grad, activation(g, s, uid::y, "y", io), fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_BWD));
  }
  if (v.dz_out) mark(grad, uid::dz, io);
  tensor saved_mean = per_channel(g, s, uid::saved_mean, "saved_mean"), saved_inv_var = per_channel(g, s, uid::saved_inv_var, "saved_inv_var");
  auto options = fe::graph::Batchnorm_backward_attributes().set_name("dbn").set_saved_mean_and_inv_variance(saved_mean, saved_inv_var);
  auto [dx, dscale, dbias] = g.batchnorm_backward(grad, activation(g, s, uid::x, "x", io), per_channel(g, s, uid::scale, "scale"), options);
  mark(dx, uid::dx, io);
  mark(dscale, uid::dscale, fe::DataType_t::FLOAT);
  mark(dbias, uid::dbias, fe::DataType_t::FLOAT);
}
#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

// Plans `describe` through cudnn_graph, times every plan and prints its row. Returns the graph
// (null when refused or no plan ran) and its fastest plan in `best_index`.
std::shared_ptr<const gpucmp::cudnn_graph> probe_graph(cudnnHandle_t handle, const std::string& name,
                                                       const gpucmp::cudnn_graph::describe_fn& describe, probe_tensors& t,
                                                       double bytes, std::size_t& best_index) {
  std::shared_ptr<const gpucmp::cudnn_graph> graph;
  try {
    graph = std::make_shared<const gpucmp::cudnn_graph>(handle, describe, gpucmp::cudnn_numerics{}, std::size_t(1) << 30, 16, name);
  } catch (const std::exception& e) {
    print_row(name, "0", std::string("refused: ") + e.what(), 0, bytes);
    return nullptr;
  }
  gpucmp::device_buffer<unsigned char> workspace;
  const gpucmp::cudnn_variant_pack pack = t.pack();
  double best = 0;
  std::string best_name, failures;
  for (std::size_t i = 0; i < graph->size(); ++i) {
    const gpucmp::cudnn_plan& p = graph->plan(i);
    if (p.workspace > workspace.bytes()) workspace = gpucmp::device_buffer<unsigned char>(p.workspace, gpucmp::initial_fill::uninitialized());
    try {
      const double seconds = graph_seconds([&](cudaStream_t s) {
        GPUCMP_CUDNN_CHECK(cudnnSetStream(handle, s));
        graph->execute(handle, i, pack, workspace.data());
      });
      if (best == 0 || seconds < best) {
        best = seconds, best_index = i;
        best_name = "engine " + std::to_string(p.engine) + (p.knobs.empty() ? "" : " (" + p.knobs + ")") +
                    (p.runtime_compiled ? ", runtime-compiled" : "");
      }
    } catch (const std::exception& e) {
      failures += std::string(failures.empty() ? "" : "; ") + "plan " + std::to_string(i) + ": " + e.what();
    }
  }
  print_row(name, std::to_string(graph->size()), best_name.empty() ? "every plan failed: " + failures : best_name, best, bytes);
  return best > 0 ? graph : nullptr;
}

template <class T>
std::vector<float> download_activations(const void* p, std::int64_t n) {
  std::vector<T> raw(static_cast<std::size_t>(n));
  GPUCMP_CUDA_CHECK(cudaMemcpy(raw.data(), p, raw.size() * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = float(raw[i]);
  return out;
}

std::vector<float> download_floats(const float* p, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  GPUCMP_CUDA_CHECK(cudaMemcpy(out.data(), p, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

int run(const probe_shape& s) {
  gpucmp::stream stream;
  cudnnHandle_t handle = nullptr;
  GPUCMP_CUDNN_CHECK(cudnnCreate(&handle));
  GPUCMP_CUDNN_CHECK(cudnnSetStream(handle, stream.get()));
  probe_tensors t(s, stream.get());
  GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream.get()));  // the engine measures on its own stream
  const double act = double(s.elements()) * double(gpucmp::activation_bytes(s.dtype));
  const float eps = 1e-5f, momentum = 0.1f;
  std::printf("batch norm training graphs, %s, n %lld c %lld h %lld w %lld, cuDNN %zu\n\n", gpucmp::to_string(s.dtype),
              (long long)s.n, (long long)s.c, (long long)s.h, (long long)s.w, cudnnGetVersion());
  std::printf("| variant | plans | best plan | us | GB/s over the bytes it must move |\n|---|---|---|---|---|\n");
  const forward_variant forwards[] = {{"fwd: bn", false, false, false},
                                      {"fwd: bn+relu", false, true, false},
                                      {"fwd: bn+add+relu", true, true, false},
                                      {"fwd: bn+add+relu, mask out", true, true, true}};
  std::size_t add_relu_best = 0;
  std::shared_ptr<const gpucmp::cudnn_graph> add_relu;
  for (const forward_variant& v : forwards) {
    const double bytes = act * (2 + (v.add ? 1 : 0)) + (v.mask ? double(s.elements()) / 8 : 0);
    std::size_t best = 0;
    auto g = probe_graph(handle, v.name, [&](cudnn_frontend::graph::Graph& graph) { describe_forward(graph, s, v, eps, momentum); }, t, bytes, best);
    if (v.add && v.relu && !v.mask && g) add_relu = g, add_relu_best = best;
  }
  using rf = backward_variant::relu_from;
  const backward_variant backwards[] = {{"bwd: dbn", rf::none, false, false},
                                        {"bwd: drelu(mask)+dbn", rf::mask, false, false},
                                        {"bwd: drelu(mask)+dz out+dbn", rf::mask, true, false},
                                        {"bwd: drelu(y)+dbn", rf::y, false, false},
                                        {"bwd: drelu(y)+dz out+dbn", rf::y, true, false},
                                        {"bwd: dy+dy2, drelu(y)+dz out+dbn", rf::y, true, true}};
  std::size_t relu_y_best = 0;
  std::shared_ptr<const gpucmp::cudnn_graph> relu_y;
  for (const backward_variant& v : backwards) {
    const double bytes = act * (3 + (v.relu == rf::y ? 1 : 0) + (v.dz_out ? 1 : 0) + (v.second_gradient ? 1 : 0)) +
                         (v.relu == rf::mask ? double(s.elements()) / 8 : 0);
    std::size_t best = 0;
    auto g = probe_graph(handle, v.name, [&](cudnn_frontend::graph::Graph& graph) { describe_backward(graph, s, v); }, t, bytes, best);
    if (v.relu == rf::y && v.dz_out && !v.second_gradient && g) relu_y = g, relu_y_best = best;
  }

  // The two paths batch_norm.cuh has, on the same tensors, as bn+add+relu.
  gpucmp::batch_norm_shape shape;
  shape.n = s.n, shape.c = s.c, shape.h = s.h, shape.w = s.w, shape.dtype = s.dtype, shape.residual = true, shape.relu = true;
  gpucmp::batch_norm_tensors bt;
  bt.x = t.x.data(), bt.z = t.z.data(), bt.y = t.y.data(), bt.gamma = t.scale.data(), bt.beta = t.bias.data();
  bt.running_mean = t.running_mean.data(), bt.running_var = t.running_var.data();
  bt.saved_mean = t.saved_mean.data(), bt.saved_inv_std = t.saved_inv_var.data();
  bt.dy = t.dy.data(), bt.dx = t.dx.data(), bt.dz = t.dz.data(), bt.dgamma = t.dscale.data(), bt.dbeta = t.dbias.data();
  for (gpucmp::batch_norm_path path : {gpucmp::batch_norm_path::cudnn_persistent, gpucmp::batch_norm_path::gpucmp_kernels}) {
    try {
      gpucmp::batch_norm_training bn(handle, shape, path);
      gpucmp::device_buffer<unsigned char> ws(std::max<std::size_t>(bn.workspace_bytes(), 1), gpucmp::initial_fill::uninitialized());
      gpucmp::device_buffer<unsigned char> reserve(std::max<std::size_t>(bn.reserve_bytes(), 1), gpucmp::initial_fill::uninitialized());
      const double f = graph_seconds([&](cudaStream_t st) { bn.forward(bt, ws.data(), reserve.data(), st); });
      print_row(std::string("fwd: ") + gpucmp::to_string(path) + ", bn+add+relu", "-", "-", f, act * 3);
      const double b = graph_seconds([&](cudaStream_t st) { bn.backward(bt, ws.data(), reserve.data(), st); });
      print_row(std::string("bwd: ") + gpucmp::to_string(path) + ", bn+add+relu", "-", "-", b, act * 5);
    } catch (const std::exception& e) {
      print_row(std::string(gpucmp::to_string(path)), "-", std::string("failed: ") + e.what(), 0, 0);
    }
  }

  // The semantics: the graph's outputs against gpucmp's kernels' on the same inputs.
  if (add_relu && relu_y) {
    const gpucmp::cudnn_variant_pack pack = t.pack();
    GPUCMP_CUDNN_CHECK(cudnnSetStream(handle, stream.get()));  // the measurements left it on the engine's
    const std::vector<float> start_mean = download_floats(t.running_mean.data(), s.c), start_var = download_floats(t.running_var.data(), s.c);
    gpucmp::device_buffer<unsigned char> ws(std::max(add_relu->plan(add_relu_best).workspace, relu_y->plan(relu_y_best).workspace) + 1,
                                            gpucmp::initial_fill::uninitialized());
    add_relu->execute(handle, add_relu_best, pack, ws.data());
    relu_y->execute(handle, relu_y_best, pack, ws.data());
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    const auto graph_of = [&](const void* p) {
      return s.dtype == gpucmp::numerics::bf16 ? download_activations<__nv_bfloat16>(p, s.elements())
                                                : download_activations<__half>(p, s.elements());
    };
    const std::vector<float> g_y = graph_of(t.y.data()), g_dx = graph_of(t.dx.data()), g_dz = graph_of(t.dz.data());
    const std::vector<float> g_inv = download_floats(t.saved_inv_var.data(), s.c), g_next_var = download_floats(t.next_var.data(), s.c);
    const std::vector<float> g_dscale = download_floats(t.dscale.data(), s.c);
    GPUCMP_CUDA_CHECK(cudaMemcpy(t.running_mean.data(), start_mean.data(), std::size_t(s.c) * sizeof(float), cudaMemcpyHostToDevice));
    GPUCMP_CUDA_CHECK(cudaMemcpy(t.running_var.data(), start_var.data(), std::size_t(s.c) * sizeof(float), cudaMemcpyHostToDevice));
    gpucmp::batch_norm_training mine(handle, shape, gpucmp::batch_norm_path::gpucmp_kernels);
    gpucmp::device_buffer<unsigned char> mws(std::max<std::size_t>(mine.workspace_bytes(), 1), gpucmp::initial_fill::uninitialized());
    gpucmp::device_buffer<unsigned char> reserve(std::max<std::size_t>(mine.reserve_bytes(), 1), gpucmp::initial_fill::uninitialized());
    mine.forward(bt, mws.data(), reserve.data(), stream.get());
    mine.backward(bt, mws.data(), reserve.data(), stream.get());
    GPUCMP_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    std::printf("\nthe graph (bn+add+relu, then drelu(y)+dz out+dbn) against gpucmp's kernels on the same inputs, max |difference|:\n");
    std::printf("  y %.3g, dx %.3g, dz %.3g, saved inverse std %.3g, running variance (graph's next against gpucmp's updated) %.3g, "
                "dgamma %.3g\n",
                max_abs_difference(g_y, graph_of(t.y.data())), max_abs_difference(g_dx, graph_of(t.dx.data())),
                max_abs_difference(g_dz, graph_of(t.dz.data())), max_abs_difference(g_inv, download_floats(t.saved_inv_var.data(), s.c)),
                max_abs_difference(g_next_var, download_floats(t.running_var.data(), s.c)),
                max_abs_difference(g_dscale, download_floats(t.dscale.data(), s.c)));
  }
  cudnnDestroy(handle);
  return 0;
}

}  // namespace bn_probe

int main(int argc, char** argv) {
  bn_probe::probe_shape s;
  if (argc >= 5) s.n = std::atoll(argv[1]), s.c = std::atoll(argv[2]), s.h = std::atoll(argv[3]), s.w = std::atoll(argv[4]);
  if (argc >= 6 && std::string(argv[5]) == "bf16") s.dtype = gpucmp::numerics::bf16;
  if (s.n <= 0 || s.c <= 0 || s.h <= 0 || s.w <= 0) {
    std::fprintf(stderr, "usage: bn_graph_probe [N C H W [fp16|bf16]] (every extent positive)\n");
    return 2;
  }
  try {
    return bn_probe::run(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bn_graph_probe: %s\n", e.what());
    return 1;
  }
}
