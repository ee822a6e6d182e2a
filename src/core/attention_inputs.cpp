#include "numprobe/core/attention_inputs.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"

namespace numprobe {
namespace {

// Channel 0 carries the designed logit trend for the structured families; the other channels
// carry small noise so that the trend, not chance, decides where each row's max sits.
constexpr double k_trend_q = 2.0;     // Q channel 0 value for trend families
constexpr double k_trend_noise = 0.25;

// The counter of an element depends on its position, head and channel only (not on the
// sequence length), so a shorter case's K/V are exactly the prefix of a longer one's: sweeps
// generate inputs once at their longest length.
std::uint64_t element_counter(const attention_case& c, tensor_role role, std::int64_t pos,
                              std::int64_t head, std::int64_t d) {
  const std::int64_t h = role == tensor_role::m_q ? c.heads : c.kv_heads;
  return static_cast<std::uint64_t>((pos * h + head) * c.head_dim + d);
}

// Each (tensor, batch member) pair has its own stream.
std::uint64_t element_stream(tensor_role role, std::int64_t b) {
  return static_cast<std::uint64_t>(role) | (static_cast<std::uint64_t>(b) << 8);
}

// formats::round_to(id, x) for the kernels' input dtypes, bf16 and fp16, by one RNE step on
// the double's bits where the result is a normal finite value (the same value: one rounding of
// x to 8 or 11 significant bits, carries into the exponent included); round_to elsewhere
// (subnormal and overflowing results, other formats). Generation of long-context inputs spends
// most of its time in rounding otherwise.
double round_input(formats::format_id id, double x) {
  int sh;
  double lo, hi;
  if (id == formats::format_id::m_bf16) {
    sh = 45;
    lo = 0x1.0p-126;
    hi = 0x1.fep127;
  } else if (id == formats::format_id::m_f16) {
    sh = 42;
    lo = 0x1.0p-14;
    hi = 65504.0;
  } else {
    return formats::round_to(id, x);
  }
  const double a = std::fabs(x);
  if (!(a >= lo && a <= hi)) return formats::round_to(id, x);
  auto b = std::bit_cast<std::uint64_t>(x);
  b += ((std::uint64_t{1} << (sh - 1)) - 1) + ((b >> sh) & 1);
  b &= ~((std::uint64_t{1} << sh) - 1);
  const double y = std::bit_cast<double>(b);
  return std::fabs(y) <= hi ? y : formats::round_to(id, x);
}

}  // namespace

double attention_input_value(const attention_case& c, tensor_role role, std::int64_t b,
                             std::int64_t pos, std::int64_t head, std::int64_t d) {
  const std::uint64_t stream = element_stream(role, b);
  const std::uint64_t n = element_counter(c, role, pos, head, d);
  const double z = normal_at(c.seed, stream, n);
  const double scale = c.softmax_scale();
  switch (c.dist) {
    case input_dist::m_normal: return z;
    case input_dist::m_uniform: return 2.0 * uniform_open01(c.seed, stream, n) - 1.0;
    case input_dist::m_llm: {
      if (role != tensor_role::m_k) return z;
      // Outlier channels in K: ~3% of channels per KV head, x12, plus a heavy tail
      // (a normal scale-mixture) on every element.
      const bool outlier = uniform_open01(c.seed, 11, static_cast<std::uint64_t>(head * 4096 + d)) < 0.03;
      const double tail = 1.0 + 0.5 * std::fabs(normal_at(c.seed, 12, n));
      return z * tail * (outlier ? 12.0 : 1.0);
    }
    case input_dist::m_rescale_stress:
    case input_dist::m_max_first: {
      if (role == tensor_role::m_v) return z;
      if (d != 0) return k_trend_noise * z;
      if (role == tensor_role::m_q) return k_trend_q;
      // Logit trend +-2*log(1+pos): weights (1+pos)^(+-2), so the running max rises on every
      // key tile (stress) or is set by the first visible key (max-first).
      const double trend = 2.0 * std::log1p(static_cast<double>(pos)) / (k_trend_q * scale);
      return c.dist == input_dist::m_rescale_stress ? trend : -trend;
    }
    case input_dist::m_diffuse: return role == tensor_role::m_q ? 0.01 * z : z;
    case input_dist::m_shifted: {
      if (role == tensor_role::m_v || d != 0) return z;
      // q0 * k0 * scale = shift on every logit: softmax is unchanged, sentinels are not.
      const double a = std::sqrt(std::fabs(c.logit_shift) / scale);
      return role == tensor_role::m_q ? a : std::copysign(a, c.logit_shift);
    }
    case input_dist::m_flat:
      // The same key at every position (a function of head and channel only): logits equal
      // bit for bit along a row, so the row max is set by the first key and never rises.
      if (role != tensor_role::m_k) return z;
      return normal_at(c.seed, element_stream(role, b), element_counter(c, role, 0, head, d));
    case input_dist::m_sink: {
      // Logit +h on key 0 and -h on every other key (h = ln(1e4) / 2), small noise elsewhere:
      // every key but the sink has P ~ 1e-4 of the running max, below e4m3's subnormals, and
      // at S = 8192 they hold about 45% of the mass. V has mean 1, so O ~ 1 whatever the weights
      // and only a loss from the numerator alone (not from l) moves it.
      if (role == tensor_role::m_v) return 1.0 + 0.25 * z;
      if (d != 0) return k_trend_noise * z;
      const double a = std::sqrt(0.5 * std::log(1.0e4) / scale);
      if (role == tensor_role::m_q) return a;
      return pos == 0 ? a : -a;
    }
    case input_dist::m_constant_v:
      if (role != tensor_role::m_v) return z;
      // Distinct per KV head and channel, identical for every key: O must equal it exactly.
      return 1.0 + static_cast<double>(head) + static_cast<double>(d) / (2.0 * c.head_dim);
  }
  return z;
}

namespace {

// One pass computes each element once and stores its rounded (and optionally exact) value.
void fill_kv(const attention_case& c, tensor_role role, std::vector<double>& rounded,
             std::vector<double>* exact) {
  const std::int64_t per_pos = c.kv_heads * c.head_dim;
  const auto n = static_cast<std::size_t>(c.batch * c.seq * per_pos);
  rounded.resize(n);
  if (exact) exact->resize(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t bp = 0; bp < c.batch * c.seq; ++bp) {
    const std::int64_t b = bp / c.seq, pos = bp % c.seq;
    for (std::int64_t h = 0; h < c.kv_heads; ++h)
      for (std::int64_t d = 0; d < c.head_dim; ++d) {
        const double x = attention_input_value(c, role, b, pos, h, d);
        const auto i = static_cast<std::size_t>(bp * per_pos + h * c.head_dim + d);
        rounded[i] = round_input(c.dtype, x);
        if (exact) (*exact)[i] = x;
      }
  }
}

std::vector<double> q_rows_impl(const attention_case& c, std::span<const std::int64_t> rows,
                                bool exact) {
  const std::int64_t per_row = c.heads * c.head_dim;
  std::vector<double> q(rows.size() * static_cast<std::size_t>(per_row));
  for (const std::int64_t r : rows)
    if (r < 0 || r >= c.rows())
      throw_input_error("rows", fmt::format("row {} outside [0, {})", r, c.rows()));
#pragma omp parallel for schedule(static) if (rows.size() > 64)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int64_t r = rows[i];
    const std::int64_t b = r / c.t(), t = r % c.t();
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t d = 0; d < c.head_dim; ++d) {
        const double x = attention_input_value(c, tensor_role::m_q, b, t, h, d);
        q[i * static_cast<std::size_t>(per_row) + static_cast<std::size_t>(h * c.head_dim + d)] =
            exact ? x : round_input(c.dtype, x);
      }
  }
  return q;
}

std::vector<double> gather_rows(std::span<const double> q, std::int64_t per_row,
                                std::span<const std::int64_t> rows, std::int64_t total) {
  std::vector<double> out(rows.size() * static_cast<std::size_t>(per_row));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= total)
      throw_input_error("rows", fmt::format("row {} outside [0, {})", rows[i], total));
    std::copy_n(q.begin() + rows[i] * per_row, per_row, out.begin() + static_cast<std::ptrdiff_t>(i) * per_row);
  }
  return out;
}

}  // namespace

attention_inputs::attention_inputs(attention_case c, bool keep_exact) : m_case(std::move(c)) {
  m_case.validate();
  const auto fill = [&](tensor_role role, shared_values& rounded, shared_values& exact) {
    auto r = std::make_shared<std::vector<double>>();
    std::shared_ptr<std::vector<double>> x;
    if (keep_exact) x = std::make_shared<std::vector<double>>();
    fill_kv(m_case, role, *r, x.get());
    rounded = std::move(r);
    exact = std::move(x);
  };
  fill(tensor_role::m_k, m_k, m_k_exact);
  fill(tensor_role::m_v, m_v, m_v_exact);
}

attention_inputs::attention_inputs(attention_case c, const attention_inputs& longer)
    : m_case(std::move(c)) {
  m_case.validate();
  attention_case same = longer.m_case;
  same.seq = m_case.seq;
  same.queries = m_case.queries;
  if (same.id() != m_case.id() || m_case.seq > longer.m_case.seq || longer.m_given)
    throw_input_error("inputs", "a prefix needs the same generated case at a longer length");
  const std::int64_t per_pos = m_case.kv_heads * m_case.head_dim;
  // Batch 1: the prefix is the start of the longer arrays, shared as they are (immutable).
  const bool share = m_case.batch == 1;
  auto prefix = [&](const shared_values& from) -> shared_values {
    if (!from) return nullptr;
    if (share) return from;
    auto to = std::make_shared<std::vector<double>>(
        static_cast<std::size_t>(m_case.batch * m_case.seq * per_pos));
    for (std::int64_t b = 0; b < m_case.batch; ++b)
      std::copy_n(from->begin() + b * longer.m_case.seq * per_pos, m_case.seq * per_pos,
                  to->begin() + b * m_case.seq * per_pos);
    return to;
  };
  // Q rows depend on (b, t) only, so the first T rows of each batch member of a longer case's
  // materialised Q are this case's Q.
  if (longer.m_q && m_case.t() <= longer.m_case.t()) {
    if (share) {
      m_q = longer.m_q;
    } else {
      const std::int64_t per_row = m_case.heads * m_case.head_dim;
      auto q = std::make_shared<std::vector<double>>(static_cast<std::size_t>(m_case.rows() * per_row));
      for (std::int64_t b = 0; b < m_case.batch; ++b)
        std::copy_n(longer.m_q->begin() + b * longer.m_case.t() * per_row, m_case.t() * per_row,
                    q->begin() + b * m_case.t() * per_row);
      m_q = std::move(q);
    }
  }
  m_k = prefix(longer.m_k);
  m_v = prefix(longer.m_v);
  m_k_exact = prefix(longer.m_k_exact);
  m_v_exact = prefix(longer.m_v_exact);
}

attention_inputs::attention_inputs(attention_case c, std::vector<double> q, std::vector<double> k,
                                   std::vector<double> v)
    : m_case(std::move(c)) {
  m_case.validate();
  const auto nq = static_cast<std::size_t>(m_case.rows() * m_case.heads * m_case.head_dim);
  const auto nkv = static_cast<std::size_t>(m_case.batch * m_case.seq * m_case.kv_heads * m_case.head_dim);
  if (q.size() != nq) throw_input_error("q", fmt::format("expected {} elements, got {}", nq, q.size()));
  if (k.size() != nkv) throw_input_error("k", fmt::format("expected {} elements, got {}", nkv, k.size()));
  if (v.size() != nkv) throw_input_error("v", fmt::format("expected {} elements, got {}", nkv, v.size()));
  for (auto* t : {&q, &k, &v})
    for (double x : *t)
      if (!std::isfinite(x)) throw_input_error("inputs", "NaN or Inf in Q/K/V");
  m_given = true;
  m_q_exact = std::make_shared<const std::vector<double>>(q);
  m_k_exact = std::make_shared<const std::vector<double>>(k);
  m_v_exact = std::make_shared<const std::vector<double>>(v);
  auto rounded = [this](std::vector<double> t) {
    for (double& x : t) x = formats::round_to(m_case.dtype, x);
    return std::make_shared<const std::vector<double>>(std::move(t));
  };
  m_q = rounded(std::move(q));
  m_k = rounded(std::move(k));
  m_v = rounded(std::move(v));
}

std::vector<double> attention_inputs::q_rows(std::span<const std::int64_t> rows) const {
  if (m_q) return gather_rows(q_materialized(), m_case.heads * m_case.head_dim, rows, m_case.rows());
  return q_rows_impl(m_case, rows, false);
}

std::vector<double> attention_inputs::q_rows_exact(std::span<const std::int64_t> rows) const {
  if (m_q_exact)
    return gather_rows(view(m_q_exact, q_elems()), m_case.heads * m_case.head_dim, rows, m_case.rows());
  return q_rows_impl(m_case, rows, true);
}

void attention_inputs::materialize_q() {
  if (m_q) return;
  m_q = std::make_shared<const std::vector<double>>(q_all());
}

std::vector<double> attention_inputs::q_all() const {
  if (m_q) {
    const auto q = q_materialized();
    return {q.begin(), q.end()};
  }
  std::vector<std::int64_t> rows(static_cast<std::size_t>(m_case.rows()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  return q_rows_impl(m_case, rows, false);
}

namespace {

// Appends every Q row, K and V position of `m` (its exact values, or its rounded ones).
void append_member(const attention_inputs& m, bool exact, std::vector<double>& q, std::vector<double>& k,
                   std::vector<double>& v) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(m.c().rows()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  const std::vector<double> mq = exact ? m.q_rows_exact(rows) : m.q_rows(rows);
  q.insert(q.end(), mq.begin(), mq.end());
  const auto mk = exact ? m.k_exact() : m.k();
  const auto mv = exact ? m.v_exact() : m.v();
  k.insert(k.end(), mk.begin(), mk.end());
  v.insert(v.end(), mv.begin(), mv.end());
}

}  // namespace

attention_inputs concatenate_batch(std::span<const attention_inputs* const> members) {
  if (members.empty()) throw_input_error("batch", "no members to concatenate");
  attention_case c = members.front()->c();
  const auto shape_of = [](attention_case m) {
    m.seed = 0;
    m.batch = 1;
    return m.id();
  };
  const std::string shape = shape_of(c);
  bool exact = true;
  std::int64_t batch = 0;
  for (const attention_inputs* m : members) {
    if (shape_of(m->c()) != shape)
      throw_input_error("batch", fmt::format("member {} has another shape than {}", m->c().id(), c.id()));
    exact = exact && m->has_exact();
    batch += m->c().batch;
  }
  std::vector<double> q, k, v;
  for (const attention_inputs* m : members) append_member(*m, exact, q, k, v);
  c.batch = batch;
  return attention_inputs(c, std::move(q), std::move(k), std::move(v));
}

attention_inputs concatenate_ragged(std::span<const attention_inputs* const> members) {
  if (members.empty()) throw_input_error("batch", "no members to concatenate");
  attention_case c = members.front()->c();
  const auto shape_of = [](attention_case m) {
    m.seed = 0;
    m.seq = m.t();  // T kept, S free
    m.queries = 0;
    return m.id();
  };
  const std::string shape = shape_of(c);
  bool exact = true;
  std::int64_t s_max = 0;
  for (const attention_inputs* m : members) {
    if (m->c().batch != 1 || m->c().ragged())
      throw_input_error("batch", fmt::format("ragged member {} is not one sequence", m->c().id()));
    if (shape_of(m->c()) != shape)
      throw_input_error("batch", fmt::format("member {} has another shape than {}", m->c().id(), c.id()));
    exact = exact && m->has_exact();
    s_max = std::max(s_max, m->c().seq);
  }
  const auto row = static_cast<std::size_t>(c.kv_heads * c.head_dim);
  std::vector<double> q, k, v;
  c.seq_lens.clear();
  for (const attention_inputs* m : members) {
    const attention_case& mc = m->c();
    append_member(*m, exact, q, k, v);
    const auto mk = exact ? m->k_exact() : m->k();
    const auto mv = exact ? m->v_exact() : m->v();
    const std::size_t pad = static_cast<std::size_t>(s_max - mc.seq) * row;
    for (std::size_t i = 0; i < pad; ++i) {
      k.push_back(8.0 * mk[i % mk.size()]);
      v.push_back(16.0 + mv[i % mv.size()]);
    }
    c.seq_lens.push_back(mc.seq);
  }
  c.batch = static_cast<std::int64_t>(members.size());
  c.seq = s_max;
  c.queries = members.front()->c().t() == s_max ? 0 : members.front()->c().t();
  c.validate();
  return attention_inputs(c, std::move(q), std::move(k), std::move(v));
}

}  // namespace numprobe
