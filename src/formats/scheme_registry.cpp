// The scheme registry (one line per named scheme or preset), block geometry and the exact
// bits-per-element accounting.
#include <algorithm>
#include <array>
#include <cctype>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/scheme.hpp"

namespace numprobe::formats {
namespace {

using fid = format_id;
using sk = scheme_kind;

constexpr scheme_config make(sk kind, fid element, fid scale, std::int64_t group = 128,
                             std::int64_t br = 128, std::int64_t bc = 128,
                             double amax_floor = 0.0) {
  scheme_config c;
  c.kind = kind;
  c.element = element;
  c.scale_format = scale;
  c.group = group;
  c.block_rows = br;
  c.block_cols = bc;
  c.amax_floor = amax_floor;
  return c;
}

// The bits column is filled in by all_schemes() from bits_per_element(4096 x 4096).
// A new scheme or preset is one line here (STYLE.md, "registries at each extension point").
std::array<scheme_info, 23> g_schemes = {{
    {"none", "plain cast to the element format, scale 1", make(sk::m_none, fid::m_e4m3fn, fid::m_f32), 0},
    {"tensor", "one scale per tensor, s = amax / max", make(sk::m_tensor, fid::m_e4m3fn, fid::m_f32), 0},
    {"channel", "one scale per output channel (row; --axis 0: per column)", make(sk::m_channel, fid::m_e4m3fn, fid::m_f32), 0},
    {"token", "one scale per token (row; --axis 0: per column)", make(sk::m_token, fid::m_e4m3fn, fid::m_f32), 0},
    {"group", "groups of G along the reduction axis, last group partial", make(sk::m_group, fid::m_i4, fid::m_f16), 0},
    {"block2d", "DeepSeek-V3 128x128 weight blocks, fp32 weight_scale_inv", make(sk::m_block2d, fid::m_e4m3fn, fid::m_f32), 0},
    {"mx", "OCP MX: blocks of 32, e8m0 shared exponent", make(sk::m_mx, fid::m_e2m1, fid::m_e8m0), 0},
    {"nvfp4", "blocks of 16, e4m3 block scale x fp32 tensor scale amax/(6*448)", make(sk::m_nvfp4, fid::m_e2m1, fid::m_e4m3fn), 0},
    {"int4-awq", "AWQ: asymmetric uint4 groups of 128, fp16 scale, zero point", make(sk::m_asym, fid::m_u4, fid::m_f16), 0},
    {"int4-sym", "symmetric int4 groups of 128, s = amax / 7, fp16 scale", make(sk::m_group, fid::m_i4, fid::m_f16), 0},
    // Presets: a scheme with its usual element and scale formats.
    {"mxfp4", "MX with e2m1 elements", make(sk::m_mx, fid::m_e2m1, fid::m_e8m0), 0},
    {"mxfp6", "MX with e2m3 elements", make(sk::m_mx, fid::m_e2m3, fid::m_e8m0), 0},
    {"mxfp6-e3m2", "MX with e3m2 elements", make(sk::m_mx, fid::m_e3m2, fid::m_e8m0), 0},
    {"mxfp8", "MX with e4m3 elements", make(sk::m_mx, fid::m_e4m3fn, fid::m_e8m0), 0},
    {"mxfp8-e5m2", "MX with e5m2 elements", make(sk::m_mx, fid::m_e5m2, fid::m_e8m0), 0},
    {"mxint8", "MX with int8 elements (fixed point, 6 fraction bits)", make(sk::m_mx, fid::m_i8, fid::m_e8m0), 0},
    {"fp8-tensor", "e4m3 with one fp32 scale per tensor", make(sk::m_tensor, fid::m_e4m3fn, fid::m_f32), 0},
    {"fp8-channel", "e4m3 with one fp32 scale per output channel", make(sk::m_channel, fid::m_e4m3fn, fid::m_f32), 0},
    {"fp8-block128", "DeepSeek-V3 weights: e4m3, 128x128 blocks, fp32 weight_scale_inv", make(sk::m_block2d, fid::m_e4m3fn, fid::m_f32), 0},
    {"fp8-act1x128", "DeepSeek-V3 activations: 1x128 tiles, s = max(amax, 1e-4) / 448", make(sk::m_block2d, fid::m_e4m3fn, fid::m_f32, 128, 1, 128, 1e-4), 0},
    {"fp8-act1x128-ue8m0", "1x128 activation tiles, scale rounded up to a power of two", make(sk::m_block2d, fid::m_e4m3fn, fid::m_e8m0, 128, 1, 128, 1e-4), 0},
    {"int8-channel", "int8 with one fp32 scale per output channel", make(sk::m_channel, fid::m_i8, fid::m_f32), 0},
    {"int4-g128", "symmetric int4, groups of 128, fp16 scales", make(sk::m_group, fid::m_i4, fid::m_f16), 0},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

bool is_scale_format(fid f) {
  return f == fid::m_f32 || f == fid::m_f16 || f == fid::m_bf16 || f == fid::m_e4m3fn ||
         f == fid::m_e8m0;
}

}  // namespace

std::span<const scheme_info> all_schemes() {
  static const bool filled = [] {
    for (auto& s : g_schemes) s.bits_per_element = bits_per_element(s.defaults, 4096, 4096);
    return true;
  }();
  (void)filled;
  return g_schemes;
}

const scheme_info& find_scheme(std::string_view text, const std::string& place) {
  const std::string key = lower(text);
  for (const auto& s : all_schemes())
    if (s.name == key) return s;
  std::string known;
  for (const auto& s : all_schemes()) known += (known.empty() ? "" : ", ") + std::string(s.name);
  throw_input_error(place, "unknown scheme '" + std::string(text) + "' (known: " + known + ")");
}

std::string_view name(scheme_kind k) {
  switch (k) {
    case sk::m_none: return "none";
    case sk::m_tensor: return "tensor";
    case sk::m_channel: return "channel";
    case sk::m_token: return "token";
    case sk::m_group: return "group";
    case sk::m_block2d: return "block2d";
    case sk::m_mx: return "mx";
    case sk::m_nvfp4: return "nvfp4";
    case sk::m_asym: return "asym";
  }
  return "?";
}

std::string_view name(mx_rule r) {
  switch (r) {
    case mx_rule::m_floor: return "floor";
    case mx_rule::m_ceil: return "ceil";
    case mx_rule::m_rceil: return "rceil";
    case mx_rule::m_even: return "even";
    case mx_rule::m_nearest: return "nearest";
  }
  return "?";
}

mx_rule parse_mx_rule(std::string_view text, const std::string& place) {
  const std::string key = lower(text);
  for (auto r : {mx_rule::m_floor, mx_rule::m_ceil, mx_rule::m_rceil, mx_rule::m_even,
                 mx_rule::m_nearest})
    if (name(r) == key) return r;
  throw_input_error(place, "unknown scale rule '" + std::string(text) +
                               "' (known: floor, ceil, rceil, even, nearest)");
}

void validate(const scheme_config& c, std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0)
    throw_input_error("shape", "tensor must have at least one element in each dimension");
  if (c.axis != 0 && c.axis != 1) throw_input_error("--axis", "must be 0 (rows) or 1 (cols)");
  // e8m0 is a plain-cast target (ml_dtypes float8_e8m0fnu), never a scaled element.
  if (c.element == fid::m_f64 || (c.element == fid::m_e8m0 && c.kind != sk::m_none))
    throw_input_error("--format", std::string(name(c.element)) +
                                      (c.element == fid::m_e8m0 ? " elements take --scheme none only"
                                                                : " is not an element format"));
  // The NVFP4 axes mean nothing to other schemes: refused by name, never ignored.
  if (c.kind != sk::m_nvfp4) {
    const quant_conventions d;
    if (c.conv.division != d.division)
      throw_input_error("--scale-division", std::string(name(c.conv.division)) + " applies to nvfp4 only");
    if (c.conv.floor != d.floor)
      throw_input_error("--scale-floor", std::string(name(c.conv.floor)) + " applies to nvfp4 only");
    if (c.conv.arith != d.arith)
      throw_input_error("--scale-arith", std::string(name(c.conv.arith)) + " applies to nvfp4 only");
  }
  if (c.kind != sk::m_none && !is_scale_format(c.scale_format))
    throw_input_error("--scale-format", std::string(name(c.scale_format)) +
                                            " is not a scale format (f32, f16, bf16, e4m3fn, e8m0)");
  if ((c.kind == sk::m_group || c.kind == sk::m_asym) && c.group <= 0)
    throw_input_error("--group", "group size must be positive");
  if (c.kind == sk::m_block2d && (c.block_rows <= 0 || c.block_cols <= 0))
    throw_input_error("--block", "block extents must be positive");
  if (c.kind == sk::m_asym && c.element != fid::m_u4)
    throw_input_error("--format", "an asymmetric (zero point) scheme needs uint4 elements");
  if (c.kind == sk::m_mx && c.scale_format != fid::m_e8m0)
    throw_input_error("--scale-format", "MX scales are e8m0 by definition");
  const auto& e = info(c.element);
  if (c.kind != sk::m_none && e.storage_bits > 16)
    throw_input_error("--format", std::string(e.name) + " elements are not block-scaled");
  if (c.kind != sk::m_none && !e.is_signed)
    if (c.kind != sk::m_asym)
      throw_input_error("--format", "unsigned elements need an asymmetric scheme (int4-awq)");
}

block_grid grid_of(const scheme_config& c, std::int64_t rows, std::int64_t cols) {
  block_grid g;
  g.rows = rows;
  g.cols = cols;
  std::int64_t along = 0;  // block length along `axis`; 0 means the whole axis
  switch (c.kind) {
    case sk::m_none:
    case sk::m_tensor:
      g.block_rows = rows;
      g.block_cols = cols;
      break;
    case sk::m_channel:
    case sk::m_token: along = c.axis == 1 ? cols : rows; break;
    case sk::m_group:
    case sk::m_asym: along = c.group; break;
    case sk::m_mx: along = 32; break;
    case sk::m_nvfp4: along = 16; break;
    case sk::m_block2d:
      g.block_rows = c.block_rows;
      g.block_cols = c.block_cols;
      break;
  }
  if (along > 0) {
    g.block_rows = c.axis == 1 ? 1 : along;
    g.block_cols = c.axis == 1 ? along : 1;
  }
  g.grid_rows = (rows + g.block_rows - 1) / g.block_rows;
  g.grid_cols = (cols + g.block_cols - 1) / g.block_cols;
  return g;
}

double bits_per_element(const scheme_config& c, std::int64_t rows, std::int64_t cols) {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  double bits = info(c.element).storage_bits * n;
  if (c.kind != sk::m_none) {
    const double blocks = static_cast<double>(grid_of(c, rows, cols).count());
    bits += blocks * info(c.scale_format).storage_bits;
    if (c.kind == sk::m_asym) bits += blocks * c.zero_point_bits;
    if (c.kind == sk::m_nvfp4) bits += 32;  // the fp32 tensor scale
  }
  return bits / n;
}

}  // namespace numprobe::formats
