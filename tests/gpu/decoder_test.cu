// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: gpucmp contributors
//
// The decoder's prefill and decode steps against a double reference of the same model, run on
// the CPU from the decoder's own stored weights, token by token (a causal prefill is that), and
// rounding to the stored type wherever the decoder stores: its logits after the prompts and
// after each decode step of two sequences, on small geometries (grouped-query attention, tied
// and untied LM heads, BF16 and FP16), with a contiguous and a paged cache; sequences that join
// and leave a paged cache's running batch (continuous batching: prompts of different lengths,
// slots reused, padded batches, decode steps replayed as CUDA graphs) against the same
// reference. Bad tokens, shapes and steps are refused by name; zeroed final norm weights are
// caught; a step the page pool cannot hold takes nothing. RoPE applied while splitting QKV into
// the cache equals RoPE, then the split.
#include "catch.hpp"
#include "small_decoder.hpp"

#include <gpucmp/cuda/stream.hpp>
#include <gpucmp/models/decoder.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// The decoder's model in double, from its stored weights, rounding to T where it stores.
template <class T>
class reference_decoder {
 public:
  reference_decoder(const gpucmp::decoder& d, std::int64_t sequences) : m_c(d.config()) {
    for (const gpucmp::decoder_tensor& t : gpucmp::decoder_checkpoint_tensors(m_c)) {
      std::int64_t n = 1;
      for (std::int64_t e : t.shape) n *= e;
      std::vector<T> stored(static_cast<std::size_t>(n));
      REQUIRE(cudaMemcpy(stored.data(), d.tensor(t.name), stored.size() * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
      std::vector<double>& w = m_w[t.name];
      for (const T& v : stored) w.push_back(gpucmp::to_double(v));
    }
    m_inverse_frequencies = gpucmp::decoder_rope(m_c, 1).inverse_frequencies();
    m_k.assign(std::size_t(sequences), std::vector<std::vector<double>>(std::size_t(m_c.layers)));
    m_v = m_k;
  }

  // Runs `token` at the next position of sequence b; returns its logits.
  std::vector<double> step(std::size_t b, std::int32_t token) {
    const std::int64_t h = m_c.hidden_size, d = m_c.head_dim, hq = m_c.heads, hkv = m_c.kv_heads, m = m_c.intermediate_size;
    const std::size_t pos = m_k[b][0].size() / std::size_t(hkv * d);
    const std::vector<double>& embedding = m_w.at("model.embed_tokens.weight");
    std::vector<double> r(embedding.begin() + std::ptrdiff_t(token * h), embedding.begin() + std::ptrdiff_t((token + 1) * h));
    std::vector<double> branch;
    for (std::int64_t l = 0; l < m_c.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      if (l > 0) add(r, branch);
      const std::vector<double> x = norm(r, m_w.at(p + "input_layernorm.weight"));
      std::vector<double> q = linear(p + "self_attn.q_proj.weight", x), k = linear(p + "self_attn.k_proj.weight", x),
                          v = linear(p + "self_attn.v_proj.weight", x);
      rotate(q, hq, double(pos));
      rotate(k, hkv, double(pos));
      std::vector<double>& keys = m_k[b][std::size_t(l)];
      std::vector<double>& values = m_v[b][std::size_t(l)];
      keys.insert(keys.end(), k.begin(), k.end());
      values.insert(values.end(), v.begin(), v.end());
      std::vector<double> o(std::size_t(hq * d));
      for (std::int64_t head = 0; head < hq; ++head) {
        const std::int64_t kvh = head / (hq / hkv);
        std::vector<double> s(pos + 1);
        double top = -INFINITY, sum = 0;
        for (std::size_t j = 0; j <= pos; ++j) {
          double dot = 0;
          for (std::int64_t c = 0; c < d; ++c) dot += q[std::size_t(head * d + c)] * keys[j * std::size_t(hkv * d) + std::size_t(kvh * d + c)];
          s[j] = dot / std::sqrt(double(d));
          top = std::max(top, s[j]);
        }
        for (double& e : s) sum += (e = std::exp(e - top));
        for (std::int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (std::size_t j = 0; j <= pos; ++j) acc += s[j] / sum * values[j * std::size_t(hkv * d) + std::size_t(kvh * d + c)];
          o[std::size_t(head * d + c)] = round(acc);
        }
      }
      branch = linear(p + "self_attn.o_proj.weight", o);
      add(r, branch);
      const std::vector<double> y = norm(r, m_w.at(p + "post_attention_layernorm.weight"));
      const std::vector<double> gate = linear(p + "mlp.gate_proj.weight", y), up = linear(p + "mlp.up_proj.weight", y);
      std::vector<double> act(static_cast<std::size_t>(m));
      for (std::size_t i = 0; i < act.size(); ++i) act[i] = round(gate[i] / (1 + std::exp(-gate[i])) * up[i]);
      branch = linear(p + "mlp.down_proj.weight", act);
    }
    add(r, branch);
    const std::vector<double> y = norm(r, m_w.at("model.norm.weight"));
    return linear(m_c.tied_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", y);
  }

 private:
  static double round(double x) { return gpucmp::to_double(gpucmp::from_double<T>(x)); }
  void add(std::vector<double>& r, const std::vector<double>& branch) const {
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = round(r[i] + branch[i]);
  }
  std::vector<double> norm(const std::vector<double>& r, const std::vector<double>& weight) const {
    double squares = 0;
    for (double v : r) squares += v * v;
    const double scale = 1 / std::sqrt(squares / double(r.size()) + m_c.norm_eps);
    std::vector<double> y(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) y[i] = round(r[i] * scale * weight[i]);
    return y;
  }
  std::vector<double> linear(const std::string& name, const std::vector<double>& x) const {
    const std::vector<double>& w = m_w.at(name);
    const std::size_t in = x.size(), out = w.size() / in;
    std::vector<double> y(out);
    for (std::size_t o = 0; o < out; ++o) {
      double acc = 0;
      for (std::size_t i = 0; i < in; ++i) acc += w[o * in + i] * x[i];
      y[o] = round(acc);
    }
    return y;
  }
  // Hugging Face's rotate_half pairs: element i with i + head_dim / 2.
  void rotate(std::vector<double>& x, std::int64_t heads, double pos) const {
    const std::int64_t d = m_c.head_dim, half = d / 2;
    for (std::int64_t head = 0; head < heads; ++head) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = pos * m_inverse_frequencies[std::size_t(i)];
        double& a = x[std::size_t(head * d + i)];
        double& b = x[std::size_t(head * d + i + half)];
        const double ra = a * std::cos(angle) - b * std::sin(angle), rb = b * std::cos(angle) + a * std::sin(angle);
        a = round(ra);
        b = round(rb);
      }
    }
  }

  gpucmp::decoder_config m_c;
  std::map<std::string, std::vector<double>> m_w;
  std::vector<double> m_inverse_frequencies;
  std::vector<std::vector<std::vector<double>>> m_k, m_v;  // [sequence][layer]: position-major rows of kv heads
};

// The largest |got - reference| over a step's logits, over the largest |reference| (infinite
// where a logit is not finite).
template <class T>
double logit_error(const gpucmp::decoder& d, std::size_t sequence, const std::vector<double>& reference) {
  const std::size_t vocab = reference.size();
  std::vector<T> got(vocab);
  REQUIRE(cudaMemcpy(got.data(), static_cast<const T*>(d.logits()) + sequence * vocab, vocab * sizeof(T),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  double worst = 0, largest = 0;
  std::size_t not_finite = 0, first = vocab;
  for (std::size_t i = 0; i < vocab; ++i) {
    if (!std::isfinite(gpucmp::to_double(got[i]))) first = not_finite++ == 0 ? i : first;
  }
  if (not_finite > 0) {  // std::max below would skip a NaN
    UNSCOPED_INFO("sequence " << sequence << ": " << not_finite << " of " << vocab << " logits not finite, the first at " << first
                              << ": " << gpucmp::to_double(got[first]));
    return INFINITY;
  }
  for (std::size_t i = 0; i < vocab; ++i) {
    const double logit = gpucmp::to_double(got[i]);
    worst = std::max(worst, std::fabs(logit - reference[i]));
    largest = std::max(largest, std::fabs(reference[i]));
  }
  return worst / largest;
}

// Two sequences: prompts of 37 tokens, then 5 decode steps of fixed tokens; every step's logits
// within `bound` of the reference (relative to the largest logit). Returns the worst error.
template <class T>
double run_against_reference(gpucmp::decoder& d, gpucmp::stream& s, double bound) {
  const std::int64_t batch = 2, prompt = 37, steps = 5;
  std::vector<std::int32_t> tokens;
  for (std::int64_t i = 0; i < batch * prompt; ++i) tokens.push_back(std::int32_t((i * 7919 + 13) % d.config().vocab_size));
  reference_decoder<T> ref(d, batch);
  std::vector<std::vector<double>> expected(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < prompt; ++i) expected[std::size_t(b)] = ref.step(std::size_t(b), tokens[std::size_t(b * prompt + i)]);
  }
  d.prefill(tokens, batch, prompt, s.get());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  double worst = 0;
  for (std::int64_t b = 0; b < batch; ++b) worst = std::max(worst, logit_error<T>(d, std::size_t(b), expected[std::size_t(b)]));
  for (std::int64_t step = 0; step < steps; ++step) {
    std::vector<std::int32_t> next;
    for (std::int64_t b = 0; b < batch; ++b) {
      next.push_back(std::int32_t((step * 31 + b * 17 + 5) % d.config().vocab_size));
      expected[std::size_t(b)] = ref.step(std::size_t(b), next.back());
    }
    d.decode(next, batch, prompt + step, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    for (std::int64_t b = 0; b < batch; ++b) worst = std::max(worst, logit_error<T>(d, std::size_t(b), expected[std::size_t(b)]));
  }
  INFO("worst logit error " << worst << " of the largest logit, bound " << bound);
  CHECK(worst <= bound);
  return worst;
}

// run_against_reference() of decoders of `c` with options `o` in BF16 and in FP16. The
// reference rounds where the decoder stores, so what is left is summation order and a stored
// value that rounds the other way: a few units of the stored type's roundoff, carried through
// two layers (BF16: 2^-8, FP16: 2^-11).
void against_reference_in_bf16_and_fp16(const gpucmp::decoder_config& c, gpucmp::decoder_options o, gpucmp::stream& s) {
  o.dtype = gpucmp::numerics::bf16;
  gpucmp::decoder bf16(c, o, s.get());
  run_against_reference<__nv_bfloat16>(bf16, s, 0.03);
  o.dtype = gpucmp::numerics::fp16;
  gpucmp::decoder fp16(c, o, s.get());
  run_against_reference<__half>(fp16, s, 0.005);
}

}  // namespace

TEST_CASE("decoder: prefill and decode steps match a double reference of the same model", "[gpu][models][decoder]") {
  gpucmp::stream s;
  for (bool tied : {false, true}) {
    gpucmp::decoder_options o;
    o.max_batch = 2;
    o.max_context = 64;
    o.choice = gpucmp::algorithm_choice::heuristic;  // the operations' own tests cover the search
    against_reference_in_bf16_and_fp16(small_decoder_config(tied), o, s);
  }
}

TEST_CASE("decoder: overlapped launches keep the reference's logits, with gpucmp's GEMV kernel searched in", "[gpu][models][decoder]") {
  gpucmp::stream s;
  for (bool overlap : {true, false}) {
    gpucmp::decoder_options o;
    o.max_batch = 2;
    o.max_context = 64;
    o.choice = gpucmp::algorithm_choice::search;  // at 2 tokens gpucmp's GEMV kernel is a candidate
    o.sustained_duel = false;
    o.overlap_kernels = overlap;
    gpucmp::decoder d(small_decoder_config(false), o, s.get());
    INFO((overlap ? "overlapped" : "serial") << " launches");
    run_against_reference<__nv_bfloat16>(d, s, 0.03);
    // The overlapped GEMV kernel fetches W before it waits for x: the case needs it chosen.
    std::size_t kernels = 0;
    std::string chosen;
    for (const std::string& line : d.algorithms(2, 1, true)) {
      kernels += line.find("gpucmp kernel") != std::string::npos;
      chosen += line + "; ";
    }
    INFO(chosen);
    CHECK(kernels > 0);
  }
}

TEST_CASE("decoder: RMSNorm and the residual add inside gpucmp's GEMV kernel keep the reference's logits",
          "[gpu][models][decoder]") {
  gpucmp::stream s;
  for (std::int64_t page_size : {0, 16}) {
    gpucmp::decoder_options o;
    o.max_batch = 2;
    o.max_context = 64;
    o.page_size = page_size;
    o.choice = gpucmp::algorithm_choice::search;  // at 2 tokens gpucmp's GEMV kernel is a candidate
    o.sustained_duel = false;
    o.fuse_norm_into_gemv = true;
    INFO((page_size > 0 ? "paged" : "contiguous"));
    for (gpucmp::numerics t : {gpucmp::numerics::bf16, gpucmp::numerics::fp16}) {
      o.dtype = t;
      gpucmp::decoder d(small_decoder_config(false), o, s.get());
      if (t == gpucmp::numerics::bf16) {
        run_against_reference<__nv_bfloat16>(d, s, 0.03);
      } else {
        run_against_reference<__half>(d, s, 0.005);
      }
      // The decode step must have taken the fused path somewhere for the case to mean anything.
      std::string chosen;
      for (const std::string& line : d.algorithms(2, 1, true)) chosen += line + "; ";
      INFO(chosen);
      CHECK(chosen.find("in gpucmp's GEMV kernel: ") != std::string::npos);
    }
  }
}

TEST_CASE("decoder: a paged cache gives the same prefill and decode steps through its page tables", "[gpu][models][decoder]") {
  gpucmp::stream s;
  gpucmp::decoder_options o;
  o.max_batch = 2;
  o.max_context = 64;
  o.page_size = 16;
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::decoder paged(small_decoder_config(false), o, s.get());
  REQUIRE(paged.pages() != nullptr);
  run_against_reference<__nv_bfloat16>(paged, s, 0.03);
  CHECK(paged.pages()->held(0) == 3);  // 37 + 5 tokens in pages of 16
  CHECK(paged.pages()->free_pages() == 2);  // of 2 x 4
}

TEST_CASE("decoder: sequences join and leave a paged cache's running batch and keep the reference's logits",
          "[gpu][models][decoder]") {
  gpucmp::stream s;
  gpucmp::decoder_options o;
  o.max_batch = 4;
  o.max_context = 64;
  o.page_size = 16;
  o.kv_pages = 6;  // few enough that a released slot's pages are taken again
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::decoder d(small_decoder_config(false), o, s.get());
  reference_decoder<__nv_bfloat16> ref(d, 4);
  const std::int64_t vocab = d.config().vocab_size;
  std::map<std::int64_t, std::size_t> sequence_of;  // slot -> the reference's sequence
  double worst = 0;
  auto id = [&](std::int64_t i) { return std::int32_t((i * 7919 + 13) % vocab); };
  // One step of `slots` (prompts, or one token each), checked against the reference row by row.
  auto step = [&](const std::vector<std::int64_t>& slots, const std::vector<std::vector<std::int32_t>>& tokens) {
    std::vector<std::vector<double>> expected;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      std::vector<double> logits;
      for (std::int32_t t : tokens[i]) logits = ref.step(sequence_of.at(slots[i]), t);
      expected.push_back(logits);
    }
    d.step(slots, tokens, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const double e = logit_error<__nv_bfloat16>(d, i, expected[i]);
      INFO("slot " << slots[i] << ", row " << i << ": error " << e);
      CHECK(e <= 0.03);
      worst = std::max(worst, e);
    }
  };
  auto prompt = [&](std::int64_t length, std::int64_t salt) {
    std::vector<std::int32_t> p;
    for (std::int64_t i = 0; i < length; ++i) p.push_back(id(salt * 100 + i));
    return p;
  };
  auto decode_step = [&](const std::vector<std::int64_t>& slots, std::int64_t salt) {
    std::vector<std::vector<std::int32_t>> next;
    for (std::int64_t slot : slots) next.push_back({id(salt * 10 + slot)});
    step(slots, next);
  };
  sequence_of = {{2, 0}, {0, 1}};
  step({2, 0}, {prompt(21, 1), prompt(9, 2)});  // two prompts of different lengths, padded to 32
  CHECK(d.length(2) == 21);
  CHECK(d.length(0) == 9);
  CHECK(d.pages()->free_pages() == 3);
  for (std::int64_t i = 0; i < 3; ++i) decode_step({0, 2}, i);  // another order than the prefill's
  d.release(2);
  CHECK(d.length(2) == 0);
  CHECK(d.pages()->free_pages() == 5);
  sequence_of[1] = 2;
  sequence_of[3] = 3;
  step({1, 3}, {prompt(13, 3), prompt(5, 4)});  // into the released pages
  for (std::int64_t i = 0; i < 2; ++i) decode_step({3, 0, 1}, 10 + i);  // three sequences, padded to four
  decode_step({1}, 20);
  CHECK(d.length(0) == 14);
  CHECK(d.length(1) == 16);
  CHECK(d.length(3) == 7);
  INFO("worst logit error " << worst);
  // 60 tokens need 4 pages; 3 are free: refused, nothing taken, and the others go on.
  CHECK_THROWS_WITH(d.step({2}, {prompt(60, 5)}, s.get()), GPUCMP_CONTAINS("needs 4 more pages of 16 tokens, 3 of 6 are free"));
  CHECK(d.pages()->free_pages() == 3);
  CHECK(d.length(2) == 0);
  decode_step({0, 1, 3}, 30);
  CHECK(d.pages()->free_pages() == 2);  // slot 1 passed 16 tokens
  // Steps that are not one.
  CHECK_THROWS_WITH(d.step({0, 2}, {{1}, {2}}, s.get()), GPUCMP_CONTAINS("all prefills (empty slots) or all decodes"));
  CHECK_THROWS_WITH(d.step({0, 0}, {{1}, {2}}, s.get()), GPUCMP_CONTAINS("slot 0 appears twice"));
  CHECK_THROWS_WITH(d.step({0}, {{1, 2}}, s.get()), GPUCMP_CONTAINS("takes 2 tokens"));
  CHECK_THROWS_WITH(d.step({4}, {{1}}, s.get()), GPUCMP_CONTAINS("no slot 4 (0 to 3)"));
  CHECK_THROWS_WITH(d.step({2}, {prompt(65, 6)}, s.get()), GPUCMP_CONTAINS("would hold 65 tokens, past max_context 64"));
  CHECK_THROWS_WITH(d.step({0}, {{std::int32_t(vocab)}}, s.get()), GPUCMP_CONTAINS("outside the vocabulary"));
  CHECK_THROWS_WITH(d.step({}, {}, s.get()), GPUCMP_CONTAINS("0 slots"));
  // A contiguous cache keeps sequence b in row b.
  gpucmp::decoder_options contiguous = o;
  contiguous.page_size = 0;
  contiguous.kv_pages = 0;
  gpucmp::decoder c(small_decoder_config(false), contiguous, s.get());
  CHECK(c.pages() == nullptr);
  CHECK_THROWS_WITH(c.step({1}, {{1}}, s.get()), GPUCMP_CONTAINS("a contiguous cache's steps take slots 0, 1, ... in order"));
  CHECK_NOTHROW(c.step({0, 1}, {{1, 2, 3}, {4}}, s.get()));
  CHECK(c.length(1) == 1);
  contiguous.kv_pages = 8;
  CHECK_THROWS_WITH(gpucmp::decoder(small_decoder_config(false), contiguous, s.get()), GPUCMP_CONTAINS("kv_pages needs a page_size"));
}

TEST_CASE("decoder: zeroed final norm weights are caught; bad tokens and shapes are refused by name",
          "[gpu][models][decoder]") {
  gpucmp::stream s;
  gpucmp::decoder_options o;
  o.max_batch = 2;
  o.max_context = 64;
  o.choice = gpucmp::algorithm_choice::heuristic;
  gpucmp::decoder d(small_decoder_config(false), o, s.get());
  // On the decoder's stream: a cudaMemset runs on the legacy stream, unordered with a
  // non-blocking one.
  REQUIRE(cudaMemsetAsync(const_cast<void*>(d.tensor("model.norm.weight")), 0, 256 * 2, s.get()) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  {
    // A reference from d would read the zeros too: take the weights of a decoder of the same seed.
    gpucmp::decoder fresh(small_decoder_config(false), o, s.get());
    reference_decoder<__nv_bfloat16> honest(fresh, 1);
    std::vector<double> expected;
    for (std::int32_t t : {1, 2, 3}) expected = honest.step(0, t);
    d.prefill({1, 2, 3}, 1, 3, s.get());
    REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
    // Zero logits, far from the reference, but finite: NaN logits (an unwritten output) would
    // be far too, for another reason (the KV cache once started as NaN, and every logit was).
    const double error = logit_error<__nv_bfloat16>(d, 0, expected);
    REQUIRE(std::isfinite(error));
    CHECK(error > 0.5);
  }
  CHECK_THROWS_WITH(d.prefill({1, 2, 1000}, 1, 3, s.get()), GPUCMP_CONTAINS("token 2 is id 1000, outside the vocabulary of 1000"));
  CHECK_THROWS_WITH(d.prefill({1, 2}, 1, 3, s.get()), GPUCMP_CONTAINS("2 token ids for a step of 3"));
  CHECK_THROWS_WITH(d.prefill({1, 2, 3}, 3, 1, s.get()), GPUCMP_CONTAINS("batch 3 is outside 1..2"));
  CHECK_THROWS_WITH(d.decode({1}, 1, 64, s.get()), GPUCMP_CONTAINS("1 new tokens after 64 cached do not fit a cache of 64"));
  CHECK_THROWS_WITH(d.tensor("model.layers.9.mlp.up_proj.weight"), GPUCMP_CONTAINS("no tensor 'model.layers.9.mlp.up_proj.weight'"));
  gpucmp::decoder_options too_long = o;
  too_long.max_context = 1024;
  CHECK_THROWS_WITH(gpucmp::decoder(small_decoder_config(false), too_long, s.get()), GPUCMP_CONTAINS("past the model's 512 positions"));
  gpucmp::decoder_options fp32 = o;
  fp32.dtype = gpucmp::numerics::fp32;
  CHECK_THROWS_AS(gpucmp::decoder(small_decoder_config(false), fp32, s.get()), gpucmp::unsupported);
}

namespace {

// A device copy of `host`.
template <class T>
gpucmp::device_buffer<T> on_device(const std::vector<T>& host) {
  gpucmp::device_buffer<T> d(host.size(), gpucmp::initial_fill::uninitialized());
  d.copy_from_host(host);
  return d;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Two sequences of three new tokens (the second's third a padding row) after 5 and 10 cached
// ones, RoPE then the split against both in one kernel, into a contiguous or a paged cache.
template <class T>
void check_rope_split(bool paged) {
  const gpucmp::decoder_config c = small_decoder_config(false);
  const std::int64_t batch = 2, per_sequence = 3, tokens = batch * per_sequence, context = 16, page = 4;
  const gpucmp::rope_problem r = gpucmp::decoder_rope(c, tokens, std::is_same_v<T, __half> ? gpucmp::numerics::fp16 : gpucmp::numerics::bf16, 64);
  REQUIRE(gpucmp::rope_split_applies(r, sizeof(T)));
  const std::int64_t row = (c.heads + 2 * c.kv_heads) * c.head_dim, head = c.head_dim;
  std::vector<T> qkv(std::size_t(tokens * row));
  std::uint64_t state = 12345;
  for (T& v : qkv) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = T(float(double(state >> 11) / double(1ull << 53) * 2 - 1));
  }
  const std::vector<std::int32_t> lengths{3, 2, 8, 12, 5, 10};  // q, kv, start of each sequence
  const std::vector<std::int32_t> positions{5, 6, 7, 10, 11, 11};
  const std::vector<std::int32_t> table{2, 0, 5, 7, 1, 6, 3, 4};  // 4 pages of 4 a sequence, shuffled
  const std::int64_t cache_elements = (paged ? 9 * page : batch * context) * c.kv_heads * head;
  const std::vector<T> sentinel(std::size_t(cache_elements), T(7.0f));
  const std::size_t qn = std::size_t(tokens * c.heads * head), kn = std::size_t(cache_elements);
  const gpucmp::device_buffer<T> in = on_device(qkv);
  gpucmp::device_buffer<T> rotated = on_device(qkv);
  gpucmp::device_buffer<T> q[2] = {on_device(std::vector<T>(qn)), on_device(std::vector<T>(qn))};
  gpucmp::device_buffer<T> k[2] = {on_device(sentinel), on_device(sentinel)};
  gpucmp::device_buffer<T> v[2] = {on_device(sentinel), on_device(sentinel)};
  gpucmp::device_buffer<std::int32_t> lengths_d = on_device(lengths), positions_d = on_device(positions), table_d = on_device(table);
  const gpucmp::decoder_step_lengths steps{lengths_d.data(), batch};
  const std::int32_t* at = positions_d.data();
  std::vector<float> angles;  // (cos, sin) pairs, as the decoder keeps its table
  for (const float2& a : gpucmp::rope_table(r)) angles.insert(angles.end(), {a.x, a.y});
  const gpucmp::device_buffer<float> angles_d = on_device(angles);
  const float2* cs = reinterpret_cast<const float2*>(angles_d.data());
  gpucmp::kv_cache_layout cache{nullptr, context, page, 4, c.kv_heads};
  if (paged) cache.table = table_d.data();
  const std::int64_t e = sizeof(T);
  const gpucmp::qkv_split split{c.heads * head * e, head * e, cache};
  gpucmp::stream s;
  gpucmp::run_rope(r, gpucmp::rope_shapes(r).at(0), rotated.data(), at, cs, s.get());
  gpucmp::split_qkv_into_cache(rotated.data(), q[0].data(), k[0].data(), v[0].data(), split, tokens, per_sequence, at, steps,
                               s.get());
  gpucmp::rope_split_qkv_into_cache(r, in.data(), q[1].data(), k[1].data(), v[1].data(), split, tokens, per_sequence, at, cs,
                                    steps, s.get(), gpucmp::launch_order::overlapped);
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  CHECK(same_bits(q[0].to_host(), q[1].to_host()));
  CHECK(same_bits(k[0].to_host(), k[1].to_host()));
  CHECK(same_bits(v[0].to_host(), v[1].to_host()));
  CHECK(same_bits(in.to_host(), qkv));  // its input left as it was
  CHECK_FALSE(same_bits(q[1].to_host(), std::vector<T>(qn)));  // something was written
  // Rotated: token 0's first Q element moved off its input (position 5's angles are not 0).
  CHECK(gpucmp::to_double(q[1].to_host()[0]) != gpucmp::to_double(qkv[0]));
  std::size_t untouched = 0;  // the padding row and the positions no token takes keep the sentinel
  for (const T& x : k[1].to_host()) untouched += gpucmp::to_double(x) == 7.0;
  CHECK(untouched == kn - std::size_t(5 * c.kv_heads * head));
  gpucmp::rope_problem interleaved = r;
  interleaved.pairs = gpucmp::rope_pairs::interleaved;
  CHECK_FALSE(gpucmp::rope_split_applies(interleaved, sizeof(T)));
  CHECK_THROWS_WITH(gpucmp::rope_split_qkv_into_cache(interleaved, in.data(), q[1].data(), k[1].data(), v[1].data(), split,
                                                      tokens, per_sequence, at, cs, steps, s.get()),
                    GPUCMP_CONTAINS("cannot be applied while splitting"));
}

}  // namespace

TEST_CASE("decoder: RoPE applied while splitting QKV into the cache equals RoPE then the split, bit for bit",
          "[gpu][models][decoder]") {
  for (bool paged : {false, true}) {
    INFO((paged ? "paged" : "contiguous"));
    check_rope_split<__nv_bfloat16>(paged);
    check_rope_split<__half>(paged);
  }
  // The other cases run the default, RoPE in the split; a decoder with RoPE apart keeps the
  // reference's logits too.
  gpucmp::stream s;
  gpucmp::decoder_options o;
  o.max_batch = 2;
  o.max_context = 64;
  o.choice = gpucmp::algorithm_choice::heuristic;
  REQUIRE(o.fuse_rope_split);
  o.fuse_rope_split = false;
  against_reference_in_bf16_and_fp16(small_decoder_config(false), o, s);
}
