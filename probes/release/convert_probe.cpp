// `numprobe convert`: convert_probe.hpp.
//
// Streaming: every output tensor is declared before a shard's bytes are written, and a shard's
// bytes come in safetensors_stream::order() (widest dtype first, then by name). Wide tensors (F32
// scales, BF16) are produced in a first pass per tensor where they come first; 8-bit tensors come
// by name, so a weight's codes ("P.weight", "P.weight_packed") precede its 8-bit scales
// ("P.weight_scale"): the codes are streamed slab by slab and the 8-bit scales (1/16 of the codes
// or less) are kept until their turn. Memory is O(slab) plus those scales.
#include "probes/release/convert_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <map>
#include <memory>
#include <regex>
#include <span>
#include <variant>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result_gates.hpp"
#include "probes/names/name_filter.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/checkpoint.hpp"
#include "numprobe/io/gguf.hpp"
#include "numprobe/io/regular_file.hpp"
#include "numprobe/io/safetensors.hpp"
#include "probes/release/convert_write.hpp"
#include "probes/release/convert_output.hpp"
#include "probes/release/release_probe.hpp"
#include "src/formats/rne_block_quantizer.hpp"
#include "src/io/atomic_write.hpp"

namespace numprobe::probes {
namespace {

namespace fs = std::filesystem;
namespace nf = numprobe::formats;

// 2 MiB of doubles per array: a 1 GiB tensor written in under 100 MiB of RSS (issue 18) keeps its
// 8-bit scales (64 MiB for ct-mxfp4) until their turn, so the slab arrays must stay small.
constexpr std::int64_t k_slab_elements = std::int64_t{1} << 18;

struct err_sums {
  double sig = 0.0, err = 0.0, max_abs = 0.0;
  std::int64_t flushed = 0, nonfinite = 0;
  void add(const std::vector<double>& ref, const double* v) {
    for (std::size_t i = 0; i < ref.size(); ++i) {
      // A NaN or Inf on either side (the release's own value, or what it became) has no error to
      // measure: counted, and the result is NaN, which no bound holds (never the inf SQNR of a
      // NaN that vanished from the sums).
      if (!std::isfinite(ref[i]) || !std::isfinite(v[i])) {
        ++nonfinite;
        continue;
      }
      const double d = v[i] - ref[i];
      sig += ref[i] * ref[i];
      err += d * d;
      max_abs = std::max(max_abs, std::fabs(d));
      flushed += (ref[i] != 0.0 && v[i] == 0.0) ? 1 : 0;
    }
  }
  [[nodiscard]] convert_error result() const {
    convert_error e;
    if (nonfinite > 0) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      e.sqnr_db = e.rel_rms = e.max_abs = nan;
      e.flushed = flushed;
      return e;
    }
    e.sqnr_db = err > 0 ? 10.0 * std::log10(sig / err) : std::numeric_limits<double>::infinity();
    // Against an all-zero reference any error is infinitely large relative to it (as the scan).
    e.rel_rms = sig > 0 ? std::sqrt(err / sig) : err > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    e.max_abs = max_abs;
    e.flushed = flushed;
    return e;
  }
};


std::int64_t step_rows(const io::release_tensor& t, const nf::scheme_config& c) {
  const auto g = nf::grid_of(c, t.rows, t.cols);
  std::int64_t unit = std::max<std::int64_t>(1, t.row_align);
  if (c.kind == nf::scheme_kind::m_block2d) unit = std::lcm(unit, std::max<std::int64_t>(1, g.block_rows));
  const std::int64_t want = std::max<std::int64_t>(1, k_slab_elements / std::max<std::int64_t>(1, t.cols));
  return std::max(unit, want / unit * unit);
}

// A slab of GGUF Q/K rows (whole heads) from llama.cpp's rotary order into the original's.
void to_original_order(const io::release_tensor& t, std::int64_t r0, std::vector<double>& v) {
  if (t.rope_heads <= 0 || t.cols <= 0) return;
  const auto cols = static_cast<std::size_t>(t.cols);
  const auto rows = static_cast<std::int64_t>(v.size() / cols);
  std::vector<double> out(v.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t dst = io::original_row(t, r0 + r) - r0;
    if (dst < 0 || dst >= rows) throw_backend_error(t.name, "internal: a slab that is not whole heads");
    std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * cols), cols,
                out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(dst) * cols));
  }
  v = std::move(out);
}

bool tensor_scaled(const nf::scheme_config& c) {
  return c.kind == nf::scheme_kind::m_nvfp4 || c.kind == nf::scheme_kind::m_tensor;
}

// One converted slab: what formats::quantize() stores for it (codes one byte per element: every
// target layout's element is at most 8 bits; the sentinel row's blocks dropped).
struct slab_codes {
  std::vector<std::uint8_t> codes;
  std::vector<double> dequant;
  std::vector<nf::block_stats> blocks;
};

// One converted weight being written: its slabs quantized in order, with what each output part
// needs kept. Schemes the RNE block quantizer covers (src/formats/rne_block_quantizer.hpp) are
// coded by it: the same codes, scales and dequantized values as quantize() (checked bit for bit
// by tests/formats/test_rne_block_codes.cpp), without quantize()'s per-element reference codec.
// Others take quantize() itself.
class converter {
 public:
  // `amax`: the tensor's finite amax when a pass already took it (--write's check_release).
  converter(const io::release& rel, const io::release_tensor& t, const nf::scheme_config& c,
            const io::tensor_view* orig, std::optional<double> amax = std::nullopt)
      : m_rel(rel), m_t(t), m_c(c), m_orig(orig), m_step(step_rows(t, c)) {
    if (tensor_scaled(c)) {
      if (amax) {
        m_amax = *amax;
      } else {
        for (std::int64_t r0 = 0; r0 < t.rows; r0 += m_step) {
          throw_if_convert_interrupted();
          const auto s = rel.decode_rows(t, r0, std::min(t.rows, r0 + m_step));
          for (const double v : s.values)
            if (std::isfinite(v)) m_amax = std::max(m_amax, std::fabs(v));
        }
        rel.release_pages(t);
      }
      // The tensor scale quantize() derives from this amax (a row holding it alone).
      std::vector<double> row(static_cast<std::size_t>(t.cols), 0.0);
      row[0] = m_amax;
      m_tensor_scale = nf::quantize(c, row, 1, t.cols).tensor_scale;
    }
    if (nf::detail::rne_block_quantizer::covers(c)) {
      m_fast.emplace(c);
      // quantize() on the whole tensor derives s_t (or the `tensor` kind's scale) from its amax.
      if (tensor_scaled(c)) m_fast->set_tensor_amax(m_amax);
    }
  }

  // Quantizes rows [r0, r1) into `q`, their decoded release values into `values`.
  void slab(std::int64_t r0, std::int64_t r1, std::vector<double>& values, slab_codes& q) {
    auto s = m_rel.decode_rows(m_t, r0, r1);
    values = std::move(s.values);
    to_original_order(m_t, r0, values);  // GGUF Q/K: quantized and written in the original's order
    const std::size_t n = values.size();
    const auto g = nf::grid_of(m_c, r1 - r0, m_t.cols);
    if (m_fast) {
      q.codes.resize(n);
      q.dequant.resize(n);
      q.blocks.resize(static_cast<std::size_t>(g.count()));
      const auto gc = static_cast<std::size_t>(g.grid_cols);
      for (std::int64_t br = 0; br < g.grid_rows; ++br) {
        const std::int64_t b0 = br * g.block_rows;
        m_fast->code_strip(values.data(), nf::detail::element_storage::m_f64, m_t.cols, b0,
                           std::min(g.block_rows, (r1 - r0) - b0), g.block_cols,
                           std::span(q.blocks).subspan(static_cast<std::size_t>(br) * gc, gc), q.codes.data(),
                           q.dequant.data());
      }
      return;
    }
    // quantize() over the slab; a tensor-scaled scheme sees the tensor's amax in a sentinel row.
    const bool sentinel = tensor_scaled(m_c) && !(r0 == 0 && r1 == m_t.rows);
    std::vector<double> buf = values;
    if (sentinel) {
      buf.resize(n + static_cast<std::size_t>(m_t.cols), 0.0);
      buf[n] = m_amax;
    }
    auto full = nf::quantize(m_c, buf, (r1 - r0) + (sentinel ? 1 : 0), m_t.cols);
    q.codes.resize(n);
    for (std::size_t i = 0; i < n; ++i) q.codes[i] = static_cast<std::uint8_t>(full.codes[i] & 0xFF);
    full.dequant.resize(n);
    q.dequant = std::move(full.dequant);
    full.blocks.resize(static_cast<std::size_t>(g.count()));
    q.blocks = std::move(full.blocks);
  }

  // Pass over every slab: errors, and the bytes of each output part via `emit`.
  template <class Emit>
  void run(Emit&& emit, convert_tensor_report& rep) {
    err_sums added, rel_orig, conv_orig;
    std::int64_t release_nonfinite = 0;
    std::vector<double> values, x;
    slab_codes q;
    for (std::int64_t r0 = 0; r0 < m_t.rows; r0 += m_step) {
      throw_if_convert_interrupted();
      const std::int64_t r1 = std::min(m_t.rows, r0 + m_step);
      slab(r0, r1, values, q);
      for (const double v : values) release_nonfinite += std::isfinite(v) ? 0 : 1;
      added.add(values, q.dequant.data());
      if (m_orig) {
        x.resize(values.size());
        m_orig->decode(static_cast<std::uint64_t>(r0 * m_t.cols), x);
        for (std::size_t i = 0; i < x.size(); ++i)
          if (!std::isfinite(x[i]))
            throw_input_error(m_orig->place(), fmt::format("{} at element {}: the original must be finite",
                                                           std::isnan(x[i]) ? "NaN" : "Inf",
                                                           static_cast<std::int64_t>(i) + r0 * m_t.cols));
        rel_orig.add(x, values.data());
        conv_orig.add(x, q.dequant.data());
      }
      emit(q);
    }
    // Each pass holds one weight's mapped pages, not the whole release's (and original's).
    m_rel.release_pages(m_t);
    if (m_orig && m_orig->owner)
      m_orig->owner->release_pages(static_cast<std::size_t>(m_orig->bytes.data() - m_orig->owner->bytes().data()),
                                   m_orig->bytes.size());
    rep.added = added.result();
    rep.nonfinite = release_nonfinite;
    if (m_orig) {
      rep.release_vs_original = rel_orig.result();
      rep.converted_vs_original = conv_orig.result();
    }
  }

  [[nodiscard]] double tensor_scale() const { return m_tensor_scale; }

 private:
  const io::release& m_rel;
  const io::release_tensor& m_t;
  nf::scheme_config m_c;
  const io::tensor_view* m_orig;
  std::int64_t m_step;
  double m_amax = 0.0, m_tensor_scale = 1.0;
  std::optional<nf::detail::rne_block_quantizer> m_fast;
};

void append_codes(const slab_codes& q, bool nibbles, std::vector<std::byte>& out) {
  if (!nibbles) {
    for (const auto c : q.codes) out.push_back(static_cast<std::byte>(c & 0xFF));
    return;
  }
  for (std::size_t i = 0; i + 1 < q.codes.size(); i += 2)
    out.push_back(static_cast<std::byte>((q.codes[i] & 0xF) | ((q.codes[i + 1] & 0xF) << 4)));
}

std::uint16_t bf16_bits(double v) {
  return static_cast<std::uint16_t>(nf::encode(nf::format_id::m_bf16, v, nf::rounding::m_nearest_even,
                                               nf::overflow::m_format_default));
}

template <class T>
void append_pod(const T& v, std::vector<std::byte>& out) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

// Rows per slab of a tensor written as values: whole row_align groups (GGUF heads).
std::int64_t value_step(const io::release_tensor& t) {
  const std::int64_t a = std::max<std::int64_t>(1, t.row_align);
  const std::int64_t want = std::max<std::int64_t>(1, k_slab_elements / std::max<std::int64_t>(1, t.cols));
  return std::max(a, want / a * a);
}

// Writes release tensor t's decoded values as F32 (in the original's row order when `original`),
// and reports them: NaN/Inf, values float32 does not hold exactly, the rounding's error.
template <class Put>
void put_values(const io::release& rel, const io::release_tensor& t, bool original, Put&& put,
                convert_tensor_report& rep) {
  err_sums e;
  std::vector<std::byte> buf;
  std::vector<double> f;
  const std::int64_t step = value_step(t);
  for (std::int64_t r0 = 0; r0 < t.rows; r0 += step) {
    throw_if_convert_interrupted();
    auto s = rel.decode_rows(t, r0, std::min(t.rows, r0 + step));
    if (original) to_original_order(t, r0, s.values);
    buf.clear();
    f.resize(s.values.size());
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      const double v = s.values[i];
      const auto x = static_cast<float>(v);
      rep.nonfinite += std::isfinite(v) ? 0 : 1;
      rep.f32_inexact += std::isfinite(v) && static_cast<double>(x) != v ? 1 : 0;
      f[i] = x;
      append_pod(x, buf);
    }
    e.add(s.values, f.data());
    put(std::span<const std::byte>(buf));
  }
  rel.release_pages(t);
  rep.added = e.result();
  rep.as_values = true;
}

// A GGUF tensor that convert quantizes: a decoder block's 2-D weight (blk.N.*.weight: the
// attention and MLP linears); the embedding, lm_head and norms are written as values, as
// ModelOpt and compressed-tensors releases keep them unquantized.
bool gguf_quantizes(const io::release_tensor& t) {
  return t.name.starts_with("blk.") && t.name.ends_with(".weight") && t.shape.size() == 2;
}

// The output name of t: a GGUF converted to a safetensors layout takes Hugging Face's names.
std::string out_name(const io::release& rel, const io::release_tensor& t, bool dequant) {
  return rel.gguf() && !dequant ? io::original_name_of(t) : t.name;
}

// config.json for a GGUF release, from its metadata (the keys llama.cpp's converter writes from
// a Hugging Face config: {arch}.embedding_length is hidden_size, and so on).
nlohmann::json gguf_config(const io::release& rel) {
  const io::gguf_file& g = *rel.gguf();
  nlohmann::json c = nlohmann::json::object();
  const auto* a = g.find_key("general.architecture");
  const std::string arch = a && a->as_string() ? *a->as_string() : std::string();
  if (arch.empty()) return c;
  c["model_type"] = arch;
  if (arch == "llama") c["architectures"] = {"LlamaForCausalLM"};
  else if (arch == "qwen2") c["architectures"] = {"Qwen2ForCausalLM"};
  const std::pair<const char*, const char*> ints[] = {
      {".embedding_length", "hidden_size"},           {".feed_forward_length", "intermediate_size"},
      {".block_count", "num_hidden_layers"},          {".attention.head_count", "num_attention_heads"},
      {".attention.head_count_kv", "num_key_value_heads"}, {".context_length", "max_position_embeddings"},
      {".vocab_size", "vocab_size"}};
  for (const auto& [key, hf] : ints)
    if (const auto* v = g.find_key(arch + key); v && v->as_u64()) c[hf] = *v->as_u64();
  const std::pair<const char*, const char*> reals[] = {{".attention.layer_norm_rms_epsilon", "rms_norm_eps"},
                                                       {".rope.freq_base", "rope_theta"}};
  for (const auto& [key, hf] : reals)
    if (const auto* v = g.find_key(arch + key))
      if (const auto* d = std::get_if<double>(&v->scalar)) c[hf] = *d;
  if (!c.contains("vocab_size"))
    if (const auto* e = g.find("token_embd.weight"); e && e->ne.size() == 2) c["vocab_size"] = e->ne[1];
  c["tie_word_embeddings"] = g.find("output.weight") == nullptr;
  c["torch_dtype"] = "float32";
  c["numprobe"] = {{"converted_from", "GGUF (" + std::string(rel.detected_by()) + ")"},
                   {"tokenizer", "not written: the GGUF holds it (transformers reads it with gguf_file=)"}};
  return c;
}

// What one shard holds: output tensors, each from a converted weight (index into the release's
// tensors), a tensor written as its values, or a passthrough tensor.
struct planned {
  out_tensor out;
  int weight = -1;             // index into the converted tensors, -1 for passthrough
  int values = -1;             // index into the tensors written as values
  std::string passthrough;     // the release tensor copied as stored
  bool pass_as_f32 = false;    // --to dequant: a floating passthrough tensor, decoded to F32
};

void check_out_dir(const fs::path& out, const std::string& release) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) throw_input_error("--write", "'" + out.string() + "' exists and is not a folder");
    if (!fs::is_empty(out, ec)) throw_input_error("--write", "'" + out.string() + "' is not empty (the input is never overwritten)");
  }
  const fs::path rel = fs::weakly_canonical(fs::path(release), ec);
  const fs::path rel_dir = fs::is_directory(rel, ec) ? rel : rel.parent_path();
  if (fs::weakly_canonical(out, ec) == rel_dir)
    throw_input_error("--write", "'" + out.string() + "' holds the release (the input is never overwritten)");
}

// Creates OUT (checked by check_out_dir); returns whether it was not there before.
bool create_out_dir(const fs::path& out) {
  std::error_code ec;
  const bool existed = fs::exists(fs::symlink_status(out, ec));
  fs::create_directories(out, ec);  // under a regular file, /proc, /sys: an input error
  if (ec || !fs::is_directory(out, ec))
    throw_input_error("--write", "cannot create '" + out.string() + "': " + (ec ? ec.message() : "not a folder"));
  return !existed;
}

// A model's config.json is kilobytes; the cap keeps a wrong file from filling memory.
constexpr std::size_t k_convert_config_max_bytes = 100'000'000;

// --write's check before anything is created: every tensor decoded (a malformed one is refused
// now, not after half the shards are written), NaN/Inf refused by the tensor's name, and each
// tensor's finite amax kept for the first pass of a tensor-scaled target.
std::vector<double> check_release(const io::release& rel, const std::vector<const io::release_tensor*>& todo,
                                  const nf::scheme_config& c) {
  std::vector<double> amax(todo.size(), 0.0);
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const auto& t = *todo[i];
    const std::int64_t step = step_rows(t, c);
    std::int64_t nonfinite = 0, first = -1;
    for (std::int64_t r0 = 0; r0 < t.rows; r0 += step) {
      throw_if_convert_interrupted();
      const auto s = rel.decode_rows(t, r0, std::min(t.rows, r0 + step));
      for (std::size_t j = 0; j < s.values.size(); ++j) {
        const double v = s.values[j];
        if (std::isfinite(v)) {
          amax[i] = std::max(amax[i], std::fabs(v));
        } else {
          if (first < 0) first = r0 * t.cols + static_cast<std::int64_t>(j);
          ++nonfinite;
        }
      }
    }
    rel.release_pages(t);
    if (nonfinite > 0)
      throw_input_error(t.name, fmt::format("{} decoded weights are NaN/Inf (the first at row {}, column {}); --write "
                                            "does not carry them into a converted checkpoint (convert without --write "
                                            "reports the tensors)",
                                            nonfinite, first / t.cols, first % t.cols));
  }
  return amax;
}

// check_release for the tensors written as values: each decodes, to finite values.
void check_values(const io::release& rel, const std::vector<const io::release_tensor*>& values) {
  for (const auto* t : values) {
    const std::int64_t step = value_step(*t);
    for (std::int64_t r0 = 0; r0 < t->rows; r0 += step) {
      throw_if_convert_interrupted();
      const auto s = rel.decode_rows(*t, r0, std::min(t->rows, r0 + step));
      const auto bad = std::find_if(s.values.begin(), s.values.end(), [](double v) { return !std::isfinite(v); });
      if (bad != s.values.end()) {
        const std::int64_t at = r0 * t->cols + (bad - s.values.begin());
        throw_input_error(t->name, fmt::format("decodes to NaN/Inf (the first at row {}, column {}); --write does not "
                                               "carry them (--to dequant --allow-nonfinite writes them as they are)",
                                               at / t->cols, at % t->cols));
      }
    }
    rel.release_pages(*t);
  }
}

fs::path config_beside(const std::string& release) {
  const fs::path p(release);
  return (fs::is_directory(p) ? p : p.parent_path()) / "config.json";
}

void write_text_atomic(const fs::path& target, const std::string& text) {
  io::detail::atomic_write(target, {std::as_bytes(std::span<const char>(text.data(), text.size()))});
}

// Every output tensor with its size, in name order, into shards of about shard_bytes (throws,
// exit 2, on a weight the layout cannot hold: before anything is written).
std::vector<std::vector<planned>> plan_shards(const convert_options& o, const io::release& rel,
                                              const std::vector<const io::release_tensor*>& todo,
                                              const std::vector<const io::release_tensor*>& values,
                                              const std::string& layout) {
  std::vector<planned> plan;
  for (std::size_t i = 0; i < todo.size(); ++i)
    for (auto& ot : layout_tensors(layout, out_name(rel, *todo[i], o.dequant), todo[i]->shape, o.target)) {
      planned p;
      p.out = std::move(ot);
      p.weight = static_cast<int>(i);
      plan.push_back(std::move(p));
    }
  for (std::size_t i = 0; i < values.size(); ++i) {
    planned p;
    p.out.name = out_name(rel, *values[i], o.dequant);
    p.out.dtype = io::dtype::m_f32;
    p.out.shape = values[i]->shape;
    p.out.part = out_part::m_codes;
    p.values = static_cast<int>(i);
    plan.push_back(std::move(p));
  }
  for (const auto& name : rel.passthrough()) {
    const auto v = rel.files().get(name);
    // Built member by member: GCC 12 takes the nested braces' temporary for uninitialized.
    planned pass;
    pass.out.name = name;
    pass.pass_as_f32 = o.dequant && io::info(v.dtype).format.has_value();
    pass.out.dtype = pass.pass_as_f32 ? io::dtype::m_f32 : v.dtype;
    pass.out.shape = v.shape;
    pass.out.part = out_part::m_codes;
    pass.passthrough = name;
    plan.push_back(std::move(pass));
  }
  std::stable_sort(plan.begin(), plan.end(), [](const planned& a, const planned& b) { return a.out.name < b.out.name; });
  std::vector<std::vector<planned>> shards(1);
  std::uint64_t in_shard = 0;
  for (auto& p : plan) {
    const std::uint64_t bytes =
        io::checked_byte_count(p.out.dtype, io::checked_element_count(p.out.shape, p.out.name), p.out.name);
    // A weight's parts stay in one shard (its later parts have the same weight index).
    const bool same_weight = !shards.back().empty() && p.weight >= 0 && shards.back().back().weight == p.weight;
    if (!shards.back().empty() && !same_weight && in_shard + bytes > o.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += bytes;
    shards.back().push_back(std::move(p));
  }
  return shards;
}

// Writes the converted checkpoint into OUT (created and empty): the shards, then the index and
// config.json, each file named to `partial` before it is created.
void write_converted(const convert_options& o, const io::release& rel, const std::vector<const io::release_tensor*>& todo,
                     const std::vector<const io::release_tensor*>& values,
                     const std::vector<std::optional<io::tensor_view>>& originals, const std::vector<double>& amax,
                     const std::vector<std::vector<planned>>& shards, convert_report& r, partial_output& partial) {
  const fs::path out(o.write);
  nlohmann::json weight_map = nlohmann::json::object();
  const std::size_t ns = shards.size();
  for (std::size_t k = 0; k < ns; ++k) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, ns);
    partial.add(file);
    std::vector<io::tensor_decl> decls;
    std::map<std::string, const planned*> by_name;
    for (const auto& p : shards[k]) {
      decls.push_back({p.out.name, p.out.dtype, p.out.shape});
      by_name[p.out.name] = &p;
      weight_map[p.out.name] = file;
    }
    io::safetensors_stream w(out / file, std::move(decls), {{"format", "pt"}, {"producer", "numprobe convert"}});
    // Per weight: its converter (one amax pass when the scheme has a tensor scale), and the
    // 8-bit scales its streamed pass produced, kept until their turn.
    struct weight_state {
      std::unique_ptr<converter> cv;
      std::vector<std::byte> scale_codes;
      bool coded = false;
    };
    std::map<int, weight_state> state;
    const bool nibbles = nf::info(o.target.element).storage_bits == 4;
    const auto put = [&](std::span<const std::byte> bytes) {
      w.write(bytes);
      r.bytes_written += bytes.size();
    };
    for (const auto& d : w.order()) {
      const planned& p = *by_name.at(d.name);
      if (p.values >= 0) {
        put_values(rel, *values[static_cast<std::size_t>(p.values)], !o.dequant, put,
                   r.tensors[todo.size() + static_cast<std::size_t>(p.values)]);
        continue;
      }
      if (p.weight < 0 && p.pass_as_f32) {
        const auto v = rel.files().get(p.passthrough);
        std::vector<double> x(static_cast<std::size_t>(io::checked_element_count(v.shape, p.passthrough)));
        v.decode(0, x);
        std::vector<std::byte> buf;
        for (const double e : x) append_pod(static_cast<float>(e), buf);
        put(buf);
        continue;
      }
      if (p.weight < 0) {
        put(rel.files().get(p.passthrough).bytes);
        continue;
      }
      const auto i = static_cast<std::size_t>(p.weight);
      auto& st = state[p.weight];
      if (!st.cv)
        st.cv = std::make_unique<converter>(rel, *todo[i], o.target, originals[i] ? &*originals[i] : nullptr, amax[i]);
      std::vector<std::byte> buf;
      switch (p.out.part) {
        case out_part::m_tensor_scale: {
          append_pod(static_cast<float>(st.cv->tensor_scale()), buf);
          put(buf);
          break;
        }
        case out_part::m_scale_values: {
          // F32 scales precede the 8-bit codes in the file: a pass of their own.
          convert_tensor_report scratch;
          st.cv->run([&](const slab_codes& q) {
            for (const auto& b : q.blocks) append_pod(static_cast<float>(b.scale), buf);
          }, scratch);
          put(buf);
          break;
        }
        case out_part::m_codes:
        case out_part::m_bf16: {
          st.cv->run([&](const slab_codes& q) {
            buf.clear();
            if (p.out.part == out_part::m_bf16) {
              for (const double v : q.dequant) append_pod(bf16_bits(v), buf);
            } else {
              append_codes(q, nibbles, buf);
              for (const auto& b : q.blocks) append_pod(static_cast<std::uint8_t>(b.scale_code & 0xFF), st.scale_codes);
            }
            put(buf);
          }, r.tensors[i]);
          st.coded = true;
          break;
        }
        case out_part::m_scale_codes: {
          if (!st.coded) throw_backend_error("convert", "internal: 8-bit scales of " + todo[i]->name + " before its codes");
          put(st.scale_codes);
          st.scale_codes = {};
          break;
        }
      }
    }
    w.finish();
    r.files.push_back(file);
  }
  // Index and config, each atomically.
  nlohmann::json index{{"metadata", {{"total_size", r.bytes_written}, {"producer", "numprobe convert"}}},
                       {"weight_map", weight_map}};
  partial.add("model.safetensors.index.json");
  write_text_atomic(out / "model.safetensors.index.json", index.dump(2));
  r.files.push_back("model.safetensors.index.json");
  nlohmann::json config = nlohmann::json::object();
  const auto cfg = config_beside(o.release);
  std::error_code ec;
  if (rel.gguf()) {
    config = gguf_config(rel);
  } else if (fs::exists(cfg, ec)) {
    // release::open has read it (a folder or a FIFO there is refused by name); a config that is
    // not a JSON object is replaced by one that holds the quantization_config alone.
    config = nlohmann::json::parse(io::read_text_file(cfg, k_convert_config_max_bytes, "config.json"), nullptr, false);
    if (!config.is_object()) config = nlohmann::json::object();
  }
  const auto qc = o.dequant ? nlohmann::json() : layout_quantization_config(r.write_layout, o.target);
  if (qc.is_null()) config.erase("quantization_config");
  else config["quantization_config"] = qc;
  partial.add("config.json");
  write_text_atomic(out / "config.json", config.dump(2));
  r.files.push_back("config.json");
}

}  // namespace

convert_report run_convert(const convert_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  convert_report r;
  r.options = o;
  const auto rel = io::release::open(o.release, o.layout);
  r.layout = std::string(io::name(rel.layout()));
  r.detected_by = rel.detected_by();
  r.passthrough = rel.passthrough().size();
  std::optional<io::checkpoint> orig;
  if (!o.against.empty()) orig = io::checkpoint::open(o.against);
  const std::regex filter = name_filter(o.filter);
  const bool writing = !o.write.empty();
  if (o.dequant && !writing)
    throw_input_error("--to", "dequant writes every tensor's decoded values: give --write OUT");
  // todo: re-quantized; values: written as their decoded values (--to dequant: every tensor; a
  // GGUF's tensors other than the decoder blocks' linears, when writing).
  std::vector<const io::release_tensor*> todo, values;
  for (const auto& t : rel.tensors()) {
    if (!std::regex_search(t.name, filter)) continue;
    if (o.dequant) values.push_back(&t);
    else if (rel.gguf() && !gguf_quantizes(t)) {
      if (writing) values.push_back(&t);
    } else {
      todo.push_back(&t);
    }
  }
  if (todo.empty() && values.empty())
    throw_input_error(o.filter.empty() ? o.release : "--filter", "no quantized tensor to convert");
  if (todo.empty() && !o.dequant)
    throw_input_error(o.filter.empty() ? o.release : "--filter",
                      "no weight to quantize (a GGUF's decoder-block linears blk.N.*.weight are)");
  if (writing) r.write_layout = o.dequant ? "dequant-f32" : choose_write_layout(o.write_layout, o.target, o.target_name);

  // The original of each tensor (shape checked), and the report rows.
  std::vector<std::optional<io::tensor_view>> originals(todo.size());
  for (std::size_t i = 0; i < todo.size(); ++i) {
    auto& rep = r.tensors.emplace_back();
    rep.name = todo[i]->name;
    rep.from_scheme = todo[i]->scheme_name.empty() ? todo[i]->stored_as : todo[i]->scheme_name;
    if (const auto n = out_name(rel, *todo[i], o.dequant); n != rep.name) rep.written_as = n;
    rep.rows = todo[i]->rows;
    rep.cols = todo[i]->cols;
    r.elements += static_cast<std::uint64_t>(rep.rows * rep.cols);
    if (!orig) continue;
    const auto& names = orig->tensors();
    const std::string& want = io::original_name_of(*todo[i]);
    if (std::none_of(names.begin(), names.end(), [&](const auto& e) { return e.name == want; })) continue;
    originals[i] = orig->get(want);
    check_original(*originals[i], *todo[i]);
  }
  for (const auto* t : values) {
    auto& rep = r.tensors.emplace_back();
    rep.name = t->name;
    rep.from_scheme = t->scheme_name.empty() ? t->stored_as : t->scheme_name;
    if (const auto n = out_name(rel, *t, o.dequant); n != rep.name) rep.written_as = n;
    rep.rows = t->rows;
    rep.cols = t->cols;
    r.elements += static_cast<std::uint64_t>(rep.rows * rep.cols);
  }

  if (!writing) {
    for (std::size_t i = 0; i < todo.size(); ++i) {
      converter cv(rel, *todo[i], o.target, originals[i] ? &*originals[i] : nullptr);
      cv.run([](const slab_codes&) {}, r.tensors[i]);
    }
  } else {
    // Everything is checked before a file is written: OUT, the layout's shapes, and that each
    // tensor decodes (a malformed one is refused here, not after half the shards) to finite
    // values. OUT is created first, so that a folder that cannot be is refused at once.
    const convert_signal_guard signals;
    const fs::path out(o.write);
    check_out_dir(out, o.release);
    const auto shards = plan_shards(o, rel, todo, values, r.write_layout);
    partial_output partial(out, create_out_dir(out));
    try {
      const auto amax = check_release(rel, todo, o.target);
      // Values are written as they decode; --to dequant --allow-nonfinite writes NaN/Inf too.
      if (!(o.dequant && o.allow_nonfinite)) check_values(rel, values);
      write_converted(o, rel, todo, values, originals, amax, shards, r, partial);
    } catch (const interrupted&) {
      (void)partial.remove();
      throw;
    } catch (const error& e) {
      const std::size_t n = partial.remove();
      throw error(e.code(), "", e.what() + partial.removed_note(n));
    }
    partial.keep();
  }
  for (const auto& t : r.tensors)
    if (t.nonfinite > 0) {
      r.nonfinite += t.nonfinite;
      r.nonfinite_tensors.push_back(t.name);
    }
  for (const auto& b : o.bounds) {
    const double v = convert_metric(r, b.metric);
    if (!b.holds(v)) r.breaches.push_back({b.text(), v});
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double convert_metric(const convert_report& r, const std::string& name) {
  const bool lowest = name.ends_with("sqnr_db");
  double worst = lowest ? std::numeric_limits<double>::infinity() : 0.0;
  bool any = false;
  for (const auto& t : r.tensors) {
    const convert_error* e = &t.added;
    std::string m = name;
    if (name.starts_with("added_")) {
      m = name.substr(6);
    } else if (name.starts_with("converted_")) {
      if (!t.converted_vs_original) continue;
      e = &*t.converted_vs_original;
      m = name.substr(10);
    } else {
      throw_input_error("--bound", fmt::format("unknown convert metric '{}' (known: added_sqnr_db, added_rel_rms, "
                                               "added_max_abs, added_flushed, converted_sqnr_db, converted_rel_rms)",
                                               name));
    }
    double v = 0.0;
    if (m == "sqnr_db") v = e->sqnr_db;
    else if (m == "rel_rms") v = e->rel_rms;
    else if (m == "max_abs") v = e->max_abs;
    else if (m == "flushed") v = static_cast<double>(e->flushed);
    else throw_input_error("--bound", fmt::format("unknown convert metric '{}'", name));
    any = true;
    // NaN (a tensor holding NaN/Inf) is the worst value: it never holds a bound.
    if (std::isnan(v) || std::isnan(worst)) worst = std::numeric_limits<double>::quiet_NaN();
    else worst = lowest ? std::min(worst, v) : std::max(worst, v);
  }
  if (!any) throw_input_error("--bound", fmt::format("{} needs --against ORIGINAL", name));
  return worst;
}

nlohmann::json to_json(const convert_report& r) {
  const auto err = [](const convert_error& e) {
    return nlohmann::json{{"sqnr_db", result::json_number(e.sqnr_db)}, {"rel_rms", result::json_number(e.rel_rms)},
                          {"max_abs", result::json_number(e.max_abs)}, {"flushed", e.flushed}};
  };
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : r.tensors) {
    nlohmann::json j{{"name", t.name}, {"from", t.from_scheme}, {"shape", {t.rows, t.cols}}, {"added", err(t.added)},
                     {"nonfinite", t.nonfinite}};
    if (!t.written_as.empty()) j["written_as"] = t.written_as;
    if (t.as_values) j["values"] = {{"dtype", "F32"}, {"f32_inexact", t.f32_inexact}};
    if (t.release_vs_original)
      j["against"] = {{"release", err(*t.release_vs_original)}, {"converted", err(*t.converted_vs_original)}};
    ts.push_back(std::move(j));
  }
  nlohmann::json j{{"release", r.options.release}, {"layout", r.layout}, {"detected_by", r.detected_by},
                   {"to", r.options.dequant ? std::string("dequant") : r.options.target_name},
                   {"element", r.options.dequant ? std::string("f32") : std::string(formats::name(r.options.target.element))},
                   {"conventions", r.options.dequant ? std::string("-") : formats::conventions_text(r.options.target)},
                   {"tensors", ts}, {"elements", r.elements}, {"passthrough_tensors", r.passthrough},
                   {"nonfinite", r.nonfinite}, {"allow_nonfinite", r.options.allow_nonfinite}};
  if (!r.options.write.empty())
    j["write"] = {{"dir", r.options.write}, {"layout", r.write_layout}, {"files", r.files},
                  {"bytes", r.bytes_written}};
  return j;
}

void fill_result(const convert_report& r, result::check_result& out) {
  out.probe = "convert";
  out.details = to_json(r);
  result::view_builder v(out);
  v.line(fmt::format("release   {} ({}, detected by {})", r.options.release, r.layout, r.detected_by));
  if (r.options.dequant)
    v.line("to        dequant (every tensor's decoded values as F32, under the release's own names)");
  else
    v.line(fmt::format("to        {} ({} elements, {})", r.options.target_name, formats::name(r.options.target.element),
                       formats::conventions_text(r.options.target)));
  const bool against = !r.options.against.empty();
  std::vector<std::string> cols{"tensor", "from", "shape", "added_sqnr_db", "added_rel_rms", "added_flushed"};
  if (against) {
    cols.push_back("release_sqnr_db");
    cols.push_back("converted_sqnr_db");
  }
  auto& tab = v.add_table(cols, "added error per tensor (against the release)");
  for (const auto& t : r.tensors) {
    std::vector<std::string> row{t.written_as.empty() ? t.name : t.name + " -> " + t.written_as,
                                 t.as_values ? t.from_scheme + " (as F32)" : t.from_scheme, fmt::format("{}x{}", t.rows, t.cols),
                                 result::fixed3(t.added.sqnr_db), result::sci(t.added.rel_rms),
                                 std::to_string(t.added.flushed)};
    if (against) {
      row.push_back(t.release_vs_original ? result::fixed3(t.release_vs_original->sqnr_db) : "-");
      row.push_back(t.converted_vs_original ? result::fixed3(t.converted_vs_original->sqnr_db) : "-");
    }
    tab.rows.push_back(std::move(row));
  }
  if (!r.options.write.empty())
    v.line(fmt::format("wrote     {} ({} layout): {} files, {:.1f} MiB", r.options.write, r.write_layout,
                       r.files.size(), static_cast<double>(r.bytes_written) / (1 << 20)));
  // Decoded NaN/Inf in the release: a finding unless allowed (as scan RELEASE).
  add_nonfinite_gate(r.nonfinite, r.nonfinite_tensors, r.options.allow_nonfinite, " (their added error is NaN)", out);
  for (const auto& b : r.options.bounds) {
    const double m = convert_metric(r, b.metric);
    auto g = result::evaluate_gate(b, m, "");
    if (!g.held) out.outcome = result::status::m_fail;
    out.gates.push_back(std::move(g));
  }
  out.seconds = r.seconds;
}

}  // namespace numprobe::probes
