// The built-in default scenario: a copy of scenarios/default.toml, embedded so that `numprobe run`
// works from any directory. tests/scenario keeps it identical to the shipped file (edit the
// .toml, then paste it here).
#include "src/scenario/scenario.hpp"

namespace numprobe::scenario {

std::string_view default_scenario_text() {
  static constexpr std::string_view text = R"toml(# The built-in default scenario: what `numprobe run` with no argument runs. It is embedded in the
# binary (src/scenario/default_scenario.cpp; a test keeps the two identical), so it works from
# any directory. Inputs are generated from seeds: no files needed. Runtime: well under 30 s on
# two CPU cores with the emulator.
title = "numprobe default"
description = "Healthy-kernel acceptance: attention vs the reference and the naive baseline, drift across tile boundaries, and fp4/fp8 quantization."

[defaults]
backend = "best"   # cuda, else hip, else the CPU emulator
seed = 7

[[check]]
name = "attention-bf16-causal-gqa"
probe = "attention"
seq = 1024
heads = 8
kv_heads = 2
head_dim = 64
dtype = "bf16"
mask = "causal"
rows = "256"
bounds = [
  { expr = "ratio_to_naive<=2", basis = "FlashAttention's acceptance test: within 2x of the same-precision naive baseline" },
  { expr = "rel_rms<=1.6e-2", basis = "4 x bf16 unit roundoff (2^-9 = 1.95e-3) x 2 for the three roundings of S, P, O" },
]

[[check]]
name = "attention-f16-window"
probe = "attention"
seq = 777
queries = 200
heads = 4
kv_heads = 4
head_dim = 64
dtype = "f16"
mask = "window"
window = 129
dist = "llm"
bounds = [
  { expr = "ratio_to_naive<=2", basis = "FlashAttention's acceptance test: within 2x of the same-precision naive baseline" },
]

[[check]]
name = "drift-bf16-causal"
probe = "drift"
seq = "64..2048"
heads = 4
kv_heads = 2
head_dim = 64
dtype = "bf16"
mask = "causal"
dist = "diffuse"
rows = "32"
bounds = [
  { expr = "growth.slope<=0.25", basis = "correctly held state gives a flat error; 0.25 separates flat from a trend (NUMERICS.md)" },
  { expr = "ratio_to_naive<=2", basis = "FlashAttention's acceptance test, at every length" },
]

[[check]]
name = "quant-nvfp4-llm"
probe = "quant"
scheme = "nvfp4"
dist = "llm"
shape = "256x1024"
bounds = [
  { expr = "sqnr_db>=15", basis = "fp4 e2m1 with 16-element e4m3 scales gives ~20 dB on LLM activations; 15 dB leaves 5 dB of margin" },
  { expr = "nonfinite<=0", basis = "saturating fp4 never produces NaN/Inf" },
]

[[check]]
name = "quant-mxfp8-llm"
probe = "quant"
scheme = "mxfp8"
dist = "llm"
shape = "256x1024"
bounds = [
  { expr = "sqnr_db>=25", basis = "e4m3 has 3 mantissa bits (~31 dB on Gaussian data); MX power-of-two scales cost up to 6 dB" },
]
)toml";
  return text;
}

}  // namespace numprobe::scenario
