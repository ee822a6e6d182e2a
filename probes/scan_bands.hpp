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

#include "probes/scan_probe.hpp"
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

// The fused path (scan_fused.cpp).
[[nodiscard]] scan_scheme_result scan_fused(const formats::scheme_config& c, scan_scheme_result r,
                                            std::int64_t rows, std::int64_t cols, const row_source& src,
                                            std::int64_t band);

// Ranks the tensors worst first (primary scheme's SQNR) and adds them up by layer type, by depth
// and in total, per scheme (scan_groups.cpp).
void rank_and_group(scan_report& rep);

}  // namespace numprobe::probes::detail
