// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// The bundled programs' numeric flags (benchmarks/program_flags.hpp): a value is taken whole
// or refused with a message that names the program, the flag and the text.
#include "catch.hpp"

#include "program_flags.hpp"

#include <cstdint>
#include <vector>

TEST_CASE("a whole-number flag takes all of its text within its range", "[flags]") {
  CHECK(gpucmp_bench::whole_number("16", 1, 64, "training", "--candidates_per_pass") == 16);
  CHECK(gpucmp_bench::whole_number("1", 1, 64, "training", "--candidates_per_pass") == 1);
  CHECK(gpucmp_bench::whole_number("64", 1, 64, "training", "--candidates_per_pass") == 64);
  CHECK(gpucmp_bench::whole_number("1099511627776", 1, 1LL << 40, "collectives", "--max_bytes") == (1LL << 40));
}

TEST_CASE("a whole-number flag refuses partial numbers, signs past its range and overflow, naming what was wrong",
          "[flags]") {
  // std::stoll read "64x" as 64, std::stoull "-1" as 2^64 - 1, and "abc" threw a bare "stoll".
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("64x", 1, 64, "training", "--candidates_per_pass"),
                    GPUCMP_CONTAINS("training: --candidates_per_pass must be a whole number from 1 to 64, got '64x'"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("-1", 1, 1LL << 40, "collectives", "--min_bytes"),
                    GPUCMP_CONTAINS("collectives: --min_bytes must be a whole number from 1 to 1099511627776, got '-1'"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("abc", 1, 10, "training_dump", "--steps"), GPUCMP_CONTAINS("got 'abc'"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("", 1, 10, "training_dump", "--steps"), GPUCMP_CONTAINS("got ''"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("65", 1, 64, "training", "--candidates_per_pass"), GPUCMP_CONTAINS("got '65'"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("0", 1, 64, "training", "--candidates_per_pass"), GPUCMP_CONTAINS("got '0'"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("99999999999999999999", 1, 1LL << 40, "collectives", "--max_bytes"),
                    GPUCMP_CONTAINS("got '99999999999999999999'"));
  CHECK_THROWS_WITH(gpucmp_bench::whole_number("2.5", 1, 10, "gemm_kernel_mode", "--size"), GPUCMP_CONTAINS("got '2.5'"));
}

TEST_CASE("a real-number flag takes finite numbers within its range and refuses the rest", "[flags]") {
  CHECK(gpucmp_bench::real_number("25", 0, 1e6, "training", "--bucket_mb") == 25);
  CHECK(gpucmp_bench::real_number("0.5", 0, 1e6, "training", "--bucket_mb") == 0.5);
  CHECK(gpucmp_bench::real_number("1e-2", 0, 1e3, "training_dump", "--learning_rate") == 0.01);
  CHECK(gpucmp_bench::real_number("-0.5", -1e3, 1e3, "training_dump", "--residual_gamma") == -0.5);
  CHECK_THROWS_WITH(gpucmp_bench::real_number("-1", 0, 1e6, "training", "--bucket_mb"),
                    GPUCMP_CONTAINS("training: --bucket_mb must be a number from 0 to 1e+06, got '-1'"));
  CHECK_THROWS_WITH(gpucmp_bench::real_number("nan", 0, 1e3, "training_dump", "--learning_rate"), GPUCMP_CONTAINS("got 'nan'"));
  CHECK_THROWS_WITH(gpucmp_bench::real_number("inf", 0, 1e300, "training_dump", "--learning_rate"), GPUCMP_CONTAINS("got 'inf'"));
  CHECK_THROWS_WITH(gpucmp_bench::real_number("0.1x", 0, 1e3, "training_dump", "--learning_rate"), GPUCMP_CONTAINS("got '0.1x'"));
  CHECK_THROWS_WITH(gpucmp_bench::real_number("", 0, 1e3, "training_dump", "--learning_rate"), GPUCMP_CONTAINS("got ''"));
}

TEST_CASE("a --batches list takes whole numbers and refuses an empty list or a bad entry", "[flags]") {
  CHECK(gpucmp_bench::parse_batches("64,128,256", 2, "training") == std::vector<std::int64_t>{64, 128, 256});
  CHECK_THROWS_WITH(gpucmp_bench::parse_batches("1", 2, "training"), GPUCMP_CONTAINS("training: --batches must be a whole number from 2"));
  CHECK_THROWS_WITH(gpucmp_bench::parse_batches("64,,128", 1, "resnet50"), GPUCMP_CONTAINS("got ''"));
  CHECK_THROWS_WITH(gpucmp_bench::parse_batches("64,12x", 1, "resnet50"), GPUCMP_CONTAINS("got '12x'"));
  CHECK_THROWS_WITH(gpucmp_bench::parse_batches("", 1, "resnet50"), GPUCMP_CONTAINS("resnet50: --batches needs at least one batch"));
}
