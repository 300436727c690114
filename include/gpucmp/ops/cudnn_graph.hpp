// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A cuDNN operation described as a graph (component gpucmp::cudnn): the operation describes
// its tensors and nodes with cudnn-frontend, NVIDIA's header-only graph API over cuDNN (the
// one PyTorch uses), and cudnn_graph turns the graph into the operation contract's
// candidates (ops/operation.hpp). cuDNN's heuristics enumerate the execution plans (an engine
// in one configuration of its knobs), mode A's list first, then the fallback list; the
// numerics policy drops what a precision forbids (the one place it lives); the plans are
// built when the operation is prepared, never inside a timing, since each plan's workspace
// is known only once it is built and a network sizes its workspaces from them. execute()
// then runs one plan on tensors bound by their graph uids.
//
// What the graph API cannot express is described with cudnn-frontend's operation builders
// (its v8 API, which PyTorch's convolutions use) and planned by the same rules
// (cudnn_graph::of_operations): with cudnn-frontend 1.32, a convolution that adds to its
// output (its convolution nodes fix beta at 0) and gen-stats in FP32 math over an FP16 or BF16
// tensor (its gen-stats node takes the tensor's type as its math type, which cuDNN's fused
// engines refuse for BF16). ops/conv_graph.hpp describes both.
//
// cudnn-frontend's headers are large (tens of seconds of compile time per translation unit),
// so CUDA's device compilation passes, which compile no host code, do not include them: the
// classes here are complete in every pass, and what touches the frontend is defined only in
// the host pass (GPUCMP_CUDNN_FRONTEND_VISIBLE). An operation's own graph-describing function
// follows the same rule.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/ops/cudnn_status.hpp>

#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__CUDA_ARCH__)
/// 0 in CUDA's device compilation passes, which never see cudnn-frontend (this header's opening comment).
#define GPUCMP_CUDNN_FRONTEND_VISIBLE 0
#else
/// 1 where cudnn-frontend is included: every host compilation.
#define GPUCMP_CUDNN_FRONTEND_VISIBLE 1
#include <cstring>  // cudnn_frontend_shim.h (1.32) calls std::strlen without including <cstring>
#include <cudnn_frontend.h>
#endif

namespace cudnn_frontend::graph {
class Graph;
}  // namespace cudnn_frontend::graph

namespace gpucmp {

/// What a describing function fills for cudnn_graph::of_operations: operations made with
/// cudnn-frontend's builders, in the order cuDNN runs them, and the uids of every non-virtual
/// tensor they touch (an execution binds exactly these). Defined in host passes only.
struct cudnn_operations;

/// Which engines a precision allows, by cuDNN's numerical notes. No precision may reduce in
/// less than FP32 (REDUCED_PRECISION_REDUCTION is never allowed).
struct cudnn_numerics {
  bool tensor_cores = true;  ///< TENSOR_CORE and DOWN_CONVERT_INPUTS engines (false: strict FP32)
  bool transforms = true;    ///< FFT and Winograd engines, which lose a few bits more per term

  /// Whether an engine with these numerical notes (cudnn_plan::numerical_notes) may run.
  bool allows(const std::vector<std::string>& notes) const {
    for (const std::string& n : notes) {
      if (n == "REDUCED_PRECISION_REDUCTION") return false;
      if (!tensor_cores && (n == "TENSOR_CORE" || n == "DOWN_CONVERT_INPUTS")) return false;
      if (!transforms && (n == "FFT" || n.compare(0, 8, "WINOGRAD") == 0)) return false;
    }
    return true;
  }
};

/// One execution plan of a graph: an engine in one configuration of its knobs.
struct cudnn_plan {
  std::int64_t engine = -1;                  ///< the engine's global index
  std::string knobs;                         ///< its knob choices as cuDNN tags them: "k2=3,k3=0"
  std::vector<std::string> numerical_notes;  ///< "TENSOR_CORE", "WINOGRAD_4x4", ...
  bool runtime_compiled = false;             ///< cuDNN compiled the engine when the plan was built
  std::size_t workspace = 0;                 ///< bytes it needs
  int heuristic_rank = 0;                    ///< place in heuristic mode A's list, then the fallback list's
  bool fallback = false;                     ///< from the fallback list

  /// Its numerical notes, then RUNTIME_COMPILED where it applies: "TENSOR_CORE,RUNTIME_COMPILED".
  std::string notes() const {
    std::string out;
    for (const std::string& n : numerical_notes) out += (out.empty() ? "" : ",") + n;
    if (runtime_compiled) out += std::string(out.empty() ? "" : ",") + "RUNTIME_COMPILED";
    return out;
  }
};

/// Device pointers of a graph's tensors by their uids: what one execution binds.
using cudnn_variant_pack = std::unordered_map<std::int64_t, void*>;

/// The libraries a cuDNN row names: cuDNN's version, and cudnn-frontend's where this
/// compilation pass sees it (the device passes never see the frontend).
inline std::vector<std::pair<std::string, std::string>> cudnn_libraries() {
  std::vector<std::pair<std::string, std::string>> v{{"cudnn", std::to_string(cudnnGetVersion())}};
#if GPUCMP_CUDNN_FRONTEND_VISIBLE
  v.emplace_back("cudnn_frontend", std::to_string(CUDNN_FRONTEND_VERSION));
#endif
  return v;
}

/// A cudnn-frontend graph validated, built and planned on one cuDNN handle; its plans are
/// an operation's candidates. Immutable once constructed, so operations of the same shape
/// may share it. Owns the frontend graph (and with it the plans); the handle must outlive it.
class cudnn_graph {
 public:
  /// Fills a fresh frontend graph: tensors (with uids), nodes, data types.
  using describe_fn = std::function<void(cudnn_frontend::graph::Graph&)>;

  /// Describes the graph with `describe`, validates and builds it on `handle`, asks cuDNN's
  /// heuristics for mode A's list and then the fallback list (an engine mode A already gave
  /// is not taken again from the fallback list), leaves out what `policy` forbids, what does
  /// not build and what needs more than `workspace_limit` bytes, and stops once `max_plans`
  /// plans are built. `what` names the operation in errors. Throws unsupported when cuDNN
  /// supports no plan of the graph (or refuses the graph itself), library_error when the
  /// frontend fails otherwise, and rethrows what `describe` throws.
  cudnn_graph(cudnnHandle_t handle, const describe_fn& describe, const cudnn_numerics& policy,
              std::size_t workspace_limit, std::size_t max_plans, const std::string& what);

  /// Fills the operations of what the graph API cannot express (this header's opening comment).
  using operations_fn = std::function<void(cudnn_operations&)>;
  /// Plans for operations `describe` makes with cudnn-frontend's builders, by the graph
  /// constructor's rules (heuristic mode A, then the fallback list; the notes policy; workspace limit;
  /// `max_plans`). Throws as that constructor does.
  static std::shared_ptr<const cudnn_graph> of_operations(cudnnHandle_t handle, const operations_fn& describe,
                                                          const cudnn_numerics& policy, std::size_t workspace_limit,
                                                          std::size_t max_plans, const std::string& what);

  /// How many plans were built.
  std::size_t size() const noexcept { return m_plans.size(); }
  /// Plan `i`.
  const cudnn_plan& plan(std::size_t i) const { return m_plans.at(i); }
  /// Every plan, in heuristic order.
  const std::vector<cudnn_plan>& plans() const noexcept { return m_plans; }

  /// Enqueues plan `i` on the stream `handle` is set to, on the tensors `pack` binds, with
  /// `workspace` (plan(i).workspace bytes at least; null when it needs none). Throws
  /// invalid_argument for a missing tensor, library_error when cuDNN refuses the execution.
  void execute(cudnnHandle_t handle, std::size_t i, const cudnn_variant_pack& pack, void* workspace) const;

 private:
  struct built_operations;  // of_operations: the operation graph and its plans (host passes only)
  cudnn_graph() = default;

  std::shared_ptr<cudnn_frontend::graph::Graph> m_graph;    // from the graph API (complete in host passes only)
  std::shared_ptr<const built_operations> m_operations;     // or from the operation builders
  std::vector<cudnn_plan> m_plans;
  std::vector<std::int64_t> m_indices;  // each plan's index among the graph's
  std::string m_what;
};

#if GPUCMP_CUDNN_FRONTEND_VISIBLE

namespace detail {

/// A frontend graph whose engine configurations' numerical notes can be read (the frontend
/// keeps them protected; it filters on them but does not return them).
class inspectable_graph : public cudnn_frontend::graph::Graph {
 public:
  /// Numerical notes of engine configuration `i`, as cuDNN names them.
  std::vector<std::string> numerical_notes(std::int64_t i) const {
    using note = cudnn_frontend::NumericalNote_t;
    std::vector<std::string> out;
    for (note n : plans.numeric_notes.at(std::size_t(i))) {
      switch (n) {
        case note::NOT_SET: break;  // the frontend (1.32) pads the list with these
        case note::TENSOR_CORE: out.push_back("TENSOR_CORE"); break;
        case note::DOWN_CONVERT_INPUTS: out.push_back("DOWN_CONVERT_INPUTS"); break;
        case note::REDUCED_PRECISION_REDUCTION: out.push_back("REDUCED_PRECISION_REDUCTION"); break;
        case note::FFT: out.push_back("FFT"); break;
        case note::NONDETERMINISTIC: out.push_back("NONDETERMINISTIC"); break;
        case note::WINOGRAD: out.push_back("WINOGRAD"); break;
        case note::WINOGRAD_TILE_4x4: out.push_back("WINOGRAD_4x4"); break;
        case note::WINOGRAD_TILE_6x6: out.push_back("WINOGRAD_6x6"); break;
        case note::WINOGRAD_TILE_13x13: out.push_back("WINOGRAD_13x13"); break;
        case note::STRICT_NAN_PROP: out.push_back("STRICT_NAN_PROP"); break;
      }
    }
    return out;
  }
};

/// Throws for a failed frontend call: unsupported where cuDNN does not support the graph or
/// has no plan for it, library_error otherwise.
inline void check_frontend(cudnn_frontend::error_t status, const std::string& what) {
  using code = cudnn_frontend::error_code_t;
  if (status.is_good()) return;
  const std::string message = what + ": " + status.get_message();
  switch (status.get_code()) {
    case code::GRAPH_NOT_SUPPORTED:
    case code::HEURISTIC_QUERY_FAILED:
    case code::GRAPH_EXECUTION_PLAN_CREATION_FAILED: throw unsupported(message);
    case code::INVALID_VARIANT_PACK: throw invalid_argument(message);
    default: throw library_error("cudnn-frontend: " + message);
  }
}

// "eng12_k2=3_k3=0" (cuDNN's tag of an engine configuration) -> "k2=3,k3=0".
inline std::string knobs_of_tag(const std::string& tag) {
  std::string out;
  std::size_t at = tag.find("_k");
  while (at != std::string::npos) {
    const std::size_t next = tag.find("_k", at + 2);
    out += (out.empty() ? "" : ",") + tag.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    at = next;
  }
  return out;
}

}  // namespace detail

inline cudnn_graph::cudnn_graph(cudnnHandle_t handle, const describe_fn& describe, const cudnn_numerics& policy,
                                std::size_t workspace_limit, std::size_t max_plans, const std::string& what)
    : m_what(what) {
  namespace fe = cudnn_frontend;
  auto graph = std::make_shared<detail::inspectable_graph>();
  try {
    describe(*graph);
    detail::check_frontend(graph->validate(), "validating the graph of " + what);
    detail::check_frontend(graph->build_operation_graph(handle), "building the graph of " + what);
    // Mode A's list, then the fallback list appended to it (the frontend keeps one list);
    // either may be empty, not both.
    const fe::error_t mode_a = graph->create_execution_plans({fe::HeurMode_t::A});
    const std::int64_t from_mode_a = graph->get_execution_plan_count();
    const fe::error_t fallback = graph->create_execution_plans({fe::HeurMode_t::FALLBACK});
    if (mode_a.is_bad() && fallback.is_bad()) detail::check_frontend(mode_a, "cuDNN's heuristics for " + what);
    graph->deselect_workspace_greater_than(std::int64_t(workspace_limit));
    const std::int64_t configurations = graph->get_execution_plan_count();
    std::vector<std::int64_t> engines_built;
    for (std::int64_t i = 0; i < configurations && m_plans.size() < max_plans; ++i) {
      cudnn_plan p;
      p.heuristic_rank = int(i);
      p.fallback = i >= from_mode_a;
      p.numerical_notes = graph->numerical_notes(i);
      if (!policy.allows(p.numerical_notes)) continue;
      std::unordered_map<fe::KnobType_t, std::int64_t> knobs;
      if (graph->get_engine_and_knobs_at_index(i, p.engine, knobs).is_bad()) continue;
      if (p.fallback && std::find(engines_built.begin(), engines_built.end(), p.engine) != engines_built.end()) {
        continue;  // usually a repeat of mode A's
      }
      if (graph->build_plan_at_index(i).is_bad()) continue;  // not supported, or over the workspace limit
      std::int64_t workspace = 0;
      detail::check_frontend(graph->get_workspace_size_plan_at_index(i, workspace), "the workspace of a plan of " + what);
      if (workspace < 0 || std::size_t(workspace) > workspace_limit) continue;
      p.workspace = std::size_t(workspace);
      std::string tag;
      if (graph->get_plan_name_at_index(i, tag).is_good()) p.knobs = detail::knobs_of_tag(tag);
      std::vector<fe::BehaviorNote_t> behaviors;
      if (graph->get_behavior_notes_for_plan_at_index(i, behaviors).is_good()) {
        p.runtime_compiled =
            std::find(behaviors.begin(), behaviors.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) != behaviors.end();
      }
      engines_built.push_back(p.engine);
      m_plans.push_back(std::move(p));
      m_indices.push_back(i);
    }
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {  // the frontend's older layers throw cudnnException
    throw library_error("cudnn-frontend, " + what + ": " + e.what());
  }
  if (m_plans.empty()) {
    throw unsupported("no cuDNN plan for " + what + " within a " + std::to_string(workspace_limit >> 20) +
                      " MiB workspace and its precision's numerical notes");
  }
  m_graph = std::move(graph);
}

struct cudnn_operations {
  std::vector<cudnn_frontend::Operation> operations;  ///< in the order cuDNN runs them
  std::vector<std::int64_t> uids;                     ///< every non-virtual tensor's
};

struct cudnn_graph::built_operations {
  cudnn_frontend::OperationGraph graph;
  std::vector<cudnn_frontend::ExecutionPlan> plans;
  std::vector<std::int64_t> uids;
};

namespace detail {

// The numerical notes an engine configuration names, checked before its plan is built (a plan
// of a runtime-compiled engine compiles while it is built).
inline std::vector<std::string> configuration_notes(const cudnn_frontend::ManagedOpaqueDescriptor& config) {
  namespace fe = cudnn_frontend;
  const cudnnBackendDescriptor_t raw = config->get_backend_descriptor();
  std::vector<std::string> out;
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_TENSOR_CORE>(raw)) out.push_back("TENSOR_CORE");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS>(raw)) out.push_back("DOWN_CONVERT_INPUTS");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION>(raw)) out.push_back("REDUCED_PRECISION_REDUCTION");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_FFT>(raw)) out.push_back("FFT");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC>(raw)) out.push_back("NONDETERMINISTIC");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD>(raw)) out.push_back("WINOGRAD");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4>(raw)) out.push_back("WINOGRAD_4x4");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6>(raw)) out.push_back("WINOGRAD_6x6");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13>(raw)) out.push_back("WINOGRAD_13x13");
  if (fe::hasNumericalNote<CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP>(raw)) out.push_back("STRICT_NAN_PROP");
  return out;
}

// "eng12_k2=3_k3=0" -> 12.
inline std::int64_t engine_of_tag(const std::string& tag) {
  return tag.compare(0, 3, "eng") == 0 ? std::strtoll(tag.c_str() + 3, nullptr, 10) : -1;
}

}  // namespace detail

inline std::shared_ptr<const cudnn_graph> cudnn_graph::of_operations(cudnnHandle_t handle, const operations_fn& describe,
                                                                     const cudnn_numerics& policy,
                                                                     std::size_t workspace_limit, std::size_t max_plans,
                                                                     const std::string& what) {
  namespace fe = cudnn_frontend;
  std::shared_ptr<cudnn_graph> out(new cudnn_graph());
  out->m_what = what;
  try {
    cudnn_operations ops;
    describe(ops);
    std::vector<const fe::Operation*> raw;
    for (const auto& op : ops.operations) raw.push_back(&op);
    auto built = std::make_shared<built_operations>(
        built_operations{fe::OperationGraphBuilder().setHandle(handle).setOperationGraph(std::int64_t(raw.size()), raw.data()).build(),
                         {},
                         ops.uids});
    std::vector<std::int64_t> engines_built;
    int rank = 0;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      std::vector<fe::ManagedOpaqueDescriptor> configs;
      try {
        auto heuristics = fe::EngineHeuristicsBuilder().setOperationGraph(built->graph).setHeurMode(mode).build();
        configs = heuristics.getEngineConfig(heuristics.getEngineConfigCount());
      } catch (const fe::cudnnException&) {
        continue;  // no list in this mode
      }
      for (const auto& config : configs) {
        const int this_rank = rank++;
        if (out->m_plans.size() >= max_plans) break;
        cudnn_plan p;
        p.heuristic_rank = this_rank;
        p.fallback = mode == CUDNN_HEUR_MODE_FALLBACK;
        p.numerical_notes = detail::configuration_notes(config);
        if (!policy.allows(p.numerical_notes)) continue;
        try {
          fe::ExecutionPlan plan = fe::ExecutionPlanBuilder().setHandle(handle).setEngineConfig(config, built->graph.getTag()).build();
          const std::string tag = plan.getTag();
          p.engine = detail::engine_of_tag(tag);
          if (p.fallback && std::find(engines_built.begin(), engines_built.end(), p.engine) != engines_built.end()) continue;
          const std::int64_t workspace = plan.getWorkspaceSize();
          if (workspace < 0 || std::size_t(workspace) > workspace_limit) continue;
          p.workspace = std::size_t(workspace);
          p.knobs = detail::knobs_of_tag(tag);
          const auto behaviors = plan.getAllBehaviorNotes();
          p.runtime_compiled =
              std::find(behaviors.begin(), behaviors.end(), CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) != behaviors.end();
          engines_built.push_back(p.engine);
          out->m_plans.push_back(std::move(p));
          built->plans.push_back(std::move(plan));
        } catch (const fe::cudnnException&) {
          continue;  // this configuration does not build: not supported
        }
      }
    }
    out->m_operations = std::move(built);
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {
    throw unsupported("cudnn-frontend refused the operations of " + what + ": " + e.what());
  }
  if (out->m_plans.empty()) {
    throw unsupported("no cuDNN plan for " + what + " within a " + std::to_string(workspace_limit >> 20) +
                      " MiB workspace and its precision's numerical notes");
  }
  return out;
}

inline void cudnn_graph::execute(cudnnHandle_t handle, std::size_t i, const cudnn_variant_pack& pack, void* workspace) const {
  if (m_operations) {
    std::vector<void*> pointers;
    for (std::int64_t uid : m_operations->uids) {
      const auto found = pack.find(uid);
      if (found == pack.end()) throw invalid_argument(m_what + ": no tensor bound to uid " + std::to_string(uid));
      pointers.push_back(found->second);
    }
    try {
      auto variant_pack = cudnn_frontend::VariantPackBuilder()
                              .setWorkspacePointer(workspace)
                              .setDataPointers(std::int64_t(pointers.size()), pointers.data())
                              .setUids(std::int64_t(m_operations->uids.size()), m_operations->uids.data())
                              .build();
      detail::check_cudnn(cudnnBackendExecute(handle, m_operations->plans.at(i).get_raw_desc(), variant_pack.get_raw_desc()),
                  "executing plan " + std::to_string(i) + " of " + m_what);
    } catch (const cudnn_frontend::cudnnException& e) {
      throw library_error("cudnn-frontend, executing plan " + std::to_string(i) + " of " + m_what + ": " + e.what());
    }
    return;
  }
  // The frontend takes a mutable map it only reads.
  auto& bound = const_cast<cudnn_variant_pack&>(pack);
  detail::check_frontend(m_graph->execute_plan_at_index(handle, bound, workspace, m_indices.at(i)),
                         "executing plan " + std::to_string(i) + " of " + m_what);
}

#endif  // GPUCMP_CUDNN_FRONTEND_VISIBLE

}  // namespace gpucmp
