// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
// A paged KV cache's page table on the host: pages handed out as slots grow, given back when a
// request ends and reused by the next, the table's layout, a typed out-of-memory with the
// bytes needed and free that leaves the slot as it was, and bad calls named.
#include "catch.hpp"

#include <gpucmp/models/kv_pages.hpp>

#include <set>

TEST_CASE("slots take pages as they grow and give them back when their request ends", "[models][decoder]") {
  gpucmp::kv_pages pages(8, 16, 3, 64);
  CHECK(pages.pages_per_slot() == 4);
  CHECK(pages.table().size() == 12);
  CHECK(pages.free_pages() == 8);
  pages.reserve(0, 17);  // two pages
  CHECK(pages.held(0) == 2);
  CHECK(pages.tokens(0) == 17);
  CHECK(pages.free_pages() == 6);
  CHECK(pages.page_of(0, 0) == 0);
  CHECK(pages.page_of(0, 16) == 1);
  pages.reserve(1, 1);
  CHECK(pages.page_of(1, 0) == 2);
  pages.reserve(0, 33);  // one more page, the next free one
  CHECK(pages.page_of(0, 32) == 3);
  CHECK(pages.table()[2] == 3);
  pages.reserve(0, 20);  // shrinking asks for nothing and keeps the room
  CHECK(pages.held(0) == 3);
  CHECK(pages.tokens(0) == 33);
  CHECK(pages.take_changed());
  CHECK(!pages.take_changed());
  pages.release(0);
  CHECK(pages.take_changed());
  CHECK(pages.held(0) == 0);
  CHECK(pages.tokens(0) == 0);
  CHECK(pages.free_pages() == 7);
  CHECK(pages.table()[0] == 0);
  // The next request reuses the pages given back, never one still held by slot 1.
  pages.reserve(2, 64);
  std::set<int> slot2;
  for (int p = 0; p < 4; ++p) slot2.insert(pages.table()[std::size_t(2 * 4 + p)]);
  CHECK(slot2.size() == 4);
  CHECK(slot2.count(2) == 0);
  CHECK(pages.free_pages() == 3);
}

TEST_CASE("a full pool is a typed out-of-memory that takes nothing", "[models][decoder]") {
  gpucmp::kv_pages pages(4, 64, 2, 4096, 1 << 20);  // 1 MiB a page
  pages.reserve(0, 192);
  try {
    pages.reserve(1, 130);
    FAIL("expected out_of_memory");
  } catch (const gpucmp::out_of_memory& e) {
    CHECK(e.requested_bytes() == 3u << 20);
    CHECK(e.free_bytes() == 1u << 20);
    CHECK(e.total_bytes() == 4u << 20);
    CHECK(std::string(e.what()).find("the KV cache's slot 1 (3 more pages of 64 tokens for 130 tokens; 1 of 4 pages free)") !=
          std::string::npos);
  }
  CHECK(pages.held(1) == 0);
  CHECK(pages.free_pages() == 1);
  CHECK_NOTHROW(pages.reserve(1, 64));
}

TEST_CASE("bad page tables are refused by name", "[models][decoder]") {
  CHECK_THROWS_WITH(gpucmp::kv_pages(0, 16, 1, 16), GPUCMP_CONTAINS("kv_pages: pages must be positive, got 0"));
  CHECK_THROWS_WITH(gpucmp::kv_pages(4, -1, 1, 16), GPUCMP_CONTAINS("page_size must be positive, got -1"));
  gpucmp::kv_pages pages(4, 16, 2, 32);
  CHECK_THROWS_WITH(pages.reserve(2, 1), GPUCMP_CONTAINS("kv_pages::reserve: no slot 2 (0 to 1)"));
  CHECK_THROWS_WITH(pages.reserve(0, 33), GPUCMP_CONTAINS("slot 0 cannot hold 33 tokens (0 to 32)"));
  CHECK_THROWS_WITH(pages.page_of(0, 0), GPUCMP_CONTAINS("slot 0 holds no token 0"));
  CHECK_THROWS_WITH(pages.release(-1), GPUCMP_CONTAINS("kv_pages::release: no slot -1"));
}
