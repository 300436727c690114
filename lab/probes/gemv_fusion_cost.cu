// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// What RMSNorm before the product and the residual add after it cost inside gpucmp's GEMV
// kernel (gemv_fusion), at each split, beside the plain kernel: Llama-3-8B's decode GEMVs at 1
// and 4 tokens, each variant 40 launches back to back in a CUDA graph, the median of 15
// replays, W rotated over enough copies that no launch finds its weights in L2. The decoder's
// A/B rows (benchmarks/decoder --norm_fusion) mix this cost with the launches it saves.
#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/ops/gemv.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

int main() {
  constexpr int launches = 40, replays = 15;
  try {
    gpucmp::stream s;
    struct shape {
      const char* name;
      std::int64_t n, k;
    };
    for (std::int64_t batch : {1, 4}) {
      for (const shape& sh : {shape{"qkv", 6144, 4096}, shape{"gate_up", 28672, 4096}, shape{"lm_head", 128256, 4096}}) {
        gpucmp::gemv_options kernel_only;
        kernel_only.cublaslt = false;
        gpucmp::gemv op(gpucmp::gemv_problem{batch, sh.n, sh.k, gpucmp::numerics::bf16}, kernel_only, s.get());
        const std::size_t w_bytes = std::size_t(sh.n * sh.k) * 2;
        const std::size_t copies = std::max<std::size_t>(2, (std::size_t(200) << 20) / w_bytes + 1);
        std::vector<gpucmp::device_buffer<std::uint8_t>> w;
        for (std::size_t c = 0; c < copies; ++c) {
          w.emplace_back(w_bytes, gpucmp::initial_fill::uninitialized());
          GPUCMP_CUDA_CHECK(cudaMemcpy(w.back().data(), op.weights(), w_bytes, cudaMemcpyDeviceToDevice));
        }
        gpucmp::device_buffer<__nv_bfloat16> g(std::size_t(sh.k)), y(std::size_t(batch * sh.n));
        GPUCMP_CUDA_CHECK(cudaDeviceSynchronize());
        for (std::size_t pick = 0; pick < op.candidate_count(); ++pick) {
          op.select(pick, s.get());
          std::printf("%s b%lld %-28s", sh.name, static_cast<long long>(batch), op.describe_candidate(pick).c_str());
          for (int variant = 0; variant < 3; ++variant) {  // plain, norm, add
            gpucmp::gemv_fusion f;
            if (variant == 1) f.norm_weight = g.data();
            f.add_to_output = variant == 2;
            gpucmp::graph captured = gpucmp::capture_graph(s.get(), [&](cudaStream_t on) {
              for (int i = 0; i < launches; ++i) op.run_on(w[std::size_t(i) % copies].data(), op.input(), y.data(), on, 1.0f, f);
            });
            gpucmp::graph_exec exec(captured.get());
            exec.launch(s.get());  // warm
            std::vector<double> us;
            for (int r = 0; r < replays; ++r) {
              gpucmp::event start, stop;
              start.record(s.get());
              exec.launch(s.get());
              stop.record(s.get());
              stop.synchronize();
              us.push_back(gpucmp::elapsed_s(start, stop) * 1e6 / launches);
            }
            std::sort(us.begin(), us.end());
            const double median = us[us.size() / 2];
            std::printf("  %s %7.2f us %6.0f GB/s", variant == 0 ? "plain" : variant == 1 ? "norm" : "add", median,
                        double(w_bytes) / (median * 1e3));
          }
          std::printf("\n");
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemv_fusion_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
