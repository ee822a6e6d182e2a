#include "numprobe/core/attention_case.hpp"

#include <algorithm>
#include <vector>

#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <utility>

#include "numprobe/base/error.hpp"
#include "numprobe/core/id_fields.hpp"

namespace numprobe {
namespace {

constexpr std::array<std::pair<mask_kind, std::string_view>, 5> k_masks{{
    {mask_kind::m_none, "none"},
    {mask_kind::m_causal, "causal"},
    {mask_kind::m_causal_top_left, "causal-top-left"},
    {mask_kind::m_window, "window"},
    {mask_kind::m_ranges, "ranges"},
}};

constexpr std::array<std::pair<input_dist, std::string_view>, 10> k_dists{{
    {input_dist::m_normal, "normal"},
    {input_dist::m_uniform, "uniform"},
    {input_dist::m_llm, "llm"},
    {input_dist::m_rescale_stress, "rescale-stress"},
    {input_dist::m_max_first, "max-first"},
    {input_dist::m_diffuse, "diffuse"},
    {input_dist::m_shifted, "shifted"},
    {input_dist::m_constant_v, "constant-v"},
    {input_dist::m_flat, "flat"},
    {input_dist::m_sink, "sink"},
}};

}  // namespace

std::string_view to_string(mask_kind m) { return k_masks[static_cast<std::size_t>(m)].second; }
mask_kind parse_mask(std::string_view text, const std::string& place) {
  return parse_named(k_masks, text, place, "mask");
}
std::string_view to_string(input_dist d) { return k_dists[static_cast<std::size_t>(d)].second; }
input_dist parse_dist(std::string_view text, const std::string& place) {
  return parse_named(k_dists, text, place, "input distribution");
}

double attention_case::softmax_scale() const {
  return scale != 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

void attention_case::validate() const {
  auto positive = [](std::int64_t v, const char* flag) {
    if (v <= 0) throw_input_error(flag, fmt::format("must be positive, got {}", v));
  };
  positive(batch, "--batch");
  positive(seq, "--seq");
  // Q, K and V are signed values that can be zero: a scale-only format (e8m0: no sign, no zero)
  // would round every input to a power of two > 0 and give a NaN-free but meaningless case.
  if (const auto& fi = formats::info(dtype); !fi.is_signed || (fi.min_subnormal == 0.0 && fi.is_float && fi.mantissa_bits == 0))
    throw_input_error("--dtype", fmt::format("{} cannot hold attention inputs (it has no sign{}); "
                                             "use a signed element format such as bf16 or e4m3fn",
                                             fi.name, fi.is_signed ? "" : " and no zero"));
  if (queries < 0) throw_input_error("--queries", "must be >= 0 (0 means T = S)");
  positive(heads, "--heads");
  positive(kv_heads, "--kv-heads");
  positive(head_dim, "--head-dim");
  if (heads % kv_heads != 0)
    throw_input_error("--kv-heads", fmt::format("--heads {} is not a multiple of --kv-heads {}",
                                                heads, kv_heads));
  if (head_dim > 1024) throw_input_error("--head-dim", "at most 1024");
  if (!std::isfinite(scale) || scale < 0) throw_input_error("--scale", "must be finite and >= 0");
  if (!std::isfinite(softcap) || softcap < 0)
    throw_input_error("--softcap", "must be finite and >= 0");
  if (mask == mask_kind::m_window && window <= 0)
    throw_input_error("--window", "mask=window needs --window W > 0");
  if (mask == mask_kind::m_ranges && static_cast<std::int64_t>(ranges.size()) != t())
    throw_input_error("--ranges", fmt::format("mask=ranges needs one range per query row ({}), got {}",
                                              t(), ranges.size()));
  for (const auto& r : ranges)
    if (r.begin < 0 || r.end > seq || r.begin > r.end)
      throw_input_error("--ranges", fmt::format("range [{}, {}) outside [0, {})", r.begin, r.end, seq));
  if (!seq_lens.empty()) {
    if (static_cast<std::int64_t>(seq_lens.size()) != batch)
      throw_input_error("seq_lens", fmt::format("a ragged batch needs one length per member ({}), got {}", batch,
                                                seq_lens.size()));
    for (const std::int64_t n : seq_lens)
      if (n < 1 || n > seq) throw_input_error("seq_lens", fmt::format("length {} outside [1, S = {}]", n, seq));
    if (mask != mask_kind::m_none && mask != mask_kind::m_causal && mask != mask_kind::m_window)
      throw_input_error("seq_lens", fmt::format("a ragged batch takes mask none, causal or window, not {}",
                                                to_string(mask)));
  }
  // Sizes must stay addressable: rows * heads * D and S * Hkv * D elements.
  const double elems = double(batch) * double(std::max(t(), seq)) * double(heads) * double(head_dim);
  if (elems > 4.0e10) throw_input_error("--seq", "case too large (more than 4e10 elements)");
}

std::string attention_case::id() const {
  std::string s = fmt::format("attention(");
  if (batch != 1) s += fmt::format("B={},", batch);
  s += fmt::format("T={},S={},Hq={},Hkv={},D={},in={},mask={}", t(), seq, heads, kv_heads, head_dim,
                   formats::name(dtype), to_string(mask));
  if (mask == mask_kind::m_window) s += fmt::format(",W={}", window);
  if (scale != 0.0) s += fmt::format(",scale={}", scale);
  if (softcap != 0.0) s += fmt::format(",softcap={}", softcap);
  if (dist != input_dist::m_normal) s += fmt::format(",dist={}", to_string(dist));
  if (dist == input_dist::m_shifted) s += fmt::format(",shift={}", logit_shift);
  if (!seq_lens.empty()) s += fmt::format(",lens={}", fmt::join(seq_lens, "/"));
  s += fmt::format(",seed={})", seed);
  return s;
}

attention_case parse_attention_case(std::string_view id) {
  constexpr std::string_view head = "attention(";
  if (id.substr(0, head.size()) != head || id.empty() || id.back() != ')')
    throw_input_error("--case", fmt::format("'{}' is not an attention case id", id));
  std::string_view body = id.substr(head.size(), id.size() - head.size() - 1);
  attention_case c;
  bool have_t = false;
  std::vector<std::string> seen;  // a repeated field would silently take the last value
  while (!body.empty()) {
    const auto comma = body.find(',');
    const std::string_view field = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    const auto eq = field.find('=');
    if (eq == std::string_view::npos)
      throw_input_error("--case", fmt::format("field '{}' has no '='", field));
    const std::string key(field.substr(0, eq));
    const std::string_view val = field.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw_input_error("--case", fmt::format("field '{}' is given twice", key));
    seen.push_back(key);
    if (key == "B") c.batch = parse_id_int(val, key);
    else if (key == "T") { c.queries = parse_id_int(val, key); have_t = true; }
    else if (key == "S") c.seq = parse_id_int(val, key);
    else if (key == "Hq") c.heads = parse_id_int(val, key);
    else if (key == "Hkv") c.kv_heads = parse_id_int(val, key);
    else if (key == "D") c.head_dim = parse_id_int(val, key);
    else if (key == "in") c.dtype = formats::parse_format(val, "case id field in");
    else if (key == "mask") c.mask = parse_mask(val, "case id field mask");
    else if (key == "W") c.window = parse_id_int(val, key);
    else if (key == "scale") c.scale = parse_id_double(val, key);
    else if (key == "softcap") c.softcap = parse_id_double(val, key);
    else if (key == "dist") c.dist = parse_dist(val, "case id field dist");
    else if (key == "shift") c.logit_shift = parse_id_double(val, key);
    else if (key == "lens") {
      for (std::string_view rest = val; !rest.empty();) {
        const auto slash = rest.find('/');
        c.seq_lens.push_back(parse_id_int(rest.substr(0, slash), key));
        if (slash == std::string_view::npos) break;
        rest = rest.substr(slash + 1);
        if (rest.empty()) throw_input_error("case id field lens", "ends with '/'");
      }
    }
    else if (key == "seed") {
      const auto v = parse_id_int(val, key);
      if (v < 0) throw_input_error("case id field seed", fmt::format("must be >= 0, got {}", v));
      c.seed = static_cast<std::uint64_t>(v);
    }
    else throw_input_error("--case", fmt::format("unknown field '{}'", key));
  }
  if (!have_t) c.queries = 0;
  if (c.mask == mask_kind::m_ranges)
    throw_input_error("--case", "mask=ranges cases carry their ranges outside the id");
  c.validate();
  return c;
}

key_range case_key_range(const attention_case& c, std::int64_t t) { return case_key_range(c, 0, t); }

key_range case_key_range(const attention_case& c, std::int64_t member, std::int64_t t) {
  const std::int64_t s = c.keys_of(member);
  const std::int64_t pos = s - c.t() + t;  // bottom-right absolute position
  auto clamp_range = [s](std::int64_t b, std::int64_t e) {
    b = std::max<std::int64_t>(b, 0);
    e = std::min<std::int64_t>(e, s);
    return key_range{b, std::max(b, e)};
  };
  switch (c.mask) {
    case mask_kind::m_none: return {0, s};
    case mask_kind::m_causal: return clamp_range(0, pos + 1);
    case mask_kind::m_causal_top_left: return clamp_range(0, t + 1);
    case mask_kind::m_window: return clamp_range(pos - c.window + 1, pos + 1);
    case mask_kind::m_ranges: return clamp_range(c.ranges[t].begin, c.ranges[t].end);
  }
  return {0, s};
}

}  // namespace numprobe
