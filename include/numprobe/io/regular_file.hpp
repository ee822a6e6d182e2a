#pragma once
// Every file numprobe reads (tensors, checkpoints, shard indexes, scenarios, journals, reports
// to merge) must be a regular file: a FIFO or a device such as /dev/zero never ends, and a
// directory or a symlink loop only fails later with a misleading message. These checks run
// before the file is opened (opening a FIFO for reading blocks until a writer appears) and say
// which of the cases it is.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace numprobe::io {

// Why `path` cannot be read as a regular file ("no such file", "is a directory, not a regular
// file", "is a FIFO (named pipe), not a regular file", "is a character device, ...", "symbolic
// link loop ...", "permission denied"), or nothing when it is one. Symlinks are followed.
[[nodiscard]] std::optional<std::string> why_not_regular(const std::filesystem::path& path);

// Throws numprobe::error (exit 2) naming the path with why_not_regular's reason.
void require_regular_file(const std::filesystem::path& path);

// The whole text of a small regular file, refusing anything else and files over `max_bytes`
// (a scenario or a journal is kilobytes; the cap keeps a wrong path from filling memory).
[[nodiscard]] std::string read_text_file(const std::filesystem::path& path, std::size_t max_bytes,
                                         const std::string& what);

}  // namespace numprobe::io
