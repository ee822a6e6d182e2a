#include "src/scenario/attention_params.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/core/memory_budget.hpp"

namespace numprobe::scenario {

std::vector<param_spec> attention_case_params() {
  using K = param_kind;
  return {{"backend", K::m_string, "ref|emu|cuda|hip|best (best: cuda, else hip, else emu)"},
          {"seq", K::m_text, "keys S (drift: A..B)"},
          {"queries", K::m_int, "query rows T (0: T = S)"},
          {"batch", K::m_int, "batch size"},
          {"heads", K::m_int, "query heads Hq"},
          {"kv_heads", K::m_int, "KV heads Hkv"},
          {"head_dim", K::m_int, "head dimension D"},
          {"scale", K::m_float, "softmax scale (0: 1/sqrt(D))"},
          {"dtype", K::m_string, "input dtype"},
          {"mask", K::m_string, "none|causal|causal-top-left|window"},
          {"window", K::m_int, "sliding window W"},
          {"softcap", K::m_float, "logit softcap"},
          {"dist", K::m_string, "input family"},
          {"shift", K::m_float, "logit shift for dist = shifted"},
          {"seed", K::m_int, "input seed"},
          {"tile", K::m_string, "kernel tile BqxBk (emu)"},
          {"state", K::m_strings, "state storage NAME=DTYPE"},
          {"inject", K::m_strings, "named faults"},
          {"rows", K::m_text, "all|N|auto"},
          {"case", K::m_string, "an exact case id"},
          {"no_e2e", K::m_bool, "skip the end-to-end reference"},
          {"device", K::m_int, "GPU ordinal"}};
}

std::int64_t positive(const std::string& text, const std::string& place) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0)
    throw_input_error(place, fmt::format("expected a positive integer, got '{}'", text));
  return v;
}

attention_case make_attention_case(const check_spec& s, std::int64_t seq) {
  if (s.has("case")) return parse_attention_case(s.get_string("case", ""));
  attention_case c;
  c.batch = s.get_int("batch", 1);
  c.queries = s.get_int("queries", 0);
  c.seq = seq;
  c.heads = s.get_int("heads", 8);
  c.kv_heads = s.get_int("kv_heads", 2);
  c.head_dim = s.get_int("head_dim", 128);
  c.scale = s.get_float("scale", 0.0);
  c.dtype = formats::parse_format(s.get_string("dtype", "bf16"), s.place("dtype"));
  c.mask = parse_mask(s.get_string("mask", "causal"), s.place("mask"));
  c.window = s.get_int("window", 0);
  c.softcap = s.get_float("softcap", 0.0);
  c.dist = parse_dist(s.get_string("dist", "normal"), s.place("dist"));
  c.logit_shift = s.get_float("shift", -2.0e4);
  if (s.get_int("seed", 7) < 0) throw_input_error(s.place("seed"), fmt::format("must be >= 0, got {}", s.get_int("seed", 7)));
  c.seed = static_cast<std::uint64_t>(s.get_int("seed", 7));
  if (c.mask == mask_kind::m_ranges) throw_input_error(s.place("mask"), "mask = ranges is library-only");
  if (c.mask != mask_kind::m_window && c.window != 0)
    throw_input_error(s.place("window"), "window needs mask = \"window\"");
  try {
    c.validate();
  } catch (const error& e) {
    throw_input_error(fmt::format("{}:{}: check '{}'", s.file, s.line, s.name), e.what());
  }
  // Sized before anything is allocated (numprobe/core/memory_budget.hpp): rows as the CLI's
  // estimate takes them (all, N, or at most 1024 automatic ones).
  const auto rows_text = s.get_string("rows", "auto");
  std::int64_t rows = rows_text == "all" ? c.rows() : std::min<std::int64_t>(c.rows(), 1024);
  check_attention_memory(c, rows, true, s.has("seq") ? s.place("seq") : fmt::format("{}:{}: check '{}'", s.file, s.line, s.name));
  return c;
}

provider_options check_provider_options(const check_spec& s, const run_context& ctx) {
  provider_options o;
  o.backend = ctx.backend_override.empty() ? s.get_string("backend", "best") : ctx.backend_override;
  o.device = ctx.device_override >= 0 ? ctx.device_override : static_cast<int>(s.get_int("device", 0));
  if (s.has("tile")) {
    const auto t = s.get_string("tile", "");
    const auto x = t.find('x');
    if (x == std::string::npos) throw_input_error(s.place("tile"), fmt::format("'{}' is not BqxBk", t));
    o.tile = tile_shape{positive(t.substr(0, x), s.place("tile")), positive(t.substr(x + 1), s.place("tile"))};
  }
  for (const auto& st : s.get_strings("state")) {
    const auto eq = st.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == st.size())
      throw_input_error(s.place("state"), fmt::format("'{}' is not NAME=DTYPE", st));
    o.states[st.substr(0, eq)] = st.substr(eq + 1);
  }
  o.faults = s.get_strings("inject");
  if (o.backend != "best") return o;
  // Best available: a GPU backend when one is compiled in and has a device, else the emulator.
  for (const char* gpu : {"cuda", "hip"}) {
    bool listed = false;
    for (const auto& b : attention_backends()) listed |= b.name == gpu;
    if (!listed) continue;
    try {
      o.backend = gpu;
      (void)make_attention_provider(o);
      return o;
    } catch (const error&) {
      // no device or not usable: fall through to the next backend
    }
  }
  o.backend = "emu";
  return o;
}

std::unique_ptr<attention_provider> make_check_provider(const check_spec& s, const run_context& ctx) {
  return make_attention_provider(check_provider_options(s, ctx));
}

row_sampling make_check_sampling(const check_spec& s, std::int64_t auto_rows) {
  row_sampling r;
  r.seed = static_cast<std::uint64_t>(s.get_int("seed", 7));
  const auto rows = s.get_string("rows", "auto");
  if (rows == "all") r.max_rows = 0;
  else if (rows == "auto") r.max_rows = auto_rows;
  else r.max_rows = positive(rows, s.place("rows"));
  return r;
}

}  // namespace numprobe::scenario
