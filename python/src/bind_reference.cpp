// numprobe.reference: the double reference (relative error <= 1e-12, proved against
// multiprecision in tests/reference) and the same-precision naive baselines.
#include <chrono>
#include <numeric>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/reference/attention.hpp"
#include "numprobe/reference/softmax.hpp"
#include "python/src/arrays.hpp"
#include "python/src/case_dict.hpp"

namespace numprobe::python {
namespace {

std::vector<std::int64_t> all_rows(const attention_case& c) {
  std::vector<std::int64_t> rows(u(c.rows()));
  std::iota(rows.begin(), rows.end(), std::int64_t{0});
  return rows;
}

using out_pair = std::tuple<nb::ndarray<nb::numpy, double>, nb::ndarray<nb::numpy, double>>;

out_pair outputs(attention_output&& out, const attention_case& c) {
  return {to_numpy(std::move(out.o), {u(c.rows()), u(c.heads), u(c.head_dim)}),
          to_numpy(std::move(out.lse), {u(c.rows()), u(c.heads)})};
}

void check_sizes(const attention_case& c, const in_array& q, const in_array& k, const in_array& v) {
  const auto kv = u(c.batch * c.seq * c.kv_heads * c.head_dim);
  if (q.size() != u(c.rows() * c.heads * c.head_dim)) throw_input_error("q", "size does not match the case");
  if (k.size() != kv) throw_input_error("k", "size does not match the case");
  if (v.size() != kv) throw_input_error("v", "size does not match the case");
}

// Inputs used exactly as given (the reference rounds nothing): the caller's own values.
out_pair attention(const in_array& q, const in_array& k, const in_array& v, const nb::dict& fields) {
  const attention_case c = case_from_dict(fields);
  check_sizes(c, q, k, v);
  const auto rows = all_rows(c);
  attention_output out;
  {
    nb::gil_scoped_release unlocked;
    out = reference::attention(c, view(q), rows, view(k), view(v));
  }
  return outputs(std::move(out), c);  // NumPy arrays are made with the GIL held
}

// Seconds of the reference call alone, as attention() makes it (bench/python_bindings.py: the
// bindings' overhead is numprobe.reference.attention's wall time against this).
double time_attention(const in_array& q, const in_array& k, const in_array& v, const nb::dict& fields) {
  const attention_case c = case_from_dict(fields);
  check_sizes(c, q, k, v);
  const auto rows = all_rows(c);
  nb::gil_scoped_release unlocked;
  const auto t0 = std::chrono::steady_clock::now();
  const attention_output out = reference::attention(c, view(q), rows, view(k), view(v));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The naive baseline needs inputs in the case dtype: attention_inputs rounds them (identity
// for inputs already in it).
out_pair naive_attention(const in_array& q, const in_array& k, const in_array& v, const nb::dict& fields) {
  const attention_case c = case_from_dict(fields);
  check_sizes(c, q, k, v);
  const auto rows = all_rows(c);
  attention_output out;
  {
    nb::gil_scoped_release unlocked;
    const attention_inputs in(c, copy(q), copy(k), copy(v));
    out = reference::attention_naive(c, in.q_all(), rows, in.k(), in.v());
  }
  return outputs(std::move(out), c);
}

// Rows of logits [rows, vocab], -inf = masked: (p, log p, lse) in double.
std::tuple<nb::ndarray<nb::numpy, double>, nb::ndarray<nb::numpy, double>, nb::ndarray<nb::numpy, double>>
softmax(const in_array& logits, std::int64_t rows, std::int64_t vocab, double softcap, double temperature) {
  if (rows <= 0 || vocab <= 0 || logits.size() != u(rows * vocab)) throw_input_error("x", "expected a non-empty [rows, vocab] array");
  softmax_case c;
  c.rows = rows;
  c.vocab = vocab;
  c.softcap = softcap;
  c.temperature = temperature;
  c.dtype = formats::format_id::m_f64;
  std::vector<std::int64_t> row_ids(u(rows));
  std::iota(row_ids.begin(), row_ids.end(), std::int64_t{0});
  softmax_output out;
  {
    nb::gil_scoped_release unlocked;
    out = reference::softmax(c, view(logits), row_ids);
  }
  return {to_numpy(std::move(out.p), {u(rows), u(vocab)}), to_numpy(std::move(out.logp), {u(rows), u(vocab)}),
          to_numpy(std::move(out.lse), {u(rows)})};
}

}  // namespace

void bind_reference(nb::module_& m) {
  m.def("reference_attention", &attention, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("case"));
  m.def("_time_reference_attention", &time_attention, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("case"));
  m.def("naive_attention", &naive_attention, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("case"));
  m.def("reference_softmax", &softmax, nb::arg("x"), nb::arg("rows"), nb::arg("vocab"), nb::arg("softcap"),
        nb::arg("temperature"));
}

}  // namespace numprobe::python
