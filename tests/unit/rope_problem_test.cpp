// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// RoPE problems on the host: bytes and FLOPs, names and axes, bad problems refused by name,
// the frequencies (Llama 3's and Llama 3.1's scaled ones, against values computed
// independently), and the rounding bound's scale.
#include "catch.hpp"

#include <gpucmp/ops/rope_problem.hpp>

#include <cmath>

TEST_CASE("a RoPE's work counts Q and K's rotated elements read and written once", "[ops][rope]") {
  gpucmp::rope_problem p;  // Llama-3-8B: 32 Q heads, 8 KV heads, 128 a head
  p.tokens = 4096;
  const double rotated = 4096.0 * 40 * 128;
  const gpucmp::work w = p.work();
  CHECK(w.bytes_written == rotated * 2);
  CHECK(w.bytes_read == rotated * 2 + 4096.0 * 4 + 4096.0 * 64 * 8);  // positions and one table row each
  CHECK(w.flops == rotated * 3);
  CHECK(w.items == 4096);
  CHECK(p.row_elements() == 48 * 128);
  CHECK(p.name() == "bf16/4096x32+8x128/half");
  p.rotary_dim = 64;
  p.pairs = gpucmp::rope_pairs::interleaved;
  p.scaling.factor = 8;
  CHECK(p.name() == "bf16/4096x32+8x128/interleaved/rot64/llama3x8");
  const auto axes = p.axes();
  REQUIRE(axes.size() == 8);
  CHECK(axes[0] == gpucmp::axis::of("pass", "forward"));
  CHECK(axes[5] == gpucmp::axis::of("rotary_dim", 64.0));
  CHECK(axes[6] == gpucmp::axis::of("pairs", "interleaved"));
  CHECK(p.sine_sign() == 1);
  const double forward_bytes = p.work().bytes_read;
  p.backward = true;  // the gradients rotated back: the same traffic, the angle negated
  CHECK(p.name() == "bf16/4096x32+8x128/interleaved/rot64/llama3x8/bwd");
  CHECK(p.axes()[0] == gpucmp::axis::of("pass", "backward"));
  CHECK(p.sine_sign() == -1);
  CHECK(p.work().bytes_read == forward_bytes);
  p.backward = false;
  p.tokens = 1;  // decode: one table row
  CHECK(p.work().bytes_read == 40.0 * 64 * 2 + 4 + 32.0 * 8);
}

TEST_CASE("RoPE frequencies follow Llama 3 and Llama 3.1's scaling", "[ops][rope]") {
  gpucmp::rope_problem p;
  p.tokens = 1;
  p.theta = 500000;
  const std::vector<double> f = p.inverse_frequencies();
  REQUIRE(f.size() == 64);
  CHECK(f[0] == 1.0);
  CHECK(f[1] == Approx(std::pow(500000.0, -2.0 / 128)).epsilon(1e-15));
  CHECK(f[63] == Approx(std::pow(500000.0, -126.0 / 128)).epsilon(1e-15));
  // Llama 3.1 (factor 8, low 1, high 4, 8192 original positions): wavelengths under 2048
  // kept, over 8192 divided by 8, between blended.
  p.scaling.factor = 8;
  const std::vector<double> s = p.inverse_frequencies();
  const double pi = 3.14159265358979323846;
  int kept = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double wavelength = 2 * pi / f[i];
    if (wavelength < 2048) {
      CHECK(s[i] == f[i]);
      ++kept;
    } else if (wavelength > 8192) {
      CHECK(s[i] == Approx(f[i] / 8).epsilon(1e-15));
      ++divided;
    } else {
      const double smooth = (8192 / wavelength - 1) / 3;
      CHECK(s[i] == Approx((1 - smooth) * f[i] / 8 + smooth * f[i]).epsilon(1e-15));
      CHECK(s[i] < f[i]);
      CHECK(s[i] > f[i] / 8);
      ++blended;
    }
  }
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(blended > 0);
}

TEST_CASE("impossible RoPEs are refused by name", "[ops][rope]") {
  gpucmp::rope_problem p;
  p.tokens = 0;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("tokens must be positive, got 0"));
  p.tokens = 8;
  p.kv_heads = 5;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("q_heads 32 is not a multiple of kv_heads 5"));
  p.kv_heads = 8;
  p.rotary_dim = 200;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("rotary_dim must be from 0 (all) to head_dim 128, got 200"));
  p.rotary_dim = 0;
  p.head_dim = 65;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("must be even"));
  p.head_dim = 128;
  p.theta = 1;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("theta must be finite and over 1"));
  p.theta = 10000;
  p.scaling.factor = 0.5;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("scaling.factor must be 1 (none) or more"));
  p.scaling.factor = 8;
  p.scaling.high_frequency_factor = 0.5;
  CHECK_THROWS_WITH(p.validate(), GPUCMP_CONTAINS("low_frequency_factor < high_frequency_factor"));
  p.scaling.high_frequency_factor = 4;
  p.dtype = gpucmp::numerics::int8;
  CHECK_THROWS_AS(p.validate(), gpucmp::unsupported);
  p.dtype = gpucmp::numerics::fp16;
  CHECK_NOTHROW(p.validate());
}

TEST_CASE("the RoPE bound covers the output's rounding and the FP32 pair", "[ops][rope]") {
  gpucmp::rope_problem p;
  p.tokens = 1;
  const gpucmp::tolerance t = p.output_tolerance();
  CHECK(t.output_eps == std::ldexp(1.0, -8));  // BF16
  // |x1 cos| + |x2 sin| = 1: the FP32 part is a few 2^-24, far under BF16's rounding.
  const double b = t.bound(0.5, 1, 2);
  CHECK(b > 0.5 * std::ldexp(1.0, -8));
  CHECK(b < 0.5 * std::ldexp(1.0, -8) + 32 * std::ldexp(1.0, -24));
  p.dtype = gpucmp::numerics::fp32;
  CHECK(p.output_tolerance().output_abs == 0);
}
