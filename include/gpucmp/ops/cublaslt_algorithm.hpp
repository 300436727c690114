// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A cuBLASLt algorithm as results record it (component gpucmp::cublas): its configuration
// (id, tile, stages, split-K, swizzle, cluster), workspace and how it was chosen. Shared by the
// GEMM (ops/gemm.cuh) and the layers that run as one cuBLASLt matmul.
#pragma once

#include <gpucmp/ops/algorithm_search.hpp>

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

namespace gpucmp {

/// The cuBLASLt algorithm a gemm (or a matmul layer) runs, as recorded in its results.
struct gemm_algorithm {
  int id = -1;                  ///< CUBLASLT_ALGO_CONFIG_ID
  unsigned tile = 0;            ///< CUBLASLT_ALGO_CONFIG_TILE_ID
  unsigned stages = 0;          ///< CUBLASLT_ALGO_CONFIG_STAGES_ID
  int split_k = 1;              ///< CUBLASLT_ALGO_CONFIG_SPLITK_NUM
  unsigned reduction = 0;       ///< CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME
  unsigned swizzle = 0;         ///< CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING
  unsigned custom = 0;          ///< CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION
  unsigned cluster = 0;         ///< CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID
  std::size_t workspace = 0;    ///< workspace it needs
  int heuristic_rank = 0;       ///< its place in the heuristic's list (0 = first choice)
  bool split_k_variant = false; ///< the search's split-K variant of that candidate
  bool config_variant = false;  ///< the search's neighbour of that candidate (gemm_options::config_variants)
  std::string staged;           ///< operands it copies into aligned buffers ("A, C"), or empty
  std::string staged_as;        ///< the padded extents it runs as ("5128x9124x2560"), when staging pads them
  algorithm_choice chosen_by = algorithm_choice::heuristic;  ///< how it was chosen
  double searched_seconds = 0;  ///< its median per call during the search (0 if not searched)

  /// "algo 66 tile 18 stages 8 splitk 4 red 2 swz 0 custom 0 cluster 0": what cuBLASLt runs.
  std::string configuration() const {
    std::ostringstream s;
    s << "algo " << id << " tile " << tile << " stages " << stages << " splitk " << split_k << " red " << reduction
      << " swz " << swizzle << " custom " << custom << " cluster " << cluster;
    return s.str();
  }

  /// "algo 66 tile 18 stages 8 splitk 4 red 2 swz 0 custom 0 cluster 0 ws 0 B (search: heuristic
  /// rank 2, split-K variant)"; a neighbour says "config variant".
  std::string describe() const {
    std::ostringstream s;
    s << configuration() << " ws " << workspace << " B ("
      << to_string(chosen_by) << ": heuristic rank " << heuristic_rank << (split_k_variant ? ", split-K variant" : "")
      << (config_variant ? ", config variant" : "")
      << (staged.empty() ? "" : ", " + staged + " staged aligned") << (staged_as.empty() ? "" : " as " + staged_as) << ")";
    return s.str();
  }
};

/// Candidate `r` of cuBLASLt's heuristic list, at place `rank`, as results record it.
inline gemm_algorithm cublaslt_algorithm_of(const cublasLtMatmulHeuristicResult_t& r, int rank) {
  gemm_algorithm a;
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr, auto& value) {
    std::remove_reference_t<decltype(value)> v{};
    std::size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&r.algo, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS) value = v;
  };
  std::int32_t id = -1, split_k = 1;
  std::uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
  std::uint16_t cluster = 0;
  get(CUBLASLT_ALGO_CONFIG_ID, id);
  get(CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
  get(CUBLASLT_ALGO_CONFIG_STAGES_ID, stages);
  get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split_k);
  get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, reduction);
  get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, swizzle);
  get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom);
  get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster);
  a.id = id;
  a.tile = tile;
  a.stages = stages;
  a.split_k = split_k;
  a.reduction = reduction;
  a.swizzle = swizzle;
  a.custom = custom;
  a.cluster = cluster;
  a.workspace = r.workspaceSize;
  a.heuristic_rank = rank;
  return a;
}

}  // namespace gpucmp
