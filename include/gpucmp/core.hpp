// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Everything of gpucmp that needs only the CUDA runtime: device facts, RAII resources,
// statistics, the measurement engine, the spec database, roofline and projection. For
// Catch2 tests and plain programs. (Kernel mode's CUPTI tracer: <gpucmp/kernel_trace.hpp>.)
#pragma once

#include <gpucmp/buffer.hpp>
#include <gpucmp/activity_tracer.hpp>
#include <gpucmp/clock_events.hpp>
#include <gpucmp/concurrency.hpp>
#include <gpucmp/device.hpp>
#include <gpucmp/device_specs.hpp>
#include <gpucmp/engine.hpp>
#include <gpucmp/error.hpp>
#include <gpucmp/event.hpp>
#include <gpucmp/graph.hpp>
#include <gpucmp/kernel_profile.hpp>
#include <gpucmp/l2_flush.hpp>
#include <gpucmp/latency.hpp>
#include <gpucmp/nvml.hpp>
#include <gpucmp/nvtx.hpp>
#include <gpucmp/options.hpp>
#include <gpucmp/power_monitor.hpp>
#include <gpucmp/projection.hpp>
#include <gpucmp/random.hpp>
#include <gpucmp/result.hpp>
#include <gpucmp/roofline.hpp>
#include <gpucmp/serving.hpp>
#include <gpucmp/specs.hpp>
#include <gpucmp/statistics.hpp>
#include <gpucmp/stopping.hpp>
#include <gpucmp/stream.hpp>
#include <gpucmp/stream_hold.hpp>
#include <gpucmp/version.hpp>
#include <gpucmp/work.hpp>
