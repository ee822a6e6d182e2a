// `numprobe backends`: compiled-in backends (attention, softmax and quantize families) and
// visible devices.
#include <fmt/format.h>
#include <memory>

#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/cli/report_output.hpp"
#include "src/providers/cuda_provider.hpp"
#include "src/providers/hip_provider.hpp"
#include "src/providers/provider.hpp"
#include "src/providers/quant_provider.hpp"
#include "src/providers/softmax_provider.hpp"

namespace numprobe::cli {
namespace {

nlohmann::json to_json(const std::vector<backend_info>& backends) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& b : backends) arr.push_back({{"name", b.name}, {"description", b.description}});
  return arr;
}

result::table to_table(const std::string& title, const std::vector<backend_info>& backends) {
  result::table t{title, {"backend", "description"}, {}, false};
  for (const auto& b : backends) t.rows.push_back({b.name, b.description});
  return t;
}

}  // namespace

void setup_backends(CLI::App& app) {
  auto json = std::make_shared<report_flags>();
  auto* sub = app.add_subcommand("backends", "compiled-in backends and visible devices");
  add_report_flags(sub, *json);
  sub->callback([json] {
    const auto backends = attention_backends();
    const auto softmax = softmax_backends();
    const auto quant = quant_backends();
    // Devices of each GPU backend (empty when compiled out or none is visible).
    nlohmann::json devices = nlohmann::json::array();
    for (auto d : cuda_devices()) { d["backend"] = "cuda"; devices.push_back(d); }
    for (auto d : hip_devices()) { d["backend"] = "hip"; devices.push_back(d); }
    result::check_result c;
    c.backend = "none";
    c.message = fmt::format("{} backends, {} devices visible", backends.size(), devices.size());
    result::view_builder v(c);
    const result::table bt = to_table("attention backends", backends);
    v.add_table(bt);
    v.add_table(to_table("softmax backends", softmax));
    v.add_table(to_table("quantize backends (besides ref)", quant));
    if (devices.empty()) {
      v.line("devices: none visible (CPU backends only)");
    } else {
      auto& dt = v.add_table({"backend", "device"}, "devices");
      for (const auto& d : devices) dt.rows.push_back({d.value("backend", ""), d.dump()});
    }
    c.tables.push_back(bt);
    c.tables.back().data = true;
    c.details["backends"] = to_json(backends);  // the attention backends
    c.details["softmax_backends"] = to_json(softmax);
    c.details["quant_backends"] = to_json(quant);
    c.details["devices"] = devices;
    write_command_reports(*json, "backends", 0, std::move(c), 0);
  });
}

}  // namespace numprobe::cli
