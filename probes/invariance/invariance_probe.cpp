#include "probes/invariance/invariance_probe.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <memory>
#include <numeric>

#include "numprobe/base/error.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "probes/classes/bisect_fp8.hpp"
#include "probes/point/attention_probe.hpp"
#include "src/kernels/fault_table.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe::probes {
namespace {

using inputs_ptr = std::shared_ptr<const attention_inputs>;

// One side of a comparison: the inputs a call gets, and which of its rows are compared (every row
// is computed: a batch-invariance check that asked for one member's rows only would let a kernel
// that computes row subsets skip the other members).
struct side {
  inputs_ptr in;
  std::vector<std::int64_t> rows;       // flat rows compared, in order
  std::vector<std::int64_t> positions;  // each row's query position within its sequence
  std::string label;                    // the case id, and the member for batches
  provider_options po;
};

std::vector<std::int64_t> iota_rows(std::int64_t first, std::int64_t n) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), first);
  return r;
}

// O of the compared rows of one call. `prov` computes every row of the side's case.
std::vector<double> run_side(attention_provider& prov, const side& s) {
  const std::vector<std::int64_t> all = iota_rows(0, s.in->c().rows());
  const attention_output out = prov.run(*s.in, all);
  const auto per_row = static_cast<std::size_t>(out.heads * out.head_dim);
  std::map<std::int64_t, std::size_t> at;
  for (std::size_t i = 0; i < out.rows.size(); ++i) at[out.rows[i]] = i;
  std::vector<double> o;
  o.reserve(s.rows.size() * per_row);
  for (const std::int64_t r : s.rows) {
    const auto it = at.find(r);
    if (it == at.end()) throw_backend_error("invariance", fmt::format("the kernel did not return row {}", r));
    const auto first = out.o.begin() + static_cast<std::ptrdiff_t>(it->second * per_row);
    o.insert(o.end(), first, first + static_cast<std::ptrdiff_t>(per_row));
  }
  return o;
}

// Inputs of `p` restricted to the queries [first, first + n) over all its keys (bit for bit the
// same values): the T = n call that a prefill's last rows are compared with.
inputs_ptr with_queries(const attention_inputs& p, std::int64_t first, std::int64_t n) {
  attention_case c = p.c();
  c.queries = n;
  const std::vector<std::int64_t> rows = iota_rows(first, n);
  const bool exact = p.has_exact();
  std::vector<double> q = exact ? p.q_rows_exact(rows) : p.q_rows(rows);
  const auto k = exact ? p.k_exact() : p.k();
  const auto v = exact ? p.v_exact() : p.v();
  return std::make_shared<const attention_inputs>(c, std::move(q), std::vector<double>(k.begin(), k.end()),
                                                  std::vector<double>(v.begin(), v.end()));
}

// The members of a batch of b: the target first and the others in order, or the others reversed
// and the target last.
std::vector<const attention_inputs*> members_of(const inputs_ptr& target, const std::vector<inputs_ptr>& others,
                                                std::int64_t b, bool last) {
  std::vector<const attention_inputs*> members;
  if (!last) members.push_back(target.get());
  for (std::int64_t i = 0; i < b - 1; ++i) members.push_back(others[static_cast<std::size_t>(last ? b - 2 - i : i)].get());
  if (last) members.push_back(target.get());
  return members;
}

bool is_emu(const provider_options& po) { return parse_backend_spec(po.backend).kind == "emu"; }

// The faults of the emulator that apply to `scope`: a fault of the decode kernel is dropped from
// the prefill kernel's options and the other way round, so `--inject split-heuristic` reaches
// the decode kernel while the prefill checks still run.
provider_options for_kernel(provider_options po, std::uint8_t scope) {
  if (!is_emu(po)) return po;
  std::vector<std::string> kept;
  for (const auto& name : po.faults) {
    kernels::fault f{};
    if (!kernels::find_fault(name, f) || kernels::applies(f, scope)) kept.push_back(name);
  }
  po.faults = kept;
  return po;
}

class invariance_runner {
 public:
  explicit invariance_runner(const invariance_options& o) : m_o(o) {
    m_prefill = for_kernel(o.provider, kernels::k_emu_forward);
    m_decode_kernel = o.provider.knobs.count("decode") > 0;
    if (m_decode_kernel) m_prefill = for_kernel(o.provider, kernels::k_emu_decode);
    m_bounds = o.bounds.empty() ? std::vector<bound>{default_accuracy_bound(o.provider)} : o.bounds;
    auto prov = make_attention_provider(m_prefill);
    m_backend = prov->name();
    m_tiles = prov->tiles();
  }
  [[nodiscard]] const std::string& backend() const { return m_backend; }

  invariance_check run(const std::string& name) {
    invariance_check c;
    c.name = name;
    if (name != "batch" && name != "splits") c.ragged = "";
    try {
      if (name == "repeat") repeat(c);
      else if (name == "batch") batch(c, m_prefill, m_o.base, "");
      else if (name == "decode") decode(c);
      else if (name == "chunk") chunk(c);
      else if (name == "splits") splits(c);
    } catch (const unsupported_case& e) {
      c.verdict = invariance_verdict::m_not_applicable;
      c.reason = e.what();
      return c;
    }
    if (c.verdict == invariance_verdict::m_not_applicable) return c;
    judge(c);
    return c;
  }

 private:
  void not_applicable(invariance_check& c, std::string why) {
    c.verdict = invariance_verdict::m_not_applicable;
    c.reason = std::move(why);
  }

  void record(invariance_check& c, std::string label, const side& a, const std::vector<double>& oa, const side& b,
              const std::vector<double>& ob) {
    const attention_case& ca = a.in->c();
    invariance_comparison cmp{std::move(label), a.label, b.label,
                              compare_bits(ca.dtype, oa, ob, a.positions, ca.heads, ca.head_dim)};
    if (cmp.bits.differing > 0) {
      if (c.bits.differing == 0) c.cases = {a.label, b.label};
      m_pending.push_back({a, b});
    }
    if (c.cases.empty()) c.cases = {a.label, b.label};
    c.bits.merge(cmp.bits);
    c.comparisons.push_back(std::move(cmp));
  }

  std::vector<double> run_fresh(const side& s) {
    auto prov = make_attention_provider(s.po);
    return run_side(*prov, s);
  }

  side whole(inputs_ptr in, const provider_options& po, std::string note = "") {
    side s;
    s.rows = iota_rows(0, in->c().rows());
    s.positions = iota_rows(0, in->c().t());
    s.label = in->c().id() + note;
    s.po = po;
    s.in = std::move(in);
    return s;
  }

  void repeat(invariance_check& c) {
    if (m_o.repeats < 2) return not_applicable(c, "--repeats below 2: nothing to compare");
    const side s = whole(std::make_shared<const attention_inputs>(m_o.base), m_prefill);
    // One kernel instance, called again and again: what a server does.
    auto prov = make_attention_provider(m_prefill);
    const std::vector<double> first = run_side(*prov, s);
    for (std::int64_t i = 1; i < m_o.repeats; ++i)
      record(c, fmt::format("run {} vs run 0", i), s, first, s, run_side(*prov, s));
  }

  // The sequence `base` alone, then as a member of each batch size: first in the batch, and last
  // with the other members reversed. Every side runs on its own kernel instance, so a
  // run-to-run difference shows in repeat and does not blur this check.
  void batch(invariance_check& c, const provider_options& po, attention_case base, const std::string& note) {
    base.batch = 1;
    const auto target = std::make_shared<const attention_inputs>(base);
    const side alone = whole(target, po, note);
    const std::vector<double> o_alone = run_fresh(alone);
    std::int64_t most = 1;
    for (const std::int64_t b : m_o.batch_sizes) most = std::max(most, b);
    std::vector<inputs_ptr> others;
    for (std::int64_t i = 1; i < most; ++i) {
      attention_case oc = base;
      oc.seed = base.seed + static_cast<std::uint64_t>(i);  // distinct seeds, one per member
      others.push_back(std::make_shared<const attention_inputs>(oc));
    }
    const std::int64_t T = base.t();
    for (const std::int64_t b : m_o.batch_sizes) {
      for (const bool last : {false, true}) {
        if (last && b == 1) continue;
        const std::int64_t at = last ? b - 1 : 0;
        auto in = std::make_shared<const attention_inputs>(concatenate_batch(members_of(target, others, b, last)));
        side s;
        s.rows = iota_rows(at * T, T);
        s.positions = iota_rows(0, T);
        s.label = b == 1 ? fmt::format("{} as a batch of 1{}", in->c().id(), note)
                         : fmt::format("{} member {} of {} (others: seeds {}..{}){}", in->c().id(), at, b,
                                       base.seed + 1, base.seed + static_cast<std::uint64_t>(b - 1), note);
        s.po = po;
        s.in = std::move(in);
        record(c, fmt::format("{}B={} member {}", note.empty() ? "" : note.substr(1) + " ", b, at), alone, o_alone,
               s, run_fresh(s));
      }
    }
    ragged_batches(c, po, base, target, alone, o_alone, note);
  }

  // The other members' lengths in a ragged batch: around S, shorter and longer (a prefill's
  // members are never shorter than its T: a row with no key is another question).
  [[nodiscard]] static std::int64_t ragged_length(const attention_case& base, std::int64_t i) {
    static constexpr std::int64_t k_num[] = {1, 3, 1, 2, 5};
    static constexpr std::int64_t k_den[] = {2, 2, 4, 1, 4};
    const std::size_t j = static_cast<std::size_t>(i % 5);
    const std::int64_t n = base.seq * k_num[j] / k_den[j] + i % 7;
    return std::max<std::int64_t>({n, base.t(), 1});
  }

  // The sequence inside ragged batches (other members of other lengths: attention_case::
  // seq_lens), first and last, where the backend takes them; else the check says so.
  void ragged_batches(invariance_check& c, const provider_options& po, const attention_case& base,
                      const inputs_ptr& target, const side& alone, const std::vector<double>& o_alone,
                      const std::string& note) {
    if (!m_o.ragged_batches) return;
    {
      auto probe = make_attention_provider(po);
      if (!probe->takes_ragged()) {
        c.ragged = "not taken by the backend (exec and Python kernels that read seq_lens: --ragged)";
        return;
      }
    }
    c.ragged = "run";
    std::int64_t most = 1;
    for (const std::int64_t b : m_o.batch_sizes) most = std::max(most, b);
    std::vector<inputs_ptr> others;
    for (std::int64_t i = 1; i < most; ++i) {
      attention_case oc = base;
      oc.seed = base.seed + static_cast<std::uint64_t>(i);
      oc.seq = ragged_length(base, i);
      if (oc.queries == 0) oc.queries = base.t();
      others.push_back(std::make_shared<const attention_inputs>(oc));
    }
    const std::int64_t T = base.t();
    for (const std::int64_t b : m_o.batch_sizes) {
      if (b == 1) continue;
      for (const bool last : {false, true}) {
        const std::int64_t at = last ? b - 1 : 0;
        auto in = std::make_shared<const attention_inputs>(concatenate_ragged(members_of(target, others, b, last)));
        side s;
        s.rows = iota_rows(at * T, T);
        s.positions = iota_rows(0, T);
        s.label = fmt::format("{} member {} of {} (ragged: lengths {}){}", in->c().id(), at, b,
                              fmt::join(in->c().seq_lens, "/"), note);
        s.po = po;
        s.in = std::move(in);
        record(c, fmt::format("{}ragged B={} member {}", note.empty() ? "" : note.substr(1) + " ", b, at), alone,
               o_alone, s, run_fresh(s));
      }
    }
  }

  [[nodiscard]] std::string prefix_mask_problem() const {
    if (m_decode_kernel) return "the backend runs its decode kernel (--decode): there is no prefill to compare";
    if (m_o.base.mask == mask_kind::m_causal_top_left || m_o.base.mask == mask_kind::m_ranges)
      return fmt::format("mask {} does not keep a query's keys when T changes", to_string(m_o.base.mask));
    return "";
  }

  void decode(invariance_check& c) {
    if (auto why = prefix_mask_problem(); !why.empty()) return not_applicable(c, why);
    std::vector<std::int64_t> lengths = m_o.decode_lengths;
    if (lengths.empty()) {
      const std::int64_t k = m_tiles.known() ? m_tiles.k : 0;
      lengths = k > 0 ? std::vector<std::int64_t>{k, k + 1, 2 * k, 2 * k + 1} : std::vector<std::int64_t>{96, 97, 128, 129};
    }
    for (const std::int64_t s_len : lengths) {
      attention_case pc = m_o.base;
      pc.batch = 1;
      pc.seq = s_len;
      pc.queries = 0;
      auto prefill = std::make_shared<const attention_inputs>(pc);
      side a = whole(prefill, m_prefill, " row " + std::to_string(s_len - 1));
      a.rows = a.positions = {s_len - 1};
      side b = whole(with_queries(*prefill, s_len - 1, 1), m_prefill);
      b.positions = {s_len - 1};
      record(c, fmt::format("S={}", s_len), a, run_fresh(a), b, run_fresh(b));
    }
  }

  void chunk(invariance_check& c) {
    if (auto why = prefix_mask_problem(); !why.empty()) return not_applicable(c, why);
    std::vector<std::int64_t> chunks = m_o.chunks;
    if (chunks.empty()) {
      chunks = {16, m_tiles.known() ? m_tiles.q + 1 : 65};
      if (chunks[1] == 16) chunks.pop_back();
    }
    attention_case pc = m_o.base;
    pc.batch = 1;
    pc.queries = 0;
    const std::int64_t s_len = pc.seq;
    auto prefill = std::make_shared<const attention_inputs>(pc);
    const side whole_prefill = whole(prefill, m_prefill);
    std::vector<double> o_prefill;
    for (const std::int64_t n : chunks) {
      if (n < 2 || n >= s_len) continue;  // a chunk is 2..S-1 queries (T = 1 is decode's)
      if (o_prefill.empty()) o_prefill = run_fresh(whole_prefill);
      side a = whole_prefill;
      a.label += fmt::format(" rows {}..{}", s_len - n, s_len - 1);
      a.rows = a.positions = iota_rows(s_len - n, n);
      std::vector<double> oa(o_prefill.begin() + static_cast<std::ptrdiff_t>((s_len - n) * pc.heads * pc.head_dim),
                             o_prefill.end());
      side b = whole(with_queries(*prefill, s_len - n, n), m_prefill);
      b.positions = a.positions;
      record(c, fmt::format("C={}", n), a, oa, b, run_fresh(b));
    }
    if (c.comparisons.empty())
      return not_applicable(c, fmt::format("no chunk length in 2..{} (S - 1)", s_len - 1));
  }

  void splits(invariance_check& c) {
    const std::string name = parse_backend_spec(m_o.provider.backend).kind;
    if (name != "emu" && name != "cuda" && name != "hip")
      return not_applicable(c, fmt::format("backend {} exposes no split count or split size", name));
    provider_options dpo = for_kernel(m_o.provider, kernels::k_emu_decode);
    dpo.knobs["decode"] = "";
    dpo.knobs.erase("splits");
    dpo.knobs.erase("split-size");
    const std::int64_t bk = m_tiles.known() ? m_tiles.k : 64;
    // The backend's own default first (the emulator: 1 split; cuda/hip: 4 of ceil(S_max / 4)).
    std::vector<std::pair<std::string, std::string>> settings{{"", "default"}, {"splits", "1"}, {"splits", "2"}, {"splits", "4"},
                                                              {"splits", "8"}, {"split-size", std::to_string(bk)},
                                                              {"split-size", std::to_string(2 * bk)}};
    attention_case dc = m_o.base;
    dc.queries = 1;
    for (const auto& [knob, value] : settings) {
      provider_options po = dpo;
      if (!knob.empty()) po.knobs[knob] = value;
      batch(c, po, dc, knob.empty() ? " " + value : fmt::format(" {}={}", knob, value));
    }
  }

  // The verdict: identical bits, or each differing side judged against the bounds.
  void judge(invariance_check& c) {
    if (c.bits.differing == 0) {
      c.verdict = invariance_verdict::m_invariant;
      m_pending.clear();
      return;
    }
    bool all_hold = true;
    for (const auto& [a, b] : m_pending)
      for (const side* s : {&a, &b}) {
        if (!within_bound(*s)) {
          all_hold = false;
          if (std::find(c.out_of_bound.begin(), c.out_of_bound.end(), s->label) == c.out_of_bound.end())
            c.out_of_bound.push_back(s->label);
        }
      }
    m_pending.clear();
    c.verdict = all_hold ? invariance_verdict::m_within_bound : invariance_verdict::m_breaks;
    if (!all_hold) c.reason = "exceeds " + m_bounds.front().text() + ": " + c.out_of_bound.front();
  }

  bool within_bound(const side& s) {
    const std::string key = s.label + "|" + s.po.backend + fmt::format("{}", fmt::join(s.po.faults, ",")) +
                            fmt::format("{}", s.po.knobs.size()) + (s.po.knobs.count("splits") ? s.po.knobs.at("splits") : "") +
                            (s.po.knobs.count("split-size") ? s.po.knobs.at("split-size") : "");
    if (const auto it = m_judged.find(key); it != m_judged.end()) return it->second;
    auto prov = make_attention_provider(s.po);
    attention_probe_options apo;
    apo.inputs = s.in.get();
    apo.end_to_end = false;
    apo.sampling.max_rows = 64;  // stratified: every query tile's edges first (row_sampling.hpp)
    apo.sampling.seed = s.in->c().seed;
    const attention_point p = run_attention_point(*prov, s.in->c(), apo);
    bool ok = p.nonfinite_total() == 0;
    for (const auto& b : m_bounds) {
      const auto m = p.metric(b.metric);
      ok = ok && m && b.holds(*m);
    }
    m_judged[key] = ok;
    return ok;
  }

  const invariance_options& m_o;
  provider_options m_prefill;
  bool m_decode_kernel = false;
  std::vector<bound> m_bounds;
  std::string m_backend;
  tile_shape m_tiles;
  std::vector<std::pair<side, side>> m_pending;  // differing comparisons of the current check
  std::map<std::string, bool> m_judged;
};

}  // namespace

std::string to_string(invariance_verdict v) {
  switch (v) {
    case invariance_verdict::m_invariant: return "invariant";
    case invariance_verdict::m_within_bound: return "within-bound";
    case invariance_verdict::m_breaks: return "breaks";
    case invariance_verdict::m_not_applicable: return "not-applicable";
  }
  return "unknown";
}

const std::vector<std::string>& invariance_check_names() {
  static const std::vector<std::string> names{"repeat", "batch", "decode", "chunk", "splits"};
  return names;
}

invariance_result run_invariance(const invariance_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& known = invariance_check_names();
  std::vector<std::string> checks = o.checks.empty() ? known : o.checks;
  for (const auto& name : checks)
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw_input_error("--checks", fmt::format("unknown check '{}' (known: {})", name, fmt::join(known, ", ")));
  if (o.repeats < 1) throw_input_error("--repeats", "must be at least 1");
  for (const std::int64_t b : o.batch_sizes)
    if (b < 1 || b > 4096) throw_input_error("--batch-sizes", fmt::format("{} is not in [1, 4096]", b));
  o.base.validate();
  invariance_result r;
  r.options = o;
  invariance_runner run(o);
  r.backend = run.backend();
  for (const auto& name : known)  // run order is the table's, whatever order --checks gives
    if (std::find(checks.begin(), checks.end(), name) != checks.end()) r.checks.push_back(run.run(name));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

int invariance_exit_code(const invariance_result& r, const std::vector<std::string>& require) {
  for (const auto& c : r.checks) {
    if (c.verdict == invariance_verdict::m_breaks) return 1;
    if (c.verdict != invariance_verdict::m_invariant &&
        std::find(require.begin(), require.end(), c.name) != require.end())
      return 1;
  }
  return 0;
}

}  // namespace numprobe::probes
