// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Data-parallel training over the GPUs of a communicator_group (components gpucmp::nccl,
// gpucmp::cudnn, gpucmp::cublas), as torch's DistributedDataParallel does it: one replica of
// the training step per GPU (training/training_network.cuh), each on its own batch; after the
// backward pass the gradients are averaged across the GPUs in place (NCCL all-reduces with
// ncclAvg: the filters' in the precision's type, the rest in FP32), then every replica takes
// the same optimizer step, so their weights stay identical. As in DDP the gradients go in
// buckets (training/gradient_buckets.hpp, 25 MiB by default): each bucket's all-reduce starts
// on a communication stream per GPU as soon as the backward pass has finished its gradients,
// and overlaps the rest of the backward pass; bucket_bytes 0 gives one all-reduce after it.
// Running statistics stay per GPU (no synchronised batch norm, DDP's default). With loss
// scaling every replica sees the same averaged gradients, so all skip the same steps.
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
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/multigpu/communicator.hpp>
#include <gpucmp/multigpu/nccl_status.hpp>
#include <gpucmp/multigpu/nccl_types.hpp>
#include <gpucmp/multigpu/stream_fork.hpp>
#include <gpucmp/training/gradient_buckets.hpp>
#include <gpucmp/training/training_network.cuh>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace gpucmp {

/// One training step replicated over every GPU of a group (file comment).
class data_parallel_training {
 public:
  /// DDP's default bucket: 25 MiB.
  static constexpr std::size_t default_bucket_bytes = std::size_t{25} << 20;

  /// Builds one replica per GPU of `group` (each searched and verified on its GPU; replica r
  /// draws its synthetic batch with data_seed + r). `options.batch` is per GPU. Gradients are
  /// all-reduced in buckets of at least `bucket_bytes` (0: one all-reduce after the backward pass).
  data_parallel_training(const network_definition& definition, const training_options& options, const communicator_group& group,
                         std::size_t bucket_bytes = default_bucket_bytes)
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
        m_comm_streams.emplace_back();  // on the replica's device
        m_ready.emplace_back();
        m_reduced.emplace_back();
      }
    } catch (...) {
      cudaSetDevice(previous);
      throw;
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_buckets = plan_gradient_buckets(m_replicas.front()->gradients_final_after(), activation_bytes(options.dtype), bucket_bytes);
    plan_bucket_closings();
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
      m_replicas[std::size_t(r)]->forward_and_loss(m_group.stream(r));
    }
    // The backward pass piece by piece on every GPU; a bucket's all-reduce goes out on the
    // communication streams as soon as every GPU has queued the piece that closes it.
    std::vector<std::size_t> next(std::size_t(n), 0);  // each replica's next backward piece
    auto run_through = [&](int r, std::size_t last) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(r)));
      for (std::size_t& j = next[std::size_t(r)]; j <= last && j < m_replicas[std::size_t(r)]->backward_pieces(); ++j) {
        m_replicas[std::size_t(r)]->run_backward_piece(j, m_group.stream(r));
      }
    };
    for (std::size_t b = 0; b < m_buckets.size(); ++b) {
      for (int r = 0; r < n; ++r) run_through(r, m_closing[std::size_t(r)][b]);
      all_reduce(m_buckets[b]);
    }
    for (int r = 0; r < n; ++r) run_through(r, m_replicas[std::size_t(r)]->backward_pieces());
    for (int r = 0; r < n; ++r) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(r)));
      GPUCMP_CUDA_CHECK(cudaEventRecord(m_reduced[std::size_t(r)].get(), m_comm_streams[std::size_t(r)].get()));
      GPUCMP_CUDA_CHECK(cudaStreamWaitEvent(m_group.stream(r), m_reduced[std::size_t(r)].get(), 0));
      m_replicas[std::size_t(r)]->optimize(m_group.stream(r));
      m_fork.done(std::size_t(r), m_group.stream(r));
    }
    GPUCMP_CUDA_CHECK(cudaSetDevice(previous));
    m_fork.join(stream);
  }

  /// GPUs in the step.
  int ranks() const noexcept { return m_group.ranks(); }
  /// The gradient buckets, in the order their all-reduces start.
  const std::vector<gradient_bucket>& buckets() const noexcept { return m_buckets; }
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
  // Each replica's backward piece that closes each bucket. The replicas finish the same
  // gradients in the same order, but each chose its batch norms' paths on its own GPU, and a
  // path can add a piece (a separate gradient sum): so the k-th piece that finishes gradients
  // in replica 0 is matched with the k-th in each replica.
  void plan_bucket_closings() {
    auto finishing = [](const training_network& t) {
      std::vector<std::size_t> pieces;
      const auto& final_after = t.gradients_final_after();
      for (std::size_t j = 0; j < final_after.size(); ++j) {
        if (!final_after[j].empty()) pieces.push_back(j);
      }
      return pieces;
    };
    const std::vector<std::size_t> first = finishing(*m_replicas.front());
    for (const auto& replica : m_replicas) {
      const std::vector<std::size_t> mine = finishing(*replica);
      bool same = mine.size() == first.size();
      for (std::size_t k = 0; same && k < mine.size(); ++k) {
        same = replica->gradients_final_after()[mine[k]] == m_replicas.front()->gradients_final_after()[first[k]];
      }
      if (!same) throw error("data_parallel_training: the replicas finish different gradients in their backward passes");
      std::vector<std::size_t> closing;
      for (const gradient_bucket& b : m_buckets) {
        const std::size_t k = std::size_t(std::find(first.begin(), first.end(), b.after_piece) - first.begin());
        closing.push_back(mine.at(k));
      }
      m_closing.push_back(std::move(closing));
    }
  }

  // One bucket's gradients averaged in place across the GPUs, in one NCCL group, on the
  // communication streams, after the backward pass has finished them on each GPU.
  void all_reduce(const gradient_bucket& bucket) const {
    const numerics dtype = m_replicas.front()->options().dtype;
    const ncclDataType_t filter_type = nccl_data_type(types_of(dtype).output);
    const std::size_t filter_bytes = activation_bytes(dtype);
    for (int r = 0; r < m_group.local_ranks(); ++r) {
      GPUCMP_CUDA_CHECK(cudaSetDevice(m_group.device(r)));
      GPUCMP_CUDA_CHECK(cudaEventRecord(m_ready[std::size_t(r)].get(), m_group.stream(r)));
      GPUCMP_CUDA_CHECK(cudaStreamWaitEvent(m_comm_streams[std::size_t(r)].get(), m_ready[std::size_t(r)].get(), 0));
    }
    GPUCMP_NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < m_group.local_ranks(); ++r) {
      const training_network::gradient_arrays g = m_replicas[std::size_t(r)]->gradient_storage();
      for (const gradient_span& s : bucket.spans) {
        void* data = s.filters ? static_cast<void*>(static_cast<unsigned char*>(g.filters) + s.offset * filter_bytes)
                               : static_cast<void*>(g.rest + s.offset);
        GPUCMP_NCCL_CHECK(ncclAllReduce(data, data, s.count, s.filters ? filter_type : ncclFloat32, ncclAvg, m_group.comm(r),
                                        m_comm_streams[std::size_t(r)].get()));
      }
    }
    GPUCMP_NCCL_CHECK(ncclGroupEnd());
  }

  const communicator_group& m_group;
  std::vector<std::unique_ptr<training_network>> m_replicas;
  std::vector<stream> m_comm_streams;  // one per GPU, on its device: the all-reduces
  std::vector<event> m_ready, m_reduced;  // per GPU: a bucket's gradients are final; every bucket reduced
  std::vector<gradient_bucket> m_buckets;
  std::vector<std::vector<std::size_t>> m_closing;  // [replica][bucket]: the backward piece that closes it
  stream_fork m_fork;  // one branch per GPU
};

}  // namespace gpucmp
