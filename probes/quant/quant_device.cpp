// `quant --backend cuda|hip|exec:CMD`: run the device (or external) quantize kernel on the probe's tensor and compare
// its codes, block scales, zero points and tensor scale with the reference codec bit for bit.
// A mismatch is a finding (a breach named "bit_exact"): each one must be explained by a
// documented hardware rule or it is a bug (docs/gpu.md, "Quantize kernels").
#include <cmath>
#include <fmt/format.h>
#include <vector>

#include "numprobe/base/error.hpp"
#include "probes/quant/quant_probe.hpp"
#include "src/providers/quant_provider.hpp"

namespace numprobe::probes {

void check_quant_on_device(const quant_probe_options& o, quant_report& r, std::int64_t rows,
                           std::int64_t cols) {
  quant_exec_options eo;
  eo.timeout_s = o.exec_timeout_s;
  eo.keep = o.keep_temp;
  eo.scheme_name = o.scheme_name;
  auto prov = make_quant_provider(o.backend, o.device, eo);
  const std::string why = prov->unsupported(o.config);
  if (!why.empty()) throw_input_error("--backend " + o.backend, why + " (scheme " + o.scheme_name + ")");
  // The device takes fp32: compare against the reference on the same fp32 inputs.
  std::vector<float> xf(r.input.size());
  std::int64_t rounded = 0;
  for (std::size_t i = 0; i < xf.size(); ++i) {
    xf[i] = static_cast<float>(r.input[i]);
    rounded += (static_cast<double>(xf[i]) != r.input[i] && !std::isnan(r.input[i])) ? 1 : 0;
  }
  formats::quant_result ref_f;
  const formats::quant_result* ref = &r.result;
  std::vector<double> xd;
  if (rounded > 0) {
    xd.assign(xf.begin(), xf.end());
    ref_f = formats::quantize(o.config, xd, rows, cols);
    ref = &ref_f;
  }
  const quant_device_output dev = prov->quantize(o.config, xf, rows, cols);
  const quant_bit_check chk = compare_quant(*ref, dev, rounded > 0 ? xd : r.input, 20);
  nlohmann::json j = to_json(chk);
  j["backend"] = o.backend;
  j["device"] = o.device;
  j["conversion"] = dev.conversion;
  j["kernel_ms"] = dev.kernel_ms;
  j["amax_ms"] = dev.amax_ms;
  j["inputs_rounded_to_f32"] = rounded;
  j["metadata"] = prov->metadata();
  // exec: an optional dequant.npy, compared with the reference's exact dequantized values
  // rounded to the file's dtype (float32: one rounding of an exact product; float64: exact).
  std::int64_t dq_bad = 0, dq_nonfinite = 0;
  if (!dev.dequant.empty()) {
    nlohmann::json listed = nlohmann::json::array();
    const auto& want_all = ref->dequant;
    for (std::size_t i = 0; i < dev.dequant.size() && i < want_all.size(); ++i) {
      const double want = dev.dequant_dtype == "float32" ? static_cast<double>(static_cast<float>(want_all[i]))
                                                         : want_all[i];
      const double got = dev.dequant[i];
      if (std::isnan(want) && std::isnan(got)) continue;
      if (got == want) continue;
      if (!std::isfinite(got)) ++dq_nonfinite;  // listed as a mismatch too
      ++dq_bad;
      if (listed.size() < 20) listed.push_back({{"index", i}, {"input", xd.empty() ? r.input[i] : xd[i]},
                                                {"candidate", got}, {"reference", want}});
    }
    j["dequant"] = {{"dtype", dev.dequant_dtype}, {"mismatches", dq_bad}, {"listed", listed}};
  }
  j["nonfinite"] = dev.nonfinite + dq_nonfinite;
  r.device_check = std::move(j);
  if (dev.nonfinite + dq_nonfinite > 0)
    r.breaches.push_back({"nonfinite<=0 (NaN/Inf in the candidate's scales or dequant.npy)",
                          static_cast<double>(dev.nonfinite + dq_nonfinite)});
  if (dq_bad > 0) r.breaches.push_back({"dequant_exact (candidate vs reference codec)", static_cast<double>(dq_bad)});
  const std::int64_t bad = chk.element_mismatches + chk.scale_mismatches +
                           chk.zero_point_mismatches + (chk.tensor_scale_match ? 0 : 1);
  if (bad > 0) r.breaches.push_back({"bit_exact (device vs reference codec)", static_cast<double>(bad)});
}

std::string device_check_text(const quant_report& r) {
  const auto& j = r.device_check;
  if (j.is_null()) return {};
  std::string s = fmt::format(
      "device    {} ({}): {}; {} element, {} scale, {} zero-point mismatches of {} elements / {} blocks; kernel {:.3f} ms\n",
      j["backend"].get<std::string>(), j["conversion"].get<std::string>(),
      j["exact"].get<bool>() ? "bit-exact with the reference codec" : "MISMATCH",
      j["element_mismatches"].get<std::int64_t>(), j["scale_mismatches"].get<std::int64_t>(),
      j["zero_point_mismatches"].get<std::int64_t>(), j["elements"].get<std::int64_t>(),
      j["blocks"].get<std::int64_t>(), j["kernel_ms"].get<double>());
  for (const auto& m : j["mismatches"])
    s += fmt::format("  {} #{} input={:.9g} device=0x{:x} reference=0x{:x}\n",
                     m["what"].get<std::string>(), m["index"].get<std::int64_t>(),
                     m["input"].get<double>(), m["device_code"].get<std::uint32_t>(),
                     m["reference_code"].get<std::uint32_t>());
  return s;
}

}  // namespace numprobe::probes
