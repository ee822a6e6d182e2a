// The softmax case: its id, its masks and its seeded logits (see numprobe/reference/softmax.hpp).
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <utility>

#include "numprobe/base/error.hpp"
#include "numprobe/core/id_fields.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/reference/softmax.hpp"

namespace numprobe {
namespace {

constexpr std::array<std::pair<softmax_mask, std::string_view>, 5> k_masks{{
    {softmax_mask::m_none, "none"},
    {softmax_mask::m_padding, "padding"},
    {softmax_mask::m_banned, "banned"},
    {softmax_mask::m_prefix, "first-chunk"},
    {softmax_mask::m_all, "all"},
}};

// Streams of the counter-based generator (disjoint from the attention inputs' streams).
constexpr std::uint64_t k_stream_logit = 0x50f7;
constexpr std::uint64_t k_stream_spike = 0x50f8;
constexpr std::uint64_t k_stream_banned = 0x50f9;
constexpr std::uint64_t k_stream_target = 0x50fa;

std::uint64_t element(std::int64_t row, std::int64_t i) {
  // Element values do not depend on V beyond the index: a shorter row is a prefix of a longer
  // one, so a sweep over the row length changes one thing at a time.
  return static_cast<std::uint64_t>(row) * 0x100000000ULL + static_cast<std::uint64_t>(i);
}

}  // namespace

std::string_view to_string(softmax_mask m) { return k_masks[static_cast<std::size_t>(m)].second; }

softmax_mask parse_softmax_mask(std::string_view text, const std::string& place) {
  return parse_named(k_masks, text, place, "softmax mask");
}

std::int64_t softmax_case::masked_count() const {
  if (mask != softmax_mask::m_padding && mask != softmax_mask::m_prefix) return 0;
  return std::min(vocab, masked > 0 ? masked : 1 + vocab / 16);
}

void softmax_case::validate() const {
  if (vocab <= 0) throw_input_error("--vocab", fmt::format("must be positive, got {}", vocab));
  if (vocab > (std::int64_t{1} << 31)) throw_input_error("--vocab", "at most 2^31 entries per row");
  if (rows <= 0) throw_input_error("--rows", fmt::format("must be positive, got {}", rows));
  if (double(rows) * double(vocab) > 2.0e9) throw_input_error("--rows", "rows x vocab above 2e9");
  if (masked < 0) throw_input_error("--masked", "must be >= 0");
  if (!std::isfinite(temperature) || temperature <= 0)
    throw_input_error("--temperature", "must be finite and > 0");
  if (!std::isfinite(softcap) || softcap < 0) throw_input_error("--softcap", "must be finite and >= 0");
  if (!std::isfinite(logit_shift)) throw_input_error("--shift", "must be finite");
  if (dist == input_dist::m_constant_v || dist == input_dist::m_sink || dist == input_dist::m_flat)
    throw_input_error("--dist", fmt::format("{} has no meaning for softmax rows", numprobe::to_string(dist)));
}

std::string softmax_case::id() const {
  std::string s = fmt::format("softmax(V={},R={},in={},mask={}", vocab, rows, formats::name(dtype),
                              to_string(mask));
  if (masked != 0) s += fmt::format(",masked={}", masked);
  if (temperature != 1.0) s += fmt::format(",temp={}", temperature);
  if (softcap != 0.0) s += fmt::format(",softcap={}", softcap);
  if (dist != input_dist::m_normal) s += fmt::format(",dist={}", numprobe::to_string(dist));
  if (dist == input_dist::m_shifted) s += fmt::format(",shift={}", logit_shift);
  s += fmt::format(",seed={})", seed);
  return s;
}

softmax_case parse_softmax_case(std::string_view id) {
  constexpr std::string_view head = "softmax(";
  if (id.substr(0, head.size()) != head || id.back() != ')')
    throw_input_error("--case", fmt::format("'{}' is not a softmax case id", id));
  std::string_view body = id.substr(head.size(), id.size() - head.size() - 1);
  softmax_case c;
  while (!body.empty()) {
    const auto comma = body.find(',');
    const std::string_view field = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    const auto eq = field.find('=');
    if (eq == std::string_view::npos) throw_input_error("--case", fmt::format("field '{}' has no '='", field));
    const std::string key(field.substr(0, eq));
    const std::string_view val = field.substr(eq + 1);
    if (key == "V") c.vocab = parse_id_int(val, key);
    else if (key == "R") c.rows = parse_id_int(val, key);
    else if (key == "in") c.dtype = formats::parse_format(val, "case id field in");
    else if (key == "mask") c.mask = parse_softmax_mask(val, "case id field mask");
    else if (key == "masked") c.masked = parse_id_int(val, key);
    else if (key == "temp") c.temperature = parse_id_double(val, key);
    else if (key == "softcap") c.softcap = parse_id_double(val, key);
    else if (key == "dist") c.dist = parse_dist(val, "case id field dist");
    else if (key == "shift") c.logit_shift = parse_id_double(val, key);
    else if (key == "seed") c.seed = static_cast<std::uint64_t>(parse_id_int(val, key));
    else throw_input_error("--case", fmt::format("unknown field '{}'", key));
  }
  c.validate();
  return c;
}

double softmax_logit(const softmax_case& c, std::int64_t row, std::int64_t i) {
  const std::uint64_t n = element(row, i);
  const double z = normal_at(c.seed, k_stream_logit, n);
  // Positions as a fraction of a fixed 256K span (not of V), so logits do not depend on V.
  const double frac = static_cast<double>(i) / 262144.0;
  switch (c.dist) {
    case input_dist::m_normal: return 2.0 * z;
    case input_dist::m_uniform: return 8.0 * uniform_open01(c.seed, k_stream_logit, n) - 4.0;
    case input_dist::m_llm: {
      // LM-head-like: a heavy tail (scale mixture) and rare confident tokens 10..16 above.
      const double tail = 1.0 + 0.5 * std::fabs(normal_at(c.seed, k_stream_spike, n));
      const double u = uniform_open01(c.seed, k_stream_spike, n ^ 0x5a5a5a5aULL);
      return 1.5 * z * tail + (u < 1.0 / 2048 ? 10.0 + 6.0 * u * 2048 : 0.0);
    }
    case input_dist::m_rescale_stress: return 24.0 * frac + 0.5 * z;  // max rises chunk by chunk
    case input_dist::m_max_first: return (i == 0 ? 24.0 : -24.0 * frac) + 0.5 * z;
    case input_dist::m_diffuse: return 0.01 * z;  // near-uniform: the row sum is the whole story
    case input_dist::m_shifted: return 2.0 * z + c.logit_shift;
    case input_dist::m_constant_v:
    case input_dist::m_flat:
    case input_dist::m_sink: return z;
  }
  return z;
}

bool softmax_masked(const softmax_case& c, std::int64_t row, std::int64_t i) {
  switch (c.mask) {
    case softmax_mask::m_none: return false;
    case softmax_mask::m_padding: return i >= c.vocab - c.masked_count();
    case softmax_mask::m_banned:
      return counter_hash(c.seed, k_stream_banned, element(row, i)) % 64 == 0;
    case softmax_mask::m_prefix: return i < c.masked_count();
    case softmax_mask::m_all: return true;
  }
  return false;
}

std::int64_t softmax_target(const softmax_case& c, std::int64_t row) {
  if (c.mask == softmax_mask::m_all) return -1;
  const auto start = static_cast<std::int64_t>(
      counter_hash(c.seed, k_stream_target, static_cast<std::uint64_t>(row)) %
      static_cast<std::uint64_t>(c.vocab));
  for (std::int64_t k = 0; k < c.vocab; ++k) {
    const std::int64_t i = (start + k) % c.vocab;
    if (!softmax_masked(c, row, i)) return i;
  }
  return -1;
}

std::vector<double> softmax_logits(const softmax_case& c, std::span<const std::int64_t> rows,
                                   bool rounded) {
  const std::int64_t v = c.vocab;
  std::vector<double> out(rows.size() * static_cast<std::size_t>(v));
  const auto n = static_cast<std::int64_t>(rows.size());
  for (std::int64_t r = 0; r < n; ++r)
    if (rows[static_cast<std::size_t>(r)] < 0 || rows[static_cast<std::size_t>(r)] >= c.rows)
      throw_input_error("rows", fmt::format("row {} outside [0, {})", rows[static_cast<std::size_t>(r)], c.rows));
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t row = rows[static_cast<std::size_t>(r)];
    double* dst = out.data() + r * v;
    for (std::int64_t i = 0; i < v; ++i) {
      if (softmax_masked(c, row, i)) {
        dst[i] = -std::numeric_limits<double>::infinity();
        continue;
      }
      const double x = softmax_logit(c, row, i);
      dst[i] = rounded ? formats::round_to(c.dtype, x) : x;
    }
  }
  return out;
}

softmax_output make_poisoned_softmax(std::vector<std::int64_t> rows, std::int64_t vocab) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  softmax_output o;
  o.vocab = vocab;
  o.p.assign(rows.size() * static_cast<std::size_t>(vocab), nan);
  o.logp.assign(o.p.size(), nan);
  o.lse.assign(rows.size(), nan);
  o.ce.assign(rows.size(), nan);
  o.rows = std::move(rows);
  return o;
}

}  // namespace numprobe
