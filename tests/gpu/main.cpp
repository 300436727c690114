// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
#include "catch.hpp"

int main(int argc, char** argv) { return gpucmp_test::run_session(argc, argv, /*needs_gpu=*/true); }
