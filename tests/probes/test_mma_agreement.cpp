// The measured model and the promotion interval (issue 31, items 2 and 3).
//  - A model built from the catalogue's findings (model_from_findings) agrees bit for bit with
//    the model that produced the outputs, on random and adversarial vectors, for every named
//    model; and the random vectors tell apart every one-parameter change of every named model
//    (else agreement counts measured on a device would say little).
//  - The chained dot product with promotion equals a closed form computed here: each instruction
//    of an accumulator with F fraction bits, truncating, adds one exact product to the running
//    value (two terms aligned to the larger's exponent minus F, truncated, then the output
//    truncated to F bits), and every N instructions the value is added into an fp32 register.
#include <cmath>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "probes/mma/mma_agreement.hpp"
#include "probes/mma/mma_catalogue.hpp"
#include "probes/mma/mma_classify.hpp"
#include "probes/mma/mma_promotion.hpp"
#include "src/kernels/emu/mma_model.hpp"

namespace numprobe::probes {
namespace {

std::vector<double> outputs_of(const emu::mma_model& m, const std::vector<mma_vector>& vs) {
  std::vector<double> out;
  for (const auto& v : vs) out.push_back(emu::mma_dot(m, v.a, v.b, v.c));
  return out;
}

class agreement_model : public ::testing::TestWithParam<std::string> {};

TEST_P(agreement_model, measured_model_agrees_with_its_source_on_random_vectors) {
  const emu::mma_model& m = emu::find_mma_model(GetParam());
  const mma_path path = mma_model_path(m);
  const auto catalogue = mma_catalogue(path);
  const auto c = mma_classify(path, catalogue, outputs_of(m, catalogue));
  std::string why;
  const auto measured = model_from_findings(path, c.findings, why);
  ASSERT_TRUE(measured) << why;
  const auto vs = mma_random_vectors(path, 2000, 7);
  const auto a = compare_with_model(path, vs, outputs_of(m, vs), *measured, "measured");
  EXPECT_EQ(a.equal, a.vectors);
  ASSERT_EQ(a.families.size(), 4u);
  for (const auto& [name, counts] : a.families) EXPECT_EQ(counts.second, 500u) << name;
}

// Every one-parameter change of the model changes some output of the random vectors.
TEST_P(agreement_model, random_vectors_tell_apart_every_one_parameter_change) {
  const emu::mma_model& m = emu::find_mma_model(GetParam());
  const mma_path path = mma_model_path(m);
  const auto vs = mma_random_vectors(path, 2000, 11);
  const auto truth = outputs_of(m, vs);
  std::vector<std::pair<std::string, emu::mma_model>> changes;
  auto change = [&](std::string what, auto edit) {
    emu::mma_model x = m;
    edit(x);
    changes.push_back({std::move(what), x});
  };
  change("F - 1", [](emu::mma_model& x) { --x.internal_fraction_bits; });
  change("F + 1", [](emu::mma_model& x) { ++x.internal_fraction_bits; });
  change("alignment nearest", [](emu::mma_model& x) { x.internal_rounding = emu::mma_rounding::m_nearest_even; });
  change("output rounding nearest <-> toward zero", [](emu::mma_model& x) {
    x.output_rounding = x.output_rounding == emu::mma_rounding::m_nearest_even ? emu::mma_rounding::m_toward_zero
                                                                              : emu::mma_rounding::m_nearest_even;
  });
  change("C after the group", [](emu::mma_model& x) { x.c_in_group = !x.c_in_group; });
  change("products rounded", [](emu::mma_model& x) { x.products_exact = false; });
  change("subnormal inputs flushed", [](emu::mma_model& x) { x.flush_subnormal_inputs = true; });
  if (m.k_group > 4) change("half the k-group", [](emu::mma_model& x) { x.k_group /= 2; });
  if (m.k_group < m.k) change("twice the k-group", [](emu::mma_model& x) { x.k_group *= 2; });
  for (const auto& [what, x] : changes) {
    const auto a = compare_with_model(path, vs, truth, x, what);
    EXPECT_LT(a.equal, a.vectors) << m.name << ": " << what << " gives the same outputs on every vector";
  }
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& m : emu::mma_models())
    if (m.k_order.empty() && !m.integer()) out.push_back(m.name);  // the catalogue assumes k order (test_mma_classify)
  return out;
}

INSTANTIATE_TEST_SUITE_P(named, agreement_model, ::testing::ValuesIn(names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

// Integer models: the measured model agrees with its source on the integer families, and the
// random vectors tell wrapping from clamping (the extreme and cancel families cross the ends).
TEST(mma_agreement, integer_models_agree_and_are_told_apart) {
  for (const auto& m : emu::mma_models()) {
    if (!m.integer()) continue;
    SCOPED_TRACE(m.name);
    const mma_path path = mma_model_path(m);
    const auto c = mma_classify(path, mma_catalogue(path), outputs_of(m, mma_catalogue(path)));
    std::string why;
    const auto measured = model_from_findings(path, c.findings, why);
    ASSERT_TRUE(measured) << why;
    const auto vs = mma_random_vectors(path, 2000, 5);
    for (const auto& v : vs) EXPECT_TRUE(mma_accumulator_holds(path, v.c)) << v.id;
    const auto truth = outputs_of(m, vs);
    const auto a = compare_with_model(path, vs, truth, *measured, "measured");
    EXPECT_EQ(a.equal, a.vectors);
    ASSERT_EQ(a.families.size(), 4u);
    emu::mma_model flipped = m;
    flipped.integer_saturate = !m.integer_saturate;
    const auto b = compare_with_model(path, vs, truth, flipped, "flipped");
    EXPECT_LT(b.equal, b.vectors);
  }
}

// x truncated to a multiple of 2^q (toward zero).
double trunc_to(double x, int q) { return std::ldexp(std::trunc(std::ldexp(x, -q)), q); }

TEST(mma_promotion, chained_dot_equals_the_closed_form) {
  const emu::mma_model& m = emu::find_mma_model("h200-wgmma-e4m3");  // F = 13, output 13 bits, truncation
  ASSERT_EQ(m.internal_fraction_bits, 13);
  ASSERT_EQ(m.output_fraction_bits, 13);
  // One nonzero product per instruction: 1.375 * 2^e_i times 1 (an exact e4m3 product); e_i
  // cycles through 0..5 so the terms are not all alike.
  const int instructions = 400;
  std::vector<double> a(static_cast<std::size_t>(instructions * m.k), 0.0), b(a.size(), 0.0);
  std::vector<double> term(static_cast<std::size_t>(instructions));
  for (int i = 0; i < instructions; ++i) {
    term[static_cast<std::size_t>(i)] = std::ldexp(1.375, i % 6);
    a[static_cast<std::size_t>(i * m.k + 3)] = term[static_cast<std::size_t>(i)];
    b[static_cast<std::size_t>(i * m.k + 3)] = 1.0;
  }
  for (const std::int64_t every : {0, 1, 4, 7}) {
    double acc = 0.0;
    float promoted = 0.0f;
    std::int64_t since = 0;
    for (int i = 0; i < instructions; ++i) {
      const double t = term[static_cast<std::size_t>(i)];
      if (acc == 0.0) {
        acc = t;  // one term: exact
      } else {
        const int emax = std::max(std::ilogb(acc), std::ilogb(t) + 0);  // both positive
        const double sum = trunc_to(acc, emax - 13) + trunc_to(t, emax - 13);
        acc = trunc_to(sum, std::ilogb(sum) - 13);
      }
      if (every > 0 && ++since == every) {
        promoted = promoted + static_cast<float>(acc);
        acc = 0.0;
        since = 0;
      }
    }
    const double want = static_cast<double>(promoted + static_cast<float>(acc));
    EXPECT_EQ(mma_chained_dot(m, a, b, every), want) << "promote every " << every;
  }
}

// The DeepSeek-V3 report's observation (arXiv 2412.19437, 3.3.2): without promotion, long fp8
// dot products lose accuracy on Hopper. Under the 13-bit truncating model each instruction
// truncates its 33 terms (32 products and the running C) to the grid 2^(e_max - 13) and then its
// sum to 13 bits: it loses less than 34 units of 2^(e_max - 13) <= 34 * 2^-13 of the running
// value, and a positive sum only loses. So at K = 4096 (128 instructions) the never-promoted
// error lies below 128 * 34 * 2^-13 (53%); it must exceed the every-4 error (DeepSeek's
// interval, 128 elements) by more than 10x, and exceed one unit 2^-13.
TEST(mma_promotion, interval_orders_the_error_at_4096) {
  const emu::mma_model& m = emu::find_mma_model("h200-wgmma-e4m3");
  mma_promotion_options o;
  o.lengths = {4096};
  o.promote_every = {4, 0};
  o.distributions = {"positive"};
  o.samples = 8;
  const auto r = run_mma_promotion(m, o);
  ASSERT_EQ(r.points.size(), 2u);
  const double every4 = r.points[0].max_rel, never = r.points[1].max_rel;
  EXPECT_GT(never, 10 * every4);
  EXPECT_GT(never, std::ldexp(1.0, -13));
  EXPECT_LT(never, 128 * 34 * std::ldexp(1.0, -13));
  EXPECT_LT(r.points[1].mean_signed_rel, 0.0);  // truncation of positive sums only loses
}

TEST(mma_promotion, bad_options_are_input_errors) {
  const emu::mma_model& m = emu::find_mma_model("h200-wgmma-e4m3");
  mma_promotion_options o;
  o.lengths = {100};  // not a multiple of 32
  EXPECT_THROW((void)run_mma_promotion(m, o), error);
  o.lengths = {4096};
  o.promote_every = {-1};
  EXPECT_THROW((void)run_mma_promotion(m, o), error);
}

}  // namespace
}  // namespace numprobe::probes
