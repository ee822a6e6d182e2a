// `quant --backend exec:'CMD'`: a user's quantize kernel as an external program. numprobe writes
// x.npy [M, N] float32 and case.json (the scheme under the CLI's own names) into a fresh
// directory, runs CMD there, and reads back (examples/exec/README.md, "quant"):
//   codes.npy        [M, N] (or M*N) uint8, one unpacked element code per element (required)
//   scales.npy       one stored scale per block, blocks row-major over the grid
//                    [grid_rows, grid_cols] (any shape with that many entries): uint8 codes for
//                    e4m3fn/e8m0 scale formats, or float values (float32/float64/float16) of the
//                    stored scale, which must be exact in the scale format (required)
//   zero_points.npy  [blocks] uint8 (asym schemes; required there)
//   tensor_scale.npy [1] float32 (nvfp4; required there)
//   dequant.npy      [M, N] float32 or float64 (optional)
// The check itself (codes, scales, zero points, tensor scale bit for bit against the reference
// codec on the same fp32 inputs) is the one `quant --backend cuda` uses (compare_quant).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"
#include "numprobe/io/npy.hpp"
#include "src/providers/exec_provider_files.hpp"
#include "src/providers/exec_provider_process.hpp"
#include "src/providers/knobs.hpp"
#include "src/providers/quant_provider.hpp"

namespace numprobe {
namespace {

using formats::format_id;
using formats::scheme_kind;

std::uint64_t count_of(const std::vector<std::uint64_t>& s) {
  std::uint64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string rounding_name(formats::rounding r) {
  switch (r) {
    case formats::rounding::m_nearest_even: return "rne";
    case formats::rounding::m_toward_zero: return "rtz";
    case formats::rounding::m_stochastic: return "stochastic";
  }
  return "rne";
}

std::string overflow_name(formats::overflow o) {
  switch (o) {
    case formats::overflow::m_saturate: return "saturate";
    case formats::overflow::m_nan: return "nan";
    case formats::overflow::m_inf: return "inf";
    case formats::overflow::m_format_default: return "format-default";
  }
  return "saturate";
}

// The convention axes that apply to the scheme (NVFP4: scale_division, scale_floor, scale_arith;
// MX: rule), under their report names: the command is told which rules the reference applies.
nlohmann::json conventions_json(const formats::scheme_config& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [axis, value] : formats::convention_values(c)) j[std::string(axis)] = std::string(value);
  return j;
}

class exec_quant_provider final : public quant_provider {
 public:
  exec_quant_provider(const std::string& backend, const quant_exec_options& o) : m_opts(o) {
    m_command = parse_backend_spec(backend).arg;  // the caller routes exec:... here only
    if (m_command.empty())
      throw_input_error("--backend exec", "expected exec:CMD, e.g. exec:'python3 adapter.py {in}'");
    m_argv = exec::split_command(m_command, "--backend exec");
    exec::require_placeholders(m_argv, "--backend exec");
    if (!(o.timeout_s > 0)) throw_input_error("--exec-timeout", "must be a positive number of seconds");
  }

  [[nodiscard]] std::string name() const override { return fmt::format("exec[{}]", m_command); }

  [[nodiscard]] std::string unsupported(const formats::scheme_config& c) const override {
    if (formats::info(c.element).storage_bits > 8)
      return fmt::format("codes.npy holds uint8 codes; {} elements are wider",
                         formats::name(c.element));
    return {};
  }

  [[nodiscard]] quant_device_output quantize(const formats::scheme_config& c,
                                             std::span<const float> x, std::int64_t rows,
                                             std::int64_t cols) override {
    const std::string dir = exec::make_temp_dir("numprobe-quant");
    const std::string who = fmt::format("exec backend, quant {} [{}x{}]",
                                        m_opts.scheme_name.empty() ? std::string(formats::name(c.kind))
                                                                   : m_opts.scheme_name,
                                        rows, cols);
    try {
      write_case(dir, c, x, rows, cols);
      exec::run_case_command(m_argv, dir, m_opts.timeout_s, who);
      auto out = read_outputs(dir, c, rows, cols, who);
      finish(dir);
      return out;
    } catch (const error& e) {
      finish(dir);
      if (!m_opts.keep) throw;
      throw error(e.code(), "", fmt::format("{} (files kept in {})", e.what(), dir));
    }
  }

  [[nodiscard]] nlohmann::json metadata() const override {
    nlohmann::json j = {{"command", m_command}, {"timeout_s", m_opts.timeout_s}};
    if (m_opts.keep && !m_last_dir.empty()) j["kept_dir"] = m_last_dir;
    return j;
  }

 private:
  void write_case(const std::string& dir, const formats::scheme_config& c, std::span<const float> x,
                  std::int64_t rows, std::int64_t cols) {
    const std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(rows),
                                           static_cast<std::uint64_t>(cols)};
    io::write_npy(dir + "/x.npy", shape, std::vector<float>(x.begin(), x.end()));
    const auto g = formats::grid_of(c, rows, cols);
    const bool one = c.kind == scheme_kind::m_tensor;
    nlohmann::json j = {{"format", "numprobe-case"},
                        {"version", 1},
                        {"op", "quant"},
                        {"scheme", m_opts.scheme_name},
                        {"kind", std::string(formats::name(c.kind))},
                        {"element", std::string(formats::name(c.element))},
                        {"scale_format", std::string(formats::name(c.scale_format))},
                        {"axis", c.axis},
                        {"group", c.group},
                        {"block", {c.block_rows, c.block_cols}},
                        {"amax_floor", c.amax_floor},
                        {"rule", std::string(formats::name(c.rule))},
                        {"conventions", conventions_json(c)},
                        {"rounding", rounding_name(c.round)},
                        {"overflow", overflow_name(c.over)},
                        {"seed", c.seed},
                        {"zero_point_bits", c.zero_point_bits},
                        {"rows", rows},
                        {"cols", cols},
                        {"grid", {{"rows", one ? 1 : g.grid_rows},
                                  {"cols", one ? 1 : g.grid_cols},
                                  {"block_rows", g.block_rows},
                                  {"block_cols", g.block_cols}}},
                        {"layout", {{"x", {rows, cols}},
                                    {"codes", {rows, cols}},
                                    {"scales", {one ? 1 : g.grid_rows, one ? 1 : g.grid_cols}}}}};
    std::ofstream out(dir + "/case.json");
    out << j.dump(2) << "\n";
    if (!out.flush()) throw_backend_error(dir + "/case.json", "write failed");
  }

  quant_device_output read_outputs(const std::string& dir, const formats::scheme_config& c,
                                   std::int64_t rows, std::int64_t cols, const std::string& who) {
    auto fail = [&](const std::string& file, const std::string& what) -> void {
      throw_backend_error(who + ": " + dir + "/" + file, what);
    };
    auto load = [&](const std::string& file) -> io::tensor_view {
      const std::string path = dir + "/" + file;
      if (!std::filesystem::exists(path)) fail(file, "the kernel wrote no " + file);
      try {
        return io::read_npy(path);
      } catch (const error& e) {
        fail(file, fmt::format("not a readable .npy file ({})", e.what()));
      }
      return {};
    };
    const auto n = static_cast<std::uint64_t>(rows * cols);
    quant_device_output out;
    out.conversion = "external command";

    const auto codes = load("codes.npy");
    if (codes.dtype != io::dtype::m_u8 && codes.dtype != io::dtype::m_raw8)
      fail("codes.npy", fmt::format("dtype {} where uint8 (one code per element) is expected",
                                    io::name(codes.dtype)));
    if (count_of(codes.shape) != n)
      fail("codes.npy", fmt::format("shape {} where [{}, {}] is expected", exec::shape_text(codes.shape),
                                    rows, cols));
    out.codes.resize(n);
    for (std::uint64_t i = 0; i < n; ++i) out.codes[i] = static_cast<std::uint8_t>(codes.bytes[i]);

    const auto g = formats::grid_of(c, rows, cols);
    const std::uint64_t blocks =
        c.kind == scheme_kind::m_tensor ? 1 : static_cast<std::uint64_t>(g.count());
    const auto scales = load("scales.npy");
    if (count_of(scales.shape) != blocks)
      fail("scales.npy", fmt::format("shape {} where [{}, {}] ({} block scales) is expected",
                                     exec::shape_text(scales.shape), c.kind == scheme_kind::m_tensor ? 1 : g.grid_rows,
                                     c.kind == scheme_kind::m_tensor ? 1 : g.grid_cols, blocks));
    const int sbits = formats::info(c.scale_format).storage_bits;
    if (scales.dtype == io::dtype::m_u8 || scales.dtype == io::dtype::m_raw8) {
      if (sbits != 8)
        fail("scales.npy", fmt::format("uint8 codes for {} scales; write their float values",
                                       formats::name(c.scale_format)));
      for (std::uint64_t i = 0; i < blocks; ++i)
        out.scale_codes.push_back(static_cast<std::uint8_t>(scales.bytes[i]));
    } else if (scales.dtype == io::dtype::m_f32 || scales.dtype == io::dtype::m_f64 ||
               scales.dtype == io::dtype::m_f16) {
      const auto v = scales.to_doubles();
      for (std::uint64_t i = 0; i < blocks; ++i) {
        if (!std::isfinite(v[i])) ++out.nonfinite;  // a finding; its code never matches
        // The stored scale's code; a value the scale format cannot hold has none (it can never
        // match the reference's code, which is listed as a mismatch).
        const std::uint32_t code = formats::encode(c.scale_format, v[i]);
        out.scale_codes.push_back(formats::decode(c.scale_format, code) == v[i] ? code : 0xFFFFFFFFu);
      }
    } else {
      fail("scales.npy", fmt::format("dtype {} where uint8 codes or float values are expected",
                                     io::name(scales.dtype)));
    }

    if (c.kind == scheme_kind::m_asym) {
      const auto z = load("zero_points.npy");
      if (z.dtype != io::dtype::m_u8 || count_of(z.shape) != blocks)
        fail("zero_points.npy", fmt::format("{} {} where uint8 [{}] is expected", io::name(z.dtype),
                                            exec::shape_text(z.shape), blocks));
      for (std::uint64_t i = 0; i < blocks; ++i) out.zero_points.push_back(static_cast<std::uint8_t>(z.bytes[i]));
    }
    if (c.kind == scheme_kind::m_nvfp4) {
      const auto t = load("tensor_scale.npy");
      if ((t.dtype != io::dtype::m_f32 && t.dtype != io::dtype::m_f64) || count_of(t.shape) != 1)
        fail("tensor_scale.npy", fmt::format("{} {} where one float32 is expected",
                                             io::name(t.dtype), exec::shape_text(t.shape)));
      out.tensor_scale = t.to_doubles()[0];
      if (!std::isfinite(out.tensor_scale)) ++out.nonfinite;  // never matches the reference's
    }
    if (std::filesystem::exists(dir + "/dequant.npy")) {
      const auto d = load("dequant.npy");
      if ((d.dtype != io::dtype::m_f32 && d.dtype != io::dtype::m_f64) || count_of(d.shape) != n)
        fail("dequant.npy", fmt::format("{} {} where float32 or float64 [{}, {}] is expected",
                                        io::name(d.dtype), exec::shape_text(d.shape), rows, cols));
      out.dequant = d.to_doubles();
      out.dequant_dtype = d.dtype == io::dtype::m_f32 ? "float32" : "float64";
    }
    return out;
  }

  void finish(const std::string& dir) {
    if (m_opts.keep) m_last_dir = dir;
    else exec::remove_tree(dir);
  }

  quant_exec_options m_opts;
  std::string m_command;
  std::vector<std::string> m_argv;
  std::string m_last_dir;
};

}  // namespace

std::unique_ptr<quant_provider> make_exec_quant_provider(const std::string& backend,
                                                         const quant_exec_options& o) {
  return std::make_unique<exec_quant_provider>(backend, o);
}

}  // namespace numprobe
