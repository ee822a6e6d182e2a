#pragma once
// Checks and lookups shared by the float layout readers (release_float.cpp, release_fp8.cpp):
// tensors by name, dtype and shape checks that name the tensor (exit 2), the record's source
// entries and the quantization_config fields they read. Private to numprobe: not installed.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "numprobe/base/error.hpp"
#include "src/io/release_layouts.hpp"

namespace numprobe::io::detail {

using json = nlohmann::json;
using entry = checkpoint::entry;

class name_index {
 public:
  explicit name_index(const checkpoint& ck) {
    for (const auto& e : ck.tensors()) m_by_name.emplace(e.name, &e);
  }
  [[nodiscard]] const entry* find(const std::string& n) const {
    const auto it = m_by_name.find(n);
    return it == m_by_name.end() ? nullptr : it->second;
  }

 private:
  std::map<std::string, const entry*> m_by_name;
};

inline std::string strip(const std::string& s, std::string_view tail) {
  return s.substr(0, s.size() - tail.size());
}

inline std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

inline json source(const entry& e) {
  return {{"name", e.name}, {"dtype", std::string(name(e.dtype))}, {"shape", e.shape}};
}

inline const entry& require(const name_index& ix, const std::string& n, const std::string& why) {
  const entry* e = ix.find(n);
  if (e == nullptr) throw_input_error(n, "missing: " + why);
  return *e;
}

inline void expect_dtype(const entry& e, dtype want, const std::string& layout_says) {
  if (e.dtype != want)
    throw_input_error(e.name, "dtype " + std::string(name(e.dtype)) + ", " + layout_says);
}

inline void expect_shape(const entry& e, const std::vector<std::uint64_t>& want,
                         const std::string& what) {
  if (e.shape != want)
    throw_input_error(e.name, "shape " + shape_text(e.shape) + ", expected " + shape_text(want) +
                                  " (" + what + ")");
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A tensor of one element (shape [] or [1]): its value, which must be finite and positive
// (a tensor scale that multiplies or divides every weight).
inline double positive_scalar(const checkpoint& ck, const entry& e, const std::string& role) {
  if (e.dtype != dtype::m_f32 && e.dtype != dtype::m_bf16 && e.dtype != dtype::m_f16)
    throw_input_error(e.name, "dtype " + std::string(name(e.dtype)) + ", " + role +
                                  " must be a float32/bf16/f16 scalar");
  if (checked_element_count(e.shape, e.name) != 1)
    throw_input_error(e.name, "shape " + shape_text(e.shape) + ", " + role + " is one value");
  double v = 0;
  ck.get(e.name).decode(0, std::span<double>(&v, 1));
  if (!std::isfinite(v) || v <= 0)
    throw_input_error(e.name, role + " is " + std::to_string(v) + ", must be finite and > 0");
  return v;
}

// Every entry not named in `used` goes to passthrough.
inline void pass_rest(const checkpoint& ck, const std::map<std::string, bool>& used,
               std::vector<std::string>& passthrough) {
  for (const auto& e : ck.tensors())
    if (!used.contains(e.name)) passthrough.push_back(e.name);
}

inline std::string str_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// compressed-tensors' format: the top-level "format", else the one format all config_groups
// share.
inline std::string ct_format(const json& qc) {
  if (str_at(qc, "quant_method") != "compressed-tensors") return "";
  std::string f = str_at(qc, "format");
  if (!f.empty() && f != "mixed-precision") return f;
  std::string shared;
  if (qc.contains("config_groups") && qc["config_groups"].is_object())
    for (const auto& [k, g] : qc["config_groups"].items()) {
      const std::string gf = str_at(g, "format");
      if (gf.empty() || (!shared.empty() && gf != shared)) return f;
      shared = gf;
    }
  return shared.empty() ? f : shared;
}

// Whether some entry named *`anchor` of dtype `d` has a sibling *`sibling` (of dtype `sd`
// when given).
inline bool has_pair(const checkpoint& ck, std::string_view anchor, dtype d, std::string_view sibling,
              std::optional<dtype> sd = std::nullopt) {
  const name_index ix(ck);
  for (const auto& e : ck.tensors()) {
    if (!e.name.ends_with(anchor) || e.dtype != d) continue;
    const entry* s = ix.find(strip(e.name, anchor) + std::string(sibling));
    if (s != nullptr && (!sd || s->dtype == *sd)) return true;
  }
  return false;
}

// A [rows, cols] tile from a config's JSON array (DeepSeek's weight_block_size,
// compressed-tensors' block_structure). Throws (exit 2) naming `place` unless both are > 0.
inline void parse_tile(const json& b, const std::string& place, std::int64_t& br,
                       std::int64_t& bc) {
  if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
      b[0].get<std::int64_t>() <= 0 || b[1].get<std::int64_t>() <= 0)
    throw_input_error(place, "expected [rows, cols] > 0");
  br = b[0].get<std::int64_t>();
  bc = b[1].get<std::int64_t>();
}

// The fp8 layouts (release_fp8.cpp), appended by add_float_layouts.
void add_fp8_layouts(std::vector<layout_reader>& out);

}  // namespace numprobe::io::detail
