#pragma once
// What `convert --write OUT` leaves when it does not complete (convert_probe.hpp): nothing it
// wrote. A failure (an exception) or SIGINT, SIGTERM or SIGHUP while it writes removes the files
// it wrote (each shard's temporary is removed by its writer, io::safetensors_stream, as the error
// unwinds), and OUT itself when convert created it; the folder is then free for the next try.
//
// Signals: SIGINT and SIGTERM are deferred by an interrupt_scope (src/core/interrupt.hpp) and
// SIGHUP, which numprobe's handlers leave at its default action, by a handler of its own while a
// convert_signal_guard lives; the writing loops call throw_if_convert_interrupted() between slabs,
// which throws numprobe::interrupted (exit 128 + the signal: 130, 143, 129). A second signal ends
// the process at once, as elsewhere.
#include <cstddef>
#include <filesystem>
#include <signal.h>
#include <string>
#include <vector>

#include "src/core/interrupt.hpp"

namespace numprobe::probes {

class convert_signal_guard {
 public:
  convert_signal_guard();
  ~convert_signal_guard();
  convert_signal_guard(const convert_signal_guard&) = delete;
  convert_signal_guard& operator=(const convert_signal_guard&) = delete;

 private:
  interrupt_scope m_defer;  // SIGINT/SIGTERM set the flag instead of ending numprobe
  struct sigaction m_old_hangup {};
};

// Throws numprobe::interrupted when SIGINT, SIGTERM (inside an interrupt_scope) or SIGHUP (inside
// a convert_signal_guard) is pending; otherwise nothing.
void throw_if_convert_interrupted();

// The files of one --write, removed by remove() (or the destructor) unless kept.
class partial_output {
 public:
  // `created`: OUT did not exist before this write (it is removed too when empty again).
  partial_output(std::filesystem::path dir, bool created) : m_dir(std::move(dir)), m_created(created) {}
  ~partial_output() { (void)remove(); }
  partial_output(const partial_output&) = delete;
  partial_output& operator=(const partial_output&) = delete;

  // A file about to be written under OUT (its name, relative to OUT).
  void add(const std::string& file) { m_files.push_back(file); }
  // The write completed: nothing is removed.
  void keep() noexcept { m_kept = true; }
  // Removes what was written (once); returns how many files were there to remove.
  std::size_t remove() noexcept;
  // " (--write: the partial output was removed ...)", for the error that caused it.
  [[nodiscard]] std::string removed_note(std::size_t removed) const;

 private:
  std::filesystem::path m_dir;
  bool m_created = false, m_kept = false, m_removed = false;
  std::vector<std::string> m_files;
};

}  // namespace numprobe::probes
