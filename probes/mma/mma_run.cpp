// `numprobe mma` (mma_run.hpp).
#include "probes/mma/mma_run.hpp"

#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <optional>

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

bool mma_run_result::measured_models_agree() const {
  for (const auto& a : agreement)
    if (a.model == "measured" && a.equal != a.vectors) return false;
  return true;
}

std::string published_model_for(const mma_path& path, int sm) {
  using formats::format_id;
  using providers::mma_accumulator;
  if (path.accumulator != mma_accumulator::m_f32) {
    // fp16 and integer accumulators: the Hopper entries (MMA-Sim's fused sum with an fp16 output;
    // PTX's integer semantics; fp8 mma.sync measured by numprobe, as its fp32 form was).
    if (sm < 90) return "";
    const bool w = path.family != providers::mma_family::m_mma_sync;
    if (path.integer()) {
      if (sm != 90 && w) return "";
      const std::string base = w ? "h200-wgmma-s8" : "h200-mma-s8";
      return path.accumulator == mma_accumulator::m_s32_satfinite ? base + "-satfinite" : base;
    }
    if (w && sm != 90) return "";
    switch (path.input) {
      case format_id::m_f16: return w ? "h200-wgmma-f16-f16acc" : "h200-mma-f16-f16acc";
      case format_id::m_e4m3fn: return w ? "h200-wgmma-e4m3-f16acc" : "h200-mma-e4m3-f16acc";
      case format_id::m_e5m2: return w ? "h200-wgmma-e5m2-f16acc" : "h200-mma-e5m2-f16acc";
      default: return "";
    }
  }
  if (path.family != providers::mma_family::m_mma_sync) {  // wgmma, either operand form
    if (sm != 90) return "";
    switch (path.input) {
      case format_id::m_f16: return "h200-wgmma-f16";
      case format_id::m_bf16: return "h200-wgmma-bf16";
      case format_id::m_tf32: return "h200-wgmma-tf32";
      case format_id::m_e4m3fn: return "h200-wgmma-e4m3";
      case format_id::m_e5m2: return "h200-wgmma-e5m2";
      default: return "";
    }
  }
  if (path.name.rfind("mma.sync", 0) != 0) return "";
  const bool hopper = sm >= 90;
  switch (path.input) {
    case format_id::m_f16: return hopper ? "h200-mma-f16" : "a100-mma-f16";
    case format_id::m_bf16: return hopper ? "h200-mma-bf16" : "a100-mma-bf16";
    case format_id::m_tf32: return hopper ? "h200-mma-tf32" : "";
    case format_id::m_e4m3fn: return hopper ? "h200-mma-e4m3" : "l40-mma-e4m3";
    case format_id::m_e5m2: return hopper ? "h200-mma-e5m2" : "";
    default: return "";
  }
}

namespace {

// --agree: the path's random vectors through `run` (the device or the CPU model), compared with
// the model measured from the catalogue and with the published model.
void agree(mma_run_result& r, const mma_characterisation& c, int sm, const mma_run_options& o,
           const std::function<std::vector<double>(const std::vector<mma_vector>&)>& run) {
  const auto vectors = mma_random_vectors(c.path, o.agree, o.seed);
  const std::vector<double> outputs = run(vectors);
  std::string why;
  if (const auto measured = model_from_findings(c.path, c.findings, why))
    r.agreement.push_back(compare_with_model(c.path, vectors, outputs, *measured, "measured"));
  else
    r.no_model.push_back(c.path.name + ": " + why);
  if (const std::string name = published_model_for(c.path, sm); !name.empty()) {
    const emu::mma_model& pub = emu::find_mma_model(name, "mma");
    if (pub.input == c.path.input && pub.k == c.path.k)
      r.agreement.push_back(compare_with_model(c.path, vectors, outputs, pub, name));
  }
}

}  // namespace

mma_run_result run_mma(const mma_run_options& o) {
  mma_run_result r;
  if (o.agree < 0) throw_input_error("--agree", "must be 0 or more");
  if (o.model) {
    const emu::mma_model& m = emu::find_mma_model(*o.model, "--model");
    r.source = fmt::format("model {} ({}; {})", m.name, m.instruction, m.source);
    const mma_path path = mma_model_path(m);
    const auto vectors = mma_catalogue(path);
    auto run = [&m](const std::vector<mma_vector>& vs) {
      std::vector<double> out;
      for (const auto& v : vs) out.push_back(emu::mma_dot(m, v.a, v.b, v.c, "--model " + m.name));
      return out;
    };
    r.paths.push_back(mma_classify(path, vectors, run(vectors)));
    if (o.agree > 0) {
      const auto vs = mma_random_vectors(path, o.agree, o.seed);
      std::string why;
      if (const auto measured = model_from_findings(path, r.paths.back().findings, why))
        r.agreement.push_back(compare_with_model(path, vs, run(vs), *measured, "measured"));
      else
        r.no_model.push_back(path.name + ": " + why);
    }
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
    if (const std::string why = providers::mma_device_unsupported(path.instruction(), dev.arch); !why.empty()) {
      r.skipped.push_back(fmt::format("{}: {}", path.name, why));
      continue;
    }
    const auto vectors = mma_catalogue(path);
    std::vector<double> a, b, c;
    for (const auto& v : vectors) {
      a.insert(a.end(), v.a.begin(), v.a.end());
      b.insert(b.end(), v.b.begin(), v.b.end());
      c.push_back(v.c);
    }
    const std::vector<double> measured = providers::run_mma_on_device(o.device, path.instruction(), a, b, c);
    r.paths.push_back(mma_classify(path, vectors, measured));
    if (o.agree > 0)
      agree(r, r.paths.back(), dev.arch, o, [&](const std::vector<mma_vector>& vs) {
        std::vector<double> va, vb, vc;
        for (const auto& v : vs) {
          va.insert(va.end(), v.a.begin(), v.a.end());
          vb.insert(vb.end(), v.b.begin(), v.b.end());
          vc.push_back(v.c);
        }
        return providers::run_mma_on_device(o.device, path.instruction(), va, vb, vc);
      });
  }
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
                  {"overflow_to_inf", optional_json(f.overflow_to_inf)},
                  {"integer_overflow", optional_json(f.integer_overflow)}};
    paths.push_back(json{{"path", c.path.name},
                         {"input", std::string(formats::name(c.path.input))},
                         {"k", c.path.k},
                         {"accumulator", providers::mma_accumulator_name(c.path.accumulator)},
                         {"findings", findings},
                         {"properties", props}});
  }
  json agreement = json::array();
  for (const auto& a : r.agreement) {
    json families = json::object();
    for (const auto& [name, counts] : a.families) families[name] = {{"equal", counts.first}, {"vectors", counts.second}};
    json first = json::array();
    for (const auto& d : a.first) {
      json v = vector_json(d.vector);
      v["device"] = number(d.device);
      v["model"] = number(d.model);
      first.push_back(v);
    }
    agreement.push_back(json{{"path", a.path}, {"model", a.model}, {"model_text", a.model_text},
                             {"vectors", a.vectors}, {"equal", a.equal}, {"families", families},
                             {"first_disagreements", first}});
  }
  return json{{"mma_schema_version", 1},
              {"source", r.source},
              {"agreement", agreement},
              {"no_measured_model", r.no_model},
              {"method", "docs/hardware.md: Fasi, Higham, Mikaitis, Pranesh 2021 (PeerJ CS 7:e330); MMA-Sim "
                         "(arXiv 2511.10909)"},
              {"paths", paths},
              {"skipped", r.skipped}};
}

namespace {

double read_number(const json& j, const std::string& place) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto t = j.get<std::string>();
    if (t == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (t == "inf") return std::numeric_limits<double>::infinity();
    if (t == "-inf") return -std::numeric_limits<double>::infinity();
  }
  throw_input_error(place, "expected a number (or \"nan\", \"inf\", \"-inf\")");
}

}  // namespace

json run_mma_vectors(const json& doc, const mma_run_options& o, const std::string& place) {
  if (!doc.is_object() || !doc.contains("paths") || !doc["paths"].is_array())
    throw_input_error(place, "expected {\"paths\": [...]} (the layout of mma --emit-vectors)");
  std::optional<emu::mma_model> model;
  if (o.model) model = emu::find_mma_model(*o.model, "--model");
  json out = json::array();
  std::size_t total = 0;
  for (std::size_t pi = 0; pi < doc["paths"].size(); ++pi) {
    const json& p = doc["paths"][pi];
    const std::string pplace = fmt::format("{}: paths[{}]", place, pi);
    if (!p.is_object() || !p.contains("input") || !p.contains("k") || !p.contains("vectors") ||
        !p["input"].is_string() || !p["k"].is_number_integer() || !p["vectors"].is_array())
      throw_input_error(pplace, "needs \"input\" (a format name), \"k\" (an integer) and \"vectors\" (a list)");
    const formats::format_id input = formats::parse_format(p["input"].get<std::string>(), pplace + ".input");
    const auto k = p["k"].get<std::int64_t>();
    mma_path path;
    bool found = false;
    if (model) {
      found = model->input == input && model->k == k;
      path = mma_model_path(*model);
    } else {
      // The path the document names (mma.sync or wgmma, any accumulator), else the first device
      // path (mma.sync, fp32; s32 for i8) of the input format and k.
      const std::string named = p.contains("path") && p["path"].is_string() ? p["path"].get<std::string>() : "";
      for (const auto& d : mma_device_paths())
        if (d.input == input && d.k == k && (!found || d.name == named)) {
          path = d;
          found = true;
        }
    }
    if (!found)
      throw_input_error(pplace, fmt::format("no {} path takes {} with k = {}", model ? "--model" : "device",
                                            formats::name(input), k));
    total += p["vectors"].size();
    if (total > 1000000) throw_input_error(place, "more than 1,000,000 vectors");
    std::vector<double> a, b, c;
    std::vector<mma_vector> vs;
    for (std::size_t vi = 0; vi < p["vectors"].size(); ++vi) {
      const json& v = p["vectors"][vi];
      const std::string vplace = fmt::format("{}.vectors[{}]", pplace, vi);
      if (!v.is_object() || !v.contains("a") || !v.contains("b") || !v["a"].is_array() || !v["b"].is_array() ||
          v["a"].size() != static_cast<std::size_t>(k) || v["b"].size() != static_cast<std::size_t>(k))
        throw_input_error(vplace, fmt::format("needs \"a\" and \"b\" of {} values each", k));
      mma_vector mv;
      mv.id = v.value("id", std::to_string(vi));
      for (std::size_t i = 0; i < static_cast<std::size_t>(k); ++i) {
        mv.a.push_back(read_number(v["a"][i], vplace + ".a"));
        mv.b.push_back(read_number(v["b"][i], vplace + ".b"));
        if (!emu::mma_representable(input, mv.a.back()) || !emu::mma_representable(input, mv.b.back()))
          throw_input_error(vplace, fmt::format("a[{0}] or b[{0}] is not a value of {1}", i, formats::name(input)));
      }
      mv.c = v.contains("c") ? read_number(v["c"], vplace + ".c") : 0.0;
      if (!mma_accumulator_holds(path, mv.c))
        throw_input_error(vplace, fmt::format("c is not a value of the {} accumulator of {}",
                                              providers::mma_accumulator_name(path.accumulator), path.name));
      a.insert(a.end(), mv.a.begin(), mv.a.end());
      b.insert(b.end(), mv.b.begin(), mv.b.end());
      c.push_back(mv.c);
      vs.push_back(std::move(mv));
    }
    std::vector<double> measured;
    if (model) {
      for (const auto& v : vs) measured.push_back(emu::mma_dot(*model, v.a, v.b, v.c, "--model " + model->name));
    } else if (!vs.empty()) {
      measured = providers::run_mma_on_device(o.device, path.instruction(), a, b, c);
    }
    json vectors = json::array();
    for (std::size_t i = 0; i < vs.size(); ++i) {
      json v = vector_json(vs[i]);
      v["measured"] = number(measured[i]);
      vectors.push_back(v);
    }
    out.push_back(json{{"path", path.name}, {"input", std::string(formats::name(input))}, {"k", k}, {"vectors", vectors}});
  }
  return json{{"mma_schema_version", 1}, {"paths", out}};
}

json mma_vectors_json(const std::vector<mma_path>& paths) {
  json out = json::array();
  for (const auto& p : paths) {
    json vectors = json::array();
    for (const auto& v : mma_catalogue(p)) vectors.push_back(vector_json(v));
    out.push_back(json{{"path", p.name},
                       {"input", std::string(formats::name(p.input))},
                       {"k", p.k},
                       {"accumulator", providers::mma_accumulator_name(p.accumulator)},
                       {"vectors", vectors}});
  }
  return json{{"mma_schema_version", 1}, {"paths", out}};
}

}  // namespace numprobe::probes
