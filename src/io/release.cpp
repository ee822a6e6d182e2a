// Released quantized checkpoints (numprobe/io/release.hpp): finding the files, detecting the
// layout and dispatching to the layout readers (release_layouts.hpp). The detection rules are
// documented in docs/checkpoints.md.
#include "numprobe/io/release.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "numprobe/base/error.hpp"
#include "numprobe/io/gguf.hpp"
#include "numprobe/io/regular_file.hpp"
#include "src/io/release_layouts.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;

struct layout_name {
  release_layout id;
  std::string_view name;
};

constexpr std::array<layout_name, 12> k_names{{
    {release_layout::m_modelopt_nvfp4, "modelopt-nvfp4"},
    {release_layout::m_ct_nvfp4, "ct-nvfp4"},
    {release_layout::m_ct_mxfp4, "ct-mxfp4"},
    {release_layout::m_ct_fp8, "ct-fp8"},
    {release_layout::m_modelopt_fp8, "modelopt-fp8"},
    {release_layout::m_ct_int4, "ct-int4"},
    {release_layout::m_gptoss_mxfp4, "gptoss-mxfp4"},
    {release_layout::m_deepseek_fp8, "deepseek-fp8"},
    {release_layout::m_awq, "awq"},
    {release_layout::m_gptq_v1, "gptq-v1"},
    {release_layout::m_gptq_v2, "gptq-v2"},
    {release_layout::m_gguf, "gguf"},
}};

std::string known_names() {
  std::string out;
  for (const auto& n : k_names) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

// config.json and hf_quant_config.json are kilobytes; the cap keeps a wrong file from filling
// memory.
constexpr std::size_t k_side_json_max_bytes = 100'000'000;

nlohmann::json read_json(const fs::path& p) {
  // A folder, FIFO or device named config.json is refused by name (exit 2), never read.
  const std::string text = read_text_file(p, k_side_json_max_bytes, "JSON file");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    throw_input_error(p.string(), "malformed JSON: " + what);
  }
}

// The checkpoint file in a folder: an index .json (model.safetensors.index.json first), else
// the one .safetensors file.
// Whether a folder entry is there at all (a dangling link or a loop included: reading it then
// says why it is not a regular file), without throwing.
bool entry_present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

fs::path checkpoint_in(const fs::path& dir) {
  if (entry_present(dir / "model.safetensors.index.json")) return dir / "model.safetensors.index.json";
  std::vector<fs::path> indexes, files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw_input_error(dir.string(), "cannot list the folder: " + ec.message());
  for (const auto& e : it) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".safetensors.index.json")) indexes.push_back(e.path());
    if (n.ends_with(".safetensors")) files.push_back(e.path());
  }
  if (indexes.size() == 1) return indexes[0];
  if (indexes.size() > 1) throw_input_error(dir.string(), "several *.safetensors.index.json: pass one");
  if (files.size() == 1) return files[0];
  if (files.empty()) throw_input_error(dir.string(), "no .safetensors file or index .json");
  throw_input_error(dir.string(), "several .safetensors files and no index .json: pass one");
}

// config.json's quantization_config, else hf_quant_config.json (ModelOpt's own file) as a
// whole; null when neither is there.
nlohmann::json quantization_config_in(const fs::path& dir, std::string& from) {
  from = "config.json quantization_config";
  const fs::path cfg = dir / "config.json";
  if (entry_present(cfg)) {
    const auto j = read_json(cfg);
    if (!j.is_object()) throw_input_error(cfg.string(), "not a JSON object");
    if (j.contains("quantization_config")) {
      const auto& qc = j["quantization_config"];
      if (!qc.is_object())
        throw_input_error(cfg.string() + ":quantization_config", "not a JSON object");
      return qc;
    }
  }
  const fs::path hf = dir / "hf_quant_config.json";
  if (entry_present(hf)) {
    auto j = read_json(hf);
    if (!j.is_object()) throw_input_error(hf.string(), "not a JSON object");
    from = "hf_quant_config.json";
    return j;
  }
  return nullptr;
}

std::string config_summary(const nlohmann::json& qc) {
  std::string out;
  for (const char* key : {"quant_method", "format", "quant_algo"}) {
    if (qc.contains(key) && qc[key].is_string())
      out += (out.empty() ? "" : ", ") + std::string(key) + "=" + qc[key].get<std::string>();
  }
  if (qc.contains("quantization") && qc["quantization"].is_object())
    out += (out.empty() ? "" : ", ") + std::string("quant_algo=") +
           qc["quantization"].value("quant_algo", std::string("?"));
  return out;
}

// The one .gguf file of a folder that holds no safetensors checkpoint; empty when there is none.
fs::path gguf_in(const fs::path& dir) {
  std::vector<fs::path> ggufs;
  bool safetensors = false;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return {};
  for (const auto& e : it) {
    const std::string n = e.path().filename().string();
    if (n.ends_with(".gguf")) ggufs.push_back(e.path());
    if (n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json")) safetensors = true;
  }
  if (safetensors || ggufs.empty()) return {};
  if (ggufs.size() > 1) throw_input_error(dir.string(), "several .gguf files: pass one");
  return ggufs[0];
}

const detail::layout_reader& reader_of(release_layout l) {
  for (const auto& r : detail::layout_readers())
    if (r.id == l) return r;
  throw_input_error("--layout", "layout " + std::string(name(l)) + " has no reader in this build");
}

}  // namespace

std::string_view name(release_layout l) {
  for (const auto& n : k_names)
    if (n.id == l) return n.name;
  return "unknown";
}

release_layout parse_release_layout(std::string_view text, const std::string& place) {
  for (const auto& n : k_names)
    if (n.name == text) return n.id;
  throw_input_error(place, "unknown layout '" + std::string(text) + "' (known: " + known_names() + ")");
}

const std::vector<release_layout>& all_release_layouts() {
  static const std::vector<release_layout> all = [] {
    std::vector<release_layout> v;
    for (const auto& n : k_names) v.push_back(n.id);
    return v;
  }();
  return all;
}

namespace detail {

const std::vector<layout_reader>& layout_readers() {
  static const std::vector<layout_reader> readers = [] {
    std::vector<layout_reader> v;
    add_float_layouts(v);
    add_int_layouts(v);
    return v;
  }();
  return readers;
}

}  // namespace detail

release release::open(const fs::path& path, std::optional<release_layout> forced) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    // A loop or an unreadable path says why (why_not_regular), not a filesystem_error.
    const auto why = why_not_regular(path);
    throw_input_error(path.string(), why ? *why : "no such file or folder");
  }
  const bool is_dir = fs::is_directory(path, ec);
  // GGUF: by the file's magic (or the folder's one .gguf file), whatever its name says.
  const fs::path gguf_path = is_dir ? gguf_in(path) : gguf_file::has_magic(path) ? path : fs::path();
  if (!gguf_path.empty()) {
    if (forced && *forced != release_layout::m_gguf)
      throw_input_error("--layout", std::string(name(*forced)) + ": " + gguf_path.string() + " is a GGUF file");
    return open_gguf(gguf_path);
  }
  if (forced && *forced == release_layout::m_gguf)
    throw_input_error(path.string(), "--layout gguf: not a GGUF file (no GGUF magic)");
  const fs::path dir = is_dir ? path : path.parent_path().empty() ? fs::path(".") : path.parent_path();
  release r(checkpoint::open(is_dir ? checkpoint_in(path) : path));
  std::string config_from;
  r.m_qconfig = quantization_config_in(dir, config_from);
  const std::string place = path.string();

  const detail::layout_reader* chosen = nullptr;
  if (forced) {
    chosen = &reader_of(*forced);
    r.m_detected_by = "--layout";
  } else if (!r.m_qconfig.is_null()) {
    std::vector<const detail::layout_reader*> hits;
    for (const auto& rd : detail::layout_readers())
      if (rd.config_matches(r.m_qconfig)) hits.push_back(&rd);
    const std::string what = config_summary(r.m_qconfig);
    if (hits.empty())
      throw_input_error(place, "quantization_config (" + what +
                                   ") names no known layout; pass --layout (known: " +
                                   known_names() + ")");
    if (hits.size() > 1)
      throw_input_error(place, "quantization_config (" + what + ") matches both " +
                                   std::string(name(hits[0]->id)) + " and " +
                                   std::string(name(hits[1]->id)) + "; pass --layout");
    chosen = hits[0];
    // GPTQ v2 differs from v1 in the meaning of its zeros only, and ModelOpt FP8 from
    // compressed-tensors float-quantized in its config only, which names cannot show: their
    // readers' name checks stay false (names alone mean v1, ct-fp8), so those names stand for both.
    const auto* names = chosen->id == release_layout::m_gptq_v2        ? &reader_of(release_layout::m_gptq_v1)
                        : chosen->id == release_layout::m_modelopt_fp8 ? &reader_of(release_layout::m_ct_fp8)
                                                                        : chosen;
    if (!names->names_match(r.m_files))
      throw_input_error(place, "quantization_config says " + std::string(name(chosen->id)) +
                                   " but no tensor is named as that layout names them");
    r.m_detected_by = config_from + " (" + what + ")";
  } else {
    std::vector<const detail::layout_reader*> hits;
    for (const auto& rd : detail::layout_readers())
      if (rd.names_match(r.m_files)) hits.push_back(&rd);
    if (hits.empty())
      throw_input_error(place, "no quantized tensor of a known layout found (known: " +
                                   known_names() + ")");
    if (hits.size() > 1)
      throw_input_error(place, "tensor names match both " + std::string(name(hits[0]->id)) +
                                   " and " + std::string(name(hits[1]->id)) + "; pass --layout");
    chosen = hits[0];
    r.m_detected_by = "tensor names (" + std::string(name(chosen->id)) + ")";
  }
  r.m_layout = chosen->id;
  chosen->group(r.m_files, r.m_qconfig, r.m_tensors, r.m_passthrough);
  if (r.m_tensors.empty())
    throw_input_error(place, "no quantized tensor of layout " + std::string(name(r.m_layout)) +
                                 " found");
  return r;
}

void release::release_pages(const release_tensor& t) const noexcept {
  if (m_gguf) {
    if (const auto* g = m_gguf->find(t.name)) m_gguf->release_pages(*g);
    return;
  }
  if (!t.record.contains("tensors") || !t.record["tensors"].is_object()) return;
  for (const auto& [role, src] : t.record["tensors"].items()) {
    // The float layouts record {name, dtype, shape}, the integer ones the name alone.
    const nlohmann::json* n = src.is_object() && src.contains("name") ? &src["name"] : &src;
    if (!n->is_string()) continue;
    try {
      const tensor_view v = m_files.get(n->get<std::string>());
      if (!v.owner) continue;
      const auto at = static_cast<std::size_t>(v.bytes.data() - v.owner->bytes().data());
      v.owner->release_pages(at, v.bytes.size());
    } catch (...) {  // advice only: a tensor that cannot be opened again keeps its pages
    }
  }
}

release_slab release::decode_rows(const release_tensor& t, std::int64_t r0,
                                  std::int64_t r1) const {
  const auto it = std::find_if(m_tensors.begin(), m_tensors.end(), [&](const release_tensor& x) {
    return x.name == t.name && x.layout == t.layout;
  });
  if (it == m_tensors.end()) throw_input_error(t.name, "not a tensor of this release");
  const release_tensor& own = *it;  // the checked shape, not the caller's copy
  const std::string range = "rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ")";
  if (r0 < 0 || r1 < r0 || r1 > own.rows)
    throw_input_error(own.name, range + " outside [0, " + std::to_string(own.rows) + ")");
  const std::int64_t a = std::max<std::int64_t>(own.row_align, 1);
  if (r0 % a != 0 || (r1 % a != 0 && r1 != own.rows))
    throw_input_error(own.name, range + " off the layout's row grid of " + std::to_string(a));
  if (m_gguf) return detail::decode_gguf_rows(*m_gguf, own, r0, r1);
  return reader_of(own.layout).decode(m_files, own, r0, r1);
}

}  // namespace numprobe::io
