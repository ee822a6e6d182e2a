// `--backend cuda --decode` through the plugin ABI (numprobe_attention_decode_variant of the
// built-in kernel table) against the direct launch of the same kernels: bit for bit, for every
// knob (split count and split size, e4m3fn KV per tensor and per KV head, FP8 P with a
// prescale, accumulator promotion, causal/top-left/window masks with T > 1, each decode fault),
// on seeded random inputs whose lengths cross the key tile (128) and the split boundaries.
//
// Basis of "bit for bit": the two paths launch the same kernels (flash_decode.cuh, compiled with
// the same flags into one library) on the same device buffers with the same parameters, so any
// difference, even one ulp, is a wiring bug (a knob dropped or changed on the way through the
// ABI). Outputs and the split workspace are poisoned (NaN) before each launch by the host side,
// and each result must be free of NaN (unless the case injects empty-split-nan), so an element
// the ABI path failed to write cannot pass. Where a knob changes the result, the test also
// checks that it does (against the same case without it), so a knob ignored by both paths
// cannot pass either.
//
// The ABI entry's own refusals and the decode's input errors run without a device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/kernels/gpu/builtin_kernel_table.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/providers/gpu_decode_knobs.hpp"
#include "src/providers/host_dtype.hpp"
#include "src/providers/plugin_buffers.hpp"
#include "src/providers/plugin_library.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace numprobe::gpu::testing {
namespace {

struct abi_case {
  std::int64_t batch = 1, t = 1, s = 0, hq = 8, hkv = 2, d = 128;
  bool fp16 = false;
  attention_mask mask = attention_mask::m_none;
  std::int64_t window = 0;
  int splits = 4;
  std::int64_t split_size = 0;
  kv_format kv = kv_format::m_input;
  bool p_e4m3 = false;
  float p_prescale = 1.f;
  int acc_promote = 0;
  std::uint32_t faults = k_fault_none;
  bool knob_visible = false;  // the knobs beyond splits/mask change the result on these inputs

  [[nodiscard]] std::string id() const {
    static const char* masks[] = {"none", "causal", "causal_top_left", "window"};
    std::string s_id = fmt::format("decode_abi(B={},T={},S={},Hq={},Hkv={},D={},in={},mask={}", batch, t, s, hq,
                                   hkv, d, fp16 ? "f16" : "bf16", masks[static_cast<int>(mask)]);
    if (mask == attention_mask::m_window) s_id += fmt::format(",W={}", window);
    s_id += split_size > 0 ? fmt::format(",split_size={}", split_size) : fmt::format(",splits={}", splits);
    if (kv != kv_format::m_input) s_id += kv == kv_format::m_e4m3_head ? ",kv=e4m3fn_head" : ",kv=e4m3fn_tensor";
    if (p_e4m3) s_id += fmt::format(",p=e4m3fn,prescale={}", p_prescale);
    if (acc_promote > 0) s_id += fmt::format(",acc_promote={}", acc_promote);
    if (faults != 0) s_id += ",inject=" + kernels::fault_names(kernels::k_gpu_decode, faults);
    return s_id + ")";
  }
  // The same case without the knobs beyond splits and the mask.
  [[nodiscard]] abi_case plain() const {
    abi_case c = *this;
    c.kv = kv_format::m_input;
    c.p_e4m3 = false;
    c.p_prescale = 1.f;
    c.acc_promote = 0;
    c.faults = k_fault_none;
    return c;
  }
};

// Seeded by the case's shape (FNV-1a of the id without knobs): the same inputs for a case and
// its plain() twin, reproducible anywhere.
struct abi_inputs {
  std::vector<float> q, k, v;
  std::vector<std::uint8_t> k8, v8;
  std::vector<float> ks, vs;
};

abi_inputs make_inputs(const abi_case& c) {
  std::uint64_t seed = 1469598103934665603ull;
  for (const char ch : c.plain().id()) seed = (seed ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  std::mt19937_64 g(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  const formats::format_id dt = c.fp16 ? formats::format_id::m_f16 : formats::format_id::m_bf16;
  const auto fill = [&](std::vector<float>& x, std::int64_t count) {
    x.resize(static_cast<std::size_t>(count));
    for (float& e : x) e = static_cast<float>(decode16(dt, encode16(dt, n(g))));  // exact in the dtype
  };
  abi_inputs in;
  fill(in.q, c.batch * c.t * c.hq * c.d);
  fill(in.k, c.batch * c.s * c.hkv * c.d);
  fill(in.v, c.batch * c.s * c.hkv * c.d);
  if (c.kv != kv_format::m_input) {
    const bool per_head = c.kv == kv_format::m_e4m3_head;
    const auto nkv = static_cast<std::int64_t>(in.k.size());
    quantize_kv_e4m3(in.k.data(), nkv, c.hkv, c.d, per_head, in.k8, in.ks);
    quantize_kv_e4m3(in.v.data(), nkv, c.hkv, c.d, per_head, in.v8, in.vs);
  }
  return in;
}

const numprobe_kernel_table& table() { return cuda_builtin_kernel_table(); }

decode_request request(const abi_case& c, const abi_inputs& in, bool through_abi) {
  decode_request r;
  r.batch = c.batch;
  r.t = c.t;
  r.s = c.s;
  r.hq = c.hq;
  r.hkv = c.hkv;
  r.d = c.d;
  r.fp16 = c.fp16;
  r.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  r.mask = c.mask;
  r.window = c.window;
  r.splits = c.splits;
  r.split_size = c.split_size;
  r.faults = c.faults;
  r.p_e4m3 = c.p_e4m3;
  r.p_prescale = c.p_prescale;
  r.acc_promote = c.acc_promote;
  r.kv = c.kv;
  r.q = in.q.data();
  r.k = in.k.data();
  r.v = in.v.data();
  if (c.kv != kv_format::m_input) {
    r.k8 = in.k8.data();
    r.v8 = in.v8.data();
    r.k_scale = in.ks.data();
    r.v_scale = in.vs.data();
  }
  if (through_abi) {
    r.abi_decode = table().decode_variant;
    r.abi_last_error = table().last_error;
  }
  return r;
}

// Index of the first element whose bits differ, or -1.
std::int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

bool same_bits(const decode_result& a, const decode_result& b) {
  return first_difference(a.o, b.o) < 0 && first_difference(a.lse, b.lse) < 0 &&
         first_difference(a.split_lse, b.split_lse) < 0;
}

std::size_t nans(const std::vector<float>& x) {
  std::size_t n = 0;
  for (float e : x) n += std::isnan(e) ? 1 : 0;
  return n;
}

// numprobe_decode_params of B sequences of T queries over an [B, S, Hkv, D] bf16 cache at the
// given pointers (device memory, or never dereferenced); o and lse f32.
struct decode_pointers {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* seq_lens = nullptr;
  void* o = nullptr;
  void* lse = nullptr;
};
numprobe_decode_params decode_params(std::int64_t B, std::int64_t T, std::int64_t S, std::int64_t hq,
                                     std::int64_t hkv, std::int64_t d, const decode_pointers& ptr) {
  numprobe_decode_params a{};
  a.struct_size = sizeof(a);
  a.batch = B;
  a.max_seq = S;
  a.heads = hq;
  a.kv_heads = hkv;
  a.head_dim = d;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  a.q = plugin::dense(ptr.q, NUMPROBE_DTYPE_BF16, {B * T, hq, d});
  a.k = plugin::dense(ptr.k, NUMPROBE_DTYPE_BF16, {B, S, hkv, d});
  a.v = plugin::dense(ptr.v, NUMPROBE_DTYPE_BF16, {B, S, hkv, d});
  a.seq_lens = plugin::dense(ptr.seq_lens, NUMPROBE_DTYPE_I32, {B});
  a.o = plugin::dense(ptr.o, NUMPROBE_DTYPE_F32, {B * T, hq, d});
  a.lse = plugin::dense(ptr.lse, NUMPROBE_DTYPE_F32, {B * T, hq});
  a.memory = NUMPROBE_MEMORY_CUDA;
  return a;
}

class gpu_decode_abi : public ::testing::TestWithParam<abi_case> {};

TEST_P(gpu_decode_abi, equals_the_direct_launch_bit_for_bit) {
  NUMPROBE_REQUIRE_GPU();
  const abi_case& c = GetParam();
  const abi_inputs in = make_inputs(c);
  const decode_api& api = cuda_decode_api();
  const decode_result direct = api.decode(request(c, in, false));
  const decode_result abi = api.decode(request(c, in, true));
  ASSERT_EQ(abi.o.size(), direct.o.size());
  ASSERT_EQ(abi.lse.size(), direct.lse.size());
  ASSERT_EQ(abi.split_lse.size(), direct.split_lse.size());
  EXPECT_EQ(first_difference(direct.o, abi.o), -1) << c.id() << ": O";
  EXPECT_EQ(first_difference(direct.lse, abi.lse), -1) << c.id() << ": LSE";
  EXPECT_EQ(first_difference(direct.split_lse, abi.split_lse), -1) << c.id() << ": split LSE";
  // Every element written over the poison (the fault's NaN is the only NaN allowed).
  if ((c.faults & k_fault_empty_split_nan) == 0) {
    EXPECT_EQ(nans(abi.o), 0u) << c.id();
    EXPECT_EQ(nans(abi.lse), 0u) << c.id();
  }
  EXPECT_EQ(nans(abi.split_lse), 0u) << c.id();
  if (c.knob_visible) {
    const abi_case p = c.plain();
    const decode_result plain = api.decode(request(p, make_inputs(p), true));
    EXPECT_FALSE(same_bits(plain, abi)) << c.id() << ": the knobs did not change the result";
  }
}

std::vector<abi_case> abi_cases() {
  std::vector<abi_case> out;
  const auto add = [&](abi_case c) { out.push_back(c); };
  // Split counts across the key tile and split boundaries; splits > S leaves empty splits.
  for (std::int64_t s : {1, 5, 127, 128, 129, 1000, 4097})
    for (int splits : {1, 3, 16}) add({.batch = 2, .t = 1, .s = s, .splits = splits});
  // Split sizes: chunks of 128 (S = 256, 257: one key past a split) and of 100 (not a tile).
  for (std::int64_t s : {256, 257, 999})
    for (std::int64_t size : {100, 128})
      add({.t = 2, .s = s, .mask = attention_mask::m_causal, .split_size = size});
  // T > 1 with bottom-right causal, top-left causal and sliding windows.
  for (std::int64_t t : {3, 8})
    for (std::int64_t s : {5, 129, 1000}) add({.batch = 2, .t = t, .s = s, .mask = attention_mask::m_causal});
  add({.t = 4, .s = 129, .mask = attention_mask::m_causal_top_left, .splits = 3});
  for (std::int64_t t : {2, 8})
    for (std::int64_t s : {129, 1000})
      for (std::int64_t w : {1, 100})
        add({.t = t, .s = s, .mask = attention_mask::m_window, .window = w, .splits = 5});
  // fp16 inputs.
  add({.batch = 2, .t = 3, .s = 1000, .fp16 = true, .mask = attention_mask::m_causal, .splits = 7});
  // e4m3fn KV, per tensor and per KV head.
  for (kv_format kv : {kv_format::m_e4m3_tensor, kv_format::m_e4m3_head})
    for (std::int64_t s : {129, 1025})
      add({.batch = 2, .t = 4, .s = s, .mask = attention_mask::m_causal, .splits = 7, .kv = kv, .knob_visible = true});
  // FP8 P with and without a prescale, one split and several.
  for (float prescale : {1.f, 448.f})
    for (int splits : {1, 3})
      add({.t = 4, .s = 1000, .mask = attention_mask::m_causal, .splits = splits, .p_e4m3 = true,
           .p_prescale = prescale, .knob_visible = true});
  // Accumulator promotion, with FP8 P and alone.
  for (int promote : {2, 4})
    add({.t = 4, .s = 2049, .mask = attention_mask::m_causal, .splits = 1, .p_e4m3 = true,
         .p_prescale = 448.f, .acc_promote = promote, .knob_visible = true});
  add({.t = 2, .s = 1000, .fp16 = true, .splits = 3, .acc_promote = 3, .knob_visible = true});
  // Each decode fault where it shows: gqa-mod with Hq/Hkv > 1; index-wrap past 2^15 keys;
  // empty-split-nan with a row whose splits are partly empty.
  add({.batch = 2, .t = 2, .s = 300, .mask = attention_mask::m_causal, .faults = k_fault_gqa_mod, .knob_visible = true});
  add({.s = 33000, .hq = 4, .hkv = 1, .d = 64, .splits = 4, .faults = k_fault_index_wrap, .knob_visible = true});
  add({.s = 5, .splits = 16, .faults = k_fault_empty_split_nan, .knob_visible = true});
  add({.t = 4, .s = 20, .mask = attention_mask::m_causal, .splits = 8, .faults = k_fault_empty_split_nan,
       .knob_visible = true});
  // Everything at once.
  add({.batch = 2, .t = 8, .s = 1000, .fp16 = true, .mask = attention_mask::m_window, .window = 300,
       .split_size = 128, .kv = kv_format::m_e4m3_head, .p_e4m3 = true, .p_prescale = 448.f, .acc_promote = 2,
       .faults = k_fault_gqa_mod | k_fault_index_wrap, .knob_visible = true});
  return out;
}
INSTANTIATE_TEST_SUITE_P(cases, gpu_decode_abi, ::testing::ValuesIn(abi_cases()),
                         [](const ::testing::TestParamInfo<abi_case>& i) { return sanitize(i.param.id()); });

// The provider (what `--backend cuda --decode` runs) loads the table's decode entry and gives
// the direct launch's numbers.
TEST(gpu_decode_abi_provider, loads_the_entry_and_matches_the_direct_launch) {
  NUMPROBE_REQUIRE_GPU();
  plugin::library lib(table(), "built-in cuda kernels", 0);
  EXPECT_NE(lib.caps().caps.features & NUMPROBE_FEATURE_DECODE_VARIANTS, 0u);
  EXPECT_EQ(lib.decode_variant(), table().decode_variant);
}

// Sequences of different lengths (seq_lens on the device): the entry launches each sequence
// alone over its own keys, and each equals the direct decode of that sequence alone, bit for
// bit (chunks of split_size keys in both, so the ABI's extra splits past a short sequence are
// empty, and the merge skips empty splits); a sequence of no keys gives O = 0, LSE = -inf.
TEST(gpu_decode_abi_lengths, each_sequence_equals_its_direct_decode) {
  NUMPROBE_REQUIRE_GPU();
  const std::int64_t B = 3, T = 2, S = 300, hq = 8, hkv = 2, d = 64, split = 100;
  const std::vector<std::int32_t> lens = {300, 129, 0};
  const abi_case shape{.batch = B, .t = T, .s = S, .hq = hq, .hkv = hkv, .d = d};
  const abi_inputs in = make_inputs(shape);
  const formats::format_id bf16 = formats::format_id::m_bf16;
  std::vector<std::uint16_t> q16, k16, v16;
  encode16_all(bf16, std::vector<double>(in.q.begin(), in.q.end()), q16);
  encode16_all(bf16, std::vector<double>(in.k.begin(), in.k.end()), k16);
  encode16_all(bf16, std::vector<double>(in.v.begin(), in.v.end()), v16);
  const device_memory_api& dm = cuda_device_memory_api();
  struct device_copy {
    const device_memory_api& dm;
    void* ptr;
    device_copy(const device_memory_api& m, const void* host, std::size_t bytes) : dm(m), ptr(m.alloc(0, bytes)) {
      if (host) dm.copy_to_device(ptr, host, bytes);
      else dm.fill(ptr, 0xFF, bytes);  // an output: poisoned
    }
    device_copy(const device_copy&) = delete;
    device_copy& operator=(const device_copy&) = delete;
    ~device_copy() { dm.release(ptr); }
  };
  const std::int64_t no = B * T * hq * d, nl = B * T * hq;
  const device_copy q(dm, q16.data(), q16.size() * 2), k(dm, k16.data(), k16.size() * 2),
      v(dm, v16.data(), v16.size() * 2), sl(dm, lens.data(), lens.size() * 4), o(dm, nullptr, no * 4),
      lse(dm, nullptr, nl * 4);
  numprobe_decode_params a =
      decode_params(B, T, S, hq, hkv, d, {.q = q.ptr, .k = k.ptr, .v = v.ptr, .seq_lens = sl.ptr, .o = o.ptr, .lse = lse.ptr});
  numprobe_decode_variant var{};
  var.struct_size = sizeof(var);
  var.queries = T;
  var.mask = NUMPROBE_MASK_CAUSAL;
  var.split_size = split;
  var.p_e4m3 = 1;
  var.p_prescale = 448.f;
  ASSERT_EQ(table().decode_variant(&a, &var), NUMPROBE_STATUS_OK) << table().last_error();
  dm.synchronize(nullptr);
  std::vector<float> o_abi(static_cast<std::size_t>(no)), lse_abi(static_cast<std::size_t>(nl));
  dm.copy_to_host(o_abi.data(), o.ptr, o_abi.size() * 4);
  dm.copy_to_host(lse_abi.data(), lse.ptr, lse_abi.size() * 4);
  const std::size_t rows_o = static_cast<std::size_t>(T * hq * d), rows_l = static_cast<std::size_t>(T * hq);
  for (std::size_t b = 0; b < lens.size(); ++b) {
    const std::vector<float> ob(o_abi.begin() + b * rows_o, o_abi.begin() + (b + 1) * rows_o);
    const std::vector<float> lb(lse_abi.begin() + b * rows_l, lse_abi.begin() + (b + 1) * rows_l);
    if (lens[b] == 0) {
      for (float x : ob) EXPECT_EQ(x, 0.f) << "sequence " << b;
      for (float x : lb) EXPECT_TRUE(std::isinf(x) && x < 0) << "sequence " << b;
      continue;
    }
    abi_case one{.t = T, .s = lens[b], .hq = hq, .hkv = hkv, .d = d, .mask = attention_mask::m_causal,
                 .split_size = split, .p_e4m3 = true, .p_prescale = 448.f};
    abi_inputs mine;
    mine.q.assign(in.q.begin() + b * rows_o, in.q.begin() + (b + 1) * rows_o);
    const std::size_t cache = static_cast<std::size_t>(S * hkv * d), used = static_cast<std::size_t>(lens[b] * hkv * d);
    mine.k.assign(in.k.begin() + b * cache, in.k.begin() + b * cache + used);
    mine.v.assign(in.v.begin() + b * cache, in.v.begin() + b * cache + used);
    const decode_result direct = cuda_decode_api().decode(request(one, mine, false));
    EXPECT_EQ(first_difference(direct.o, ob), -1) << "sequence " << b;
    EXPECT_EQ(first_difference(direct.lse, lb), -1) << "sequence " << b;
  }
}

// ------------------------------------------------------------------ without a device

// The decode's input errors come from the host side before any launch, so both paths give the
// same exit code, flag and text.
TEST(gpu_decode_abi_refusals, input_errors_are_the_direct_paths) {
  abi_case base{.t = 2, .s = 300};
  std::vector<abi_case> bad;
  bad.push_back(base);
  bad.back().splits = 0;
  bad.push_back(base);
  bad.back().t = 9;
  bad.push_back(base);
  bad.back().split_size = -1;
  bad.push_back(base);
  bad.back().mask = attention_mask::m_window;  // W = 0
  bad.push_back(base);
  bad.back().faults = k_fault_skip_rescale;  // a forward fault
  bad.push_back(base);
  bad.back().p_e4m3 = true;
  bad.back().p_prescale = 0.f;
  bad.push_back(base);
  bad.back().d = 512;
  for (const abi_case& c : bad) {
    const abi_inputs in = make_inputs(c);
    std::string what[2];
    for (int abi = 0; abi < 2; ++abi) {
      try {
        (void)cuda_decode_api().decode(request(c, in, abi == 1));
        ADD_FAILURE() << c.id() << " accepted";
      } catch (const error& e) {
        EXPECT_EQ(e.code(), exit_code::m_input) << e.what();
        what[abi] = std::string(e.place()) + ": " + e.what();
      }
    }
    EXPECT_EQ(what[0], what[1]) << c.id();
  }
}

// numprobe_attention_decode_variant refuses what its kernels do not have, with a status and a
// message, before touching the device (the pointers below are never dereferenced).
TEST(gpu_decode_abi_refusals, the_entry_refuses_unknown_bits_and_combinations) {
  static float dummy[1];
  const std::int64_t T = 2;
  numprobe_decode_params p = decode_params(2, T, 300, 8, 2, 64, {.q = dummy, .k = dummy, .v = dummy, .o = dummy, .lse = dummy});
  p.num_splits = 4;
  numprobe_decode_variant v{};
  v.struct_size = sizeof(v);
  v.queries = T;
  struct refusal {
    const char* what;
    int status;
    const char* message;  // a part of numprobe_kernel_last_error()
    void (*edit)(numprobe_decode_params&, numprobe_decode_variant&);
  };
  const refusal cases[] = {
      {"small variant", NUMPROBE_STATUS_INVALID, "numprobe_decode_variant is smaller",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.struct_size = 8; }},
      {"forward fault", NUMPROBE_STATUS_UNSUPPORTED, "gqa-mod",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.variant = k_fault_skip_rescale; }},
      {"unknown bit", NUMPROBE_STATUS_UNSUPPORTED, "no decode fault",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.variant = 1u << 31; }},
      {"kv storage", NUMPROBE_STATUS_UNSUPPORTED, "unknown kv_storage",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.kv_storage = 7; }},
      {"e4m3 storage of bf16 k", NUMPROBE_STATUS_UNSUPPORTED, "e4m3fn codes",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.kv_storage = NUMPROBE_KV_E4M3FN_TENSOR; }},
      {"T = 9", NUMPROBE_STATUS_UNSUPPORTED, "T = 1..8",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.queries = 9; }},
      {"mask", NUMPROBE_STATUS_UNSUPPORTED, "unknown mask",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.mask = 9; }},
      {"window 0", NUMPROBE_STATUS_INVALID, "W >= 1",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.mask = NUMPROBE_MASK_WINDOW; }},
      {"splits against split_size", NUMPROBE_STATUS_INVALID, "ceil(max_seq / split_size)",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.split_size = 100; }},
      {"p prescale", NUMPROBE_STATUS_INVALID, "p_prescale",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.p_e4m3 = 1; }},
      {"acc mantissa", NUMPROBE_STATUS_INVALID, "acc_mantissa",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.acc_promote = 2; }},
      {"split_lse shape", NUMPROBE_STATUS_UNSUPPORTED, "split_lse",
       [](numprobe_decode_params&, numprobe_decode_variant& x) {
         x.split_lse.data = dummy;
         x.split_lse.dtype = NUMPROBE_DTYPE_F32;
         x.split_lse.ndim = 1;
       }},
      {"softcap", NUMPROBE_STATUS_UNSUPPORTED, "softcap",
       [](numprobe_decode_params& a, numprobe_decode_variant&) { a.softcap = 30.0; }},
      {"host memory", NUMPROBE_STATUS_INVALID, "device pointers",
       [](numprobe_decode_params& a, numprobe_decode_variant&) { a.memory = NUMPROBE_MEMORY_HOST; }},
      {"q rows without T", NUMPROBE_STATUS_UNSUPPORTED, "dense",
       [](numprobe_decode_params&, numprobe_decode_variant& x) { x.queries = 1; }},
  };
  for (const refusal& r : cases) {
    numprobe_decode_params a = p;
    numprobe_decode_variant x = v;
    r.edit(a, x);
    EXPECT_EQ(table().decode_variant(&a, &x), r.status) << r.what;
    const std::string msg = table().last_error();
    EXPECT_NE(msg.find(r.message), std::string::npos) << r.what << ": " << msg;
  }
  EXPECT_EQ(table().decode_variant(&p, nullptr), NUMPROBE_STATUS_INVALID);
  EXPECT_EQ(table().decode_variant(nullptr, &v), NUMPROBE_STATUS_INVALID);
}

}  // namespace
}  // namespace numprobe::gpu::testing
