// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// A scaled dot-product attention problem, as a transformer layer runs it, forward
//   O = softmax(scale Q K^T + mask) V
// or backward (dQ, dK and dV from dO, given the forward's O and softmax statistics), per
// batch and query head; grouped-query attention shares each K/V head among
// q_heads / kv_heads query heads. Tensors are stored batch x sequence x heads x head_dim
// (BSHD: each token's heads side by side, as the QKV projection writes them). For serving, the
// sequences of a batch may hold fewer query and key tokens than it is padded to (q_lengths,
// kv_lengths), be packed back to back with no padding at all (packed: THD, a ragged batch),
// and K and V may live in a pool of pages reached through page tables (page_size). Host-only:
// the problem, its FLOPs under a stated convention, bytes, axes and the output bound.
#pragma once

#include <gpucmp/cuda/element_type.hpp>
#include <gpucmp/cuda/error.hpp>
#include <gpucmp/measure/result_schema.hpp>
#include <gpucmp/ops/numerics.hpp>
#include <gpucmp/ops/verification.hpp>
#include <gpucmp/specs/work.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gpucmp {

/// The recipes attention runs in: FP16 or BF16 Q, K, V and O, FP32 softmax and accumulation;
/// and (Hopper and later) E4M3 Q, K, V and O with FP32 per-tensor scales, P quantized to E4M3
/// before P V (cuDNN's FP8 attention; O is E4M3 here, unlike the GEMM recipe's BF16 output). An
/// FP8 backward also takes dO and writes dQ, dK and dV in E4M3, and rounds dS to E4M3 before
/// the dQ and dK GEMMs (cuDNN's Hopper kernels take head_dim 128 only).
inline constexpr numerics attention_numerics[] = {numerics::fp16, numerics::bf16, numerics::fp8_e4m3};

/// The per-tensor scales of FP8 attention: P (at most 1) and O (at most max |V| = 1, V being
/// uniform in [-1, 1)) times 256 stay under E4M3's 448 and lift the small values clear of its
/// subnormals; powers of two, so descaling is exact. A backward's dS, dQ, dK and dV have no
/// such bound: their scales come from the maxima of calibration calls (attention_fp8_scale_for()).
inline constexpr double attention_fp8_p_scale = 256, attention_fp8_o_scale = 256;

/// The power of two that puts `amax`, the largest magnitude a tensor took in an earlier call,
/// at most at half of E4M3's 448 (delayed scaling, as Transformer Engine does it: room for the
/// next call's values to grow); 1 when nothing was measured (0 or not finite), and kept within
/// 2^-30..2^30.
inline double attention_fp8_scale_for(double amax) noexcept {
  if (!(amax > 0) || !std::isfinite(amax)) return 1;
  const int exponent = int(std::floor(std::log2(224 / amax)));
  return std::ldexp(1.0, std::clamp(exponent, -30, 30));
}

/// Which key positions each query sees.
enum class attention_mask {
  none,    ///< every key ("full")
  causal,  ///< keys at or before the query's position (top-left aligned: query i sees keys 0..i)
};

/// "full" or "causal".
inline const char* to_string(attention_mask m) noexcept { return m == attention_mask::causal ? "causal" : "full"; }

/// How a causal attention's FLOPs are counted (the report says which).
enum class causal_flops {
  half_square,  ///< half of the full square (the default: FlashAttention's and cuDNN's benchmarks)
  full_square,  ///< the full square, as if nothing were masked (what some others print)
};

/// "half_square" or "full_square".
inline const char* to_string(causal_flops c) noexcept { return c == causal_flops::half_square ? "half_square" : "full_square"; }

/// Which pass of attention is timed.
enum class attention_pass {
  forward,   ///< O from Q, K and V
  backward,  ///< dQ, dK and dV from Q, K, V, O, dO and the forward's softmax statistics
};

/// "forward" or "backward".
inline const char* to_string(attention_pass p) noexcept { return p == attention_pass::backward ? "backward" : "forward"; }

/// The query (or key) positions a check compares out of `n`: the first two and last two, and
/// 12 spread between (every tile boundary class of a long sequence, few enough to recompute).
inline std::vector<std::int64_t> attention_sampled_positions(std::int64_t n) {
  std::vector<std::int64_t> s;
  auto add = [&](std::int64_t i) {
    if (i >= 0 && i < n && std::find(s.begin(), s.end(), i) == s.end()) s.push_back(i);
  };
  for (std::int64_t i : {std::int64_t(0), std::int64_t(1), n - 2, n - 1}) add(i);
  for (int i = 1; i <= 12; ++i) add(n * i / 13);
  std::sort(s.begin(), s.end());
  return s;
}

/// One attention call, forward or backward.
struct attention_problem {
  std::int64_t batch = 1;
  std::int64_t q_heads = 32;       ///< query heads (Llama-3-8B: 32)
  std::int64_t kv_heads = 8;       ///< key/value heads: q_heads for multi-head, fewer for grouped-query
  std::int64_t seq_q = 4096;       ///< query positions
  std::int64_t seq_kv = 4096;      ///< key/value positions
  std::int64_t head_dim = 128;     ///< elements per head
  numerics dtype = numerics::bf16;
  attention_mask mask = attention_mask::causal;
  causal_flops flops_convention = causal_flops::half_square;
  attention_pass pass = attention_pass::forward;
  double scale = 0;  ///< applied to Q K^T; 0: 1 / sqrt(head_dim)
  /// Serving: K and V in a pool of pages of page_size tokens, (pages, kv_heads, page_size,
  /// head_dim) each, which every sequence reaches through its own page table (the pages
  /// shuffled, as a cache that has served for a while holds them); 0: K and V contiguous, BSHD.
  std::int64_t page_size = 0;
  /// Serving, paged: the pages of the pool K and V live in, which a model's cache shares among
  /// all its sequences (a page table may name any of them); 0: batch x pages_per_sequence().
  std::int64_t page_pool = 0;
  /// Serving: the tokens each sequence's K and V hold (a padded batch: at most seq_kv, the rest
  /// masked and never read); empty: seq_kv for every sequence.
  std::vector<std::int64_t> kv_lengths;
  /// Serving: the query tokens each sequence holds (prompts of different lengths: at most
  /// seq_q; a padded row's O is not written); empty: seq_q for every sequence. A causal mask
  /// stays top-left aligned (query i sees keys 0..i), which is a prefill's when q_length equals
  /// kv_length.
  std::vector<std::int64_t> q_lengths;
  /// Serving: the batch's tokens packed back to back with no padding (THD, cuDNN's ragged
  /// offsets): Q and O hold the sum of q_length(), K and V (unless paged) the sum of kv_length();
  /// seq_q and seq_kv are then the longest sequence a plan is built for.
  bool packed = false;

  /// The scale applied (scale, or 1 / sqrt(head_dim) when it is 0).
  double applied_scale() const noexcept { return scale != 0 ? scale : 1 / std::sqrt(double(head_dim)); }

  /// Throws invalid_argument naming the first impossible field, unsupported for a recipe
  /// other than attention_numerics or a head size cuDNN's fused attention does not take.
  void validate() const {
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw invalid_argument("attention: " + what);
    };
    require(batch > 0 && seq_q > 0 && seq_kv > 0, "batch, seq_q and seq_kv must be positive");
    require(q_heads > 0 && kv_heads > 0, "q_heads and kv_heads must be positive");
    require(q_heads % kv_heads == 0, "kv_heads " + std::to_string(kv_heads) + " does not divide q_heads " +
                                         std::to_string(q_heads) + " (each K/V head serves a whole group of query heads)");
    require(std::isfinite(scale) && scale >= 0, "scale must be finite and not negative (0: 1 / sqrt(head_dim))");
    require(double(batch) * double(seq_q) * double(q_heads) * double(head_dim) < 9.0e18, "Q overflows 64-bit indexing");
    if (head_dim <= 0 || head_dim > 256 || head_dim % 8 != 0) {
      throw unsupported("attention: head_dim " + std::to_string(head_dim) +
                        " is not supported (cuDNN's fused attention takes multiples of 8 up to 256)");
    }
    require_numerics(dtype, attention_numerics, "attention");
    require(page_size >= 0, "page_size must not be negative (0: K and V contiguous)");
    require(page_pool >= 0 && (page_pool == 0 || page_size > 0), "page_pool must not be negative, and only a paged problem has one");
    require(pool_pages() <= 2147483647, "the page pool's " + std::to_string(pool_pages()) + " pages overflow the int32 page table");
    require(kv_lengths.empty() || std::int64_t(kv_lengths.size()) == batch,
            "kv_lengths has " + std::to_string(kv_lengths.size()) + " lengths for a batch of " + std::to_string(batch));
    for (std::size_t b = 0; b < kv_lengths.size(); ++b) {
      require(kv_lengths[b] >= 1 && kv_lengths[b] <= seq_kv, "kv_lengths[" + std::to_string(b) + "] = " +
                                                                 std::to_string(kv_lengths[b]) + " is outside 1.." +
                                                                 std::to_string(seq_kv));
    }
    require(q_lengths.empty() || std::int64_t(q_lengths.size()) == batch,
            "q_lengths has " + std::to_string(q_lengths.size()) + " lengths for a batch of " + std::to_string(batch));
    for (std::size_t b = 0; b < q_lengths.size(); ++b) {
      require(q_lengths[b] >= 1 && q_lengths[b] <= seq_q, "q_lengths[" + std::to_string(b) + "] = " +
                                                               std::to_string(q_lengths[b]) + " is outside 1.." +
                                                               std::to_string(seq_q));
    }
    // cuDNN 9.19's FP8 backward on an H100 left the dQ rows of a last partial tile at zero
    // (sequences of 1000; 4096 correct), which its check caught: refused instead.
    if (is_fp8() && pass == attention_pass::backward && (seq_q % 128 != 0 || seq_kv % 128 != 0)) {
      throw unsupported("attention: an FP8 backward takes sequences in whole tiles of 128 tokens (got " +
                        std::to_string(seq_q) + " x " + std::to_string(seq_kv) + ")");
    }
    if (serving() && (pass == attention_pass::backward || is_fp8())) {
      throw unsupported("attention: padded, packed or paged batches are built for the BF16 and FP16 forward only");
    }
    // cuDNN's ragged offsets and the padding mask's lengths are 32-bit element counts.
    const double largest = std::max(q_tokens() * double(q_heads), (page_size > 0 ? 0 : kv_tokens()) * double(kv_heads));
    if (packed && largest * double(head_dim) >= 2147483648.0) {
      throw unsupported("attention: a packed batch of " + std::to_string(std::int64_t(largest * double(head_dim))) +
                        " elements a tensor is past the 32-bit ragged offsets");
    }
  }

  /// Whether the batch is padded, packed or paged (cuDNN's padding mask and sequence lengths).
  bool serving() const noexcept { return page_size > 0 || packed || !kv_lengths.empty() || !q_lengths.empty(); }
  /// The tokens sequence b's K and V hold.
  std::int64_t kv_length(std::int64_t b) const noexcept { return kv_lengths.empty() ? seq_kv : kv_lengths[std::size_t(b)]; }
  /// The query tokens sequence b holds.
  std::int64_t q_length(std::int64_t b) const noexcept { return q_lengths.empty() ? seq_q : q_lengths[std::size_t(b)]; }
  /// Where sequence b's first query token is, in tokens: packed, the lengths before it; else b x seq_q.
  std::int64_t q_offset(std::int64_t b) const noexcept {
    if (!packed) return b * seq_q;
    std::int64_t at = 0;
    for (std::int64_t i = 0; i < b; ++i) at += q_length(i);
    return at;
  }
  /// Where sequence b's first K and V token is (contiguous K and V), as q_offset() is for Q.
  std::int64_t kv_offset(std::int64_t b) const noexcept {
    if (!packed) return b * seq_kv;
    std::int64_t at = 0;
    for (std::int64_t i = 0; i < b; ++i) at += kv_length(i);
    return at;
  }
  /// Pages a sequence's table holds (paged only).
  std::int64_t pages_per_sequence() const noexcept { return page_size > 0 ? (seq_kv + page_size - 1) / page_size : 0; }
  /// Pages of the pool K and V live in (paged only): page_pool, or one set a sequence.
  std::int64_t pool_pages() const noexcept { return page_pool > 0 ? page_pool : batch * pages_per_sequence(); }
  /// Throws invalid_argument unless `table` is a page table for this paged problem: batch rows
  /// of pages_per_sequence() entries, each a page of the pool (0 to pool_pages() - 1), naming
  /// the first entry out of range.
  void validate_page_table(const std::vector<std::int32_t>& table) const {
    const std::int64_t pool = pool_pages();
    if (page_size <= 0) throw invalid_argument("attention: a page table for a problem whose K and V are not paged");
    if (std::int64_t(table.size()) != batch * pages_per_sequence()) {
      throw invalid_argument("attention: the page table has " + std::to_string(table.size()) + " entries, not " +
                             std::to_string(batch) + " sequences x " + std::to_string(pages_per_sequence()) + " pages");
    }
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i] < 0 || table[i] >= pool) {
        throw invalid_argument("attention: page table entry " + std::to_string(i) + " (sequence " +
                               std::to_string(std::int64_t(i) / pages_per_sequence()) + ") is page " +
                               std::to_string(table[i]) + ", outside the pool's " + std::to_string(pool) + " pages");
      }
    }
  }

  /// K and V tokens of the whole batch (the sum of kv_length()).
  double kv_tokens() const noexcept {
    if (kv_lengths.empty()) return double(batch) * double(seq_kv);
    double n = 0;
    for (std::int64_t l : kv_lengths) n += double(l);
    return n;
  }
  /// Query tokens of the whole batch (the sum of q_length()).
  double q_tokens() const noexcept {
    if (q_lengths.empty()) return double(batch) * double(seq_q);
    double n = 0;
    for (std::int64_t l : q_lengths) n += double(l);
    return n;
  }
  /// Query (and O) tokens its Q tensor holds: packed, q_tokens(); else batch x seq_q.
  std::int64_t q_rows() const noexcept { return packed ? std::int64_t(q_tokens()) : batch * seq_q; }
  /// K (and V) tokens its K tensor holds: paged, the pool's pages; packed, kv_tokens(); else
  /// batch x seq_kv.
  std::int64_t kv_rows() const noexcept {
    if (page_size > 0) return pool_pages() * page_size;
    return packed ? std::int64_t(kv_tokens()) : batch * seq_kv;
  }

  /// Whether Q, K, V and O are E4M3 with per-tensor scales.
  bool is_fp8() const noexcept { return dtype == numerics::fp8_e4m3; }
  /// Bytes of one element of Q, K, V, O and the gradients.
  std::size_t element_size() const noexcept { return element_bytes(types_of(dtype).input); }

  /// "bf16/b1_s4096x4096_h32+8_d128/causal", "/bwd" appended for the backward pass.
  std::string name() const {
    std::string s = std::string(to_string(dtype)) + "/b" + std::to_string(batch) + "_s" + std::to_string(seq_q);
    if (seq_kv != seq_q) s += "x" + std::to_string(seq_kv);
    s += "_h" + std::to_string(q_heads);
    if (kv_heads != q_heads) s += "+" + std::to_string(kv_heads);
    s += "_d" + std::to_string(head_dim) + "/" + to_string(mask);
    if (page_size > 0) s += "/paged" + std::to_string(page_size);
    if (page_pool > 0) s += "_pool" + std::to_string(page_pool);
    if (!q_lengths.empty()) s += "/q" + std::to_string(std::int64_t(q_tokens())) + "tokens";
    if (!kv_lengths.empty()) s += "/kv" + std::to_string(std::int64_t(kv_tokens())) + "tokens";
    if (packed) s += "/packed";
    return pass == attention_pass::backward ? s + "/bwd" : s;
  }

  /// Query-key pairs each head scores over the batch, under the FLOP convention: the sum of
  /// q_length x kv_length, or for a causal mask half of it (half_square) or all of it
  /// (full_square).
  double counted_pairs() const noexcept {
    double square = 0;
    if (q_lengths.empty()) {
      square = double(seq_q) * kv_tokens();
    } else {
      for (std::int64_t b = 0; b < batch; ++b) square += double(q_length(b)) * double(kv_length(b));
    }
    return mask == attention_mask::causal && flops_convention == causal_flops::half_square ? square / 2 : square;
  }

  /// One call's work. Forward: two GEMMs a head (Q K^T and P V), 2 x 2 x head_dim FLOPs a
  /// counted pair (the softmax not counted, as everyone counts it); Q, K and V read once, O
  /// written once (a padded batch: its sequences' tokens only). Backward: 2.5 times the
  /// forward's FLOPs (five GEMMs: Q K^T again, dO V^T, dV, dQ and dK; FlashAttention's and
  /// cuDNN's convention); Q, K, V, O, dO and the FP32 statistics read once, dQ, dK and dV
  /// written once. Items: query tokens (q_tokens()).
  gpucmp::work work() const {
    const double bytes = double(element_size());
    const double q_bytes = q_tokens() * double(q_heads) * double(head_dim) * bytes;
    const double kv_bytes = kv_tokens() * double(kv_heads) * double(head_dim) * bytes;  // what is read
    const bool backward = pass == attention_pass::backward;
    gpucmp::work w;
    w.flops = (backward ? 10 : 4) * double(q_heads) * counted_pairs() * double(head_dim);
    w.bytes_read = backward ? 3 * q_bytes + 2 * kv_bytes + 4 * double(batch) * double(q_heads) * double(seq_q)
                            : q_bytes + 2 * kv_bytes;
    w.bytes_written = backward ? q_bytes + 2 * kv_bytes : q_bytes;
    w.items = q_tokens();
    w.arithmetic = peak_precision(dtype);
    return w;
  }

  /// Its row's axes: pass, batch, sequences, heads, head_dim, mask, recipe, FLOP convention,
  /// and the serving layout (page size, tokens, BSHD or packed THD).
  std::vector<axis> axes() const {
    return {axis::of("pass", to_string(pass)),      axis::of("batch", double(batch)),
            axis::of("seq_q", double(seq_q)),       axis::of("seq_kv", double(seq_kv)),
            axis::of("q_heads", double(q_heads)),   axis::of("kv_heads", double(kv_heads)),
            axis::of("head_dim", double(head_dim)), axis::of("mask", to_string(mask)),
            axis::of("dtype", to_string(dtype)),    axis::of("flops", to_string(flops_convention)),
            axis::of("page_size", double(page_size)), axis::of("q_tokens", q_tokens()),
            axis::of("kv_tokens", kv_tokens()),     axis::of("layout", packed ? "thd" : "bshd")};
  }

  /// The rounding a correct kernel may show against a double reference from the same stored
  /// Q, K and V: the output's rounding, and P (backward: P and dS) rounded to the input type
  /// before the GEMM that reads it (what fused attention kernels do), a random walk over the
  /// terms; bound() takes the root of the squared terms (forward: sum (p_j v_j)^2) as l2 and
  /// their number as terms. FP32 scores and exponentials add a few FP32 units, inside the
  /// allowance.
  /// FP8: O and P are E4M3, each scaled by its per-tensor scale before rounding, so their
  /// subnormal steps shrink by the scale (O's is in output_abs; P's in p_floor()); a backward's
  /// gradients and dS are floored at their own scales (check_attention_gradients()).
  tolerance output_tolerance() const noexcept {
    tolerance tol;
    const element_type stored = types_of(dtype).input;  // Q, K, V, O and the gradients
    tol.output_eps = unit_roundoff(stored);
    tol.output_abs = element_info_of(stored).smallest_subnormal / 2 / (is_fp8() ? attention_fp8_o_scale : 1);
    tol.input_eps = unit_roundoff(stored);  // P (and dS) rounded once a term
    tol.accumulate_eps = unit_roundoff(element_type::fp32);
    tol.sigmas = 8;
    return tol;
  }

  /// The rounding of a P (or dS) below the stored type's normal range, as a multiple of the
  /// relative one: half its smallest subnormal, over the scale P is rounded at, over its unit
  /// roundoff. A term p v of a reference then counts |p v| + p_floor() |v| in its l2.
  double p_floor() const noexcept {
    const element_type stored = types_of(dtype).input;
    return element_info_of(stored).smallest_subnormal / 2 / (is_fp8() ? attention_fp8_p_scale : 1) /
           unit_roundoff(stored);
  }
};

}  // namespace gpucmp
