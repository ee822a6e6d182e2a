// GGUF as a release (numprobe/io/release.hpp, issue 29): every tensor of a llama.cpp file is a
// release tensor in its ggml type, decoded to exact values by numprobe/io/gguf.hpp. The names of
// the llama family are mapped to Hugging Face's (the mapping of gguf-py's tensor_mapping.py,
// which llama.cpp's converter applies), and the Q/K rows of architecture llama carry the rotary
// permutation the converter applied (docs/checkpoints.md, "GGUF").
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <cstring>
#include <string>
#include <string_view>

#include "numprobe/base/error.hpp"
#include "numprobe/io/gguf.hpp"
#include "numprobe/io/release.hpp"
#include "src/io/release_layouts.hpp"

namespace numprobe::io {
namespace {

struct name_rule {
  std::string_view gguf, hf;
};

// Whole-model tensors and the tensors of decoder block N (blk.N.<gguf> -> model.layers.N.<hf>).
constexpr std::array<name_rule, 3> k_model_names{{
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
}};
constexpr std::array<name_rule, 9> k_block_names{{
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
}};

// The Hugging Face name of a llama-family GGUF tensor; "" when no rule names it.
std::string hf_name(std::string_view n) {
  const auto dot = n.rfind('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view suffix = n.substr(dot), stem = n.substr(0, dot);
  if (suffix != ".weight" && suffix != ".bias") return {};
  for (const auto& r : k_model_names)
    if (stem == r.gguf) return std::string(r.hf) + std::string(suffix);
  if (!stem.starts_with("blk.")) return {};
  const std::string_view rest = stem.substr(4);
  std::size_t layer = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
  if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '.') return {};
  const std::string_view part = rest.substr(static_cast<std::size_t>(end - rest.data()) + 1);
  for (const auto& r : k_block_names)
    if (part == r.gguf)
      return "model.layers." + std::to_string(layer) + "." + std::string(r.hf) + std::string(suffix);
  return {};
}

// The byte offset of a block's f16 scale d (ggml-common.h's block structs), or -1 when the type
// has no such scale.
int f16_scale_offset(ggml_type t) {
  switch (t) {
    case ggml_type::m_q4_0:
    case ggml_type::m_q4_1:
    case ggml_type::m_q5_0:
    case ggml_type::m_q5_1:
    case ggml_type::m_q8_0:
    case ggml_type::m_iq4_nl:
    case ggml_type::m_iq4_xs:
    case ggml_type::m_q4_k:
    case ggml_type::m_q5_k:
      return 0;
    case ggml_type::m_q2_k:
      return 80;  // scales[16], qs[64], d, dmin
    case ggml_type::m_q3_k:
      return 108;  // hmask[32], qs[64], scales[12], d
    case ggml_type::m_q6_k:
      return 208;  // ql[128], qh[64], scales[16], d
    default:
      return -1;
  }
}

double half_to_double(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, -24);
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(1024 + m, e - 25);
}

std::uint64_t head_count(const gguf_file& f, const std::string& arch, const char* key) {
  const auto* v = f.find_key(arch + key);
  const auto n = v ? v->as_u64() : std::nullopt;
  return n ? *n : 0;
}

}  // namespace

std::int64_t original_row(const release_tensor& t, std::int64_t r) {
  if (t.rope_heads <= 0) return r;
  const std::int64_t d = t.rows / t.rope_heads;  // rows per head, even (checked at open)
  const std::int64_t h = r / d, j = r % d;
  return h * d + (j % 2) * (d / 2) + j / 2;
}

release release::open_gguf(const std::filesystem::path& file) {
  release r(checkpoint{});
  r.m_gguf = std::make_shared<const gguf_file>(gguf_file::open(file));
  const gguf_file& g = *r.m_gguf;
  r.m_layout = release_layout::m_gguf;
  const auto* arch_v = g.find_key("general.architecture");
  const std::string arch = arch_v && arch_v->as_string() ? *arch_v->as_string() : std::string();
  r.m_detected_by = "GGUF magic (version " + std::to_string(g.version()) +
                    (arch.empty() ? std::string(")") : ", architecture " + one_line(arch) + ")");
  // llama.cpp's converter permutes Q and K rows of architecture llama (LlamaModel.permute in
  // convert_hf_to_gguf.py): K over the KV heads, Q over the query heads.
  const std::uint64_t heads = arch == "llama" ? head_count(g, arch, ".attention.head_count") : 0;
  std::uint64_t kv_heads = arch == "llama" ? head_count(g, arch, ".attention.head_count_kv") : 0;
  if (kv_heads == 0) kv_heads = heads;
  for (const auto& gt : g.tensors()) {
    release_tensor t;
    t.name = gt.name;
    t.layout = release_layout::m_gguf;
    t.rows = gt.rows();
    t.cols = gt.cols();
    t.shape = gt.shape();
    t.stored_as = std::string(info(gt.type).name);
    t.original_name = hf_name(gt.name);
    nlohmann::json rules = nlohmann::json::array();
    if (gt.ne.size() == 2 && (t.original_name.ends_with("self_attn.q_proj.weight") ||
                              t.original_name.ends_with("self_attn.k_proj.weight"))) {
      const std::uint64_t h = t.original_name.ends_with("q_proj.weight") ? heads : kv_heads;
      if (h > 0) {
        const auto hh = static_cast<std::int64_t>(h);
        if (t.rows % hh != 0 || (t.rows / hh) % 2 != 0)
          throw_input_error(g.source() + ": " + one_line(gt.name),
                            "rows " + std::to_string(t.rows) + " are not " + std::to_string(h) +
                                " heads of an even row count (" + arch + ".attention.head_count*)");
        t.rope_heads = hh;
        t.row_align = t.rows / hh;
        rules.push_back("rows in llama.cpp's rotary order over " + std::to_string(h) +
                        " heads (undone against the original)");
      }
    }
    t.record = {{"type", t.stored_as},
                {"ne", gt.ne},
                {"offset", gt.offset},
                {"bytes", gt.bytes},
                {"rules", rules}};
    r.m_tensors.push_back(std::move(t));
  }
  if (r.m_tensors.empty()) throw_input_error(file.string(), "holds no tensors");
  return r;
}

namespace detail {

release_slab decode_gguf_rows(const gguf_file& f, const release_tensor& t, std::int64_t r0, std::int64_t r1) {
  const gguf_tensor* g = f.find(t.name);
  if (!g) throw_input_error(f.source(), "no tensor '" + one_line(t.name) + "'");
  release_slab s;
  s.r0 = r0;
  s.r1 = r1;
  s.cols = t.cols;
  const std::vector<float> v = f.decode_rows(*g, r0, r1);
  s.values.assign(v.begin(), v.end());
  const auto& ti = info(g->type);
  const int at = f16_scale_offset(g->type);
  const bool e8m0 = g->type == ggml_type::m_mxfp4;
  if (at < 0 && !e8m0) return s;
  const auto bytes = f.data(*g);
  const auto per_row = static_cast<std::size_t>(t.cols / ti.block_size);
  const auto size = static_cast<std::size_t>(ti.type_size);
  for (std::size_t b = static_cast<std::size_t>(r0) * per_row; b < static_cast<std::size_t>(r1) * per_row; ++b) {
    const std::byte* p = bytes.data() + b * size;
    if (e8m0) {
      const auto e = static_cast<unsigned>(p[0]);
      s.scale_codes.push_back(e);
      // ggml reads every byte as a power of two, 0xFF included (no NaN code, unlike OCP's e8m0).
      s.scales.push_back(std::ldexp(1.0, static_cast<int>(e) - 127));
    } else {
      std::uint16_t h = 0;
      std::memcpy(&h, p + at, sizeof h);
      s.scale_codes.push_back(h);
      s.scales.push_back(half_to_double(h));
    }
  }
  return s;
}

}  // namespace detail
}  // namespace numprobe::io
