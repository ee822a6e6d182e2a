#pragma once
// Sweep lengths laid out around a kernel's key tile (or around every common tile size when the
// tile is unknown): the lengths of drift's curve and of softmax's vocabulary sweep.
#include <cstdint>
#include <string>
#include <vector>

namespace numprobe::probes {

// --points: "tile" (k*Bk-1, k*Bk, k*Bk+1 at log-spaced k; with tile_k <= 0, unknown, the same
// around every common tile size: common_tile_lengths), "log:N" (N log-spaced lengths), or a
// comma-separated list of lengths, each within [lo, hi].
[[nodiscard]] std::vector<std::int64_t> drift_lengths(const std::string& points, std::int64_t lo,
                                                      std::int64_t hi, std::int64_t tile_k);

}  // namespace numprobe::probes
