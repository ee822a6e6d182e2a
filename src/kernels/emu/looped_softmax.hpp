#pragma once
// CPU emulation of a looped (online) softmax kernel over long rows (issue 9): one block per
// row, walking the row in chunks of C entries with a running max m and running sum l, so no
// row has to fit in shared memory. Per chunk: a block max, m_new = max(m, chunk max), the
// rescale alpha = exp(m - m_new), and a tree-reduced chunk sum folded into l. A second pass
// writes p = exp(z - m) / l, log p = (z - m) - log l, LSE = m + log l and the cross-entropy.
// States (x, m, l, out, lse) have named storage dtypes; faults share the flash kernel's names.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::emu {

struct softmax_states {
  formats::format_id x = formats::format_id::m_bf16;   // logits as read
  formats::format_id m = formats::format_id::m_f32;    // running max
  formats::format_id l = formats::format_id::m_f32;    // running sum
  formats::format_id out = formats::format_id::m_f32;  // p and log p as written
  formats::format_id lse = formats::format_id::m_f32;  // LSE and cross-entropy as written
};

[[nodiscard]] softmax_states default_softmax_states(formats::format_id input);
// Names x, m, l, out, lse; throws an input error naming `place` on an unknown name.
void set_softmax_state(softmax_states& st, std::string_view name, formats::format_id f,
                       const std::string& place = "--state");
[[nodiscard]] std::span<const std::string_view> softmax_state_names();
[[nodiscard]] formats::format_id get_softmax_state(const softmax_states& st, std::string_view name);

// The faults this kernel has: no-empty-guard (a fully masked chunk before any valid entry
// makes exp(-inf - -inf)), rowsum-bf16 (l held in bf16), finite-sentinel (m starts at -1e4).
[[nodiscard]] bool softmax_fault_supported(fault f);

struct looped_softmax_config {
  std::int64_t chunk = 1024;
  softmax_states states;
  bool exp2 = false;  // exp as exp2(x * log2(e)) with the prescale in fp32 (__expf-style)
  std::vector<fault> faults;

  [[nodiscard]] bool has(fault f) const;
  // "emu-softmax[chunk=1024,l=bf16,inject=rowsum-bf16]", non-default settings only.
  [[nodiscard]] std::string describe(formats::format_id input) const;
};

// What the row needs beyond its logits.
struct softmax_params {
  std::int64_t vocab = 0;
  double temperature = 1.0;
  double softcap = 0.0;
  std::span<const std::int64_t> targets;  // one per row; -1: none (cross-entropy 0)
};

struct softmax_result {
  std::vector<double> p, logp;  // [rows, V]
  std::vector<double> lse, ce;  // [rows]
};

// Runs the kernel on [rows, V] logits (masked entries -inf). Throws an input error on a fault
// the kernel does not have, or a non-positive chunk.
[[nodiscard]] softmax_result looped_softmax(std::span<const double> logits, const softmax_params& prm,
                                            const looped_softmax_config& cfg);

}  // namespace numprobe::emu
