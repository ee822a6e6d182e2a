// `--backend emu`: the CPU emulation of a tiled flash-attention kernel, with state dtypes and
// injectable faults.
#include <cmath>
#include <limits>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/flash_attention.hpp"
#include "src/kernels/emu/flash_decode.hpp"
#include "src/kernels/emu/mma_model.hpp"
#include "src/providers/builtin_providers.hpp"
#include "src/providers/knobs.hpp"
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
    // `--backend emu:opaque` (or the knob `opaque`): the emulator runs with its tile but hides
    // it, as an exec or plugin kernel does, so tile inference and the defaults for opaque
    // kernels can be tested against a kernel whose true tile is known.
    if (const backend_spec spec = parse_backend_spec(o.backend); spec.has_arg) {
      if (spec.arg != "opaque")
        throw_input_error("--backend", fmt::format("'{}': the emu backend takes only emu:opaque", o.backend));
      m_opaque = true;
    }
    m_opaque = m_opaque || o.knobs.count("opaque") > 0;
    apply_serving_knobs(o.knobs);
    // Validate --state names and dtypes now, so a typo fails before any work is done.
    auto probe_states = m_cfg.states;
    for (const auto& [name, dtype] : o.states)
      emu::set_state(probe_states, name, formats::parse_format(dtype, "--state " + name));
  }
  std::string name() const override {
    if (m_opaque) return "emu:opaque";  // the tile would show in the description
    if (!m_decode) return m_cfg.describe(m_input);
    emu::decode_config d = m_dcfg;
    d.states = m_cfg.states;
    return d.describe(m_input);
  }
  bool takes_ragged() const override { return true; }  // per-member lengths (seq_lens)
  tile_shape tiles() const override {
    if (m_opaque) return {0, 0};
    return {m_cfg.tile_q, m_cfg.tile_k};
  }
  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    // State defaults follow the case's input dtype; explicit --state flags override them.
    m_input = in.c().dtype;
    emu::flash_config cfg = m_cfg;
    cfg.states = emu::default_states(m_input);
    for (const auto& [name, dtype] : m_opts.states)
      emu::set_state(cfg.states, name, formats::parse_format(dtype, "--state " + name));
    m_cfg.states = cfg.states;
    cfg.call_seed = ++m_calls;  // atomic-order draws its tile order per call
    if (m_decode) {
      emu::decode_config d = m_dcfg;
      d.states = cfg.states;
      d.faults = cfg.faults;
      return emu::flash_decode(in, rows, d);
    }
    return emu::flash_forward(in, cfg, rows);
  }
  nlohmann::json metadata() const override {
    if (m_opaque) return {{"opaque", true}};
    nlohmann::json states = nlohmann::json::object();
    for (auto n : emu::state_names())
      states[std::string(n)] = std::string(formats::name(emu::get_state(m_cfg.states, n)));
    std::vector<std::string> faults;
    for (auto f : m_cfg.faults) faults.emplace_back(emu::to_string(f));
    nlohmann::json j = {{"tile_q", m_cfg.tile_q}, {"tile_k", m_cfg.tile_k}, {"states", states},
                        {"exp", m_cfg.exp2 ? "exp2 with log2(e) prescale" : "exp"}, {"faults", faults},
                        {"wavefront", {{"width", m_cfg.wavefront_width}, {"reduction_width", m_cfg.reduction_width()}}}};
    if (m_decode)
      j["decode"] = {{"splits", m_dcfg.splits}, {"split_size", m_dcfg.split_size},
                     {"page_size", m_dcfg.page_size}, {"tile_k", m_dcfg.tile_k}};
    if (m_cfg.fp8.any())
      j["fp8"] = {{"kv", m_cfg.fp8.kv}, {"kv_format", formats::name(m_cfg.fp8.kv_format)},
                  {"kv_scale", emu::to_string(m_cfg.fp8.kv_scale)}, {"p", m_cfg.fp8.p},
                  {"p_format", formats::name(m_cfg.fp8.p_format)}, {"p_prescale", m_cfg.fp8.p_prescale},
                  {"acc_promote", m_cfg.fp8.acc_promote}, {"acc_mantissa_bits", m_cfg.fp8.acc_mantissa},
                  {"acc_model", m_acc_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(m_acc_model)},
                  {"acc_fma", m_cfg.fp8.acc_fma}};
    return j;
  }

 private:
  // Serving knobs (issue 9): split-KV decode and the fp8 quantization points.
  void apply_serving_knobs(const std::map<std::string, std::string>& knobs) {
    const knob_reader k(knobs);
    const auto integer = [&](const char* name) {
      return k.integer(name, 1, std::numeric_limits<std::int64_t>::max());
    };
    if (const std::string* bad = k.first_unknown({"decode", "splits", "split-size", "page-size", "kv-format",
                                                  "kv-scale", "p-format", "p-prescale", "acc-promote", "acc-model", "acc-fma",
                                                  "force-rescale", "opaque"}))
      throw_input_error("--" + *bad, "not a knob of the emu backend");
    m_decode = k.has("decode");
    m_cfg.force_rescale = k.has("force-rescale");
    m_dcfg.tile_k = m_cfg.tile_k;
    if (k.has("splits")) m_dcfg.splits = integer("splits");
    if (k.has("split-size")) m_dcfg.split_size = integer("split-size");
    if (k.has("page-size")) m_dcfg.page_size = integer("page-size");
    auto fp8_format = [&](const char* name) {
      const auto f = formats::parse_format(k.text(name), std::string("--") + name);
      if (formats::info(f).bits != 8 || !formats::info(f).is_float || f == formats::format_id::m_e8m0)
        throw_input_error(std::string("--") + name, "expected an fp8 format (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz)");
      return f;
    };
    if (k.has("kv-format")) {
      m_cfg.fp8.kv = true;
      m_cfg.fp8.kv_format = fp8_format("kv-format");
    }
    if (k.has("kv-scale")) {
      if (!m_cfg.fp8.kv) throw_input_error("--kv-scale", "needs --kv-format");
      m_cfg.fp8.kv_scale = emu::parse_kv_scale(k.text("kv-scale"));
    }
    if (k.has("p-format")) {
      m_cfg.fp8.p = true;
      m_cfg.fp8.p_format = fp8_format("p-format");
    }
    if (k.has("p-prescale")) {
      if (!m_cfg.fp8.p) throw_input_error("--p-prescale", "needs --p-format");
      m_cfg.fp8.p_prescale = k.positive("p-prescale", std::numeric_limits<double>::max());
    }
    if (k.has("acc-promote")) m_cfg.fp8.acc_promote = integer("acc-promote");
    if (k.has("acc-model")) {
      // Issue 31 item 3: P.V runs instruction by instruction through the named model
      // (src/kernels/emu/flash_attention.hpp, fp8_config; docs/hardware.md).
      const emu::mma_model& mm = emu::find_mma_model(k.text("acc-model"), "--acc-model");
      m_cfg.fp8.acc_model = &mm;
      m_cfg.fp8.acc_mantissa = mm.internal_fraction_bits;
      m_acc_model = mm.name;
    }
    if (k.has("acc-fma")) {
      if (m_cfg.fp8.acc_model == nullptr || m_cfg.fp8.acc_promote == 0)
        throw_input_error("--acc-fma", "fuses the promotion of --acc-model's accumulator: needs --acc-model and "
                                       "--acc-promote");
      m_cfg.fp8.acc_fma = true;
    }
    if (m_decode && m_cfg.fp8.any())
      throw_input_error("--decode", "fp8 knobs apply to the prefill kernel only (not yet to --decode)");
    // Faults that need their mechanism switched on name the missing flag.
    for (auto f : m_cfg.faults) {
      if (!m_decode && !kernels::applies(f, kernels::k_emu_forward))
        throw_input_error("--inject", fmt::format("fault '{}' needs --decode", emu::to_string(f)));
      if (m_decode && !emu::decode_fault_supported(f))
        throw_input_error("--inject", fmt::format("fault '{}' does not apply to --decode", emu::to_string(f)));
      if (f == emu::fault::m_kv_scale_ignored && !m_cfg.fp8.kv)
        throw_input_error("--inject", fmt::format("{} needs --kv-format", emu::to_string(f)));
      if (f == emu::fault::m_p_no_prescale && !m_cfg.fp8.p)
        throw_input_error("--inject", fmt::format("{} needs --p-format", emu::to_string(f)));
      if (f == emu::fault::m_acc_no_promotion && m_cfg.fp8.acc_promote == 0)
        throw_input_error("--inject", fmt::format("{} needs --acc-promote", emu::to_string(f)));
    }
  }

  provider_options m_opts;
  bool m_opaque = false;  // tiles() reports {0, 0}; the kernel still runs with its tile
  bool m_decode = false;
  std::uint64_t m_calls = 0;
  emu::decode_config m_dcfg;
  emu::flash_config m_cfg;
  std::string m_acc_model;  // --acc-model NAME, empty when not given
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
