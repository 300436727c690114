// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Everything of gpucmp that needs only the CUDA runtime: device facts, RAII resources,
// statistics, the measurement engine, the spec database, roofline and projection. For
// Catch2 tests and plain programs. (Kernel mode's CUPTI tracer: <gpucmp/measure/kernel_trace.hpp>.)
#pragma once

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/measure/activity_tracer.hpp>
#include <gpucmp/power/clock_events.hpp>
#include <gpucmp/serving/concurrency.hpp>
#include <gpucmp/serving/continuous_batching.hpp>
#include <gpucmp/cuda/device.hpp>
#include <gpucmp/specs/device_specs.hpp>
#include <gpucmp/measure/engine.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/measure/kernel_profile.hpp>
#include <gpucmp/measure/l2_flush.hpp>
#include <gpucmp/serving/latency.hpp>
#include <gpucmp/power/nvml.hpp>
#include <gpucmp/cuda/nvtx.hpp>
#include <gpucmp/measure/options.hpp>
#include <gpucmp/power/power_monitor.hpp>
#include <gpucmp/specs/projection.hpp>
#include <gpucmp/cuda/random.hpp>
#include <gpucmp/measure/result.hpp>
#include <gpucmp/specs/roofline.hpp>
#include <gpucmp/serving/serving.hpp>
#include <gpucmp/specs/specs.hpp>
#include <gpucmp/measure/statistics.hpp>
#include <gpucmp/measure/stopping.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/measure/stream_hold.hpp>
#include <gpucmp/version.hpp>
#include <gpucmp/specs/work.hpp>
