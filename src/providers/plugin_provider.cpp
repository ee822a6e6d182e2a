#include "src/providers/plugin_provider.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/kernel_abi.h"
#include "src/providers/knobs.hpp"
#include "src/providers/plugin_buffers.hpp"
#include "src/providers/plugin_library.hpp"
#include "src/providers/plugin_worker.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

using plugin::abi_mask;
using plugin::dense;
using plugin::dtype_list;
using plugin::dtype_bytes;
using plugin::dtype_name;
using plugin::host_tensor;

class plugin_provider final : public attention_provider {
 public:
  plugin_provider(const provider_options& o, bool isolated) : m_device(o.device), m_isolated(isolated) {
    const backend_spec spec = parse_backend_spec(o.backend);
    if (spec.arg.empty())
      throw_input_error("--backend " + spec.kind, fmt::format("expected {}:PATH to a shared library", spec.kind));
    m_path = spec.arg;
    if (!o.faults.empty()) throw_input_error("--inject", "a plugin backend has no injectable faults");
    if (!o.states.empty()) throw_input_error("--state", "a plugin backend has no state dtypes");
    if (isolated && !(o.exec_timeout_s > 0))
      throw_input_error("--exec-timeout", "must be a positive number of seconds");
    parse_knobs(o);
    if (isolated) {
      m_worker = std::make_unique<plugin::worker_client>(m_path, m_device, o.exec_timeout_s);
      m_info = m_worker->load();
    } else {
      m_library = std::make_unique<plugin::library>(m_path, m_device);
      m_info = m_library->caps();
    }
    m_caps = m_info.caps;
    if (m_caps.tile_q > 0 && m_caps.tile_k > 0) m_tiles = {m_caps.tile_q, m_caps.tile_k};
    if (o.tile) m_tiles = *o.tile;
    if (m_decode_on && !(m_caps.ops & NUMPROBE_OP_DECODE))
      throw_input_error(place("numprobe_attention_decode"),
                        fmt::format("--decode needs a plugin offering split-KV decode "
                                    "(NUMPROBE_OP_DECODE); '{}' offers attention forward only",
                                    caps_name()));
  }

  std::string name() const override {
    return fmt::format("{}[{}, {}]", m_isolated ? "plugin" : "plugin-inproc", caps_name(), m_path);
  }
  tile_shape tiles() const override { return m_tiles; }
  bool computes_row_subsets() const override { return false; }

  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    const attention_case& c = in.c();
    if (m_decode_on) return run_decode(in, rows);
    const char* fn = "numprobe_attention_forward";
    // Input buffers: the case's own dtype when it is bf16/f16 and the plugin takes it (stored
    // as is, as a GPU kernel reads it); else f64 for f64 cases, f32 for every other case (values
    // exact in the case's dtype: every format numprobe generates is a subset of f32), or f64
    // when the plugin takes f64 only.
    // Plain variables, not a structured binding: lambdas below capture them (clang before 16
    // refuses to capture structured bindings).
    const dtypes picked = pick_dtypes(c, fn);
    const int in_dtype = picked.in, out_dtype = picked.out, native = picked.native;
    (void)native;
    const int mask = abi_mask(c.mask);
    if (mask < 0 || !(m_caps.masks & (1u << mask)))
      unsupported(fn, fmt::format("mask {}", to_string(c.mask)));
    if (m_caps.max_head_dim > 0 && c.head_dim > m_caps.max_head_dim)
      unsupported(fn, fmt::format("head_dim {} (max {})", c.head_dim, m_caps.max_head_dim));
    if (c.softcap > 0 && !(m_caps.features & NUMPROBE_FEATURE_SOFTCAP))
      unsupported(fn, "softcap");
    if (c.batch > 1 && !(m_caps.features & NUMPROBE_FEATURE_BATCH)) unsupported(fn, "batch > 1");

    const std::int64_t bt = c.batch * c.t(), bs = c.batch * c.seq;
    const std::vector<double> q = in.q_all();
    host_tensor qh(in_dtype, q), kh(in_dtype, in.k()), vh(in_dtype, in.v());
    const auto o_elems = static_cast<std::size_t>(bt * c.heads * c.head_dim);
    // Poisoned: an element the plugin does not write reads NaN, never a plausible value.
    host_tensor oh(out_dtype, o_elems);
    const bool want_lse = m_caps.features & NUMPROBE_FEATURE_LSE;
    std::vector<float> lsef(want_lse ? static_cast<std::size_t>(bt * c.heads) : 0, std::nanf(""));

    numprobe_attention_params p{};
    p.struct_size = sizeof(p);
    p.batch = c.batch;
    p.queries = c.t();
    p.seq = c.seq;
    p.heads = c.heads;
    p.kv_heads = c.kv_heads;
    p.head_dim = c.head_dim;
    p.scale = c.softmax_scale();
    p.softcap = c.softcap;
    p.mask = static_cast<numprobe_mask>(mask);  // checked above: an enumerator
    p.window = c.window;
    p.case_dtype = in_dtype;
    p.q = dense(qh.data(), in_dtype, {bt, c.heads, c.head_dim});
    p.k = dense(kh.data(), in_dtype, {bs, c.kv_heads, c.head_dim});
    p.v = dense(vh.data(), in_dtype, {bs, c.kv_heads, c.head_dim});
    p.o = dense(oh.data(), out_dtype, {bt, c.heads, c.head_dim});
    p.lse = dense(want_lse ? lsef.data() : nullptr, NUMPROBE_DTYPE_F32, {bt, c.heads});
    p.memory = m_caps.memory;
    p.device = m_device;
    p.stream = nullptr;
    plugin::call call;
    call.forward = p;
    call.regions = {{qh.data(), qh.bytes(), false}, {kh.data(), kh.bytes(), false},
                    {vh.data(), vh.bytes(), false}, {oh.data(), oh.bytes(), true}};
    if (want_lse) call.regions.push_back({lsef.data(), lsef.size() * sizeof(float), true});
    const plugin::call_result r = invoke(call, fn, c.id());
    check_status(fn, r, c.id());

    return gather_rows(c, rows, oh, lsef, want_lse);
  }

  nlohmann::json metadata() const override {
    return {{"plugin", m_path},
            {"name", m_info.name},
            {"description", m_info.description},
            {"isolation", m_isolated ? "worker process (time limit --exec-timeout per call)" : "in-process"},
            {"worker_starts", m_worker ? nlohmann::json(m_worker->starts()) : nlohmann::json(nullptr)},
            {"abi_version", m_caps.abi_version},
            {"input_dtypes", dtype_list(m_caps.input_dtypes)},
            {"output_dtypes", dtype_list(m_caps.output_dtypes)},
            {"memory", m_caps.memory == NUMPROBE_MEMORY_HOST ? "host" : "cuda"},
            {"tile_q", m_caps.tile_q},
            {"tile_k", m_caps.tile_k},
            {"decode", m_decode_on ? nlohmann::json{{"function", "numprobe_attention_decode"},
                                                    {"splits", m_splits},
                                                    {"queries_as", "T sequences sharing one cache"}}
                                   : nlohmann::json(nullptr)}};
  }

 private:
  std::string place(const char* fn = nullptr) const {
    return fn ? fmt::format("plugin {}: {}", m_path, fn) : fmt::format("plugin {}", m_path);
  }

  struct dtypes {
    int in, out, native;
  };
  // Input buffers: the case's own dtype when it is bf16/f16 and the plugin takes it (stored as
  // is, as a GPU kernel reads it); else f64 for f64 cases, f32 for every other case (values exact
  // in the case's dtype: every format numprobe generates is a subset of f32), or f64 when the
  // plugin takes f64 only. Output: f32, else f64, else the case's own 16-bit dtype.
  dtypes pick_dtypes(const attention_case& c, const char* fn) const {
    const bool f64_case = c.dtype == formats::format_id::m_f64;
    const int native = c.dtype == formats::format_id::m_bf16  ? NUMPROBE_DTYPE_BF16
                       : c.dtype == formats::format_id::m_f16 ? NUMPROBE_DTYPE_F16
                                                              : -1;
    int in_dtype = f64_case ? NUMPROBE_DTYPE_F64 : NUMPROBE_DTYPE_F32;
    if (native >= 0 && (m_caps.input_dtypes & (1u << native))) {
      in_dtype = native;
    } else if (!(m_caps.input_dtypes & (1u << in_dtype))) {
      if (!f64_case && (m_caps.input_dtypes & (1u << NUMPROBE_DTYPE_F64))) in_dtype = NUMPROBE_DTYPE_F64;
      else
        unsupported(fn, fmt::format("inputs in {} (case dtype {}); the plugin accepts {}",
                                    dtype_name(in_dtype), formats::name(c.dtype),
                                    dtype_list(m_caps.input_dtypes)));
    }
    // Output: f32, else f64, else the case's own 16-bit dtype (a kernel writing its input dtype).
    int out_dtype = NUMPROBE_DTYPE_F32;
    if (!(m_caps.output_dtypes & (1u << out_dtype))) {
      if (m_caps.output_dtypes & (1u << NUMPROBE_DTYPE_F64)) out_dtype = NUMPROBE_DTYPE_F64;
      else if (native >= 0 && (m_caps.output_dtypes & (1u << native))) out_dtype = native;
      else
        unsupported(fn, fmt::format("outputs in f32, f64 or the case dtype {}; the plugin writes {}",
                                    formats::name(c.dtype), dtype_list(m_caps.output_dtypes)));
    }
    return {in_dtype, out_dtype, native};
  }

  // Serving knobs: --decode and --splits reach numprobe_attention_decode (num_splits); every
  // other knob has no field in numprobe_decode_params and is refused naming its flag.
  void parse_knobs(const provider_options& o) {
    const knob_reader k(o.knobs);
    if (k.empty()) return;
    m_decode_on = k.has("decode");
    if (const std::string* bad = k.first_unknown({"decode", "splits"})) {
      if (!m_decode_on)
        throw_input_error("--" + *bad, "a plugin backend runs numprobe_attention_forward without "
                                       "serving knobs; add --decode for a plugin's split-KV decode");
      throw_input_error("--" + *bad,
                        "the plugin ABI's decode (numprobe_decode_params) has no field for this "
                        "knob: a plugin decode takes --splits only (--split-size, paged and fp8 "
                        "knobs: --backend emu or cuda)");
    }
    if (!m_decode_on)
      throw_input_error("--splits", "a plugin backend runs numprobe_attention_forward; add --decode");
    if (k.has("splits")) m_splits = k.integer("splits", 1, 65535);
  }

  // Split-KV decode through numprobe_attention_decode. The ABI's decode has one query per
  // sequence over seq_lens[i] cached keys; a case's T new queries (bottom-right aligned: query
  // t at absolute position S - T + t) become T sequences of batch element b that share b's
  // K/V cache (k and v of shape [T, S, Hkv, D] with stride 0 on the first axis) and see
  //   mask none: S keys;  causal: S - T + t + 1 keys;  causal top-left: t + 1 keys,
  // clamped to [0, S]. One call per batch element. Sliding windows and mask ranges have no
  // field in numprobe_decode_params and are refused.
  attention_output run_decode(const attention_inputs& in, std::span<const std::int64_t> rows) {
    const attention_case& c = in.c();
    const char* fn = "numprobe_attention_decode";
    if (c.mask == mask_kind::m_window || c.mask == mask_kind::m_ranges)
      throw_input_error("--mask", fmt::format("the plugin ABI's decode takes per-sequence key counts "
                                              "(seq_lens) only: mask {} cannot be passed to {}",
                                              to_string(c.mask), fn));
    // Plain variables, not a structured binding: lambdas below capture them (clang before 16
    // refuses to capture structured bindings).
    const dtypes picked = pick_dtypes(c, fn);
    const int in_dtype = picked.in, out_dtype = picked.out, native = picked.native;
    (void)native;
    if (m_caps.max_head_dim > 0 && c.head_dim > m_caps.max_head_dim)
      unsupported(fn, fmt::format("head_dim {} (max {})", c.head_dim, m_caps.max_head_dim));
    if (c.softcap > 0 && !(m_caps.features & NUMPROBE_FEATURE_SOFTCAP)) unsupported(fn, "softcap");
    const std::int64_t T = c.t(), S = c.seq, B = c.batch;
    if (T > 1 && !(m_caps.features & NUMPROBE_FEATURE_BATCH))
      unsupported(fn, "T > 1 new queries (passed as T sequences sharing one cache: batch > 1)");

    const std::vector<double> q = in.q_all();
    host_tensor qh(in_dtype, q), kh(in_dtype, in.k()), vh(in_dtype, in.v());
    const auto o_elems = static_cast<std::size_t>(B * T * c.heads * c.head_dim);
    host_tensor oh(out_dtype, o_elems);  // poisoned
    const bool want_lse = m_caps.features & NUMPROBE_FEATURE_LSE;
    std::vector<float> lsef(want_lse ? static_cast<std::size_t>(B * T * c.heads) : 0, std::nanf(""));
    std::vector<std::int32_t> seq_lens(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) {
      std::int64_t n = S;
      if (c.mask == mask_kind::m_causal) n = S - T + t + 1;
      if (c.mask == mask_kind::m_causal_top_left) n = t + 1;
      seq_lens[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(std::clamp<std::int64_t>(n, 0, S));
    }

    // Host base pointers and the per-batch-element views (plugin_library.cpp stages them to
    // the device for a CUDA-memory plugin).
    void* base[6] = {qh.data(), kh.data(), vh.data(), oh.data(), want_lse ? lsef.data() : nullptr,
                     seq_lens.data()};
    const std::size_t ib = dtype_bytes(in_dtype), ob = dtype_bytes(out_dtype);
    const auto params_for = [&](std::int64_t b) {
      const auto off = [](void* p, std::size_t bytes) {
        return p ? static_cast<void*>(static_cast<unsigned char*>(p) + bytes) : nullptr;
      };
      const auto rows_q = static_cast<std::size_t>(b * T * c.heads * c.head_dim);
      const auto rows_kv = static_cast<std::size_t>(b * S * c.kv_heads * c.head_dim);
      numprobe_decode_params p{};
      p.struct_size = sizeof(p);
      p.batch = T;
      p.max_seq = S;
      p.heads = c.heads;
      p.kv_heads = c.kv_heads;
      p.head_dim = c.head_dim;
      p.num_splits = m_splits;
      p.scale = c.softmax_scale();
      p.softcap = c.softcap;
      p.q = dense(off(base[0], rows_q * ib), in_dtype, {T, c.heads, c.head_dim});
      p.k = dense(off(base[1], rows_kv * ib), in_dtype, {T, S, c.kv_heads, c.head_dim});
      p.v = dense(off(base[2], rows_kv * ib), in_dtype, {T, S, c.kv_heads, c.head_dim});
      p.k.strides[0] = p.v.strides[0] = 0;  // the T queries share batch element b's cache
      p.seq_lens = dense(base[5], NUMPROBE_DTYPE_I32, {T});
      p.o = dense(off(base[3], rows_q * ob), out_dtype, {T, c.heads, c.head_dim});
      p.lse = dense(off(base[4], static_cast<std::size_t>(b * T * c.heads) * 4), NUMPROBE_DTYPE_F32,
                    {T, c.heads});
      p.memory = m_caps.memory;
      p.device = m_device;
      p.stream = nullptr;
      return p;
    };
    plugin::call call;
    call.is_decode = true;
    for (std::int64_t b = 0; b < B; ++b) call.decode.push_back(params_for(b));
    call.regions = {{qh.data(), qh.bytes(), false}, {kh.data(), kh.bytes(), false},
                    {vh.data(), vh.bytes(), false}, {oh.data(), oh.bytes(), true},
                    {seq_lens.data(), seq_lens.size() * sizeof(std::int32_t), false}};
    if (want_lse) call.regions.push_back({lsef.data(), lsef.size() * sizeof(float), true});
    const plugin::call_result r = invoke(call, fn, c.id());
    check_status(fn, r, fmt::format("{} (batch element {})", c.id(), r.failed_index));
    return gather_rows(c, rows, oh, lsef, want_lse);
  }

  // One call, in the worker or in this process. `who` of a worker failure names the plugin,
  // the function and the case.
  plugin::call_result invoke(plugin::call& call, const char* fn, const std::string& case_id) {
    if (m_worker) return m_worker->invoke(call, fmt::format("{}, case {}", place(fn), case_id));
    return m_library->invoke(call);
  }

  void check_status(const char* fn, const plugin::call_result& r, const std::string& what) const {
    if (r.status == NUMPROBE_STATUS_OK) return;
    // A declared refusal: the case is unsupported (a verdict), not a failure of the kernel.
    if (r.status == NUMPROBE_STATUS_UNSUPPORTED)
      throw_unsupported(place(fn), fmt::format("case {}{}", what, r.message.empty() ? "" : fmt::format(": {}", r.message)));
    throw_backend_error(place(fn), fmt::format("returned status {} for case {}{}", r.status, what,
                                               r.message.empty() ? "" : fmt::format(": {}", r.message)));
  }

  std::string caps_name() const { return m_info.name.empty() ? "?" : m_info.name; }

  // The rows the case asks for, out of the plugin's [rows, H, D] output (and LSE).
  static attention_output gather_rows(const attention_case& c, std::span<const std::int64_t> rows,
                                      const host_tensor& oh,
                                      const std::vector<float>& lsef, bool want_lse) {
    attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, c.head_dim);
    // Without NUMPROBE_FEATURE_LSE the LSE is unknown (the NaN poison), not a finding.
    out.lse_known = want_lse;
    const auto row_elems = static_cast<std::size_t>(c.heads * c.head_dim);
    const auto hq = static_cast<std::size_t>(c.heads);
    const auto nrows = static_cast<std::int64_t>(rows.size());
#pragma omp parallel for schedule(static) if (nrows * static_cast<std::int64_t>(row_elems) > (std::int64_t{1} << 16))
    for (std::int64_t ii = 0; ii < nrows; ++ii) {
      const auto i = static_cast<std::size_t>(ii);
      const auto r = static_cast<std::size_t>(rows[i]);
      for (std::size_t e = 0; e < row_elems; ++e) out.o[i * row_elems + e] = oh.at(r * row_elems + e);
      if (want_lse)
        for (std::size_t h = 0; h < hq; ++h) out.lse[i * hq + h] = lsef[r * hq + h];
    }
    count_unreturned_nonfinite(out, c.batch * c.t(), [&](std::size_t i) { return oh.at(i); },
                               [&](std::size_t i) { return lsef[i]; });
    return out;
  }

  // A case outside the plugin's declared capabilities: refused as unsupported, not run.
  [[noreturn]] void unsupported(const char* fn, const std::string& what) const {
    throw_unsupported(place(fn), fmt::format("{} (capabilities of '{}')", what, caps_name()));
  }

  std::string m_path;
  int m_device = 0;
  bool m_isolated = true;
  std::unique_ptr<plugin::worker_client> m_worker;  // plugin:PATH
  std::unique_ptr<plugin::library> m_library;       // plugin-inproc:PATH
  plugin::capabilities m_info;
  numprobe_capabilities m_caps{};  // m_info.caps (its string pointers are null)
  bool m_decode_on = false;
  std::int64_t m_splits = 4;  // --splits (the cuda/emu default)
  tile_shape m_tiles;
};

std::unique_ptr<attention_provider> make_plugin(const provider_options& o) {
  return std::make_unique<plugin_provider>(o, true);
}

std::unique_ptr<attention_provider> make_plugin_inproc(const provider_options& o) {
  return std::make_unique<plugin_provider>(o, false);
}

}  // namespace

void register_plugin_provider() {
  register_attention_provider("plugin", &make_plugin,
                              "kernel in a shared library, run in a worker process: plugin:lib.so "
                              "(numprobe/kernel_abi.h; --exec-timeout per call)");
  register_attention_provider("plugin-inproc", &make_plugin_inproc,
                              "the same plugin called in numprobe's own process: plugin-inproc:lib.so "
                              "(faster; a crash or hang of the plugin takes numprobe down)");
}

}  // namespace numprobe
