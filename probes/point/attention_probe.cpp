#include "numprobe/core/result.hpp"
#include "probes/point/attention_probe.hpp"

#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/base/error.hpp"
#include "numprobe/reference/attention.hpp"

namespace numprobe::probes {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Check that a provider returned what was asked: the rows and every element written.
void check_complete(const attention_output& out, std::span<const std::int64_t> rows,
                    const attention_case& c, const std::string& provider) {
  const auto n = rows.size();
  if (out.rows.size() != n || !std::equal(rows.begin(), rows.end(), out.rows.begin()) ||
      out.heads != c.heads || out.head_dim != c.head_dim ||
      out.o.size() != n * static_cast<std::size_t>(c.heads * c.head_dim) ||
      out.lse.size() != n * static_cast<std::size_t>(c.heads))
    throw_backend_error(provider, "returned an output of the wrong shape or rows");
}

}  // namespace

std::string_view to_string(nonfinite_row_kind k) {
  switch (k) {
    case nonfinite_row_kind::m_fully_masked: return "fully-masked";
    case nonfinite_row_kind::m_window_edge: return "window-edge";
    case nonfinite_row_kind::m_ordinary: return "ordinary";
  }
  return "ordinary";
}

nonfinite_row_kind classify_row(const attention_case& c, std::int64_t member, std::int64_t query) {
  const key_range kr = case_key_range(c, member, query);
  if (kr.size() <= 0) return nonfinite_row_kind::m_fully_masked;
  // Causal and unmasked rows always start at key 0; a later start is a lower mask edge, where
  // a kernel can meet a fully masked first key tile before any visible key.
  if (kr.begin > 0) return nonfinite_row_kind::m_window_edge;
  return nonfinite_row_kind::m_ordinary;
}

nonfinite_report make_nonfinite_report(const metrics::attention_errors& e,
                                       const attention_case& c) {
  nonfinite_report r;
  r.nan = e.nan_count;
  r.inf = e.inf_count;
  r.lse_nan = e.lse_nan_count;
  r.lse_inf = e.lse_inf_count;
  if (r.total() == 0) return r;
  const std::int64_t t = c.t();
  std::int64_t last_row = -1;
  for (const auto& rh : e.per_row) {
    if (!rh.nonfinite()) continue;
    const std::int64_t query = rh.row % t;
    const nonfinite_row_kind kind = classify_row(c, rh.row / t, query);
    if (rh.row != last_row) {  // per_row holds a row's heads together: count the row once
      last_row = rh.row;
      switch (kind) {
        case nonfinite_row_kind::m_fully_masked: ++r.rows_fully_masked; break;
        case nonfinite_row_kind::m_window_edge: ++r.rows_window_edge; break;
        case nonfinite_row_kind::m_ordinary: ++r.rows_ordinary; break;
      }
    }
    if (r.first.size() >= nonfinite_report::k_first) continue;
    const key_range kr = case_key_range(c, rh.row / t, query);
    nonfinite_row nr;
    nr.row = rh.row;
    nr.batch = rh.row / t;
    nr.query = query;
    nr.head = rh.head;
    nr.kind = kind;
    nr.key_begin = kr.begin;
    nr.key_end = kr.end;
    nr.o_nan = rh.o_nan;
    nr.o_inf = rh.o_inf;
    nr.lse = rh.lse;
    nr.lse_finding = rh.lse_nan || rh.lse_inf;
    r.first.push_back(nr);
  }
  return r;
}

std::string nonfinite_report::summary() const {
  if (total() == 0) return {};
  std::string what;
  auto add = [&](std::int64_t n, const char* text) {
    if (n == 0) return;
    what += fmt::format("{}{} {}", what.empty() ? "" : ", ", n, text);
  };
  add(nan, "NaN in O");
  add(inf, "Inf in O");
  add(lse_nan, "NaN in LSE");
  add(lse_inf, "Inf in LSE");
  std::string line = fmt::format("{} (rows: {} fully masked, {} window edge, {} ordinary", what,
                                 rows_fully_masked, rows_window_edge, rows_ordinary);
  line += rows_unsampled > 0 ? fmt::format(", {} outside the sampled rows)", rows_unsampled) : ")";
  if (!first.empty()) {
    const auto& f = first.front();
    line += fmt::format(", first at row {} head {} (batch {}, query {}, keys [{}, {}), {})", f.row,
                        f.head, f.batch, f.query, f.key_begin, f.key_end, to_string(f.kind));
  }
  return line;
}

std::optional<double> attention_point::metric(const std::string& name) const {
  if (name == "rel_rms") return kernel.rel_rms;
  if (name == "max_abs") return kernel.max_abs;
  if (name == "max_rel") return kernel.max_rel;
  if (name == "max_ulp") return kernel.max_ulp;
  if (name == "lse_max_abs") return kernel.lse_max_abs;
  if (name == "nan_count") return static_cast<double>(kernel.nan_count);
  if (name == "inf_count") return static_cast<double>(kernel.inf_count);
  if (name == "lse_nan_count") return static_cast<double>(kernel.lse_nan_count);
  if (name == "lse_inf_count") return static_cast<double>(kernel.lse_inf_count);
  if (name == "nonfinite") return static_cast<double>(nonfinite_total());
  if (name == "ratio_to_naive") return ratio_to_naive;
  if (name == "naive.rel_rms") return naive.rel_rms;
  if (name == "e2e.rel_rms" && end_to_end) return end_to_end->rel_rms;
  if (name == "e2e.max_abs" && end_to_end) return end_to_end->max_abs;
  return std::nullopt;
}

const std::vector<std::string>& point_metric_names() {
  static const std::vector<std::string> names{
      "rel_rms", "max_abs", "max_rel", "max_ulp", "lse_max_abs", "nan_count", "inf_count",
      "lse_nan_count", "lse_inf_count", "nonfinite", "ratio_to_naive", "naive.rel_rms", "e2e.rel_rms", "e2e.max_abs"};
  return names;
}

attention_point run_attention_point(attention_provider& provider, const attention_case& c,
                                    const attention_probe_options& opts) {
  attention_point p;
  p.case_id = c.id();
  p.seq = c.seq;
  p.queries = c.t();
  auto t0 = clock_type::now();
  std::optional<attention_inputs> generated;
  if (opts.inputs && opts.inputs->c().id() != c.id())
    throw_input_error("inputs", fmt::format("given inputs are for {}, not {}", opts.inputs->c().id(), c.id()));
  const attention_inputs& in =
      opts.inputs ? *opts.inputs
                  : generated.emplace(opts.prefix_source ? attention_inputs(c, *opts.prefix_source)
                                                         : attention_inputs(c, opts.end_to_end));
  row_sampling sampling = opts.sampling;
  const tile_shape tiles = provider.tiles();
  if (tiles.known()) {
    sampling.tile_q = tiles.q;
    sampling.tile_k = tiles.k;
  }
  const std::vector<std::int64_t> rows = sample_rows(c, sampling);
  p.rows_evaluated = static_cast<std::int64_t>(rows.size());
  const auto q = in.q_rows(rows);
  p.seconds_inputs = seconds_since(t0);

  t0 = clock_type::now();
  const attention_output cand = provider.run(in, rows);
  p.seconds_kernel = seconds_since(t0);
  check_complete(cand, rows, c, provider.name());

  t0 = clock_type::now();
  const attention_output ref = reference::attention(c, q, rows, in.k(), in.v());
  std::optional<attention_output> ref_exact;
  if (opts.end_to_end && in.has_exact()) {
    const auto qx = in.q_rows_exact(rows);
    ref_exact = reference::attention(c, qx, rows, in.k_exact(), in.v_exact());
  }
  p.seconds_reference = seconds_since(t0);

  t0 = clock_type::now();
  const attention_output naive = reference::attention_naive(c, q, rows, in.k(), in.v());
  p.seconds_naive = seconds_since(t0);

  p.kernel = metrics::compare_attention(cand, ref, c.dtype);
  // Non-finite values outside the sampled rows (kernels that compute every row) count too.
  p.kernel.nan_count += cand.outside.o_nan;
  p.kernel.inf_count += cand.outside.o_inf;
  p.kernel.lse_nan_count += cand.outside.lse_nan;
  p.kernel.lse_inf_count += cand.outside.lse_inf;
  p.naive = metrics::compare_attention(naive, ref, c.dtype);
  if (ref_exact) p.end_to_end = metrics::compare_attention(cand, *ref_exact, c.dtype);
  // A kernel exactly as good as the reference against a naive baseline that is exact too
  // (e.g. f64 inputs) has ratio 0/0: define it as 1 (no worse than the baseline).
  // An exact kernel has ratio 0 whatever the baseline: 0/0 (constant V, where the naive baseline is
  // exact too) is no error, not a ratio of 1 that a bound below 1 would fail.
  if (p.kernel.rel_rms == 0) p.ratio_to_naive = 0.0;
  else if (p.naive.rel_rms > 0) p.ratio_to_naive = p.kernel.rel_rms / p.naive.rel_rms;
  else p.ratio_to_naive = std::numeric_limits<double>::infinity();

  p.nonfinite = make_nonfinite_report(p.kernel, c);
  p.nonfinite.rows_unsampled = cand.outside.rows;
  for (std::size_t idx : metrics::worst_rows(p.kernel, opts.worst)) {
    const auto& e = p.kernel.per_row[idx];
    worst_row w;
    w.row = e.row;
    w.batch = e.row / c.t();
    w.query = e.row % c.t();
    w.head = e.head;
    const key_range kr = case_key_range(c, w.batch, w.query);
    w.keys = kr.size();
    if (tiles.known()) {
      w.query_tile = w.query / tiles.q;
      w.key_tile = kr.size() > 0 ? (kr.end - 1) / tiles.k : -1;
    }
    w.rel_rms = e.rel_rms;
    w.max_abs = e.max_abs;
    w.lse_abs = e.lse_abs;
    p.worst.push_back(w);
  }
  return p;
}

nlohmann::json to_json(const metrics::attention_errors& e) {
  return {{"rel_rms", json_number(e.rel_rms)},   {"max_abs", json_number(e.max_abs)},
          {"max_rel", json_number(e.max_rel)},   {"rel_floor", json_number(e.rel_floor)},
          {"max_ulp", json_number(e.max_ulp)},   {"lse_max_abs", json_number(e.lse_max_abs)},
          {"nan_count", e.nan_count},            {"inf_count", e.inf_count},
          {"lse_inf_mismatch", e.lse_mismatch_inf}, {"lse_nan_count", e.lse_nan_count},
          {"lse_inf_count", e.lse_inf_count},    {"lse_known", e.lse_known},
          {"elements", e.elements}};
}

nlohmann::json to_json(const nonfinite_report& r) {
  nlohmann::json first = nlohmann::json::array();
  for (const auto& f : r.first) {
    const char* lse_state = std::isnan(f.lse) ? "nan"
                            : f.lse == std::numeric_limits<double>::infinity() ? "+inf"
                            : f.lse == -std::numeric_limits<double>::infinity() ? "-inf"
                                                                               : "finite";
    first.push_back({{"row", f.row}, {"batch", f.batch}, {"query", f.query}, {"head", f.head},
                     {"kind", std::string(to_string(f.kind))},
                     {"keys", {f.key_begin, f.key_end}}, {"o_nan", f.o_nan}, {"o_inf", f.o_inf},
                     {"lse", json_number(f.lse)}, {"lse_state", lse_state},
                     {"lse_finding", f.lse_finding}});
  }
  return {{"nan", r.nan},
          {"inf", r.inf},
          {"lse_nan", r.lse_nan},
          {"lse_inf", r.lse_inf},
          {"total", r.total()},
          {"rows_by_kind",
           {{"fully_masked", r.rows_fully_masked},
            {"window_edge", r.rows_window_edge},
            {"ordinary", r.rows_ordinary}}},
          {"rows_unsampled", r.rows_unsampled},
          {"first", first}};
}

nlohmann::json to_json(const attention_point& p) {
  nlohmann::json j = {{"case", p.case_id},
                      {"seq", p.seq},
                      {"queries", p.queries},
                      {"rows_evaluated", p.rows_evaluated},
                      {"rel_rms", json_number(p.kernel.rel_rms)},
                      {"max_abs", json_number(p.kernel.max_abs)},
                      {"max_rel", json_number(p.kernel.max_rel)},
                      {"max_ulp", json_number(p.kernel.max_ulp)},
                      {"nan_count", p.kernel.nan_count},
                      {"ratio_to_naive", json_number(p.ratio_to_naive)},
                      {"kernel", to_json(p.kernel)},
                      {"naive", to_json(p.naive)}};
  if (p.end_to_end) j["end_to_end"] = to_json(*p.end_to_end);
  j["nonfinite"] = to_json(p.nonfinite);
  nlohmann::json worst = nlohmann::json::array();
  for (const auto& w : p.worst)
    worst.push_back({{"row", w.row}, {"batch", w.batch}, {"query", w.query}, {"head", w.head},
                     {"query_tile", w.query_tile}, {"key_tile", w.key_tile}, {"keys", w.keys},
                     {"rel_rms", json_number(w.rel_rms)}, {"max_abs", json_number(w.max_abs)},
                     {"lse_abs", json_number(w.lse_abs)}});
  j["worst_rows"] = worst;
  j["seconds"] = {{"inputs", p.seconds_inputs}, {"kernel", p.seconds_kernel},
                  {"reference", p.seconds_reference}, {"naive", p.seconds_naive}};
  return j;
}

namespace {

// The same field list writes and reads a point: `io` is wire_out or wire_in.
struct wire_out {
  wire::writer& w;
  template <class... T>
  void put_or_get(const T&... v) {
    (w.put(v), ...);
  }
  template <class T>
  bool present(const std::optional<T>& o) {
    w.put<std::uint8_t>(o ? 1 : 0);
    return o.has_value();
  }
};
struct wire_in {
  wire::reader& r;
  template <class... T>
  void put_or_get(T&... v) {
    (r.get(v), ...);
  }
  template <class T>
  bool present(std::optional<T>& o) {
    std::uint8_t has = 0;
    r.get(has);
    if (has != 0) o.emplace();
    else o.reset();
    return has != 0;
  }
};

template <class io, class E>
void wire_errors(io& x, E& e) {
  x.put_or_get(e.elements, e.nan_count, e.inf_count, e.max_abs, e.max_rel, e.rel_floor, e.rel_rms, e.max_ulp,
               e.lse_max_abs, e.bias, e.lse_mismatch_inf, e.lse_nan_count, e.lse_inf_count, e.lse_known, e.per_row);
}

template <class io, class P>
void wire_point(io& x, P& p) {
  x.put_or_get(p.case_id, p.seq, p.queries, p.rows_evaluated);
  wire_errors(x, p.kernel);
  wire_errors(x, p.naive);
  x.put_or_get(p.ratio_to_naive, p.worst, p.nonfinite.nan, p.nonfinite.inf, p.nonfinite.lse_nan,
               p.nonfinite.lse_inf, p.nonfinite.rows_fully_masked, p.nonfinite.rows_window_edge,
               p.nonfinite.rows_ordinary, p.nonfinite.rows_unsampled, p.nonfinite.first, p.seconds_inputs,
               p.seconds_kernel, p.seconds_reference, p.seconds_naive);
  if (x.present(p.end_to_end)) wire_errors(x, *p.end_to_end);
}

}  // namespace

void write_wire(wire::writer& w, const attention_point& p) {
  wire_out x{w};
  wire_point(x, p);
}

void read_wire(wire::reader& r, attention_point& p) {
  wire_in x{r};
  wire_point(x, p);
}

}  // namespace numprobe::probes
