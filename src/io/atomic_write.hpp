#pragma once
// Writes a file so that readers see either the old file or the complete new one: the bytes
// go to a temporary file in the same folder, which is flushed and then renamed over the
// target (rename is atomic within a file system). A target that exists and is not a regular
// file (/dev/null, a FIFO) is written in place instead, so it stays what it is.
#include <cstddef>
#include <filesystem>
#include <span>
#include <vector>

namespace numprobe::io::detail {

// Throws numprobe::error (exit 2) naming the target on any failure; the temporary file is
// removed then.
void atomic_write(const std::filesystem::path& target,
                  const std::vector<std::span<const std::byte>>& parts);

}  // namespace numprobe::io::detail
