#include "numprobe/io/npy.hpp"

#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "atomic_write.hpp"
#include "numprobe/base/error.hpp"
#include "utf8.hpp"

namespace numprobe::io {
namespace {

constexpr char k_magic[] = "\x93NUMPY";
constexpr std::size_t k_magic_len = 6;
constexpr std::size_t k_max_ndim = 64;  // numpy's NPY_MAXDIMS

struct descr_entry {
  std::string_view descr;  // without the byte-order character
  dtype type;
};

// What each descr means; the comment in npy.hpp says where the void types come from.
constexpr descr_entry k_descrs[] = {
    {"f8", dtype::m_f64}, {"f4", dtype::m_f32},  {"f2", dtype::m_f16},  {"V2", dtype::m_bf16},
    {"f1", dtype::m_e5m2}, {"V1", dtype::m_raw8}, {"i1", dtype::m_i8},  {"i2", dtype::m_i16},
    {"i4", dtype::m_i32}, {"i8", dtype::m_i64},  {"u1", dtype::m_u8},   {"u2", dtype::m_u16},
    {"u4", dtype::m_u32}, {"u8", dtype::m_u64},  {"b1", dtype::m_bool}, {"?", dtype::m_bool},
};

// Text from the file, made safe to quote in a one-line message: control bytes (a NUL would
// cut the message short where it is printed as a C string), DEL and non-ASCII bytes are
// written as \xNN.
std::string printable(std::string_view s) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u < 0x7F) {
      out += ch;
    } else {
      out += "\\x";
      out += k_hex[u >> 4];
      out += k_hex[u & 0xF];
    }
  }
  return out;
}

// The header is a Python dict literal; this reads exactly the subset numpy writes (string
// keys; string, bool and int-tuple values) and nothing more.
class header_parser {
 public:
  header_parser(std::string_view text, const std::string& place) : m_s(text), m_place(place) {}

  struct result {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::uint64_t>> shape;
  };

  result parse() {
    result r;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string("header key");
      expect(':');
      skip_space();
      if (key == "descr") {
        if (r.descr) fail("duplicate key 'descr'");
        if (peek() == '[') fail("structured dtypes (a list 'descr') are not supported");
        r.descr = parse_string("'descr'");
      } else if (key == "fortran_order") {
        if (r.fortran_order) fail("duplicate key 'fortran_order'");
        r.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (r.shape) fail("duplicate key 'shape'");
        r.shape = parse_shape();
      } else {
        fail("unexpected header key '" + printable(key) + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++m_i;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}' in the header dict");
    }
    ++m_i;
    skip_space();
    if (m_i != m_s.size()) fail("unexpected text after the header dict");
    if (!r.descr) fail("header has no 'descr'");
    if (!r.fortran_order) fail("header has no 'fortran_order'");
    if (!r.shape) fail("header has no 'shape'");
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw_input_error(m_place, what); }

  char peek() const { return m_i < m_s.size() ? m_s[m_i] : '\0'; }

  void skip_space() {
    while (m_i < m_s.size() && (m_s[m_i] == ' ' || m_s[m_i] == '\t' || m_s[m_i] == '\n' ||
                                m_s[m_i] == '\r')) {
      ++m_i;
    }
  }

  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("malformed header: expected '") + c + "'");
    ++m_i;
  }

  std::string parse_string(const char* what) {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail(std::string("malformed header: expected a string for ") + what);
    ++m_i;
    const std::size_t start = m_i;
    while (m_i < m_s.size() && m_s[m_i] != q) {
      if (m_s[m_i] == '\\') fail("escapes in header strings are not supported");
      ++m_i;
    }
    if (m_i >= m_s.size()) fail("malformed header: unterminated string");
    std::string out(m_s.substr(start, m_i - start));
    ++m_i;
    return out;
  }

  bool parse_bool() {
    if (m_s.substr(m_i, 4) == "True") {
      m_i += 4;
      return true;
    }
    if (m_s.substr(m_i, 5) == "False") {
      m_i += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }

  std::uint64_t parse_dim() {
    skip_space();
    if (peek() == '-') fail("negative dimension in 'shape'");
    if (peek() < '0' || peek() > '9') fail("'shape' must be a tuple of integers");
    std::uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(v, 10u, &v) ||
          __builtin_add_overflow(v, static_cast<std::uint64_t>(peek() - '0'), &v)) {
        fail("absurd dimension in 'shape' (beyond 64 bits)");
      }
      ++m_i;
    }
    if (peek() == 'L') ++m_i;  // Python 2 long literals in old files
    return v;
  }

  std::vector<std::uint64_t> parse_shape() {
    if (peek() != '(') fail("'shape' must be a tuple");
    ++m_i;
    std::vector<std::uint64_t> shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (shape.size() >= k_max_ndim) fail("'shape' has more than 64 dimensions");
      shape.push_back(parse_dim());
      skip_space();
      if (peek() == ',') {
        ++m_i;
        continue;
      }
      if (peek() != ')') fail("malformed 'shape' tuple");
    }
    ++m_i;
    return shape;
  }

  std::string_view m_s;
  std::size_t m_i = 0;
  const std::string& m_place;
};

dtype dtype_of_descr(const std::string& descr, const std::string& place) {
  if (descr.empty()) throw_input_error(place, "empty 'descr'");
  const char order = descr[0];
  std::string_view body(descr);
  if (order == '<' || order == '>' || order == '|' || order == '=') body.remove_prefix(1);
  for (const auto& e : k_descrs) {
    if (e.descr != body) continue;
    // '>' is harmless for one-byte types; wider big-endian data would need a byte swap.
    if (order == '>' && bits(e.type) > 8) {
      throw_input_error(place, "big-endian 'descr' '" + printable(descr) + "' is not supported");
    }
    return e.type;
  }
  throw_input_error(place, "unsupported 'descr' '" + printable(descr) + "'");
}

std::string_view descr_of(dtype type, const std::string& place) {
  switch (type) {
    case dtype::m_f64: return "<f8";
    case dtype::m_f32: return "<f4";
    case dtype::m_f16: return "<f2";
    case dtype::m_bf16: return "<V2";
    case dtype::m_i64: return "<i8";
    case dtype::m_i32: return "<i4";
    case dtype::m_i16: return "<i2";
    case dtype::m_i8: return "|i1";
    case dtype::m_u64: return "<u8";
    case dtype::m_u32: return "<u4";
    case dtype::m_u16: return "<u2";
    case dtype::m_u8: return "|u1";
    case dtype::m_bool: return "|b1";
    case dtype::m_e2m3_packed:
    case dtype::m_e3m2_packed:
    case dtype::m_e2m1_packed:
      throw_input_error(place, "packed " + std::string(name(type)) +
                                   " cannot be stored in .npy; unpack to one code per byte");
    default:
      // Every 8-bit float: what numpy.save writes for ml_dtypes' 8-bit types.
      return "|V1";
  }
}

std::uint32_t read_le(const std::byte* p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(p[i]);
  return v;
}

}  // namespace

tensor_view parse_npy(std::shared_ptr<const mapped_file> file) {
  const std::string& place = file->source();
  const auto b = file->bytes();
  if (b.size() < 10 || std::memcmp(b.data(), k_magic, k_magic_len) != 0) {
    throw_input_error(place, "not a .npy file (missing \\x93NUMPY magic)");
  }
  const auto major = std::to_integer<int>(b[6]);
  const auto minor = std::to_integer<int>(b[7]);
  if (major < 1 || major > 3 || minor != 0) {
    throw_input_error(place, "unsupported .npy format version " + std::to_string(major) + "." +
                                 std::to_string(minor));
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + len_bytes;
  if (b.size() < prefix) throw_input_error(place, "truncated header length field");
  const std::uint64_t hlen = read_le(b.data() + 8, static_cast<int>(len_bytes));
  if (hlen > k_npy_max_header_bytes) {
    throw_input_error(place, "header length " + std::to_string(hlen) + " exceeds the bound of " +
                                 std::to_string(k_npy_max_header_bytes) + " bytes");
  }
  if (prefix + hlen > b.size()) {
    throw_input_error(place, "header length " + std::to_string(hlen) + " runs past the end of the " +
                                 std::to_string(b.size()) + "-byte file");
  }
  const std::string_view text(reinterpret_cast<const char*>(b.data() + prefix), hlen);
  // Version 3 exists to allow UTF-8 headers; versions 1 and 2 are latin-1, whose bytes our
  // ASCII-only parser rejects on its own if they matter.
  if (major == 3 && !detail::is_valid_utf8(text)) {
    throw_input_error(place, "header is not valid UTF-8");
  }
  const auto h = header_parser(text, place).parse();
  const dtype type = dtype_of_descr(*h.descr, place);
  if (*h.fortran_order) {
    throw_input_error(place, "fortran_order True (column-major) is not supported; "
                             "save a C-ordered array (numpy.ascontiguousarray)");
  }
  const std::uint64_t count = checked_element_count(*h.shape, place);
  const std::uint64_t nbytes = checked_byte_count(type, count, place);
  const std::uint64_t data_at = prefix + hlen;
  const std::uint64_t have = b.size() - data_at;
  if (nbytes > have) {
    throw_input_error(place, "truncated data: shape x dtype needs " + std::to_string(nbytes) +
                                 " bytes, the file holds " + std::to_string(have));
  }
  if (nbytes < have) {
    throw_input_error(place, "shape x dtype is " + std::to_string(nbytes) + " bytes but " +
                                 std::to_string(have) + " bytes follow the header");
  }
  tensor_view v;
  v.dtype = type;
  v.shape = *h.shape;
  v.bytes = b.subspan(static_cast<std::size_t>(data_at), static_cast<std::size_t>(nbytes));
  v.source = place;
  v.owner = std::move(file);
  return v;
}

tensor_view read_npy(const std::filesystem::path& path) {
  return parse_npy(mapped_file::open(path));
}

namespace {

std::string header_text(std::span<const std::uint64_t> shape, dtype type,
                        const std::string& place) {
  std::string h = "{'descr': '";
  h += descr_of(type, place);
  h += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) h += ", ";
    h += std::to_string(shape[i]);
  }
  if (shape.size() == 1) h += ',';
  h += "), }";
  return h;
}

// Magic, version, length and padded header: numpy pads with spaces and ends with '\n' so
// the data starts on a 64-byte boundary.
std::vector<std::byte> header_prefix(std::span<const std::uint64_t> shape, dtype type,
                                     const std::string& place) {
  std::string h = header_text(shape, type, place);
  int major = 1;
  std::size_t prefix = 10;
  auto padded = [&] { return (prefix + h.size() + 1 + 63) / 64 * 64 - prefix; };
  if (padded() > 0xFFFF) {
    major = 2;
    prefix = 12;
  }
  const std::size_t hlen = padded();
  h.append(hlen - h.size() - 1, ' ');
  h += '\n';
  std::vector<std::byte> out(prefix + hlen);
  std::memcpy(out.data(), k_magic, k_magic_len);
  out[6] = std::byte(major);
  out[7] = std::byte{0};
  for (std::size_t i = 0; i < prefix - 8; ++i) out[8 + i] = std::byte((hlen >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + prefix, h.data(), h.size());
  return out;
}

std::vector<std::byte> npy_prefix(std::span<const std::uint64_t> shape, dtype type,
                                  std::span<const std::byte> bytes, const std::string& place) {
  const std::uint64_t nbytes =
      checked_byte_count(type, checked_element_count(shape, place), place);
  if (nbytes != bytes.size()) {
    throw_input_error(place, "shape x dtype is " + std::to_string(nbytes) + " bytes, given " +
                                 std::to_string(bytes.size()));
  }
  return header_prefix(shape, type, place);
}

template <class T>
std::span<const std::byte> as_bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

}  // namespace

std::vector<std::byte> npy_header(std::span<const std::uint64_t> shape, dtype type) {
  (void)checked_byte_count(type, checked_element_count(shape, "npy"), "npy");
  return header_prefix(shape, type, "npy");
}

std::vector<std::byte> npy_bytes(std::span<const std::uint64_t> shape, dtype type,
                                 std::span<const std::byte> bytes) {
  auto out = npy_prefix(shape, type, bytes, "npy");
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               dtype type, std::span<const std::byte> bytes) {
  const auto prefix = npy_prefix(shape, type, bytes, path.string());
  detail::atomic_write(path, {std::span<const std::byte>(prefix), bytes});
}

void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               const std::vector<double>& values) {
  write_npy(path, shape, dtype::m_f64, as_bytes_of(values));
}

void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               const std::vector<float>& values) {
  write_npy(path, shape, dtype::m_f32, as_bytes_of(values));
}

void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               const std::vector<std::uint8_t>& values) {
  write_npy(path, shape, dtype::m_u8, as_bytes_of(values));
}

}  // namespace numprobe::io
