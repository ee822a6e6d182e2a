// The CLI's attention cases in process: inputs(case id) are attention_inputs of that case (the
// arrays `--backend exec:` writes as q.npy, k.npy, v.npy), and compare_attention judges a given
// output with the attention probe itself (run_attention_point), so rel_rms, ratio_to_naive, the
// worst rows with their tiles and the NaN accounting are the CLI's.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include <algorithm>

#include <optional>
#include <string>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "probes/point/attention_probe.hpp"
#include "probes/attention/drift_probe.hpp"
#include "python/src/arrays.hpp"
#include "python/src/candidate_rows.hpp"
#include "python/src/case_dict.hpp"

namespace numprobe::python {
namespace {

nb::dict case_fields(const std::string& id) { return case_to_dict(parse_attention_case(id)); }

std::string case_id(const nb::dict& fields) { return case_from_dict(fields).id(); }

// Rounded inputs of a case, float64 arrays (every value exact in the case dtype).
std::tuple<nb::ndarray<nb::numpy, double>, nb::ndarray<nb::numpy, double>, nb::ndarray<nb::numpy, double>>
inputs(const std::string& id) {
  const attention_case c = parse_attention_case(id);
  c.validate();
  std::vector<double> q, k, v;
  {
    nb::gil_scoped_release unlocked;
    const attention_inputs in(c, /*keep_exact=*/false);
    q = in.q_all();
    k.assign(in.k().begin(), in.k().end());
    v.assign(in.v().begin(), in.v().end());
  }
  const std::size_t kv_rows = u(c.batch * c.seq);
  return {to_numpy(std::move(q), {u(c.rows()), u(c.heads), u(c.head_dim)}),
          to_numpy(std::move(k), {kv_rows, u(c.kv_heads), u(c.head_dim)}),
          to_numpy(std::move(v), {kv_rows, u(c.kv_heads), u(c.head_dim)})};
}

// A given output served as a provider, as `attention --inputs DIR --candidate O.npy` does.
class given_candidate final : public attention_provider {
 public:
  given_candidate(std::span<const double> o, std::optional<std::span<const double>> lse, tile_shape tiles)
      : m_o(o), m_lse(lse), m_tiles(tiles) {}
  std::string name() const override { return "python"; }
  tile_shape tiles() const override { return m_tiles; }
  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    return candidate_rows(m_o, m_lse, in.c(), rows);
  }

 private:
  std::span<const double> m_o;
  std::optional<std::span<const double>> m_lse;
  tile_shape m_tiles;
};

nb::dict compare(const in_array& o, std::optional<in_array> lse, const in_array& q, const in_array& k,
                 const in_array& v, const nb::dict& fields, std::int64_t tile_q, std::int64_t tile_k,
                 std::int64_t max_rows, std::size_t worst, const std::vector<std::string>& bound_texts) {
  const attention_case c = case_from_dict(fields);
  if (o.size() != u(c.rows() * c.heads * c.head_dim)) throw_input_error("o", "size does not match q");
  if (lse && lse->size() != u(c.rows() * c.heads)) throw_input_error("lse", "size does not match q");
  if (tile_q < 0 || tile_k < 0) throw_input_error("tile", "expected (Bq, Bk) >= 0");
  std::vector<bound> bounds;
  for (const auto& b : bound_texts) bounds.push_back(parse_bound(b, "bound"));
  for (const auto& b : bounds) {
    const auto& names = probes::point_metric_names();
    if (std::find(names.begin(), names.end(), b.metric) == names.end())
      throw_input_error("bound", fmt::format("unknown metric '{}' ({})", b.metric, fmt::join(names, ", ")));
  }
  probes::attention_point p;
  {
    nb::gil_scoped_release unlocked;
    const attention_inputs in(c, copy(q), copy(k), copy(v));
    given_candidate cand(view(o), lse ? std::optional(view(*lse)) : std::nullopt, {tile_q, tile_k});
    probes::attention_probe_options opts;
    opts.sampling.max_rows = max_rows;
    opts.end_to_end = false;  // given inputs carry no unrounded version
    opts.worst = worst;
    opts.inputs = &in;
    p = probes::run_attention_point(cand, c, opts);
  }
  nb::dict d;
  nb::dict metrics;
  for (const auto& name : probes::point_metric_names())
    if (const auto val = p.metric(name)) metrics[name.c_str()] = *val;
  d["metrics"] = metrics;
  nb::list gates;
  for (const auto& b : bounds) {
    const double measured = p.metric(b.metric).value_or(std::numeric_limits<double>::quiet_NaN());
    gates.append(nb::make_tuple(b.text(), measured, b.holds(measured)));
  }
  d["gates"] = gates;
  d["nonfinite_total"] = p.nonfinite_total();
  d["nonfinite_summary"] = p.nonfinite.summary();
  d["json"] = probes::to_json(p).dump();
  return d;
}

}  // namespace

void bind_attention(nb::module_& m) {
  m.def("case_fields", &case_fields, nb::arg("case_id"));
  m.def("case_id", &case_id, nb::arg("fields"));
  m.def("inputs", &inputs, nb::arg("case_id"));
  // The lengths `drift --points P --seq LO..HI` runs (tile: k*Bk-1, k*Bk, k*Bk+1).
  m.def("drift_lengths", &probes::drift_lengths, nb::arg("points"), nb::arg("lo"), nb::arg("hi"), nb::arg("tile_k"));
  m.def("compare_attention", &compare, nb::arg("o"), nb::arg("lse").none(), nb::arg("q"), nb::arg("k"),
        nb::arg("v"), nb::arg("case"), nb::arg("tile_q"), nb::arg("tile_k"), nb::arg("max_rows"),
        nb::arg("worst"), nb::arg("bounds"));
}

}  // namespace numprobe::python
