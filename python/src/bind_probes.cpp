// numprobe.drift and numprobe.audit on a Python callable: the callable is a provider (backend
// "python:N", N its slot in a table of the kernels under test), so the sweep, the lengths, the
// inputs, the verdicts and the reports are the CLI's own (run_drift, run_audit, fill_result,
// the report writers). A kernel that raises or returns the wrong shape is a backend failure
// (the CLI's exit 3: the point is recorded and the sweep goes on); Ctrl-C stops the sweep.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "probes/attention/drift_probe.hpp"
#include "probes/audit/audit.hpp"
#include "probes/invariance/invariance_probe.hpp"
#include "python/src/arrays.hpp"
#include "python/src/candidate_rows.hpp"
#include "python/src/case_dict.hpp"
#include "reports/report_writer.hpp"
#include "src/core/interrupt.hpp"
#include "src/providers/exec_provider_files.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe::python {
namespace {

// The callables under test by slot, while a drift or audit call runs. Each holds the Python
// adapter (numprobe._probes): (q, k, v, case) -> (o float64 flat, lse float64 flat or None).
// The case goes as case.json's text (exec_provider_files.hpp), so a kernel written for
// `--backend exec:` reads the same fields under the same names. Only touched with the GIL held.
struct kernel_entry {
  nb::object call;
  std::string name;
};
std::map<int, kernel_entry>& kernel_table() {
  static std::map<int, kernel_entry> t;
  return t;
}

// Rounded inputs as the arrays a kernel receives: float32 (float64 for f64 cases), every value
// exact in the case dtype, shaped as numprobe.inputs() gives them.
nb::object input_array(std::span<const double> x, std::int64_t rows, std::int64_t heads, std::int64_t dim,
                       bool f64) {
  const std::vector<std::size_t> shape{u(rows), u(heads), u(dim)};
  if (f64) return nb::cast(to_numpy(std::vector<double>(x.begin(), x.end()), shape));
  return nb::cast(to_numpy(std::vector<float>(x.begin(), x.end()), shape));
}

class python_kernel final : public attention_provider {
 public:
  python_kernel(int slot, std::string name, std::optional<tile_shape> tiles)
      : m_slot(slot), m_name(std::move(name)), m_tiles(tiles.value_or(tile_shape{})) {}
  std::string name() const override {
    if (!m_tiles.known()) return "python:" + m_name;
    return fmt::format("python:{}[tile={}x{}]", m_name, m_tiles.q, m_tiles.k);
  }
  tile_shape tiles() const override { return m_tiles; }
  bool computes_row_subsets() const override { return false; }
  nlohmann::json metadata() const override {
    return {{"kind", "python callable"}, {"callable", m_name}};
  }

  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    const auto& c = in.c();
    const bool f64 = c.dtype == formats::format_id::m_f64;
    nb::gil_scoped_acquire gil;
    const auto it = kernel_table().find(m_slot);
    if (it == kernel_table().end()) throw_backend_error("kernel", "the Python kernel is gone");
    try {
      const std::vector<double> q = in.q_all();
      nb::object out = it->second.call(input_array(q, c.rows(), c.heads, c.head_dim, f64),
                                       input_array(in.k(), c.batch * c.seq, c.kv_heads, c.head_dim, f64),
                                       input_array(in.v(), c.batch * c.seq, c.kv_heads, c.head_dim, f64),
                                       nb::str(exec::case_json(c).dump().c_str()));
      const auto pair = nb::cast<nb::tuple>(out);
      const auto o = nb::cast<in_array>(pair[0]);
      std::optional<in_array> lse;
      if (!pair[1].is_none()) lse = nb::cast<in_array>(pair[1]);
      if (o.size() != u(c.rows() * c.heads * c.head_dim))
        throw_backend_error("kernel", fmt::format("{}: returned {} values of o, expected {} ([{}, {}, {}])",
                                                  m_name, o.size(), c.rows() * c.heads * c.head_dim,
                                                  c.rows(), c.heads, c.head_dim));
      if (lse && lse->size() != u(c.rows() * c.heads))
        throw_backend_error("kernel", fmt::format("{}: returned {} values of lse, expected {} ([{}, {}])",
                                                  m_name, lse->size(), c.rows() * c.heads, c.rows(), c.heads));
      attention_output got = candidate_rows(view(o), lse ? std::optional(view(*lse)) : std::nullopt, c, rows);
      const double* lse_data = lse ? lse->data() : nullptr;
      count_unreturned_nonfinite(got, c.rows(), [&](std::size_t i) { return o.data()[i]; },
                                 [&](std::size_t i) { return lse_data[i]; });
      return got;
    } catch (nb::python_error& e) {
      if (e.matches(PyExc_KeyboardInterrupt)) throw interrupted(SIGINT);
      // One line: the exception's type and message (the traceback is the user's to get by
      // calling the kernel directly).
      const std::string type = nb::cast<std::string>(e.type().attr("__name__"));
      const std::string what = nb::cast<std::string>(nb::str(e.value()));
      // NotImplementedError (numprobe.Unsupported is one): the kernel declares the case
      // unsupported, a verdict rather than a crash.
      if (e.matches(PyExc_NotImplementedError))
        throw_unsupported("kernel", fmt::format("{}: {}", m_name, what.empty() ? type : what));
      throw_backend_error("kernel", fmt::format("{} raised {}: {}", m_name, type, what));
    } catch (const nb::cast_error&) {
      throw_backend_error("kernel", m_name + ": the adapter returned no (o, lse) pair of float64 arrays");
    }
  }

 private:
  int m_slot;
  std::string m_name;
  tile_shape m_tiles;
};

// The registry's factory for "python:N" (drift and audit build their providers by name).
std::unique_ptr<attention_provider> make_python_kernel(const provider_options& o) {
  const backend_spec spec = parse_backend_spec(o.backend);
  if (!o.faults.empty()) throw_input_error("inject", "a Python kernel takes no injected faults");
  if (!o.states.empty()) throw_input_error("states", "a Python kernel takes no --state settings");
  if (!o.knobs.empty())
    throw_input_error("knobs", fmt::format("a Python kernel takes no backend knobs ('{}')", o.knobs.begin()->first));
  int slot = -1;
  try {
    slot = std::stoi(spec.arg);
  } catch (const std::exception&) {
    throw_input_error("--backend", fmt::format("'{}': python: kernels are given through numprobe.drift/audit",
                                               o.backend));
  }
  nb::gil_scoped_acquire gil;
  const auto it = kernel_table().find(slot);
  if (it == kernel_table().end())
    throw_input_error("--backend", fmt::format("'{}': no such Python kernel (numprobe.drift/audit)", o.backend));
  return std::make_unique<python_kernel>(slot, it->second.name, o.tile);
}

// A slot held for one call; freed (with the GIL held, as on entry) however the call ends.
class kernel_slot {
 public:
  kernel_slot(nb::object call, std::string name) {
    static int next = 0;
    m_slot = next++;
    kernel_table()[m_slot] = {std::move(call), std::move(name)};
  }
  ~kernel_slot() { kernel_table().erase(m_slot); }
  kernel_slot(const kernel_slot&) = delete;
  kernel_slot& operator=(const kernel_slot&) = delete;
  [[nodiscard]] std::string backend() const { return fmt::format("python:{}", m_slot); }

 private:
  int m_slot = 0;
};

// A command's result model, rendered on demand by the CLI's writers.
struct run_handle {
  result::run_result r;
  [[nodiscard]] int exit_code() const { return r.checks.empty() ? 0 : r.exit_code(); }
  [[nodiscard]] std::string render(const std::string& format) const {
    for (const auto& f : reports::report_formats())
      if (f.name == format) return f.make()->render(r);
    if (format == "text") return reports::terminal_writer(false, true).render(r);
    throw_input_error("format", fmt::format("unknown report format '{}'", format));
  }
};

run_handle command_result(const std::string& command, std::uint64_t seed, result::check_result c, int code) {
  c.name = c.name.empty() ? command : c.name;
  c.probe = c.probe.empty() ? command : c.probe;
  c.outcome = code == 0 ? result::status::m_pass : code == 1 ? result::status::m_fail : result::status::m_error;
  c.error_code = code >= 2 ? code : 0;
  run_handle h;
  h.r.envelope = {{"schema_version", result::k_result_schema_version},
                  {"tool", "numprobe"},
                  {"version", NUMPROBE_VERSION},
                  {"interface", "python"},
                  {"command", command},
                  {"seeds", {{"inputs", seed}}}};
  h.r.scenario = "numprobe." + command;
  h.r.command_document = true;
  h.r.checks_planned = 1;
  h.r.seconds = c.seconds;
  h.r.checks.push_back(std::move(c));
  return h;
}

// rows: the sampled rows' budget, 0 for all, -1 for the command's own default (--rows auto).
row_sampling sampling(std::int64_t rows, std::uint64_t seed, std::int64_t auto_rows) {
  if (rows < -1) throw_input_error("rows", fmt::format("expected 'all', 'auto' or a positive count, got {}", rows));
  row_sampling s;
  s.seed = seed;
  s.max_rows = rows == -1 ? auto_rows : rows;
  return s;
}

std::vector<bound> parse_bounds(const std::vector<std::string>& texts) {
  std::vector<bound> out;
  for (const auto& t : texts) out.push_back(parse_bound(t, "bounds"));
  return out;
}

// Runs `body` with the GIL released, turning Ctrl-C inside the kernel back into KeyboardInterrupt.
template <class F>
auto without_gil(F&& body) {
  try {
    nb::gil_scoped_release unlocked;
    return body();
  } catch (const interrupted&) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw nb::python_error();
  }
}

std::optional<tile_shape> tile_of(std::int64_t tq, std::int64_t tk) {
  if (tq < 0 || tk < 0 || (tq == 0) != (tk == 0)) throw_input_error("tile", "expected (Bq, Bk), both positive");
  if (tq == 0) return std::nullopt;
  return tile_shape{tq, tk};
}

run_handle drift(nb::object call, const std::string& name, const nb::dict& fields, std::int64_t lo,
                 std::int64_t hi, const std::string& points, std::int64_t tq, std::int64_t tk,
                 std::int64_t rows, const std::vector<std::string>& bound_texts, bool end_to_end) {
  if (lo < 1 || hi < lo) throw_input_error("seq", fmt::format("need 1 <= A <= B, got {}..{}", lo, hi));
  probes::drift_options o;
  o.base = case_from_dict(fields);
  o.base.seq = hi;
  o.base.validate();
  o.seq_lo = lo;
  o.seq_hi = hi;
  o.points = points;
  o.bounds = parse_bounds(bound_texts);
  o.probe.sampling = sampling(rows, o.base.seed, 64);
  o.probe.end_to_end = end_to_end;
  const kernel_slot slot(std::move(call), name);
  provider_options po;
  po.backend = slot.backend();
  po.tile = tile_of(tq, tk);
  return without_gil([&] {
    auto prov = make_attention_provider(po);
    const auto r = probes::run_drift(*prov, o);
    result::check_result c;
    const int code = probes::fill_command_result(r, o, *prov, c);  // as `numprobe drift`
    return command_result("drift", o.base.seed, std::move(c), code);
  });
}

run_handle audit(nb::object call, const std::string& name, const nb::dict& fields, std::int64_t seq_hi,
                 bool quick, std::int64_t tq, std::int64_t tk, std::int64_t rows,
                 const std::vector<std::string>& bound_texts) {
  if (seq_hi < 1) throw_input_error("seq", fmt::format("must be at least 1, got {}", seq_hi));
  probes::audit_options o;
  o.base = case_from_dict(fields);
  o.base.seq = std::min<std::int64_t>(seq_hi, 1024);
  o.base.validate();
  o.seq_hi = seq_hi;
  o.quick = quick;
  o.bounds = parse_bounds(bound_texts);
  o.probe.sampling = sampling(rows, o.base.seed, 32);
  o.probe.end_to_end = false;
  o.probe.worst = 0;
  const kernel_slot slot(std::move(call), name);
  o.provider.backend = slot.backend();
  o.provider.tile = tile_of(tq, tk);
  return without_gil([&] {
    const auto r = probes::run_audit(o);
    const int code = probes::audit_exit_code(r);  // as `numprobe audit`
    result::check_result c;
    probes::fill_result(r, c);
    return command_result("audit", o.base.seed, std::move(c), code);
  });
}

// numprobe.invariance: the checks of `numprobe invariance` on the callable. Every side is a
// call of the callable (a batch side: one call with the members concatenated).
run_handle invariance(nb::object call, const std::string& name, const nb::dict& fields, std::int64_t seq,
                      const std::vector<std::string>& checks, const std::vector<std::string>& require,
                      std::int64_t repeats, const std::vector<std::int64_t>& batch_sizes,
                      const std::vector<std::int64_t>& chunks, const std::vector<std::int64_t>& decode_lengths,
                      std::int64_t tq, std::int64_t tk, const std::vector<std::string>& bound_texts,
                      bool ragged) {
  if (seq < 1) throw_input_error("seq", fmt::format("must be at least 1, got {}", seq));
  probes::invariance_options o;
  o.base = case_from_dict(fields);
  o.base.seq = seq;
  if (o.base.batch != 1) throw_input_error("batch", "invariance composes its own batches: give one sequence");
  o.base.validate();
  const auto& known = probes::invariance_check_names();
  for (const auto* list : {&checks, &require})
    for (const auto& c : *list)
      if (std::find(known.begin(), known.end(), c) == known.end())
        throw_input_error(list == &checks ? "checks" : "require",
                          fmt::format("unknown check '{}' (known: {})", c, fmt::join(known, ", ")));
  o.checks = checks;
  o.repeats = repeats;
  o.batch_sizes = batch_sizes;
  o.chunks = chunks;
  o.decode_lengths = decode_lengths;
  o.bounds = parse_bounds(bound_texts);
  const kernel_slot slot(std::move(call), name);
  o.provider.backend = slot.backend();
  o.provider.tile = tile_of(tq, tk);
  o.provider.ragged = ragged;
  return without_gil([&] {
    const auto r = probes::run_invariance(o);
    const int code = probes::invariance_exit_code(r, require);  // as `numprobe invariance`
    result::check_result c;
    probes::fill_result(r, require, c);
    return command_result("invariance", o.base.seed, std::move(c), code);
  });
}

}  // namespace

void bind_probes(nb::module_& m) {
  register_attention_provider("python", &make_python_kernel,
                              "a Python callable (numprobe.drift, audit, invariance): (q, k, v, case) -> o[, lse]");
  nb::class_<run_handle>(m, "RunResult")
      .def_prop_ro("exit_code", &run_handle::exit_code)
      .def("render", &run_handle::render, nb::arg("format"));
  m.def("drift", &drift, nb::arg("call"), nb::arg("name"), nb::arg("case"), nb::arg("lo"), nb::arg("hi"),
        nb::arg("points"), nb::arg("tile_q"), nb::arg("tile_k"), nb::arg("rows"), nb::arg("bounds"),
        nb::arg("end_to_end"));
  m.def("audit", &audit, nb::arg("call"), nb::arg("name"), nb::arg("case"), nb::arg("seq"), nb::arg("quick"),
        nb::arg("tile_q"), nb::arg("tile_k"), nb::arg("rows"), nb::arg("bounds"));
  m.def("invariance", &invariance, nb::arg("call"), nb::arg("name"), nb::arg("case"), nb::arg("seq"),
        nb::arg("checks"), nb::arg("require"), nb::arg("repeats"), nb::arg("batch_sizes"), nb::arg("chunks"),
        nb::arg("decode_lengths"), nb::arg("tile_q"), nb::arg("tile_k"), nb::arg("bounds"), nb::arg("ragged"));
}

}  // namespace numprobe::python
