// The integer layouts of released checkpoints (release_layouts.hpp): AWQ GEMM, GPTQ v1 and v2,
// and compressed-tensors pack-quantized int4. Each rule is cited (repository, file, function) in
// docs/checkpoints.md, "Integer layouts".
//
// All three store uint4 nibbles in int32 words, 8 per word, and dequantize W[o, i] =
// (q - z) * s[o, group(i)]. They differ in the packing axis, the nibble order, the zero's offset
// and where the scales' transpose sits; every reader below turns its layout into one int4_slab
// (nibbles, per-group scales and zeros of the slab's rows), and finish() does the arithmetic.
#include <cstdint>
#include <string>
#include <vector>

#include "src/io/release_int_common.hpp"

namespace numprobe::io::detail::int4 {
namespace {

// ---------------------------------------------------------------------------------- AWQ GEMM

bool awq_config(const json& qc) { return text_field(qc, {"quant_method", "method"}) == "awq"; }

// qweight [in, out/8] beside scales [groups, out]: the packing is along out.
bool packed_along_out(const checkpoint& ck, bool along_out) {
  const tensor_index ix(ck);
  for (const auto& e : ck.tensors()) {
    if (!has_named_suffix(e.name, ".qweight") || e.dtype != io::dtype::m_i32 || e.shape.size() != 2)
      continue;
    const auto* s = ix.find(e.name.substr(0, e.name.size() - 8) + ".scales");
    if (!s || s->shape.size() != 2) continue;
    return along_out ? e.shape[1] * k_per_word == s->shape[1] : e.shape[1] == s->shape[1];
  }
  return false;
}
bool awq_names(const checkpoint& ck) { return packed_along_out(ck, true); }

void awq_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
               std::vector<std::string>& passthrough) {
  const std::string version = text_field(qc, {"version", "format"});
  check(version.empty() || version == "gemm", "quantization_config.version",
        "'" + version + "': the AWQ reader takes the GEMM layout only");
  check(bool_field(qc, "zero_point").value_or(true), "quantization_config.zero_point",
        "false: AWQ GEMM without zero points is not a layout this reader knows");
  check_bits(qc, {"bits", "w_bit"});
  const tensor_index ix(ck);
  group_by_suffix(ck, ".qweight", passthrough, [&](const std::string& p, auto& claimed) {
    const entry& qw = ix.need(p + ".qweight", "qweight");
    const entry& qz = ix.need(p + ".qzeros", "qzeros");
    const entry& sc = ix.need(p + ".scales", "scales");
    check_dtype(ix, qw, {io::dtype::m_i32});
    check_dtype(ix, qz, {io::dtype::m_i32});
    check_dtype(ix, sc, k_scale_dtypes);
    const std::int64_t in = dim(ix, qw, 2, 0), words = dim(ix, qw, 2, 1);
    const std::int64_t groups = dim(ix, sc, 2, 0), outf = dim(ix, sc, 2, 1);
    check(words * k_per_word == outf, ix.place(qw.name),
          "shape " + shape_text(qw.shape) + " packs " + std::to_string(words * k_per_word) +
              " outputs; " + sc.name + " has " + std::to_string(outf));
    release_tensor t;
    t.record["rules"] = json::array();
    const std::int64_t g = group_size(qc, {"group_size", "q_group_size"}, in, groups,
                                      ix.place(sc.name), t.record);
    check(in % g == 0 && in / g == groups, ix.place(sc.name),
          "shape " + shape_text(sc.shape) + ": " + std::to_string(in) +
              " input channels in groups of " + std::to_string(g) + " need " +
              (in % g ? std::string("a multiple of the group") : std::to_string(in / g) + " groups"));
    check(qz.shape == std::vector<std::uint64_t>{std::uint64_t(groups), std::uint64_t(words)},
          ix.place(qz.name), "shape " + shape_text(qz.shape) + ", expected " +
                                 shape_text({std::uint64_t(groups), std::uint64_t(words)}));
    t.name = p + ".weight";
    t.layout = release_layout::m_awq;
    t.rows = outf;
    t.cols = in;
    t.shape = {std::uint64_t(outf), std::uint64_t(in)};
    t.scheme_name = "int4-awq";
    t.scheme = int4_scheme(t.scheme_name, g, sc.dtype);
    t.record["tensors"] = {{"qweight", qw.name}, {"qzeros", qz.name}, {"scales", sc.name}};
    t.record["source"] = {source_of(qw), source_of(qz), source_of(sc)};
    t.record["group_size"] = g;
    t.record["rules"].push_back("qweight [in, out/8] and qzeros packed along out, nibble k holds "
                                "column 8j + [0,2,4,6,1,3,5,7][k]; scales [in/G, out]");
    t.record["rules"].push_back("W[o, i] = (q - z) * s, zeros stored as they are");
    out.push_back(std::move(t));
    claimed.insert(claimed.end(), {qw.name, qz.name, sc.name});
  });
}

release_slab awq_decode(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                        std::int64_t r1) {
  const std::int64_t g = t.scheme.group, outf = t.rows, in = t.cols, words = outf / k_per_word;
  auto s = make_slab(r0, r1, in, in / g);
  s.group_of.resize(static_cast<std::size_t>(in));
  for (std::int64_t i = 0; i < in; ++i) s.group_of[static_cast<std::size_t>(i)] = int(i / g);
  const auto qw = ck.get(tensor_name(t, "qweight"));
  const std::int64_t w0 = r0 / k_per_word, w1 = ceil_div(r1, k_per_word);
  for (std::int64_t i = 0; i < in; ++i) {
    const auto w = read_ints(qw, i * words + w0, w1 - w0);
    for (std::int64_t r = 0; r < s.n(); ++r) {
      const std::int64_t o = r0 + r;
      s.q[static_cast<std::size_t>(r * in + i)] = static_cast<std::uint8_t>(
          nibble(w[static_cast<std::size_t>(o / k_per_word - w0)],
                 k_awq_nibble[static_cast<std::size_t>(o % k_per_word)]));
    }
  }
  read_transposed_scales(ck.get(tensor_name(t, "scales")), outf, s);
  read_row_packed_zeros(ck.get(tensor_name(t, "qzeros")), words, true, 0, s);
  return finish(t, s);
}

// ---------------------------------------------------------------------------------- GPTQ

std::string gptq_format(const json& qc) { return text_field(qc, {"checkpoint_format", "format"}); }
bool gptq_method(const json& qc) { return text_field(qc, {"quant_method", "method"}) == "gptq"; }
bool gptq_v1_config(const json& qc) { return gptq_method(qc) && gptq_format(qc) != "gptq_v2"; }
bool gptq_v2_config(const json& qc) { return gptq_method(qc) && gptq_format(qc) == "gptq_v2"; }
bool gptq_v1_names(const checkpoint& ck) { return packed_along_out(ck, false); }
bool gptq_v2_names(const checkpoint&) { return false; }  // v2 differs from v1 in values only

void gptq_group(const checkpoint& ck, const json& qc, release_layout id,
                std::vector<release_tensor>& out, std::vector<std::string>& passthrough) {
  const std::string fmt = gptq_format(qc);
  check(fmt.empty() || fmt == "gptq" || fmt == "gptq_v2", "quantization_config.checkpoint_format",
        "'" + fmt + "' is not the gptq or gptq_v2 layout");
  check_bits(qc, {"bits"});
  const bool v1 = id == release_layout::m_gptq_v1;
  const tensor_index ix(ck);
  group_by_suffix(ck, ".qweight", passthrough, [&](const std::string& p, auto& claimed) {
    const entry& qw = ix.need(p + ".qweight", "qweight");
    const entry& qz = ix.need(p + ".qzeros", "qzeros");
    const entry& sc = ix.need(p + ".scales", "scales");
    const entry* gi = ix.find(p + ".g_idx");
    check_dtype(ix, qw, {io::dtype::m_i32});
    check_dtype(ix, qz, {io::dtype::m_i32});
    check_dtype(ix, sc, k_scale_dtypes);
    const std::int64_t packed = dim(ix, qw, 2, 0), outf = dim(ix, qw, 2, 1);
    const std::int64_t groups = dim(ix, sc, 2, 0);
    check(dim(ix, sc, 2, 1) == outf, ix.place(qw.name),
          "shape " + shape_text(qw.shape) + " has " + std::to_string(outf) + " outputs; " +
              sc.name + " has " + std::to_string(sc.shape[1]));
    const std::int64_t in = gi ? dim(ix, *gi, 1, 0) : packed * k_per_word;
    // AutoGPTQ sizes qweight [in / 32 * bits, out] (qlinear __init__): in is a multiple of 8.
    check(in == packed * k_per_word, ix.place(gi ? gi->name : qw.name),
          "length " + std::to_string(in) + " does not match " + qw.name + " " +
              shape_text(qw.shape) + " (8 input channels per int32)");
    release_tensor t;
    t.record["rules"] = json::array();
    const std::int64_t g = group_size(qc, {"group_size"}, in, groups, ix.place(sc.name), t.record);
    check(ceil_div(in, g) == groups, ix.place(sc.name),
          "shape " + shape_text(sc.shape) + ": " + std::to_string(in) + " input channels in groups of " +
              std::to_string(g) + " need " + std::to_string(ceil_div(in, g)) + " groups");
    const std::vector<std::uint64_t> zshape{std::uint64_t(groups),
                                            std::uint64_t(ceil_div(outf, k_per_word))};
    check(qz.shape == zshape, ix.place(qz.name),
          "shape " + shape_text(qz.shape) + ", expected " + shape_text(zshape));
    const bool act_order = read_group_index(ix, ck, gi, in, g, groups, nullptr);
    t.name = p + ".weight";
    t.layout = id;
    t.rows = outf;
    t.cols = in;
    t.shape = {std::uint64_t(outf), std::uint64_t(in)};
    // Act-order groups are not contiguous blocks: no numprobe scheme describes them, so the
    // name is empty and identify skips the tensor; the config still says uint4, zeros, G.
    t.scheme_name = act_order ? "" : "int4-awq";
    t.scheme = int4_scheme("int4-awq", g, sc.dtype);
    t.record["tensors"] = {{"qweight", qw.name}, {"qzeros", qz.name}, {"scales", sc.name},
                           {"g_idx", gi ? json(gi->name) : json(nullptr)}};
    t.record["source"] = {source_of(qw), source_of(qz), source_of(sc)};
    if (gi) t.record["source"].push_back(source_of(*gi));
    t.record["group_size"] = g;
    t.record["act_order"] = act_order;
    if (act_order) t.record["rules"].push_back("act-order: the group of input channel i is g_idx[i]");
    if (auto sym = bool_field(qc, "sym")) t.record["sym"] = *sym;
    t.record["checkpoint_format"] = fmt.empty() ? json(nullptr) : json(fmt);
    if (v1 && fmt.empty())
      t.record["rules"].push_back("no checkpoint_format in the config: v1 assumed");
    t.record["rules"].push_back("qweight [ceil(in/8), out] packed along in, nibble k of word p is "
                                "input 8p + k; qzeros [groups, ceil(out/8)] packed along out");
    t.record["rules"].push_back(v1 ? "zeros stored minus 1 (v1): z = nibble + 1"
                                   : "zeros stored as they are (v2): z = nibble");
    out.push_back(std::move(t));
    claimed.insert(claimed.end(), {qw.name, qz.name, sc.name});
    if (gi) claimed.push_back(gi->name);
  });
}

void gptq_v1_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                   std::vector<std::string>& passthrough) {
  gptq_group(ck, qc, release_layout::m_gptq_v1, out, passthrough);
}
void gptq_v2_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                   std::vector<std::string>& passthrough) {
  gptq_group(ck, qc, release_layout::m_gptq_v2, out, passthrough);
}

release_slab gptq_decode(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                         std::int64_t r1) {
  const std::int64_t outf = t.rows, in = t.cols, groups = ceil_div(in, t.scheme.group);
  auto s = make_slab(r0, r1, in, groups);
  s.group_of = groups_of(ck, t, groups);
  const auto qw = ck.get(tensor_name(t, "qweight"));
  for (std::int64_t p = 0; p < ceil_div(in, k_per_word); ++p) {
    const auto w = read_ints(qw, p * outf + r0, r1 - r0);
    for (std::int64_t k = 0; k < k_per_word && p * k_per_word + k < in; ++k)
      for (std::int64_t r = 0; r < s.n(); ++r)
        s.q[static_cast<std::size_t>(r * in + p * k_per_word + k)] =
            static_cast<std::uint8_t>(nibble(w[static_cast<std::size_t>(r)], k));
  }
  read_transposed_scales(ck.get(tensor_name(t, "scales")), outf, s);
  read_row_packed_zeros(ck.get(tensor_name(t, "qzeros")), ceil_div(outf, k_per_word), false,
                        t.layout == release_layout::m_gptq_v1 ? 1 : 0, s);
  return finish(t, s);
}

}  // namespace
}  // namespace numprobe::io::detail::int4

namespace numprobe::io::detail {

void add_int_layouts(std::vector<layout_reader>& out) {
  int4::add_ct_int4_layout(out);
  out.push_back({release_layout::m_awq, int4::awq_config, int4::awq_names, int4::awq_group,
                 int4::awq_decode});
  out.push_back({release_layout::m_gptq_v1, int4::gptq_v1_config, int4::gptq_v1_names,
                 int4::gptq_v1_group, int4::gptq_decode});
  out.push_back({release_layout::m_gptq_v2, int4::gptq_v2_config, int4::gptq_v2_names,
                 int4::gptq_v2_group, int4::gptq_decode});
}

}  // namespace numprobe::io::detail
