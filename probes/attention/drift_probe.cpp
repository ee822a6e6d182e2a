#include "probes/attention/drift_probe.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <set>

#include "numprobe/base/error.hpp"

namespace numprobe::probes {
namespace {

// One length's measurement: a point, a refusal or a backend error (drift_result's lists).
struct drift_outcome {
  enum kind_t : std::uint8_t { m_point, m_unsupported, m_error };
  std::size_t index = 0;  // in the sweep's lengths
  kind_t kind = m_point;
  attention_point point;
  tile_shape tiles;  // the provider's tiles after the point
  drift_point_error error;
};

// A rank's outcomes as bytes (`--mpi`), and back; `stopped`: the rank was interrupted.
std::string to_wire(const std::vector<drift_outcome>& outcomes, bool stopped) {
  wire::writer w;
  w.put(stopped);
  w.put<std::uint64_t>(outcomes.size());
  for (const auto& o : outcomes) {
    w.put<std::uint64_t>(o.index);
    w.put(o.kind);
    if (o.kind == drift_outcome::m_point) {
      write_wire(w, o.point);
      w.put(o.tiles);
    } else {
      w.put(o.error.seq);
      w.put(o.error.case_id);
      w.put(o.error.message);
    }
  }
  return w.take();
}

// Appends rank `rank`'s outcomes; returns whether it was interrupted.
bool from_wire(const std::string& bytes, std::size_t rank, std::vector<drift_outcome>& out) {
  wire::reader rd(bytes, fmt::format("drift --mpi: rank {}'s points", rank));
  bool stopped = false;
  rd.get(stopped);
  const std::size_t n = rd.count(1);
  for (std::size_t k = 0; k < n; ++k) {
    drift_outcome o;
    std::uint64_t index = 0;
    rd.get(index);
    o.index = static_cast<std::size_t>(index);
    rd.get(o.kind);
    if (o.kind > drift_outcome::m_error) throw_backend_error("drift --mpi", fmt::format("rank {}'s points: not this build's layout", rank));
    if (o.kind == drift_outcome::m_point) {
      read_wire(rd, o.point);
      rd.get(o.tiles);
    } else {
      rd.get(o.error.seq);
      rd.get(o.error.case_id);
      rd.get(o.error.message);
    }
    out.push_back(std::move(o));
  }
  rd.finish();
  return stopped;
}

// Key tiles per row at length S: the x axis of the growth fit.
double key_tiles(std::int64_t seq, std::int64_t tile_k) {
  return static_cast<double>((seq + tile_k - 1) / tile_k);
}

}  // namespace

drift_result run_drift(attention_provider& provider, const drift_options& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  drift_result r;
  r.provider = provider.name();
  r.tiles = provider.tiles();
  for (const auto& b : opts.bounds) {
    if (metrics::is_growth_metric(b.metric)) continue;
    attention_point probe_point;
    if (!probe_point.metric(b.metric) && b.metric.rfind("e2e.", 0) != 0)
      throw_input_error("--bound", fmt::format("unknown metric '{}' for drift", b.metric));
  }
  std::int64_t tile_k = r.tiles.k;
  if (!r.tiles.known() && opts.points == "tile") {
    r.inferred_tile = infer_tile(provider, opts.base);
    tile_k = r.inferred_tile.k;
  }
  const auto lengths = drift_lengths(opts.points, opts.seq_lo, opts.seq_hi, tile_k);
  // Inputs are generated once at the longest length; each point takes its prefix.
  attention_case longest = opts.base;
  longest.seq = lengths.back();
  longest.validate();
  attention_inputs all_inputs(longest, opts.probe.end_to_end);
  // Kernels that compute every row (GPUs) need all of Q at every point: generate it once.
  if (!provider.computes_row_subsets()) all_inputs.materialize_q();
  attention_probe_options probe = opts.probe;
  probe.prefix_source = &all_inputs;
  // Measured first (this rank's share of the lengths under --mpi), then put in length order.
  std::vector<drift_outcome> outcomes;
  bool stopped = false;
  auto measure = [&] {
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      if (!opts.share.mine(i)) continue;
      if (opts.stop && opts.stop()) {
        stopped = true;
        break;
      }
      attention_case c = opts.base;
      c.seq = lengths[i];
      c.validate();
      drift_outcome o;
      o.index = i;
      try {
        o.point = run_attention_point(provider, c, probe);
        o.kind = drift_outcome::m_point;
        o.tiles = provider.tiles();
      } catch (const unsupported_case& e) {
        // The kernel declares this length unsupported: listed, not an error, and skipped.
        o.kind = drift_outcome::m_unsupported;
        o.error = {c.seq, c.id(), e.reason()};
      } catch (const error& e) {
        if (opts.stop && opts.stop()) {  // a signal while an exec kernel ran: the point is not measured
          stopped = true;
          break;
        }
        if (e.code() != exit_code::m_backend) throw;
        o.kind = drift_outcome::m_error;
        o.error = {c.seq, c.id(), e.what()};
      }
      outcomes.push_back(std::move(o));
      if (opts.on_point) opts.on_point(outcomes.size(), lengths.size(), c.seq);
    }
  };
  if (!opts.share.split()) {
    measure();
  } else {
    const auto parts = opts.share.exchange([&] {
      measure();
      return to_wire(outcomes, stopped);
    });
    outcomes.clear();
    for (std::size_t k = 0; k < parts.size(); ++k) stopped = from_wire(parts[k], k, outcomes) || stopped;
    std::sort(outcomes.begin(), outcomes.end(),
              [](const drift_outcome& a, const drift_outcome& b) { return a.index < b.index; });
  }
  r.incomplete = stopped;
  std::vector<double> xs, ys, rs;  // key tiles; rel_rms; ratio_to_naive (the dimensionless error)
  for (auto& o : outcomes) {
    if (o.kind == drift_outcome::m_unsupported) {
      r.unsupported_points.push_back(std::move(o.error));
      continue;
    }
    if (o.kind == drift_outcome::m_error) {
      r.point_errors.push_back(std::move(o.error));
      continue;
    }
    attention_point& p = o.point;
    r.tiles = o.tiles;
    if (p.kernel.nonfinite_total() > 0) ++r.nan_points;
    xs.push_back(key_tiles(p.seq, r.tiles.known() ? r.tiles.k : 64));
    ys.push_back(p.kernel.rel_rms);
    rs.push_back(p.ratio_to_naive);
    for (const auto& b : opts.bounds) {
      if (metrics::is_growth_metric(b.metric)) continue;
      const auto m = p.metric(b.metric);
      if (m && !b.holds(*m)) r.breaches.push_back({p.seq, b.text(), *m});
    }
    r.points.push_back(std::move(p));
  }
  r.growth = metrics::fit_growth(xs, ys, rs);
  // A growth bound on an insufficient fit (fewer than 3 usable points) measures NaN and fails.
  for (const auto& b : opts.bounds)
    if (const auto m = metrics::growth_metric(r.growth, b.metric); m && !b.holds(*m))
      r.breaches.push_back({0, b.text(), *m});
  r.gated_breach = !r.breaches.empty() || r.nan_points > 0;

  // Tile pattern of the breaching points (growth breaches carry seq 0 and are not placed).
  std::set<std::int64_t> breach_seqs;
  for (const auto& b : r.breaches)
    if (b.seq > 0) breach_seqs.insert(b.seq);
  for (const auto& p : r.points)
    if (p.kernel.nonfinite_total() > 0) breach_seqs.insert(p.seq);
  if (!breach_seqs.empty()) {
    // An opaque kernel's breaches are placed against its inferred tile, when there is one.
    const std::int64_t bk = r.tiles.known() ? r.tiles.k : r.inferred_tile.k;
    if (bk <= 0) {
      r.tile_pattern = "unknown-tile";
    } else {
      std::size_t multiples = 0;
      for (auto s : breach_seqs) multiples += (s % bk == 0);
      std::size_t passing_non_multiples = 0, passing_multiples = 0;
      for (const auto& p : r.points)
        if (!breach_seqs.count(p.seq)) (p.seq % bk == 0 ? passing_multiples : passing_non_multiples)++;
      if (multiples == breach_seqs.size() && passing_multiples == 0) r.tile_pattern = "multiples";
      else if (multiples == 0 && passing_non_multiples == 0) r.tile_pattern = "non-multiples";
      else r.tile_pattern = "mixed";
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

drift_result run_drift_decode_sweep(const provider_options& po, const std::vector<std::int64_t>& splits,
                                    const std::vector<std::int64_t>& page_sizes, const drift_options& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int64_t> sv = splits.empty() ? std::vector<std::int64_t>{0} : splits;
  const std::vector<std::int64_t> pv = page_sizes.empty() ? std::vector<std::int64_t>{0} : page_sizes;
  drift_result all;
  const std::size_t n_series = sv.size() * pv.size();
  std::size_t done_series = 0;
  for (std::int64_t n : sv) {
    for (std::int64_t p : pv) {
      provider_options o = po;
      if (n > 0) {
        o.knobs.erase("split-size");
        o.knobs["splits"] = std::to_string(n);
      }
      if (p > 0) o.knobs["page-size"] = std::to_string(p);
      auto prov = make_attention_provider(o);
      drift_options d = opts;
      if (opts.on_point)
        d.on_point = [&, done_series](std::size_t done, std::size_t total, std::int64_t seq) {
          opts.on_point(done_series * total + done, n_series * total, seq);
        };
      drift_result r = run_drift(*prov, d);
      drift_series s;
      s.splits = n;
      s.page_size = p;
      s.provider = r.provider;
      s.growth = r.growth;
      s.points = r.points.size();
      s.nan_points = r.nan_points;
      s.breaches = r.breaches.size();
      s.tile_pattern = r.tile_pattern;
      s.pass = !r.gated_breach;
      for (const auto& pt : r.points)
        if (s.worst_seq == 0 || !(pt.kernel.rel_rms <= s.worst_rel_rms)) {
          s.worst_rel_rms = pt.kernel.rel_rms;
          s.worst_seq = pt.seq;
        }
      if (all.series.empty()) {
        all.provider = r.provider;
        all.tiles = r.tiles;
        all.growth = r.growth;
        all.tile_pattern = r.tile_pattern;
      } else {
        if (metrics::more_severe(r.growth, all.growth)) all.growth = r.growth;
        if (r.tile_pattern != all.tile_pattern) {
          // "none" next to a pattern keeps the pattern (the other series simply did not fail).
          if (all.tile_pattern == "none") all.tile_pattern = r.tile_pattern;
          else if (r.tile_pattern != "none") all.tile_pattern = "mixed";
        }
      }
      for (auto& b : r.breaches) {
        b.splits = n;
        b.page_size = p;
        all.breaches.push_back(b);
      }
      for (auto& e : r.point_errors) all.point_errors.push_back(e);
      for (auto& e : r.unsupported_points) all.unsupported_points.push_back(e);
      for (auto& pt : r.points) {
        all.points.push_back(std::move(pt));
        all.point_series.push_back(all.series.size());
      }
      all.nan_points += r.nan_points;
      all.gated_breach = all.gated_breach || r.gated_breach;
      all.series.push_back(std::move(s));
      ++done_series;
      all.lengths_planned += r.lengths_planned;
      if (r.incomplete) {
        all.incomplete = true;
        all.lengths_planned += r.lengths_planned * (n_series - done_series);
        break;
      }
    }
    if (all.incomplete) break;
  }
  all.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return all;
}

nlohmann::json to_json(const drift_result& r) {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : r.points) {
    auto j = to_json(p);
    if (r.tiles.known()) {
      j["key_tiles"] = (p.seq + r.tiles.k - 1) / r.tiles.k;
      j["seq_mod_tile"] = p.seq % r.tiles.k;
    }
    if (!r.series.empty()) {
      const auto& s = r.series[r.point_series[pts.size()]];
      j["splits"] = s.splits;
      j["page_size"] = s.page_size;
      if (s.page_size > 0) j["seq_mod_page"] = p.seq % s.page_size;
    }
    pts.push_back(std::move(j));
  }
  nlohmann::json breaches = nlohmann::json::array();
  for (const auto& b : r.breaches) {
    nlohmann::json j = {{"seq", b.seq}, {"bound", b.bound}, {"measured", json_number(b.measured)}};
    if (!r.series.empty()) {
      j["splits"] = b.splits;
      j["page_size"] = b.page_size;
    }
    breaches.push_back(std::move(j));
  }
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : r.point_errors)
    errors.push_back({{"seq", e.seq}, {"case", e.case_id}, {"error", e.message}});
  nlohmann::json unsupported = nlohmann::json::array();
  for (const auto& e : r.unsupported_points)
    unsupported.push_back({{"seq", e.seq}, {"case", e.case_id}, {"reason", e.message}});
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : r.series)
    series.push_back({{"splits", s.splits},
                      {"page_size", s.page_size},
                      {"provider", s.provider},
                      {"points", s.points},
                      {"nan_points", s.nan_points},
                      {"breaches", s.breaches},
                      {"worst_rel_rms", json_number(s.worst_rel_rms)},
                      {"worst_seq", s.worst_seq},
                      {"growth_slope", json_number(s.growth.slope)},
                      {"growth_verdict", s.growth.verdict},
                      {"tile_pattern", s.tile_pattern},
                      {"pass", s.pass}});
  nlohmann::json out = {{"provider", r.provider},
          {"tile", {{"q", r.tiles.q}, {"k", r.tiles.k}}},
          {"points", pts},
          {"growth",
           {{"slope", json_number(r.growth.slope)},
            {"slope_stderr", json_number(r.growth.slope_stderr)},
            {"intercept", json_number(r.growth.intercept)},
            {"points", r.growth.points},
            {"threshold", metrics::k_growth_slope_threshold},
            {"slope_verdict", r.growth.error.verdict},
            {"range_growth", json_number(r.growth.error.range_growth)},
            {"ratio_slope", json_number(r.growth.ratio.slope)},
            {"ratio_slope_stderr", json_number(r.growth.ratio.slope_stderr)},
            {"ratio_intercept", json_number(r.growth.ratio.intercept)},
            {"ratio_points", r.growth.ratio.points},
            {"ratio_threshold", metrics::k_growth_ratio_slope_threshold},
            {"ratio_verdict", r.growth.ratio.verdict},
            {"ratio_range_growth", json_number(r.growth.ratio.range_growth)},
            {"ratio_at_max", json_number(r.growth.ratio.fitted_at_max)},
            {"ratio_y", "ratio_to_naive"},
            {"k_stderr", metrics::k_growth_k_stderr},
            {"min_range_growth", metrics::k_growth_min_range_growth},
            {"min_points", metrics::k_growth_min_points},
            {"rule", metrics::growth_rule_text(true)},
            {"x", "key tiles"},
            {"y", "rel_rms"},
            {"verdict", r.growth.verdict}}},
          {"nan_points", r.nan_points},
          {"breaches", breaches},
          {"point_errors", errors},
          {"unsupported_points", unsupported},
          {"tile_pattern", r.tile_pattern},
          {"inferred_tile", to_json(r.inferred_tile)},
          {"seconds", r.seconds}};
  if (!r.series.empty()) out["series"] = series;
  if (r.incomplete) out["partial"] = {{"lengths_planned", r.lengths_planned}, {"points_measured", r.points.size()}};
  return out;
}

}  // namespace numprobe::probes
