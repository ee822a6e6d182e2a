#pragma once
// The scan's band machinery, shared by its two quantization paths (scan_fused.cpp: the RNE
// block quantizer straight from the tensor's bytes; scan_probe.cpp: formats::quantize() on
// decoded bands) and its report assembly (scan_groups.cpp). Internal to probes/.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <thread>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "numprobe/io/safetensors.hpp"
#include "probes/scan/scan_probe.hpp"
#include "src/formats/rne_block_quantizer.hpp"

namespace numprobe::probes::detail {

using formats::scheme_kind;
using formats::detail::element_storage;
using formats::detail::rne_block_quantizer;
inline constexpr double k_inf = std::numeric_limits<double>::infinity();

// Bands in flight at once (one per hardware thread OpenMP would use).
inline int max_threads() {
#ifdef _OPENMP
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}
inline constexpr std::size_t k_worked_elements = 32;
inline double sqnr_of(double sx, double se) { return se > 0 ? 10.0 * std::log10(sx / se) : k_inf; }
inline double rel_rms_of(double sx, double se) {
  return sx > 0 ? std::sqrt(se / sx) : (se > 0 ? k_inf : 0.0);
}

using fetch_fn = std::function<void(std::int64_t, std::int64_t, std::span<double>)>;
using formats::detail::element_storage;
using formats::detail::rne_block_quantizer;

// Where a tensor's rows come from: elements in memory (read in place), or a fetch callback
// that decodes rows into a buffer.
struct row_source {
  const std::byte* data = nullptr;
  element_storage type = element_storage::m_f64;
  const fetch_fn* fetch = nullptr;
  const std::function<void(std::size_t, std::size_t)>* release = nullptr;  // in-place data only
};

inline std::size_t element_bytes(element_storage t) {
  return t == element_storage::m_f64 ? 8 : t == element_storage::m_f32 ? 4 : 2;
}

// The scan's one concurrency model: a band pool of std::jthreads (for_bands). OpenMP regions
// met inside a band (formats::quantize's block loop) run on that band's thread alone, so the
// two never stack threads on the same cores; results never depend on the thread count.
class one_openmp_thread {
 public:
#ifdef _OPENMP
  one_openmp_thread() : m_previous(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~one_openmp_thread() { omp_set_num_threads(m_previous); }
#endif
  one_openmp_thread(const one_openmp_thread&) = delete;
  one_openmp_thread& operator=(const one_openmp_thread&) = delete;

 private:
#ifdef _OPENMP
  int m_previous;
#endif
};

// Runs fn(k, slot) for every k in [0, n) on `slots` threads (this one and up to slots - 1
// started here, `slot` naming which), each taking the next k from a shared counter, and
// returns when all are done. A thread out of work blocks in the join instead of spinning at
// an OpenMP barrier, which on a shared two-core machine takes time from the thread still
// working. fn must not throw.
template <class F>
void for_bands(std::int64_t n, int slots, const F& fn) {
  std::atomic<std::int64_t> next{0};
  const auto work = [&](std::size_t slot) {
    for (std::int64_t k = next.fetch_add(1); k < n; k = next.fetch_add(1)) fn(k, slot);
  };
  std::vector<std::jthread> pool;
  for (std::int64_t t = 1; t < std::min<std::int64_t>(slots, n); ++t)
    pool.emplace_back(work, static_cast<std::size_t>(t));
  work(0);
}

// A tensor's bulk bound (scan_bulk.cpp), from its sampled rows, once for all its schemes, and
// its column weights for the output error.
struct scan_magnitudes {
  double bulk_below = 0.0;  // the bulk is every finite element with |x| < bulk_below
  std::int64_t sampled = 0, sample_rows_step = 1;  // finite elements sampled; every step-th row
  // --act-stats: E[x_j^2] for the cols columns, then 4 zeros (metrics::output_weights_scope's
  // padding); null: no statistics, no weighted sums.
  const double* act_sq_mean = nullptr;
};
[[nodiscard]] scan_magnitudes magnitude_pass(std::int64_t rows, std::int64_t cols, const row_source& src);

// Whether the strip of rows [first, first + n) holds a sampled row (r % step == 0): the bulk's
// error is summed over those strips (all of them when step is 1).
inline bool in_bulk_sample(std::int64_t first, std::int64_t n, std::int64_t step) {
  return (first + step - 1) / step * step < first + n;
}

// The fused path (scan_fused.cpp); m.bulk_below is the bulk its error lanes sum apart.
[[nodiscard]] scan_scheme_result scan_fused(const formats::scheme_config& c, scan_scheme_result r,
                                            std::int64_t rows, std::int64_t cols, const row_source& src,
                                            std::int64_t band, const scan_magnitudes& m);

// The flush-aware fractions, the bulk's relative RMS and the output error of a finished result.
inline void finish_flush_columns(scan_scheme_result& r) {
  const auto n = static_cast<double>(std::max<std::int64_t>(r.elements, 1));
  r.flushed_frac = static_cast<double>(r.flushed) / n;
  r.outlier_flushed_frac = static_cast<double>(r.outlier_flushed) / n;
  if (r.nonfinite_outputs > 0) r.bulk_sum_sq_err = k_inf;  // as sum_sq_err: a poisoned tensor
  r.bulk_rel_rms = rel_rms_of(r.bulk_sum_sq, r.bulk_sum_sq_err);
  if (!r.output_weighted) {  // isotropic activations: the expectation is rel_rms (scan_probe.hpp)
    r.output_rel_rms = r.rel_rms;
    r.output_sqnr_db = r.sqnr_db;
    return;
  }
  if (r.nonfinite_outputs > 0) r.output_sum_sq_err = k_inf;
  r.output_rel_rms = rel_rms_of(r.output_sum_sq, r.output_sum_sq_err);
  r.output_sqnr_db = sqnr_of(r.output_sum_sq, r.output_sum_sq_err);
}

// The --act-stats file (scan_act_stats.cpp). Throws numprobe::error (exit 2) naming the file.
class scan_act_stats {
 public:
  explicit scan_act_stats(const std::string& path);
  // The key of weight's statistics: weight's own name, else its trailing ".weight" replaced
  // by ".input_sq_mean"; "" when the file holds neither.
  [[nodiscard]] std::string key_of(const std::string& weight) const;
  // Tensor `key` as the statistics of `weight` (cols input channels): cols values, then 4
  // zeros (scan_magnitudes::act_sq_mean). Exit 2 naming both tensors unless it holds exactly
  // cols values of a float dtype, each finite and >= 0.
  [[nodiscard]] std::vector<double> load(const std::string& key, const std::string& weight, std::int64_t cols) const;
  [[nodiscard]] std::size_t tensor_count() const { return m_file.tensors().size(); }

 private:
  std::string m_path;
  io::safetensors_file m_file;
};

// Ranks the tensors worst first (options.rank_by, primary scheme) and adds them up by layer
// type, by depth and in total, per scheme (scan_groups.cpp).
void rank_and_group(scan_report& rep);

}  // namespace numprobe::probes::detail
