// The scan's report assembly: tensors ranked worst first, then summed by layer type, by depth
// and in total for every scheme.
#include <map>

#include "numprobe/base/error.hpp"
#include "probes/scan/scan_bands.hpp"

namespace numprobe::probes {
namespace {

constexpr std::pair<scan_rank, const char*> k_rank_names[] = {{scan_rank::m_sqnr, "sqnr"},
                                                              {scan_rank::m_flushed, "flushed"},
                                                              {scan_rank::m_outlier, "outlier"},
                                                              {scan_rank::m_bulk, "bulk"},
                                                              {scan_rank::m_output, "output"}};

}  // namespace

scan_rank parse_scan_rank(const std::string& s, const std::string& where) {
  for (const auto& [k, n] : k_rank_names)
    if (s == n) return k;
  throw_input_error(where, "unknown rank key '" + s + "' (sqnr, flushed, outlier, bulk, output)");
}

const char* name(scan_rank k) {
  for (const auto& [key, n] : k_rank_names)
    if (key == k) return n;
  return "?";
}

double rank_value(const scan_scheme_result& r, scan_rank k) {
  switch (k) {
    case scan_rank::m_sqnr: return r.sqnr_db;
    case scan_rank::m_flushed: return r.flushed_frac;
    case scan_rank::m_outlier: return r.outlier_flushed_frac;
    case scan_rank::m_bulk: return r.bulk_rel_rms;
    case scan_rank::m_output: return r.output_rel_rms;  // = rel_rms without --act-stats (scan_probe.hpp)
  }
  return r.sqnr_db;
}

}  // namespace numprobe::probes

namespace numprobe::probes::detail {
namespace {

void finish_group(scan_group& g) {
  g.sqnr_db = sqnr_of(g.sum_sq, g.sum_sq_err);
  g.rel_rms = rel_rms_of(g.sum_sq, g.sum_sq_err);
}

void add_to_group(scan_group& g, const scan_tensor& t, const scan_scheme_result& r) {
  ++g.tensors;
  g.elements += r.elements;
  g.sum_sq += r.sum_sq;
  g.sum_sq_err += r.sum_sq_err;
  g.flushed += r.flushed;
  g.clipped += r.clipped;
  g.outlier_blocks += r.outlier_blocks;
  g.bytes += r.bytes;
  if (g.worst_tensor.empty() || r.sqnr_db < g.worst_sqnr_db) {
    g.worst_tensor = t.name;
    g.worst_sqnr_db = r.sqnr_db;
  }
}

}  // namespace

void rank_and_group(scan_report& rep) {
  // Worst first; ties keep the checkpoint's order. Every key is NaN-free (sqnr_of, rel_rms_of
  // and the fractions give numbers or infinities), so the order is strict weak.
  const scan_rank k = rep.options.rank_by;
  const bool lower_is_worse = k == scan_rank::m_sqnr;
  std::stable_sort(rep.tensors.begin(), rep.tensors.end(), [&](const scan_tensor& a, const scan_tensor& b) {
    // By output with --act-stats, the tensors with statistics first: an isotropic estimate
    // (those without) is not comparable with a weighted one.
    const bool wa = a.results[0].output_weighted, wb = b.results[0].output_weighted;
    if (k == scan_rank::m_output && wa != wb) return wa;
    const double x = rank_value(a.results[0], k), y = rank_value(b.results[0], k);
    return lower_is_worse ? x < y : x > y;
  });

  for (std::size_t s = 0; s < rep.options.schemes.size(); ++s) {
    std::map<std::string, scan_group> types;
    std::map<int, scan_group> depths;
    scan_group tot;
    tot.key = rep.tensors.empty() ? rep.options.schemes[s] : rep.tensors[0].results[s].scheme;
    for (const auto& t : rep.tensors) {
      const auto& r = t.results[s];
      auto& gt = types[t.layer_type];
      gt.key = t.layer_type;
      add_to_group(gt, t, r);
      auto& gd = depths[t.layer];
      gd.key = t.layer < 0 ? "none" : std::to_string(t.layer);
      add_to_group(gd, t, r);
      add_to_group(tot, t, r);
    }
    std::vector<scan_group> vt, vd;
    for (auto& [k, g] : types) {
      finish_group(g);
      vt.push_back(g);
    }
    std::stable_sort(vt.begin(), vt.end(),
                     [](const scan_group& a, const scan_group& b) { return a.sqnr_db < b.sqnr_db; });
    for (auto& [k, g] : depths) {
      finish_group(g);
      vd.push_back(g);
    }
    finish_group(tot);
    rep.by_type.push_back(std::move(vt));
    rep.by_depth.push_back(std::move(vd));
    rep.totals.push_back(tot);
  }
}

}  // namespace numprobe::probes::detail
