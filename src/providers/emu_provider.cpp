// `--backend emu`: the CPU emulation of a tiled flash-attention kernel, with state dtypes and
// injectable faults.
#include <fmt/format.h>

#include "numprobe/core/error.hpp"
#include "src/kernels/emu/flash_attention.hpp"
#include "src/providers/builtin_providers.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

class emu_provider final : public attention_provider {
 public:
  explicit emu_provider(const provider_options& o) : m_opts(o) {
    if (o.tile) {
      if (o.tile->q <= 0 || o.tile->k <= 0 || o.tile->q > 4096 || o.tile->k > 4096)
        throw_input_error("--tile", "tile sizes must be in [1, 4096]");
      m_cfg.tile_q = o.tile->q;
      m_cfg.tile_k = o.tile->k;
    }
    for (const auto& f : o.faults) m_cfg.faults.push_back(emu::parse_fault(f));
    // Validate --state names and dtypes now, so a typo fails before any work is done.
    auto probe_states = m_cfg.states;
    for (const auto& [name, dtype] : o.states)
      emu::set_state(probe_states, name, formats::parse_format(dtype, "--state " + name));
  }
  std::string name() const override { return m_cfg.describe(m_input); }
  tile_shape tiles() const override { return {m_cfg.tile_q, m_cfg.tile_k}; }
  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    // State defaults follow the case's input dtype; explicit --state flags override them.
    m_input = in.c().dtype;
    emu::flash_config cfg = m_cfg;
    cfg.states = emu::default_states(m_input);
    for (const auto& [name, dtype] : m_opts.states)
      emu::set_state(cfg.states, name, formats::parse_format(dtype, "--state " + name));
    m_cfg.states = cfg.states;
    return emu::flash_forward(in, cfg, rows);
  }
  nlohmann::json metadata() const override {
    nlohmann::json states = nlohmann::json::object();
    for (auto n : emu::state_names())
      states[std::string(n)] = std::string(formats::name(emu::get_state(m_cfg.states, n)));
    std::vector<std::string> faults;
    for (auto f : m_cfg.faults) faults.emplace_back(emu::to_string(f));
    return {{"tile_q", m_cfg.tile_q}, {"tile_k", m_cfg.tile_k}, {"states", states},
            {"exp", m_cfg.exp2 ? "exp2 with log2(e) prescale" : "exp"}, {"faults", faults}};
  }

 private:
  provider_options m_opts;
  emu::flash_config m_cfg;
  formats::format_id m_input = formats::format_id::m_bf16;
};

std::unique_ptr<attention_provider> make_emu(const provider_options& o) {
  return std::make_unique<emu_provider>(o);
}

}  // namespace

void register_emu_provider() {
  register_attention_provider("emu", &make_emu,
                              "CPU emulation of a FlashAttention-2 forward kernel (state dtypes, faults)");
}

}  // namespace numprobe
