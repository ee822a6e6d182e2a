// `numprobe formats [show F]`: the number formats (bits, bias, range, special codes, default
// overflow), the block-scaling schemes with their bits per element, and a format's code table.
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "numprobe/formats/scheme.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"

namespace numprobe::cli {
namespace {

namespace nf = formats;
using nf::format_id;

// Hex digits for a format's codes: 1 per nibble of storage (fp6 and fp4 in one byte/nibble).
std::string hex_code(const nf::format_info& f, std::uint64_t c) {
  const int digits = f.id == format_id::m_e2m3 || f.id == format_id::m_e3m2 ? 2
                                                                           : (f.storage_bits + 3) / 4;
  return fmt::format("0x{:0{}X}", c, digits);
}

using result::json_number;  // finite values exact (shortest round-trip form), the rest as strings

std::string text_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.9g}", v);
}

std::string_view overflow_name(nf::overflow o) {
  switch (o) {
    case nf::overflow::m_saturate: return "saturate";
    case nf::overflow::m_nan: return "nan";
    case nf::overflow::m_inf: return "inf";
    default: return "format-default";
  }
}

std::string layout(const nf::format_info& f) {
  if (!f.is_float) return fmt::format("{}int{}", f.is_signed ? "" : "u", f.bits);
  if (f.id == format_id::m_e8m0) return "0-8-0";
  return fmt::format("1-{}-{}", f.exponent_bits, f.mantissa_bits);
}

using code_range = std::pair<std::uint64_t, std::uint64_t>;

// NaN codes as inclusive ranges. Formats of <= 16 bits are enumerated through decode; the
// 32- and 64-bit IEEE formats follow from their layout (exponent all ones, fraction != 0;
// tf32 codes keep the low 13 bits zero).
std::vector<code_range> nan_ranges(const nf::format_info& f) {
  std::vector<code_range> r;
  if (f.id == format_id::m_f64)
    return {{0x7FF0000000000001ull, 0x7FFFFFFFFFFFFFFFull},
            {0xFFF0000000000001ull, 0xFFFFFFFFFFFFFFFFull}};
  if (f.id == format_id::m_f32) return {{0x7F800001u, 0x7FFFFFFFu}, {0xFF800001u, 0xFFFFFFFFu}};
  if (f.id == format_id::m_tf32) return {{0x7F802000u, 0x7FFFE000u}, {0xFF802000u, 0xFFFFE000u}};
  for (std::uint64_t c = 0; c < (std::uint64_t{1} << f.bits); ++c) {
    if (!nf::is_nan_code(f.id, static_cast<std::uint32_t>(c))) continue;
    if (!r.empty() && r.back().second + 1 == c) r.back().second = c;
    else r.emplace_back(c, c);
  }
  return r;
}

std::string ranges_text(const nf::format_info& f, const std::vector<code_range>& r) {
  if (r.empty()) return "none";
  std::string s;
  for (const auto& [a, b] : r) {
    s += s.empty() ? "" : ",";
    s += a == b ? hex_code(f, a) : hex_code(f, a) + "-" + hex_code(f, b);
  }
  return s;
}

struct format_codes {
  std::uint64_t max_finite = 0;
  std::optional<std::uint64_t> pos_inf, neg_inf, nan, neg_zero;
};

format_codes codes_of(const nf::format_info& f) {
  format_codes c;
  if (f.id == format_id::m_f64) {  // no 32-bit code: the IEEE binary64 patterns
    c.max_finite = std::bit_cast<std::uint64_t>(f.max_finite);
    c.pos_inf = 0x7FF0000000000000ull;
    c.neg_inf = 0xFFF0000000000000ull;
    c.nan = 0x7FF8000000000000ull;
    c.neg_zero = 0x8000000000000000ull;
    return c;
  }
  const auto s = nf::specials(f.id);
  c.max_finite = s.max_finite;
  if (s.pos_inf) c.pos_inf = *s.pos_inf;
  if (s.neg_inf) c.neg_inf = *s.neg_inf;
  if (s.nan) c.nan = *s.nan;
  if (s.neg_zero) c.neg_zero = *s.neg_zero;
  return c;
}

nlohmann::json format_json(const nf::format_info& f) {
  const auto c = codes_of(f);
  nlohmann::json nan = nlohmann::json::array();
  for (const auto& [a, b] : nan_ranges(f)) nan.push_back({hex_code(f, a), hex_code(f, b)});
  nlohmann::json inf = nlohmann::json::array();
  if (c.pos_inf) inf = {hex_code(f, *c.pos_inf), hex_code(f, *c.neg_inf)};
  return {{"name", f.name},
          {"layout", layout(f)},
          {"bits", f.bits},
          {"storage_bits", f.storage_bits},
          {"exponent_bits", f.exponent_bits},
          {"mantissa_bits", f.mantissa_bits},
          {"bias", f.bias},
          {"is_float", f.is_float},
          {"signed", f.is_signed},
          {"max_finite", json_number(f.max_finite)},
          {"max_finite_code", hex_code(f, c.max_finite)},
          {"lowest", json_number(f.lowest)},
          {"min_normal", json_number(f.min_normal)},
          {"min_subnormal", json_number(f.min_subnormal)},
          {"unit_roundoff", nf::unit_roundoff(f.id)},
          {"inf_codes", inf},
          {"nan_codes", nan},  // inclusive [first, last] ranges
          {"negative_zero_code", c.neg_zero ? nlohmann::json(hex_code(f, *c.neg_zero)) : nullptr},
          {"default_overflow", overflow_name(f.default_overflow)}};
}

void list_formats(const report_flags& out) {
  result::table formats_table{"number formats", {"format", "layout", "bits", "stored", "bias", "max finite", "min normal",
                                                 "min subnormal", "inf", "nan", "overflow"}, {}, false};
  for (const auto& f : nf::all_formats()) {
    const auto c = codes_of(f);
    formats_table.rows.push_back({std::string(f.name), layout(f), std::to_string(f.bits), std::to_string(f.storage_bits),
                                  f.is_float ? std::to_string(f.bias) : "-", text_number(f.max_finite),
                                  f.is_float ? text_number(f.min_normal) : "-",
                                  f.is_float && f.min_subnormal > 0 ? text_number(f.min_subnormal) : "-",
                                  c.pos_inf ? hex_code(f, *c.pos_inf) + "," + hex_code(f, *c.neg_inf) : "none",
                                  ranges_text(f, nan_ranges(f)), std::string(overflow_name(f.default_overflow))});
  }
  result::table schemes_table{"block-scaling schemes (bits/element with every stored scale, 4096x4096)",
                              {"scheme", "bits/element", "description"}, {}, false};
  for (const auto& sc : nf::all_schemes())
    schemes_table.rows.push_back({std::string(sc.name), fmt::format("{:.4f}", sc.bits_per_element),
                                  std::string(sc.description)});
  result::check_result c;
  c.backend = "ref";
  c.message = fmt::format("{} formats, {} schemes", formats_table.rows.size(), schemes_table.rows.size());
  result::view_builder v(c);
  v.add_table(formats_table);
  v.line("bits: value bits; stored: bits one unpacked element occupies; overflow: the default policy (saturate | "
         "nan | inf)");
  v.add_table(schemes_table);
  v.line("bits/element includes every stored scale and zero point (4096x4096 tensor)");
  c.tables.push_back(formats_table);
  c.tables.back().data = true;  // --csv: one row per format
  auto& doc = c.details;
  doc["formats"] = nlohmann::json::array();
  for (const auto& f : nf::all_formats()) doc["formats"].push_back(format_json(f));
  doc["schemes"] = nlohmann::json::array();
  for (const auto& sc : nf::all_schemes())
    doc["schemes"].push_back({{"name", sc.name},
                              {"description", sc.description},
                              {"element", nf::name(sc.defaults.element)},
                              {"bits_per_element", sc.bits_per_element}});
  write_command_reports(out, "formats", 0, std::move(c), 0);
}

std::string value_class(const nf::format_info& f, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  if (!f.is_float) return "integer";
  if (v == 0.0) return "zero";
  return std::fabs(v) < f.min_normal ? "subnormal" : "normal";
}

// Codes of interest for formats too wide to list: zeros, subnormal and normal extremes, one,
// max, the infinities and the canonical NaN.
std::vector<std::pair<std::string, std::uint64_t>> summary_codes(const nf::format_info& f) {
  const auto c = codes_of(f);
  auto code = [&](double v) -> std::uint64_t {
    if (f.id == format_id::m_f64) return std::bit_cast<std::uint64_t>(v);
    return nf::encode(f.id, v, nf::rounding::m_nearest_even, nf::overflow::m_inf);
  };
  std::vector<std::pair<std::string, std::uint64_t>> r = {{"zero", code(0.0)}};
  if (c.neg_zero) r.emplace_back("negative zero", *c.neg_zero);
  if (f.min_subnormal > 0) {
    r.emplace_back("min subnormal", code(f.min_subnormal));
    r.emplace_back("max subnormal", code(f.min_normal - f.min_subnormal));
  }
  r.emplace_back("min normal", code(f.min_normal));
  r.emplace_back("one", code(1.0));
  r.emplace_back("max finite", c.max_finite);
  r.emplace_back("lowest", code(f.lowest));
  if (c.pos_inf) {
    r.emplace_back("inf", *c.pos_inf);
    r.emplace_back("-inf", *c.neg_inf);
  }
  if (c.nan) r.emplace_back("nan", *c.nan);
  return r;
}

double value_of(const nf::format_info& f, std::uint64_t code) {
  if (f.id == format_id::m_f64) return std::bit_cast<double>(code);
  return nf::decode(f.id, static_cast<std::uint32_t>(code));
}

void show_format(const std::string& text, const report_flags& out) {
  const auto id = nf::parse_format(text, "formats show");
  const auto& f = nf::info(id);
  const bool full = f.bits <= 8;  // every code of the 4/6/8-bit formats
  nlohmann::json rows = nlohmann::json::array();
  const std::vector<std::string> columns = full ? std::vector<std::string>{"code", "value", "class"}
                                                : std::vector<std::string>{"code", "value", "what"};
  result::table codes{full ? "every code" : "special codes", columns, {}, false};
  auto add_row = [&](std::vector<std::string> row) { codes.rows.push_back(std::move(row)); };
  if (full) {
    for (std::uint64_t c = 0; c < (std::uint64_t{1} << f.bits); ++c) {
      const double v = value_of(f, c);
      add_row({hex_code(f, c), text_number(v), value_class(f, v)});
      rows.push_back({{"code", hex_code(f, c)}, {"value", json_number(v)},
                      {"class", value_class(f, v)}});
    }
  } else {
    for (const auto& [what, c] : summary_codes(f)) {
      const double v = value_of(f, c);
      add_row({hex_code(f, c), text_number(v), what});
      rows.push_back({{"code", hex_code(f, c)}, {"value", json_number(v)}, {"what", what}});
    }
  }
  result::check_result c;
  c.backend = "ref";
  c.case_id = std::string(f.name);
  c.message = fmt::format("{} ({}, bias {}, default overflow {}); NaN codes: {}", f.name, layout(f), f.bias,
                          overflow_name(f.default_overflow), ranges_text(f, nan_ranges(f)));
  result::view_builder v(c);
  v.line(c.message);
  v.add_table(codes);
  c.tables.push_back(codes);
  c.tables.back().data = true;  // --csv: one row per code
  c.details["format"] = format_json(f);
  c.details[full ? "codes" : "summary"] = rows;
  write_command_reports(out, "formats show", 0, std::move(c), 0);
}

}  // namespace

void setup_formats(CLI::App& app) {
  auto json = std::make_shared<report_flags>();
  auto show_json = std::make_shared<report_flags>();
  auto show_name = std::make_shared<std::string>();
  auto* sub = app.add_subcommand(
      "formats", "number formats, block-scaling schemes, code tables");
  add_report_flags(sub, *json);
  auto* show = sub->add_subcommand("show", "every code of a format and its value "
                                           "(a summary of the special codes for 16+ bits)");
  show->add_option("format", *show_name, "format name (e4m3fn, e2m1, bf16, ...)")->required();
  add_report_flags(show, *show_json);
  show->callback([show_name, show_json, json] { show_format(*show_name, show_json->any() ? *show_json : *json); });
  sub->callback([sub, json] {
    if (sub->get_subcommands().empty()) list_formats(*json);
  });
}

}  // namespace numprobe::cli
