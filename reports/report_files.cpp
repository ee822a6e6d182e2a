#include "reports/report_files.hpp"

#include <filesystem>
#include <iostream>
#include <span>

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

void write_reports(const result::run_result& r, const report_targets& t) {
  if (!t.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(t.out_dir, ec);
    if (ec) throw_input_error(t.out_dir, "cannot create the output folder: " + ec.message());
  }
  for (const auto& f : report_formats()) {
    const auto w = f.make();
    std::string text;
    if (!t.out_dir.empty()) {
      text = w->render(r);
      write_one((std::filesystem::path(t.out_dir) / f.file_name).string(), text);
    }
    if (const auto it = t.paths.find(std::string(f.name)); it != t.paths.end() && !it->second.empty()) {
      if (text.empty()) text = w->render(r);
      write_one(it->second, text);
    }
  }
}

}  // namespace numprobe::reports
