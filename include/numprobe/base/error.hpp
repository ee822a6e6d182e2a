#pragma once
// One error type for the whole tool. It carries the place (a file, tensor, field or flag)
// and what was expected, and the exit code the CLI maps it to.
#include <stdexcept>
#include <string>

namespace numprobe {

// Exit codes of the CLI contract (DESIGN.md).
enum class exit_code : int {
  m_ok = 0,       // ran, every gate held
  m_breach = 1,   // a gate was breached
  m_input = 2,    // usage or input error
  m_backend = 3,  // backend or device unavailable or failed
};

// The message as one line of text: control characters (a newline, an escape sequence, a NUL
// in a tensor name read from a file) are written as \n, \t, \xNN, so an untrusted name can
// neither forge a line of output, nor reach the terminal as a command, nor cut the message.
[[nodiscard]] inline std::string one_line(const std::string& text) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u != 0x7f) {
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += k_hex[u >> 4];
      out += k_hex[u & 0xf];
    }
  }
  return out;
}

class error : public std::runtime_error {
 public:
  error(exit_code code, std::string place, const std::string& what)
      : std::runtime_error(one_line(place.empty() ? what : place + ": " + what)),
        m_code(code),
        m_place(std::move(place)) {}

  [[nodiscard]] exit_code code() const noexcept { return m_code; }
  [[nodiscard]] const std::string& place() const noexcept { return m_place; }

 private:
  exit_code m_code;
  std::string m_place;
};

// Bad flag, bad file, bad value: exit 2.
[[noreturn]] inline void throw_input_error(const std::string& place, const std::string& what) {
  throw error(exit_code::m_input, place, what);
}

// Backend missing or failing: exit 3.
[[noreturn]] inline void throw_backend_error(const std::string& place, const std::string& what) {
  throw error(exit_code::m_backend, place, what);
}

// A kernel's declared refusal of a case it does not implement (issue 27): an exec command that
// exits 77, a worker's `UNSUPPORTED <reason>`, a Python kernel's NotImplementedError, a plugin's
// NUMPROBE_STATUS_UNSUPPORTED or capabilities. A verdict, not a crash: the commands report the
// case as unsupported (audit: not-applicable) and do not count it as an error. Code
// that does not know the refusal sees a backend error (exit 3), as before.
class unsupported_case : public error {
 public:
  unsupported_case(std::string place, const std::string& reason)
      : error(exit_code::m_backend, std::move(place), "unsupported: " + reason),
        m_reason(one_line(reason)) {}
  // The kernel's own text, made one printable line (one_line): it reaches the terminal, the
  // JSON's unsupported_points[].reason and the audit's evidence, and a kernel is untrusted.
  [[nodiscard]] const std::string& reason() const noexcept { return m_reason; }

 private:
  std::string m_reason;
};

[[noreturn]] inline void throw_unsupported(const std::string& place, const std::string& reason) {
  throw unsupported_case(place, reason);
}

}  // namespace numprobe
