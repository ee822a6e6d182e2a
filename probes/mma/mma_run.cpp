// `numprobe mma` (mma_run.hpp).
#include "probes/mma/mma_run.hpp"

#include <cmath>
#include <fmt/format.h>

#include "numprobe/base/error.hpp"
#include "src/kernels/emu/mma_model.hpp"
#include "src/providers/mma_device.hpp"

namespace numprobe::probes {
namespace {

using json = nlohmann::json;

json number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

json numbers(const std::vector<double>& v) {
  json out = json::array();
  for (double x : v) out.push_back(number(x));
  return out;
}

json vector_json(const mma_vector& v) {
  return json{{"id", v.id}, {"a", numbers(v.a)}, {"b", numbers(v.b)}, {"c", number(v.c)}};
}

template <class T>
json optional_json(const std::optional<T>& x) {
  return x ? json(*x) : json(nullptr);
}

json rounding_json(const std::optional<emu::mma_rounding>& r) {
  return r ? json(std::string(emu::mma_rounding_name(*r))) : json(nullptr);
}

}  // namespace

mma_run_result run_mma(const mma_run_options& o) {
  mma_run_result r;
  if (o.model) {
    const emu::mma_model& m = emu::find_mma_model(*o.model, "--model");
    r.source = fmt::format("model {} ({}; {})", m.name, m.instruction, m.source);
    const mma_path path{m.name, m.input, m.k};
    const auto vectors = mma_catalogue(path);
    std::vector<double> measured;
    for (const auto& v : vectors) measured.push_back(emu::mma_dot(m, v.a, v.b, v.c, "--model " + m.name));
    r.paths.push_back(mma_classify(path, vectors, measured));
    return r;
  }
  providers::mma_device_info dev;
  try {
    dev = providers::mma_device(o.device);
  } catch (const error& e) {
    if (e.code() != exit_code::m_backend || !providers::mma_device_built()) throw;  // already says so
    throw_backend_error("mma", std::string("needs a GPU: ") + e.what());
  }
  r.source = fmt::format("device {}: {} (sm_{})", dev.ordinal, dev.name, dev.arch);
  for (const auto& path : mma_device_paths()) {
    const bool fp8 = path.input == formats::format_id::m_e4m3fn || path.input == formats::format_id::m_e5m2;
    if (dev.arch < (fp8 ? 89 : 80)) {
      r.skipped.push_back(fmt::format("{}: needs sm_{}", path.name, fp8 ? 89 : 80));
      continue;
    }
    const auto vectors = mma_catalogue(path);
    std::vector<double> a, b, c;
    for (const auto& v : vectors) {
      a.insert(a.end(), v.a.begin(), v.a.end());
      b.insert(b.end(), v.b.begin(), v.b.end());
      c.push_back(v.c);
    }
    const std::vector<double> measured = providers::run_mma_on_device(o.device, path.input, path.k, a, b, c);
    r.paths.push_back(mma_classify(path, vectors, measured));
  }
  r.skipped.push_back("wgmma (sm_90a): probe kernel not written yet (docs/hardware.md)");
  return r;
}

json mma_result_json(const mma_run_result& r) {
  json paths = json::array();
  for (const auto& c : r.paths) {
    json props = json::array();
    for (const auto& p : c.properties) {
      json vectors = json::array();
      for (const auto& v : p.vectors) vectors.push_back(vector_json(v));
      json hyps = json::array();
      for (const auto& h : p.hypotheses) hyps.push_back(json{{"label", h.label}, {"predicted", numbers(h.predicted)}});
      props.push_back(json{{"property", p.name},
                           {"question", p.question},
                           {"verdict", p.verdict},
                           {"determined", p.determined},
                           {"matching", p.matching},
                           {"vectors", vectors},
                           {"measured", numbers(p.measured)},
                           {"hypotheses", hyps}});
    }
    const mma_findings& f = c.findings;
    json findings{{"products_exact", optional_json(f.products_exact)},
                  {"fraction_bits", optional_json(f.fraction_bits)},
                  {"fraction_bits_at_least", f.fraction_bits_at_least < 0 ? json(nullptr) : json(f.fraction_bits_at_least)},
                  {"internal_rounding", rounding_json(f.internal_rounding)},
                  {"output_fraction_bits", optional_json(f.output_fraction_bits)},
                  {"output_rounding", rounding_json(f.output_rounding)},
                  {"k_group", optional_json(f.k_group)},
                  {"c_in_group", optional_json(f.c_in_group)},
                  {"flush_subnormal_inputs", optional_json(f.flush_subnormal_inputs)},
                  {"flush_subnormal_output", optional_json(f.flush_subnormal_output)},
                  {"ieee_nonfinite", optional_json(f.ieee_nonfinite)},
                  {"overflow_to_inf", optional_json(f.overflow_to_inf)}};
    paths.push_back(json{{"path", c.path.name},
                         {"input", std::string(formats::name(c.path.input))},
                         {"k", c.path.k},
                         {"findings", findings},
                         {"properties", props}});
  }
  return json{{"mma_schema_version", 1},
              {"source", r.source},
              {"method", "docs/hardware.md: Fasi, Higham, Mikaitis, Pranesh 2021 (PeerJ CS 7:e330); MMA-Sim "
                         "(arXiv 2511.10909)"},
              {"paths", paths},
              {"skipped", r.skipped}};
}

json mma_vectors_json(const std::vector<mma_path>& paths) {
  json out = json::array();
  for (const auto& p : paths) {
    json vectors = json::array();
    for (const auto& v : mma_catalogue(p)) vectors.push_back(vector_json(v));
    out.push_back(json{{"path", p.name}, {"input", std::string(formats::name(p.input))}, {"k", p.k}, {"vectors", vectors}});
  }
  return json{{"mma_schema_version", 1}, {"paths", out}};
}

}  // namespace numprobe::probes
