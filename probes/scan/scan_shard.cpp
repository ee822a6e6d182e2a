// `scan --shard i/N` and its merge: which tensors a shard scans, and the N shards' documents put
// back together into the report one unsharded scan writes.
#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <set>

#include "numprobe/base/error.hpp"
#include "probes/scan/scan_bands.hpp"
#include "probes/scan/scan_probe.hpp"

namespace numprobe::probes {

std::vector<int> scan_shard_of(const std::vector<std::string>& names, const std::vector<std::uint64_t>& bytes,
                               int count) {
  std::vector<int> shard(names.size(), 0);
  if (count <= 1 || names.empty()) return shard;
  // By name, not by file order: the assignment then depends on the tensors alone, not on how a
  // checkpoint's index orders its files.
  std::vector<std::size_t> order(names.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return names[a] < names[b]; });
  unsigned __int128 total = 0;
  for (auto b : bytes) total += b;
  unsigned __int128 start = 0;
  for (std::size_t k : order) {
    // The middle byte's shard: floor((start + bytes/2) * N / total), in integers (128 bits: a
    // checkpoint's bytes times N cannot overflow), so every machine assigns alike.
    const unsigned __int128 mid2 = 2 * start + bytes[k];  // twice the middle byte
    shard[k] = total == 0 ? static_cast<int>(k % static_cast<std::size_t>(count))
                          : static_cast<int>(std::min<unsigned __int128>(mid2 * static_cast<unsigned>(count) / (2 * total),
                                                                          static_cast<unsigned>(count - 1)));
    start += bytes[k];
  }
  return shard;
}

scan_report merge_scan_shards(const std::vector<scan_report>& parts, const std::vector<std::string>& places) {
  if (parts.empty()) throw_input_error("merge", "no scan shard given");
  const auto& first = parts.front().options;
  const int count = first.shard_count;
  if (count < 2) throw_input_error(places.front(), "is a whole scan, not a shard (scan --shard i/N)");
  std::set<int> seen;
  scan_report m;
  m.options = first;
  m.options.shard_index = 0;
  m.options.shard_count = 1;
  m.skipped = parts.front().skipped;
  m.without_act_stats = parts.front().without_act_stats;
  m.act_stats_unused = parts.front().act_stats_unused;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const auto& p = parts[k];
    const auto& o = p.options;
    // The shards of one scan agree on everything but their tensors; anything else is two scans.
    const auto differs = [&](const char* what) {
      throw_input_error(places[k], fmt::format("is not a shard of the same scan as {}: its {} differs", places.front(),
                                               what));
    };
    if (o.shard_count != count) differs("shard count");
    if (o.checkpoint != first.checkpoint) differs("checkpoint");
    if (o.schemes != first.schemes) differs("schemes");
    if (o.filter != first.filter) differs("filter");
    if (o.rank_by != first.rank_by) differs("rank_by");
    if (o.act_stats != first.act_stats) differs("act_stats");
    if (o.top != first.top) differs("top");
    if (p.skipped != m.skipped) differs("list of skipped tensors");
    if (p.without_act_stats != m.without_act_stats || p.act_stats_unused != m.act_stats_unused)
      differs("act-stats coverage");
    if (!seen.insert(o.shard_index).second)
      throw_input_error(places[k], fmt::format("shard {}/{} given twice", o.shard_index, count));
    m.tensors.insert(m.tensors.end(), p.tensors.begin(), p.tensors.end());
    m.source_bytes += p.source_bytes;
    m.bytes_read += p.bytes_read;
    m.seconds += p.seconds;
  }
  // A missing shard would give a report that looks whole and is not: refused, not marked.
  for (int i = 0; i < count; ++i)
    if (!seen.count(i)) throw_input_error("merge", fmt::format("shard {}/{} is missing", i, count));
  std::stable_sort(m.tensors.begin(), m.tensors.end(),
                   [](const scan_tensor& a, const scan_tensor& b) { return a.position < b.position; });
  for (std::size_t i = 1; i < m.tensors.size(); ++i)
    if (m.tensors[i].position == m.tensors[i - 1].position)
      throw_input_error("merge", fmt::format("tensors '{}' and '{}' share position {}: not shards of one scan",
                                             m.tensors[i - 1].name, m.tensors[i].name, m.tensors[i].position));
  if (m.tensors.empty()) throw_input_error("merge", "the shards hold no tensor");
  detail::rank_and_group(m);
  return m;
}

}  // namespace numprobe::probes
