// burnin's verdicts (judge_burnin), its golden file, its JSON and its result model.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "numprobe/base/error.hpp"
#include "numprobe/core/result_gates.hpp"
#include "probes/burnin/burnin_probe.hpp"

namespace numprobe::probes {
namespace {

constexpr const char* k_golden_kind = "numprobe burnin golden";

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median absolute deviation from the median (unscaled).
double mad_of(const std::vector<double>& v, double median) {
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::fabs(x - median));
  return median_of(dev);
}

std::string hex(std::uint64_t h) { return fmt::format("{:016x}", h); }

std::uint64_t parse_hex(const nlohmann::json& j, const std::string& place) {
  const std::string s = j.is_string() ? j.get<std::string>() : std::string();
  std::uint64_t v = 0;
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw_input_error(place, fmt::format("hash '{}' is not 16 hex digits", s));
  for (char c : s) v = v * 16 + static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  return v;
}

// The golden hash of each workload (the recorded run's), checked against this run's workloads.
std::vector<std::uint64_t> golden_hashes(const burnin_result& r) {
  const auto& g = r.options.golden;
  const std::string place = "--against";
  if (!g.is_object() || g.value("kind", "") != k_golden_kind)
    throw_input_error(place, fmt::format("not a burnin golden file (written by burnin --record)"));
  const auto& ws = g.contains("workloads") ? g.at("workloads") : nlohmann::json();
  if (!ws.is_array() || ws.size() != r.workloads.size())
    throw_input_error(place, fmt::format("records {} workloads, this run has {}", ws.is_array() ? ws.size() : 0,
                                         r.workloads.size()));
  std::vector<std::uint64_t> out;
  for (std::size_t w = 0; w < r.workloads.size(); ++w) {
    const auto& x = ws[w];
    const std::string id = x.is_object() ? x.value("id", "") : "";
    if (id != r.workloads[w].id)
      throw_input_error(place, fmt::format("recorded workload '{}' is not this run's '{}': record again with these "
                                           "flags", id, r.workloads[w].id));
    out.push_back(parse_hex(x.value("hash", nlohmann::json()), place));
  }
  return out;
}

}  // namespace

void judge_burnin(burnin_result& r) {
  const std::size_t nw = r.workloads.size();
  const bool golden = !r.options.golden.is_null();
  const std::vector<std::uint64_t> reference_golden = golden ? golden_hashes(r) : std::vector<std::uint64_t>{};
  // The majority hash of each workload over the devices' first repetitions: more than half of
  // the devices must agree (0: no majority, every device's outputs are then in question).
  r.majority.assign(nw, 0);
  for (std::size_t w = 0; w < nw; ++w) {
    std::map<std::uint64_t, std::size_t> votes;
    for (const auto& d : r.devices)
      if (!d.hashes[w].empty()) ++votes[d.hashes[w].front()];
    for (const auto& [h, n] : votes)
      if (2 * n > r.devices.size()) r.majority[w] = h;
  }
  for (auto& d : r.devices) {
    d.reasons.clear();
    d.deterministic = d.identical = d.matches_golden = true;
    for (std::size_t w = 0; w < nw; ++w) {
      const auto& hs = d.hashes[w];
      const auto first_other = std::find_if(hs.begin(), hs.end(), [&](std::uint64_t h) { return h != hs.front(); });
      if (first_other != hs.end()) {
        d.deterministic = false;
        d.reasons.push_back(fmt::format("not deterministic: {} of repetition {} differs from repetition 0",
                                        r.workloads[w].name, first_other - hs.begin()));
      }
      if (r.majority[w] == 0) {
        d.identical = false;
        d.reasons.push_back(fmt::format("{}: no majority, the devices' outputs split", r.workloads[w].name));
      } else if (std::any_of(hs.begin(), hs.end(), [&](std::uint64_t h) { return h != r.majority[w]; })) {
        d.identical = false;
        d.reasons.push_back(fmt::format("{} differs from the majority of the devices", r.workloads[w].name));
      }
      if (golden && std::any_of(hs.begin(), hs.end(), [&](std::uint64_t h) { return h != reference_golden[w]; })) {
        d.matches_golden = false;
        d.identical = false;
        d.reasons.push_back(fmt::format("{} differs from the recorded run", r.workloads[w].name));
      }
    }
    std::vector<double> tp;
    for (double s : d.rep_seconds) tp.push_back(s > 0 ? 1.0 / s : 0.0);
    d.throughput = median_of(tp);
    d.spread = d.throughput > 0 ? mad_of(tp, d.throughput) / d.throughput : 0.0;
  }
  std::vector<double> tps;
  for (const auto& d : r.devices) tps.push_back(d.throughput);
  r.median_throughput = median_of(tps);
  // Each device's speed relative to the fleet, repetition by repetition (burnin_device).
  std::size_t reps = r.devices.empty() ? 0 : r.devices.front().rep_seconds.size();
  for (const auto& d : r.devices) reps = std::min(reps, d.rep_seconds.size());
  std::vector<double> fleet_time(reps);
  for (std::size_t i = 0; i < reps; ++i) {
    std::vector<double> t;
    for (const auto& d : r.devices) t.push_back(d.rep_seconds[i]);
    fleet_time[i] = median_of(t);
  }
  std::vector<double> speeds;
  for (auto& d : r.devices) {
    std::vector<double> ratio;
    for (std::size_t i = 0; i < reps; ++i)
      if (d.rep_seconds[i] > 0 && fleet_time[i] > 0) ratio.push_back(fleet_time[i] / d.rep_seconds[i]);
    if (ratio.empty()) {  // no repetition timed: no evidence of the device's speed, so no pass
      d.relative_speed = 0.0;
      d.reasons.push_back("no repetition was timed (no time above 0 s, or none in the fleet): its speed is unknown");
      continue;
    }
    d.relative_speed = median_of(ratio);
    speeds.push_back(d.relative_speed);
  }
  r.median_relative_speed = median_of(speeds);
  r.mad = mad_of(speeds, r.median_relative_speed);
  r.mad_used = std::max(r.mad, r.options.mad_floor * r.median_relative_speed);
  for (auto& d : r.devices) {
    if (d.relative_speed <= 0) continue;  // untimed: reported above
    const double off = std::fabs(d.relative_speed - r.median_relative_speed);
    if (r.mad_used > 0 && off > r.options.mad_k * r.mad_used)
      d.reasons.push_back(fmt::format("speed {:.3g} of the fleet's (repetition by repetition; {:.4g} reps/s) is {:.1f} "
                                      "MADs from the median {:.3g} (bound {})",
                                      d.relative_speed, d.throughput, off / r.mad_used, r.median_relative_speed,
                                      r.options.mad_k));
  }
}

nlohmann::json burnin_golden(const burnin_result& r) {
  nlohmann::json j = {{"kind", k_golden_kind}, {"backend", r.backend}, {"workloads", nlohmann::json::array()}};
  for (std::size_t w = 0; w < r.workloads.size(); ++w) {
    if (r.majority[w] == 0)
      throw_input_error("--record", fmt::format("{}: the devices have no majority output to record",
                                                r.workloads[w].name));
    j["workloads"].push_back({{"name", r.workloads[w].name}, {"id", r.workloads[w].id}, {"hash", hex(r.majority[w])}});
  }
  return j;
}

nlohmann::json to_json(const burnin_result& r) {
  nlohmann::json j;
  j["backend"] = r.backend;
  j["reps"] = r.reps;
  j["clock"] = r.clock;
  j["mad_k"] = r.options.mad_k;
  j["mad_floor"] = r.options.mad_floor;
  j["median_throughput"] = r.median_throughput;
  j["median_relative_speed"] = r.median_relative_speed;
  j["mad"] = r.mad;  // of the devices' relative speeds, as mad_used
  j["mad_used"] = r.mad_used;
  j["against_golden"] = !r.options.golden.is_null();
  j["workloads"] = nlohmann::json::array();
  for (std::size_t w = 0; w < r.workloads.size(); ++w)
    j["workloads"].push_back({{"name", r.workloads[w].name},
                              {"id", r.workloads[w].id},
                              {"majority", r.majority[w] ? nlohmann::json(hex(r.majority[w])) : nlohmann::json(nullptr)}});
  j["devices"] = nlohmann::json::array();
  j["outliers"] = nlohmann::json::array();
  for (const auto& d : r.devices) {
    nlohmann::json hashes = nlohmann::json::object();
    for (std::size_t w = 0; w < r.workloads.size(); ++w) {
      auto& a = hashes[r.workloads[w].name] = nlohmann::json::array();
      for (auto h : d.hashes[w]) a.push_back(hex(h));
    }
    j["devices"].push_back({{"id", d.id},
                            {"name", d.name},
                            {"identical", d.identical},
                            {"deterministic", d.deterministic},
                            {"matches_golden", r.options.golden.is_null() ? nlohmann::json(nullptr)
                                                                          : nlohmann::json(d.matches_golden)},
                            {"throughput", d.throughput},
                            {"throughput_unit", "reps/s"},
                            {"spread", d.spread},
                            {"relative_speed", d.relative_speed},
                            {"rep_seconds", d.rep_seconds},
                            {"hashes", hashes},
                            {"outlier", !d.reasons.empty()}});
    if (!d.reasons.empty()) j["outliers"].push_back({{"id", d.id}, {"name", d.name}, {"reasons", d.reasons}});
  }
  j["seconds"] = r.seconds;
  return j;
}

void fill_result(const burnin_result& r, result::check_result& out) {
  out.backend = r.backend;
  out.case_id = fmt::format("burnin(devices={},reps={},{})", r.devices.size(), r.reps, r.workloads.front().id);
  const auto outliers = static_cast<double>(r.outliers());
  const auto identical = static_cast<double>(
      std::count_if(r.devices.begin(), r.devices.end(), [](const burnin_device& d) { return d.identical; }));
  out.metrics.push_back({"devices", static_cast<double>(r.devices.size()), "", "int"});
  out.metrics.push_back({"identical_devices", identical, "", "int"});
  out.metrics.push_back({"outliers", outliers, "", "int"});
  out.metrics.push_back({"median_throughput", r.median_throughput, "reps/s", "sci"});
  out.gates.push_back(result::evaluate_gate(
      bound{"outliers", bound_op::m_le, 0.0,
            "a burn-in passes when every device computes the majority's bits, the same every repetition, at a "
            "throughput within k MADs of the median"},
      outliers, out.case_id));
  out.seconds = r.seconds;
  out.message = outliers > 0 ? fmt::format("{} of {} devices are outliers", r.outliers(), r.devices.size())
                             : fmt::format("{} devices identical over {} repetitions", r.devices.size(), r.reps);
  result::view_builder v(out);
  v.line(fmt::format("burnin on {}: {} devices, {} repetitions of {}", r.backend, r.devices.size(), r.reps,
                     [&] {
                       std::string s;
                       for (const auto& w : r.workloads) s += (s.empty() ? "" : ", ") + w.id;
                       return s;
                     }()));
  auto& t = v.add_table({"device", "name", "identical", "deterministic", "reps/s", "spread_%", "relative_speed",
                         "outlier"},
                        "devices");
  for (const auto& d : r.devices) {
    std::string why;
    for (const auto& x : d.reasons) why += (why.empty() ? "" : "; ") + x;
    t.rows.push_back({std::to_string(d.id), d.name, d.identical ? "yes" : "NO", d.deterministic ? "yes" : "NO",
                      fmt::format("{:.4g}", d.throughput), fmt::format("{:.2f}", 100.0 * d.spread),
                      fmt::format("{:.3f}", d.relative_speed), why.empty() ? "-" : why});
  }
  v.line(fmt::format("throughput median {:.4g} reps/s; relative speed median {:.3g}, MAD {:.3g} (floored at {:.0f}% of "
                     "the median), outlier beyond {} MADs",
                     r.median_throughput, r.median_relative_speed, r.mad, 100.0 * r.options.mad_floor,
                     r.options.mad_k));
  // A plot per device: its throughput repetition by repetition, against the fleet's median.
  for (const auto& d : r.devices) {
    result::curve c;
    c.title = fmt::format("device {} ({}): throughput by repetition", d.id, d.name);
    c.x_label = "repetition";
    c.y_label = "reps/s";
    c.log_x = c.log_y = false;
    result::series s{d.name, {}, {}};
    for (std::size_t i = 0; i < d.rep_seconds.size(); ++i) {
      s.x.push_back(static_cast<double>(i));
      s.y.push_back(d.rep_seconds[i] > 0 ? 1.0 / d.rep_seconds[i] : 0.0);
    }
    c.lines.push_back(std::move(s));
    c.bounds.push_back({"fleet median", r.median_throughput});
    out.curves.push_back(std::move(c));
  }
  out.details = to_json(r);
}

}  // namespace numprobe::probes
