#include "src/providers/plugin_provider.hpp"

#include <cmath>
#include <dlfcn.h>
#include <fmt/format.h>
#include <memory>

#include "numprobe/core/error.hpp"
#include "numprobe/kernel_abi.h"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

std::string dtype_name(int d) {
  switch (d) {
    case NUMPROBE_DTYPE_F32: return "f32";
    case NUMPROBE_DTYPE_F16: return "f16";
    case NUMPROBE_DTYPE_BF16: return "bf16";
    case NUMPROBE_DTYPE_F64: return "f64";
    case NUMPROBE_DTYPE_E4M3FN: return "e4m3fn";
    case NUMPROBE_DTYPE_E5M2: return "e5m2";
    case NUMPROBE_DTYPE_E4M3FNUZ: return "e4m3fnuz";
    case NUMPROBE_DTYPE_E5M2FNUZ: return "e5m2fnuz";
    case NUMPROBE_DTYPE_U8: return "u8";
    case NUMPROBE_DTYPE_I32: return "i32";
    default: return fmt::format("dtype#{}", d);
  }
}

std::string dtype_list(std::uint32_t mask) {
  std::string out;
  for (int d = 0; d < 32; ++d)
    if (mask & (1u << d)) out += (out.empty() ? "" : ",") + dtype_name(d);
  return out.empty() ? "none" : out;
}

numprobe_mask abi_mask(mask_kind m) {
  switch (m) {
    case mask_kind::m_none: return NUMPROBE_MASK_NONE;
    case mask_kind::m_causal: return NUMPROBE_MASK_CAUSAL;
    case mask_kind::m_causal_top_left: return NUMPROBE_MASK_CAUSAL_TOP_LEFT;
    case mask_kind::m_window: return NUMPROBE_MASK_WINDOW;
    default: return static_cast<numprobe_mask>(-1);
  }
}

numprobe_tensor dense(void* data, int dtype, std::initializer_list<std::int64_t> shape) {
  numprobe_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<std::int32_t>(shape.size());
  t.scale = 1.0f;
  int i = 0;
  for (auto s : shape) t.shape[i++] = s;
  std::int64_t stride = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    t.strides[k] = stride;
    stride *= t.shape[k];
  }
  return t;
}

class plugin_provider final : public attention_provider {
 public:
  explicit plugin_provider(const provider_options& o) : m_device(o.device) {
    const auto colon = o.backend.find(':');
    if (colon == std::string::npos || colon + 1 == o.backend.size())
      throw_input_error("--backend plugin", "expected plugin:PATH to a shared library");
    m_path = o.backend.substr(colon + 1);
    if (!o.faults.empty()) throw_input_error("--inject", "a plugin backend has no injectable faults");
    if (!o.states.empty()) throw_input_error("--state", "a plugin backend has no state dtypes");
    dlerror();
    m_handle = ::dlopen(m_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m_handle) {
      const char* e = dlerror();
      throw_backend_error(place(), fmt::format("cannot load: {}", e ? e : "dlopen failed"));
    }
    try {
      load();
    } catch (...) {
      ::dlclose(m_handle);
      throw;
    }
    if (o.tile) m_tiles = *o.tile;
  }

  ~plugin_provider() override {
    if (m_handle) ::dlclose(m_handle);
  }

  std::string name() const override {
    return fmt::format("plugin[{}{}]", m_caps.name ? m_caps.name : "?",
                       m_caps.name ? ", " + m_path : m_path);
  }
  tile_shape tiles() const override { return m_tiles; }
  bool computes_row_subsets() const override { return false; }

  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    const attention_case& c = in.c();
    const char* fn = "numprobe_attention_forward";
    // Buffers: f64 cases in f64, every other case in f32 holding values exact in the case's
    // dtype (every format numprobe generates is a subset of f32), unless the plugin asks for
    // f64 only.
    const bool f64_case = c.dtype == formats::format_id::m_f64;
    int in_dtype = f64_case ? NUMPROBE_DTYPE_F64 : NUMPROBE_DTYPE_F32;
    if (!(m_caps.input_dtypes & (1u << in_dtype))) {
      if (!f64_case && (m_caps.input_dtypes & (1u << NUMPROBE_DTYPE_F64))) in_dtype = NUMPROBE_DTYPE_F64;
      else
        unsupported(fn, fmt::format("inputs in {} (case dtype {}); the plugin accepts {}",
                                    dtype_name(in_dtype), formats::name(c.dtype),
                                    dtype_list(m_caps.input_dtypes)));
    }
    int out_dtype = NUMPROBE_DTYPE_F32;
    if (!(m_caps.output_dtypes & (1u << out_dtype))) {
      if (m_caps.output_dtypes & (1u << NUMPROBE_DTYPE_F64)) out_dtype = NUMPROBE_DTYPE_F64;
      else
        unsupported(fn, fmt::format("outputs in f32 or f64; the plugin writes {}",
                                    dtype_list(m_caps.output_dtypes)));
    }
    const numprobe_mask mask = abi_mask(c.mask);
    if (mask < 0 || !(m_caps.masks & (1u << mask)))
      unsupported(fn, fmt::format("mask {}", to_string(c.mask)));
    if (m_caps.max_head_dim > 0 && c.head_dim > m_caps.max_head_dim)
      unsupported(fn, fmt::format("head_dim {} (max {})", c.head_dim, m_caps.max_head_dim));
    if (c.softcap > 0 && !(m_caps.features & NUMPROBE_FEATURE_SOFTCAP))
      unsupported(fn, "softcap");
    if (c.batch > 1 && !(m_caps.features & NUMPROBE_FEATURE_BATCH)) unsupported(fn, "batch > 1");

    const std::int64_t bt = c.batch * c.t(), bs = c.batch * c.seq;
    const std::vector<double> q = in.q_all();
    std::vector<float> qf, kf, vf, of, lsef;
    std::vector<double> qd, kd, vd, od;
    void *qp, *kp, *vp, *op;
    if (in_dtype == NUMPROBE_DTYPE_F64) {
      qd = q;
      kd.assign(in.k().begin(), in.k().end());
      vd.assign(in.v().begin(), in.v().end());
      qp = qd.data(), kp = kd.data(), vp = vd.data();
    } else {
      qf.assign(q.begin(), q.end());
      kf.assign(in.k().begin(), in.k().end());
      vf.assign(in.v().begin(), in.v().end());
      qp = qf.data(), kp = kf.data(), vp = vf.data();
    }
    const auto o_elems = static_cast<std::size_t>(bt * c.heads * c.head_dim);
    // Poisoned: an element the plugin does not write reads NaN, never a plausible value.
    if (out_dtype == NUMPROBE_DTYPE_F64) od.assign(o_elems, std::nan(""));
    else of.assign(o_elems, std::nanf(""));
    op = out_dtype == NUMPROBE_DTYPE_F64 ? static_cast<void*>(od.data()) : static_cast<void*>(of.data());
    const bool want_lse = m_caps.features & NUMPROBE_FEATURE_LSE;
    if (want_lse) lsef.assign(static_cast<std::size_t>(bt * c.heads), std::nanf(""));

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
    p.mask = mask;
    p.window = c.window;
    p.case_dtype = in_dtype;
    p.q = dense(qp, in_dtype, {bt, c.heads, c.head_dim});
    p.k = dense(kp, in_dtype, {bs, c.kv_heads, c.head_dim});
    p.v = dense(vp, in_dtype, {bs, c.kv_heads, c.head_dim});
    p.o = dense(op, out_dtype, {bt, c.heads, c.head_dim});
    p.lse = dense(want_lse ? lsef.data() : nullptr, NUMPROBE_DTYPE_F32, {bt, c.heads});
    p.memory = NUMPROBE_MEMORY_HOST;
    p.device = m_device;
    p.stream = nullptr;
    const int status = m_forward(&p);
    if (status != NUMPROBE_STATUS_OK) {
      const char* msg = m_last_error ? m_last_error() : nullptr;
      throw_backend_error(place(fn), fmt::format("returned status {} for case {}{}", status, c.id(),
                                                 msg && *msg ? fmt::format(": {}", msg) : ""));
    }

    attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, c.head_dim);
    const auto row_elems = static_cast<std::size_t>(c.heads * c.head_dim);
    const auto hq = static_cast<std::size_t>(c.heads);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto r = static_cast<std::size_t>(rows[i]);
      for (std::size_t e = 0; e < row_elems; ++e)
        out.o[i * row_elems + e] = out_dtype == NUMPROBE_DTYPE_F64 ? od[r * row_elems + e]
                                                                   : static_cast<double>(of[r * row_elems + e]);
      if (want_lse)
        for (std::size_t h = 0; h < hq; ++h) out.lse[i * hq + h] = lsef[r * hq + h];
    }
    return out;
  }

  nlohmann::json metadata() const override {
    return {{"plugin", m_path},
            {"name", m_caps.name ? m_caps.name : ""},
            {"description", m_caps.description ? m_caps.description : ""},
            {"abi_version", m_caps.abi_version},
            {"input_dtypes", dtype_list(m_caps.input_dtypes)},
            {"output_dtypes", dtype_list(m_caps.output_dtypes)},
            {"memory", m_caps.memory == NUMPROBE_MEMORY_HOST ? "host" : "device"}};
  }

 private:
  std::string place(const char* fn = nullptr) const {
    return fn ? fmt::format("plugin {}: {}", m_path, fn) : fmt::format("plugin {}", m_path);
  }

  [[noreturn]] void unsupported(const char* fn, const std::string& what) const {
    throw_backend_error(place(fn), fmt::format("does not support {} (capabilities of '{}')", what,
                                               m_caps.name ? m_caps.name : "?"));
  }

  template <class F>
  F symbol(const char* fn, bool required) {
    dlerror();
    void* s = ::dlsym(m_handle, fn);
    if (!s && required)
      throw_backend_error(place(fn), "the plugin does not export this required function");
    return reinterpret_cast<F>(s);
  }

  void load() {
    auto version = symbol<numprobe_kernel_abi_version_fn>("numprobe_kernel_abi_version", true);
    const std::uint32_t v = version();
    if (v != NUMPROBE_KERNEL_ABI_VERSION)
      throw_backend_error(place("numprobe_kernel_abi_version"),
                          fmt::format("the plugin was built for kernel ABI version {}, this numprobe "
                                      "speaks version {}; rebuild it against this numprobe's "
                                      "numprobe/kernel_abi.h",
                                      v, NUMPROBE_KERNEL_ABI_VERSION));
    auto caps = symbol<numprobe_kernel_capabilities_fn>("numprobe_kernel_capabilities", true);
    m_caps.struct_size = sizeof(m_caps);
    if (const int s = caps(&m_caps); s != NUMPROBE_STATUS_OK)
      throw_backend_error(place("numprobe_kernel_capabilities"), fmt::format("returned status {}", s));
    if (m_caps.abi_version != NUMPROBE_KERNEL_ABI_VERSION)
      throw_backend_error(place("numprobe_kernel_capabilities"),
                          fmt::format("reports ABI version {}, numprobe speaks {}",
                                      m_caps.abi_version, NUMPROBE_KERNEL_ABI_VERSION));
    m_last_error = symbol<numprobe_kernel_last_error_fn>("numprobe_kernel_last_error", false);
    if (!(m_caps.ops & NUMPROBE_OP_ATTENTION_FORWARD))
      throw_backend_error(place("numprobe_kernel_capabilities"),
                          "the plugin does not offer attention forward (NUMPROBE_OP_ATTENTION_FORWARD)");
    m_forward = symbol<numprobe_attention_forward_fn>("numprobe_attention_forward", true);
    // Optional ops must be exported when advertised.
    if (m_caps.ops & NUMPROBE_OP_DECODE)
      (void)symbol<numprobe_attention_decode_fn>("numprobe_attention_decode", true);
    if (m_caps.ops & NUMPROBE_OP_QUANTIZE)
      (void)symbol<numprobe_quantize_fn>("numprobe_quantize", true);
    if (m_caps.memory != NUMPROBE_MEMORY_HOST)
      throw_backend_error(place("numprobe_kernel_capabilities"),
                          "the plugin wants device memory; this numprobe passes host pointers "
                          "only (device plugins arrive with the GPU providers)");
    if (m_caps.tile_q > 0 && m_caps.tile_k > 0) m_tiles = {m_caps.tile_q, m_caps.tile_k};
  }

  std::string m_path;
  int m_device = 0;
  void* m_handle = nullptr;
  numprobe_capabilities m_caps{};
  numprobe_attention_forward_fn m_forward = nullptr;
  numprobe_kernel_last_error_fn m_last_error = nullptr;
  tile_shape m_tiles;
};

std::unique_ptr<attention_provider> make_plugin(const provider_options& o) {
  return std::make_unique<plugin_provider>(o);
}

}  // namespace

void register_plugin_provider() {
  register_attention_provider("plugin", &make_plugin,
                              "kernel in a shared library: plugin:lib.so (numprobe/kernel_abi.h)");
}

}  // namespace numprobe
