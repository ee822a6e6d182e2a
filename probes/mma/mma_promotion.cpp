// Promotion intervals under a bit-accurate MMA model (mma_promotion.hpp).
#include "probes/mma/mma_promotion.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <span>

#include "numprobe/base/error.hpp"
#include "numprobe/base/neumaier.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/formats/format.hpp"

namespace numprobe::probes {
namespace {

std::vector<double> draw(const emu::mma_model& m, const std::string& dist, std::int64_t n, std::uint64_t seed,
                         std::uint64_t stream) {
  std::vector<double> x(static_cast<std::size_t>(n));
  double amax = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    double v = normal_at(seed, stream, static_cast<std::uint64_t>(i));
    if (dist == "positive") v = std::fabs(v);
    x[static_cast<std::size_t>(i)] = v;
    amax = std::max(amax, std::fabs(v));
  }
  const double scale = amax > 0 ? emu::mma_bits(m.input).max_finite / amax : 1.0;
  for (auto& v : x) v = formats::round_to(m.input, v * scale);
  return x;
}

}  // namespace

double mma_chained_dot(const emu::mma_model& model, const std::vector<double>& a, const std::vector<double>& b,
                       std::int64_t promote_every) {
  const std::size_t k = static_cast<std::size_t>(model.k);
  double acc = 0.0;       // the MMA accumulator (C in, D out, in the model's output precision)
  float promoted = 0.0f;  // the fp32 register it is promoted into
  std::int64_t since = 0;
  for (std::size_t g = 0; g < a.size(); g += k) {
    acc = emu::mma_dot(model, std::span<const double>(a).subspan(g, k), std::span<const double>(b).subspan(g, k), acc,
                       "mma promotion");
    if (promote_every > 0 && ++since == promote_every) {
      promoted = promoted + static_cast<float>(acc);  // acc is an fp32 value: exact conversion
      acc = 0.0;
      since = 0;
    }
  }
  return static_cast<double>(promoted + static_cast<float>(acc));
}

mma_promotion_result run_mma_promotion(const emu::mma_model& model, const mma_promotion_options& o) {
  if (model.integer())
    throw_input_error("--promotion", fmt::format("{} accumulates integers exactly (s32): there is no rounding for a "
                                                 "promotion interval to bound; use a floating-point model",
                                                 model.name));
  for (const auto n : o.lengths)
    if (n <= 0 || n % model.k != 0)
      throw_input_error("--promotion-lengths", fmt::format("{} is not a positive multiple of {}'s k = {}", n,
                                                           model.name, model.k));
  for (const auto p : o.promote_every)
    if (p < 0) throw_input_error("--promote-every", fmt::format("{} (0 means never; intervals count instructions)", p));
  for (const auto& d : o.distributions)
    if (d != "positive" && d != "normal") throw_input_error("--promotion", "distribution '" + d + "' (positive, normal)");
  if (o.samples < 1) throw_input_error("--samples", "must be at least 1");
  mma_promotion_result r;
  r.model = model.name;
  for (std::size_t di = 0; di < o.distributions.size(); ++di) {
    const std::string& dist = o.distributions[di];
    for (const auto n : o.lengths) {
      // The same vectors for every interval of this (distribution, length): the curves differ
      // only by the promotion.
      std::vector<std::vector<double>> as, bs;
      std::vector<double> exact;
      for (int s = 0; s < o.samples; ++s) {
        const std::uint64_t stream = (di * 1000003u + static_cast<std::uint64_t>(n)) * 4096u + static_cast<std::uint64_t>(s);
        as.push_back(draw(model, dist, n, o.seed, 2 * stream));
        bs.push_back(draw(model, dist, n, o.seed, 2 * stream + 1));
        neumaier e;
        for (std::size_t i = 0; i < as.back().size(); ++i) e.add(as.back()[i] * bs.back()[i]);
        exact.push_back(e.value());
      }
      for (const auto every : o.promote_every) {
        mma_promotion_point p;
        p.distribution = dist;
        p.length = n;
        p.promote_every = every;
        p.samples = o.samples;
        std::vector<double> rel;
        double signed_sum = 0.0;
        for (int s = 0; s < o.samples; ++s) {
          const auto su = static_cast<std::size_t>(s);
          const double got = mma_chained_dot(model, as[su], bs[su], every);
          const double den = std::fabs(exact[su]) > 0 ? std::fabs(exact[su]) : 1.0;
          rel.push_back(std::fabs(got - exact[su]) / den);
          signed_sum += (got - exact[su]) / den;
        }
        std::sort(rel.begin(), rel.end());
        p.max_rel = rel.back();
        p.median_rel = rel.size() % 2 ? rel[rel.size() / 2] : 0.5 * (rel[rel.size() / 2 - 1] + rel[rel.size() / 2]);
        p.mean_signed_rel = signed_sum / o.samples;
        r.points.push_back(p);
      }
    }
  }
  return r;
}

}  // namespace numprobe::probes
