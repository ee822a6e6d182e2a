#include "probes/classes/bisect_trace.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "numprobe/base/error.hpp"

namespace numprobe::probes {
namespace {

// A key naming everything that selects a provider, so variants are built once.
std::string provider_key(const provider_options& po) {
  std::string k = po.backend + "|";
  if (po.tile) k += fmt::format("{}x{}", po.tile->q, po.tile->k);
  k += "|";
  for (const auto& [n, d] : po.states) k += n + "=" + d + ",";
  k += "|";
  for (const auto& f : po.faults) k += f + ",";
  k += "|";
  for (const auto& [n, v] : po.knobs) k += n + "=" + v + ",";
  return k;
}

}  // namespace

bisect_context::bisect_context(provider_options base, std::vector<bound> bounds,
                               attention_probe_options probe)
    : m_base(std::move(base)), m_bounds(std::move(bounds)), m_probe(std::move(probe)) {
  const auto& names = point_metric_names();
  for (const auto& b : m_bounds)
    if (std::find(names.begin(), names.end(), b.metric) == names.end())
      throw_input_error("--bound", fmt::format("unknown metric '{}': an attention point has {}", b.metric,
                                               fmt::join(names, ", ")));
  if (m_bounds.empty()) throw_input_error("--bound", "needs a bound");
}

attention_provider& bisect_context::provider_for(const provider_options& po) {
  auto& slot = m_providers[provider_key(po)];
  if (!slot) slot = make_attention_provider(po);
  return *slot;
}

tile_shape bisect_context::tiles() { return provider_for(m_base).tiles(); }
std::string bisect_context::provider_name() { return provider_for(m_base).name(); }
nlohmann::json bisect_context::provider_metadata() { return provider_for(m_base).metadata(); }

bisect_context::outcome bisect_context::measure(const attention_case& c, const provider_options& po) {
  const auto t0 = std::chrono::steady_clock::now();
  outcome o;
  auto& prov = provider_for(po);
  try {
    o.point = run_attention_point(prov, c, m_probe);
  } catch (const unsupported_case& e) {
    o.kind = outcome::m_unsupported;
    o.place = e.place();
    o.text = e.reason();
  } catch (const error& e) {
    // A backend error is the case's outcome (the audit records it and goes on); any other
    // error ends the command, here as elsewhere.
    if (e.code() != exit_code::m_backend) throw;
    o.kind = outcome::m_error;
    o.code = static_cast<std::int32_t>(e.code());
    o.place = e.place();
    o.text = e.what();
    if (!o.place.empty() && o.text.rfind(o.place + ": ", 0) == 0) o.text.erase(0, o.place.size() + 2);
  }
  o.provider = prov.name();
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

bisect_step& bisect_context::evaluate(const std::string& stage, const attention_case& c,
                                      const provider_options& po, const std::string& change) {
  const std::string key = provider_key(po) + "#" + c.id();
  outcome measured;
  const outcome* o = nullptr;
  if (const auto it = m_outcomes.find(key); it != m_outcomes.end()) {
    o = &it->second;
  } else {
    measured = measure(c, po);
    o = m_recording ? &(m_outcomes[key] = std::move(measured)) : &measured;
  }
  if (o->kind == outcome::m_unsupported) throw unsupported_case(o->place, o->text);
  if (o->kind == outcome::m_error) throw error(static_cast<exit_code>(o->code), o->place, o->text);
  const attention_point& p = o->point;
  bisect_step s;
  s.index = static_cast<int>(m_trace.size()) + 1;
  s.stage = stage;
  s.case_id = p.case_id;
  s.change = change;
  s.provider = o->provider;
  s.seq = c.seq;
  s.rows = p.rows_evaluated;
  s.rel_rms = p.kernel.rel_rms;
  s.ratio_to_naive = p.ratio_to_naive;
  s.lse_max_abs = p.kernel.lse_max_abs;
  s.bias = p.kernel.bias;
  // NaN/Inf in O and a NaN LSE count as NaN; an infinite LSE (a row acting as if it saw no key,
  // O = 0 and LSE = -inf) fails the step without passing for a NaN, which the classes read as
  // the empty-row signature.
  s.nan_count = p.kernel.nan_count + p.kernel.inf_count + p.kernel.lse_nan_count;
  s.failed = s.nan_count > 0 || p.kernel.lse_inf_count > 0;
  for (std::size_t i = 0; i < m_bounds.size(); ++i) {
    const double v = p.metric(m_bounds[i].metric).value_or(std::nan(""));
    if (i == 0) s.gate_value = v;
    if (!m_bounds[i].holds(v)) s.failed = true;
  }
  s.seconds = o->seconds;
  m_trace.push_back(std::move(s));
  if (on_step) on_step(m_trace.back());
  return m_trace.back();
}

std::string bisect_context::recorded() const {
  wire::writer w;
  w.put<std::uint64_t>(m_outcomes.size());
  for (const auto& [key, o] : m_outcomes) {
    w.put(key);
    w.put(o.kind);
    w.put(o.provider);
    w.put(o.seconds);
    w.put(o.code);
    w.put(o.place);
    w.put(o.text);
    if (o.kind == outcome::m_point) write_wire(w, o.point);
  }
  return w.take();
}

void bisect_context::add_recorded(const std::string& bytes, const std::string& place) {
  wire::reader r(bytes, place);
  const std::size_t n = r.count(1);
  for (std::size_t i = 0; i < n; ++i) {
    std::string key;
    outcome o;
    r.get(key);
    r.get(o.kind);
    if (o.kind > outcome::m_error) throw_backend_error(place, "an outcome of another layout");
    r.get(o.provider);
    r.get(o.seconds);
    r.get(o.code);
    r.get(o.place);
    r.get(o.text);
    if (o.kind == outcome::m_point) read_wire(r, o.point);
    m_outcomes.emplace(std::move(key), std::move(o));
  }
  r.finish();
}

provider_options with_states_f64(const provider_options& po, const std::vector<std::string>& names) {
  provider_options o = po;
  for (const auto& n : names) o.states[n] = "f64";
  return o;
}

std::string factor_text(double num, double den) {
  if (std::isnan(num)) return "NaN";
  if (!std::isfinite(num)) return "inf";
  if (den <= 0) return num > 0 ? "inf" : "x1";
  const double f = num / den;
  return f >= 10 ? fmt::format("x{:.0f}", f) : fmt::format("x{:.2g}", f);
}

nlohmann::json to_json(const bisect_step& s, bool with_seconds) {
  nlohmann::json j = {{"step", s.index},          {"stage", s.stage},
                      {"case", s.case_id},        {"change", s.change},
                      {"provider", s.provider},   {"seq", s.seq},
                      {"rows", s.rows},           {"rel_rms", json_number(s.rel_rms)},
                      {"ratio_to_naive", json_number(s.ratio_to_naive)},
                      {"lse_max_abs", json_number(s.lse_max_abs)},
                      {"gate_value", json_number(s.gate_value)},
                      {"nan_inf", s.nan_count},   {"failed", s.failed},
                      {"decision", s.decision}};
  if (with_seconds) j["seconds"] = s.seconds;
  return j;
}

bound default_bisect_bound() {
  bound b = parse_bound("ratio_to_naive<=2");
  b.basis = "FlashAttention's test criterion: within 2x of the naive same-precision baseline";
  return b;
}

}  // namespace numprobe::probes
