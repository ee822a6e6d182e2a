// kvcache's list options (comma lists, as the CLI flags and the scenario keys write them).
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <string_view>

#include "numprobe/base/error.hpp"
#include "probes/kvcache/kvcache_probe.hpp"

namespace numprobe::probes {
namespace {

template <class T, class F>
std::vector<T> parse_list(const std::string& text, const std::string& flag, F parse_one) {
  std::vector<T> out;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    if (item.empty()) throw_input_error(flag, fmt::format("empty item in '{}'", text));
    out.push_back(parse_one(item));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

double parse_number(const std::string& s, const std::string& flag) {
  // 2^-4 style powers of two, or a plain number.
  try {
    std::size_t used = 0;
    double v = 0;
    if (s.rfind("2^", 0) == 0) {
      v = std::ldexp(1.0, std::stoi(s.substr(2), &used));
      used += 2;
    } else {
      v = std::stod(s, &used);
    }
    if (used != s.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    throw_input_error(flag, fmt::format("not a number: '{}'", s));
  }
}

}  // namespace

void set_kvcache_lists(kvcache_options& o, const std::string& seqs, const std::string& formats_list,
                       const std::string& layouts, const std::string& multipliers,
                       const std::function<std::string(const std::string& key)>& place) {
  const auto seq_place = place("seq"), fmt_place = place("kv-format"), layout_place = place("kv-scale"),
             mult_place = place("scale-mult");
  o.seqs = parse_list<std::int64_t>(seqs, seq_place, [&](const std::string& s) {
    const double v = parse_number(s, seq_place);
    if (!(v >= 1) || v != std::floor(v) || v > 1e9) throw_input_error(seq_place, fmt::format("'{}' is not a positive length", s));
    return static_cast<std::int64_t>(v);
  });
  o.formats = parse_list<formats::format_id>(formats_list, fmt_place,
                                             [&](const std::string& s) { return formats::parse_format(s, fmt_place); });
  o.layouts = parse_list<emu::kv_scale_layout>(layouts, layout_place,
                                               [&](const std::string& s) { return emu::parse_kv_scale(s, layout_place); });
  o.multipliers = parse_list<double>(multipliers, mult_place, [&](const std::string& s) { return parse_number(s, mult_place); });
}

}  // namespace numprobe::probes
