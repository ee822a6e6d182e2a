#include "numprobe/core/result.hpp"
#include "probes/scan/scan_fnuz.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <regex>
#include <set>

#include "numprobe/base/error.hpp"
#include "probes/names/name_filter.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/checkpoint.hpp"

namespace numprobe::probes {

using result::json_number;  // non-finite values in the schema's spelling
namespace {

using formats::format_id;

// Scale tensors that go with a weight, by the names FP8 checkpoints use.
std::string find_scale(const std::set<std::string>& names, const std::string& w) {
  std::vector<std::string> cands = {w + "_scale", w + "_scale_inv"};
  const std::string suffix = ".weight";
  if (w.size() > suffix.size() && w.ends_with(suffix)) {
    const auto stem = w.substr(0, w.size() - suffix.size());
    cands.push_back(stem + ".weight_scale");
    cands.push_back(stem + ".weight_scale_inv");
    cands.push_back(stem + ".scale");
  }
  for (const auto& c : cands)
    if (names.count(c)) return c;
  return {};
}

}  // namespace

fnuz_code_map map_e4m3fn_code(std::uint8_t code) {
  fnuz_code_map m;
  m.fn_code = code;
  m.fn_value = formats::decode(format_id::m_e4m3fn, code);
  m.reinterpreted = formats::decode(format_id::m_e4m3fnuz, code);
  m.rewrite = code == 0x80;
  m.reuse_code = m.rewrite ? std::uint8_t{0x00} : code;
  m.reuse_value = 2.0 * formats::decode(format_id::m_e4m3fnuz, m.reuse_code);
  m.nan_becomes_number = std::isnan(m.fn_value);
  if (std::isnan(m.fn_value)) {
    m.reencoded_code = 0x80;
    m.reencoded_value = std::nan("");
  } else {
    m.clips = std::fabs(m.fn_value) > 240.0;
    m.reencoded_code = static_cast<std::uint8_t>(formats::encode(
        format_id::m_e4m3fnuz, m.fn_value, formats::rounding::m_nearest_even,
        formats::overflow::m_saturate));
    m.reencoded_value = formats::decode(format_id::m_e4m3fnuz, m.reencoded_code);
  }
  return m;
}

fnuz_report run_fnuz_migration(const std::string& checkpoint, const std::string& filter) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::regex re = name_filter(filter);
  std::array<fnuz_code_map, 256> maps;
  for (int c = 0; c < 256; ++c) maps[static_cast<std::size_t>(c)] = map_e4m3fn_code(static_cast<std::uint8_t>(c));

  const auto ck = io::checkpoint::open(checkpoint);
  std::set<std::string> names;
  for (const auto& e : ck.tensors()) names.insert(e.name);
  fnuz_report rep;
  rep.checkpoint = checkpoint;
  rep.total.name = "total";
  ck.for_each([&](const io::tensor_view& v) {
    if (!std::regex_search(v.name, re)) return;
    if (v.dtype != io::dtype::m_e4m3fn) {
      if (v.dtype == io::dtype::m_e4m3fnuz || v.dtype == io::dtype::m_e5m2)
        rep.skipped.push_back(v.name + " (dtype " + std::string(io::name(v.dtype)) + ")");
      return;
    }
    std::array<std::int64_t, 256> hist{};
    for (const auto b : v.bytes) ++hist[static_cast<std::uint8_t>(b)];
    fnuz_tensor_report t;
    t.name = v.name;
    t.scale_tensor = find_scale(names, v.name);
    for (std::size_t c = 0; c < 256; ++c) {
      const auto n = hist[c];
      if (!n) continue;
      const auto& m = maps[c];
      t.elements += n;
      if (c == 0x00) t.zeros += n;
      if (m.rewrite) t.neg_zero_rewrites += n;
      if (m.nan_becomes_number) t.nan_codes += n;
      if (m.clips) t.clip_same_scale += n;
      if (std::isfinite(m.fn_value) && m.fn_value != 0.0) {
        t.change_bits += n;
        t.amax = std::max(t.amax, std::fabs(m.fn_value));
      }
    }
    t.scale_factor_no_clip = std::max(1.0, t.amax / 240.0);
    auto& s = rep.total;
    s.elements += t.elements;
    s.zeros += t.zeros;
    s.neg_zero_rewrites += t.neg_zero_rewrites;
    s.nan_codes += t.nan_codes;
    s.clip_same_scale += t.clip_same_scale;
    s.change_bits += t.change_bits;
    s.amax = std::max(s.amax, t.amax);
    s.scale_factor_no_clip = std::max(s.scale_factor_no_clip, t.scale_factor_no_clip);
    rep.tensors.push_back(std::move(t));
  });
  std::stable_sort(rep.tensors.begin(), rep.tensors.end(),
                   [](const auto& a, const auto& b) { return a.clip_same_scale > b.clip_same_scale; });
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

nlohmann::json to_json(const fnuz_report& r) {
  const auto one = [](const fnuz_tensor_report& t) {
    return nlohmann::json{{"name", t.name},
                          {"elements", t.elements},
                          {"zeros", t.zeros},
                          {"neg_zero_rewrites", t.neg_zero_rewrites},
                          {"nan_codes", t.nan_codes},
                          {"clip_same_scale", t.clip_same_scale},
                          {"change_bits", t.change_bits},
                          {"amax", json_number(t.amax)},
                          {"scale_factor_no_clip", json_number(t.scale_factor_no_clip)},
                          {"scale_tensor", t.scale_tensor}};
  };
  nlohmann::json j;
  j["checkpoint"] = r.checkpoint;
  j["from"] = "e4m3fn";
  j["to"] = "e4m3fnuz";
  j["recipe"] = "reuse bits: rewrite 0x80 -> 0x00 and double every scale (exact); or re-encode "
                "at the same scale: values above 240 clip unless the scale grows by "
                "scale_factor_no_clip";
  j["tensors"] = nlohmann::json::array();
  for (const auto& t : r.tensors) j["tensors"].push_back(one(t));
  j["total"] = one(r.total);
  j["skipped"] = r.skipped;
  j["seconds"] = r.seconds;
  return j;
}

void fill_result(const fnuz_report& r, std::size_t top, result::check_result& out) {
  out.backend = "ref";
  out.case_id = fmt::format("scan({},e4m3fn->e4m3fnuz)", r.checkpoint);
  result::view_builder v(out);
  v.line(fmt::format("e4m3fn -> e4m3fnuz migration of {}: {} fp8 tensors", r.checkpoint, r.tensors.size()));
  auto& t = v.add_table({"tensor", "elements", "clip@same scale", "0x80 rewrites", "NaN codes", "amax", "scale x",
                         "scale tensor"});
  const auto row = [&t](const fnuz_tensor_report& x) {
    t.rows.push_back({x.name, std::to_string(x.elements), std::to_string(x.clip_same_scale),
                      std::to_string(x.neg_zero_rewrites), std::to_string(x.nan_codes), fmt::format("{:g}", x.amax),
                      fmt::format("{:.4g}", x.scale_factor_no_clip), x.scale_tensor.empty() ? "-" : x.scale_tensor});
  };
  for (std::size_t i = 0; i < r.tensors.size() && i < top; ++i) row(r.tensors[i]);
  row(r.total);
  v.line(fmt::format("reuse the bits: rewrite {} bytes 0x80 -> 0x00 and double every scale (exact; {} fn NaN codes "
                     "would read as +-480).",
                     r.total.neg_zero_rewrites, r.total.nan_codes));
  v.line(fmt::format("re-encode at the same scale: {} values in (240, 448] clip; multiplying the scale by {:.4g} (or "
                     "2, exactly) avoids it.",
                     r.total.clip_same_scale, r.total.scale_factor_no_clip));
  out.details = to_json(r);
}

}  // namespace numprobe::probes
