// compressed-tensors' pack-quantized int4 layout of released checkpoints (release_layouts.hpp;
// the rules, cited, in docs/checkpoints.md, "Integer layouts"). The shared int4 machinery is
// release_int_common.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "src/io/release_int_common.hpp"

namespace numprobe::io::detail::int4 {
namespace {

// ------------------------------------------------------ compressed-tensors pack-quantized int4

bool ct_int4_config(const json& qc) {
  if (text_field(qc, {"quant_method"}) != "compressed-tensors") return false;
  if (text_field(qc, {"format"}) == "pack-quantized") return true;
  if (qc.contains("config_groups") && qc["config_groups"].is_object())
    for (const auto& [k, g] : qc["config_groups"].items())
      if (text_field(g, {"format"}) == "pack-quantized") return true;
  return false;
}

bool ct_int4_names(const checkpoint& ck) {
  const tensor_index ix(ck);
  for (const auto& e : ck.tensors())
    if (has_named_suffix(e.name, ".weight_packed") && e.dtype == io::dtype::m_i32 &&
        ix.find(e.name.substr(0, e.name.size() - 14) + ".weight_shape"))
      return true;
  return false;
}

// The weights args of the config's groups: one set when they all agree, else null (each
// tensor's group size then comes from its shapes).
json ct_weights_args(const json& qc) {
  json found;
  if (!qc.is_object() || !qc.contains("config_groups") || !qc["config_groups"].is_object())
    return found;
  for (const auto& [k, g] : qc["config_groups"].items()) {
    if (!g.is_object() || !g.contains("weights") || !g["weights"].is_object()) continue;
    const json& w = g["weights"];
    const std::string place = "quantization_config.config_groups." + k + ".weights";
    check_bits(w, {"num_bits"});
    const std::string type = text_field(w, {"type"});
    check(type.empty() || type == "int", place + ".type", "'" + type + "': pack-quantized int4 is int");
    const std::string strategy = text_field(w, {"strategy"});
    check(strategy.empty() || strategy == "group" || strategy == "channel", place + ".strategy",
          "'" + strategy + "': the reader takes group or channel scales");
    if (found.is_null()) found = w;
    else if (found != w) return json();  // groups differ: no single answer
  }
  return found;
}

void ct_int4_group(const checkpoint& ck, const json& qc, std::vector<release_tensor>& out,
                   std::vector<std::string>& passthrough) {
  const json args = ct_weights_args(qc);
  const tensor_index ix(ck);
  group_by_suffix(ck, ".weight_packed", passthrough, [&](const std::string& p, auto& claimed) {
    const entry& wp = ix.need(p + ".weight_packed", "weight_packed");
    const entry& sc = ix.need(p + ".weight_scale", "weight_scale");
    const entry& ws = ix.need(p + ".weight_shape", "weight_shape");
    const entry* zp = ix.find(p + ".weight_zero_point");
    const entry* gi = ix.find(p + ".weight_g_idx");
    check_dtype(ix, wp, {io::dtype::m_i32});
    check_dtype(ix, sc, k_scale_dtypes);
    check_dtype(ix, ws, {io::dtype::m_i32, io::dtype::m_i64});
    const std::size_t rank = wp.shape.size();
    check(rank == 2 || rank == 3, ix.place(wp.name), "shape " + shape_text(wp.shape) + " must be 2-D or 3-D");
    check(dim(ix, ws, 1, 0) == std::int64_t(rank), ix.place(ws.name),
          "length " + std::to_string(ws.shape[0]) + ", weight_packed is " + std::to_string(rank) + "-D");
    std::vector<std::uint64_t> shape;
    for (std::int64_t v : read_ints(ck.get(ws.name), 0, std::int64_t(rank))) {
      check(v > 0 && std::uint64_t(v) < k_max_dim, ix.place(ws.name), "dimension " + std::to_string(v) + " out of range");
      shape.push_back(std::uint64_t(v));
    }
    const std::int64_t in = std::int64_t(shape.back()), outf = std::int64_t(shape[rank - 2]);
    const std::int64_t experts = rank == 3 ? std::int64_t(shape[0]) : 1;
    auto with_last = [&](std::uint64_t last) {
      auto s = shape;
      s.back() = last;
      return s;
    };
    check(wp.shape == with_last(std::uint64_t(ceil_div(in, k_per_word))), ix.place(wp.name),
          "shape " + shape_text(wp.shape) + " does not pack weight_shape " + shape_text(shape) +
              " (8 int4 per int32 along the last axis)");
    const std::int64_t groups = dim(ix, sc, rank, rank - 1);
    check(sc.shape == with_last(std::uint64_t(groups)), ix.place(sc.name),
          "shape " + shape_text(sc.shape) + " does not match weight_shape " + shape_text(shape));
    release_tensor t;
    t.record["rules"] = json::array();
    std::int64_t g = 0;
    if (text_field(args, {"strategy"}) == "channel") g = in;
    else g = group_size(args, {"group_size"}, in, groups, ix.place(sc.name), t.record);
    check(ceil_div(in, g) == groups, ix.place(sc.name),
          "shape " + shape_text(sc.shape) + ": " + std::to_string(in) + " input channels in groups of " +
              std::to_string(g) + " need " + std::to_string(ceil_div(in, g)) + " groups");
    const auto sym = bool_field(args, "symmetric");
    check(zp || sym.value_or(true), ix.place(p + ".weight_zero_point"),
          "missing (the config says symmetric: false)");
    std::string zp_form = "none";
    if (zp) {
      check_dtype(ix, *zp, {io::dtype::m_i32, io::dtype::m_i8});
      const bool packed = zp->dtype == io::dtype::m_i32;
      auto zshape = with_last(std::uint64_t(groups));
      if (packed) zshape[rank - 2] = std::uint64_t(ceil_div(outf, k_per_word));
      check(zp->shape == zshape, ix.place(zp->name),
            "shape " + shape_text(zp->shape) + ", expected " + shape_text(zshape) +
                (packed ? " (int32: packed along out)" : " (int8: one per group)"));
      zp_form = packed ? "packed" : "unpacked";
    }
    const bool act_order = gi && read_group_index(ix, ck, gi, in, g, groups, nullptr);
    const bool asym = zp && !sym.value_or(false);
    t.name = p + ".weight";
    t.layout = release_layout::m_ct_int4;
    t.rows = experts * outf;
    t.cols = in;
    t.shape = shape;
    const char* scheme = asym ? "int4-awq" : (g == 128 ? "int4-g128" : "int4-sym");
    t.scheme_name = act_order ? "" : scheme;
    t.scheme = int4_scheme(scheme, g, sc.dtype);
    t.record["tensors"] = {{"weight_packed", wp.name}, {"weight_scale", sc.name},
                           {"weight_shape", ws.name},
                           {"weight_zero_point", zp ? json(zp->name) : json(nullptr)},
                           {"weight_g_idx", gi ? json(gi->name) : json(nullptr)}};
    t.record["source"] = {source_of(wp), source_of(sc), source_of(ws)};
    for (const entry* e : {zp, gi})
      if (e) t.record["source"].push_back(source_of(*e));
    t.record["group_size"] = g;
    t.record["act_order"] = act_order;
    t.record["zero_point"] = asym ? zp_form : "none";
    t.record["rules"].push_back("weight_packed: 8 int4 per int32 along in, low bits first, "
                                "stored q + 8 (pack_to_int32)");
    t.record["rules"].push_back(
        asym ? "W = (q - zp) * s, weight_zero_point " + zp_form +
                   (zp_form == "packed" ? " along out, stored zp + 8" : " as signed int8")
             : "W = q * s (symmetric)");
    if (zp && !asym)
      t.record["rules"].push_back("weight_zero_point read and required 0: the config says symmetric");
    out.push_back(std::move(t));
    claimed.insert(claimed.end(), {wp.name, sc.name, ws.name});
    for (const entry* e : {zp, gi})
      if (e) claimed.push_back(e->name);
  });
}

// A symmetric config's stored zero points (older compressed-tensors kept them) must all be 0.
release_slab checked_symmetric(const release_tensor& t, const tensor_view& zv, const int4_slab& s) {
  if (t.scheme.element == formats::format_id::m_i4)
    for (std::size_t b = 0; b < s.zero.size(); ++b)
      check(s.zero[b] == 8, zv.place(),
            "zero point " + std::to_string(s.zero[b] - 8) + " in row " +
                std::to_string(s.r0 + std::int64_t(b) / s.groups) + ", but the config says symmetric");
  return finish(t, s);
}

release_slab ct_int4_decode(const checkpoint& ck, const release_tensor& t, std::int64_t r0,
                            std::int64_t r1) {
  const std::int64_t in = t.cols, groups = ceil_div(in, t.scheme.group);
  const std::int64_t outf = std::int64_t(t.shape[t.shape.size() - 2]);
  auto s = make_slab(r0, r1, in, groups);
  s.group_of = groups_of(ck, t, groups);
  const std::int64_t words = ceil_div(in, k_per_word);
  const auto w = read_ints(ck.get(tensor_name(t, "weight_packed")), r0 * words, s.n() * words);
  for (std::int64_t r = 0; r < s.n(); ++r)
    for (std::int64_t i = 0; i < in; ++i)
      s.q[static_cast<std::size_t>(r * in + i)] = static_cast<std::uint8_t>(
          nibble(w[static_cast<std::size_t>(r * words + i / k_per_word)], i % k_per_word));
  ck.get(tensor_name(t, "weight_scale")).decode(std::uint64_t(r0 * groups), s.scale);
  const json& zname = tensor_names(t).at("weight_zero_point");
  if (zname.is_null()) {
    std::fill(s.zero.begin(), s.zero.end(), 8);  // symmetric: q + 8 stored, zero 8 in nibbles
    return finish(t, s);
  }
  const auto zv = ck.get(zname.get<std::string>());
  if (zv.dtype == io::dtype::m_i8) {
    const auto z = read_ints(zv, r0 * groups, s.n() * groups);
    for (std::size_t b = 0; b < z.size(); ++b) {
      check(z[b] >= -8 && z[b] <= 7, zv.place(), "zero point " + std::to_string(z[b]) + " outside int4");
      s.zero[b] = int(z[b]) + 8;
    }
    return checked_symmetric(t, zv, s);
  }
  const std::int64_t zrows = ceil_div(outf, k_per_word);  // per expert, packed along out
  for (std::int64_t r = 0; r < s.n(); ++r) {
    const std::int64_t e = (r0 + r) / outf, o = (r0 + r) % outf;
    const auto z = read_ints(zv, (e * zrows + o / k_per_word) * groups, groups);
    for (std::int64_t gi = 0; gi < groups; ++gi)
      s.zero[static_cast<std::size_t>(r * groups + gi)] =
          int(nibble(z[static_cast<std::size_t>(gi)], o % k_per_word));
  }
  return checked_symmetric(t, zv, s);
}

}  // namespace

void add_ct_int4_layout(std::vector<layout_reader>& out) {
  out.push_back({release_layout::m_ct_int4, ct_int4_config, ct_int4_names, ct_int4_group,
                 ct_int4_decode});
}

}  // namespace numprobe::io::detail::int4
