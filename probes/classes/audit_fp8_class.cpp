// The audit's fp8 scaling class (see audit_kit.hpp): numerator-only loss under an attention
// sink, and the configured fp8 points restored one at a time.
#include "probes/classes/audit_kit.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "probes/classes/bisect_families.hpp"
#include "probes/classes/bisect_fp8.hpp"

namespace numprobe::probes::audit_kit {

// --- fp8 scaling ----------------------------------------------------------------------------
// Numerator-only loss: quantizing P for P.V while l sums the unquantized P. Probed with an
// attention sink (dist=sink): every key but the first sits at P ~ 1e-4 of the running max,
// below e4m3's smallest subnormal 2^-9, and holds ~45% of the mass at S = 8192; V has mean 1, so
// O ~ 1 whatever the weights. A loss from the numerator alone biases O low while the LSE (from
// l) stays exact; a running sum held short biases O too, but moves the LSE with it.
constexpr double k_bias_limit = 0.05;      // |bias| of a correctly normalized kernel: a few
                                           // roundings of V (<< 5%)
constexpr double k_lse_exact_nats = 0.05;  // LSE error of a kernel with an exact l: fp32 l,
                                           // bf16-written LSE at |lse| ~ 5 (spacing 0.03)

bool numerator_only(const measured& m) {
  return m.ran && !m.error && !m.nonfinite() && m.step.bias <= -k_bias_limit &&
         !(m.step.lse_max_abs > k_lse_exact_nats);  // unknown LSE (inf) does not count against
}

std::string bias_text(const measured& m) {
  if (!m.ran || m.error) return "no measurement";
  const bool lse_known = std::isfinite(m.step.lse_max_abs);
  return fmt::format("signed bias of O {:+.3g}, LSE max error {} ({})", m.step.bias,
                     lse_known ? fmt::format("{:.3g} nats", m.step.lse_max_abs) : std::string("unknown (no LSE)"),
                     numerator_only(m) ? (lse_known ? "mass lost from the numerator only: O low, LSE exact"
                                                    : "O biased low; without an LSE the numerator cannot be told "
                                                      "from l")
                                       : "no numerator-only loss");
}

audit_class fp8_scaling(runner& r, const attention_case& base, const layout& L) {
  audit_class k{"fp8 scaling", "pass", {}, {}, {}};
  const auto& po = r.ctx().base_provider();
  const std::int64_t s = L.quiet(L.quick ? 4096 : std::max<std::int64_t>(4096, std::min<std::int64_t>(L.seq_hi, 8192)));
  attention_case c = family(base, L, s, input_dist::m_sink);
  if (!L.decode) c.queries = 64;
  const auto sink = r.run(k, c, fmt::format("attention sink: {} keys at P ~ 1e-4 of the max, V of mean 1", s - 1), &po);
  bool fail = numerator_only(sink);
  bool judged = sink.ok();  // its control is the reference
  k.evidence.push_back(fmt::format("{}; {}", r.describe(sink), bias_text(sink)));
  if (!active_fp8_points(po).empty()) {
    // The configured fp8 points (emu knobs): their error must stay within the format's own
    // rounding (the audit's bound for fp8 cases), else restore them one at a time, as bisect does.
    const auto plain = r.run(k, family(base, L, L.quiet(1024), input_dist::m_normal), "the configured fp8 points, N(0,1)", &po);
    judged = judged || plain.ok();
    if (plain.failed()) {
      probe_outcome b;
      b.ran = true;
      b.failed = true;
      b.error = plain.step.gate_value;
      b.rel_rms = plain.step.rel_rms;
      b.ratio = plain.step.ratio_to_naive;
      b.nan = plain.step.nan_count;
      b.step = static_cast<std::size_t>(plain.step.index);
      const auto x = separate_fp8_points(r.ctx(), family(base, L, L.quiet(1024), input_dist::m_normal), b);
      bool named = false;
      for (const auto& p : x.culprit) named = named || p != "acc";
      if (named && x.verdict != "ambiguous") fail = true;
      k.evidence.push_back(fmt::format("{}; restoring the points: {} ({})", r.describe(plain), x.verdict, x.text));
    } else {
      k.evidence.push_back(fmt::format("the fp8 points stay within the format's rounding: {}", r.describe(plain)));
    }
  } else if (!fail) {
    k.evidence.push_back("no fp8 point configured (--kv-format, --p-format): the sink probe checks for P quantized "
                         "inside the kernel");
    // P rounded to an fp8 format without a scale (P in [0, 1] cast as is: e5m2 keeps 2 mantissa
    // bits) loses no mass to underflow, so the sink shows no bias, yet it is wrong everywhere.
    // When the kernel fails plain inputs, compare its error with a model of that bug: the
    // emulator with --p-format F on the same cases. The same error (within 1.5x, on two input
    // families) names the class; a healthy kernel never reaches this (it holds the bound).
    const attention_case cases[] = {family(base, L, L.quiet(1024), input_dist::m_normal),
                                    family(base, L, L.quiet(1024), input_dist::m_uniform)};
    std::vector<measured> kern;
    for (const auto& c : cases) kern.push_back(r.run(k, c, "plain inputs: is the error that of P in fp8?", &po));
    const bool wrong = std::all_of(kern.begin(), kern.end(), [](const measured& m) { return m.failed() && !m.nonfinite(); });
    for (const char* f : {"e4m3fn", "e5m2"}) {
      if (!wrong || fail) break;
      provider_options model;
      model.backend = "emu";
      model.knobs["p-format"] = f;
      bool same = true;
      std::string text;
      for (std::size_t i = 0; i < kern.size(); ++i) {
        const auto m = r.run(k, cases[i], fmt::format("model: the emulator with P rounded to {} unscaled", f), &model);
        const double q = m.ok() && m.step.rel_rms > 0 ? kern[i].step.rel_rms / m.step.rel_rms : 0.0;
        same = same && q >= 1.0 / 1.5 && q <= 1.5;
        text += fmt::format("{}{}: kernel rel_rms {:.3g}, model {:.3g} (x{:.2f})", text.empty() ? "" : "; ",
                            cases[i].id(), kern[i].step.rel_rms, m.ok() ? m.step.rel_rms : 0.0, q);
      }
      if (same) {
        fail = true;
        k.evidence.push_back(fmt::format("the kernel's error is that of P rounded to {} without a scale: {}", f, text));
      }
    }
    judged = judged || std::all_of(kern.begin(), kern.end(), [](const measured& m) { return m.ok(); });
  }
  verdict(k, fail, judged);
  return k;
}

}  // namespace numprobe::probes::audit_kit
