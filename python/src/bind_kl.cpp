// numprobe.kl: the kl probe's statistics over two in-memory [N, V] arrays of logits or
// log-probs: metrics::compare_row_checked per row, metrics::summarize, and the probe's own
// to_json, so every key and value is the one `numprobe kl --json` writes for the same rows.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <fmt/format.h>

#include <algorithm>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "numprobe/metrics/kl.hpp"
#include "probes/kl/kl_probe.hpp"
#include "python/src/arrays.hpp"

namespace numprobe::python {
namespace {

using token_array = nb::ndarray<const std::int64_t, nb::c_contig, nb::device::cpu>;

std::string kl(const in_array& base, const in_array& cand, std::int64_t rows, std::int64_t vocab, int topk,
               std::size_t worst, std::optional<token_array> tokens, std::int64_t positions, std::int64_t seq_len) {
  if (rows <= 0 || vocab <= 0 || base.size() != u(rows * vocab)) throw_input_error("base", "expected a non-empty [N, V] array");
  if (cand.size() != base.size()) throw_input_error("cand", "shape differs from base");
  if (tokens && tokens->size() != u(rows)) throw_input_error("tokens", fmt::format("expected {} token ids", rows));
  if (topk <= 0 || topk > vocab) throw_input_error("topk", fmt::format("must be in [1, {}]", vocab));
  probes::check_position_flags(positions, seq_len, rows);
  std::vector<metrics::kl_row> out(u(rows));
  std::int64_t first_bad = -1;
  {
    nb::gil_scoped_release unlocked;
    const auto vs = u(vocab);
#pragma omp parallel
    {
      metrics::kl_scratch scratch;
#pragma omp for schedule(dynamic, 64)
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t tok = tokens ? tokens->data()[r] : -1;
        if (!metrics::compare_row_checked(view(base).subspan(u(r) * vs, vs), view(cand).subspan(u(r) * vs, vs),
                                          topk, tok, scratch, out[u(r)])) {
#pragma omp critical
          if (first_bad < 0 || r < first_bad) first_bad = r;
        }
      }
    }
  }
  if (first_bad >= 0) {
    const auto row = view(base).subspan(u(first_bad) * u(vocab), u(vocab));
    const bool base_bad = std::any_of(row.begin(), row.end(), [](double x) { return !std::isfinite(x); });
    throw_input_error(base_bad ? "base" : "cand", fmt::format("NaN or Inf in row {}", first_bad));
  }
  probes::kl_report r;
  r.case_id = fmt::format("kl(N={},V={})", rows, vocab);
  r.options.topk = topk;
  r.options.worst = worst;
  r.base_dtype = r.cand_dtype = "f64";
  r.summary = metrics::summarize(out, vocab, topk, tokens.has_value(), worst);
  r.options.positions = positions;
  r.options.seq_len = seq_len;
  if (positions > 0) r.positions = probes::kl_by_position(out, positions, seq_len);
  return probes::to_json(r).dump();
}

}  // namespace

void bind_kl(nb::module_& m) {
  m.def("kl", &kl, nb::arg("base"), nb::arg("cand"), nb::arg("rows"), nb::arg("vocab"), nb::arg("topk"),
        nb::arg("worst"), nb::arg("tokens").none(), nb::arg("positions") = 0, nb::arg("seq_len") = 0);
}

}  // namespace numprobe::python
