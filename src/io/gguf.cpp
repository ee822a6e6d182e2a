#include "numprobe/io/gguf.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "utf8.hpp"

namespace numprobe::io {
namespace {

// ggml's own limits (ggml/src/gguf.cpp, ggml.h): a file past them does not load in llama.cpp.
constexpr std::uint64_t k_max_string_bytes = std::uint64_t{1} << 30;    // GGUF_MAX_STRING_LENGTH
constexpr std::uint64_t k_max_array_elements = std::uint64_t{1} << 30;  // GGUF_MAX_ARRAY_ELEMENTS
constexpr std::uint32_t k_max_dims = 4;                                 // GGML_MAX_DIMS
constexpr std::size_t k_max_name = 64;                                  // GGML_MAX_NAME, with its NUL
// Ours: every array element is one gguf_value (~72 bytes), so a 16 MiB file of u8 arrays would
// cost over a GiB. The largest real metadata (Gemma 3's 262,144-token vocabulary: tokens,
// scores, token types, plus merges) stays under 1.5M elements; 4M leaves room and bounds the
// cost at ~300 MB.
constexpr std::uint64_t k_max_metadata_elements = std::uint64_t{1} << 22;
// Ours too: a tensor info costs ~200 bytes in memory for 32 in the file. Real checkpoints hold
// thousands of tensors (MoE experts are stacked into 3-D tensors); 2^20 bounds the cost at
// ~200 MB.
constexpr std::uint64_t k_max_tensors = std::uint64_t{1} << 20;
// The smallest key-value (a 1-byte key, its u32 type and a 1-byte value) and the smallest tensor
// info (an empty name, one dimension): the counts in the header are checked against them before
// anything is reserved.
constexpr std::uint64_t k_min_kv_bytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t k_min_tensor_info_bytes = 8 + 4 + 8 + 4 + 8;

// The type table of ggml (ggml.c type_traits) and gguf-py (constants.GGML_QUANT_SIZES, with
// QK_K = 256). Numbers ggml retired (4, 5, 31-33, 36-38) are absent: ggml refuses them.
constexpr std::array<ggml_type_info, 34> k_types{{
    {ggml_type::m_f32, "F32", 1, 4, true},
    {ggml_type::m_f16, "F16", 1, 2, true},
    {ggml_type::m_q4_0, "Q4_0", 32, 2 + 16, true},
    {ggml_type::m_q4_1, "Q4_1", 32, 2 + 2 + 16, true},
    {ggml_type::m_q5_0, "Q5_0", 32, 2 + 4 + 16, true},
    {ggml_type::m_q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    {ggml_type::m_q8_0, "Q8_0", 32, 2 + 32, true},
    {ggml_type::m_q8_1, "Q8_1", 32, 4 + 4 + 32, false},
    {ggml_type::m_q2_k, "Q2_K", 256, 2 + 2 + 256 / 16 + 256 / 4, true},
    {ggml_type::m_q3_k, "Q3_K", 256, 2 + 256 / 4 + 256 / 8 + 12, true},
    {ggml_type::m_q4_k, "Q4_K", 256, 2 + 2 + 256 / 2 + 12, true},
    {ggml_type::m_q5_k, "Q5_K", 256, 2 + 2 + 256 / 2 + 256 / 8 + 12, true},
    {ggml_type::m_q6_k, "Q6_K", 256, 2 + 256 / 2 + 256 / 4 + 256 / 16, true},
    {ggml_type::m_q8_k, "Q8_K", 256, 4 + 256 + 256 / 8, false},
    {ggml_type::m_iq2_xxs, "IQ2_XXS", 256, 2 + 256 / 4, false},
    {ggml_type::m_iq2_xs, "IQ2_XS", 256, 2 + 256 / 4 + 256 / 32, false},
    {ggml_type::m_iq3_xxs, "IQ3_XXS", 256, 2 + 256 / 4 + 256 / 8, false},
    {ggml_type::m_iq1_s, "IQ1_S", 256, 2 + 256 / 8 + 256 / 16, false},
    {ggml_type::m_iq4_nl, "IQ4_NL", 32, 2 + 16, true},
    {ggml_type::m_iq3_s, "IQ3_S", 256, 2 + 256 / 4 + 256 / 8 + 256 / 32 + 4, false},
    {ggml_type::m_iq2_s, "IQ2_S", 256, 2 + 256 / 4 + 256 / 16, false},
    {ggml_type::m_iq4_xs, "IQ4_XS", 256, 2 + 2 + 256 / 2 + 256 / 64, true},
    {ggml_type::m_i8, "I8", 1, 1, false},
    {ggml_type::m_i16, "I16", 1, 2, false},
    {ggml_type::m_i32, "I32", 1, 4, false},
    {ggml_type::m_i64, "I64", 1, 8, false},
    {ggml_type::m_f64, "F64", 1, 8, false},
    {ggml_type::m_iq1_m, "IQ1_M", 256, 256 / 8 + 256 / 16 + 256 / 32, false},
    {ggml_type::m_bf16, "BF16", 1, 2, true},
    {ggml_type::m_tq1_0, "TQ1_0", 256, 2 + 4 * 13, false},
    {ggml_type::m_tq2_0, "TQ2_0", 256, 2 + 64, false},
    {ggml_type::m_mxfp4, "MXFP4", 32, 1 + 16, true},
    {ggml_type::m_nvfp4, "NVFP4", 64, 4 + 32, true},
    {ggml_type::m_q1_0, "Q1_0", 128, 2 + 16, false},
}};

// ggml's names of the metadata value types (gguf.cpp GGUF_TYPE_NAME).
std::string_view value_type_name(gguf_value_type t) {
  static constexpr std::string_view k_names[] = {"u8",  "i8",   "u16", "i16", "u32", "i32", "f32",
                                                 "bool", "str", "arr", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < std::size(k_names) ? k_names[i] : std::string_view("?");
}

// Bytes of a scalar value type; 0 for a string (length-prefixed), an array or an unknown number.
std::uint64_t value_type_bytes(std::uint32_t t) {
  static constexpr std::uint64_t k_bytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return t < std::size(k_bytes) ? k_bytes[t] : 0;
}

// Text read from the file (a key, a tensor name, a string value) as it may appear in a message
// or report: valid UTF-8 is kept (error's one_line escapes its control characters), any other
// byte is written \xNN, and text past `max_bytes` is cut (a 1 GiB key must not become the
// message).
std::string printable(std::string_view s, std::size_t max_bytes = 200) {
  const bool cut = s.size() > max_bytes;
  const std::string_view head = cut ? s.substr(0, max_bytes) : s;
  std::string out;
  if (detail::is_valid_utf8(head)) {
    out.assign(head);
  } else {
    for (const char ch : head) {
      const auto u = static_cast<unsigned char>(ch);
      if (u < 0x80) {
        out += ch;
      } else {
        out += fmt::format("\\x{:02x}", u);
      }
    }
  }
  if (cut) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::string quote_name(std::string_view s) { return "'" + printable(s) + "'"; }

// The field being read, for a message; its text is built only when a read fails (an array of
// 262,144 tokens must not format 262,144 names).
struct field {
  static constexpr std::uint64_t k_no_index = ~std::uint64_t{0};
  field(const char* n) : name(n) {}  // NOLINT: implicit, like the strings it stands for
  field(const std::string& n) : name(n) {}  // NOLINT
  field(std::string_view n, std::uint64_t i, std::string_view s = {}) : name(n), index(i), suffix(s) {}
  std::string_view name;
  std::uint64_t index = k_no_index;
  std::string_view suffix;
  [[nodiscard]] std::string text() const {
    std::string out(name);
    if (index != k_no_index) out += fmt::format("[{}]", index);
    if (!suffix.empty()) out += fmt::format(" {}", suffix);
    return out;
  }
};

// Reads the little-endian fields of an image, every read checked against the bytes that remain.
class cursor {
 public:
  cursor(std::span<const std::byte> bytes, const std::string& source)
      : m_bytes(bytes), m_source(source) {}

  [[nodiscard]] std::uint64_t pos() const noexcept { return m_pos; }
  [[nodiscard]] std::uint64_t remaining() const noexcept { return m_bytes.size() - m_pos; }

  // Fails unless `n` more bytes are there; `what` names the field being read.
  void need(std::uint64_t n, const field& what) const {
    if (n > remaining()) {
      throw_input_error(m_source, fmt::format("{}: needs {} bytes at offset {} but the {}-byte file "
                                              "has {} left (truncated file or a bad length)",
                                              what.text(), n, m_pos, m_bytes.size(), remaining()));
    }
  }

  std::uint64_t read_uint(int width, const field& what) {
    need(static_cast<std::uint64_t>(width), what);
    std::uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) {
      v = (v << 8) | std::to_integer<std::uint64_t>(m_bytes[m_pos + static_cast<std::uint64_t>(i)]);
    }
    m_pos += static_cast<std::uint64_t>(width);
    return v;
  }
  std::uint32_t u32(const field& what) { return static_cast<std::uint32_t>(read_uint(4, what)); }
  std::uint64_t u64(const field& what) { return read_uint(8, what); }

  std::string string(const field& what) {
    const std::uint64_t n = u64(field(what.name, what.index, "length"));
    if (n > k_max_string_bytes) {
      throw_input_error(m_source, fmt::format("{}: length {} exceeds ggml's limit of {} bytes",
                                              what.text(), n, k_max_string_bytes));
    }
    need(n, what);
    std::string s(reinterpret_cast<const char*>(m_bytes.data() + m_pos), static_cast<std::size_t>(n));
    m_pos += n;
    return s;
  }

 private:
  std::span<const std::byte> m_bytes;
  const std::string& m_source;
  std::uint64_t m_pos = 0;
};

gguf_value read_scalar(cursor& c, gguf_value_type t, const field& what) {
  gguf_value v;
  v.type = t;
  switch (t) {
    case gguf_value_type::m_u8: v.scalar = c.read_uint(1, what); break;
    case gguf_value_type::m_u16: v.scalar = c.read_uint(2, what); break;
    case gguf_value_type::m_u32: v.scalar = c.read_uint(4, what); break;
    case gguf_value_type::m_u64: v.scalar = c.read_uint(8, what); break;
    case gguf_value_type::m_i8: v.scalar = std::int64_t{static_cast<std::int8_t>(c.read_uint(1, what))}; break;
    case gguf_value_type::m_i16: v.scalar = std::int64_t{static_cast<std::int16_t>(c.read_uint(2, what))}; break;
    case gguf_value_type::m_i32: v.scalar = std::int64_t{static_cast<std::int32_t>(c.read_uint(4, what))}; break;
    case gguf_value_type::m_i64: v.scalar = static_cast<std::int64_t>(c.read_uint(8, what)); break;
    case gguf_value_type::m_f32:
      v.scalar = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(c.read_uint(4, what))));
      break;
    case gguf_value_type::m_f64: v.scalar = std::bit_cast<double>(c.read_uint(8, what)); break;
    case gguf_value_type::m_bool: v.scalar = c.read_uint(1, what) != 0; break;  // ggml: any non-zero byte
    case gguf_value_type::m_string: v.scalar = c.string(what); break;
    case gguf_value_type::m_array: break;  // the caller reads arrays
  }
  return v;
}

// One value of key `key` (already printable), its u32 type read and known.
gguf_value read_value(cursor& c, std::uint32_t type, const std::string& key, const std::string& src,
                      std::uint64_t& elements) {
  const std::string what = "key " + key;
  if (type > static_cast<std::uint32_t>(gguf_value_type::m_f64)) {
    throw_input_error(src, fmt::format("{}: unknown value type {}", what, type));
  }
  if (type != static_cast<std::uint32_t>(gguf_value_type::m_array)) {
    ++elements;
    return read_scalar(c, static_cast<gguf_value_type>(type), what);
  }
  const std::uint32_t item = c.u32(what + " array type");
  if (item == static_cast<std::uint32_t>(gguf_value_type::m_array)) {
    throw_input_error(src, what + ": nested arrays are not allowed (ggml refuses them)");
  }
  if (item > static_cast<std::uint32_t>(gguf_value_type::m_f64)) {
    throw_input_error(src, fmt::format("{}: unknown array element type {}", what, item));
  }
  const std::uint64_t n = c.u64(what + " array count");
  if (n > k_max_array_elements) {
    throw_input_error(src, fmt::format("{}: array count {} exceeds ggml's limit of {}", what, n,
                                       k_max_array_elements));
  }
  // A string element takes at least its 8-byte length. n <= 2^30, so n * 8 cannot wrap.
  const std::uint64_t least = item == static_cast<std::uint32_t>(gguf_value_type::m_string)
                                  ? 8
                                  : value_type_bytes(item);
  c.need(n * least, fmt::format("{}: array of {} {} elements", what, n,
                                value_type_name(static_cast<gguf_value_type>(item))));
  if (n > k_max_metadata_elements - elements) {
    throw_input_error(src, fmt::format("{}: array of {} elements takes the metadata past {} "
                                       "elements in all (numprobe's bound)",
                                       what, n, k_max_metadata_elements));
  }
  elements += n;
  gguf_value v;
  v.type = gguf_value_type::m_array;
  v.array_type = static_cast<gguf_value_type>(item);
  v.array.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) {
    v.array.push_back(read_scalar(c, v.array_type, field(what, i)));
  }
  return v;
}

std::string scalar_text(const gguf_value& v) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return "\"" + one_line(printable(x, std::numeric_limits<std::size_t>::max())) + "\"";
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          // The shortest text that reads back to the stored value, in the stored precision.
          if (v.type == gguf_value_type::m_f32) return fmt::format("{}", static_cast<float>(x));
          return fmt::format("{}", x);
        } else {
          return std::to_string(x);
        }
      },
      v.scalar);
}

std::string tensor_place(const std::string& src, const std::string& name) {
  return src + ":" + printable(name);
}

}  // namespace

std::optional<ggml_type_info> find_ggml_type(std::uint32_t number) {
  for (const auto& t : k_types) {
    if (static_cast<std::uint32_t>(t.id) == number) return t;
  }
  return std::nullopt;
}

const ggml_type_info& info(ggml_type t) {
  for (const auto& i : k_types) {
    if (i.id == t) return i;
  }
  throw_input_error("ggml type", fmt::format("unknown type number {}", static_cast<std::uint32_t>(t)));
}

std::string gguf_value::summary(std::size_t max_elements) const {
  if (type != gguf_value_type::m_array) return scalar_text(*this);
  std::string out = fmt::format("[{} x {}]", value_type_name(array_type), array.size());
  for (std::size_t i = 0; i < array.size() && i < max_elements; ++i) {
    out += (i == 0 ? " " : ", ") + scalar_text(array[i]);
  }
  if (array.size() > max_elements) out += ", ...";
  return out;
}

std::optional<std::uint64_t> gguf_value::as_u64() const {
  switch (type) {
    case gguf_value_type::m_u8:
    case gguf_value_type::m_u16:
    case gguf_value_type::m_u32:
    case gguf_value_type::m_u64:
      if (const auto* u = std::get_if<std::uint64_t>(&scalar)) return *u;
      return std::nullopt;
    case gguf_value_type::m_i8:
    case gguf_value_type::m_i16:
    case gguf_value_type::m_i32:
    case gguf_value_type::m_i64:
      if (const auto* i = std::get_if<std::int64_t>(&scalar); i != nullptr && *i >= 0) {
        return static_cast<std::uint64_t>(*i);
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

const std::string* gguf_value::as_string() const {
  return type == gguf_value_type::m_string ? std::get_if<std::string>(&scalar) : nullptr;
}

std::vector<std::uint64_t> gguf_tensor::shape() const { return {ne.rbegin(), ne.rend()}; }

std::uint64_t gguf_tensor::elements() const {
  std::uint64_t n = 1;
  for (const auto d : ne) n *= d;  // validated at parse: no wrap for a parsed tensor
  return n;
}

std::int64_t gguf_tensor::rows() const {
  std::uint64_t n = 1;
  for (std::size_t i = 1; i < ne.size(); ++i) n *= ne[i];
  return static_cast<std::int64_t>(n);
}

gguf_file gguf_file::parse(std::shared_ptr<const mapped_file> file) {
  const std::string& src = file->source();
  const auto bytes = file->bytes();
  cursor c(bytes, src);
  gguf_file out;

  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0) {
    throw_input_error(src, "not a GGUF file: it does not start with the magic \"GGUF\"");
  }
  (void)c.u32("magic");
  const std::uint32_t version = c.u32("version");
  if (version == 1) {
    throw_input_error(src, "GGUF version 1 (32-bit counts) is not supported: only versions 2 and 3 "
                           "are read (ggml refuses version 1 too)");
  }
  if (version != 0 && (version & 0xFFFFu) == 0) {
    throw_input_error(src, fmt::format("version {:#010x} looks byte-swapped: a big-endian GGUF file "
                                       "(only little-endian files are read)",
                                       version));
  }
  if (version != 2 && version != 3) {
    throw_input_error(src, fmt::format("unsupported GGUF version {}: only versions 2 and 3 are read",
                                       version));
  }
  out.m_version = version;
  const std::uint64_t tensor_count = c.u64("tensor_count");
  const std::uint64_t kv_count = c.u64("kv_count");
  // ggml reads both counts as int64 and each entry has a least size: check both before reserving.
  if (kv_count > c.remaining() / k_min_kv_bytes) {
    throw_input_error(src, fmt::format("kv_count {} cannot fit: each key-value takes at least {} "
                                       "bytes and {} bytes follow the header",
                                       kv_count, k_min_kv_bytes, c.remaining()));
  }
  if (kv_count > k_max_metadata_elements) {
    throw_input_error(src, fmt::format("kv_count {} exceeds numprobe's bound of {} metadata elements",
                                       kv_count, k_max_metadata_elements));
  }
  if (tensor_count > c.remaining() / k_min_tensor_info_bytes) {
    throw_input_error(src, fmt::format("tensor_count {} cannot fit: each tensor info takes at least "
                                       "{} bytes and {} bytes follow the header",
                                       tensor_count, k_min_tensor_info_bytes, c.remaining()));
  }
  if (tensor_count > k_max_tensors) {
    throw_input_error(src, fmt::format("tensor_count {} exceeds numprobe's bound of {} tensors",
                                       tensor_count, k_max_tensors));
  }

  // Key-values.
  out.m_kv.reserve(static_cast<std::size_t>(kv_count));
  std::unordered_set<std::string> keys;
  std::uint64_t elements = 0;
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key = c.string(fmt::format("key {}", i));
    if (key.empty()) throw_input_error(src, fmt::format("key {} is empty (ggml refuses empty keys)", i));
    const std::string shown = quote_name(key);
    if (!keys.insert(key).second) throw_input_error(src, "duplicate key " + shown);
    const std::uint32_t type = c.u32("key " + shown + " value type");
    gguf_value v = read_value(c, type, shown, src, elements);
    out.m_kv.emplace_back(std::move(key), std::move(v));
  }
  if (const gguf_value* a = out.find_key("general.alignment")) {
    if (a->type != gguf_value_type::m_u32) {
      throw_input_error(src, fmt::format("key 'general.alignment' must be of type u32, is {}",
                                         value_type_name(a->type)));
    }
    const std::uint64_t align = *a->as_u64();
    if (align == 0 || !std::has_single_bit(align)) {
      throw_input_error(src, fmt::format("general.alignment {} is not a non-zero power of two", align));
    }
    out.m_alignment = align;
  }

  // Tensor infos.
  out.m_tensors.reserve(static_cast<std::size_t>(tensor_count));
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    gguf_tensor t;
    t.name = c.string(fmt::format("tensor {} name", i));
    const std::string place = tensor_place(src, t.name);
    if (t.name.size() >= k_max_name) {
      throw_input_error(place, fmt::format("tensor name of {} bytes is too long (ggml's limit is {})",
                                           t.name.size(), k_max_name - 1));
    }
    if (!out.m_by_name.emplace(t.name, out.m_tensors.size()).second) {
      throw_input_error(place, "duplicate tensor name " + quote_name(t.name));
    }
    const std::uint32_t n_dims = c.u32("tensor " + quote_name(t.name) + " n_dims");
    if (n_dims < 1 || n_dims > k_max_dims) {
      throw_input_error(place, fmt::format("n_dims {} is outside 1..{} (ggml's GGML_MAX_DIMS)", n_dims,
                                           k_max_dims));
    }
    t.ne.reserve(n_dims);
    // The product of the non-zero ne must fit int64 (ggml's check), and a zero ne (an empty
    // tensor, which ggml allows) does not excuse the others: rows() multiplies them.
    std::uint64_t nonzero = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t e = c.u64(fmt::format("tensor {} ne[{}]", quote_name(t.name), d));
      // ggml reads ne as int64: the top half is negative.
      if (e > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw_input_error(place, fmt::format("ne[{}] = {} is negative as ggml's int64", d,
                                             static_cast<std::int64_t>(e)));
      }
      t.ne.push_back(e);
      if (e == 0) continue;
      if (nonzero > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / e) {
        throw_input_error(place, fmt::format("the element count of ne = [{}...] overflows int64",
                                             fmt::join(t.ne, ", ")));
      }
      nonzero *= e;
    }
    const bool any_zero = std::find(t.ne.begin(), t.ne.end(), 0u) != t.ne.end();
    const std::uint64_t n = any_zero ? 0 : nonzero;
    const std::uint32_t type = c.u32("tensor " + quote_name(t.name) + " type");
    const auto ti = find_ggml_type(type);
    if (!ti) throw_input_error(place, fmt::format("unknown ggml type number {}", type));
    t.type = ti->id;
    if (t.ne[0] % static_cast<std::uint64_t>(ti->block_size) != 0) {
      throw_input_error(place, fmt::format("ne[0] = {} is not a multiple of {}'s block size {}",
                                           t.ne[0], ti->name, ti->block_size));
    }
    const std::uint64_t blocks = n / static_cast<std::uint64_t>(ti->block_size);
    if (blocks > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(ti->type_size)) {
      throw_input_error(place, fmt::format("the byte size of {} blocks of {} overflows", blocks, ti->name));
    }
    t.bytes = blocks * static_cast<std::uint64_t>(ti->type_size);
    t.offset = c.u64("tensor " + quote_name(t.name) + " offset");
    out.m_tensors.push_back(std::move(t));
  }

  // The data section starts at the aligned end of the tensor infos (alignment <= 2^31 and
  // pos <= the file size, so this cannot wrap). With no tensors ggml does not need the padding.
  const std::uint64_t a = out.m_alignment;
  out.m_data_start = (c.pos() + a - 1) / a * a;
  const std::uint64_t size = bytes.size();
  if (!out.m_tensors.empty() && out.m_data_start > size) {
    throw_input_error(src, fmt::format("the data section starts at {} (the tensor infos end at {}, "
                                       "aligned to {}), past the end of the {}-byte file",
                                       out.m_data_start, c.pos(), a, size));
  }
  const std::uint64_t data_bytes = out.m_data_start <= size ? size - out.m_data_start : 0;
  for (const auto& t : out.m_tensors) {
    const std::string place = tensor_place(src, t.name);
    if (t.offset % a != 0) {
      throw_input_error(place, fmt::format("offset {} is not a multiple of the alignment {}", t.offset, a));
    }
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset) {
      throw_input_error(place, fmt::format("data at offset {} ({} bytes) runs past the end of the "
                                           "{}-byte data section",
                                           t.offset, t.bytes, data_bytes));
    }
  }
  // No two tensors may share a byte: by offset, each must start at or after the furthest end yet.
  std::vector<std::size_t> order(out.m_tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return out.m_tensors[x].offset < out.m_tensors[y].offset;
  });
  const gguf_tensor* furthest = nullptr;
  for (const std::size_t i : order) {
    const auto& t = out.m_tensors[i];
    if (t.bytes == 0) continue;
    if (furthest != nullptr && t.offset < furthest->offset + furthest->bytes) {
      throw_input_error(tensor_place(src, t.name),
                        fmt::format("data [{}, {}) overlaps tensor {} at [{}, {})", t.offset,
                                    t.offset + t.bytes, quote_name(furthest->name), furthest->offset,
                                    furthest->offset + furthest->bytes));
    }
    if (furthest == nullptr || t.offset + t.bytes > furthest->offset + furthest->bytes) furthest = &t;
  }
  out.m_file = std::move(file);
  return out;
}

gguf_file gguf_file::open(const std::filesystem::path& path) { return parse(mapped_file::open(path)); }

bool gguf_file::has_magic(const std::filesystem::path& path) {
  // Only a regular file is opened: a FIFO or a device would block the read (or never end).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

const gguf_value* gguf_file::find_key(std::string_view key) const {
  for (const auto& [k, v] : m_kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

const gguf_tensor* gguf_file::find(std::string_view name) const {
  const auto it = m_by_name.find(std::string(name));
  return it == m_by_name.end() ? nullptr : &m_tensors[it->second];
}

std::span<const std::byte> gguf_file::data(const gguf_tensor& t) const {
  const auto all = m_file->bytes();
  // Parsed tensors always lie inside; a tensor built by hand must not read outside the map.
  if (m_data_start > all.size() || t.offset > all.size() - m_data_start ||
      t.bytes > all.size() - m_data_start - t.offset) {
    throw_input_error(tensor_place(source(), t.name), "data lies outside the file");
  }
  return all.subspan(static_cast<std::size_t>(m_data_start + t.offset), static_cast<std::size_t>(t.bytes));
}

std::vector<float> gguf_file::decode_rows(const gguf_tensor& t, std::int64_t r0, std::int64_t r1) const {
  const std::string place = tensor_place(source(), t.name);
  const auto* known = find(t.name);
  if (known == nullptr) throw_input_error(place, "no such tensor in this file");
  const auto& ti = info(known->type);
  if (!ti.decodes) {
    throw_input_error(place, fmt::format("type {} is not one numprobe decodes", ti.name));
  }
  const std::int64_t rows = known->rows();
  if (r0 < 0 || r1 < r0 || r1 > rows) {
    throw_input_error(place, fmt::format("rows [{}, {}) are outside the tensor's {} rows", r0, r1, rows));
  }
  // Each row is cols / block_size whole blocks (ne[0] is a multiple of the block size), so rows
  // [r0, r1) are one contiguous run of blocks.
  const auto cols = static_cast<std::uint64_t>(known->cols());
  const std::uint64_t row_bytes = cols / static_cast<std::uint64_t>(ti.block_size) *
                                  static_cast<std::uint64_t>(ti.type_size);
  const auto n = static_cast<std::uint64_t>(r1 - r0);
  const auto bytes = data(*known).subspan(static_cast<std::size_t>(static_cast<std::uint64_t>(r0) * row_bytes),
                                          static_cast<std::size_t>(n * row_bytes));
  std::vector<float> out(static_cast<std::size_t>(n * cols));
  if (!out.empty()) dequantize_blocks(known->type, bytes, out);
  return out;
}

void gguf_file::release_pages(const gguf_tensor& t) const noexcept {
  const std::uint64_t size = m_file->bytes().size();
  if (m_data_start > size || t.offset > size - m_data_start) return;
  m_file->release_pages(static_cast<std::size_t>(m_data_start + t.offset), static_cast<std::size_t>(t.bytes));
}

}  // namespace numprobe::io
