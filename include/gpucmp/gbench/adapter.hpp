// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Google Benchmark adapter: registers GPU benchmarks whose time is the engine's per-launch
// GPU median (manual time), with declared work turned into rate counters and the GPU's
// facts in the JSON context. Errors become SkipWithError and the run goes on.
//
// Each registration runs exactly one iteration (Iterations(1)): the engine has its own
// stopping rule, so Google Benchmark's iteration-growth probes, which would rerun the
// function and its GPU allocations, are switched off. --benchmark_repetitions still works
// and repeats the whole measurement.
//
// The adapter by concern: flags.hpp (--gpucmp_* flags and their precedence), process.hpp
// (what a process shares), state.hpp (gpucmp::state and its counters), registration.hpp
// (registration, fixtures, macros), context.hpp (the JSON context), output_files.hpp
// (--gpucmp_kernels_out, --gpucmp_search_log, output checks), result_rows.hpp (the typed rows
// of the result file and its reporter), verified_run.hpp (run_verified: search, verify,
// declare and time an operation in one call), main.hpp (benchmark_main).
#pragma once

#include <gpucmp/gbench/context.hpp>
#include <gpucmp/gbench/flags.hpp>
#include <gpucmp/gbench/main.hpp>
#include <gpucmp/gbench/output_files.hpp>
#include <gpucmp/gbench/process.hpp>
#include <gpucmp/gbench/registration.hpp>
#include <gpucmp/gbench/result_rows.hpp>
#include <gpucmp/gbench/state.hpp>
#include <gpucmp/gbench/verified_run.hpp>
