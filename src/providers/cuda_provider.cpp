// `--backend cuda` (and, through the same class, `--backend hip`): the built-in GPU
// flash-attention kernels behind the common provider interface.
#include "src/providers/cuda_provider.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "src/kernels/gpu/builtin_kernel_table.hpp"
#include "src/kernels/gpu/gpu_api.hpp"
#include "src/kernels/gpu/gpu_resident.hpp"
#include "src/providers/gpu_decode_knobs.hpp"
#include "src/providers/gpu_faults.hpp"
#include "src/providers/host_dtype.hpp"
#include "src/providers/plugin_library.hpp"

namespace numprobe {
namespace {

nlohmann::json device_json(const gpu::device_facts& d) {
  return {{"ordinal", d.ordinal},
          {"name", d.name},
          {"arch", d.arch},
          {"warp_width", d.warp_width},
          {"multiprocessors", d.multiprocessors},
          {"memory_bytes", d.memory_bytes},
          {"l2_bytes", d.l2_bytes},
          {"shared_per_block_optin", d.shared_per_block_optin},
          {"clock_khz", d.clock_khz},
          {"driver_version", d.driver_version},
          {"runtime_version", d.runtime_version}};
}

gpu::attention_mask to_gpu_mask(mask_kind m) {
  switch (m) {
    case mask_kind::m_none: return gpu::attention_mask::m_none;
    case mask_kind::m_causal: return gpu::attention_mask::m_causal;
    case mask_kind::m_causal_top_left: return gpu::attention_mask::m_causal_top_left;
    case mask_kind::m_window: return gpu::attention_mask::m_window;
    case mask_kind::m_ranges: break;
  }
  throw_input_error("--mask", "the GPU kernels build causal/window masks themselves; mask=ranges "
                              "is for the ref and emu backends");
}

formats::format_id dtype16(bool fp16) { return fp16 ? formats::format_id::m_f16 : formats::format_id::m_bf16; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The entries of the backend compiled for this vendor (null: none): the forward with residency,
// and the built-in kernels as a plugin ABI table (kernel_abi.h).
struct vendor_entries {
  const gpu::resident_api* resident = nullptr;
  const numprobe_kernel_table* table = nullptr;
};
vendor_entries entries_for(const std::string& vendor) {
#if NUMPROBE_HAVE_CUDA
  if (vendor == "cuda") return {&gpu::cuda_resident_api(), &gpu::cuda_builtin_kernel_table()};
#endif
#if NUMPROBE_HAVE_HIP
  if (vendor == "hip") return {&gpu::hip_resident_api(), &gpu::hip_builtin_kernel_table()};
#endif
  (void)vendor;
  return {};
}

// The device's count of NaN/Inf in the rows it computed but did not return.
void take_outside(const gpu::attention_result& res, attention_output& out) {
  out.outside.o_nan += res.outside.o_nan;
  out.outside.o_inf += res.outside.o_inf;
  out.outside.lse_nan += res.outside.lse_nan;
  out.outside.lse_inf += res.outside.lse_inf;
  out.outside.rows += res.outside.rows;
}

class gpu_attention_provider final : public attention_provider {
 public:
  gpu_attention_provider(const gpu::backend_api& api, const provider_options& o,
                         const gpu::decode_api* decode = nullptr)
      : m_api(api), m_device(o.device), m_decode(decode), m_dec(parse_decode_knobs(o, api.vendor)) {
    if (m_dec.on && decode == nullptr)
      throw_input_error("--decode", std::string("the ") + api.vendor + " provider has no decode kernel wired");
    const std::string vendor = api.vendor;
    if (api.device_count() == 0) {
      throw_backend_error("--backend " + vendor,
                          fmt::format("no {} device ({})", vendor == "cuda" ? "CUDA" : "HIP",
                                      api.no_device_reason()));
    }
    m_facts = api.device_info(o.device);  // throws naming the failing call
    if (!o.states.empty())
      throw_input_error("--state", fmt::format("the {} kernels have fixed state dtypes (s, m, l, O "
                                               "in fp32; P and output in the input dtype); use "
                                               "--inject rowsum-bf16 / acc-bf16, or --backend emu",
                                               vendor));
    const gpu_fault_choice fault =
        parse_gpu_faults(o.faults, vendor, m_dec.on ? gpu_kernel::m_decode : gpu_kernel::m_forward);
    m_faults = fault.bit;
    m_fault_name = fault.name;
    const gpu::kernel_facts mma = api.attention_kernel_facts(gpu::attention_path::m_mma, 128);
    const gpu::kernel_facts scalar = api.attention_kernel_facts(gpu::attention_path::m_scalar, 128);
    // The tensor-core path where the platform has one; --tile picks among compiled shapes.
    m_path = mma.mma_impl.rfind("none", 0) == 0 ? gpu::attention_path::m_scalar
                                                : gpu::attention_path::m_mma;
    if (o.tile) {
      if (o.tile->q == mma.tile_q && o.tile->k == mma.tile_k) {
        m_path = gpu::attention_path::m_mma;
      } else if (o.tile->q == scalar.tile_q && o.tile->k == scalar.tile_k) {
        m_path = gpu::attention_path::m_scalar;
        m_tile_chosen = true;
      } else {
        throw_input_error("--tile", fmt::format("the {} kernels are compiled for tiles {}x{} "
                                                "(tensor cores) and {}x{} (scalar), not {}x{}",
                                                vendor, mma.tile_q, mma.tile_k, scalar.tile_q,
                                                scalar.tile_k, o.tile->q, o.tile->k));
      }
    }
    m_kernel = api.attention_kernel_facts(m_path, 128);
    // The kernels are registered through the plugin ABI, as a user plugin is: the linked-in
    // table is loaded by the plugin library (version, entries and capabilities checked). Every
    // forward launch is its numprobe_attention_forward_variant (--inject and --tile as the
    // variant) on numprobe's device-resident buffers; every split-KV decode launch is its
    // numprobe_attention_decode_variant (--splits/--split-size, --kv-format/--kv-scale,
    // --p-format/--p-prescale, --acc-promote, the mask and window, --inject as the variant) on
    // the decode's device buffers (include/numprobe/kernel_abi.h, additions within version 1).
    // The knobs are still checked here and in the decode host code first, so refusals name
    // the flag exactly as before.
    if (const numprobe_kernel_table* table = entries_for(vendor).table) {
      m_abi = std::make_unique<plugin::library>(*table, "built-in " + vendor + " kernels", o.device);
      if (m_abi->forward_variant() == nullptr)
        throw_backend_error("--backend " + vendor, "the built-in kernel table has no forward variant entry");
      if (m_dec.on && m_abi->decode_variant() == nullptr)
        throw_backend_error("--backend " + vendor, "the built-in kernel table has no decode variant entry");
    }
  }

  [[nodiscard]] std::string name() const override {
    std::string extra;
    if (m_tile_chosen) extra += fmt::format("tile={}x{}", m_kernel.tile_q, m_kernel.tile_k);
    if (m_faults != 0) extra += (extra.empty() ? "" : ",") + ("inject=" + m_fault_name);
    if (m_dec.on) extra += (extra.empty() ? "" : ",") + m_dec.describe();
    const std::string vendor = m_api.vendor;
    return extra.empty() ? vendor : vendor + "[" + extra + "]";
  }

  [[nodiscard]] tile_shape tiles() const override { return {m_kernel.tile_q, m_kernel.tile_k}; }
  [[nodiscard]] bool computes_row_subsets() const override { return false; }
  // A ragged batch reaches the split-KV decode only, through the kernel table's decode entry
  // (seq_lens, one launch per sequence); the forward kernels take one S per launch.
  [[nodiscard]] bool takes_ragged() const override { return m_dec.on && m_abi && m_abi->decode_variant() != nullptr; }

  [[nodiscard]] attention_output run(const attention_inputs& in,
                                     std::span<const std::int64_t> rows) override {
    const attention_case& c = in.c();
    if (c.dtype != formats::format_id::m_bf16 && c.dtype != formats::format_id::m_f16)
      throw_input_error("--dtype", fmt::format("the {} attention kernels take bf16 or fp16 inputs, "
                                               "not {}", m_api.vendor, formats::name(c.dtype)));
    gpu::attention_request r;
    r.batch = c.batch;
    r.t = c.t();
    r.s = c.seq;
    r.hq = c.heads;
    r.hkv = c.kv_heads;
    r.d = c.head_dim;
    r.fp16 = c.dtype == formats::format_id::m_f16;
    r.scale = static_cast<float>(c.softmax_scale());
    r.softcap = static_cast<float>(c.softcap);
    r.mask = to_gpu_mask(c.mask);
    r.window = c.window;
    r.faults = m_faults;
    r.path = m_path;
    r.device = m_device;

    const std::vector<std::int64_t> row_list(rows.begin(), rows.end());
    r.rows = row_list.data();
    r.n_rows = static_cast<std::int64_t>(row_list.size());
    attention_output out = make_poisoned_output(row_list, c.heads, c.head_dim);
    if (!m_dec.on && m_resident_api) return run_forward(in, r, std::move(out));

    // Rounded inputs are exactly representable in the dtype, hence in float.
    const std::vector<double> q = in.q_all();
    const auto to_float = [](std::span<const double> x) {
      return std::vector<float>(x.begin(), x.end());
    };
    const std::vector<float> qf = to_float(q), kf = to_float(in.k()), vf = to_float(in.v());
    r.q = qf.data();
    r.k = kf.data();
    r.v = vf.data();

    if (m_dec.on) {
      const std::vector<std::int32_t> lens(c.seq_lens.begin(), c.seq_lens.end());  // validated <= S
      return run_decode(r, row_list, std::move(out), lens);
    }
    const gpu::attention_result res = m_api.attention_forward(r);
    std::copy(res.o.begin(), res.o.end(), out.o.begin());
    std::copy(res.lse.begin(), res.lse.end(), out.lse.begin());
    take_outside(res, out);
    m_last_kernel_ms = res.kernel_ms;
    return out;
  }

  // Forward path: Q/K/V converted on the host (all cores) to the dtype's 16-bit patterns and
  // uploaded once per set of inputs. A drift sweep's points view the arrays of its longest case
  // (batch 1, attention_inputs' prefix views), so the conversion and the upload happen at the
  // first point and every later point only runs the kernel and fetches its sampled rows.
  attention_output run_forward(const attention_inputs& in, gpu::attention_request& r,
                               attention_output out) {
    const auto t0 = std::chrono::steady_clock::now();
    const attention_case& c = in.c();
    const auto& qs = in.q_storage();
    const auto& ks = in.k_storage();
    const auto& vs = in.v_storage();
    const bool views = c.batch == 1 && qs && ks && vs && in.q_materialized().data() == qs->data() &&
                       in.k().data() == ks->data() && in.v().data() == vs->data();
    gpu::resident_request req;
    std::vector<std::uint16_t> q16, k16, v16;  // per call when the storage is not reusable
    if (views) {
      if (m_host.q != qs || m_host.k != ks || m_host.v != vs || m_host.fp16 != r.fp16) {
        // Keeping the storage alive keeps its addresses from being reused by other arrays.
        m_host.q = qs;
        m_host.k = ks;
        m_host.v = vs;
        m_host.fp16 = r.fp16;
        encode16_all(dtype16(r.fp16), *qs, m_host.q16);
        encode16_all(dtype16(r.fp16), *ks, m_host.k16);
        encode16_all(dtype16(r.fp16), *vs, m_host.v16);
        ++m_host.generation;
      }
      req.q = m_host.q16.data();
      req.k = m_host.k16.data();
      req.v = m_host.v16.data();
      req.q_rows = static_cast<std::int64_t>(m_host.q16.size()) / (c.heads * c.head_dim);
      req.kv_rows = static_cast<std::int64_t>(m_host.k16.size()) / (c.kv_heads * c.head_dim);
      req.cache = &m_resident;
      req.generation = m_host.generation;
    } else {
      const std::vector<double> q = in.q_all();
      encode16_all(dtype16(r.fp16), q, q16);
      encode16_all(dtype16(r.fp16), in.k(), k16);
      encode16_all(dtype16(r.fp16), in.v(), v16);
      req.q = q16.data();
      req.k = k16.data();
      req.v = v16.data();
      req.q_rows = c.batch * c.t();
      req.kv_rows = c.batch * c.seq;
    }
    const double convert_s = seconds_since(t0);
    req.abi_forward = m_abi ? m_abi->forward_variant() : nullptr;
    gpu::resident_timing t;
    const gpu::attention_result res = m_resident_api->forward(r, req, &t);
    std::copy(res.o.begin(), res.o.end(), out.o.begin());
    std::copy(res.lse.begin(), res.lse.end(), out.lse.begin());
    take_outside(res, out);
    m_last_kernel_ms = res.kernel_ms;
    m_timing.calls += 1;
    m_timing.convert_s += convert_s;
    m_timing.upload_s += t.upload_s;
    m_timing.uploads += t.uploaded ? 1 : 0;
    m_timing.kernel_ms += t.kernel_ms;
    m_timing.fetch_s += t.fetch_s;
    m_timing.total_s += seconds_since(t0);
    return out;
  }

  // Split-KV decode: every row computed, the requested ones returned. FP8 KV: K and V are
  // quantized here as the emulator does (s = fp32(amax / 448) per tensor or per KV head, codes
  // round-to-nearest-even with saturation) and dequantized by the kernel as code * s.
  attention_output run_decode(const gpu::attention_request& r, const std::vector<std::int64_t>& rows,
                              attention_output out, const std::vector<std::int32_t>& seq_lens) {
    if (r.softcap != 0.f) throw_input_error("--softcap", "the decode kernel has no softcap");
    gpu::decode_request d;
    d.batch = r.batch;
    d.t = r.t;
    d.s = r.s;
    d.hq = r.hq;
    d.hkv = r.hkv;
    d.d = r.d;
    d.fp16 = r.fp16;
    d.scale = r.scale;
    d.mask = r.mask;
    d.window = r.window;
    d.splits = m_dec.splits;
    d.split_size = m_dec.split_size;
    d.device = r.device;
    d.q = r.q;
    d.k = r.k;
    d.v = r.v;
    d.kv = m_dec.kv;
    d.p_e4m3 = m_dec.p_e4m3;
    d.p_prescale = static_cast<float>(m_dec.p_prescale);
    d.acc_promote = m_dec.acc_promote;
    d.faults = r.faults;  // parse_gpu_faults admitted decode faults only
    d.abi_decode = m_abi ? m_abi->decode_variant() : nullptr;
    d.abi_last_error = m_abi ? m_abi->last_error() : nullptr;
    if (!seq_lens.empty()) d.seq_lens = seq_lens.data();
    std::vector<std::uint8_t> k8, v8;
    std::vector<float> ks, vs;
    if (m_dec.kv != gpu::kv_format::m_input) {
      const std::int64_t n = r.batch * r.s * r.hkv * r.d;
      const bool per_head = m_dec.kv == gpu::kv_format::m_e4m3_head;
      quantize_kv_e4m3(r.k, n, r.hkv, r.d, per_head, k8, ks);
      quantize_kv_e4m3(r.v, n, r.hkv, r.d, per_head, v8, vs);
      d.k8 = k8.data();
      d.v8 = v8.data();
      d.k_scale = ks.data();
      d.v_scale = vs.data();
    }
    const gpu::decode_result res = m_decode->decode(d);
    const std::int64_t hd = r.hq * r.d;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::copy_n(res.o.begin() + rows[i] * hd, hd, out.o.begin() + static_cast<std::int64_t>(i) * hd);
      std::copy_n(res.lse.begin() + rows[i] * r.hq, r.hq, out.lse.begin() + static_cast<std::int64_t>(i) * r.hq);
    }
    // Every row came back: count the non-finite values of the rows not asked for here.
    count_unreturned_nonfinite(out, r.batch * r.t, [&](std::size_t i) { return res.o[i]; },
                               [&](std::size_t i) { return res.lse[i]; });
    m_last_kernel_ms = res.kernel_ms;
    m_last_splits = static_cast<int>(res.split_lse.size() / std::max<std::size_t>(1, res.lse.size()));
    return out;
  }

  [[nodiscard]] nlohmann::json metadata() const override {
    std::vector<std::string> faults;
    if (m_faults != 0) faults.push_back(m_fault_name);
    return {{"backend", m_api.vendor},
            {"device", device_json(m_facts)},
            {"kernel",
             {{"name", "flash_forward"},
              {"path", m_path == gpu::attention_path::m_mma ? "tensor-core" : "scalar"},
              {"tile_q", m_kernel.tile_q},
              {"tile_k", m_kernel.tile_k},
              {"warps_per_block", m_kernel.warps},
              {"compiled_for", m_kernel.compiled_for},
              {"faults", faults}}},
            {"numerics",
             {{"exp", m_kernel.exp_impl},
              {"mma", m_kernel.mma_impl},
              {"softcap_tanh", m_kernel.tanh_impl},
              {"states", {{"q", "input"}, {"k", "input"}, {"v", "input"}, {"s", "f32"},
                          {"p", "input"}, {"m", "f32"}, {"l", "f32"}, {"o", "f32"},
                          {"out", "input"}, {"lse", "f32"}}},
              {"lse_base", "natural log"},
              {"masked_rows", "O = 0, LSE = -inf"}}},
            {"decode", m_dec.on ? nlohmann::json{{"kernel", "decode_split + decode_merge"},
                                                  {"splits", m_dec.split_size > 0 ? nlohmann::json(nullptr)
                                                                                  : nlohmann::json(m_dec.splits)},
                                                  {"split_size", m_dec.split_size},
                                                  {"last_splits", m_last_splits},
                                                  {"kv", m_dec.kv_name()},
                                                  {"p", m_dec.p_e4m3 ? nlohmann::json(fmt::format(
                                                                           "e4m3fn for P.V after x{} (l: f32 P)",
                                                                           m_dec.p_prescale))
                                                                     : nlohmann::json("f32 (not rounded)")},
                                                  {"acc_promote", m_dec.acc_promote},
                                                  {"acc_mantissa_bits", m_dec.acc_promote > 0 ? 13 : 23},
                                                  {"merge", m_faults == gpu::k_fault_empty_split_nan
                                                                ? "natural-log LSE, empty splits weighted by 0 (O_i = 0/0)"
                                                                : "natural-log LSE, empty splits skipped"}}
                                : nlohmann::json(nullptr)},
            {"last_kernel_ms", m_last_kernel_ms},
            {"forward_timing",
             {{"calls", m_timing.calls},
              {"convert_s", m_timing.convert_s},
              {"uploads", m_timing.uploads},
              {"upload_s", m_timing.upload_s},
              {"kernel_ms", m_timing.kernel_ms},
              {"fetch_s", m_timing.fetch_s},
              {"total_s", m_timing.total_s}}}};
  }

 private:
  const gpu::backend_api& m_api;
  int m_device = 0;
  gpu::device_facts m_facts;
  gpu::kernel_facts m_kernel;
  gpu::attention_path m_path = gpu::attention_path::m_mma;
  bool m_tile_chosen = false;
  std::uint32_t m_faults = 0;
  std::string m_fault_name;
  double m_last_kernel_ms = 0.0;
  const gpu::decode_api* m_decode = nullptr;
  // Forward path (run_forward): the 16-bit host copies of the inputs' storage and their device
  // copies, kept across calls; totals of where the time went (metadata "forward_timing").
  const gpu::resident_api* m_resident_api = entries_for(m_api.vendor).resident;
  std::unique_ptr<plugin::library> m_abi;  // the built-in kernel table (kernel_abi.h)
  struct host_copies {
    attention_inputs::shared_values q, k, v;
    bool fp16 = false;
    std::vector<std::uint16_t> q16, k16, v16;
    std::uint64_t generation = 0;
  } m_host;
  gpu::resident_inputs m_resident;
  struct forward_timing {
    std::int64_t calls = 0, uploads = 0;
    double convert_s = 0.0, upload_s = 0.0, kernel_ms = 0.0, fetch_s = 0.0, total_s = 0.0;
  } m_timing;
  decode_settings m_dec;
  int m_last_splits = 0;
};

}  // namespace

std::unique_ptr<attention_provider> make_gpu_attention_provider(const gpu::backend_api& api,
                                                                const provider_options& o) {
  return std::make_unique<gpu_attention_provider>(api, o);
}

std::vector<nlohmann::json> gpu_devices(const gpu::backend_api& api) {
  std::vector<nlohmann::json> out;
  const int n = api.device_count();
  for (int i = 0; i < n; ++i) {
    nlohmann::json d = device_json(api.device_info(i));
    d["backend"] = api.vendor;
    out.push_back(std::move(d));
  }
  return out;
}

std::unique_ptr<attention_provider> make_cuda_provider(const provider_options& o) {
#if NUMPROBE_HAVE_CUDA
  // Split-KV decode and its knobs are parsed (and refused) by the provider itself.
  return std::make_unique<gpu_attention_provider>(gpu::cuda_api(), o, &gpu::cuda_decode_api());
#else
  (void)o;
  throw_backend_error("--backend cuda", "the cuda backend is not compiled into this build");
#endif
}

std::vector<nlohmann::json> cuda_devices() {
#if NUMPROBE_HAVE_CUDA
  return gpu_devices(gpu::cuda_api());
#else
  return {};
#endif
}

void register_cuda_provider() {
#if NUMPROBE_HAVE_CUDA
  register_attention_provider(
      "cuda", &make_cuda_provider,
      "built-in flash-attention forward on an NVIDIA GPU (mma.sync bf16/fp16, fp32 accumulation)");
#endif
}

}  // namespace numprobe
