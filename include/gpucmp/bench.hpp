// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The umbrella an embedder includes: the core plus the Google Benchmark adapter
// (link gpucmp::gbench).
#pragma once

#include <gpucmp/core.hpp>
#include <gpucmp/gbench/adapter.hpp>
