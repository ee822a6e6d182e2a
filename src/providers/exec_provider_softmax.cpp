// `numprobe softmax --backend exec:'CMD'`: a user's softmax kernel as an external program, with
// the file convention of the attention exec backend (examples/exec/README.md, "softmax"):
//   in:  x.npy [R, V] logits (float32; float64 for f64 cases; exact in the case dtype, -inf at
//        masked entries) and case.json (the case under the CLI's own names, row targets)
//   out: y.npy [R, V] probabilities and/or logp.npy [R, V] log-probabilities (at least one;
//        float32, float16, bf16 or float64), optional lse.npy [R] (natural log, -inf for a fully
//        masked row). Without lse.npy the kernel's LSE is read off its own output at the row
//        maximum: z_max - log p(argmax).
// exec-worker:CMD (or --exec-worker) keeps one worker process for the whole sweep.

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>

#include "numprobe/base/error.hpp"
#include "numprobe/io/npy.hpp"
#include "src/providers/exec_provider_files.hpp"
#include "src/providers/exec_provider_process.hpp"
#include "src/providers/exec_provider_worker.hpp"
#include "src/providers/knobs.hpp"
#include "src/providers/softmax_provider.hpp"

namespace numprobe {
namespace {

class exec_softmax final : public softmax_provider {
 public:
  explicit exec_softmax(const softmax_provider_options& o) : m_opts(o) {
    const backend_spec spec = parse_backend_spec(o.backend);
    const std::string& kind = spec.kind;
    m_worker_mode = kind == "exec-worker" || o.exec_worker;
    m_command = spec.arg;
    if (m_command.empty())
      throw_input_error("--backend " + kind,
                        kind == "exec-worker"
                            ? "expected exec-worker:CMD, e.g. exec-worker:'python3 examples/exec/worker.py numpy_softmax'"
                            : "expected exec:CMD, e.g. exec:'python3 adapter.py {in}'");
    m_argv = exec::split_command(m_command, "--backend " + kind);
    if (!(o.exec_timeout_s > 0)) throw_input_error("--exec-timeout", "must be a positive number of seconds");
    if (!o.faults.empty()) throw_input_error("--inject", "an exec backend has no injectable faults");
    if (!o.states.empty()) throw_input_error("--state", "an exec backend has no state dtypes");
    if (o.exp2) throw_input_error("--exp2", "an exec backend computes as it does; --exp2 does not apply");
    if (!m_worker_mode) exec::require_placeholders(m_argv, "--backend " + kind);
    if (m_worker_mode) {
      m_session_dir = exec::make_temp_dir("numprobe-worker");
      m_worker = std::make_unique<exec::worker_process>(m_argv, o.exec_timeout_s, m_session_dir + "/worker.log");
    }
  }

  ~exec_softmax() override {
    m_worker.reset();  // QUIT before the log goes
    if (!m_session_dir.empty() && !m_opts.keep_temp) exec::remove_tree(m_session_dir);
  }
  exec_softmax(const exec_softmax&) = delete;
  exec_softmax& operator=(const exec_softmax&) = delete;

  std::string name() const override {
    return fmt::format("{}[{}]", m_worker_mode ? "exec-worker" : "exec", m_command);
  }
  std::int64_t chunk() const override { return 0; }

  softmax_output run(const softmax_case& c, std::span<const double> logits,
                     std::span<const std::int64_t> rows) override {
    const std::string dir = exec::make_temp_dir("numprobe-softmax");
    const std::string who = fmt::format("{} backend, case {}", m_worker_mode ? "exec-worker" : "exec", c.id());
    try {
      write_case(dir, c, logits, rows);
      if (m_worker_mode) m_worker->run_case(dir, who);
      else exec::run_case_command(m_argv, dir, m_opts.exec_timeout_s, who);
      auto out = read_outputs(dir, c, logits, rows, who);
      finish(dir);
      return out;
    } catch (const error& e) {
      finish(dir);
      if (!m_opts.keep_temp) throw;
      throw error(e.code(), "", fmt::format("{} (files kept in {})", e.what(), dir));
    }
  }

  nlohmann::json metadata() const override {
    nlohmann::json j = {{"command", m_command}, {"timeout_s", m_opts.exec_timeout_s}, {"outputs", m_read},
                        {"worker", m_worker_mode}};
    if (m_worker) j["worker_starts"] = m_worker->starts();
    return j;
  }

 private:
  void write_case(const std::string& dir, const softmax_case& c, std::span<const double> logits,
                  std::span<const std::int64_t> rows) const {
    const auto r = static_cast<std::uint64_t>(rows.size()), v = static_cast<std::uint64_t>(c.vocab);
    const std::vector<std::uint64_t> shape{r, v};
    const bool f64 = c.dtype == formats::format_id::m_f64;
    if (f64) io::write_npy(dir + "/x.npy", shape, std::vector<double>(logits.begin(), logits.end()));
    else io::write_npy(dir + "/x.npy", shape, std::vector<float>(logits.begin(), logits.end()));  // exact
    nlohmann::json targets = nlohmann::json::array(), ids = nlohmann::json::array();
    for (auto row : rows) {
      targets.push_back(softmax_target(c, row));
      ids.push_back(row);
    }
    const nlohmann::json j = {{"format", "numprobe-case"},
                              {"version", 1},
                              {"op", "softmax"},
                              {"case", c.id()},
                              {"vocab", c.vocab},
                              {"rows", r},
                              {"row_ids", ids},
                              {"dtype", std::string(formats::name(c.dtype))},
                              {"mask", std::string(to_string(c.mask))},
                              {"masked", c.masked_count()},
                              {"temperature", c.temperature},
                              {"softcap", c.softcap},
                              {"dist", std::string(to_string(c.dist))},
                              {"seed", c.seed},
                              {"targets", targets},
                              {"inputs_dtype", f64 ? "float64" : "float32"},
                              {"layout", {{"x", {r, v}}, {"y", {r, v}}, {"logp", {r, v}}, {"lse", {r}}}}};
    std::ofstream out(dir + "/case.json");
    out << j.dump(2) << "\n";
    if (!out.flush()) throw_backend_error(dir + "/case.json", "write failed");
  }

  softmax_output read_outputs(const std::string& dir, const softmax_case& c,
                              std::span<const double> logits, std::span<const std::int64_t> rows,
                              const std::string& who) {
    auto fail = [&](const std::string& file, const std::string& what) -> void {
      throw_backend_error(who + ": " + dir + "/" + file, what);
    };
    const auto nr = static_cast<std::uint64_t>(rows.size()), v = static_cast<std::uint64_t>(c.vocab);
    auto load = [&](const std::string& file, const std::vector<std::uint64_t>& want) {
      io::tensor_view t;
      try {
        t = io::read_npy(dir + "/" + file);
      } catch (const error& e) {
        fail(file, fmt::format("not a readable .npy file ({})", e.what()));
      }
      using io::dtype;
      if (t.dtype != dtype::m_f32 && t.dtype != dtype::m_f16 && t.dtype != dtype::m_f64 &&
          t.dtype != dtype::m_bf16)
        fail(file, fmt::format("dtype {} is not float32, float16, float64 or bfloat16", io::name(t.dtype)));
      if (t.shape != want)
        fail(file, fmt::format("shape {} where {} is expected", exec::shape_text(t.shape), exec::shape_text(want)));
      // NaN/Inf in the output is the kernel's answer: a finding the probe counts (exit 1, with a
      // report), not a protocol error.
      return t.to_doubles();
    };
    const bool have_p = std::filesystem::exists(dir + "/y.npy");
    const bool have_logp = std::filesystem::exists(dir + "/logp.npy");
    const bool have_lse = std::filesystem::exists(dir + "/lse.npy");
    if (!have_p && !have_logp) fail("y.npy", "the kernel wrote neither y.npy (probabilities) nor logp.npy");
    softmax_output out = make_poisoned_softmax({rows.begin(), rows.end()}, c.vocab);
    if (have_p) out.p = load("y.npy", {nr, v});
    if (have_logp) out.logp = load("logp.npy", {nr, v});
    if (!have_logp)
      for (std::size_t i = 0; i < out.p.size(); ++i) out.logp[i] = std::log(out.p[i]);  // 0 -> -inf
    if (!have_p)
      for (std::size_t i = 0; i < out.logp.size(); ++i) out.p[i] = std::exp(out.logp[i]);
    if (have_lse) {
      out.lse = load("lse.npy", {nr});
    } else {
      // The LSE the kernel's output implies: z_max - log p(argmax), z the transformed logits.
      for (std::size_t r = 0; r < nr; ++r) {
        double best = -std::numeric_limits<double>::infinity();
        std::size_t at = 0;
        for (std::size_t i = 0; i < v; ++i) {
          const double x = logits[r * v + i];
          if (x > best) best = x, at = i;
        }
        if (std::isinf(best) && best < 0) {
          out.lse[r] = best;  // fully masked
          continue;
        }
        double z = best;
        if (c.softcap > 0) z = c.softcap * std::tanh(z / c.softcap);
        z /= c.temperature;
        out.lse[r] = z - out.logp[r * v + at];
      }
    }
    for (std::size_t r = 0; r < nr; ++r) {
      const std::int64_t t = softmax_target(c, rows[r]);
      out.ce[r] = t >= 0 ? -out.logp[r * v + static_cast<std::size_t>(t)] : 0.0;
    }
    m_read = fmt::format("{}{}{}", have_p ? "y.npy (p) " : "", have_logp ? "logp.npy " : "",
                         have_lse ? "lse.npy" : "(lse derived: z_max - log p(argmax))");
    return out;
  }

  void finish(const std::string& dir) const {
    if (!m_opts.keep_temp) exec::remove_tree(dir);
  }

  softmax_provider_options m_opts;
  std::string m_command;
  std::vector<std::string> m_argv;
  std::string m_read;
  bool m_worker_mode = false;
  std::string m_session_dir;
  std::unique_ptr<exec::worker_process> m_worker;
};

}  // namespace

std::unique_ptr<softmax_provider> make_exec_softmax_provider(const softmax_provider_options& o) {
  return std::make_unique<exec_softmax>(o);
}

}  // namespace numprobe
