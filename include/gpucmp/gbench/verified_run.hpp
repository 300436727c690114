// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// gpucmp::run_verified(st, op): what a benchmark of a verified operation (gemm, conv,
// memory_bandwidth, or one of your own that keeps the operation contract) writes, in one
// call: search (the default: time every candidate, keep the verified fastest), verify the
// algorithm it will run, declare its work, describe the row (axes, provider, algorithm,
// verification, search, library versions), log the search, time it. A user who constructs an
// operation and calls this gets the searched, verified path.
#pragma once

#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/output_files.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/state.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/operation.hpp>
#include <gpucmp/ops/verification.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpucmp {

namespace detail {

// What an operation may say about itself for its row (each optional): its problem's axes,
// the axis a sweep of it varies, what runs it, the versions of the libraries that do.
template <class Op, class = void>
struct has_axes : std::false_type {};
template <class Op>
struct has_axes<Op, std::void_t<decltype(std::vector<axis>(std::declval<const Op&>().axes()))>> : std::true_type {};
template <class Op, class = void>
struct has_sweep_axis : std::false_type {};
template <class Op>
struct has_sweep_axis<Op, std::void_t<decltype(std::string(std::declval<const Op&>().sweep_axis()))>> : std::true_type {};
template <class Op, class = void>
struct has_provider : std::false_type {};
template <class Op>
struct has_provider<Op, std::void_t<decltype(std::string(std::declval<const Op&>().provider()))>> : std::true_type {};
template <class Op, class = void>
struct has_libraries : std::false_type {};
template <class Op>
struct has_libraries<Op, std::void_t<decltype(std::vector<std::pair<std::string, std::string>>(
                             std::declval<const Op&>().libraries()))>> : std::true_type {};

/// The row's record of an output check.
inline row_verification row_verification_of(const verification& v) {
  return {v.method, double(v.checked), double(v.failed), v.worst_ratio};
}

/// What `op` says about itself, into `d`.
template <class Operation>
void describe_operation(const Operation& op, row_description& d) {
  if constexpr (has_axes<Operation>::value) {
    for (axis a : op.axes()) d.set(std::move(a));
  }
  if constexpr (has_sweep_axis<Operation>::value) d.sweep_axis = op.sweep_axis();
  if constexpr (has_provider<Operation>::value) d.provider = op.provider();
  if constexpr (has_libraries<Operation>::value) d.libraries = op.libraries();
}

}  // namespace detail

/// Settles `op`'s algorithm (prepare_verified: its options' choice, by default the timed
/// search through this benchmark's engine), throws verification_failed when its output is
/// wrong (the adapter reports the run as failed, its row with the check; nothing is timed),
/// declares op.work(), describes the row (the operation's axes, provider and library
/// versions where it names them, the algorithm, the check, the search with its wall time),
/// notes the algorithm and how many outputs were checked in the label, appends the search to
/// the search log when the program was given --gpucmp_search_log=FILE, then times `op`.
template <class Operation>
void run_verified(state& st, Operation& op) {
  static_assert(is_operation<Operation>::value, "run_verified() needs an operation (see gpucmp/ops/operation.hpp)");
  row_description& d = st.description();
  detail::describe_operation(op, d);
  prepared_operation prepared;
  try {
    prepared = prepare_verified(op, st.measuring_engine());
  } catch (const verification_failed& e) {
    d.algorithm = op.algorithm().describe();
    d.verification = detail::row_verification_of(e.result());
    throw;
  }
  st.set_work(op.work());
  d.algorithm = op.algorithm().describe();
  d.verification = detail::row_verification_of(prepared.check);
  if (prepared.search) {
    row_search s;
    s.wall_s = prepared.search->wall_seconds;
    for (const candidate_time& c : op.search_log()) s.candidates.push_back({c.description, c.seconds, c.failure});
    d.search = std::move(s);
  }
  st.add_note(d.algorithm);
  st.add_note("verified " + std::to_string(prepared.check.checked) + " outputs");
  const std::string& log_path = detail::flags_everywhere().search_log;
  if (prepared.search && !log_path.empty() &&
      !detail::append_search_log(log_path, st.name(), op.name(), d.algorithm, prepared.search->wall_seconds, op.search_log())) {
    throw error("run_verified: the search log " + log_path + " cannot be written");
  }
  st.run(op);
}

}  // namespace gpucmp
