// The scan's report assembly: tensors ranked worst first, then summed by layer type, by depth
// and in total for every scheme.
#include <map>

#include "probes/scan_bands.hpp"

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
  std::stable_sort(rep.tensors.begin(), rep.tensors.end(),
                   [](const scan_tensor& a, const scan_tensor& b) {
                     return a.results[0].sqnr_db < b.results[0].sqnr_db;
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
