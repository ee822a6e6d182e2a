#include "src/cli/case_options.hpp"

#include <charconv>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/utsname.h>
#include <unistd.h>

#include "numprobe/base/error.hpp"
#include "numprobe/core/memory_budget.hpp"
#include "numprobe/core/result.hpp"
#include "probes/classes/bisect_fp8.hpp"
#include "src/io/atomic_write.hpp"

namespace numprobe::cli {

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || text[0] == '-' || text[0] == '+' || ec == std::errc::result_out_of_range ||
            ec != std::errc() || p != text.data() + text.size())
          return fmt::format("seed '{}' is not an integer in [0, 2^64 - 1]", text);
        return {};
      },
      "SEED");
}

void apply_max_memory(const std::string& text) {
  if (!text.empty()) set_memory_budget(parse_memory_size(text, "--max-memory"));
}

void add_case_flags(CLI::App* sub, case_flags& f, const std::string& seq_help) {
  sub->add_option("--backend", f.backend,
                  "implementation under test: ref|emu|cuda|hip|plugin:LIB.so|exec:'CMD {in} {out}'|exec-worker:'CMD'")
      ->capture_default_str();
  f.case_shaping.push_back(sub->add_option("--seq", f.seq, seq_help)->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--queries", f.queries, "query rows T (0: T = S)")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--batch", f.batch, "batch size")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--heads", f.heads, "query heads Hq")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--kv-heads", f.kv_heads, "KV heads Hkv (Hq a multiple)")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--head-dim", f.head_dim, "head dimension D")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--scale", f.scale, "softmax scale (0: 1/sqrt(D))")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--dtype", f.dtype, "input dtype (bf16, f16, f32, f64, e4m3fn, ...)")
      ->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--mask", f.mask, "none|causal|causal-top-left|window")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--window", f.window, "sliding window W (mask=window)"));
  f.case_shaping.push_back(sub->add_option("--softcap", f.softcap, "logit softcap (0: off)"));
  f.case_shaping.push_back(sub->add_option("--dist", f.dist,
                  "inputs: normal|uniform|llm|rescale-stress|max-first|diffuse|shifted|constant-v|flat|sink")
      ->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--shift", f.shift, "logit shift for --dist shifted")->capture_default_str());
  f.case_shaping.push_back(sub->add_option("--seed", f.seed, "input seed")->check(seed_validator())->capture_default_str());
  sub->add_option("--tile", f.tile, "kernel tile BqxBk (emu), e.g. 64x64");
  sub->add_option("--state", f.states, "state storage dtype NAME=DTYPE (q,k,v,s,p,m,l,o,out,lse)");
  sub->add_option("--inject", f.inject, "inject a named fault (repeatable)");
  sub->add_option("--rows", f.rows, "query rows evaluated: all|N|auto (stratified sample)")
      ->capture_default_str();
  sub->add_option("--case", f.case_id, "rerun exactly this case id (the case flags cannot be given with it)");
  sub->add_option("--max-memory", f.max_memory,
                  "refuse a case whose inputs and reference need more than SIZE (e.g. 16G; default: 80% of "
                  "available memory, or NUMPROBE_MAX_MEMORY)");
  sub->add_option("--bound", f.bounds, "gate METRIC<=X (repeatable); breach exits 1");
  sub->add_flag("--no-e2e", f.no_e2e, "skip the end-to-end (unrounded inputs) reference");
  sub->add_option("--device", f.device, "GPU ordinal")->capture_default_str();
  sub->add_option("--exec-timeout", f.exec_timeout,
                  "exec backends: seconds per case (worker: per answer) before the process group is killed")
      ->capture_default_str();
  sub->add_flag("--exec-worker", f.exec_worker, "exec:CMD is a worker (one process per sweep, line protocol)");
  sub->add_flag("--keep", f.keep, "exec backends: keep each case's temporary directory");
  // Serving numerics (issue 9), emu backend.
  sub->add_flag("--decode", f.decode, "split-KV flash-decoding over a paged cache: --queries 1..8 over S keys");
  sub->add_option("--splits", f.splits, "decode: KV splits per sequence (default 4; drift: a comma list)")
      ->delimiter(',');
  sub->add_option("--split-size", f.split_size, "decode: keys per split (a multiple of the key tile)");
  sub->add_option("--page-size", f.page_size, "decode: KV cache page size (default 16; drift: a comma list)")
      ->delimiter(',');
  sub->add_option("--kv-format", f.kv_format, "fp8 KV: e4m3fn|e4m3fnuz|e5m2");
  sub->add_option("--kv-scale", f.kv_scale, "fp8 KV scale layout: tensor|head|channel|token");
  sub->add_option("--p-format", f.p_format, "quantize P to this fp8 format before P.V");
  sub->add_option("--p-prescale", f.p_prescale, "multiply P by X before quantizing (divide after)");
  sub->add_option("--acc-promote", f.acc_promote, "fp8 MMA accumulator promoted to fp32 every N key tiles");
  sub->add_option("--acc-model", f.acc_model,
                  "emu: P.V runs through this bit-accurate MMA model, instruction by instruction; "
                  "with --acc-promote N, promoted to fp32 every N key tiles (numprobe mma --list-models)");
  sub->add_flag("--acc-fma", f.acc_fma,
                "emu, with --acc-model and --acc-promote: the promotion rescales and adds in one fused "
                "multiply-add, as a compiler that contracts acc2 * alpha + acc does (Triton's default)");
  sub->add_flag("--force-rescale", f.force_rescale,
                "emu: rescale O and l on every key tile (disable-the-mechanism check)");
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::int64_t parse_positive(const std::string& text, const std::string& flag) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0)
    throw_input_error(flag, fmt::format("expected a positive integer, got '{}'", text));
  return v;
}

namespace {

// Rows the probe evaluates, for the memory estimate: --rows all is every row, N at most N,
// auto at most the largest automatic sample any command takes (1024, attention's short cases).
std::int64_t rows_for_estimate(const case_flags& f, const attention_case& c) {
  const std::int64_t all = c.rows();
  if (f.rows == "all") return all;
  if (f.rows == "auto") return std::min<std::int64_t>(all, 1024);
  std::int64_t n = 0;
  const auto [p, ec] = std::from_chars(f.rows.data(), f.rows.data() + f.rows.size(), n);
  return ec == std::errc() && n > 0 ? std::min(all, n) : all;
}

}  // namespace

attention_case make_case(const case_flags& f, std::int64_t seq) {
  apply_max_memory(f.max_memory);
  if (!f.case_id.empty()) {
    for (const auto* o : f.case_shaping)
      if (o && o->count() > 0)
        throw_input_error(o->get_name(), "the case is fixed by --case ID; drop " + o->get_name() +
                                             " or change the field in the id");
    attention_case c = parse_attention_case(f.case_id);
    check_attention_memory(c, rows_for_estimate(f, c), !f.no_e2e, "--case");
    return c;
  }
  attention_case c;
  c.batch = f.batch;
  c.queries = f.queries;
  c.seq = seq;
  c.heads = f.heads;
  c.kv_heads = f.kv_heads;
  c.head_dim = f.head_dim;
  c.scale = f.scale;
  c.dtype = formats::parse_format(f.dtype, "--dtype");
  if (!formats::info(c.dtype).is_float)
    throw_input_error("--dtype", fmt::format("attention inputs are floating point; '{}' is an integer format",
                                             f.dtype));
  c.mask = parse_mask(f.mask);
  c.window = f.window;
  c.softcap = f.softcap;
  c.dist = parse_dist(f.dist);
  c.logit_shift = f.shift;
  if (!std::isfinite(f.shift)) throw_input_error("--shift", "must be finite");
  c.seed = f.seed;
  if (f.decode) {
    if (c.queries == 0) c.queries = 1;
    if (c.queries > 8) throw_input_error("--queries", fmt::format("--decode takes 1..8 queries, got {}", c.queries));
    if (c.mask != mask_kind::m_none && c.mask != mask_kind::m_causal)
      throw_input_error("--mask", "--decode supports mask none or causal (bottom-right)");
  }
  if (c.mask == mask_kind::m_ranges)
    throw_input_error("--mask", "mask=ranges is available through the library API only");
  if (c.mask != mask_kind::m_window && f.window != 0)
    throw_input_error("--window", "--window needs --mask window");
  c.validate();
  // Blame the flag that makes the case large: the heads or head size when the case would not
  // fit even at 64 keys, else the length.
  attention_case small = c;
  small.seq = std::min<std::int64_t>(c.seq, 64);
  small.queries = std::min<std::int64_t>(c.queries, 64);
  const double budget = memory_budget_bytes();
  const bool wide = budget > 0 && attention_case_bytes(small, rows_for_estimate(f, small), !f.no_e2e) > budget;
  check_attention_memory(c, rows_for_estimate(f, c), !f.no_e2e, wide ? "--heads/--head-dim" : "--seq");
  return c;
}

provider_options make_provider_options(const case_flags& f) {
  provider_options o;
  o.backend = f.backend;
  o.device = f.device;
  if (!f.tile.empty()) {
    const auto x = f.tile.find('x');
    if (x == std::string::npos) throw_input_error("--tile", fmt::format("'{}' is not BqxBk", f.tile));
    o.tile = tile_shape{parse_positive(f.tile.substr(0, x), "--tile"),
                        parse_positive(f.tile.substr(x + 1), "--tile")};
  }
  for (const auto& s : f.states) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      throw_input_error("--state", fmt::format("'{}' is not NAME=DTYPE", s));
    o.states[s.substr(0, eq)] = s.substr(eq + 1);
  }
  o.faults = f.inject;
  o.exec_timeout_s = f.exec_timeout;
  o.exec_worker = f.exec_worker;
  o.keep_temp = f.keep;
  auto positive_knob = [&](const char* name, std::int64_t v) {
    if (v < 0) throw_input_error(std::string("--") + name, fmt::format("must be positive, got {}", v));
    if (v > 0) o.knobs[name] = std::to_string(v);
  };
  if (f.decode) o.knobs["decode"] = "1";
  if (f.force_rescale) {
    // An emulator switch: an exec, plugin or GPU kernel's rescale cannot be forced from outside.
    if (o.backend.rfind("emu", 0) != 0)
      throw_input_error("--force-rescale", fmt::format("switches the emulator's rescale on every key tile; "
                                                       "backend '{}' is not the emulator", o.backend));
    o.knobs["force-rescale"] = "1";
  }
  auto single = [&](const char* name, const std::vector<std::int64_t>& v) -> std::int64_t {
    if (v.size() > 1)
      throw_input_error(std::string("--") + name, "a list of values is taken by drift only");
    if (!v.empty() && v.front() <= 0)
      throw_input_error(std::string("--") + name, fmt::format("must be positive, got {}", v.front()));
    return v.empty() ? 0 : v.front();
  };
  positive_knob("splits", single("splits", f.splits));
  positive_knob("split-size", f.split_size);
  positive_knob("page-size", single("page-size", f.page_size));
  if (f.acc_promote) {
    if (*f.acc_promote < 1)
      throw_input_error("--acc-promote", fmt::format("promotes every N >= 1 key tiles, got {}", *f.acc_promote));
    o.knobs["acc-promote"] = std::to_string(*f.acc_promote);
  }
  if (!f.acc_model.empty()) {
    o.knobs["acc-model"] = f.acc_model;
  }
  if (f.acc_fma) o.knobs["acc-fma"] = "1";
  if (!f.decode && (!f.splits.empty() || f.split_size || !f.page_size.empty()))
    throw_input_error(!f.splits.empty() ? "--splits" : f.split_size ? "--split-size" : "--page-size", "needs --decode");
  if (!f.kv_format.empty()) o.knobs["kv-format"] = f.kv_format;
  if (!f.kv_scale.empty()) o.knobs["kv-scale"] = f.kv_scale;
  if (!f.p_format.empty()) o.knobs["p-format"] = f.p_format;
  if (f.p_prescale != 0.0) {
    if (!(f.p_prescale > 0) || !std::isfinite(f.p_prescale))
      throw_input_error("--p-prescale", "must be finite and > 0");
    o.knobs["p-prescale"] = fmt::format("{:.17g}", f.p_prescale);
  }
  return o;
}

decode_sweep_lists take_decode_sweep_lists(case_flags& f) {
  decode_sweep_lists l;
  auto check = [](const char* name, const std::vector<std::int64_t>& v) {
    for (auto x : v)
      if (x <= 0) throw_input_error(std::string("--") + name, fmt::format("must be positive, got {}", x));
    for (std::size_t i = 0; i < v.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (v[i] == v[j]) throw_input_error(std::string("--") + name, fmt::format("{} is listed twice", v[i]));
  };
  check("splits", f.splits);
  check("page-size", f.page_size);
  if (!f.decode && (!f.splits.empty() || !f.page_size.empty()))
    throw_input_error(!f.splits.empty() ? "--splits" : "--page-size", "needs --decode");
  if (f.split_size && f.splits.size() > 1)
    throw_input_error("--splits", "a list of split counts cannot be combined with --split-size");
  l.splits = f.splits;
  l.page_sizes = f.page_size;
  f.splits.clear();
  f.page_size.clear();
  return l;
}

std::vector<bound> make_bounds(const case_flags& f) {
  std::vector<bound> out;
  for (const auto& b : f.bounds) out.push_back(parse_bound(b));
  return out;
}

void add_default_bound_flag(CLI::App* sub, bool& off) {
  sub->add_flag("--no-default-bound", off,
                "without --bound: report only, do not gate on the default bound (ratio_to_naive<=2; fp8: rel_rms<=2u)");
}

std::vector<bound> gate_bounds(const case_flags& f, const provider_options& po) {
  auto out = make_bounds(f);
  if (!out.empty() || f.no_default_bound) return out;
  bound b = probes::default_accuracy_bound(po);
  b.is_default = true;
  return {b};
}

row_sampling make_sampling(const case_flags& f, std::int64_t auto_rows) {
  row_sampling s;
  s.seed = f.seed;
  if (f.rows == "all") s.max_rows = 0;
  else if (f.rows == "auto") s.max_rows = auto_rows;
  else s.max_rows = parse_positive(f.rows, "--rows");
  return s;
}

nlohmann::json json_envelope(const std::string& command, std::uint64_t seed) {
  utsname u{};
  uname(&u);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return {{"schema_version", result::k_result_schema_version},
          {"tool", "numprobe"},
          {"version", NUMPROBE_VERSION},
          {"git_revision", NUMPROBE_GIT_REV},
          {"command", command},
          {"machine", {{"host", host}, {"os", u.sysname}, {"release", u.release}, {"arch", u.machine}}},
          {"seeds", {{"inputs", seed}}}};
}

void write_text_file(const std::string& path, const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  io::detail::atomic_write(path, {std::span<const std::byte>(p, text.size())});
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  nlohmann::json normalised = doc;
  result::normalise_non_finite(normalised);
  const std::string text = normalised.dump(2) + "\n";
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  write_text_file(path, text);
}

}  // namespace numprobe::cli
