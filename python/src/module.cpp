// numprobe._core: the C++ library in process. numprobe::error becomes ValueError (input, exit 2
// in the CLI) or RuntimeError (backend, exit 3), its place spelled as the Python keyword
// ("--kv-heads" -> "kv_heads") so the message names the argument the caller gave.
#include <string>

#include "numprobe/base/error.hpp"
#include "python/src/arrays.hpp"

namespace {

std::string python_message(const numprobe::error& e) {
  std::string what = e.what();
  const std::string& place = e.place();
  if (place.size() > 2 && place.compare(0, 2, "--") == 0 && what.compare(0, place.size(), place) == 0) {
    std::string name = place.substr(2);
    for (char& ch : name)
      if (ch == '-') ch = '_';
    what = name + what.substr(place.size());
  }
  return what;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "numprobe's C++ library: reference, formats, metrics and probes, in process";
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const numprobe::error& e) {
      const std::string msg = python_message(e);
      if (e.code() == numprobe::exit_code::m_input) PyErr_SetString(PyExc_ValueError, msg.c_str());
      else PyErr_SetString(PyExc_RuntimeError, msg.c_str());
    }
  });
  numprobe::python::bind_reference(m);
  numprobe::python::bind_quant(m);
  numprobe::python::bind_attention(m);
  numprobe::python::bind_kl(m);
  numprobe::python::bind_probes(m);
}
