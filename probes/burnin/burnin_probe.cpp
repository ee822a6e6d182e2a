// The burn-in run: the same seeded workloads on every device, repetition by repetition, each
// output hashed and each repetition timed. Devices take turns within a repetition (0, 1, ...,
// N-1, then the next repetition), so a slow spell of the host falls on every device alike rather
// than on the one that happened to run then.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <numeric>
#include <omp.h>
#include <ctime>

#include "numprobe/base/error.hpp"
#include "numprobe/base/rng.hpp"
#include "numprobe/core/attention_inputs.hpp"
#include "numprobe/formats/scheme.hpp"
#include "probes/burnin/burnin_probe.hpp"
#include "probes/burnin/output_hash.hpp"
#include "src/providers/cuda_provider.hpp"
#include "src/providers/hip_provider.hpp"
#include "src/providers/knobs.hpp"
#include "src/providers/quant_provider.hpp"

namespace numprobe::probes {
namespace {

constexpr std::pair<burnin_fault, const char*> k_fault_names[] = {
    {burnin_fault::m_bitflip, "bitflip"}, {burnin_fault::m_flaky, "flaky"}, {burnin_fault::m_slow, "slow"}};

std::uint64_t hash_output(const attention_output& out) {
  std::uint64_t h = fnv1a64(std::span<const double>(out.o));
  return fnv1a64(std::span<const double>(out.lse), h);
}

std::uint64_t hash_quant(const quant_device_output& q) {
  std::uint64_t h = fnv1a64(std::span<const std::uint32_t>(q.codes));
  h = fnv1a64(std::span<const std::uint32_t>(q.scale_codes), h);
  return fnv1a64(std::span<const double>(&q.tensor_scale, 1), h);
}

// The reference codec's result in the device's terms (one scale code per block).
std::uint64_t hash_quant(const formats::quant_result& q) {
  quant_device_output d;
  d.codes = q.codes;
  for (const auto& b : q.blocks) d.scale_codes.push_back(b.scale_code);
  d.tensor_scale = q.tensor_scale;
  return hash_quant(d);
}

// One device: its attention and decode providers and its quantizer (a device kernel on cuda and
// hip, the reference codec on emu, whose quantize kernel it is).
struct device_kernels {
  std::unique_ptr<attention_provider> prefill, decode;
  std::unique_ptr<quant_provider> quant;
};

std::vector<std::string> device_names(const std::string& backend, const std::vector<int>& ids) {
  std::vector<nlohmann::json> visible;
  if (backend == "cuda") visible = cuda_devices();
  if (backend == "hip") visible = hip_devices();
  std::vector<std::string> names;
  for (int id : ids) {
    if (backend == "emu") {
      names.push_back(fmt::format("emu device {}", id));
      continue;
    }
    if (id >= static_cast<int>(visible.size()))
      throw_backend_error("--devices", fmt::format("{} device {} is not visible ({} visible)", backend, id,
                                                   visible.size()));
    names.push_back(visible[static_cast<std::size_t>(id)].value("name", fmt::format("{} device {}", backend, id)));
  }
  return names;
}

}  // namespace

burnin_fault parse_burnin_fault(const std::string& s, const std::string& where) {
  for (const auto& [f, n] : k_fault_names)
    if (s == n) return f;
  throw_input_error(where, fmt::format("unknown fault '{}' (bitflip, flaky, slow)", s));
}

const char* name(burnin_fault f) {
  for (const auto& [k, n] : k_fault_names)
    if (k == f) return n;
  return "?";
}

std::size_t burnin_result::outliers() const {
  return static_cast<std::size_t>(
      std::count_if(devices.begin(), devices.end(), [](const burnin_device& d) { return !d.reasons.empty(); }));
}

burnin_result run_burnin(const burnin_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string backend = parse_backend_spec(o.provider.backend).kind;
  if (backend != "emu" && backend != "cuda" && backend != "hip")
    throw_input_error("--backend", fmt::format("burnin compares devices of emu, cuda or hip, not '{}'", backend));
  if (o.devices.empty()) throw_input_error("--devices", "no device selected");
  if (!o.faults.empty() && backend != "emu")
    throw_input_error("--fault", "is a test hook of the emulated fleet (--backend emu)");
  for (const auto& [dev, f] : o.faults)
    if (std::find(o.devices.begin(), o.devices.end(), dev) == o.devices.end())
      throw_input_error("--fault", fmt::format("device {} is not among --devices", dev));
  if (o.reps < 0 || (o.reps == 0 && !(o.duration_s > 0)))
    throw_input_error("--reps", "give --reps N (N >= 1) or --duration S (S > 0)");

  burnin_result r;
  r.options = o;
  const formats::scheme_config scheme = formats::find_scheme(o.scheme, "--scheme").defaults;
  r.workloads = {{"attention", o.attention.id()},
                 {"decode", o.decode.id() + ",decode"},
                 {"quantize", fmt::format("quantize({},rows={},cols={},seed={})", o.scheme, o.quant_rows, o.quant_cols,
                                          o.seed)}};
  // The inputs are generated once, on the host, from the seed: every device gets the same bytes.
  const attention_inputs prefill_in(o.attention, false), decode_in(o.decode, false);
  std::vector<std::int64_t> prefill_rows(static_cast<std::size_t>(o.attention.rows())),
      decode_rows(static_cast<std::size_t>(o.decode.rows()));
  std::iota(prefill_rows.begin(), prefill_rows.end(), std::int64_t{0});
  std::iota(decode_rows.begin(), decode_rows.end(), std::int64_t{0});
  std::vector<double> qx(static_cast<std::size_t>(o.quant_rows * o.quant_cols));
  for (std::size_t i = 0; i < qx.size(); ++i)  // a normal-ish spread with a heavy tail: flushes and clipping occur
    qx[i] = (uniform_open01(o.seed, 101, i) - 0.5) / std::max(uniform_open01(o.seed, 102, i), 0.05);
  const std::vector<float> qx32(qx.begin(), qx.end());
  const std::vector<double> qx_rounded(qx32.begin(), qx32.end());  // what an fp32 device kernel sees

  const auto names = device_names(backend, o.devices);
  std::vector<device_kernels> kernels;
  for (std::size_t d = 0; d < o.devices.size(); ++d) {
    device_kernels k;
    provider_options po = o.provider;
    po.device = o.devices[d];
    k.prefill = make_attention_provider(po);
    po.knobs["decode"] = "";
    k.decode = make_attention_provider(po);
    if (backend != "emu") k.quant = make_quant_provider(backend, o.devices[d]);
    if (d == 0) r.backend = k.prefill->name();
    burnin_device dev;
    dev.id = o.devices[d];
    dev.name = names[d];
    dev.hashes.assign(r.workloads.size(), {});
    r.devices.push_back(std::move(dev));
    kernels.push_back(std::move(k));
  }

  // Emulated devices share the host's cores with whatever else runs there, so each is one core:
  // the emulator runs on one OpenMP thread here and is timed by that thread's CPU time, which a
  // busy host does not stretch (OpenMP workers that spin while they wait for a core would charge
  // a process clock with time that is the host's load, not the device's work). GPUs: the wall clock.
  const bool cpu_clock = backend == "emu";
  r.clock = cpu_clock ? "thread-cpu" : "wall";
  struct omp_threads_scope {
    int saved = omp_get_max_threads();
    explicit omp_threads_scope(bool one) {
      if (one) omp_set_num_threads(1);
    }
    ~omp_threads_scope() { omp_set_num_threads(saved); }
  } threads(cpu_clock);
  const auto clock = [cpu_clock] {
    if (cpu_clock) {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  // One untimed repetition per device first: first-touch allocation and cold caches are not the
  // device's speed.
  for (auto& k : kernels) {
    (void)k.prefill->run(prefill_in, prefill_rows);
    (void)k.decode->run(decode_in, decode_rows);
  }
  const auto elapsed = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  for (std::int64_t rep = 0;; ++rep) {
    if (o.reps > 0 ? rep >= o.reps : rep >= 2 && elapsed() >= o.duration_s) break;
    for (std::size_t d = 0; d < kernels.size(); ++d) {
      auto& k = kernels[d];
      auto& dev = r.devices[d];
      const auto fault = o.faults.find(dev.id);
      const auto has = [&](burnin_fault f) { return fault != o.faults.end() && fault->second == f; };
      // The device's work of one repetition: the three workloads, hashed.
      const auto work = [&] {
        std::array<std::uint64_t, 3> h{};
        auto out = k.prefill->run(prefill_in, prefill_rows);
        if (!out.o.empty() && (has(burnin_fault::m_bitflip) || (has(burnin_fault::m_flaky) && rep % 2 == 1))) {
          // The lowest bit of the first output element: the smallest error a device can make.
          std::uint64_t bits;
          std::memcpy(&bits, &out.o[0], sizeof bits);
          bits ^= 1u;
          std::memcpy(&out.o[0], &bits, sizeof bits);
        }
        h[0] = hash_output(out);
        h[1] = hash_output(k.decode->run(decode_in, decode_rows));
        h[2] = k.quant ? hash_quant(k.quant->quantize(scheme, qx32, o.quant_rows, o.quant_cols))
                       : hash_quant(formats::quantize(scheme, qx_rounded, o.quant_rows, o.quant_cols));
        return h;
      };
      const double start = clock();
      const auto h = work();
      // A slow device does the same work in four times the time: here, the work four times over.
      if (has(burnin_fault::m_slow))
        for (int extra = 0; extra < 3; ++extra) (void)work();
      dev.rep_seconds.push_back(clock() - start);
      for (std::size_t w = 0; w < h.size(); ++w) dev.hashes[w].push_back(h[w]);
    }
    r.reps = rep + 1;
  }
  judge_burnin(r);
  r.seconds = elapsed();
  return r;
}

}  // namespace numprobe::probes
