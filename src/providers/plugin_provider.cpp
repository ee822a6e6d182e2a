#include "src/providers/plugin_provider.hpp"

#include <algorithm>
#include <cmath>
#include <dlfcn.h>
#include <fmt/format.h>
#include <memory>

#include <cstring>

#include "numprobe/core/error.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/kernel_abi.h"
#include "src/providers/provider.hpp"
#if NUMPROBE_HAVE_CUDA
#include "src/kernels/gpu/gpu_api.hpp"
#endif

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

std::size_t dtype_bytes(int d) {
  switch (d) {
    case NUMPROBE_DTYPE_F64: return 8;
    case NUMPROBE_DTYPE_F32: return 4;
    default: return 2;  // bf16, f16
  }
}

// 16-bit codes of values exactly representable in bf16 / f16 (the case's rounded inputs): bit
// manipulation of the float, checked against the decode table and falling back to the codec
// for anything else (so a non-representable value is still rounded, RNE). The codec alone
// costs ~50 ns an element, seconds for a 16K-token case.
const std::vector<double>& decode_table(formats::format_id id) {
  static const auto make = [](formats::format_id f) {
    std::vector<double> t(65536);
    for (std::uint32_t c = 0; c < 65536; ++c) t[c] = formats::decode(f, c);
    return t;
  };
  static const std::vector<double> bf16 = make(formats::format_id::m_bf16);
  static const std::vector<double> f16 = make(formats::format_id::m_f16);
  return id == formats::format_id::m_bf16 ? bf16 : f16;
}

std::uint16_t encode16(formats::format_id id, double x) {
  const float f = static_cast<float>(x);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  std::uint32_t code;
  if (id == formats::format_id::m_bf16) {
    code = u >> 16;
  } else {
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const int e = static_cast<int>((u >> 23) & 0xFFu) - 127;
    const float a = std::fabs(f);
    if (a == 0.f) code = sign;
    else if (e >= -14 && e <= 15) code = sign | static_cast<std::uint32_t>((e + 15) << 10) | ((u >> 13) & 0x3FFu);
    else if (e < -14 && e >= -24) code = sign | static_cast<std::uint32_t>(std::ldexp(a, 24));
    else code = 0x7E00u;  // out of range: the check below sends it to the codec
  }
  const double back = decode_table(id)[code & 0xFFFFu];
  if (back == x || (std::isnan(back) && std::isnan(x))) return static_cast<std::uint16_t>(code);
  return static_cast<std::uint16_t>(formats::encode(id, x));
}

// One host buffer of an ABI dtype (f64, f32, bf16, f16): filled from doubles exactly
// representable in it, or poisoned (NaN) for an output; read back as doubles.
class host_tensor {
 public:
  // Element by element, on all cores for long-context cases (each element is its own bytes).
  host_tensor(int dtype, std::span<const double> x) : m_dtype(dtype), m_bytes(x.size() * dtype_bytes(dtype)) {
    const auto n = static_cast<std::int64_t>(x.size());
#pragma omp parallel for schedule(static) if (n > k_parallel_min)
    for (std::int64_t i = 0; i < n; ++i) set(static_cast<std::size_t>(i), x[static_cast<std::size_t>(i)]);
  }
  host_tensor(int dtype, std::size_t n) : m_dtype(dtype), m_bytes(n * dtype_bytes(dtype)) {
    const auto m = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (m > k_parallel_min)
    for (std::int64_t i = 0; i < m; ++i) set(static_cast<std::size_t>(i), std::nan(""));
  }
  [[nodiscard]] void* data() { return m_bytes.data(); }
  [[nodiscard]] std::size_t bytes() const { return m_bytes.size(); }
  [[nodiscard]] double at(std::size_t i) const {
    switch (m_dtype) {
      case NUMPROBE_DTYPE_F64: return load<double>(i);
      case NUMPROBE_DTYPE_F32: return static_cast<double>(load<float>(i));
      case NUMPROBE_DTYPE_BF16: return decode_table(formats::format_id::m_bf16)[load<std::uint16_t>(i)];
      default: return decode_table(formats::format_id::m_f16)[load<std::uint16_t>(i)];
    }
  }

 private:
  static constexpr std::int64_t k_parallel_min = std::int64_t{1} << 16;
  template <class U>
  U load(std::size_t i) const {
    U u;
    std::memcpy(&u, m_bytes.data() + i * sizeof(U), sizeof(U));
    return u;
  }
  template <class U>
  void store(std::size_t i, U u) {
    std::memcpy(m_bytes.data() + i * sizeof(U), &u, sizeof(U));
  }
  void set(std::size_t i, double x) {
    switch (m_dtype) {
      case NUMPROBE_DTYPE_F64: return store<double>(i, x);
      case NUMPROBE_DTYPE_F32: return store<float>(i, static_cast<float>(x));
      case NUMPROBE_DTYPE_BF16: return store<std::uint16_t>(i, encode16(formats::format_id::m_bf16, x));
      default: return store<std::uint16_t>(i, encode16(formats::format_id::m_f16, x));
    }
  }
  int m_dtype;
  std::vector<unsigned char> m_bytes;
};

class plugin_provider final : public attention_provider {
 public:
  explicit plugin_provider(const provider_options& o) : m_device(o.device) {
    const auto colon = o.backend.find(':');
    if (colon == std::string::npos || colon + 1 == o.backend.size())
      throw_input_error("--backend plugin", "expected plugin:PATH to a shared library");
    m_path = o.backend.substr(colon + 1);
    if (!o.faults.empty()) throw_input_error("--inject", "a plugin backend has no injectable faults");
    if (!o.states.empty()) throw_input_error("--state", "a plugin backend has no state dtypes");
    parse_knobs(o);
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
    if (m_decode_on && !m_decode_fn) {
      // The message first: m_caps.name lives in the plugin's storage.
      const std::string what = fmt::format("--decode needs a plugin offering split-KV decode "
                                           "(NUMPROBE_OP_DECODE); '{}' offers attention forward only",
                                           m_caps.name ? m_caps.name : "?");
#if NUMPROBE_HAVE_CUDA
      if (m_dm && m_stream) m_dm->destroy_stream(m_stream);
#endif
      ::dlclose(m_handle);
      m_handle = nullptr;
      throw_input_error(place("numprobe_attention_decode"), what);
    }
  }

  ~plugin_provider() override {
#if NUMPROBE_HAVE_CUDA
    if (m_dm && m_stream) m_dm->destroy_stream(m_stream);
#endif
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
    if (m_decode_on) return run_decode(in, rows);
    const char* fn = "numprobe_attention_forward";
    // Input buffers: the case's own dtype when it is bf16/f16 and the plugin takes it (stored
    // as is, as a GPU kernel reads it); else f64 for f64 cases, f32 for every other case (values
    // exact in the case's dtype: every format numprobe generates is a subset of f32), or f64
    // when the plugin takes f64 only.
    const auto [in_dtype, out_dtype, native] = pick_dtypes(c, fn);
    (void)native;
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
    p.mask = mask;
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
    int status = NUMPROBE_STATUS_OK;
    if (m_caps.memory == NUMPROBE_MEMORY_HOST) {
      status = m_forward(&p);
    } else {
      status = run_on_device(p, {&qh, &kh, &vh}, oh, lsef);
    }
    check_status(fn, status, c.id());

    return gather_rows(c, rows, oh, lsef, want_lse);
  }

  nlohmann::json metadata() const override {
    return {{"plugin", m_path},
            {"name", m_caps.name ? m_caps.name : ""},
            {"description", m_caps.description ? m_caps.description : ""},
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
#if NUMPROBE_HAVE_CUDA
  struct device_buffer {
    const gpu::device_memory_api* dm;
    void* ptr;
    device_buffer(const gpu::device_memory_api* d, int dev, std::size_t n) : dm(d), ptr(d->alloc(dev, n)) {}
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;
    ~device_buffer() { dm->release(ptr); }
  };
#endif

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
    const auto& k = o.knobs;
    if (k.empty()) return;
    m_decode_on = k.count("decode") > 0;
    for (const auto& [name, value] : k) {
      if (name == "decode" || name == "splits") continue;
      if (!m_decode_on)
        throw_input_error("--" + name, "a plugin backend runs numprobe_attention_forward without "
                                       "serving knobs; add --decode for a plugin's split-KV decode");
      throw_input_error("--" + name,
                        "the plugin ABI's decode (numprobe_decode_params) has no field for this "
                        "knob: a plugin decode takes --splits only (--split-size, paged and fp8 "
                        "knobs: --backend emu or cuda)");
    }
    if (!m_decode_on)
      throw_input_error("--splits", "a plugin backend runs numprobe_attention_forward; add --decode");
    if (k.count("splits")) {
      const std::string& text = k.at("splits");
      std::int64_t v = 0;
      try {
        std::size_t used = 0;
        v = std::stoll(text, &used);
        if (used != text.size()) throw std::invalid_argument(text);
      } catch (const std::exception&) {
        throw_input_error("--splits", fmt::format("expected an integer, got '{}'", text));
      }
      if (v < 1 || v > 65535) throw_input_error("--splits", fmt::format("must be in [1, 65535], got {}", v));
      m_splits = v;
    }
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
    const auto [in_dtype, out_dtype, native] = pick_dtypes(c, fn);
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

    // Base pointers (host, or device below) and the per-batch-element views.
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
    int status = NUMPROBE_STATUS_OK;
    std::int64_t failed_b = 0;
    if (m_caps.memory == NUMPROBE_MEMORY_HOST) {
      for (std::int64_t b = 0; b < B && status == NUMPROBE_STATUS_OK; ++b) {
        const numprobe_decode_params p = params_for(b);
        status = m_decode_fn(&p);
        failed_b = b;
      }
    } else {
#if NUMPROBE_HAVE_CUDA
      std::vector<std::unique_ptr<device_buffer>> bufs;
      const auto upload = [&](int slot, const void* src, std::size_t bytes) {
        bufs.push_back(std::make_unique<device_buffer>(m_dm, m_device, bytes));
        m_dm->copy_to_device(bufs.back()->ptr, src, bytes);
        base[slot] = bufs.back()->ptr;
      };
      upload(0, qh.data(), qh.bytes());
      upload(1, kh.data(), kh.bytes());
      upload(2, vh.data(), vh.bytes());
      upload(5, seq_lens.data(), seq_lens.size() * sizeof(std::int32_t));
      device_buffer od(m_dm, m_device, oh.bytes());
      m_dm->fill(od.ptr, 0xFF, oh.bytes());  // NaN in every float dtype
      base[3] = od.ptr;
      std::unique_ptr<device_buffer> ld;
      if (want_lse) {
        ld = std::make_unique<device_buffer>(m_dm, m_device, lsef.size() * sizeof(float));
        m_dm->fill(ld->ptr, 0xFF, lsef.size() * sizeof(float));
        base[4] = ld->ptr;
      }
      for (std::int64_t b = 0; b < B && status == NUMPROBE_STATUS_OK; ++b) {
        numprobe_decode_params p = params_for(b);
        p.stream = m_stream;
        status = m_decode_fn(&p);
        failed_b = b;
      }
      try {
        m_dm->synchronize(m_stream);
      } catch (const error& e) {
        throw_backend_error(place(fn), fmt::format("the plugin's work on numprobe's stream failed: {}", e.what()));
      }
      if (status == NUMPROBE_STATUS_OK) {
        m_dm->copy_to_host(oh.data(), od.ptr, oh.bytes());
        if (ld) m_dm->copy_to_host(lsef.data(), ld->ptr, lsef.size() * sizeof(float));
      }
#else
      throw_backend_error(place(), "no CUDA backend compiled");
#endif
    }
    check_status(fn, status, fmt::format("{} (batch element {})", c.id(), failed_b));
    return gather_rows(c, rows, oh, lsef, want_lse);
  }

  void check_status(const char* fn, int status, const std::string& what) const {
    if (status == NUMPROBE_STATUS_OK) return;
    const char* msg = m_last_error ? m_last_error() : nullptr;
    throw_backend_error(place(fn), fmt::format("returned status {} for case {}{}", status, what,
                                               msg && *msg ? fmt::format(": {}", msg) : ""));
  }

  // The rows the case asks for, out of the plugin's [rows, H, D] output (and LSE).
  static attention_output gather_rows(const attention_case& c, std::span<const std::int64_t> rows,
                                      const host_tensor& oh,
                                      const std::vector<float>& lsef, bool want_lse) {
    attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, c.head_dim);
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
    return out;
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
      m_decode_fn = symbol<numprobe_attention_decode_fn>("numprobe_attention_decode", true);
    if (m_caps.ops & NUMPROBE_OP_QUANTIZE)
      (void)symbol<numprobe_quantize_fn>("numprobe_quantize", true);
    if (m_caps.memory == NUMPROBE_MEMORY_CUDA) {
#if NUMPROBE_HAVE_CUDA
      m_dm = &gpu::cuda_device_memory_api();
      if (m_dm->device_count() == 0)
        throw_backend_error(place("numprobe_kernel_capabilities"),
                            "the plugin wants CUDA device memory and no CUDA device is visible");
      m_stream = m_dm->create_stream(m_device);
#else
      throw_backend_error(place("numprobe_kernel_capabilities"),
                          "the plugin wants CUDA device memory; no CUDA backend compiled into "
                          "this numprobe");
#endif
    } else if (m_caps.memory != NUMPROBE_MEMORY_HOST) {
      throw_backend_error(place("numprobe_kernel_capabilities"),
                          fmt::format("the plugin wants {} memory; this numprobe passes host or "
                                      "CUDA device pointers only",
                                      m_caps.memory == NUMPROBE_MEMORY_HIP ? "HIP device"
                                                                           : fmt::format("memory#{}", m_caps.memory)));
    }
    if (m_caps.tile_q > 0 && m_caps.tile_k > 0) m_tiles = {m_caps.tile_q, m_caps.tile_k};
  }

  // Device-memory plugins: numprobe allocates device buffers, copies the inputs, poisons the
  // outputs, passes device pointers and its own stream, synchronises that stream, reads back.
  int run_on_device(numprobe_attention_params& p, std::initializer_list<host_tensor*> inputs,
                    host_tensor& o, std::vector<float>& lse) {
#if NUMPROBE_HAVE_CUDA
    std::vector<std::unique_ptr<device_buffer>> bufs;
    numprobe_tensor* in_t[] = {&p.q, &p.k, &p.v};
    int i = 0;
    for (host_tensor* h : inputs) {
      bufs.push_back(std::make_unique<device_buffer>(m_dm, m_device, h->bytes()));
      m_dm->copy_to_device(bufs.back()->ptr, h->data(), h->bytes());
      in_t[i++]->data = bufs.back()->ptr;
    }
    device_buffer od(m_dm, m_device, o.bytes());
    m_dm->fill(od.ptr, 0xFF, o.bytes());  // NaN in f32/f16/bf16 (and f64)
    p.o.data = od.ptr;
    std::unique_ptr<device_buffer> ld;
    if (!lse.empty()) {
      ld = std::make_unique<device_buffer>(m_dm, m_device, lse.size() * sizeof(float));
      m_dm->fill(ld->ptr, 0xFF, lse.size() * sizeof(float));
      p.lse.data = ld->ptr;
    }
    p.stream = m_stream;
    const int status = m_forward(&p);
    try {
      m_dm->synchronize(m_stream);
    } catch (const error& e) {
      throw_backend_error(place("numprobe_attention_forward"),
                          fmt::format("the plugin's work on numprobe's stream failed: {}", e.what()));
    }
    if (status == NUMPROBE_STATUS_OK) {
      m_dm->copy_to_host(o.data(), od.ptr, o.bytes());
      if (ld) m_dm->copy_to_host(lse.data(), ld->ptr, lse.size() * sizeof(float));
    }
    return status;
#else
    (void)p, (void)inputs, (void)o, (void)lse;
    throw_backend_error(place(), "no CUDA backend compiled");
#endif
  }

  std::string m_path;
  int m_device = 0;
#if NUMPROBE_HAVE_CUDA
  const gpu::device_memory_api* m_dm = nullptr;
#endif
  void* m_stream = nullptr;
  void* m_handle = nullptr;
  numprobe_capabilities m_caps{};
  numprobe_attention_forward_fn m_forward = nullptr;
  numprobe_kernel_last_error_fn m_last_error = nullptr;
  numprobe_attention_decode_fn m_decode_fn = nullptr;
  bool m_decode_on = false;
  std::int64_t m_splits = 4;  // --splits (the cuda/emu default)
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
