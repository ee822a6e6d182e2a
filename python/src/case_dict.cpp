#include "python/src/case_dict.hpp"

#include <nanobind/stl/string.h>

#include <string>

#include "numprobe/base/error.hpp"

namespace numprobe::python {

namespace nb = nanobind;

attention_case case_from_dict(const nb::dict& d) {
  attention_case c;
  for (auto [key_obj, value] : d) {
    const std::string key = nb::cast<std::string>(key_obj);
    const auto text = [&] { return nb::cast<std::string>(value); };
    const auto integer = [&] { return nb::cast<std::int64_t>(value); };
    if (key == "batch") c.batch = integer();
    else if (key == "queries") c.queries = integer();
    else if (key == "seq") c.seq = integer();
    else if (key == "heads") c.heads = integer();
    else if (key == "kv_heads") c.kv_heads = integer();
    else if (key == "head_dim") c.head_dim = integer();
    else if (key == "scale") c.scale = nb::cast<double>(value);
    else if (key == "dtype") c.dtype = formats::parse_format(text(), "dtype");
    else if (key == "mask") c.mask = parse_mask(text(), "mask");
    else if (key == "window") c.window = integer();
    else if (key == "softcap") c.softcap = nb::cast<double>(value);
    else if (key == "dist") c.dist = parse_dist(text(), "dist");
    else if (key == "logit_shift") c.logit_shift = nb::cast<double>(value);
    else if (key == "seed") c.seed = nb::cast<std::uint64_t>(value);
    else throw_input_error(key, "not a field of an attention case");
  }
  c.validate();
  return c;
}

nb::dict case_to_dict(const attention_case& c) {
  nb::dict d;
  d["batch"] = c.batch;
  d["queries"] = c.t();
  d["seq"] = c.seq;
  d["heads"] = c.heads;
  d["kv_heads"] = c.kv_heads;
  d["head_dim"] = c.head_dim;
  d["scale"] = c.scale;  // 0: 1/sqrt(D), as the id spells it
  d["softmax_scale"] = c.softmax_scale();
  d["dtype"] = std::string(formats::name(c.dtype));
  d["mask"] = std::string(to_string(c.mask));
  d["window"] = c.window;
  d["softcap"] = c.softcap;
  d["dist"] = std::string(to_string(c.dist));
  d["logit_shift"] = c.logit_shift;
  d["seed"] = c.seed;
  d["case"] = c.id();
  return d;
}

}  // namespace numprobe::python
