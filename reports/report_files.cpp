#include "reports/report_files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "numprobe/base/error.hpp"
#include "reports/report_writer.hpp"
#include "src/io/atomic_write.hpp"

namespace numprobe::reports {
namespace {

void write_one(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  io::detail::atomic_write(path, {std::span<const std::byte>(p, text.size())});
}

}  // namespace

void check_report_targets(const report_targets& t) {
  std::map<std::string, std::string> owner;  // path -> the flag that writes it
  for (const auto& f : report_formats()) {
    const auto it = t.paths.find(std::string(f.name));
    if (it == t.paths.end() || it->second.empty()) continue;
    const std::string flag = "--" + std::string(f.name);
    const auto [at, fresh] = owner.emplace(it->second, flag);
    if (!fresh)
      throw_input_error(at->second + " and " + flag,
                        it->second == "-" ? "both write to stdout; give one of them a file"
                                          : "both write to '" + it->second + "'; give each report its own path");
    if (it->second == "-") continue;
    std::error_code ec;
    const std::filesystem::path path(it->second);
    if (std::filesystem::is_directory(path, ec))
      throw_input_error(flag, "'" + it->second + "' is a directory, not a file to write");
    const auto parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    if (!std::filesystem::is_directory(parent, ec))
      throw_input_error(flag, "'" + it->second + "': the folder '" + parent.string() + "' does not exist");
  }
  if (!t.out_dir.empty()) {
    std::error_code ec;
    const std::filesystem::path dir(t.out_dir);
    if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
      throw_input_error(t.out_dir, "is not a folder (the output folder of the reports)");
  }
}

void write_reports(const result::run_result& r, const report_targets& t) {
  check_report_targets(t);
  if (!t.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(t.out_dir, ec);
    if (ec) throw_input_error(t.out_dir, "cannot create the output folder: " + ec.message());
  }
  // Every report is rendered first, then written; when a write fails, the reports this call
  // already wrote are removed, so no file is left claiming an outcome the run did not have
  // (a report that cannot be written is exit 2, not the exit code the others recorded).
  std::vector<std::pair<std::string, std::string>> files, to_stdout;  // path, text
  for (const auto& f : report_formats()) {
    const auto w = f.make();
    std::string text;
    if (!t.out_dir.empty()) {
      text = w->render(r);
      files.emplace_back((std::filesystem::path(t.out_dir) / f.file_name).string(), text);
    }
    if (const auto it = t.paths.find(std::string(f.name)); it != t.paths.end() && !it->second.empty()) {
      if (text.empty()) text = w->render(r);
      (it->second == "-" ? to_stdout : files).emplace_back(it->second, std::move(text));
    }
  }
  std::vector<std::string> written;
  for (const auto& [path, text] : files) {
    struct stat st{};
    const bool regular_or_new = ::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode);
    try {
      write_one(path, text);
    } catch (const numprobe::error&) {
      for (const auto& done : written) ::unlink(done.c_str());
      throw;
    }
    if (regular_or_new) written.push_back(path);
  }
  for (const auto& [path, text] : to_stdout) write_one(path, text);
}

}  // namespace numprobe::reports
