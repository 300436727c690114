// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Data-parallel training over the GPUs of a communicator_group (components gpucmp::nccl,
// gpucmp::cudnn, gpucmp::cublas), as torch's DistributedDataParallel does it: one replica of
// the training step per GPU (training/training_network.cuh), each on its own batch; after the
// backward pass the gradients are averaged across the GPUs in place (two NCCL all-reduces
// with ncclAvg: the filters' in the precision's type, the rest in FP32), then every replica
// takes the same optimizer step, so their weights stay identical. Running statistics stay
// per GPU (no synchronised batch norm, DDP's default). With loss scaling every replica sees
// the same averaged gradients, so all skip the same steps.
//
// A step forks from the stream it is given and joins back, like the collectives, so the
// engine times it across GPUs in hot mode or as one CUDA graph.
//
//   gpucmp::communicator_group group = gpucmp::communicator_group::all_visible();
//   gpucmp::data_parallel_training dp(def, options, group);   // options.batch per GPU
//   st.set_work(dp.work());                                   // images of every GPU
//   st.run(dp);
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/multigpu/communicator.hpp>
#include <gpucmp/multigpu/nccl_status.hpp>
#include <gpucmp/multigpu/stream_fork.hpp>
#include <gpucmp/training/training_network.cuh>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// One training step replicated over every GPU of a group (file comment).
class data_parallel_training {
 public:
  /// Builds one replica per GPU of `group` (each searched and verified on its GPU; replica r
  /// draws its synthetic batch with data_seed + r). `options.batch` is per GPU.
  data_parallel_training(const network_definition& definition, const training_options& options, const communicator_group& group)
      : m_group(group), m_fork(group.devices()) {
    if (!group.single_process()) {
      throw unsupported("data_parallel_training: ranks in several processes (MPI) are not written yet; run every GPU in one process");
    }
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    try {
      for (int r = 0; r < group.local_ranks(); ++r) {
        GPUCMP_CUDA_CHECK(cudaSetDevice(group.device(r)));
        training_options o = options;
        o.data_seed = options.data_seed + std::uint64_t(r);
        m_replicas.push_back(std::make_unique<training_network>(definition, o, group.stream(r)));
      }
    } catch (...) {
      cudaSetDevice(previous);
      throw;
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
  }
  data_parallel_training(const data_parallel_training&) = delete;
  data_parallel_training& operator=(const data_parallel_training&) = delete;

  /// Enqueues one step on every GPU, forked from and joined to `stream` (any device's).
  void operator()(cudaStream_t stream) const {
    int previous = 0;
    GPUCMP_CUDA_CHECK(cudaGetDevice(&previous));
    m_fork.begin(stream);
    const int n = m_group.local_ranks();
    for (int r = 0; r < n; ++r) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(r)));
      m_fork.wait(std::size_t(r), m_group.stream(r));
      m_replicas[std::size_t(r)]->forward_backward(m_group.stream(r));
    }
    average_gradients();
    for (int r = 0; r < n; ++r) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(r)));
      m_replicas[std::size_t(r)]->optimize(m_group.stream(r));
      m_fork.done(std::size_t(r), m_group.stream(r));
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_fork.join(stream);
  }

  /// GPUs in the step.
  int ranks() const noexcept { return m_group.ranks(); }
  /// Replica `r` (on the group's device r).
  training_network& replica(int r) { return *m_replicas.at(std::size_t(r)); }
  /// "resnet50 training amp_fp16 nhwc batch 256 x 2 GPUs".
  std::string name() const { return m_replicas.front()->name() + " x " + std::to_string(ranks()) + " GPUs"; }
  /// One step's work on every GPU: each replica's FLOPs and images, times the GPUs.
  gpucmp::work work() const {
    gpucmp::work w = m_replicas.front()->work();
    w.flops *= ranks();
    w.items *= ranks();
    return w;
  }

 private:
  // Every replica's gradients averaged in place across the GPUs, in one NCCL group.
  void average_gradients() const {
    const ncclDataType_t filter_type = m_replicas.front()->options().dtype == conv_dtype::fp16   ? ncclFloat16
                                       : m_replicas.front()->options().dtype == conv_dtype::bf16 ? ncclBfloat16
                                                                                                 : ncclFloat32;
    GPUCMP_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < m_group.local_ranks(); ++r) {
      const training_network::gradient_arrays g = m_replicas[std::size_t(r)]->gradient_storage();
      if (g.filter_count != 0) {
        GPUCMP_NCCL_CHECK(ncclAllReduce(g.filters, g.filters, g.filter_count, filter_type, ncclAvg, m_group.comm(r), m_group.stream(r)));
      }
      GPUCMP_NCCL_CHECK(ncclAllReduce(g.rest, g.rest, g.rest_count, ncclFloat32, ncclAvg, m_group.comm(r), m_group.stream(r)));
    }
    GPUCMP_NCCL_CHECK(ncclGroupEnd());
  }

  const communicator_group& m_group;
  std::vector<std::unique_ptr<training_network>> m_replicas;
  stream_fork m_fork;  // one branch per GPU
};

}  // namespace gpucmp
