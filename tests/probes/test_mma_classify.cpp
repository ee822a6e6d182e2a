// The mma catalogue and classifier (issue 31): the outputs of a model (src/kernels/emu) fed as
// the measurement must give back the model's parameters. The classifier's predictions are
// closed forms of its own, so this is a test of both pieces against each other: a wrong
// model or a wrong prediction shows as a parameter not recovered. Exact comparisons: every
// parameter is an integer or a named mode.
#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <string>

#include "numprobe/base/error.hpp"
#include "probes/mma/mma_agreement.hpp"
#include "probes/mma/mma_catalogue.hpp"
#include "probes/mma/mma_classify.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {
namespace {

mma_characterisation characterise(const emu::mma_model& m) {
  const mma_path path = mma_model_path(m);
  const auto vectors = mma_catalogue(path);
  std::vector<double> measured;
  for (const auto& v : vectors) measured.push_back(emu::mma_dot(m, v.a, v.b, v.c));
  return mma_classify(path, vectors, measured);
}

const mma_property& property(const mma_characterisation& c, const std::string& name) {
  for (const auto& p : c.properties)
    if (p.name == name) return p;
  throw std::runtime_error("no property " + name);
}

void expect_recovered(const emu::mma_model& m) {
  const mma_characterisation c = characterise(m);
  const mma_findings& f = c.findings;
  SCOPED_TRACE(m.name);
  EXPECT_EQ(f.products_exact, m.products_exact);
  EXPECT_EQ(f.fraction_bits, m.internal_fraction_bits);
  EXPECT_EQ(f.internal_rounding, m.internal_rounding);
  EXPECT_EQ(f.output_fraction_bits, m.output_fraction_bits);
  EXPECT_EQ(f.output_rounding, m.output_rounding);
  EXPECT_EQ(f.k_group, m.k_group);
  EXPECT_EQ(f.c_in_group, m.c_in_group);
  EXPECT_EQ(f.ieee_nonfinite, true);
  for (const auto& p : c.properties) {
    EXPECT_FALSE(p.vectors.empty()) << p.name;
    EXPECT_EQ(p.vectors.size(), p.measured.size()) << p.name;
  }
}

class named_model : public ::testing::TestWithParam<std::string> {};

TEST_P(named_model, classifier_recovers_its_parameters) { expect_recovered(emu::find_mma_model(GetParam())); }

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  // Models with a k order other than k's (Hopper's fp8 mma.sync) are outside what the catalogue
  // decides: named_order_model below checks what it reports for them.
  for (const auto& m : emu::mma_models())
    if (m.k_order.empty() && !m.integer()) out.push_back(m.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(mma, named_model, ::testing::ValuesIn(model_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

TEST(mma_classify, variants_of_one_model_are_told_apart) {
  const emu::mma_model base = emu::find_mma_model("h200-mma-bf16");
  emu::mma_model m = base;
  m.internal_rounding = emu::mma_rounding::m_nearest_even;
  expect_recovered(m);
  m = base;
  m.internal_rounding = emu::mma_rounding::m_down;
  expect_recovered(m);
  m = base;
  m.output_rounding = emu::mma_rounding::m_nearest_even;
  expect_recovered(m);
  m = base;
  m.c_in_group = false;
  expect_recovered(m);
  m = base;
  m.products_exact = false;
  expect_recovered(m);
  m = base;
  m.k_group = 4;
  expect_recovered(m);
  m = base;
  m.internal_fraction_bits = 30;
  m.output_fraction_bits = 30;  // wider output so the output rounding stays observable
  expect_recovered(m);
}

TEST(mma_classify, subnormal_flushing) {
  emu::mma_model m = emu::find_mma_model("h200-mma-bf16");
  EXPECT_EQ(characterise(m).findings.flush_subnormal_inputs, false);
  EXPECT_EQ(characterise(m).findings.flush_subnormal_output, false);
  m.flush_subnormal_inputs = true;
  EXPECT_EQ(characterise(m).findings.flush_subnormal_inputs, true);
  EXPECT_EQ(characterise(m).findings.flush_subnormal_output, false);
  m.flush_subnormal_inputs = false;
  m.flush_subnormal_output = true;
  EXPECT_EQ(characterise(m).findings.flush_subnormal_inputs, false);
  EXPECT_EQ(characterise(m).findings.flush_subnormal_output, true);
  // fp8 has no product below fp32's normal range: a flushed C is either reading.
  emu::mma_model e = emu::find_mma_model("h200-wgmma-e4m3");
  e.flush_subnormal_output = true;
  const auto c = characterise(e);
  EXPECT_FALSE(c.findings.flush_subnormal_output.has_value());
  EXPECT_EQ(property(c, "subnormals").matching.size(), 2u);
}

TEST(mma_classify, output_bits_beyond_the_sum_are_not_claimed) {
  // F = 20 with a 23-bit output: the sum never holds more bits than the output keeps, so the
  // output rounding is not observable; the classifier says so instead of guessing.
  emu::mma_model m = emu::find_mma_model("h200-mma-bf16");
  m.internal_fraction_bits = 20;
  const auto c = characterise(m);
  EXPECT_EQ(c.findings.fraction_bits, 20);
  EXPECT_FALSE(c.findings.output_fraction_bits.has_value());
  EXPECT_FALSE(property(c, "output_rounding").determined);
  EXPECT_GT(property(c, "output_rounding").matching.size(), 1u);
}

TEST(mma_classify, exact_fp32_arithmetic_matches_no_truncating_hypothesis) {
  // A "device" that adds in double and rounds once to fp32 (nearest): every fraction-bits
  // vector kept (F >= the sweep's end), so F is reported as a lower bound, not a value.
  const mma_path path{"exact", formats::format_id::m_bf16, 16};
  const auto vectors = mma_catalogue(path);
  std::vector<double> measured;
  for (const auto& v : vectors) {
    double s = v.c;
    for (int i = 0; i < 16; ++i) s += v.a[i] * v.b[i];
    measured.push_back(static_cast<double>(static_cast<float>(s)));
  }
  const auto c = mma_classify(path, vectors, measured);
  EXPECT_FALSE(c.findings.fraction_bits.has_value());
  EXPECT_EQ(c.findings.fraction_bits_at_least, mma_max_shift(path));
}

// Hopper's fp8 mma.sync (k mod 4 < 2 summed first): the catalogue's cancelling pair sits at
// k = 0, 1 (the first group) and its small term at k = 2 (the second), so every term of the
// sweep is kept and the classifier can only give a lower bound, as it did on the H200 itself
// (F >= 28 for e4m3, F >= 48 for e5m2; docs/hardware.md). It must not claim a number.
TEST(mma_classify, interleaved_fp8_order_gives_a_lower_bound_only) {
  for (const char* name : {"h200-mma-e4m3", "h200-mma-e5m2", "h200-mma-e4m3-f16acc", "h200-mma-e5m2-f16acc"}) {
    const auto c = characterise(emu::find_mma_model(name));
    SCOPED_TRACE(name);
    EXPECT_FALSE(c.findings.fraction_bits.has_value());
    EXPECT_EQ(c.findings.fraction_bits_at_least, mma_max_shift(c.path));
  }
}

TEST(mma_classify, wrong_count_is_an_input_error) {
  const mma_path path{"x", formats::format_id::m_bf16, 16};
  EXPECT_THROW((void)mma_classify(path, mma_catalogue(path), {1.0}), numprobe::error);
}

TEST(mma_classify, catalogue_values_belong_to_the_format) {
  for (const auto& path : mma_device_paths())
    for (const auto& v : mma_catalogue(path)) {
      for (int i = 0; i < path.k; ++i) {
        EXPECT_TRUE(emu::mma_representable(path.input, v.a[i])) << v.id << " a" << i;
        EXPECT_TRUE(emu::mma_representable(path.input, v.b[i])) << v.id << " b" << i;
      }
      EXPECT_TRUE(mma_accumulator_holds(path, v.c)) << path.name << " " << v.id << " c";
    }
}

// Integer paths: the named models' overflow behaviour comes back, and a "device" that clamps
// after every product (outputs computed here from that definition, C first, k order) is told
// apart and gets no model (none describes it).
TEST(mma_classify, integer_models_are_recovered) {
  for (const auto& m : emu::mma_models()) {
    if (!m.integer()) continue;
    const auto c = characterise(m);
    SCOPED_TRACE(m.name);
    EXPECT_EQ(c.findings.products_exact, true);
    EXPECT_EQ(c.findings.integer_overflow, m.integer_saturate ? k_clamped_once : k_wraps);
    std::string why;
    const auto back = model_from_findings(c.path, c.findings, why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->integer_saturate, m.integer_saturate);
  }
}

TEST(mma_classify, integer_clamping_along_the_way_has_no_model) {
  const mma_path path = mma_model_path(emu::find_mma_model("h200-mma-s8-satfinite"));
  const auto vectors = mma_catalogue(path);
  std::vector<double> measured;
  for (const auto& v : vectors) {
    long long r = static_cast<long long>(v.c);
    for (int i = 0; i < path.k; ++i) {
      r += static_cast<long long>(v.a[i]) * static_cast<long long>(v.b[i]);
      r = std::min(std::max(r, -2147483648LL), 2147483647LL);
    }
    measured.push_back(static_cast<double>(r));
  }
  const auto c = mma_classify(path, vectors, measured);
  EXPECT_EQ(c.findings.integer_overflow, "clamped after each product (C first, k order)");
  std::string why;
  EXPECT_FALSE(model_from_findings(path, c.findings, why));
  EXPECT_NE(why.find("along the way"), std::string::npos) << why;
}

}  // namespace
}  // namespace numprobe::probes
