#pragma once
// Text quoted from outside numprobe (an exec adapter's log, a worker's ERR line, a plugin's
// stderr or last-error message) goes into one-line error messages. Terminal control must not
// reach the user's terminal or a report: ANSI escape sequences are removed, a carriage return
// keeps what a terminal would show (the text after the last CR of the line: progress bars),
// other control bytes and invalid UTF-8 are written as \xNN, tabs become spaces and line feeds
// " | ", so the message stays one line of valid UTF-8.
#include <string>
#include <string_view>

namespace numprobe {

[[nodiscard]] std::string sanitize_quoted(std::string_view text);

}  // namespace numprobe
