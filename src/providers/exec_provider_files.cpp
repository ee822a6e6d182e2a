#include "src/providers/exec_provider_files.hpp"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "numprobe/io/npy.hpp"

namespace numprobe::exec {
namespace {

using shape_t = std::vector<std::uint64_t>;

void write_tensor(const std::string& path, const shape_t& shape, const std::vector<double>& v,
                  bool as_f64) {
  if (as_f64) {
    io::write_npy(path, shape, v);
    return;
  }
  // Exact: the values are already rounded to a format of at most 32 bits that float holds.
  std::vector<float> f(v.begin(), v.end());
  io::write_npy(path, shape, f);
}

template <class T>
T field(const nlohmann::json& j, const char* name, const std::string& place) {
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(place + ": " + name,
                      j.contains(name) ? "has the wrong type" : "is missing");
  }
}

}  // namespace

std::string shape_text(std::span<const std::uint64_t> s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

nlohmann::json case_json(const attention_case& c) {
  nlohmann::json j = {{"format", "numprobe-case"},
                      {"version", k_case_file_version},
                      {"op", "attention"},
                      {"case", c.id()},
                      {"batch", c.batch},
                      {"seq", c.seq},
                      {"queries", c.t()},
                      {"heads", c.heads},
                      {"kv_heads", c.kv_heads},
                      {"head_dim", c.head_dim},
                      {"scale", c.softmax_scale()},
                      {"mask", std::string(to_string(c.mask))},
                      {"window", c.window},
                      {"softcap", c.softcap},
                      {"dtype", std::string(formats::name(c.dtype))},
                      {"dist", std::string(to_string(c.dist))},
                      {"seed", c.seed},
                      {"inputs_dtype", c.dtype == formats::format_id::m_f64 ? "float64" : "float32"},
                      {"layout",
                       {{"q", {c.batch * c.t(), c.heads, c.head_dim}},
                        {"k", {c.batch * c.seq, c.kv_heads, c.head_dim}},
                        {"v", {c.batch * c.seq, c.kv_heads, c.head_dim}},
                        {"o", {c.batch * c.t(), c.heads, c.head_dim}},
                        {"lse", {c.batch * c.t(), c.heads}}}}};
  if (c.mask == mask_kind::m_ranges) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& kr : c.ranges) r.push_back({kr.begin, kr.end});
    j["ranges"] = r;
  }
  // A ragged batch (issue 30; only for kernels that said they read it, --ragged): member b's
  // keys are its first seq_lens[b] of S slots, its queries aligned to their end.
  if (c.ragged()) j["seq_lens"] = c.seq_lens;
  return j;
}

attention_case case_from_json(const nlohmann::json& j, const std::string& place) {
  if (!j.is_object()) throw_input_error(place, "expected a JSON object");
  attention_case c;
  if (j.contains("case")) {
    c = parse_attention_case(field<std::string>(j, "case", place));
    auto agree = [&](const char* name, std::int64_t have) {
      if (j.contains(name) && field<std::int64_t>(j, name, place) != have)
        throw_input_error(place + ": " + name,
                          fmt::format("{} disagrees with the case id ({})",
                                      field<std::int64_t>(j, name, place), have));
    };
    agree("batch", c.batch);
    agree("seq", c.seq);
    agree("queries", c.t());
    agree("heads", c.heads);
    agree("kv_heads", c.kv_heads);
    agree("head_dim", c.head_dim);
  } else {
    c.seq = field<std::int64_t>(j, "seq", place);
    c.heads = field<std::int64_t>(j, "heads", place);
    c.kv_heads = field<std::int64_t>(j, "kv_heads", place);
    c.head_dim = field<std::int64_t>(j, "head_dim", place);
    c.dtype = formats::parse_format(field<std::string>(j, "dtype", place), place + ": dtype");
    if (j.contains("batch")) c.batch = field<std::int64_t>(j, "batch", place);
    if (j.contains("queries")) c.queries = field<std::int64_t>(j, "queries", place);
    if (c.queries == c.seq) c.queries = 0;  // T = S is the default spelling
    if (j.contains("scale")) c.scale = field<double>(j, "scale", place);
    if (c.scale != 0.0 && c.scale == 1.0 / std::sqrt(static_cast<double>(c.head_dim)))
      c.scale = 0.0;
    c.mask = j.contains("mask") ? parse_mask(field<std::string>(j, "mask", place), place + ": mask")
                                : mask_kind::m_none;
    if (j.contains("window")) c.window = field<std::int64_t>(j, "window", place);
    if (j.contains("softcap")) c.softcap = field<double>(j, "softcap", place);
    if (j.contains("seed")) c.seed = field<std::uint64_t>(j, "seed", place);
    if (j.contains("seq_lens")) c.seq_lens = field<std::vector<std::int64_t>>(j, "seq_lens", place);
    if (c.mask == mask_kind::m_ranges) {
      for (const auto& r : j.at("ranges"))
        c.ranges.push_back({r.at(0).get<std::int64_t>(), r.at(1).get<std::int64_t>()});
    }
  }
  c.validate();
  return c;
}

void write_case_dir(const std::string& dir, const attention_inputs& in) {
  const attention_case& c = in.c();
  const bool f64 = c.dtype == formats::format_id::m_f64;
  const auto u = [](std::int64_t x) { return static_cast<std::uint64_t>(x); };
  write_tensor(dir + "/q.npy", {u(c.batch * c.t()), u(c.heads), u(c.head_dim)}, in.q_all(), f64);
  const shape_t kv{u(c.batch * c.seq), u(c.kv_heads), u(c.head_dim)};
  write_tensor(dir + "/k.npy", kv, std::vector<double>(in.k().begin(), in.k().end()), f64);
  write_tensor(dir + "/v.npy", kv, std::vector<double>(in.v().begin(), in.v().end()), f64);
  std::ofstream out(dir + "/case.json");
  out << case_json(c).dump(2) << "\n";
  if (!out.flush()) throw_backend_error(dir + "/case.json", "write failed");
}

attention_output read_attention_output(const std::string& o_path,
                                       const std::optional<std::string>& lse_path,
                                       const attention_case& c,
                                       std::span<const std::int64_t> rows,
                                       const output_read_options& opts) {
  auto fail = [&](const std::string& file, const std::string& what) -> void {
    throw error(opts.code, opts.who.empty() ? file : opts.who + ": " + file, what);
  };
  const auto bt = static_cast<std::uint64_t>(c.batch * c.t());
  const auto hq = static_cast<std::uint64_t>(c.heads);
  const auto d = static_cast<std::uint64_t>(c.head_dim);
  const auto b = static_cast<std::uint64_t>(c.batch), t = static_cast<std::uint64_t>(c.t());

  auto load = [&](const std::string& path, const char* what, const shape_t& flat,
                  const shape_t& batched) -> std::vector<double> {
    if (!std::filesystem::exists(path)) fail(path, fmt::format("the kernel wrote no {}", what));
    io::tensor_view view;
    try {
      view = io::read_npy(path);
    } catch (const error& e) {
      fail(path, fmt::format("not a readable .npy file ({})", e.what()));
    }
    using io::dtype;
    if (view.dtype != dtype::m_f32 && view.dtype != dtype::m_f16 && view.dtype != dtype::m_f64 &&
        view.dtype != dtype::m_bf16)
      fail(path, fmt::format("dtype {} is not float32, float16, float64 or bfloat16",
                             io::name(view.dtype)));
    if (view.shape != flat && view.shape != batched)
      fail(path, fmt::format("shape {} where {} is expected", shape_text(view.shape),
                             shape_text(flat)));
    return view.to_doubles();
  };

  const auto o_all = load(o_path, "o.npy", {bt, hq, d}, {b, t, hq, d});
  std::vector<double> lse_all;
  const bool have_lse = lse_path && std::filesystem::exists(*lse_path);
  if (have_lse) lse_all = load(*lse_path, "lse.npy", {bt, hq}, {b, t, hq});

  // NaN/Inf are not checked here: a kernel that writes them has run and produced a result, and
  // the metrics count and place them (an accuracy finding, exit 1), as for the emulator.
  attention_output out = make_poisoned_output({rows.begin(), rows.end()}, c.heads, c.head_dim);
  out.lse_known = have_lse;
  const std::size_t row_elems = hq * d;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    std::copy_n(o_all.begin() + static_cast<std::ptrdiff_t>(r * row_elems), row_elems,
                out.o.begin() + static_cast<std::ptrdiff_t>(i * row_elems));
    if (have_lse)
      std::copy_n(lse_all.begin() + static_cast<std::ptrdiff_t>(r * hq), hq,
                  out.lse.begin() + static_cast<std::ptrdiff_t>(i * hq));
  }
  count_unreturned_nonfinite(out, static_cast<std::int64_t>(bt), [&](std::size_t i) { return o_all[i]; },
                             [&](std::size_t i) { return lse_all[i]; });
  return out;
}

}  // namespace numprobe::exec
