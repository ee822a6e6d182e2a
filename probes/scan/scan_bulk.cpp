// The scan's bulk bound (issue 17): the magnitude below which an element belongs to the bulk
// whose error bulk_rel_rms reports, found once per tensor before its schemes are coded.
//
// The bound, exactly: sample the tensor's rows r = 0, s, 2s, ... with s = max(1, floor(rows cols /
// 2^18)) (all rows of a tensor under 2^19 elements; about 2^18 elements otherwise, whole rows, so
// every input channel is in the sample). Let v be the nearest-rank k_bulk_percentile of |x| over
// the sample's finite elements (the ceil(p N)-th smallest), and the bound T its bfloat16
// truncation (sign dropped, mantissa cut to 7 bits, toward zero). The bulk is every finite element
// with |x| < T of the strips (block rows) that hold a sampled row: the whole tensor under 2^19
// elements, else about 2^18 elements (all strips for blocks taller than s rows). Those strips are
// coded with metrics::quant_bulk_error_sums, which sums the bulk in the same lanes and order as
// the tensor; the other strips with the plain sums (in-lane bulk sums on every strip cost the
// fused path a tenth of its speed).
// T comes without sorting from a histogram of the truncated magnitudes, 32768 buckets (every
// bf16 magnitude; f64 beyond the float range lands in the largest finite one): truncation is
// monotonic, so the ceil(p N)-th smallest key is trunc(v). For bf16 checkpoints the truncation is
// the identity (T = v); for f32 it is at most 2^-7 below v. The sample bounds the cost at about a
// millisecond a tensor (a full histogram pass cost the scan a fifth of its speed); with 2^18
// sampled elements the rank of v within the whole tensor is off by about 0.06% of its elements
// (sqrt(p (1 - p) / 2^18)), and the bulk error is an estimate whose relative sampling error is
// about 2^-9 times the spread of the bulk's squared errors relative to their mean.
#include <bit>
#include <cfloat>

#include "probes/scan/scan_bands.hpp"
#include "src/formats/element_loads.hpp"

namespace numprobe::probes::detail {
namespace {

constexpr std::size_t k_buckets = 0x8000;         // every bf16 magnitude; finite ones below 0x7f80
constexpr std::uint32_t k_largest_key = 0x7f7f;  // bf16's largest finite magnitude
constexpr std::int64_t k_sample_elements = std::int64_t{1} << 18;

// The key of a finite magnitude a >= 0: the bf16 bits of a truncated toward zero.
std::uint32_t key_of(double a) {
  float f = a >= static_cast<double>(FLT_MAX) ? FLT_MAX : static_cast<float>(a);
  if (static_cast<double>(f) > a) f = std::nextafter(f, 0.0f);  // the cast rounded up
  return std::bit_cast<std::uint32_t>(f) >> 16;
}

// Counts per key; keys from 0x7f80 up (inf, NaN) are counted too and never read, so the bf16 and
// f32 loops need no test per element.
struct part {
  std::vector<std::uint64_t> hist = std::vector<std::uint64_t>(k_buckets, 0);
};

// Adds elements [0, n) of `data` to p.
void add(const void* data, element_storage in, std::size_t n, part& p) {
  auto* h = p.hist.data();
  switch (in) {
    case element_storage::m_bf16: {
      const auto* b = static_cast<const std::uint16_t*>(data);
      for (std::size_t i = 0; i < n; ++i) ++h[b[i] & 0x7fffu];
      return;
    }
    case element_storage::m_f32: {
      const auto* u = static_cast<const std::uint32_t*>(data);
      for (std::size_t i = 0; i < n; ++i) ++h[(u[i] & 0x7fffffffu) >> 16];
      return;
    }
    case element_storage::m_f16: {
      const auto* b = static_cast<const std::uint16_t*>(data);
      for (std::size_t i = 0; i < n; ++i)
        if ((b[i] & 0x7c00u) != 0x7c00u)  // every half is a float: exact
          ++h[std::bit_cast<std::uint32_t>(formats::detail::half_to_float(static_cast<std::uint16_t>(b[i] & 0x7fffu))) >> 16];
      return;
    }
    case element_storage::m_f64: {
      const auto* x = static_cast<const double*>(data);
      for (std::size_t i = 0; i < n; ++i)
        if (const double a = std::fabs(x[i]); std::isfinite(a)) ++h[key_of(a)];
      return;
    }
  }
}

}  // namespace

scan_magnitudes magnitude_pass(std::int64_t rows, std::int64_t cols, const row_source& src) {
  scan_magnitudes m;
  m.sample_rows_step = std::max<std::int64_t>(1, rows * cols / k_sample_elements);
  part p;
  std::vector<double> buf(src.data ? 0 : static_cast<std::size_t>(cols));
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * element_bytes(src.type);
  for (std::int64_t r = 0; r < rows; r += m.sample_rows_step)
    if (src.data) {
      add(src.data + static_cast<std::size_t>(r) * row_bytes, src.type, static_cast<std::size_t>(cols), p);
    } else {
      (*src.fetch)(r, 1, buf);
      add(buf.data(), element_storage::m_f64, buf.size(), p);
    }
  for (std::size_t key = 0; key <= k_largest_key; ++key) m.sampled += static_cast<std::int64_t>(p.hist[key]);
  if (m.sampled == 0) return m;
  // The nearest rank of the percentile, ceil(p N), in integers (p = k_bulk_percentile_tenths / 10).
  const auto rank = static_cast<std::uint64_t>((m.sampled * k_bulk_percentile_tenths + 9) / 10);
  std::uint64_t below = 0;
  for (std::uint32_t key = 0; key <= k_largest_key; ++key) {
    if (below + p.hist[key] >= rank) {
      m.bulk_below = static_cast<double>(std::bit_cast<float>(key << 16));
      break;
    }
    below += p.hist[key];
  }
  return m;
}

}  // namespace numprobe::probes::detail
