// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The library's version, also written into every result file's context.
#pragma once

#define GPUCMP_VERSION_MAJOR 0  ///< major version
#define GPUCMP_VERSION_MINOR 1  ///< minor version
#define GPUCMP_VERSION_PATCH 0  ///< patch version

namespace gpucmp {
/// "0.1.0"
inline constexpr const char* version_string = "0.1.0";
}  // namespace gpucmp
