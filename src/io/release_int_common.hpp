#pragma once
// What the integer layout readers share (release_int.cpp: AWQ GEMM and GPTQ v1/v2;
// release_int_ct.cpp: compressed-tensors pack-quantized int4): tensors by name, dimension and
// dtype checks that name the tensor (exit 2), the config fields they read, nibble unpacking, and
// int4_slab, the one form every layout is turned into before finish() dequantizes it. Private to
// numprobe: not installed.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "src/io/release_layouts.hpp"

namespace numprobe::io::detail::int4 {

using json = nlohmann::json;
using entry = checkpoint::entry;

constexpr std::int64_t k_per_word = 8;  // int4 nibbles per int32
// AWQ's nibble k of a word holds column 8j + k_awq_order[k] (AutoAWQ gemm.py from_linear), so
// column c sits in nibble k_awq_nibble[c] (packing_utils.py AWQ_REVERSE_ORDER).
constexpr std::array<int, 8> k_awq_nibble = {0, 4, 1, 5, 2, 6, 3, 7};
// Shapes are read from the file; no honest dimension comes near this, and below it every
// product of two dimensions stays inside int64.
constexpr std::uint64_t k_max_dim = std::uint64_t{1} << 40;

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The first of `keys` that qc holds as a string, lower-cased; "" when none does.
inline std::string text_field(const json& qc, std::initializer_list<const char*> keys) {
  if (!qc.is_object()) return "";
  for (const char* k : keys)
    if (qc.contains(k) && qc[k].is_string()) return lower(qc[k].get<std::string>());
  return "";
}

inline std::optional<std::int64_t> int_field(const json& qc, std::initializer_list<const char*> keys) {
  if (!qc.is_object()) return std::nullopt;
  for (const char* k : keys) {
    if (!qc.contains(k) || qc[k].is_null()) continue;
    if (!qc[k].is_number_integer())
      throw_input_error(std::string("quantization_config.") + k, "must be an integer");
    return qc[k].get<std::int64_t>();
  }
  return std::nullopt;
}

inline std::optional<bool> bool_field(const json& qc, const char* key) {
  if (!qc.is_object() || !qc.contains(key) || !qc[key].is_boolean()) return std::nullopt;
  return qc[key].get<bool>();
}

// The name ends with tail and has a base name before it (a tensor named ".qweight" has none).
inline bool has_named_suffix(const std::string& s, std::string_view tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

inline std::string shape_text(const std::vector<std::uint64_t>& shape) {
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

inline void check(bool ok, const std::string& place, const std::string& what) {
  if (!ok) throw_input_error(place, what);
}

// Dimension k of a tensor that must be `rank`-D, bounded so that products cannot overflow.
inline std::int64_t dim(const tensor_index& ix, const entry& e, std::size_t rank, std::size_t k) {
  check(e.shape.size() == rank, ix.place(e.name),
        "shape " + shape_text(e.shape) + " must be " + std::to_string(rank) + "-D");
  check(e.shape[k] > 0 && e.shape[k] < k_max_dim, ix.place(e.name),
        "dimension " + std::to_string(k) + " of " + shape_text(e.shape) + " out of range");
  return static_cast<std::int64_t>(e.shape[k]);
}

inline void check_dtype(const tensor_index& ix, const entry& e, std::initializer_list<io::dtype> ok) {
  std::string names;
  for (auto d : ok) {
    if (e.dtype == d) return;
    names += (names.empty() ? "" : " or ") + std::string(name(d));
  }
  throw_input_error(ix.place(e.name), "dtype " + std::string(name(e.dtype)) + ", expected " + names);
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline json source_of(const entry& e) {
  return {{"name", e.name}, {"dtype", std::string(name(e.dtype))}, {"shape", e.shape}};
}

// Elements [first, first + n) of an integer tensor, exact (int32 words as their bit patterns).
inline std::vector<std::int64_t> read_ints(const tensor_view& v, std::int64_t first, std::int64_t n) {
  std::vector<double> d(static_cast<std::size_t>(n));
  v.decode(static_cast<std::uint64_t>(first), d);
  std::vector<std::int64_t> out(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = static_cast<std::int64_t>(d[i]);
  return out;
}

inline std::uint32_t nibble(std::int64_t word, std::int64_t k) {
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(word) >> (4 * k)) & 0xFu);
}

constexpr auto k_scale_dtypes = {io::dtype::m_f16, io::dtype::m_bf16, io::dtype::m_f32};

// The groups every input channel belongs to: i / G, or an act-order g_idx read and checked.
// Returns whether g_idx departs from i / G.
inline bool read_group_index(const tensor_index& ix, const checkpoint& ck, const entry* g_idx,
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

inline int4_slab make_slab(std::int64_t r0, std::int64_t r1, std::int64_t cols, std::int64_t groups) {
  int4_slab s{r0, r1, cols, groups, {}, {}, {}, {}};
  s.q.resize(static_cast<std::size_t>(s.n() * cols));
  s.scale.resize(static_cast<std::size_t>(s.n() * groups));
  s.zero.assign(static_cast<std::size_t>(s.n() * groups), 0);
  return s;
}

// values = (q - z) s, exactly (|q - z| <= 16 times an f16/bf16/f32 scale fits a double).
// Codes are the scheme element's numbering: uint4 q for the asymmetric schemes; for signed int4
// (zero 8 stored as the +8 offset) formats::encode's two's complement nibble of q - 8.
inline release_slab finish(const release_tensor& t, const int4_slab& s) {
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
inline void read_transposed_scales(const tensor_view& v, std::int64_t out_features, int4_slab& s) {
  for (std::int64_t g = 0; g < s.groups; ++g) {
    std::vector<double> d(static_cast<std::size_t>(s.n()));
    v.decode(static_cast<std::uint64_t>(g * out_features + s.r0), d);
    for (std::int64_t r = 0; r < s.n(); ++r)
      s.scale[static_cast<std::size_t>(r * s.groups + g)] = d[static_cast<std::size_t>(r)];
  }
}

// Zeros [groups, ceil(out / 8)] packed along out (AWQ in its order, GPTQ in order), plus `add`.
inline void read_row_packed_zeros(const tensor_view& v, std::int64_t words_per_row, bool awq_order,
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

inline const json& tensor_names(const release_tensor& t) { return t.record.at("tensors"); }
inline std::string tensor_name(const release_tensor& t, const char* role) {
  return tensor_names(t).at(role).get<std::string>();
}

inline formats::scheme_config int4_scheme(std::string_view scheme, std::int64_t group, io::dtype scale) {
  auto c = formats::find_scheme(scheme).defaults;
  c.group = group;
  c.scale_format = *info(scale).format;
  return c;
}

// Calls fn(prefix) for every tensor named "<prefix><suffix>"; names fn does not claim (through
// `claimed`) go to passthrough.
template <class FN>
inline void group_by_suffix(const checkpoint& ck, std::string_view suffix,
                     std::vector<std::string>& passthrough, FN&& fn) {
  std::vector<std::string> claimed;
  for (const auto& e : ck.tensors())
    if (has_named_suffix(e.name, suffix)) fn(e.name.substr(0, e.name.size() - suffix.size()), claimed);
  std::sort(claimed.begin(), claimed.end());
  for (const auto& e : ck.tensors())
    if (!std::binary_search(claimed.begin(), claimed.end(), e.name)) passthrough.push_back(e.name);
}

inline void check_bits(const json& qc, std::initializer_list<const char*> keys) {
  const auto bits = int_field(qc, keys);
  if (bits && *bits != 4)
    throw_input_error(std::string("quantization_config.") + *keys.begin(),
                      std::to_string(*bits) + " bits; the int4 readers take 4");
}

// The group size: the config's (-1 = the whole input), else in / groups when it divides.
inline std::int64_t group_size(const json& qc, std::initializer_list<const char*> keys, std::int64_t in,
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

// The group of each input channel, as group() checked it (the file may not have changed).
inline std::vector<std::int32_t> groups_of(const checkpoint& ck, const release_tensor& t,
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

// The compressed-tensors reader (release_int_ct.cpp), appended by add_int_layouts.
void add_ct_int4_layout(std::vector<layout_reader>& out);

}  // namespace numprobe::io::detail::int4
