#include "src/core/quoted_text.hpp"

#include <fmt/format.h>

namespace numprobe {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (strict: no overlongs, no surrogates,
// nothing above U+10FFFF), or 0 when the byte starts none.
std::size_t utf8_length(std::string_view s, std::size_t i, unsigned& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = 0;
  unsigned min = 0;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1Fu, min = 0x80;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0Fu, min = 0x800;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07u, min = 0x10000;
  else return 0;
  if (s.size() - i < len) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// Index just past the escape sequence starting with ESC at s[i].
std::size_t skip_escape(std::string_view s, std::size_t i) {
  std::size_t j = i + 1;
  if (j >= s.size()) return j;
  const char kind = s[j++];
  if (kind == '[') {  // CSI: parameters and intermediates, then one final byte 0x40..0x7E
    while (j < s.size() && static_cast<unsigned char>(s[j]) >= 0x20 &&
           static_cast<unsigned char>(s[j]) < 0x40)
      ++j;
    return j < s.size() ? j + 1 : j;
  }
  if (kind == ']' || kind == 'P' || kind == '_' || kind == '^') {  // OSC, DCS...: to BEL or ST
    while (j < s.size()) {
      if (s[j] == '\a') return j + 1;
      if (s[j] == '\x1b' && j + 1 < s.size() && s[j + 1] == '\\') return j + 2;
      ++j;
    }
    return j;
  }
  return j;  // a two-byte escape (ESC 7, ESC =, ...)
}

void append_clean(std::string& out, std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0x1b) {
      i = skip_escape(s, i);
    } else if (c == '\t') {
      out += ' ';
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      unsigned cp = 0;
      const std::size_t len = utf8_length(s, i, cp);
      if (len == 0) {
        out += fmt::format("\\x{:02x}", c);
        ++i;
      } else if (cp < 0xA0) {  // C1 controls (U+0080..U+009F) act on terminals too
        for (std::size_t k = 0; k < len; ++k)
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i + k]));
        i += len;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
    }
  }
}

}  // namespace

std::string sanitize_quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    // What a terminal shows: the last carriage-return segment that is not empty.
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const auto cr = line.rfind('\r'); cr != std::string_view::npos) line = line.substr(cr + 1);
    if (start > 0) out += " | ";
    append_clean(out, line);
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

}  // namespace numprobe
