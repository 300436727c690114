// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The arithmetic of collective benchmarks, as nccl-tests defines it (its doc/PERFORMANCE.md;
// ../shared/reference/published-results.md §6), so gpucmp's numbers read like nccl-tests':
//   algbw = S / t, S the bytes per rank: count x element size, or for all-gather,
//           reduce-scatter and all-to-all the whole array (count x element size x ranks);
//   busbw = algbw x factor: all-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all
//           (n-1)/n; broadcast, reduce, send/recv 1. With one rank busbw means nothing: n/a.
// Also the data check (nccl-tests' -c): every rank fills its input with small integers that
// depend on the rank and the index, so every collective's exact result is known in closed
// form: sums of at most 16 per rank, exact in FP32 and integers always, in FP16 for up to 128
// ranks and in BF16 for up to 16. Host-only.
#pragma once

#include <gpucmp/cuda/error.hpp>
#include <gpucmp/cuda/random.hpp>  // GPUCMP_HOST_DEVICE: the data check runs on the device too

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// A collective operation (NCCL's, with sum as the reduction).
enum class collective {
  all_reduce,      ///< every rank gets the sum of all inputs
  all_gather,      ///< every rank gets every rank's input, in rank order
  reduce_scatter,  ///< rank r gets the sum of block r of every rank's input
  broadcast,       ///< every rank gets the root's input
  reduce,          ///< the root gets the sum of all inputs
  all_to_all,      ///< rank r gets block r of every rank's input, in rank order
  send_recv,       ///< a ring: rank r sends to r + 1 and receives from r - 1
};

/// Every collective, in the order reports list them.
inline std::vector<collective> all_collectives() {
  return {collective::all_reduce, collective::all_gather, collective::reduce_scatter, collective::broadcast,
          collective::reduce,     collective::all_to_all, collective::send_recv};
}

/// "all_reduce", "all_gather", ...
inline const char* to_string(collective c) noexcept {
  switch (c) {
    case collective::all_reduce: return "all_reduce";
    case collective::all_gather: return "all_gather";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::broadcast: return "broadcast";
    case collective::reduce: return "reduce";
    case collective::all_to_all: return "all_to_all";
    case collective::send_recv: return "send_recv";
  }
  return "unknown";
}

/// The collective named `text`; throws invalid_argument naming the choices otherwise.
inline collective parse_collective(const std::string& text) {
  for (collective c : all_collectives()) {
    if (text == to_string(c)) return c;
  }
  throw invalid_argument("unknown collective '" + text +
                         "' (all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv)");
}

/// nccl-tests' bus bandwidth factor for `c` over `ranks` ranks (NaN for one rank: busbw is n/a).
inline double bus_bandwidth_factor(collective c, int ranks) {
  if (ranks < 1) throw invalid_argument("bus_bandwidth_factor: ranks must be at least 1");
  if (ranks == 1) return NAN;
  const double n = ranks;
  switch (c) {
    case collective::all_reduce: return 2 * (n - 1) / n;
    case collective::all_gather:
    case collective::reduce_scatter:
    case collective::all_to_all: return (n - 1) / n;
    case collective::broadcast:
    case collective::reduce:
    case collective::send_recv: return 1;
  }
  return NAN;
}

/// True when nccl-tests' S is the whole array (count x element size x ranks), not one rank's.
inline bool counts_whole_array(collective c) noexcept {
  return c == collective::all_gather || c == collective::reduce_scatter || c == collective::all_to_all;
}

/// How one collective call is sized: `count` elements as NCCL's API takes them (all-gather's
/// send count, reduce-scatter's receive count, all-to-all's count per peer).
struct collective_size {
  collective kind = collective::all_reduce;
  int ranks = 1;
  std::int64_t count = 0;          ///< elements, as NCCL's call takes them
  std::size_t element_bytes = 4;   ///< bytes per element

  /// nccl-tests' S: the bytes algbw divides by the time.
  double bytes() const noexcept {
    return double(count) * double(element_bytes) * (counts_whole_array(kind) ? double(ranks) : 1.0);
  }
  /// Elements of each rank's input buffer.
  std::int64_t input_elements() const noexcept {
    return kind == collective::reduce_scatter || kind == collective::all_to_all ? count * ranks : count;
  }
  /// Elements of each rank's output buffer.
  std::int64_t output_elements() const noexcept {
    return kind == collective::all_gather || kind == collective::all_to_all ? count * ranks : count;
  }
};

/// The call that moves `bytes` (nccl-tests' -b/-e sizes: the whole array for all-gather,
/// reduce-scatter and all-to-all), rounded down to whole elements per rank, at least one.
inline collective_size size_for_bytes(collective c, int ranks, std::size_t bytes, std::size_t element_bytes) {
  if (ranks < 1 || element_bytes == 0) throw invalid_argument("size_for_bytes: ranks and element_bytes must be positive");
  collective_size s;
  s.kind = c;
  s.ranks = ranks;
  s.element_bytes = element_bytes;
  const std::size_t per = element_bytes * (counts_whole_array(c) ? std::size_t(ranks) : 1);
  s.count = std::int64_t(bytes / per > 0 ? bytes / per : 1);
  return s;
}

/// nccl-tests' size sweep: `first`, `first` x factor, ... up to `last` bytes (both included
/// when reached). Throws invalid_argument for an empty or endless sweep.
inline std::vector<std::size_t> size_sweep(std::size_t first = 8, std::size_t last = std::size_t{8} << 30, std::size_t factor = 2) {
  if (first == 0 || last < first || factor < 2) {
    throw invalid_argument("size_sweep: needs 0 < first <= last and a factor of at least 2");
  }
  std::vector<std::size_t> sizes;
  for (std::size_t s = first; s <= last; s *= factor) {
    sizes.push_back(s);
    if (s > last / factor) break;  // the next one would pass `last` (or overflow)
  }
  return sizes;
}

/// Rates of one timed call.
struct collective_rates {
  double algbw = 0;  ///< bytes/s: S / t
  double busbw = 0;  ///< bytes/s: algbw x the factor (NaN with one rank: n/a)
};

/// The rates of `size` done in `seconds` (> 0).
inline collective_rates rates_for(const collective_size& size, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) throw invalid_argument("collective rates: seconds must be finite and > 0");
  collective_rates r;
  r.algbw = size.bytes() / seconds;
  r.busbw = r.algbw * bus_bandwidth_factor(size.kind, size.ranks);
  return r;
}

/// Element `index` of rank `rank`'s input: a small integer (1..16), exact in every type.
GPUCMP_HOST_DEVICE inline double collective_input(int rank, std::int64_t index) noexcept {
  return double(((rank + 1) * 5 + index % 11) % 16 + 1);
}

/// collective_expected() without its argument checks, for device code: `kind` over `ranks`
/// ranks with NCCL's `count`.
GPUCMP_HOST_DEVICE inline double collective_expected_unchecked(collective kind, int ranks, std::int64_t count, int rank,
                                                              std::int64_t index) noexcept {
  double sum = 0;
  switch (kind) {
    case collective::all_reduce:
    case collective::reduce:
      if (kind == collective::reduce && rank != 0) return NAN;
      for (int k = 0; k < ranks; ++k) sum += collective_input(k, index);
      return sum;
    case collective::broadcast: return collective_input(0, index);
    case collective::all_gather: return collective_input(int(index / count), index % count);
    case collective::reduce_scatter:
      for (int k = 0; k < ranks; ++k) sum += collective_input(k, rank * count + index);
      return sum;
    case collective::all_to_all: return collective_input(int(index / count), rank * count + index % count);
    case collective::send_recv: return collective_input((rank + ranks - 1) % ranks, index);
  }
  return NAN;
}

/// The exact value of element `index` of rank `rank`'s output after `size`'s collective on
/// inputs collective_input(), with root 0 for broadcast and reduce. Returns NaN where the
/// output is not defined (reduce on a rank other than the root).
inline double collective_expected(const collective_size& size, int rank, std::int64_t index) {
  if (rank < 0 || rank >= size.ranks) {
    throw invalid_argument("collective_expected: rank " + std::to_string(rank) + " of " + std::to_string(size.ranks));
  }
  if (index < 0 || index >= size.output_elements()) throw invalid_argument("collective_expected: index outside the output");
  return collective_expected_unchecked(size.kind, size.ranks, size.count, rank, index);
}

}  // namespace gpucmp
