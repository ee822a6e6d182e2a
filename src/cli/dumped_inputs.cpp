#include "src/cli/dumped_inputs.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "numprobe/base/error.hpp"
#include "numprobe/io/regular_file.hpp"
#include "numprobe/io/load_tensor.hpp"
#include "src/providers/exec_provider_files.hpp"

namespace numprobe::cli {
namespace {

namespace fs = std::filesystem;

// The dumped output, served as a provider so the ordinary attention probe judges it.
class dumped_candidate final : public attention_provider {
 public:
  dumped_candidate(std::string path, tile_shape tiles, bool assumed)
      : m_path(std::move(path)), m_tiles(tiles), m_assumed(assumed) {}
  std::string name() const override {
    return fmt::format("candidate[{}{}]", m_path,
                       m_assumed ? fmt::format(", tile {}x{} assumed (--tile)", m_tiles.q, m_tiles.k) : "");
  }
  tile_shape tiles() const override { return m_tiles; }
  bool computes_row_subsets() const override { return false; }
  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    const fs::path lse = fs::path(m_path).parent_path() / "lse.npy";
    exec::output_read_options ro;
    ro.code = exit_code::m_input;
    ro.who = "--candidate";
    return exec::read_attention_output(m_path, lse.string(), in.c(), rows, ro);
  }
  nlohmann::json metadata() const override {
    return {{"candidate", m_path}, {"tile_assumed", m_assumed}};
  }

 private:
  std::string m_path;
  tile_shape m_tiles;
  bool m_assumed;
};

std::vector<double> load_input(const fs::path& dir, const std::string& name,
                               const attention_case& c, std::uint64_t rows, std::int64_t heads) {
  const fs::path npy = dir / (name + ".npy");
  const fs::path st = dir / "inputs.safetensors";
  std::string spec;
  if (fs::exists(npy)) spec = npy.string();
  else if (fs::exists(st)) spec = st.string() + ":" + name;
  else
    throw_input_error((dir / name).string() + ".npy",
                      "missing (expected it, or a tensor '" + name + "' in inputs.safetensors)");
  io::tensor_view t = io::load_tensor(spec);
  if (t.dtype == io::dtype::m_raw8) {
    // ml_dtypes writes every 8-bit float as '<V1': the case's dtype says which.
    const auto as = io::from_format(c.dtype);
    if (!as || io::bits(*as) != 8)
      throw_input_error(t.place(), fmt::format("opaque 8-bit data but the case dtype is {}",
                                               formats::name(c.dtype)));
    t = t.reinterpret(*as);
  }
  const auto b = static_cast<std::uint64_t>(c.batch), h = static_cast<std::uint64_t>(heads),
             d = static_cast<std::uint64_t>(c.head_dim);
  const std::vector<std::uint64_t> flat{rows, h, d}, batched{b, rows / b, h, d};
  if (t.shape != flat && t.shape != batched)
    throw_input_error(t.place(), fmt::format("shape has {} dims / {} elements where [{}, {}, {}] is expected",
                                             t.shape.size(), t.element_count(), rows, h, d));
  return t.to_doubles();
}

}  // namespace

dumped_attention load_dumped_attention(const std::string& dir_text, const std::string& candidate,
                                       const std::optional<tile_shape>& tile) {
  if (dir_text.empty()) throw_input_error("--candidate", "needs --inputs DIR");
  const fs::path dir(dir_text);
  const fs::path case_path = dir / "case.json";
  // Read through the regular-file check: a FIFO or device named case.json must not block.
  const std::string text = io::read_text_file(case_path.string(), 1 << 20, "case file (--inputs DIR needs DIR/case.json)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(case_path.string(), fmt::format("not valid JSON: {}", e.what()));
  }
  const attention_case c = exec::case_from_json(j, case_path.string());
  auto q = load_input(dir, "q", c, static_cast<std::uint64_t>(c.batch * c.t()), c.heads);
  auto k = load_input(dir, "k", c, static_cast<std::uint64_t>(c.batch * c.seq), c.kv_heads);
  auto v = load_input(dir, "v", c, static_cast<std::uint64_t>(c.batch * c.seq), c.kv_heads);

  tile_shape tiles{64, 64};
  bool assumed = true;
  if (tile) {
    tiles = *tile;
    assumed = false;
  } else if (j.contains("tile") && j["tile"].is_array() && j["tile"].size() == 2) {
    tiles = {j["tile"][0].get<std::int64_t>(), j["tile"][1].get<std::int64_t>()};
    if (!tiles.known()) throw_input_error(case_path.string() + ": tile", "expected [Bq, Bk] > 0");
    assumed = false;
  }
  const std::string cand = candidate.empty() ? (dir / "o.npy").string() : candidate;
  return {attention_inputs(c, std::move(q), std::move(k), std::move(v)),
          std::make_unique<dumped_candidate>(cand, tiles, assumed)};
}

}  // namespace numprobe::cli
