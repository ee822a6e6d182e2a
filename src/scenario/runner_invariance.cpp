// Check runner for `probe = "invariance"` (issue 30; docs/invariance.md): does the same request
// get the same bits, alone and in batches, in prefill and decode? The parameters are the
// command's flags; the bounds are the accuracy bounds that tell within-bound from breaks.
// The gate of each check is the command's: a check that breaks fails the scenario check, and a
// check listed in `require` fails it unless invariant.
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "numprobe/base/error.hpp"
#include "probes/invariance/invariance_probe.hpp"
#include "probes/point/attention_probe.hpp"
#include "src/scenario/attention_params.hpp"
#include "src/scenario/check_runner.hpp"

namespace numprobe::scenario {
namespace {

// "1,2,8" (or one integer) as positive integers, the message naming the key.
std::vector<std::int64_t> positive_items(const check_spec& s, const std::string& key) {
  std::vector<std::int64_t> out;
  const std::string text = s.get_string(key, "");
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(positive(text.substr(at, comma - at), s.place(key)));
    at = comma + 1;
  }
  return out;
}

std::vector<std::string> check_names(const check_spec& s, const std::string& key) {
  const auto& known = probes::invariance_check_names();
  std::vector<std::string> out = s.get_strings(key);
  for (const auto& n : out)
    if (std::find(known.begin(), known.end(), n) == known.end())
      throw_input_error(s.place(key), fmt::format("unknown check '{}' (known: {})", n, fmt::join(known, ", ")));
  return out;
}

void run_invariance_check(const check_spec& s, const run_context& ctx, result::check_result& out) {
  probes::invariance_options o;
  o.base = make_attention_case(s, positive(s.get_string("seq", "256"), s.place("seq")));
  if (o.base.batch != 1) throw_input_error(s.place("batch"), "invariance composes its own batches: give one sequence");
  o.provider = check_provider_options(s, ctx);
  o.checks = check_names(s, "checks");
  const std::vector<std::string> require = check_names(s, "require");
  o.repeats = s.get_int("repeats", 3);
  if (o.repeats < 1) throw_input_error(s.place("repeats"), "must be at least 1");
  if (s.has("batch_sizes")) o.batch_sizes = positive_items(s, "batch_sizes");
  o.chunks = positive_items(s, "chunk");
  o.decode_lengths = positive_items(s, "decode_lengths");
  o.bounds = s.bounds;
  const probes::invariance_result r = probes::run_invariance(o);
  probes::fill_result(r, require, out);
}

}  // namespace

check_runner invariance_runner() {
  check_runner r;
  r.probe = "invariance";
  r.description = "same request, same bits: repeat, batch, decode, chunk and splits checks";
  r.params = attention_case_params();
  using K = param_kind;
  r.params.push_back({"checks", K::m_strings, "repeat, batch, decode, chunk, splits (default: all)"});
  r.params.push_back({"require", K::m_strings, "checks that must be invariant"});
  r.params.push_back({"repeats", K::m_int, "calls of the repeat check"});
  r.params.push_back({"batch_sizes", K::m_text, "batch sizes, a comma list (default 1,2,3,8,33,64)"});
  r.params.push_back({"chunk", K::m_text, "chunk lengths C, a comma list"});
  r.params.push_back({"decode_lengths", K::m_text, "key lengths S of the decode check, a comma list"});
  // The bounds judge each differing side against the reference (within-bound or breaks).
  r.known_metric = [](const std::string& m) {
    const auto& n = probes::point_metric_names();
    return std::find(n.begin(), n.end(), m) != n.end();
  };
  for (const auto& n : probes::point_metric_names()) r.metric_names += (r.metric_names.empty() ? "" : ", ") + n;
  r.run = run_invariance_check;
  return r;
}

}  // namespace numprobe::scenario
