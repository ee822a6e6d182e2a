#pragma once
// Seeded attention inputs. Every element is a pure function of (case, tensor, b, pos, head, d),
// so any query row regenerates alone: long-context probes never materialise all of Q.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "numprobe/core/attention_case.hpp"

namespace numprobe {

enum class tensor_role : std::uint64_t { m_q = 1, m_k = 2, m_v = 3 };

// The exact (unrounded) value of one input element.
[[nodiscard]] double attention_input_value(const attention_case& c, tensor_role role,
                                           std::int64_t b, std::int64_t pos, std::int64_t head,
                                           std::int64_t d);

// Q/K/V of one case. Q is [B*T, Hq, D] by flat row (b*T + t); K and V are [B*S, Hkv, D].
// "Rounded" tensors hold values exactly representable in the case's dtype (what a kernel sees);
// "exact" tensors hold the unrounded values (for end-to-end error).
class attention_inputs {
 public:
  // Immutable backing array, shared between inputs and the prefixes taken from them.
  using shared_values = std::shared_ptr<const std::vector<double>>;

  // Generates K and V now (and their exact versions when keep_exact), Q lazily by row.
  explicit attention_inputs(attention_case c, bool keep_exact = true);
  // The same generated case at a shorter length (and any T): K/V equal the prefix of `longer`'s
  // (element values do not depend on S). With batch 1 the prefix is a view of `longer`'s arrays
  // (shared, nothing copied); with batch > 1 it is copied.
  attention_inputs(attention_case c, const attention_inputs& longer);
  // Inputs given as tensors (files, dumps): values are rounded to the dtype on the way in.
  attention_inputs(attention_case c, std::vector<double> q, std::vector<double> k,
                   std::vector<double> v);

  [[nodiscard]] const attention_case& c() const { return m_case; }
  [[nodiscard]] std::span<const double> k() const { return view(m_k, kv_elems()); }
  [[nodiscard]] std::span<const double> v() const { return view(m_v, kv_elems()); }
  [[nodiscard]] bool has_exact() const { return m_k_exact != nullptr; }
  [[nodiscard]] std::span<const double> k_exact() const { return view(m_k_exact, kv_elems()); }
  [[nodiscard]] std::span<const double> v_exact() const { return view(m_v_exact, kv_elems()); }

  // Q for the given flat rows, [rows.size(), Hq, D].
  [[nodiscard]] std::vector<double> q_rows(std::span<const std::int64_t> rows) const;
  [[nodiscard]] std::vector<double> q_rows_exact(std::span<const std::int64_t> rows) const;
  [[nodiscard]] std::vector<double> q_all() const;
  // Generates and keeps all of Q (rounded), so that q_all()/q_rows() and prefixes taken from
  // these inputs copy instead of regenerating: for sweeps on kernels that need every row.
  void materialize_q();
  // All of Q (rounded) when given or materialised, else empty; no copy.
  [[nodiscard]] std::span<const double> q_materialized() const { return view(m_q, q_elems()); }

  // The backing arrays of rounded Q (null unless given or materialised), K and V. k() is the
  // first B*S*Hkv*D elements of *k_storage() (likewise v, and q() of *q_storage()); the arrays
  // never change, so their identity can key caches of converted or uploaded copies (the GPU
  // providers upload a sweep's K/V once).
  [[nodiscard]] const shared_values& q_storage() const { return m_q; }
  [[nodiscard]] const shared_values& k_storage() const { return m_k; }
  [[nodiscard]] const shared_values& v_storage() const { return m_v; }

 private:
  [[nodiscard]] std::size_t kv_elems() const {
    return static_cast<std::size_t>(m_case.batch * m_case.seq * m_case.kv_heads * m_case.head_dim);
  }
  [[nodiscard]] std::size_t q_elems() const {
    return static_cast<std::size_t>(m_case.rows() * m_case.heads * m_case.head_dim);
  }
  static std::span<const double> view(const shared_values& a, std::size_t n) {
    return a ? std::span<const double>(a->data(), std::min(n, a->size())) : std::span<const double>();
  }

  attention_case m_case;
  shared_values m_k, m_v, m_k_exact, m_v_exact;
  bool m_given = false;    // inputs given as tensors (not generated)
  shared_values m_q;       // rounded Q when given or materialised
  shared_values m_q_exact; // likewise, as given
};

// The batch whose members are `members`, in order: member j's Q rows are flat rows
// [j*T, (j+1)*T) and its K/V positions [j*S, (j+1)*S), bit for bit those of members[j] (each
// member a batch of 1, or of any size: their batches are concatenated). Members may differ in
// seed only; every other field of their cases must agree (an input error names the first that
// does not). The result is given-tensor inputs: its case is the first member's with the total
// batch, its exact tensors are the members' exact ones where all have them. Invariance (issue 30)
// builds "this sequence inside a batch of others" with it.
[[nodiscard]] attention_inputs concatenate_batch(std::span<const attention_inputs* const> members);

// A ragged batch (attention_case::seq_lens) of batch-1 members that may also differ in S (not in
// T): member j's Q rows are flat rows [j*T, (j+1)*T), its keys the first S_j of the slots
// [j*Smax, (j+1)*Smax), bit for bit its own. The padding slots past S_j hold K = 8x and
// V = 16 + the member's own values, cyclically: a kernel that reads padding as keys gets an
// error far past any bound, never a silent match.
[[nodiscard]] attention_inputs concatenate_ragged(std::span<const attention_inputs* const> members);

}  // namespace numprobe
