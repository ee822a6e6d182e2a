#pragma once
// Seeded attention inputs. Every element is a pure function of (case, tensor, b, pos, head, d),
// so any query row regenerates alone: long-context probes never materialise all of Q.
#include <cstdint>
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
  // Generates K and V now (and their exact versions when keep_exact), Q lazily by row.
  explicit attention_inputs(attention_case c, bool keep_exact = true);
  // The same generated case at a shorter length (and any T): K/V are copied as the prefix of
  // `longer`'s, which equals generating them afresh (element values do not depend on S).
  attention_inputs(attention_case c, const attention_inputs& longer);
  // Inputs given as tensors (files, dumps): values are rounded to the dtype on the way in.
  attention_inputs(attention_case c, std::vector<double> q, std::vector<double> k,
                   std::vector<double> v);

  [[nodiscard]] const attention_case& c() const { return m_case; }
  [[nodiscard]] std::span<const double> k() const { return m_k; }
  [[nodiscard]] std::span<const double> v() const { return m_v; }
  [[nodiscard]] bool has_exact() const { return !m_k_exact.empty(); }
  [[nodiscard]] std::span<const double> k_exact() const { return m_k_exact; }
  [[nodiscard]] std::span<const double> v_exact() const { return m_v_exact; }

  // Q for the given flat rows, [rows.size(), Hq, D].
  [[nodiscard]] std::vector<double> q_rows(std::span<const std::int64_t> rows) const;
  [[nodiscard]] std::vector<double> q_rows_exact(std::span<const std::int64_t> rows) const;
  [[nodiscard]] std::vector<double> q_all() const;
  // Generates and keeps all of Q (rounded), so that q_all()/q_rows() and prefixes taken from
  // these inputs copy instead of regenerating: for sweeps on kernels that need every row.
  void materialize_q();

 private:
  attention_case m_case;
  std::vector<double> m_k, m_v, m_k_exact, m_v_exact;
  bool m_given = false;           // inputs given as tensors (not generated)
  std::vector<double> m_q;        // rounded Q when given or materialised
  std::vector<double> m_q_exact;  // likewise, as given
};

}  // namespace numprobe
