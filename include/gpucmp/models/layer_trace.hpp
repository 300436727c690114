// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Kernel mode, layer by layer: a network's forward pass traced with the activity tracer
// (CUPTI through <gpucmp/measure/kernel_trace.hpp>), every kernel, memset and copy attributed to the
// layer whose launches enqueued it. A layer's time here is what its kernels took inside the
// real pass, on the GPU's clock, where the search's per-layer times come from each layer
// replayed alone. Host code over generic "run layer i" and "wait" callables, so it is tested
// with a fake tracer; network::trace_layers (network.cuh) passes a network's layers and stream.
#pragma once

#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/kernel_profile.hpp>
#include <gpucmp/measure/statistics.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// One layer of a traced forward pass.
struct layer_trace {
  std::string layer;                 ///< the layer's name
  std::vector<kernel_stat> kernels;  ///< its activities by name (per_launch: count per pass), largest first
  double busy_s = 0;                 ///< median over the passes of its activities' summed durations
  double share = 0;                  ///< busy_s over the pass's busy_s (0..1)
};

/// A forward pass traced layer by layer.
struct network_trace {
  std::vector<layer_trace> layers;  ///< in execution order
  std::size_t passes = 0;           ///< traced passes (the medians are over these)
  double busy_s = 0;                ///< median over the passes of every activity's duration, summed
  /// Median over the passes of first start to last end. The traced passes are launched layer
  /// by layer from the host, so this includes host launch gaps; a graph replay has none.
  double eager_span_s = 0;
  std::size_t dropped_records = 0;  ///< records the tracer dropped (then the busy times are low)
};

/// Runs one untraced warm-up pass, then `passes` passes of `layer_count` layers, each layer
/// enqueued by `run_layer(i)` inside its own tracer sample and `wait()` after each pass, and
/// returns each layer's kernels and busy time (`layer_name(i)` names it). Collects after every
/// pass, so the tracer's buffers hold one pass at most. Throws invalid_argument for zero layers
/// or passes, unsupported when tracing is unavailable, and what run_layer or wait throw; the
/// tracer is stopped in every case.
template <class RunLayer, class LayerName, class Wait>
network_trace trace_layers(activity_tracer& tracer, std::size_t layer_count, RunLayer&& run_layer,
                           LayerName&& layer_name, Wait&& wait, std::size_t passes) {
  if (layer_count == 0) throw invalid_argument("trace_layers: the network has no layers");
  if (passes == 0) throw invalid_argument("trace_layers: passes must be >= 1");
  for (std::size_t i = 0; i < layer_count; ++i) run_layer(i);  // warm-up, untraced
  wait();

  tracer.start();
  struct stop_tracing {
    activity_tracer& tracer;
    ~stop_tracing() { tracer.stop(); }
  } stop_on_exit{tracer};
  struct end_sample_if_thrown {  // a layer that throws must not leave its sample open
    activity_tracer& tracer;
    bool open = true;
    ~end_sample_if_thrown() {
      if (!open) return;
      try {
        tracer.end_sample();
      } catch (...) {  // already unwinding from run_layer's exception, which is the one to report
      }
    }
  };

  std::vector<std::vector<double>> layer_busy(layer_count);  // [layer][pass]
  std::vector<breakdown_accumulator> layer_kernels(layer_count);
  std::vector<double> pass_busy, pass_span;
  for (std::size_t pass = 0; pass < passes; ++pass) {
    const std::uint64_t first = static_cast<std::uint64_t>(pass * layer_count);
    for (std::size_t i = 0; i < layer_count; ++i) {
      tracer.begin_sample(first + i);
      end_sample_if_thrown guard{tracer};
      run_layer(i);
      guard.open = false;
      tracer.end_sample();
    }
    wait();
    std::vector<double> busy(layer_count, 0.0);
    std::vector<activity_record> this_pass;
    for (auto& r : tracer.collect()) {
      if (r.sample < first || r.sample >= first + layer_count) continue;  // not from this pass
      const std::size_t layer = static_cast<std::size_t>(r.sample - first);
      busy[layer] += r.duration_s();
      this_pass.push_back(std::move(r));
    }
    // Exposed over the whole pass: a layer's first kernel may overlap the layer before it.
    const std::vector<double> exposed = exposed_times(this_pass);
    for (std::size_t i = 0; i < this_pass.size(); ++i) {
      layer_kernels[static_cast<std::size_t>(this_pass[i].sample - first)].add(this_pass[i], exposed[i]);
    }
    double total = 0;
    for (std::size_t i = 0; i < layer_count; ++i) {
      layer_busy[i].push_back(busy[i]);
      total += busy[i];
    }
    pass_busy.push_back(total);
    pass_span.push_back(times_of(std::move(this_pass)).span_s);
  }

  network_trace trace;
  trace.passes = passes;
  trace.busy_s = summarize(pass_busy).median;
  trace.eager_span_s = summarize(pass_span).median;
  trace.dropped_records = tracer.dropped_records();
  for (std::size_t i = 0; i < layer_count; ++i) {
    layer_trace l;
    l.layer = layer_name(i);
    l.kernels = layer_kernels[i].result(passes);
    l.busy_s = summarize(layer_busy[i]).median;
    l.share = trace.busy_s > 0 ? l.busy_s / trace.busy_s : 0.0;
    trace.layers.push_back(std::move(l));
  }
  return trace;
}

}  // namespace gpucmp
