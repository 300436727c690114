// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// For the operation sweeps: one benchmark body for any verified operation (gpucmp::gemm,
// gpucmp::conv): check its output against the reference, refuse to time a wrong answer,
// record the algorithm and the search's candidates, then time it.
#pragma once

#include "search_log.hpp"

#include <gpucmp/bench.hpp>
#include <gpucmp/ops/verification.hpp>

#include <string>

namespace gpucmp_bench {

template <class Operation>
void verify_then_run(gpucmp::state& st, Operation& op) {
  const gpucmp::verification checked = op.verify(st.stream());
  gpucmp::require_passed(op.name(), checked);  // a wrong answer is never timed
  st.set_work(op.work());
  st.add_note(op.algorithm().describe());
  st.add_note("verified " + std::to_string(checked.checked) + " outputs");
  log_search(st.name(), op.algorithm().describe(), op.candidates());
  st.run(op);
}

}  // namespace gpucmp_bench
