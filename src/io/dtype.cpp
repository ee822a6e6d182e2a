#include "numprobe/io/dtype.hpp"

#include <array>
#include <cctype>
#include <string>

#include "numprobe/base/error.hpp"

namespace numprobe::io {
namespace {

using formats::format_id;

constexpr std::array<dtype_info, 25> k_dtypes{{
    {dtype::m_f64, "f64", "F64", 64, format_id::m_f64},
    {dtype::m_f32, "f32", "F32", 32, format_id::m_f32},
    {dtype::m_f16, "f16", "F16", 16, format_id::m_f16},
    {dtype::m_bf16, "bf16", "BF16", 16, format_id::m_bf16},
    {dtype::m_e4m3fn, "e4m3fn", "F8_E4M3", 8, format_id::m_e4m3fn},
    {dtype::m_e4m3fnuz, "e4m3fnuz", "F8_E4M3FNUZ", 8, format_id::m_e4m3fnuz},
    {dtype::m_e5m2, "e5m2", "F8_E5M2", 8, format_id::m_e5m2},
    {dtype::m_e5m2fnuz, "e5m2fnuz", "F8_E5M2FNUZ", 8, format_id::m_e5m2fnuz},
    {dtype::m_e8m0, "e8m0", "F8_E8M0", 8, format_id::m_e8m0},
    {dtype::m_e2m3, "e2m3", "", 8, format_id::m_e2m3},
    {dtype::m_e3m2, "e3m2", "", 8, format_id::m_e3m2},
    {dtype::m_e2m1, "e2m1", "", 8, format_id::m_e2m1},
    {dtype::m_e2m3_packed, "e2m3_packed", "F6_E2M3", 6, format_id::m_e2m3},
    {dtype::m_e3m2_packed, "e3m2_packed", "F6_E3M2", 6, format_id::m_e3m2},
    {dtype::m_e2m1_packed, "e2m1_packed", "F4", 4, format_id::m_e2m1},
    {dtype::m_i64, "i64", "I64", 64, std::nullopt},
    {dtype::m_i32, "i32", "I32", 32, std::nullopt},
    {dtype::m_i16, "i16", "I16", 16, std::nullopt},
    {dtype::m_i8, "i8", "I8", 8, format_id::m_i8},
    {dtype::m_u64, "u64", "U64", 64, std::nullopt},
    {dtype::m_u32, "u32", "U32", 32, std::nullopt},
    {dtype::m_u16, "u16", "U16", 16, std::nullopt},
    {dtype::m_u8, "u8", "U8", 8, std::nullopt},
    {dtype::m_bool, "bool", "BOOL", 8, std::nullopt},
    {dtype::m_raw8, "raw8", "", 8, std::nullopt},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const dtype_info& info(dtype id) { return k_dtypes.at(static_cast<std::size_t>(id)); }
std::string_view name(dtype id) { return info(id).name; }
int bits(dtype id) { return info(id).bits; }
bool is_packed(dtype id) { return info(id).bits < 8; }

std::optional<dtype> from_safetensors_name(std::string_view text) {
  for (const auto& d : k_dtypes) {
    if (!d.safetensors.empty() && d.safetensors == text) return d.id;
  }
  return std::nullopt;
}

std::optional<dtype> from_format(formats::format_id id) {
  for (const auto& d : k_dtypes) {
    if (d.format == id && d.bits >= 8) return d.id;
  }
  return std::nullopt;
}

dtype parse_dtype(std::string_view text, const std::string& place) {
  if (auto d = from_safetensors_name(text)) return *d;
  const std::string l = lower(text);
  for (const auto& d : k_dtypes) {
    if (d.name == l) return d.id;
  }
  if (l == "float64" || l == "double") return dtype::m_f64;
  if (l == "float32" || l == "float") return dtype::m_f32;
  if (l == "int64") return dtype::m_i64;
  if (l == "int32") return dtype::m_i32;
  if (l == "int16") return dtype::m_i16;
  if (l == "int8") return dtype::m_i8;
  if (l == "uint64") return dtype::m_u64;
  if (l == "uint32") return dtype::m_u32;
  if (l == "uint16") return dtype::m_u16;
  if (l == "uint8") return dtype::m_u8;
  // Format names and aliases (bfloat16, float8_e4m3fn, fp4, ...) come from the formats layer;
  // parse_format throws its own one-line error for names nobody knows.
  const auto f = formats::parse_format(text, place);
  if (auto d = from_format(f)) return *d;
  throw_input_error(place, "format '" + std::string(text) + "' has no tensor-file dtype");
}

}  // namespace numprobe::io
