#include "numprobe/core/memory_budget.hpp"

#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>

#include "numprobe/base/error.hpp"

namespace numprobe {
namespace {

double& override_bytes() {
  static double v = 0.0;
  return v;
}

constexpr double k_gib = 1073741824.0;

}  // namespace

double available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0.0;
}

double parse_memory_size(const std::string& text, const std::string& place) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double mult = 1.0;
  const std::string rest = text.substr(used);
  if (rest == "" || rest == "B") mult = 1.0;
  else if (rest == "K" || rest == "KiB") mult = 1024.0;
  else if (rest == "M" || rest == "MiB") mult = 1024.0 * 1024.0;
  else if (rest == "G" || rest == "GiB") mult = k_gib;
  else if (rest == "T" || rest == "TiB") mult = k_gib * 1024.0;
  else used = 0;
  if (used == 0 || !std::isfinite(v) || !(v > 0))
    throw_input_error(place, fmt::format("expected a positive size such as 8G or 512M, got '{}'", text));
  return v * mult;
}

void set_memory_budget(double bytes) { override_bytes() = bytes > 0 ? bytes : 0.0; }

double memory_budget_bytes() {
  if (override_bytes() > 0) return override_bytes();
  if (const char* env = std::getenv("NUMPROBE_MAX_MEMORY"); env && *env)
    return parse_memory_size(env, "NUMPROBE_MAX_MEMORY");
  return k_memory_fraction * available_memory_bytes();
}

std::string memory_budget_source() {
  if (override_bytes() > 0) return "--max-memory";
  if (const char* env = std::getenv("NUMPROBE_MAX_MEMORY"); env && *env) return "NUMPROBE_MAX_MEMORY";
  return fmt::format("{:.0f}% of available memory; --max-memory or NUMPROBE_MAX_MEMORY changes it",
                     100.0 * k_memory_fraction);
}

void check_memory(const std::string& place, const std::string& what, double bytes) {
  const double budget = memory_budget_bytes();
  if (budget > 0 && bytes > budget)
    throw_input_error(place, fmt::format("{} needs about {:.1f} GiB, more than the {:.1f} GiB limit ({})",
                                         what, bytes / k_gib, budget / k_gib, memory_budget_source()));
}

double attention_case_bytes(const attention_case& c, std::int64_t rows_evaluated, bool end_to_end) {
  // In double: sizes of 10^10 elements and more must not wrap.
  const double kv = static_cast<double>(c.batch) * static_cast<double>(c.seq) *
                    static_cast<double>(c.kv_heads) * static_cast<double>(c.head_dim);
  const double rows = static_cast<double>(rows_evaluated) * static_cast<double>(c.heads) *
                      static_cast<double>(c.head_dim);
  const double copies = end_to_end ? 2.0 : 1.0;
  return 8.0 * (2.0 * copies * kv + copies * rows + 4.0 * rows) + 4.0 * 2.0 * kv;
}

void check_attention_memory(const attention_case& c, std::int64_t rows_evaluated, bool end_to_end,
                            const std::string& place) {
  check_memory(place,
               fmt::format("S={} (K/V of {}x{}x{}x{} elements) with {} evaluated rows", c.seq,
                           c.batch, c.seq, c.kv_heads, c.head_dim, rows_evaluated),
               attention_case_bytes(c, rows_evaluated, end_to_end));
}

}  // namespace numprobe
