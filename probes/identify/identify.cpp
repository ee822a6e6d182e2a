#include "probes/identify/identify.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result_gates.hpp"
#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/dtype.hpp"

namespace numprobe::probes {
namespace {

namespace nf = formats;

constexpr std::size_t k_first_mismatches = 8;

// Code -> its rank in value order (-0 and +0 share a rank; NaN codes rank far away), for the
// distance between two codes of one format.
std::map<std::uint32_t, std::int64_t> ranks_of(nf::format_id id) {
  const auto& f = nf::info(id);
  std::vector<std::pair<double, std::uint32_t>> v;
  if (f.storage_bits <= 16)
    for (std::uint32_t c = 0; c < (1u << f.storage_bits); ++c) v.emplace_back(nf::decode(id, c), c);
  std::map<double, std::int64_t> value_rank;
  for (const auto& [x, c] : v)
    if (!std::isnan(x)) value_rank[x == 0 ? 0.0 : x] = 0;
  std::int64_t k = 0;
  for (auto& [x, r] : value_rank) r = k++;
  std::map<std::uint32_t, std::int64_t> out;
  for (const auto& [x, c] : v) out[c] = std::isnan(x) ? k + 1000 : value_rank[x == 0 ? 0.0 : x];
  return out;
}

// The block scale as stored: NVFP4's effective scale folds in s_t.
double stored_scale(const nf::quant_result& q, const nf::block_stats& b) {
  return b.scale / (q.config.kind == nf::scheme_kind::m_nvfp4 ? q.tensor_scale : 1.0);
}

identify_candidate compare(const nf::scheme_config& c, const std::vector<double>& input, std::int64_t rows,
                           std::int64_t cols, const std::vector<std::uint32_t>& theirs, const identify_scales& scales,
                           const std::map<std::uint32_t, std::int64_t>& rank) {
  identify_candidate out;
  out.config = c;
  out.text = nf::conventions_text(c);
  const auto q = nf::quantize(c, input, rows, cols);
  auto rank_of = [&rank](std::uint32_t code) {
    const auto it = rank.find(code);
    return it == rank.end() ? std::int64_t{1} << 20 : it->second;
  };
  std::vector<identify_mismatch> mism;
  for (std::size_t i = 0; i < theirs.size(); ++i) {
    if (q.codes[i] == theirs[i]) continue;
    ++out.code_mismatches;
    out.max_code_distance = std::max(out.max_code_distance, std::abs(rank_of(q.codes[i]) - rank_of(theirs[i])));
    if (mism.size() < k_first_mismatches)
      mism.push_back({static_cast<std::int64_t>(i) / cols, static_cast<std::int64_t>(i) % cols, false, input[i],
                      q.codes[i], theirs[i]});
  }
  if (scales.given)
    for (std::size_t b = 0; b < q.blocks.size(); ++b) {
      const auto& blk = q.blocks[b];
      const bool same = scales.as_codes ? blk.scale_code == scales.codes[b]
                                        : stored_scale(q, blk) == scales.values[b];
      if (same) continue;
      ++out.scale_mismatches;
      if (mism.size() < 2 * k_first_mismatches)
        mism.push_back({blk.row0, blk.col0, true, blk.amax, blk.scale_code,
                        scales.as_codes ? scales.codes[b] : 0u});
    }
  // Scale mismatches explain code mismatches: list them first.
  std::stable_sort(mism.begin(), mism.end(), [](const auto& a, const auto& b) { return a.scale > b.scale; });
  if (mism.size() > k_first_mismatches) mism.resize(k_first_mismatches);
  out.first = std::move(mism);
  return out;
}

nlohmann::json conventions_json(const nf::scheme_config& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [axis, value] : nf::convention_values(c)) j[std::string(axis)] = std::string(value);
  return j;
}

}  // namespace

identify_result identify_codes(const nf::scheme_config& base, const std::vector<double>& input,
                               std::int64_t rows, std::int64_t cols, const std::vector<std::uint32_t>& theirs,
                               const identify_scales& scales, const std::string& dir) {
  identify_result r;
  r.dir = dir;
  r.scales_given = scales.given;
  const auto rank = ranks_of(base.element);
  for (const auto& c : nf::convention_variants(base))
    r.candidates.push_back(compare(c, input, rows, cols, theirs, scales, rank));
  for (std::size_t i = 0; i < r.candidates.size() && r.match < 0; ++i)
    if (r.candidates[i].matches()) r.match = static_cast<int>(i);
  return r;
}

nlohmann::json to_json(const identify_result& r) {
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : r.candidates) {
    nlohmann::json first = nlohmann::json::array();
    for (const auto& m : c.first)
      first.push_back({{"row", m.row}, {"col", m.col}, {"kind", m.scale ? "scale" : "code"},
                       {"input", result::json_number(m.input)}, {"ours", m.ours}, {"theirs", m.theirs}});
    cands.push_back({{"conventions", conventions_json(c.config)}, {"text", c.text},
                     {"code_mismatches", c.code_mismatches}, {"scale_mismatches", c.scale_mismatches},
                     {"max_code_distance", c.max_code_distance}, {"matches", c.matches()},
                     {"first_mismatches", first}});
  }
  std::int64_t matching = 0;
  for (const auto& c : r.candidates) matching += c.matches() ? 1 : 0;
  nlohmann::json j{{"dir", r.dir}, {"scales_compared", r.scales_given}, {"packed_codes", r.packed},
                   {"candidates", cands}, {"matching", matching}, {"ambiguous", matching > 1}};
  j["match"] = r.match >= 0 ? conventions_json(r.candidates[static_cast<std::size_t>(r.match)].config)
                            : nlohmann::json(nullptr);
  return j;
}

void add_identify(const identify_result& r, result::check_result& out) {
  result::view_builder v(out);
  auto& t = v.add_table({"conventions", "code mismatches", "scale mismatches", "max code distance", "match"},
                        fmt::format("identify {}: {} combinations{}{}", r.dir, r.candidates.size(),
                                    r.scales_given ? ", codes and scales" : ", codes only (no scales.npy)",
                                    r.packed ? ", packed codes unpacked low nibble first" : ""));
  for (const auto& c : r.candidates)
    t.rows.push_back({c.text, std::to_string(c.code_mismatches),
                      r.scales_given ? std::to_string(c.scale_mismatches) : "-", std::to_string(c.max_code_distance),
                      c.matches() ? "yes" : ""});
  std::int64_t matching = 0;
  for (const auto& c : r.candidates) matching += c.matches() ? 1 : 0;
  if (matching > 1) {
    // Random data rarely sits on the inputs where conventions part: say so, not "identified".
    v.line(fmt::format("ambiguous: {} of {} combinations reproduce the codes; this input does not separate them "
                       "(try --dist ties); the first is {}",
                       matching, r.candidates.size(), r.candidates[static_cast<std::size_t>(r.match)].text));
  } else if (r.match >= 0) {
    v.line("identified: " + r.candidates[static_cast<std::size_t>(r.match)].text);
  } else {
    // The nearest candidate's first mismatches: where no rule reproduces the other codes.
    const auto best = std::min_element(r.candidates.begin(), r.candidates.end(), [](const auto& a, const auto& b) {
      return a.code_mismatches + a.scale_mismatches < b.code_mismatches + b.scale_mismatches;
    });
    v.line("identified: no combination matches; the nearest is " + best->text);
    auto& m = v.add_table({"kind", "row", "col", "input", "ours", "theirs"}, "its first mismatches");
    for (const auto& x : best->first)
      m.rows.push_back({x.scale ? "scale" : "code", std::to_string(x.row), std::to_string(x.col),
                        fmt::format("{:.9g}", x.input), fmt::format("0x{:X}", x.ours), fmt::format("0x{:X}", x.theirs)});
  }
  out.gates.push_back(result::evaluate_gate(
      bound{"identify_match", bound_op::m_ge, 1.0,
            "the other implementation's codes equal the reference's under some combination of conventions"},
      r.match >= 0 ? 1.0 : 0.0, out.case_id));
  out.details["identify"] = to_json(r);
}

}  // namespace numprobe::probes
