// `numprobe backends`: compiled-in backends and visible devices.
#include <fmt/format.h>
#include <memory>

#include "src/cli/case_options.hpp"
#include "src/cli/command.hpp"
#include "src/providers/cuda_provider.hpp"
#include "src/providers/hip_provider.hpp"
#include "src/providers/provider.hpp"

namespace numprobe::cli {

void setup_backends(CLI::App& app) {
  auto json = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("backends", "compiled-in backends and visible devices");
  sub->add_option("--json", *json, "write JSON to PATH (- for stdout)");
  sub->callback([json] {
    const auto backends = attention_backends();
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& b : backends) arr.push_back({{"name", b.name}, {"description", b.description}});
    // Devices of each GPU backend (empty when compiled out or none is visible).
    nlohmann::json devices = nlohmann::json::array();
    for (auto d : cuda_devices()) { d["backend"] = "cuda"; devices.push_back(d); }
    for (auto d : hip_devices()) { d["backend"] = "hip"; devices.push_back(d); }
    if (*json != "-") {
      for (const auto& b : backends) fmt::print("{:<8} {}\n", b.name, b.description);
      fmt::print("\ndevices:\n");
      if (devices.empty()) fmt::print("  none visible (CPU backends only)\n");
      for (const auto& d : devices) fmt::print("  {}\n", d.dump());
    }
    if (!json->empty()) {
      auto doc = json_envelope("backends", 0);
      doc["backends"] = arr;
      doc["devices"] = devices;
      write_json(*json, doc);
    }
  });
}

}  // namespace numprobe::cli
