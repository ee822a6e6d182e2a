// `numprobe drift`: error against sequence length across tile boundaries, with a growth fit.
#include <fmt/format.h>
#include <algorithm>
#include <memory>

#include "numprobe/core/error.hpp"
#include "probes/drift_probe.hpp"
#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/progress.hpp"
#include "src/cli/table.hpp"

namespace numprobe::cli {
namespace {

std::pair<std::int64_t, std::int64_t> parse_range(const std::string& s) {
  const auto dots = s.find("..");
  if (dots == std::string::npos) {
    const auto v = parse_positive(s, "--seq");
    return {v, v};
  }
  return {parse_positive(s.substr(0, dots), "--seq"), parse_positive(s.substr(dots + 2), "--seq")};
}

void print_drift(const probes::drift_result& r, const std::vector<bound>& bounds) {
  // Opaque kernels: the inferred tile that chose the lengths, or the dense fallback.
  std::string tile = r.tiles.known() ? fmt::format("{}x{}", r.tiles.q, r.tiles.k) : "opaque";
  if (!r.tiles.known() && r.inferred_tile.ran)
    tile = r.inferred_tile.known() ? probes::tile_text(r.inferred_tile)
                                   : fmt::format("unknown: dense lengths crossing 16..256 ({})",
                                                 r.inferred_tile.evidence);
  fmt::print("backend   {}   tile {}\n\n", r.provider, tile);
  const bool series = !r.series.empty();
  std::vector<std::string> cols{"seq", "tiles", "mod", "rel_rms", "max_abs", "naive", "ratio", "nan", "case"};
  if (series) cols.insert(cols.begin(), {"splits", "page"});
  text_table t(cols);
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const auto& p = r.points[i];
    const std::int64_t tk = r.tiles.known() ? r.tiles.k : 0;
    std::vector<std::string> pre;
    if (series) {
      const auto& s = r.series[r.point_series[i]];
      pre = {s.splits ? std::to_string(s.splits) : "-", s.page_size ? std::to_string(s.page_size) : "-"};
    }
    auto row = std::vector<std::string>{std::to_string(p.seq), tk ? std::to_string((p.seq + tk - 1) / tk) : "-",
           tk ? std::to_string(p.seq % tk) : "-", sci(p.kernel.rel_rms), sci(p.kernel.max_abs),
           sci(p.naive.rel_rms), fixed3(p.ratio_to_naive),
           std::to_string(p.kernel.nonfinite_total()), p.case_id};
    row.insert(row.begin(), pre.begin(), pre.end());
    t.add(row);
  }
  t.print();
  if (!r.series.empty()) {
    fmt::print("\n");
    text_table st({"splits", "page", "points", "worst rel_rms", "at seq", "nan pts", "breaches", "slope", "result"});
    for (const auto& s : r.series)
      st.add({s.splits ? std::to_string(s.splits) : "default", s.page_size ? std::to_string(s.page_size) : "default",
              std::to_string(s.points), sci(s.worst_rel_rms), std::to_string(s.worst_seq),
              std::to_string(s.nan_points), std::to_string(s.breaches), fixed3(s.growth.slope),
              s.pass ? "pass" : "FAIL"});
    st.print();
  }
  // Both fits, then the verdict; an insufficient fit (under 3 usable points) prints "n/a".
  auto slope_text = [](const metrics::loglog_fit& f) {
    return f.verdict == "insufficient" ? std::string("n/a")
                                       : fmt::format("{} +- {}", fixed3(f.slope), fixed3(f.slope_stderr));
  };
  fmt::print("\ngrowth    slope {} (log rel_rms vs log key tiles, {} points), ratio slope {} (log ratio_to_naive, "
             "{} points)  verdict: {}\n",
             slope_text(r.growth.error), r.growth.error.points, slope_text(r.growth.ratio), r.growth.ratio.points,
             r.growth.verdict);
  if (r.growth.verdict == "insufficient")
    fmt::print("          (a growth verdict needs {} usable points; growth bounds fail)\n", metrics::k_growth_min_points);
  if (r.nan_points) fmt::print("NaN/Inf   {} points hold NaN or Inf in the output\n", r.nan_points);
  for (const auto& e : r.point_errors)  // backend failures: the sweep went on without them
    fmt::print("ERROR     seq {}: {}\n", e.seq, e.message);
  // One line per bound: how many points break it, the first, and the worst.
  std::vector<std::string> order;
  for (const auto& b : r.breaches)
    if (std::find(order.begin(), order.end(), b.bound) == order.end()) order.push_back(b.bound);
  for (const auto& name : order) {
    std::size_t n = 0;
    const probes::drift_breach* first = nullptr;
    const probes::drift_breach* worst = nullptr;
    for (const auto& b : r.breaches) {
      if (b.bound != name) continue;
      ++n;
      if (!first) first = &b;
      if (!worst || !(b.measured <= worst->measured)) worst = &b;
    }
    if (first->seq == 0)
      fmt::print("FAIL {}  measured {}\n", name, sci(first->measured));
    else
      fmt::print("FAIL {}  at {} of {} points; first at seq {} ({}), worst {} at seq {}\n", name, n,
                 r.points.size(), first->seq, sci(first->measured), sci(worst->measured), worst->seq);
  }
  if (!r.breaches.empty() || r.nan_points)
    fmt::print("breaches sit on: {}\n", r.tile_pattern);
  if (bounds.empty())
    fmt::print("(no --bound given: gating only on NaN/Inf; e.g. --bound ratio_to_naive<=2)\n");
  fmt::print("time      {:.1f} s\n", r.seconds);
}

}  // namespace

void setup_drift(CLI::App& app) {
  auto flags = std::make_shared<case_flags>();
  auto points = std::make_shared<std::string>("tile");
  auto* sub = app.add_subcommand("drift", "error vs sequence length, tile-boundary aware, growth fit");
  flags->seq = "128..8192";
  add_case_flags(sub, *flags, "key lengths A..B");
  sub->add_option("--points", *points, "tile | log:N | comma list of lengths")->capture_default_str();
  add_report_flags(sub, flags->out, "write the points as CSV (full precision) to PATH");
  sub->callback([flags, points] {
    auto& f = *flags;
    // --decode: --splits/--page-size lists give one length sweep per combination.
    const auto lists = take_decode_sweep_lists(f);
    const bool sweep = f.decode && (!lists.splits.empty() || !lists.page_sizes.empty());
    const auto [lo, hi] = parse_range(f.seq);
    probes::drift_options o;
    o.base = make_case(f, hi);  // validates the flags once, at the longest length
    o.seq_lo = lo;
    o.seq_hi = hi;
    o.points = *points;
    o.bounds = make_bounds(f);
    o.probe.sampling = make_sampling(f, 64);
    o.probe.end_to_end = !f.no_e2e;
    const auto po = make_provider_options(f);
    auto prov = make_attention_provider(po);
    progress_bar bar;
    o.on_point = [&bar](std::size_t done, std::size_t total, std::int64_t seq) {
      bar.update(done, total, fmt::format("seq {}", seq));
    };
    const auto r = sweep ? probes::run_drift_decode_sweep(po, lists.splits, lists.page_sizes, o)
                         : probes::run_drift(*prov, o);
    bar.finish();
    if (!f.out.to_stdout()) print_drift(r, o.bounds);
    // A point whose backend failed is exit 3 (backend failed), above a breach.
    exit_status() = !r.point_errors.empty() ? 3 : r.gated_breach ? 1 : 0;
    result::check_result c;
    probes::fill_result(r, o, c);
    c.details["backend"] = {{"name", prov->name()}, {"metadata", prov->metadata()}};
    c.details["base_case"] = o.base.id();
    c.details["bounds"] = nlohmann::json::array();
    for (const auto& b : o.bounds) c.details["bounds"].push_back(b.text());
    c.details["pass"] = !r.gated_breach;
    write_command_reports(f.out, "drift", o.base.seed, std::move(c), exit_status());
  });
}

}  // namespace numprobe::cli
