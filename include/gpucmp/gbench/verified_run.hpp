// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp::run_verified(st, op): what a benchmark of a verified operation (gemm, conv,
// memory_bandwidth, or one of your own that keeps the operation contract) writes, in one
// call: search (the default: time every candidate, keep the verified fastest), verify the
// algorithm it will run, declare its work and algorithm, log the search, time it. A user who
// constructs an operation and calls this gets the searched, verified path.
#pragma once

#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/output_files.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/state.hpp>
#include <gpucmp/ops/operation.hpp>

#include <string>

namespace gpucmp {

/// Settles `op`'s algorithm (prepare_verified: its options' choice, by default the timed
/// search through this benchmark's engine), throws verification_failed when its output is
/// wrong (the adapter reports the run as failed; nothing is timed), declares op.work(),
/// notes the algorithm and how many outputs were checked, appends the search to the search
/// log when the program was given --gpucmp_search_log=FILE, then times `op` (state::run).
template <class Operation>
void run_verified(state& st, Operation& op) {
  static_assert(is_operation<Operation>::value, "run_verified() needs an operation (see gpucmp/ops/operation.hpp)");
  const prepared_operation prepared = prepare_verified(op, st.measuring_engine());
  st.set_work(op.work());
  st.add_note(op.algorithm().describe());
  st.add_note("verified " + std::to_string(prepared.check.checked) + " outputs");
  const std::string& log_path = detail::flags_everywhere().search_log;
  if (prepared.search && !log_path.empty() &&
      !detail::append_search_log(log_path, st.name(), op.name(), op.algorithm().describe(), prepared.search->wall_seconds,
                                 op.search_log())) {
    throw error("run_verified: the search log " + log_path + " cannot be written");
  }
  st.run(op);
}

}  // namespace gpucmp
