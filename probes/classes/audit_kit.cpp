// The runner and length layout the audit's class probes share (see audit_kit.hpp).
#include "probes/classes/audit_kit.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "numprobe/base/error.hpp"
#include "probes/classes/bisect_families.hpp"

namespace numprobe::probes::audit_kit {

measured runner::run_once(audit_class& k, const attention_case& c, const std::string& change,
                          const provider_options& po) {
  measured m;
  m.ran = true;
  m.case_id = c.id();
  if (m_ctx.stop && m_ctx.stop()) {
    m.error = true;
    m.message = k_interrupted_case;
    m_errors.push_back({k.name, m.case_id, m.message});
    k.cases.push_back(m.case_id);
    return m;
  }
  try {
    const auto& s = m_ctx.evaluate("audit", c, po, fmt::format("{}: {}", k.name, change));
    m.step = s;
    m_ctx.trace().back().decision = s.nan_count ? fmt::format("NaN/Inf x{}", s.nan_count)
                                                : (s.failed ? "fails" : "passes");
    k.steps.push_back(s.index);
  } catch (const unsupported_case& e) {
    m.error = m.refused = true;
    m.message = e.reason();
  } catch (const error& e) {
    // A signal while an exec kernel ran (src/core/interrupt.hpp) ends the case, not the audit:
    // the cases left are skipped through `stop`, and the partial report is written.
    const bool interrupted = m_ctx.stop && m_ctx.stop();
    if (e.code() != exit_code::m_backend && !interrupted) throw;
    m.error = true;
    m.message = e.what();
    m_errors.push_back({k.name, m.case_id, m.message});
  }
  k.cases.push_back(m.case_id);
  return m;
}

measured runner::run(audit_class& k, const attention_case& c, const std::string& change,
                     const provider_options* po) {
  const provider_options& p = po ? *po : m_po;
  measured m = run_once(k, c, change, p);
  if (m.refused && c.mask == mask_kind::m_none && c.queries <= c.seq) {
    attention_case causal = c;
    causal.mask = mask_kind::m_causal;
    const std::string note = fmt::format("the kernel refuses cases without a mask (\"{}\"): the probes run causal "
                                         "(bottom-right)", m.message);
    if (std::find(k.evidence.begin(), k.evidence.end(), note) == k.evidence.end()) k.evidence.push_back(note);
    measured again = run_once(k, causal, change + " [causal: mask=none refused]", p);
    if (!again.refused) return again;
    m = again;
  }
  if (m.refused) m_refusals.push_back({k.name, m.case_id, m.message});
  return m;
}

std::string runner::describe(const measured& m) const {
  if (!m.ran) return "not run";
  if (m.error) return fmt::format("{}: backend error ({})", m.case_id, m.message);
  const bisect_step& s = m.step;
  if (s.nan_count) return fmt::format("{}: NaN/Inf in {} elements [step {}]", m.case_id, s.nan_count, s.index);
  const bound& b = m_ctx.bounds().front();
  return fmt::format("{}: {} {:.3g} ({} {}) [step {}]", m.case_id, b.metric, s.gate_value,
                     s.failed ? "breaks" : "holds", b.text(), s.index);
}

bool contrast(const measured& probe, const measured& control) {
  if (!probe.failed() || !control.ran || control.error) return false;
  if (!control.failed()) return true;
  return !control.nonfinite() && (probe.nonfinite() || probe.step.rel_rms >= 10.0 * control.step.rel_rms);
}

std::int64_t layout::quiet(std::int64_t n) const {
  std::int64_t m = k_unknown_quantum;
  if (tile_k > 0) m = tile_q > 0 ? std::lcm(tile_q, tile_k) : tile_k;
  if (m > n && tile_k > 0) m = tile_k;
  return std::max<std::int64_t>(m, (n + m - 1) / m * m);
}

attention_case family(const attention_case& base, const layout& L, std::int64_t seq, input_dist d, mask_kind m) {
  return plain_case(base, seq, L.decode ? L.decode_queries : 0, d, m);
}

void verdict(audit_class& k, bool fail, bool judged) {
  if (fail) {
    k.verdict = "fail";
    return;
  }
  if (judged) {
    k.verdict = "pass";
    return;
  }
  // run_audit_classes turns this into not-applicable when every case that did not run was
  // refused, and lists the cases that did not run.
  k.verdict = "inconclusive";
}

}  // namespace numprobe::probes::audit_kit
