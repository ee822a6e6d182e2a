// `numprobe softmax --backend emu`: the emulated looped softmax kernel (src/kernels/emu/
// looped_softmax.hpp) with named state dtypes and the softmax faults of the shared table.
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/looped_softmax.hpp"
#include "src/kernels/fault_table.hpp"
#include "src/providers/softmax_provider.hpp"

namespace numprobe {
namespace {

class emu_softmax final : public softmax_provider {
 public:
  explicit emu_softmax(const softmax_provider_options& o) : m_opts(o) {
    m_cfg.chunk = o.chunk;
    m_cfg.exp2 = o.exp2;
    if (o.chunk < 1 || o.chunk > (std::int64_t{1} << 24))
      throw_input_error("--chunk", fmt::format("must be in [1, 2^24], got {}", o.chunk));
    for (const auto& f : o.faults) {
      const emu::fault ff = emu::parse_fault(f);
      if (!emu::softmax_fault_supported(ff))
        throw_input_error("--inject", fmt::format("fault '{}' does not apply to softmax (it has {})", f,
                                                  kernels::fault_names(kernels::k_emu_softmax)));
      m_cfg.faults.push_back(ff);
    }
    auto probe_states = m_cfg.states;  // validate names and dtypes before any work
    for (const auto& [n, d] : o.states)
      emu::set_softmax_state(probe_states, n, formats::parse_format(d, "--state " + n));
  }
  std::string name() const override { return m_cfg.describe(m_input); }
  std::int64_t chunk() const override { return m_cfg.chunk; }
  softmax_output run(const softmax_case& c, std::span<const double> logits,
                     std::span<const std::int64_t> rows) override {
    m_input = c.dtype;
    m_cfg.states = emu::default_softmax_states(c.dtype);
    for (const auto& [n, d] : m_opts.states)
      emu::set_softmax_state(m_cfg.states, n, formats::parse_format(d, "--state " + n));
    std::vector<std::int64_t> targets;
    for (auto r : rows) targets.push_back(softmax_target(c, r));
    const emu::softmax_params prm{c.vocab, c.temperature, c.softcap, targets};
    auto res = emu::looped_softmax(logits, prm, m_cfg);
    softmax_output out;
    out.rows.assign(rows.begin(), rows.end());
    out.vocab = c.vocab;
    out.p = std::move(res.p);
    out.logp = std::move(res.logp);
    out.lse = std::move(res.lse);
    out.ce = std::move(res.ce);
    return out;
  }
  nlohmann::json metadata() const override {
    nlohmann::json st = nlohmann::json::object();
    for (auto n : emu::softmax_state_names())
      st[std::string(n)] = std::string(formats::name(emu::get_softmax_state(m_cfg.states, n)));
    std::vector<std::string> faults;
    for (auto f : m_cfg.faults) faults.emplace_back(emu::to_string(f));
    return {{"chunk", m_cfg.chunk}, {"states", st}, {"exp", m_cfg.exp2 ? "exp2 with log2(e) prescale" : "exp"},
            {"faults", faults}};
  }

 private:
  softmax_provider_options m_opts;
  emu::looped_softmax_config m_cfg;
  formats::format_id m_input = formats::format_id::m_bf16;
};

}  // namespace

std::unique_ptr<softmax_provider> make_emu_softmax_provider(const softmax_provider_options& o) {
  return std::make_unique<emu_softmax>(o);
}

}  // namespace numprobe
