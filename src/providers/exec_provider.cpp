#include "src/providers/exec_provider.hpp"

#include <fmt/format.h>
#include <memory>

#include "numprobe/base/error.hpp"
#include "src/providers/exec_provider_files.hpp"
#include "src/providers/exec_provider_process.hpp"
#include "src/providers/exec_provider_worker.hpp"
#include "src/providers/knobs.hpp"
#include "src/providers/provider.hpp"

namespace numprobe {
namespace {

class exec_provider final : public attention_provider {
 public:
  explicit exec_provider(const provider_options& o)
      : m_timeout_s(o.exec_timeout_s), m_keep(o.keep_temp) {
    const backend_spec spec = parse_backend_spec(o.backend);
    const std::string& kind = spec.kind;
    m_worker_mode = kind == "exec-worker" || o.exec_worker;
    const std::string place = "--backend " + kind;
    if (spec.arg.empty())
      throw_input_error(place, fmt::format("expected {}:CMD, e.g. {}:'python3 adapter.py {{in}} {{out}}'",
                                           kind, kind));
    m_command = spec.arg;
    m_argv = exec::split_command(m_command, place);
    if (!(m_timeout_s > 0)) throw_input_error("--exec-timeout", "must be a positive number of seconds");
    if (!o.faults.empty()) throw_input_error("--inject", "an exec backend has no injectable faults");
    if (!o.states.empty()) throw_input_error("--state", "an exec backend has no state dtypes");
    if (o.tile) m_tiles = *o.tile;  // an opaque kernel's tiles, as the user states them
    if (!m_worker_mode) exec::require_placeholders(m_argv, place);
    if (m_worker_mode) {
      m_session_dir = exec::make_temp_dir("numprobe-worker");
      m_worker = std::make_unique<exec::worker_process>(m_argv, m_timeout_s,
                                                        m_session_dir + "/worker.log");
    }
  }

  ~exec_provider() override {
    m_worker.reset();  // QUIT before the log goes
    if (!m_session_dir.empty() && !m_keep) exec::remove_tree(m_session_dir);
  }

  std::string name() const override {
    return fmt::format("{}[{}]", m_worker_mode ? "exec-worker" : "exec", m_command);
  }
  tile_shape tiles() const override { return m_tiles; }
  // The command computes every row of the case; numprobe keeps the requested ones.
  bool computes_row_subsets() const override { return false; }

  attention_output run(const attention_inputs& in, std::span<const std::int64_t> rows) override {
    const attention_case& c = in.c();
    const std::string dir = exec::make_temp_dir("numprobe-exec");
    const std::string who = fmt::format("{} backend, case {}", m_worker_mode ? "exec-worker" : "exec",
                                        c.id());
    try {
      exec::write_case_dir(dir, in);
      if (m_worker_mode) m_worker->run_case(dir, who);
      else exec::run_case_command(m_argv, dir, m_timeout_s, who);
      exec::output_read_options ro;
      ro.who = who;
      auto out = exec::read_attention_output(dir + "/o.npy", dir + "/lse.npy", c, rows, ro);
      finish(dir);
      return out;
    } catch (const unsupported_case&) {
      finish(dir);  // a refusal leaves nothing worth keeping
      throw;
    } catch (const error& e) {
      finish(dir);
      if (!m_keep) throw;
      throw error(e.code(), "", fmt::format("{} (files kept in {})", e.what(), dir));
    }
  }

  nlohmann::json metadata() const override {
    nlohmann::json j = {{"command", m_command},
                        {"mode", m_worker_mode ? "worker" : "one process per case"},
                        {"timeout_s", m_timeout_s},
                        {"rows", "all rows computed, requested rows kept"}};
    if (m_worker) j["worker_starts"] = m_worker->starts();
    return j;
  }

 private:
  void finish(const std::string& dir) const {
    if (!m_keep) exec::remove_tree(dir);
  }

  std::string m_command;
  std::vector<std::string> m_argv;
  double m_timeout_s = 60.0;
  bool m_keep = false;
  bool m_worker_mode = false;
  tile_shape m_tiles;
  std::string m_session_dir;
  std::unique_ptr<exec::worker_process> m_worker;
};

std::unique_ptr<attention_provider> make_exec(const provider_options& o) {
  return std::make_unique<exec_provider>(o);
}

}  // namespace

void register_exec_provider() {
  register_attention_provider(
      "exec", &make_exec, "external command per case: exec:'CMD {in} {out}' (.npy files in and out)");
  register_attention_provider(
      "exec-worker", &make_exec,
      "external worker process for a whole sweep: exec-worker:'CMD' (line protocol over stdin/stdout)");
}

}  // namespace numprobe
