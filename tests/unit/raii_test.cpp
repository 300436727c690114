// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// Ownership rules of the RAII types, checked at compile time, plus the behaviour of empty
// buffers, which needs no GPU.
#include "catch.hpp"

#include <gpucmp/cuda/buffer.hpp>
#include <gpucmp/cuda/event.hpp>
#include <gpucmp/cuda/graph.hpp>
#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/measure/stream_hold.hpp>

#include <type_traits>

template <class T>
constexpr bool move_only_v = std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T> &&
                             !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T>;

TEST_CASE("RAII handles are move-only with noexcept moves", "[raii]") {
  STATIC_REQUIRE(move_only_v<gpucmp::stream>);
  STATIC_REQUIRE(move_only_v<gpucmp::event>);
  STATIC_REQUIRE(move_only_v<gpucmp::device_buffer<float>>);
  STATIC_REQUIRE(move_only_v<gpucmp::graph>);
  STATIC_REQUIRE(move_only_v<gpucmp::graph_exec>);
  STATIC_REQUIRE(std::is_nothrow_destructible_v<gpucmp::stream_hold>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<gpucmp::stream_hold>);
}

TEST_CASE("an empty device_buffer allocates nothing and moves cleanly", "[raii]") {
  gpucmp::device_buffer<float> a(0);
  CHECK(a.empty());
  CHECK(a.data() == nullptr);
  CHECK(a.bytes() == 0);
  gpucmp::device_buffer<float> b(std::move(a));
  CHECK(b.empty());
  CHECK(b.to_host().empty());
}

TEST_CASE("copy_from_host rejects a size mismatch", "[raii]") {
  gpucmp::device_buffer<int> empty(0);
  CHECK_THROWS_WITH(empty.copy_from_host({1, 2, 3}), GPUCMP_CONTAINS("3 values for a buffer of 0"));
}
