#include "json_header.hpp"

#include <set>

#include "numprobe/base/error.hpp"
#include "utf8.hpp"

namespace numprobe::io::detail {

nlohmann::json parse_json_object(std::string_view text, const std::string& place,
                                 int max_depth) {
  if (!is_valid_utf8(text)) throw_input_error(place, "JSON header is not valid UTF-8");
  std::set<std::string> keys;
  std::string duplicate;
  bool too_deep = false;
  using event = nlohmann::json::parse_event_t;
  // depth counts open containers: the top-level object's keys arrive at depth 1.
  const nlohmann::json::parser_callback_t cb = [&](int depth, event ev, nlohmann::json& v) {
    if ((ev == event::object_start || ev == event::array_start) && depth >= max_depth) {
      too_deep = true;
      return false;  // discard: keeps memory bounded while the parser skips the subtree
    }
    if (ev == event::key && depth == 1 && v.is_string()) {
      const auto& k = v.get_ref<const std::string&>();
      if (!keys.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), cb, false);
  if (j.is_discarded()) throw_input_error(place, "header is not valid JSON");
  if (too_deep) throw_input_error(place, "JSON header nests deeper than expected");
  if (!j.is_object()) throw_input_error(place, "JSON header is not an object");
  if (!duplicate.empty()) throw_input_error(place, "duplicate key '" + duplicate + "' in header");
  return j;
}

}  // namespace numprobe::io::detail
