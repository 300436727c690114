// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The page table of a paged KV cache, as a serving engine keeps it: a pool of pages of
// page_size tokens shared by every sequence slot, each slot holding the pages its tokens need
// and giving them back when its request ends, so requests of any length join and leave a
// running batch (continuous batching) without moving any K or V. The table is
// [slots, pages a slot at most], int32, the layout cuDNN's paged attention reads
// (attention_problem::page_table); an entry past a slot's pages is 0 and never read, since
// attention reads no key past the slot's length. Host-only: the decoder copies table() to the
// device when it changed.
#pragma once

#include <gpucmp/cuda/error.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpucmp {

/// A paged KV cache's pages and who holds them.
class kv_pages {
 public:
  /// `pages` pages of `page_size` tokens for `slots` sequence slots of at most `max_tokens`
  /// tokens each; `page_bytes`, one page's K and V over every layer, sizes the out-of-memory
  /// error. Throws invalid_argument naming a size that is not positive.
  kv_pages(std::int64_t pages, std::int64_t page_size, std::int64_t slots, std::int64_t max_tokens, std::size_t page_bytes = 0)
      : m_page_size(page_size), m_slots(slots), m_per_slot(page_size > 0 ? (max_tokens + page_size - 1) / page_size : 0),
        m_pages(pages), m_page_bytes(page_bytes) {
    for (auto [value, what] : {std::pair{pages, "pages"}, std::pair{page_size, "page_size"}, std::pair{slots, "slots"},
                               std::pair{max_tokens, "max_tokens"}}) {
      if (value <= 0) throw invalid_argument(std::string("kv_pages: ") + what + " must be positive, got " + std::to_string(value));
    }
    if (pages > 2147483647 || slots * m_per_slot > 2147483647) {
      throw invalid_argument("kv_pages: the table's entries overflow int32");
    }
    m_table.assign(std::size_t(slots * m_per_slot), 0);
    m_held.assign(std::size_t(slots), 0);
    m_tokens.assign(std::size_t(slots), 0);
    m_free.reserve(std::size_t(pages));
    for (std::int64_t p = pages - 1; p >= 0; --p) m_free.push_back(std::int32_t(p));  // page 0 handed out first
  }

  /// Makes room for `tokens` tokens in `slot` (its length grows to at least that), taking the
  /// pages it lacks from the pool. Throws invalid_argument for a bad slot or a length past
  /// max_tokens, out_of_memory with the bytes of the pages needed and free when the pool runs
  /// out (the slot then keeps what it held: nothing is half-taken).
  void reserve(std::int64_t slot, std::int64_t tokens) {
    check_slot(slot, "reserve");
    if (tokens < 0 || tokens > m_per_slot * m_page_size) {
      throw invalid_argument("kv_pages: slot " + std::to_string(slot) + " cannot hold " + std::to_string(tokens) +
                             " tokens (0 to " + std::to_string(m_per_slot * m_page_size) + ")");
    }
    const std::int64_t needed = (tokens + m_page_size - 1) / m_page_size;
    const std::int64_t held = m_held[std::size_t(slot)];
    if (needed - held > std::int64_t(m_free.size())) {
      throw out_of_memory(std::size_t(needed - held) * m_page_bytes, m_free.size() * m_page_bytes,
                          std::size_t(m_pages) * m_page_bytes,
                          "the KV cache's slot " + std::to_string(slot) + " (" + std::to_string(needed - held) +
                              " more pages of " + std::to_string(m_page_size) + " tokens for " + std::to_string(tokens) +
                              " tokens; " + std::to_string(m_free.size()) + " of " + std::to_string(m_pages) +
                              " pages free)");
    }
    for (std::int64_t p = held; p < needed; ++p) {
      m_table[std::size_t(slot * m_per_slot + p)] = m_free.back();
      m_free.pop_back();
    }
    m_held[std::size_t(slot)] = std::max(held, needed);
    m_tokens[std::size_t(slot)] = std::max(m_tokens[std::size_t(slot)], tokens);
    m_changed = m_changed || needed > held;  // the table changes only when pages are taken
  }

  /// Gives every page of `slot` back to the pool (its request ended); its length becomes 0.
  void release(std::int64_t slot) {
    check_slot(slot, "release");
    m_changed = m_changed || m_held[std::size_t(slot)] > 0;
    for (std::int64_t p = m_held[std::size_t(slot)] - 1; p >= 0; --p) {
      std::int32_t& entry = m_table[std::size_t(slot * m_per_slot + p)];
      m_free.push_back(entry);
      entry = 0;
    }
    m_held[std::size_t(slot)] = 0;
    m_tokens[std::size_t(slot)] = 0;
  }

  /// Tokens `slot` holds room for.
  std::int64_t tokens(std::int64_t slot) const {
    check_slot(slot, "tokens");
    return m_tokens[std::size_t(slot)];
  }
  /// Pages `slot` holds.
  std::int64_t held(std::int64_t slot) const {
    check_slot(slot, "held");
    return m_held[std::size_t(slot)];
  }
  /// The cache page holding token `position` of `slot` (it must be within the slot's room).
  std::int32_t page_of(std::int64_t slot, std::int64_t position) const {
    check_slot(slot, "page_of");
    if (position < 0 || position >= m_tokens[std::size_t(slot)]) {
      throw invalid_argument("kv_pages: slot " + std::to_string(slot) + " holds no token " + std::to_string(position));
    }
    return m_table[std::size_t(slot * m_per_slot + position / m_page_size)];
  }

  /// The table, [slots, pages_per_slot()].
  const std::vector<std::int32_t>& table() const noexcept { return m_table; }
  /// Entries a slot has in the table.
  std::int64_t pages_per_slot() const noexcept { return m_per_slot; }
  /// Pages nobody holds.
  std::int64_t free_pages() const noexcept { return std::int64_t(m_free.size()); }
  /// Tokens a page holds.
  std::int64_t page_size() const noexcept { return m_page_size; }
  /// Sequence slots.
  std::int64_t slots() const noexcept { return m_slots; }
  /// Whether the table changed since the last take_changed() (the device copy is stale).
  bool take_changed() noexcept { return std::exchange(m_changed, false); }

 private:
  void check_slot(std::int64_t slot, const char* what) const {
    if (slot < 0 || slot >= m_slots) {
      throw invalid_argument(std::string("kv_pages::") + what + ": no slot " + std::to_string(slot) + " (0 to " +
                             std::to_string(m_slots - 1) + ")");
    }
  }

  std::int64_t m_page_size, m_slots, m_per_slot, m_pages;
  std::size_t m_page_bytes;
  std::vector<std::int32_t> m_table, m_free;
  std::vector<std::int64_t> m_held, m_tokens;
  bool m_changed = true;
};

}  // namespace gpucmp
