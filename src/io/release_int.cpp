// The integer layouts of released checkpoints (release_layouts.hpp): AWQ GEMM, GPTQ v1 and v2,
// and compressed-tensors pack-quantized int4. Each rule is cited (repository, file, function) in
// docs/checkpoints.md, "Integer layouts".
//
// All three store uint4 nibbles in int32 words, 8 per word, and dequantize W[o, i] =
// (q - z) * s[o, group(i)]. They differ in the packing axis, the nibble order, the zero's offset
// and where the scales' transpose sits; every reader below turns its layout into one int4_slab
// (nibbles, per-group scales and zeros of the slab's rows), and finish() does the arithmetic.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "src/io/release_layouts.hpp"

namespace numprobe::io::detail {
namespace {

using json = nlohmann::json;
using entry = checkpoint::entry;

constexpr std::int64_t k_per_word = 8;  // int4 nibbles per int32
// AWQ's nibble k of a word holds column 8j + k_awq_order[k] (AutoAWQ gemm.py from_linear), so
// column c sits in nibble k_awq_nibble[c] (packing_utils.py AWQ_REVERSE_ORDER).
constexpr std::array<int, 8> k_awq_nibble = {0, 4, 1, 5, 2, 6, 3, 7};
// Shapes are read from the file; no honest dimension comes near this, and below it every
// product of two dimensions stays inside int64.
constexpr std::uint64_t k_max_dim = std::uint64_t{1} << 40;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The first of `keys` that qc holds as a string, lower-cased; "" when none does.
std::string text_field(const json& qc, std::initializer_list<const char*> keys) {
  if (!qc.is_object()) return "";
  for (const char* k : keys)
    if (qc.contains(k) && qc[k].is_string()) return lower(qc[k].get<std::string>());
  return "";
}

std::optional<std::int64_t> int_field(const json& qc, std::initializer_list<const char*> keys) {
  if (!qc.is_object()) return std::nullopt;
  for (const char* k : keys) {
    if (!qc.contains(k) || qc[k].is_null()) continue;
    if (!qc[k].is_number_integer())
      throw_input_error(std::string("quantization_config.") + k, "must be an integer");
    return qc[k].get<std::int64_t>();
  }
  return std::nullopt;
}

std::optional<bool> bool_field(const json& qc, const char* key) {
  if (!qc.is_object() || !qc.contains(key) || !qc[key].is_boolean()) return std::nullopt;
  return qc[key].get<bool>();
}

// The name ends with tail and has a base name before it (a tensor named ".qweight" has none).
bool has_named_suffix(const std::string& s, std::string_view tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The tensors of a checkpoint by name, and the place an error names.
class tensor_index {
 public:
  explicit tensor_index(const checkpoint& ck) : m_ck(ck) {
    for (const auto& e : ck.tensors()) m_by_name.emplace(e.name, &e);
  }
  [[nodiscard]] const entry* find(const std::string& name) const {
    const auto it = m_by_name.find(name);
    return it == m_by_name.end() ? nullptr : it->second;
  }
  [[nodiscard]] const entry& need(const std::string& name, const std::string& of) const {
    const entry* e = find(name);
    if (!e) throw_input_error(place(name), "missing (the " + of + " tensor of this weight)");
    return *e;
  }
  [[nodiscard]] std::string place(const std::string& name) const {
    const entry* e = find(name);
    const auto file = e ? m_ck.shards()[e->shard] : m_ck.path();
    return file.filename().string() + ":" + name;
  }

 private:
  const checkpoint& m_ck;
  std::unordered_map<std::string, const entry*> m_by_name;
};

void check(bool ok, const std::string& place, const std::string& what) {
  if (!ok) throw_input_error(place, what);
}

// Dimension k of a tensor that must be `rank`-D, bounded so that products cannot overflow.
std::int64_t dim(const tensor_index& ix, const entry& e, std::size_t rank, std::size_t k) {
  check(e.shape.size() == rank, ix.place(e.name),
        "shape " + shape_text(e.shape) + " must be " + std::to_string(rank) + "-D");
  check(e.shape[k] > 0 && e.shape[k] < k_max_dim, ix.place(e.name),
        "dimension " + std::to_string(k) + " of " + shape_text(e.shape) + " out of range");
  return static_cast<std::int64_t>(e.shape[k]);
}

void check_dtype(const tensor_index& ix, const entry& e, std::initializer_list<io::dtype> ok) {
  std::string names;
  for (auto d : ok) {
    if (e.dtype == d) return;
    names += (names.empty() ? "" : " or ") + std::string(name(d));
  }
  throw_input_error(ix.place(e.name), "dtype " + std::string(name(e.dtype)) + ", expected " + names);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

json source_of(const entry& e) {
  return {{"name", e.name}, {"dtype", std::string(name(e.dtype))}, {"shape", e.shape}};
}

// Elements [first, first + n) of an integer tensor, exact (int32 words as their bit patterns).
std::vector<std::int64_t> read_ints(const tensor_view& v, std::int64_t first, std::int64_t n) {
  std::vector<double> d(static_cast<std::size_t>(n));
  v.decode(static_cast<std::uint64_t>(first), d);
  std::vector<std::int64_t> out(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = static_cast<std::int64_t>(d[i]);
  return out;
}

std::uint32_t nibble(std::int64_t word, std::int64_t k) {
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(word) >> (4 * k)) & 0xFu);
}

constexpr auto k_scale_dtypes = {io::dtype::m_f16, io::dtype::m_bf16, io::dtype::m_f32};

// The groups every input channel belongs to: i / G, or an act-order g_idx read and checked.
// Returns whether g_idx departs from i / G.
bool read_group_index(const tensor_index& ix, const checkpoint& ck, const entry* g_idx,
                      std::int64_t in, std::int64_t group, std::int64_t groups,
                      std::vector<std::int32_t>* out) {
  if (out) out->resize(static_cast<std::size_t>(in));
  bool act_order = false;
  std::vector<std::int64_t> g;
  if (g_idx) {
    check_dtype(ix, *g_idx, {io::dtype::m_i32, io::dtype::m_i64});
    check(dim(ix, *g_idx, 1, 0) == in, ix.place(g_idx->name),
          "length " + std::to_string(g_idx->shape[0]) + ", the weight has " + std::to_string(in) +
              " input channels");
    g = read_ints(ck.get(g_idx->name), 0, in);
  }
  for (std::int64_t i = 0; i < in; ++i) {
    const std::int64_t gi = g_idx ? g[static_cast<std::size_t>(i)] : i / group;
    if (gi < 0 || gi >= groups)
      throw_input_error(ix.place(g_idx->name), "g_idx[" + std::to_string(i) + "] = " +
                                                   std::to_string(gi) + " outside [0, " +
                                                   std::to_string(groups) + ")");
    act_order = act_order || gi != i / group;
    if (out) (*out)[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(gi);
  }
  return act_order;
}

// Rows [r0, r1) of a weight as nibbles and per-group parameters; finish() dequantizes.
struct int4_slab {
  std::int64_t r0 = 0, r1 = 0, cols = 0, groups = 0;
  std::vector<std::uint8_t> q;        // [n, cols] stored nibbles
  std::vector<double> scale;          // [n, groups]
  std::vector<int> zero;              // [n, groups]
  std::vector<std::int32_t> group_of; // [cols]
  [[nodiscard]] std::int64_t n() const { return r1 - r0; }
};

int4_slab make_slab(std::int64_t r0, std::int64_t r1, std::int64_t cols, std::int64_t groups) {
  int4_slab s{r0, r1, cols, groups, {}, {}, {}, {}};
  s.q.resize(static_cast<std::size_t>(s.n() * cols));
  s.scale.resize(static_cast<std::size_t>(s.n() * groups));
  s.zero.assign(static_cast<std::size_t>(s.n() * groups), 0);
  return s;
}

// values = (q - z) s, exactly (|q - z| <= 16 times an f16/bf16/f32 scale fits a double).
// Codes are the scheme element's numbering: uint4 q for the asymmetric schemes; for signed int4
// (zero 8 stored as the +8 offset) formats::encode's two's complement nibble of q - 8.
release_slab finish(const release_tensor& t, const int4_slab& s) {
  release_slab out;
  out.r0 = s.r0;
  out.r1 = s.r1;
  out.cols = s.cols;
  const bool is_signed = t.scheme.element == formats::format_id::m_i4;
  const auto n = static_cast<std::size_t>(s.n() * s.cols);
  out.values.resize(n);
  out.codes.resize(n);
  for (std::int64_t r = 0; r < s.n(); ++r)
    for (std::int64_t i = 0; i < s.cols; ++i) {
      const auto k = static_cast<std::size_t>(r * s.cols + i);
      const auto b = static_cast<std::size_t>(r * s.groups + s.group_of[static_cast<std::size_t>(i)]);
      const int q = s.q[k];
      out.values[k] = static_cast<double>(q - s.zero[b]) * s.scale[b];
      out.codes[k] = is_signed ? static_cast<std::uint32_t>(q ^ 8) : static_cast<std::uint32_t>(q);
    }
  out.scales = s.scale;
  out.scale_codes.resize(s.scale.size());
  for (std::size_t b = 0; b < s.scale.size(); ++b)
    out.scale_codes[b] = formats::encode(t.scheme.scale_format, s.scale[b]);
  if (!is_signed) out.zero_points = s.zero;
  return out;
}

// Scales [groups, out] (AWQ, GPTQ: transposed against the weight) into the slab's [n, groups].
void read_transposed_scales(const tensor_view& v, std::int64_t out_features, int4_slab& s) {
  for (std::int64_t g = 0; g < s.groups; ++g) {
    std::vector<double> d(static_cast<std::size_t>(s.n()));
    v.decode(static_cast<std::uint64_t>(g * out_features + s.r0), d);
    for (std::int64_t r = 0; r < s.n(); ++r)
      s.scale[static_cast<std::size_t>(r * s.groups + g)] = d[static_cast<std::size_t>(r)];
  }
}

// Zeros [groups, ceil(out / 8)] packed along out (AWQ in its order, GPTQ in order), plus `add`.
void read_row_packed_zeros(const tensor_view& v, std::int64_t words_per_row, bool awq_order,
                           int add, int4_slab& s) {
  const std::int64_t w0 = s.r0 / k_per_word, w1 = ceil_div(s.r1, k_per_word);
  for (std::int64_t g = 0; g < s.groups; ++g) {
    const auto w = read_ints(v, g * words_per_row + w0, w1 - w0);
    for (std::int64_t r = 0; r < s.n(); ++r) {
      const std::int64_t o = s.r0 + r, c = o % k_per_word;
      s.zero[static_cast<std::size_t>(r * s.groups + g)] =
          static_cast<int>(nibble(w[static_cast<std::size_t>(o / k_per_word - w0)],
                                  awq_order ? k_awq_nibble[static_cast<std::size_t>(c)] : c)) +
          add;
    }
  }
}

const json& tensor_names(const release_tensor& t) { return t.record.at("tensors"); }
std::string tensor_name(const release_tensor& t, const char* role) {
  return tensor_names(t).at(role).get<std::string>();
}

formats::scheme_config int4_scheme(std::string_view scheme, std::int64_t group, io::dtype scale) {
  auto c = formats::find_scheme(scheme).defaults;
  c.group = group;
  c.scale_format = *info(scale).format;
  return c;
}

// Calls fn(prefix) for every tensor named "<prefix><suffix>"; names fn does not claim (through
// `claimed`) go to passthrough.
template <class FN>
void group_by_suffix(const checkpoint& ck, std::string_view suffix,
                     std::vector<std::string>& passthrough, FN&& fn) {
  std::vector<std::string> claimed;
  for (const auto& e : ck.tensors())
    if (has_named_suffix(e.name, suffix)) fn(e.name.substr(0, e.name.size() - suffix.size()), claimed);
  std::sort(claimed.begin(), claimed.end());
  for (const auto& e : ck.tensors())
    if (!std::binary_search(claimed.begin(), claimed.end(), e.name)) passthrough.push_back(e.name);
}

void check_bits(const json& qc, std::initializer_list<const char*> keys) {
  const auto bits = int_field(qc, keys);
  if (bits && *bits != 4)
    throw_input_error(std::string("quantization_config.") + *keys.begin(),
                      std::to_string(*bits) + " bits; the int4 readers take 4");
}

// The group size: the config's (-1 = the whole input), else in / groups when it divides.
std::int64_t group_size(const json& qc, std::initializer_list<const char*> keys, std::int64_t in,
                        std::int64_t groups, const std::string& scales_place, json& record) {
  if (auto g = int_field(qc, keys)) {
    if (*g == -1) return in;
    check(*g > 0, "quantization_config.group_size", "must be positive or -1");
    return *g;
  }
  record["rules"].push_back("group size from the shapes (no group_size in the config)");
  check(in % groups == 0, scales_place,
        std::to_string(groups) + " groups do not divide the " + std::to_string(in) +
            " input channels, and the config gives no group_size");
  return in / groups;
}

// ---------------------------------------------------------------------------------- AWQ GEMM

bool awq_config(const json& qc) { return text_field(qc, {"quant_method", "method"}) == "awq"; }

// qweight [in, out/8] beside scales [groups, out]: the packing is along out.
bool packed_along_out(const checkpoint& ck, bool along_out) {
  const tensor_index ix(ck);
  for (const auto& e : ck.tensors()) {
    if (!has_named_suffix(e.name, ".qweight") || e.dtype != io::dtype::m_i32 || e.shape.size() != 2)
      continue;
    const auto* s = ix.find(e.name.substr(0, e.name.size() - 8) + ".scales");
    if (!s || s->shape.size() != 2) continue;
    return along_out ? e.shape[1] * k_per_word == s->shape[1] : e.shape[1] == s->shape[1];
  }
  return false;
}
bool awq_names(const checkpoint& ck) { return packed_along_out(ck, true); }

void awq_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
               std::vector<std::string>& passthrough) {
  const std::string version = text_field(qc, {"version", "format"});
  check(version.empty() || version == "gemm", "quantization_config.version",
        "'" + version + "': the AWQ reader takes the GEMM layout only");
  check(bool_field(qc, "zero_point").value_or(true), "quantization_config.zero_point",
        "false: AWQ GEMM without zero points is not a layout this reader knows");
  check_bits(qc, {"bits", "w_bit"});
  const tensor_index ix(ck);
  group_by_suffix(ck, ".qweight", passthrough, [&](const std::string& p, auto& claimed) {
    const entry& qw = ix.need(p + ".qweight", "qweight");
    const entry& qz = ix.need(p + ".qzeros", "qzeros");
    const entry& sc = ix.need(p + ".scales", "scales");
    check_dtype(ix, qw, {io::dtype::m_i32});
    check_dtype(ix, qz, {io::dtype::m_i32});
    check_dtype(ix, sc, k_scale_dtypes);
    const std::int64_t in = dim(ix, qw, 2, 0), words = dim(ix, qw, 2, 1);
    const std::int64_t groups = dim(ix, sc, 2, 0), outf = dim(ix, sc, 2, 1);
    check(words * k_per_word == outf, ix.place(qw.name),
          "shape " + shape_text(qw.shape) + " packs " + std::to_string(words * k_per_word) +
              " outputs; " + sc.name + " has " + std::to_string(outf));
    release_tensor t;
    t.record["rules"] = json::array();
    const std::int64_t g = group_size(qc, {"group_size", "q_group_size"}, in, groups,
                                      ix.place(sc.name), t.record);
    check(in % g == 0 && in / g == groups, ix.place(sc.name),
          "shape " + shape_text(sc.shape) + ": " + std::to_string(in) +
              " input channels in groups of " + std::to_string(g) + " need " +
              (in % g ? std::string("a multiple of the group") : std::to_string(in / g) + " groups"));
    check(qz.shape == std::vector<std::uint64_t>{std::uint64_t(groups), std::uint64_t(words)},
          ix.place(qz.name), "shape " + shape_text(qz.shape) + ", expected " +
                                 shape_text({std::uint64_t(groups), std::uint64_t(words)}));
    t.name = p + ".weight";
    t.layout = release_layout::m_awq;
    t.rows = outf;
    t.cols = in;
    t.shape = {std::uint64_t(outf), std::uint64_t(in)};
    t.scheme_name = "int4-awq";
    t.scheme = int4_scheme(t.scheme_name, g, sc.dtype);
    t.record["tensors"] = {{"qweight", qw.name}, {"qzeros", qz.name}, {"scales", sc.name}};
    t.record["source"] = {source_of(qw), source_of(qz), source_of(sc)};
    t.record["group_size"] = g;
    t.record["rules"].push_back("qweight [in, out/8] and qzeros packed along out, nibble k holds "
                                "column 8j + [0,2,4,6,1,3,5,7][k]; scales [in/G, out]");
    t.record["rules"].push_back("W[o, i] = (q - z) * s, zeros stored as they are");
    out.push_back(std::move(t));
    claimed.insert(claimed.end(), {qw.name, qz.name, sc.name});
  });
}

release_slab awq_decode(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                        std::int64_t r1) {
  const std::int64_t g = t.scheme.group, outf = t.rows, in = t.cols, words = outf / k_per_word;
  auto s = make_slab(r0, r1, in, in / g);
  s.group_of.resize(static_cast<std::size_t>(in));
  for (std::int64_t i = 0; i < in; ++i) s.group_of[static_cast<std::size_t>(i)] = int(i / g);
  const auto qw = ck.get(tensor_name(t, "qweight"));
  const std::int64_t w0 = r0 / k_per_word, w1 = ceil_div(r1, k_per_word);
  for (std::int64_t i = 0; i < in; ++i) {
    const auto w = read_ints(qw, i * words + w0, w1 - w0);
    for (std::int64_t r = 0; r < s.n(); ++r) {
      const std::int64_t o = r0 + r;
      s.q[static_cast<std::size_t>(r * in + i)] = static_cast<std::uint8_t>(
          nibble(w[static_cast<std::size_t>(o / k_per_word - w0)],
                 k_awq_nibble[static_cast<std::size_t>(o % k_per_word)]));
    }
  }
  read_transposed_scales(ck.get(tensor_name(t, "scales")), outf, s);
  read_row_packed_zeros(ck.get(tensor_name(t, "qzeros")), words, true, 0, s);
  return finish(t, s);
}

// ---------------------------------------------------------------------------------- GPTQ

std::string gptq_format(const json& qc) { return text_field(qc, {"checkpoint_format", "format"}); }
bool gptq_method(const json& qc) { return text_field(qc, {"quant_method", "method"}) == "gptq"; }
bool gptq_v1_config(const json& qc) { return gptq_method(qc) && gptq_format(qc) != "gptq_v2"; }
bool gptq_v2_config(const json& qc) { return gptq_method(qc) && gptq_format(qc) == "gptq_v2"; }
bool gptq_v1_names(const checkpoint& ck) { return packed_along_out(ck, false); }
bool gptq_v2_names(const checkpoint&) { return false; }  // v2 differs from v1 in values only

void gptq_group(const checkpoint& ck, const json& qc, release_layout id,
                std::vector<release_tensor>& out, std::vector<std::string>& passthrough) {
  const std::string fmt = gptq_format(qc);
  check(fmt.empty() || fmt == "gptq" || fmt == "gptq_v2", "quantization_config.checkpoint_format",
        "'" + fmt + "' is not the gptq or gptq_v2 layout");
  check_bits(qc, {"bits"});
  const bool v1 = id == release_layout::m_gptq_v1;
  const tensor_index ix(ck);
  group_by_suffix(ck, ".qweight", passthrough, [&](const std::string& p, auto& claimed) {
    const entry& qw = ix.need(p + ".qweight", "qweight");
    const entry& qz = ix.need(p + ".qzeros", "qzeros");
    const entry& sc = ix.need(p + ".scales", "scales");
    const entry* gi = ix.find(p + ".g_idx");
    check_dtype(ix, qw, {io::dtype::m_i32});
    check_dtype(ix, qz, {io::dtype::m_i32});
    check_dtype(ix, sc, k_scale_dtypes);
    const std::int64_t packed = dim(ix, qw, 2, 0), outf = dim(ix, qw, 2, 1);
    const std::int64_t groups = dim(ix, sc, 2, 0);
    check(dim(ix, sc, 2, 1) == outf, ix.place(qw.name),
          "shape " + shape_text(qw.shape) + " has " + std::to_string(outf) + " outputs; " +
              sc.name + " has " + std::to_string(sc.shape[1]));
    const std::int64_t in = gi ? dim(ix, *gi, 1, 0) : packed * k_per_word;
    // AutoGPTQ sizes qweight [in / 32 * bits, out] (qlinear __init__): in is a multiple of 8.
    check(in == packed * k_per_word, ix.place(gi ? gi->name : qw.name),
          "length " + std::to_string(in) + " does not match " + qw.name + " " +
              shape_text(qw.shape) + " (8 input channels per int32)");
    release_tensor t;
    t.record["rules"] = json::array();
    const std::int64_t g = group_size(qc, {"group_size"}, in, groups, ix.place(sc.name), t.record);
    check(ceil_div(in, g) == groups, ix.place(sc.name),
          "shape " + shape_text(sc.shape) + ": " + std::to_string(in) + " input channels in groups of " +
              std::to_string(g) + " need " + std::to_string(ceil_div(in, g)) + " groups");
    const std::vector<std::uint64_t> zshape{std::uint64_t(groups),
                                            std::uint64_t(ceil_div(outf, k_per_word))};
    check(qz.shape == zshape, ix.place(qz.name),
          "shape " + shape_text(qz.shape) + ", expected " + shape_text(zshape));
    const bool act_order = read_group_index(ix, ck, gi, in, g, groups, nullptr);
    t.name = p + ".weight";
    t.layout = id;
    t.rows = outf;
    t.cols = in;
    t.shape = {std::uint64_t(outf), std::uint64_t(in)};
    // Act-order groups are not contiguous blocks: no numprobe scheme describes them, so the
    // name is empty and identify skips the tensor; the config still says uint4, zeros, G.
    t.scheme_name = act_order ? "" : "int4-awq";
    t.scheme = int4_scheme("int4-awq", g, sc.dtype);
    t.record["tensors"] = {{"qweight", qw.name}, {"qzeros", qz.name}, {"scales", sc.name},
                           {"g_idx", gi ? json(gi->name) : json(nullptr)}};
    t.record["source"] = {source_of(qw), source_of(qz), source_of(sc)};
    if (gi) t.record["source"].push_back(source_of(*gi));
    t.record["group_size"] = g;
    t.record["act_order"] = act_order;
    if (act_order) t.record["rules"].push_back("act-order: the group of input channel i is g_idx[i]");
    if (auto sym = bool_field(qc, "sym")) t.record["sym"] = *sym;
    t.record["checkpoint_format"] = fmt.empty() ? json(nullptr) : json(fmt);
    if (v1 && fmt.empty())
      t.record["rules"].push_back("no checkpoint_format in the config: v1 assumed");
    t.record["rules"].push_back("qweight [ceil(in/8), out] packed along in, nibble k of word p is "
                                "input 8p + k; qzeros [groups, ceil(out/8)] packed along out");
    t.record["rules"].push_back(v1 ? "zeros stored minus 1 (v1): z = nibble + 1"
                                   : "zeros stored as they are (v2): z = nibble");
    out.push_back(std::move(t));
    claimed.insert(claimed.end(), {qw.name, qz.name, sc.name});
    if (gi) claimed.push_back(gi->name);
  });
}

void gptq_v1_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                   std::vector<std::string>& passthrough) {
  gptq_group(ck, qc, release_layout::m_gptq_v1, out, passthrough);
}
void gptq_v2_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                   std::vector<std::string>& passthrough) {
  gptq_group(ck, qc, release_layout::m_gptq_v2, out, passthrough);
}

// The group of each input channel, as group() checked it (the file may not have changed).
std::vector<std::int32_t> groups_of(const checkpoint& ck, const release_tensor& t,
                                    std::int64_t groups) {
  const tensor_index ix(ck);
  const auto& names = tensor_names(t);
  const char* key = names.contains("g_idx") ? "g_idx" : "weight_g_idx";
  const entry* gi = names.contains(key) && names[key].is_string()
                        ? &ix.need(names[key].get<std::string>(), "g_idx")
                        : nullptr;
  std::vector<std::int32_t> out;
  read_group_index(ix, ck, gi, t.cols, t.scheme.group, groups, &out);
  return out;
}

release_slab gptq_decode(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                         std::int64_t r1) {
  const std::int64_t outf = t.rows, in = t.cols, groups = ceil_div(in, t.scheme.group);
  auto s = make_slab(r0, r1, in, groups);
  s.group_of = groups_of(ck, t, groups);
  const auto qw = ck.get(tensor_name(t, "qweight"));
  for (std::int64_t p = 0; p < ceil_div(in, k_per_word); ++p) {
    const auto w = read_ints(qw, p * outf + r0, r1 - r0);
    for (std::int64_t k = 0; k < k_per_word && p * k_per_word + k < in; ++k)
      for (std::int64_t r = 0; r < s.n(); ++r)
        s.q[static_cast<std::size_t>(r * in + p * k_per_word + k)] =
            static_cast<std::uint8_t>(nibble(w[static_cast<std::size_t>(r)], k));
  }
  read_transposed_scales(ck.get(tensor_name(t, "scales")), outf, s);
  read_row_packed_zeros(ck.get(tensor_name(t, "qzeros")), ceil_div(outf, k_per_word), false,
                        t.layout == release_layout::m_gptq_v1 ? 1 : 0, s);
  return finish(t, s);
}

// ------------------------------------------------------ compressed-tensors pack-quantized int4

bool ct_int4_config(const json& qc) {
  if (text_field(qc, {"quant_method"}) != "compressed-tensors") return false;
  if (text_field(qc, {"format"}) == "pack-quantized") return true;
  if (qc.contains("config_groups") && qc["config_groups"].is_object())
    for (const auto& [k, g] : qc["config_groups"].items())
      if (text_field(g, {"format"}) == "pack-quantized") return true;
  return false;
}

bool ct_int4_names(const checkpoint& ck) {
  const tensor_index ix(ck);
  for (const auto& e : ck.tensors())
    if (has_named_suffix(e.name, ".weight_packed") && e.dtype == io::dtype::m_i32 &&
        ix.find(e.name.substr(0, e.name.size() - 14) + ".weight_shape"))
      return true;
  return false;
}

// The weights args of the config's groups: one set when they all agree, else null (each
// tensor's group size then comes from its shapes).
json ct_weights_args(const json& qc) {
  json found;
  if (!qc.is_object() || !qc.contains("config_groups") || !qc["config_groups"].is_object())
    return found;
  for (const auto& [k, g] : qc["config_groups"].items()) {
    if (!g.is_object() || !g.contains("weights") || !g["weights"].is_object()) continue;
    const json& w = g["weights"];
    const std::string place = "quantization_config.config_groups." + k + ".weights";
    check_bits(w, {"num_bits"});
    const std::string type = text_field(w, {"type"});
    check(type.empty() || type == "int", place + ".type", "'" + type + "': pack-quantized int4 is int");
    const std::string strategy = text_field(w, {"strategy"});
    check(strategy.empty() || strategy == "group" || strategy == "channel", place + ".strategy",
          "'" + strategy + "': the reader takes group or channel scales");
    if (found.is_null()) found = w;
    else if (found != w) return json();  // groups differ: no single answer
  }
  return found;
}

void ct_int4_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                   std::vector<std::string>& passthrough) {
  const json args = ct_weights_args(qc);
  const tensor_index ix(ck);
  group_by_suffix(ck, ".weight_packed", passthrough, [&](const std::string& p, auto& claimed) {
    const entry& wp = ix.need(p + ".weight_packed", "weight_packed");
    const entry& sc = ix.need(p + ".weight_scale", "weight_scale");
    const entry& ws = ix.need(p + ".weight_shape", "weight_shape");
    const entry* zp = ix.find(p + ".weight_zero_point");
    const entry* gi = ix.find(p + ".weight_g_idx");
    check_dtype(ix, wp, {io::dtype::m_i32});
    check_dtype(ix, sc, k_scale_dtypes);
    check_dtype(ix, ws, {io::dtype::m_i32, io::dtype::m_i64});
    const std::size_t rank = wp.shape.size();
    check(rank == 2 || rank == 3, ix.place(wp.name), "shape " + shape_text(wp.shape) + " must be 2-D or 3-D");
    check(dim(ix, ws, 1, 0) == std::int64_t(rank), ix.place(ws.name),
          "length " + std::to_string(ws.shape[0]) + ", weight_packed is " + std::to_string(rank) + "-D");
    std::vector<std::uint64_t> shape;
    for (std::int64_t v : read_ints(ck.get(ws.name), 0, std::int64_t(rank))) {
      check(v > 0 && std::uint64_t(v) < k_max_dim, ix.place(ws.name), "dimension " + std::to_string(v) + " out of range");
      shape.push_back(std::uint64_t(v));
    }
    const std::int64_t in = std::int64_t(shape.back()), outf = std::int64_t(shape[rank - 2]);
    const std::int64_t experts = rank == 3 ? std::int64_t(shape[0]) : 1;
    auto with_last = [&](std::uint64_t last) {
      auto s = shape;
      s.back() = last;
      return s;
    };
    check(wp.shape == with_last(std::uint64_t(ceil_div(in, k_per_word))), ix.place(wp.name),
          "shape " + shape_text(wp.shape) + " does not pack weight_shape " + shape_text(shape) +
              " (8 int4 per int32 along the last axis)");
    const std::int64_t groups = dim(ix, sc, rank, rank - 1);
    check(sc.shape == with_last(std::uint64_t(groups)), ix.place(sc.name),
          "shape " + shape_text(sc.shape) + " does not match weight_shape " + shape_text(shape));
    release_tensor t;
    t.record["rules"] = json::array();
    std::int64_t g = 0;
    if (text_field(args, {"strategy"}) == "channel") g = in;
    else g = group_size(args, {"group_size"}, in, groups, ix.place(sc.name), t.record);
    check(ceil_div(in, g) == groups, ix.place(sc.name),
          "shape " + shape_text(sc.shape) + ": " + std::to_string(in) + " input channels in groups of " +
              std::to_string(g) + " need " + std::to_string(ceil_div(in, g)) + " groups");
    const auto sym = bool_field(args, "symmetric");
    check(zp || sym.value_or(true), ix.place(p + ".weight_zero_point"),
          "missing (the config says symmetric: false)");
    std::string zp_form = "none";
    if (zp) {
      check_dtype(ix, *zp, {io::dtype::m_i32, io::dtype::m_i8});
      const bool packed = zp->dtype == io::dtype::m_i32;
      auto zshape = with_last(std::uint64_t(groups));
      if (packed) zshape[rank - 2] = std::uint64_t(ceil_div(outf, k_per_word));
      check(zp->shape == zshape, ix.place(zp->name),
            "shape " + shape_text(zp->shape) + ", expected " + shape_text(zshape) +
                (packed ? " (int32: packed along out)" : " (int8: one per group)"));
      zp_form = packed ? "packed" : "unpacked";
    }
    const bool act_order = gi && read_group_index(ix, ck, gi, in, g, groups, nullptr);
    const bool asym = zp && !sym.value_or(false);
    t.name = p + ".weight";
    t.layout = release_layout::m_ct_int4;
    t.rows = experts * outf;
    t.cols = in;
    t.shape = shape;
    const char* scheme = asym ? "int4-awq" : (g == 128 ? "int4-g128" : "int4-sym");
    t.scheme_name = act_order ? "" : scheme;
    t.scheme = int4_scheme(scheme, g, sc.dtype);
    t.record["tensors"] = {{"weight_packed", wp.name}, {"weight_scale", sc.name},
                           {"weight_shape", ws.name},
                           {"weight_zero_point", zp ? json(zp->name) : json(nullptr)},
                           {"weight_g_idx", gi ? json(gi->name) : json(nullptr)}};
    t.record["source"] = {source_of(wp), source_of(sc), source_of(ws)};
    for (const entry* e : {zp, gi})
      if (e) t.record["source"].push_back(source_of(*e));
    t.record["group_size"] = g;
    t.record["act_order"] = act_order;
    t.record["zero_point"] = asym ? zp_form : "none";
    t.record["rules"].push_back("weight_packed: 8 int4 per int32 along in, low bits first, "
                                "stored q + 8 (pack_to_int32)");
    t.record["rules"].push_back(
        asym ? "W = (q - zp) * s, weight_zero_point " + zp_form +
                   (zp_form == "packed" ? " along out, stored zp + 8" : " as signed int8")
             : "W = q * s (symmetric)");
    if (zp && !asym)
      t.record["rules"].push_back("weight_zero_point read and required 0: the config says symmetric");
    out.push_back(std::move(t));
    claimed.insert(claimed.end(), {wp.name, sc.name, ws.name});
    for (const entry* e : {zp, gi})
      if (e) claimed.push_back(e->name);
  });
}

// A symmetric config's stored zero points (older compressed-tensors kept them) must all be 0.
release_slab checked_symmetric(const release_tensor& t, const tensor_view& zv, const int4_slab& s) {
  if (t.scheme.element == formats::format_id::m_i4)
    for (std::size_t b = 0; b < s.zero.size(); ++b)
      check(s.zero[b] == 8, zv.place(),
            "zero point " + std::to_string(s.zero[b] - 8) + " in row " +
                std::to_string(s.r0 + std::int64_t(b) / s.groups) + ", but the config says symmetric");
  return finish(t, s);
}

release_slab ct_int4_decode(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                            std::int64_t r1) {
  const std::int64_t in = t.cols, groups = ceil_div(in, t.scheme.group);
  const std::int64_t outf = std::int64_t(t.shape[t.shape.size() - 2]);
  auto s = make_slab(r0, r1, in, groups);
  s.group_of = groups_of(ck, t, groups);
  const std::int64_t words = ceil_div(in, k_per_word);
  const auto w = read_ints(ck.get(tensor_name(t, "weight_packed")), r0 * words, s.n() * words);
  for (std::int64_t r = 0; r < s.n(); ++r)
    for (std::int64_t i = 0; i < in; ++i)
      s.q[static_cast<std::size_t>(r * in + i)] = static_cast<std::uint8_t>(
          nibble(w[static_cast<std::size_t>(r * words + i / k_per_word)], i % k_per_word));
  ck.get(tensor_name(t, "weight_scale")).decode(std::uint64_t(r0 * groups), s.scale);
  const json& zname = tensor_names(t).at("weight_zero_point");
  if (zname.is_null()) {
    std::fill(s.zero.begin(), s.zero.end(), 8);  // symmetric: q + 8 stored, zero 8 in nibbles
    return finish(t, s);
  }
  const auto zv = ck.get(zname.get<std::string>());
  if (zv.dtype == io::dtype::m_i8) {
    const auto z = read_ints(zv, r0 * groups, s.n() * groups);
    for (std::size_t b = 0; b < z.size(); ++b) {
      check(z[b] >= -8 && z[b] <= 7, zv.place(), "zero point " + std::to_string(z[b]) + " outside int4");
      s.zero[b] = int(z[b]) + 8;
    }
    return checked_symmetric(t, zv, s);
  }
  const std::int64_t zrows = ceil_div(outf, k_per_word);  // per expert, packed along out
  for (std::int64_t r = 0; r < s.n(); ++r) {
    const std::int64_t e = (r0 + r) / outf, o = (r0 + r) % outf;
    const auto z = read_ints(zv, (e * zrows + o / k_per_word) * groups, groups);
    for (std::int64_t gi = 0; gi < groups; ++gi)
      s.zero[static_cast<std::size_t>(r * groups + gi)] =
          int(nibble(z[static_cast<std::size_t>(gi)], o % k_per_word));
  }
  return checked_symmetric(t, zv, s);
}

}  // namespace

void add_int_layouts(std::vector<layout_reader>& out) {
  out.push_back({release_layout::m_ct_int4, ct_int4_config, ct_int4_names, ct_int4_group,
                 ct_int4_decode});
  out.push_back({release_layout::m_awq, awq_config, awq_names, awq_group, awq_decode});
  out.push_back({release_layout::m_gptq_v1, gptq_v1_config, gptq_v1_names, gptq_v1_group,
                 gptq_decode});
  out.push_back({release_layout::m_gptq_v2, gptq_v2_config, gptq_v2_names, gptq_v2_group,
                 gptq_decode});
}

}  // namespace numprobe::io::detail
