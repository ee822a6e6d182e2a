#include "src/providers/gpu_decode_knobs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"
#include "src/providers/knobs.hpp"

namespace numprobe {

std::string decode_settings::kv_name() const {
  return kv == gpu::kv_format::m_e4m3_tensor ? "e4m3fn/tensor"
         : kv == gpu::kv_format::m_e4m3_head ? "e4m3fn/head"
                                              : "input";
}

std::string decode_settings::describe() const {
  std::string s = split_size > 0 ? fmt::format("decode,split-size={}", split_size)
                                 : fmt::format("decode,splits={}", splits);
  if (kv != gpu::kv_format::m_input) s += ",kv=" + kv_name();
  if (p_e4m3) s += fmt::format(",p=e4m3fn,p-prescale={}", p_prescale);
  if (acc_promote > 0) s += fmt::format(",acc-promote={}", acc_promote);
  return s;
}

decode_settings parse_decode_knobs(const provider_options& o, const std::string& vendor) {
  decode_settings d;
  const knob_reader k(o.knobs);
  if (const std::string* bad = k.first_unknown({"decode", "splits", "split-size", "kv-format", "kv-scale",
                                                "p-format", "p-prescale", "acc-promote"})) {
    if (*bad == "page-size")
      throw_input_error("--page-size", fmt::format("the {} decode kernel reads a contiguous KV "
                                                   "cache; paged caches are emulated by --backend emu",
                                                   vendor));
    throw_input_error("--" + *bad, fmt::format("not a knob of the {} kernels (they take --decode, "
                                               "--splits, --split-size, --kv-format e4m3fn, "
                                               "--kv-scale tensor|head, --p-format e4m3fn, "
                                               "--p-prescale, --acc-promote); use --backend emu",
                                               vendor));
  }
  d.on = k.has("decode");
  if (!d.on)
    for (const char* name : {"splits", "split-size", "kv-format", "kv-scale", "p-format", "p-prescale", "acc-promote"})
      if (k.has(name))
        throw_input_error(std::string("--") + name,
                          fmt::format("the {} forward kernel has no such knob; add --decode", vendor));
  if (k.has("splits")) d.splits = static_cast<int>(k.integer("splits", 1, 65535));
  if (k.has("split-size")) {
    if (k.has("splits")) throw_input_error("--split-size", "give --splits or --split-size, not both");
    d.split_size = k.integer("split-size", 1, std::int64_t{1} << 40);
  }
  if (k.has("kv-format")) {
    if (k.text("kv-format") != "e4m3fn")
      throw_input_error("--kv-format", fmt::format("the {} decode kernel takes e4m3fn KV only, not "
                                                   "'{}' (other formats: --backend emu)",
                                                   vendor, k.text("kv-format")));
    d.kv = gpu::kv_format::m_e4m3_head;  // the emulator's default layout
    if (k.has("kv-scale")) {
      const std::string& l = k.text("kv-scale");
      if (l == "tensor") d.kv = gpu::kv_format::m_e4m3_tensor;
      else if (l != "head")
        throw_input_error("--kv-scale", fmt::format("the {} decode kernel takes tensor or head "
                                                    "scales, not '{}' (channel/token: --backend emu)",
                                                    vendor, l));
    }
  } else if (k.has("kv-scale")) {
    throw_input_error("--kv-scale", "needs --kv-format");
  }
  if (k.has("p-format")) {
    if (k.text("p-format") != "e4m3fn")
      throw_input_error("--p-format", fmt::format("the {} decode kernel quantizes P to e4m3fn only, "
                                                  "not '{}' (other formats: --backend emu)",
                                                  vendor, k.text("p-format")));
    d.p_e4m3 = true;
  }
  if (k.has("p-prescale")) {
    if (!d.p_e4m3) throw_input_error("--p-prescale", "needs --p-format");
    d.p_prescale = k.positive("p-prescale", 3.0e38);
  }
  if (k.has("acc-promote")) d.acc_promote = static_cast<int>(k.integer("acc-promote", 1, 1 << 30));
  return d;
}

void quantize_kv_e4m3(const float* x, std::int64_t n, std::int64_t hkv, std::int64_t d,
                      bool per_head, std::vector<std::uint8_t>& codes, std::vector<float>& scales) {
  const std::int64_t groups = per_head ? hkv : 1;
  std::vector<double> amax(static_cast<std::size_t>(groups), 0.0);
  const auto group = [&](std::int64_t i) { return per_head ? (i / d) % hkv : 0; };
  for (std::int64_t i = 0; i < n; ++i) {
    double& a = amax[static_cast<std::size_t>(group(i))];
    a = std::max(a, std::fabs(static_cast<double>(x[i])));
  }
  const double fmax = formats::info(formats::format_id::m_e4m3fn).max_finite;
  scales.resize(static_cast<std::size_t>(groups));
  for (std::int64_t g = 0; g < groups; ++g) {
    const double a = amax[static_cast<std::size_t>(g)];
    scales[static_cast<std::size_t>(g)] = a > 0 ? static_cast<float>(a / fmax) : 1.f;
  }
  codes.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    codes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(formats::encode(
        formats::format_id::m_e4m3fn,
        static_cast<double>(x[i]) / static_cast<double>(scales[static_cast<std::size_t>(group(i))]),
        formats::rounding::m_nearest_even, formats::overflow::m_saturate));
}

}  // namespace numprobe
