#pragma once
// One provider interface: the reference, the emulator, the built-in GPU kernels, plugins and
// external commands all implement it (DESIGN.md, "One provider interface").
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/core/attention_output.hpp"
#include "src/kernels/emu/flash_attention.hpp"
#include "src/providers/provider_registry.hpp"

namespace numprobe {

// Tile shape of the kernel under test; {0, 0} for an opaque kernel.
struct tile_shape {
  std::int64_t q = 0;
  std::int64_t k = 0;
  [[nodiscard]] bool known() const { return q > 0 && k > 0; }
};

// Everything `--backend` and the kernel flags select. Providers take what applies to them and
// reject what they cannot honour (an input error naming the flag).
struct provider_options {
  std::string backend = "emu";              // ref | emu | cuda | hip | plugin:PATH | exec:CMD
  std::optional<tile_shape> tile;           // --tile BqxBk
  std::map<std::string, std::string> states;  // --state NAME=DTYPE
  std::vector<std::string> faults;          // --inject FAULT (repeatable)
  int device = 0;                           // GPU ordinal
  // exec / exec-worker backends (issue 8)
  double exec_timeout_s = 60.0;             // --exec-timeout: per case (worker: per answer)
  bool exec_worker = false;                 // --exec-worker: exec:CMD speaks the worker protocol
  bool keep_temp = false;                   // --keep: keep each case's exec directory
  // Backend-specific knobs by name (serving numerics, issue 9: decode, splits, split-size,
  // page-size, kv-format, kv-scale, p-format, ...). The emu backend takes all of them; the
  // cuda backend runs its split-KV decode kernel for `decode` (docs/gpu.md).
  std::map<std::string, std::string> knobs;
  // The kernel reads per-sequence lengths (a ragged batch, attention_case::seq_lens): exec and
  // exec-worker kernels from case.json's "seq_lens", Python kernels from case["seq_lens"].
  // Backends that take ragged batches natively (emu, ref, cuda/hip --decode) need no flag.
  bool ragged = false;
};

class attention_provider {
 public:
  virtual ~attention_provider() = default;
  // Short name with the non-default settings, e.g. "emu[tile=64x64,inject=skip-rescale]".
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual tile_shape tiles() const = 0;
  // Whether the kernel computes only the requested rows (CPU emulations) or always all rows
  // (GPU kernels, which then return the requested subset).
  [[nodiscard]] virtual bool computes_row_subsets() const { return true; }
  // Whether run() takes a ragged batch (attention_case::seq_lens). A provider that does not is
  // never given one: make_attention_provider's wrapper refuses such a case (unsupported_case)
  // before the kernel sees it, so no kernel reads padding as keys by accident.
  [[nodiscard]] virtual bool takes_ragged() const { return false; }
  // O and LSE for the given flat rows. Implementations must write every element they return.
  [[nodiscard]] virtual attention_output run(const attention_inputs& in,
                                             std::span<const std::int64_t> rows) = 0;
  // Device and build facts that can change numerics (vendor, arch, warp width, exp impl...).
  [[nodiscard]] virtual nlohmann::json metadata() const { return nlohmann::json::object(); }
};

using attention_provider_factory =
    std::unique_ptr<attention_provider> (*)(const provider_options& opts);

// Registry keyed by backend name (the part before ':' for plugin:/exec:). Registration is one
// line in providers/registry.cpp.
void register_attention_provider(const std::string& name, attention_provider_factory f,
                                 const std::string& description);
// Throws an input error (unknown backend) or a backend error (compiled out / no device).
[[nodiscard]] std::unique_ptr<attention_provider> make_attention_provider(const provider_options& o);

[[nodiscard]] std::vector<backend_info> attention_backends();

}  // namespace numprobe
