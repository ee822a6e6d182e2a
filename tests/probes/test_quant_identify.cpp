// `quant --identify` (issue 17): the codes of a quantizer written here, independently of
// numprobe's quantizer, from torchao's NVFP4 rules (docs/quant-conventions.md: the block scale
// in fp32 step by step and clamped up to e4m3's 2^-6, the element as x times an fp32
// reciprocal), must be identified as exactly that combination, on tie-adversarial input where
// the combinations differ. The element and scale roundings use the codec (checked against
// ml_dtypes by the oracle tests), nothing of the quantizer under test.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/npy.hpp"
#include "probes/quant/quant_identify.hpp"
#include "probes/quant/quant_probe.hpp"
#include "tests/support/run_command.hpp"

namespace np = numprobe;
namespace nf = numprobe::formats;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t k_rows = 48, k_cols = 80;  // 5 NVFP4 blocks per row

np::probes::quant_report ties_report() {
  np::probes::quant_probe_options o;
  o.scheme_name = "nvfp4";
  o.config = nf::find_scheme("nvfp4").defaults;
  o.dist = np::probes::quant_dist::m_ties;
  o.rows = k_rows;
  o.cols = k_cols;
  o.seed = 5;
  return np::probes::run_quant(o);
}

struct codes_and_scales {
  std::vector<std::uint8_t> codes, scales;
};

// torchao-style NVFP4, written out: s_t = f32(amax_t) / f32(6 * 448); per block of 16,
// s_b = e4m3(max(f32(f32(amax_b) / 6) / s_t, 2^-6)); element code = e2m1(f32(x) * f32(f32(1 / s_t) / s_b)).
codes_and_scales torchao_like(const std::vector<double>& x) {
  float amax_t = 0;
  for (double v : x) amax_t = std::max(amax_t, std::fabs(static_cast<float>(v)));
  const float st = amax_t / (6.0f * 448.0f);
  codes_and_scales out;
  for (std::int64_t r = 0; r < k_rows; ++r)
    for (std::int64_t b = 0; b < k_cols / 16; ++b) {
      float amax_b = 0;
      for (int j = 0; j < 16; ++j) amax_b = std::max(amax_b, std::fabs(static_cast<float>(x[r * k_cols + b * 16 + j])));
      const float ideal = std::max(amax_b / 6.0f / st, 0x1p-6f);
      const std::uint32_t sc = nf::encode(nf::format_id::m_e4m3fn, ideal, nf::rounding::m_nearest_even,
                                          nf::overflow::m_saturate);
      out.scales.push_back(static_cast<std::uint8_t>(sc));
      const float sb = static_cast<float>(nf::decode(nf::format_id::m_e4m3fn, sc));
      const float mult = (1.0f / st) / sb;
      for (int j = 0; j < 16; ++j) {
        const float t = static_cast<float>(x[r * k_cols + b * 16 + j]) * mult;
        out.codes.push_back(static_cast<std::uint8_t>(
            nf::encode(nf::format_id::m_e2m1, t, nf::rounding::m_nearest_even, nf::overflow::m_saturate)));
      }
    }
  // Codes row-major over the tensor: reorder from block order (blocks of one row are contiguous
  // already, so block order is row-major order here).
  return out;
}

fs::path write_dir(const std::string& name, const codes_and_scales& cs, bool packed) {
  const fs::path d = fs::temp_directory_path() / ("numprobe_identify_" + name + std::to_string(::getpid()));
  fs::create_directories(d);
  if (packed) {
    std::vector<std::uint8_t> p(cs.codes.size() / 2);
    for (std::size_t i = 0; i < p.size(); ++i)
      p[i] = static_cast<std::uint8_t>(cs.codes[2 * i] | (cs.codes[2 * i + 1] << 4));  // low nibble first
    const std::vector<std::uint64_t> shape{k_rows, k_cols / 2};
    np::io::write_npy(d / "codes.npy", shape, p);
  } else {
    const std::vector<std::uint64_t> shape{k_rows, k_cols};
    np::io::write_npy(d / "codes.npy", shape, cs.codes);
  }
  if (!cs.scales.empty()) {
    const std::vector<std::uint64_t> grid{k_rows, k_cols / 16};
    np::io::write_npy(d / "scales.npy", grid, cs.scales);
  }
  return d;
}

}  // namespace

TEST(QuantIdentify, NamesTheTorchaoStyleCombinationOnTies) {
  const auto base = ties_report();
  const auto d = write_dir("torchao", torchao_like(base.input), false);
  const auto id = np::probes::run_identify(base, d.string());
  ASSERT_EQ(id.candidates.size(), 12u);  // 3 divisions x 2 floors x 2 arithmetics
  ASSERT_GE(id.match, 0) << "no combination matched";
  const auto& m = id.candidates[static_cast<std::size_t>(id.match)].config.conv;
  EXPECT_EQ(m.division, nf::scale_division::m_reciprocal);
  EXPECT_EQ(m.floor, nf::scale_floor::m_min_normal);
  EXPECT_EQ(m.arith, nf::scale_arith::m_fp32);
  // Exactly one combination reproduces them, and the definition (the first) does not: the
  // ties input separates them.
  int matches = 0;
  for (const auto& c : id.candidates) matches += c.matches() ? 1 : 0;
  EXPECT_EQ(matches, 1);
  EXPECT_GT(id.candidates.front().code_mismatches, 0);
  fs::remove_all(d);
}

TEST(QuantIdentify, PackedCodesReadLowNibbleFirst) {
  const auto base = ties_report();
  const auto d = write_dir("packed", torchao_like(base.input), true);
  const auto id = np::probes::run_identify(base, d.string());
  EXPECT_TRUE(id.packed);
  EXPECT_GE(id.match, 0);
  fs::remove_all(d);
}

TEST(QuantIdentify, OneForeignCodeMatchesNothingAndIsShownFirst) {
  const auto base = ties_report();
  auto cs = torchao_like(base.input);
  const std::size_t at = 7 * k_cols + 33;
  cs.codes[at] ^= 0x1;  // one code off by one step
  cs.scales.clear();    // codes only
  const auto d = write_dir("foreign", cs, false);
  const auto id = np::probes::run_identify(base, d.string());
  EXPECT_FALSE(id.scales_given);
  EXPECT_EQ(id.match, -1);
  const auto j = np::probes::to_json(id);
  EXPECT_TRUE(j["match"].is_null());
  // The nearest combination differs in exactly that element.
  std::int64_t best = 1 << 30;
  for (const auto& c : id.candidates) best = std::min(best, c.code_mismatches);
  EXPECT_EQ(best, 1);
  for (const auto& c : id.candidates)
    if (c.code_mismatches == 1) {
      ASSERT_FALSE(c.first.empty());
      EXPECT_EQ(c.first.front().row, 7);
      EXPECT_EQ(c.first.front().col, 33);
    }
  fs::remove_all(d);
}

TEST(QuantIdentify, WrongShapeAndMissingFilesAreInputErrors) {
  const auto base = ties_report();
  const fs::path d = fs::temp_directory_path() / ("numprobe_identify_bad" + std::to_string(::getpid()));
  fs::create_directories(d);
  EXPECT_THROW((void)np::probes::run_identify(base, d.string()), np::error);  // no codes.npy
  const std::vector<std::uint64_t> shape{3, 5};
  np::io::write_npy(d / "codes.npy", shape, std::vector<std::uint8_t>(15, 1));
  try {
    (void)np::probes::run_identify(base, d.string());
    FAIL() << "a 3x5 codes array accepted for a 48x80 input";
  } catch (const np::error& e) {
    EXPECT_EQ(e.code(), np::exit_code::m_input);
    EXPECT_NE(std::string(e.what()).find("codes.npy"), std::string::npos) << e.what();
  }
  fs::remove_all(d);
}

// Malformed codes or scales are input errors naming the file, never "no match" (exit 1) or a
// match found by comparing other elements (issue 27 item 6): a transposed or flattened array of
// the right count, a code the format does not have, bool codes, int32 or wrongly shaped scales.
TEST(QuantIdentify, MalformedCodesAndScalesAreInputErrorsNamingTheFile) {
  const auto base = ties_report();
  const fs::path d = fs::temp_directory_path() / ("numprobe_identify_malformed" + std::to_string(::getpid()));
  const auto expect_refused = [&](const std::string& file, const std::string& what) {
    try {
      (void)np::probes::run_identify(base, d.string());
      ADD_FAILURE() << "accepted: " << what;
    } catch (const np::error& e) {
      EXPECT_EQ(e.code(), np::exit_code::m_input);
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const auto n = static_cast<std::size_t>(k_rows * k_cols);
  const auto fresh = [&] {
    fs::remove_all(d);
    fs::create_directories(d);
  };
  fresh();
  np::io::write_npy(d / "codes.npy", std::vector<std::uint64_t>{k_cols, k_rows}, std::vector<std::uint8_t>(n, 1));
  expect_refused("codes.npy", "needs codes of shape [48, 80]");
  fresh();
  np::io::write_npy(d / "codes.npy", std::vector<std::uint64_t>{n}, std::vector<std::uint8_t>(n, 1));
  expect_refused("codes.npy", "needs codes of shape [48, 80]");
  fresh();
  np::io::write_npy(d / "codes.npy", std::vector<std::uint64_t>{k_rows, k_cols}, std::vector<std::uint8_t>(n, 0xFF));
  expect_refused("codes.npy", "is not a code of e2m1");
  fresh();
  std::vector<std::byte> flags(n, std::byte{1});
  np::io::write_npy(d / "codes.npy", std::vector<std::uint64_t>{k_rows, k_cols}, np::io::dtype::m_bool, flags);
  expect_refused("codes.npy", "a bool array");
  fresh();
  np::io::write_npy(d / "codes.npy", std::vector<std::uint64_t>{k_rows, k_cols}, std::vector<std::uint8_t>(n, 1));
  const std::vector<std::int32_t> int_scales(static_cast<std::size_t>(k_rows * 5), 0x38);
  np::io::write_npy(d / "scales.npy", std::vector<std::uint64_t>{k_rows, 5}, np::io::dtype::m_i32,
                    std::as_bytes(std::span<const std::int32_t>(int_scales)));
  expect_refused("scales.npy", "dtype i32");
  np::io::write_npy(d / "scales.npy", std::vector<std::uint64_t>{5, k_rows}, std::vector<std::uint8_t>(k_rows * 5, 0x38));
  expect_refused("scales.npy", "the block grid is 48x5");
  fs::remove_all(d);
}

TEST(QuantIdentify, CliReportsTheMatchAsJson) {
  const auto base = ties_report();
  const auto d = write_dir("cli", torchao_like(base.input), false);
  const auto r = np::testing::run_numprobe("quant --scheme nvfp4 --dist ties --shape 48x80 --seed 5 --identify " +
                                           d.string() + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 400);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["identify"]["match"]["scale_division"], "reciprocal");
  EXPECT_EQ(j["identify"]["match"]["scale_floor"], "min-normal");
  EXPECT_EQ(j["identify"]["match"]["scale_arith"], "fp32");
  EXPECT_EQ(j["identify"]["candidates"].size(), 12u);
  EXPECT_EQ(j["identify"]["matching"], 1);
  EXPECT_EQ(j["identify"]["ambiguous"], false);
  // Codes that no combination reproduces: exit 1 (a finding), the match null.
  auto cs = torchao_like(base.input);
  cs.codes[0] ^= 0x1;
  const auto bad = write_dir("cli_bad", cs, false);
  const auto r2 = np::testing::run_numprobe("quant --scheme nvfp4 --dist ties --shape 48x80 --seed 5 --identify " +
                                            bad.string() + " --json -");
  EXPECT_EQ(r2.exit_code, 1) << r2.err;
  EXPECT_TRUE(nlohmann::json::parse(r2.out)["identify"]["match"].is_null());
  fs::remove_all(d);
  fs::remove_all(bad);
}
