// Names and settings of the emulated kernel: fault and state names round-trip, bad names are
// input errors (exit 2) naming the flag, and describe() lists exactly the non-default settings.
#include <gtest/gtest.h>

#include <set>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/flash_attention.hpp"

namespace numprobe::emu {
namespace {

using formats::format_id;

TEST(emu_config, fault_names_round_trip_and_are_distinct) {
  std::set<std::string_view> names;
  for (fault f : all_faults()) {
    EXPECT_EQ(parse_fault(to_string(f)), f);
    names.insert(to_string(f));
  }
  // Every name distinct: 8 prefill faults (issue 2) and 6 decode/FP8 faults (issue 9).
  EXPECT_EQ(names.size(), all_faults().size());
  for (const char* n : {"skip-rescale", "stale-max", "rowsum-bf16", "acc-bf16", "mask-top-left",
                        "no-empty-guard", "drop-tail-tile", "finite-sentinel", "merge-nan-empty",
                        "lse-base2-merge", "split-tail-drop", "kv-scale-ignored", "p-no-prescale",
                        "acc-no-promotion"})
    EXPECT_TRUE(names.contains(n)) << n;
}

TEST(emu_config, unknown_fault_is_an_input_error_naming_the_flag) {
  try {
    (void)parse_fault("skip-rescal", "--inject");
    FAIL() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_EQ(e.place(), "--inject");
    EXPECT_NE(std::string(e.what()).find("skip-rescale"), std::string::npos);  // lists known names
  }
}

TEST(emu_config, states_set_get_round_trip) {
  state_dtypes st = default_states(format_id::m_bf16);
  EXPECT_EQ(state_names().size(), 10u);
  const format_id choices[] = {format_id::m_f64, format_id::m_f16};
  for (format_id f : choices)
    for (std::string_view n : state_names()) {
      set_state(st, n, f);
      EXPECT_EQ(get_state(st, n), f) << n;
    }
  EXPECT_THROW(set_state(st, "acc", format_id::m_f32), error);
  EXPECT_THROW((void)get_state(st, "acc"), error);
}

TEST(emu_config, defaults_model_a_bf16_kernel) {
  const state_dtypes st = default_states(format_id::m_bf16);
  EXPECT_EQ(st.q, format_id::m_bf16);
  EXPECT_EQ(st.p, format_id::m_bf16);
  EXPECT_EQ(st.out, format_id::m_bf16);
  EXPECT_EQ(st.s, format_id::m_f32);
  EXPECT_EQ(st.l, format_id::m_f32);
  EXPECT_EQ(st.o, format_id::m_f32);
  EXPECT_EQ(default_states(format_id::m_e4m3fn).out, format_id::m_bf16);
}

TEST(emu_config, describe_lists_only_non_default_settings) {
  flash_config cfg;
  EXPECT_EQ(cfg.describe(format_id::m_bf16), "emu[tile=64x64]");
  cfg.tile_k = 128;
  set_state(cfg.states, "l", format_id::m_bf16);
  cfg.exp2 = false;
  cfg.faults = {fault::m_skip_rescale, fault::m_drop_tail_tile};
  EXPECT_EQ(cfg.describe(format_id::m_bf16),
            "emu[tile=64x128,l=bf16,exp=exp,inject=skip-rescale+drop-tail-tile]");
  EXPECT_TRUE(cfg.has(fault::m_drop_tail_tile));
  EXPECT_FALSE(cfg.has(fault::m_stale_max));
}

TEST(emu_config, bad_tile_is_an_input_error) {
  attention_case c;
  c.seq = 8;
  c.heads = 1;
  c.kv_heads = 1;
  c.head_dim = 4;
  const attention_inputs in(c, false);
  flash_config cfg;
  cfg.tile_k = 0;
  const std::int64_t rows[] = {0};
  try {
    (void)flash_forward(in, cfg, rows);
    FAIL() << "no error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), exit_code::m_input);
    EXPECT_EQ(e.place(), "--tile");
  }
  cfg.tile_k = 4;
  const std::int64_t bad_rows[] = {8};
  EXPECT_THROW((void)flash_forward(in, cfg, bad_rows), error);
}

}  // namespace
}  // namespace numprobe::emu
