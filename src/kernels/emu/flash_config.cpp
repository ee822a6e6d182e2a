// Names and settings of the emulated FlashAttention kernel: state dtypes, faults, describe().
// The fault names are shared with the GPU kernels' fault variants (DESIGN.md), so they are
// spelled once, in src/kernels/fault_table.hpp.
#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::emu {
namespace {

// all_faults(), in table (enum) order.
constexpr std::array<fault, kernels::k_fault_table.size()> k_faults = [] {
  std::array<fault, kernels::k_fault_table.size()> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = kernels::k_fault_table[i].id;
  return out;
}();

constexpr std::array<std::string_view, 4> k_kv_scale_names{"tensor", "head", "channel", "token"};

constexpr std::array<std::string_view, 10> k_state_names{"q", "k", "v", "s",   "p",
                                                         "m", "l", "o", "out", "lse"};

// Pointer to the member named `name`, or nullptr.
formats::format_id* state_slot(state_dtypes& st, std::string_view name) {
  if (name == "q") return &st.q;
  if (name == "k") return &st.k;
  if (name == "v") return &st.v;
  if (name == "s") return &st.s;
  if (name == "p") return &st.p;
  if (name == "m") return &st.m;
  if (name == "l") return &st.l;
  if (name == "o") return &st.o;
  if (name == "out") return &st.out;
  if (name == "lse") return &st.lse;
  return nullptr;
}

std::string joined_state_names() { return fmt::format("{}", fmt::join(k_state_names, ", ")); }

}  // namespace

std::span<const fault> all_faults() { return k_faults; }

std::string_view to_string(kv_scale_layout l) { return k_kv_scale_names[static_cast<std::size_t>(l)]; }

kv_scale_layout parse_kv_scale(std::string_view text, const std::string& place) {
  for (std::size_t i = 0; i < k_kv_scale_names.size(); ++i)
    if (k_kv_scale_names[i] == text) return static_cast<kv_scale_layout>(i);
  throw_input_error(place, fmt::format("unknown scale layout '{}' (expected tensor|head|channel|token)", text));
}

fault parse_fault(std::string_view text, const std::string& place) {
  fault f{};
  if (kernels::find_fault(text, f)) return f;
  throw_input_error(place, fmt::format("unknown fault '{}' (known: {})", text,
                                       kernels::fault_names(0xFF)));
}

state_dtypes default_states(formats::format_id input) {
  using formats::format_id;
  // P is fed to the P.V MMA in the input dtype, as real kernels do. The output is written in
  // the input dtype, except for formats nobody writes attention outputs in (fp8 and below),
  // where FA3-style kernels write bf16.
  const bool wide_output = input == format_id::m_f64 || input == format_id::m_f32 ||
                           input == format_id::m_tf32 || input == format_id::m_bf16 ||
                           input == format_id::m_f16;
  state_dtypes st{};
  st.q = st.k = st.v = input;
  st.p = input;
  st.out = wide_output ? input : format_id::m_bf16;
  if (input == format_id::m_tf32) st.out = format_id::m_f32;  // tf32 is stored in 32 bits
  return st;
}

void set_state(state_dtypes& st, std::string_view name, formats::format_id f,
               const std::string& place) {
  formats::format_id* slot = state_slot(st, name);
  if (slot == nullptr)
    throw_input_error(place, fmt::format("unknown state '{}' (known: {})", name,
                                         joined_state_names()));
  *slot = f;
}

std::span<const std::string_view> state_names() { return k_state_names; }

formats::format_id get_state(const state_dtypes& st, std::string_view name) {
  formats::format_id* slot = state_slot(const_cast<state_dtypes&>(st), name);
  if (slot == nullptr)
    throw_input_error("state", fmt::format("unknown state '{}' (known: {})", name,
                                           joined_state_names()));
  return *slot;
}

bool flash_config::has(fault f) const {
  return std::find(faults.begin(), faults.end(), f) != faults.end();
}

std::int64_t flash_config::reduction_width() const {
  constexpr std::int64_t k_tree_width = 32;  // butterfly offsets 16, 8, 4, 2, 1
  return has(fault::m_wave_width) ? std::min(wavefront_width, k_tree_width) : wavefront_width;
}

std::string flash_config::describe(formats::format_id input) const {
  std::string out = fmt::format("emu[tile={}x{}", tile_q, tile_k);
  const state_dtypes defaults = default_states(input);
  for (std::string_view n : k_state_names) {
    const formats::format_id f = get_state(states, n);
    if (f != get_state(defaults, n)) out += fmt::format(",{}={}", n, formats::name(f));
  }
  if (!exp2) out += ",exp=exp";
  if (force_rescale) out += ",force-rescale";
  if (fp8.kv)
    out += fmt::format(",kv={}/{}", formats::name(fp8.kv_format), to_string(fp8.kv_scale));
  if (fp8.p) out += fmt::format(",p={}x{}", formats::name(fp8.p_format), fp8.p_prescale);
  if (fp8.acc_promote > 0) out += fmt::format(",acc-promote={}", fp8.acc_promote);
  if (fp8.acc_model != nullptr) out += fmt::format(",acc-model={}", fp8.acc_model->name);
  if (fp8.acc_fma) out += ",acc-fma";
  if (wavefront_width != 64) out += fmt::format(",wavefront={}", wavefront_width);
  if (!faults.empty()) {
    std::vector<std::string_view> names;
    for (fault f : faults) names.push_back(to_string(f));
    out += fmt::format(",inject={}", fmt::join(names, "+"));
  }
  out += "]";
  return out;
}

}  // namespace numprobe::emu
