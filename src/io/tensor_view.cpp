#include "numprobe/io/tensor_view.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <mutex>

#include "numprobe/base/error.hpp"

namespace numprobe::io {
namespace {

using formats::format_id;

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // files give no alignment guarantee
  return v;
}

// Codes of 8 bits or fewer decode through a 256-entry table built once from the formats
// layer's exact decode, so the streaming pass costs a load per element.
const std::array<double, 256>& byte_table(format_id f) {
  static std::array<std::array<double, 256>, 16> tables;
  static std::array<std::once_flag, 16> once;
  const auto i = static_cast<std::size_t>(f);
  std::call_once(once.at(i), [&] {
    for (std::uint32_t c = 0; c < 256; ++c) tables[i][c] = formats::decode(f, c);
  });
  return tables[i];
}

const std::vector<double>& f16_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (std::uint32_t c = 0; c < 65536; ++c) t[c] = formats::decode(format_id::m_f16, c);
    return t;
  }();
  return table;
}

template <class T>
void decode_plain(const std::byte* base, std::uint64_t first, std::span<double> out) {
  const std::byte* p = base + first * sizeof(T);
  for (std::size_t i = 0; i < out.size(); ++i, p += sizeof(T)) {
    out[i] = static_cast<double>(load<T>(p));
  }
}

}  // namespace

std::uint64_t checked_element_count(std::span<const std::uint64_t> shape,
                                    const std::string& place) {
  std::uint64_t n = 1;
  for (const auto d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      throw_input_error(place, "shape's element count overflows 64 bits");
    }
  }
  return n;
}

std::uint64_t checked_byte_count(io::dtype type, std::uint64_t count, const std::string& place) {
  std::uint64_t nbits = 0;
  if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(bits(type)), &nbits)) {
    throw_input_error(place, "shape x dtype size overflows 64 bits");
  }
  if (nbits % 8 != 0) {
    throw_input_error(place, "packed " + std::string(name(type)) + " tensor of " +
                                 std::to_string(count) + " elements is not a whole number of bytes");
  }
  return nbits / 8;
}

std::uint64_t tensor_view::element_count() const { return checked_element_count(shape, place()); }

std::string tensor_view::place() const { return name.empty() ? source : source + ":" + name; }

tensor_view tensor_view::reinterpret(io::dtype as) const {
  if (bits(as) != bits(dtype)) {
    throw_input_error(place(), "cannot read " + std::string(io::name(dtype)) + " as " +
                                   std::string(io::name(as)) + ": storage widths differ");
  }
  tensor_view v = *this;
  v.dtype = as;
  return v;
}

void tensor_view::decode(std::uint64_t first, std::span<double> out) const {
  const std::uint64_t n = element_count();
  if (first > n || out.size() > n - first) {
    throw_input_error(place(), "decode range beyond the tensor's " + std::to_string(n) +
                                   " elements");
  }
  const std::byte* base = bytes.data();
  switch (dtype) {
    case io::dtype::m_f64: return decode_plain<double>(base, first, out);
    case io::dtype::m_f32: return decode_plain<float>(base, first, out);
    case io::dtype::m_i64: return decode_plain<std::int64_t>(base, first, out);
    case io::dtype::m_i32: return decode_plain<std::int32_t>(base, first, out);
    case io::dtype::m_i16: return decode_plain<std::int16_t>(base, first, out);
    case io::dtype::m_i8: return decode_plain<std::int8_t>(base, first, out);
    case io::dtype::m_u64: return decode_plain<std::uint64_t>(base, first, out);
    case io::dtype::m_u32: return decode_plain<std::uint32_t>(base, first, out);
    case io::dtype::m_u16: return decode_plain<std::uint16_t>(base, first, out);
    case io::dtype::m_u8: return decode_plain<std::uint8_t>(base, first, out);
    case io::dtype::m_bool:
      for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = base[first + i] != std::byte{0} ? 1.0 : 0.0;
      }
      return;
    case io::dtype::m_bf16: {
      const std::byte* p = base + first * 2;
      for (std::size_t i = 0; i < out.size(); ++i, p += 2) {
        out[i] = std::bit_cast<float>(std::uint32_t{load<std::uint16_t>(p)} << 16);
      }
      return;
    }
    case io::dtype::m_f16: {
      const auto& t = f16_table();
      const std::byte* p = base + first * 2;
      for (std::size_t i = 0; i < out.size(); ++i, p += 2) out[i] = t[load<std::uint16_t>(p)];
      return;
    }
    case io::dtype::m_e2m1_packed: {
      const auto& t = byte_table(format_id::m_e2m1);
      for (std::size_t i = 0; i < out.size(); ++i) {
        const std::uint64_t k = first + i;
        const auto b = std::to_integer<unsigned>(base[k / 2]);
        out[i] = t[(k & 1) ? (b >> 4) : (b & 0xFu)];
      }
      return;
    }
    case io::dtype::m_e2m3_packed:
    case io::dtype::m_e3m2_packed: {
      const auto& t = byte_table(*info(dtype).format);
      const std::size_t nbytes = bytes.size();
      for (std::size_t i = 0; i < out.size(); ++i) {
        const std::uint64_t bit = (first + i) * 6;
        const std::size_t at = bit / 8;
        unsigned window = std::to_integer<unsigned>(base[at]);
        if (at + 1 < nbytes) window |= std::to_integer<unsigned>(base[at + 1]) << 8;
        out[i] = t[(window >> (bit % 8)) & 0x3Fu];
      }
      return;
    }
    case io::dtype::m_raw8:
      throw_input_error(place(), "dtype raw8 ('<V1') does not say which 8-bit format it holds; "
                                 "name the format (e.g. e4m3fn) to read it");
    default: {
      // One code per byte: the 8-bit floats and ml_dtypes' unpacked fp6/fp4.
      const auto& t = byte_table(*info(dtype).format);
      for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = t[std::to_integer<unsigned>(base[first + i])];
      }
      return;
    }
  }
}

std::vector<double> tensor_view::to_doubles() const {
  const std::uint64_t n = element_count();
  // The view was validated against the file, so n is bounded by the file's size in bits.
  std::vector<double> out(static_cast<std::size_t>(n));
  decode(0, out);
  return out;
}

void tensor_view::for_each_chunk(
    std::size_t chunk,
    const std::function<void(std::uint64_t first, std::span<const double>)>& fn) const {
  const std::uint64_t n = element_count();
  if (chunk == 0) chunk = 1;
  std::vector<double> buf(static_cast<std::size_t>(std::min<std::uint64_t>(chunk, n)));
  for (std::uint64_t first = 0; first < n; first += chunk) {
    const auto len = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, n - first));
    std::span<double> s(buf.data(), len);
    decode(first, s);
    fn(first, s);
  }
}

}  // namespace numprobe::io
