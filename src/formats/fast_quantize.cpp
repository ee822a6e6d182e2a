// The fused, vectorised block quantizer of the scan path (fast_quantize.hpp).
//
// Vectors are GCC vector extensions of four doubles (AVX2 on x86-64-v3, SSE2 pairs otherwise;
// the same IEEE operations either way, so the results do not depend on the target).
//
// Per element, exactly as quantize() (scheme_quantize.cpp, element_coder::code) does:
//   t  = (x / s) / unit            (s == 0: t = 0; s a power of two: x * (1/s) * (1/unit),
//                                   the same correctly rounded value, since 1/s is exact)
//   y  = RNE(t) on the element grid, saturated to the format's range
//   dq = y * (unit * s)            (exact in double: y has <= 4 significant bits (int8: 8) and
//                                   s <= 4 + 24, so neither product rounds; quantize()'s
//                                   decode(code) * unit * s is the same exact value)
//   clipped: t > max or t < lowest; flushed: x != 0 and dq == 0 (finite x only).
// RNE(t) for minifloats: a normal |t| (>= the format's min normal) has its double pattern
// rounded to nearest-even at bit 52 - mb (a carry moves into the exponent: the next binade),
// exactly fast_codec.cpp's minifloat(); below min normal the quantum q is fixed and
// (|t| + q 2^52) - q 2^52 rounds |t| to a multiple of q, ties to even (|t| + q 2^52 lies in
// [2^52 q, 2^53 q), whose ulp is q; the subtraction is exact). Integers use the same with
// q = 1, then clamp to [lowest, max] as fast_codec.cpp's integer() does. The additions assume
// the default rounding mode (round to nearest), as the division x / s itself does.
//
// Sums: each strip (one block row) accumulates x^2 and (dq - x)^2 in four double lanes, in an
// order fixed by the geometry (row by row, block by block, four elements at a time), then adds
// the lanes as (l0 + l1) + (l2 + l3) to the caller's running sums. Every term is >= 0, so the
// relative error of a strip sum is at most (n / 4 + 2) u, u = 2^-53, and the caller's sum over
// strips adds one rounding per strip: tighter than the (n - 1) u of the one-by-one sum over
// the whole tensor that quantize()-based code computes. Counts, maxima and the first index of
// the largest error are exact.
#include "src/formats/fast_quantize.hpp"

#include "numprobe/formats/outlier_flushes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "numprobe/core/error.hpp"
#include "src/formats/fast_codec.hpp"

namespace numprobe::formats::detail {
namespace {

using v4d = double __attribute__((vector_size(32)));
using v4i = std::int64_t __attribute__((vector_size(32)));
using v4u = std::uint64_t __attribute__((vector_size(32)));
using v4f = float __attribute__((vector_size(16)));
using v4u32 = std::uint32_t __attribute__((vector_size(16)));
using v4u16 = std::uint16_t __attribute__((vector_size(8)));

constexpr double k_inf = std::numeric_limits<double>::infinity();
constexpr std::uint64_t k_sign = std::uint64_t{1} << 63;

inline v4d splat(double v) { return v4d{v, v, v, v}; }
inline v4u splat_u(std::uint64_t v) { return v4u{v, v, v, v}; }
inline v4i splat_i(std::int64_t v) { return v4i{v, v, v, v}; }
inline v4d vabs(v4d x) { return reinterpret_cast<v4d>(reinterpret_cast<v4u>(x) & ~splat_u(k_sign)); }
inline v4d vmax(v4d a, v4d b) { return a > b ? a : b; }
// Largest lane, without branches (lanes are never NaN here).
inline double hmax(v4d v) {
  const v4d m = vmax(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
  return vmax(m, __builtin_shufflevector(m, m, 1, 0, 3, 2))[0];
}
inline double hsum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline std::int64_t hsum(v4i v) { return (v[0] + v[1]) + (v[2] + v[3]); }
// a * b + c with one rounding where the target has FMA (x86-64-v3), as GCC contracts the
// sums' `s += a * b` there; two roundings otherwise. Written out so that the fast row path
// (below) makes the same choice whatever the compiler's contraction setting.
inline v4d fmadd(v4d a, v4d b, v4d c) {
#ifdef __FMA__
  return reinterpret_cast<v4d>(_mm256_fmadd_pd(reinterpret_cast<__m256d>(a),
                                               reinterpret_cast<__m256d>(b),
                                               reinterpret_cast<__m256d>(c)));
#else
  return a * b + c;
#endif
}

// Element loads: four at a time, or a part (lanes >= n are 0 and reported invalid).
template <class T>
struct source;

template <>
struct source<double> {
  const double* p;
  v4d load(std::int64_t i) const {
    v4d v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  }
  double at(std::int64_t i) const { return p[i]; }
};

template <>
struct source<float> {
  const float* p;
  v4d load(std::int64_t i) const {
    v4f v;
    std::memcpy(&v, p + i, sizeof v);
    return __builtin_convertvector(v, v4d);
  }
  double at(std::int64_t i) const {
    float v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  }
};

struct bf16_tag {};
template <>
struct source<bf16_tag> {
  const std::uint16_t* p;
  v4d load(std::int64_t i) const {
    v4u16 h;
    std::memcpy(&h, p + i, sizeof h);
    const v4u32 w = __builtin_convertvector(h, v4u32) << 16;
    return __builtin_convertvector(reinterpret_cast<v4f>(w), v4d);
  }
  double at(std::int64_t i) const {
    std::uint16_t h;
    std::memcpy(&h, p + i, sizeof h);
    return std::bit_cast<float>(std::uint32_t{h} << 16);
  }
};

// binary16 bits -> float, exact (every half is a float). Portable: no _Float16, which older
// compilers (clang < 15 on x86) reject; with F16C (x86-64-v3) the vector loads use vcvtph2ps.
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

inline v4f half4_to_float(const std::uint16_t* p) {
  v4f r;
#if defined(__F16C__)
  std::uint64_t bits;
  std::memcpy(&bits, p, sizeof bits);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  std::memcpy(&r, &f, sizeof r);
#else
  for (int l = 0; l < 4; ++l) {
    std::uint16_t h;
    std::memcpy(&h, p + l, sizeof h);
    r[l] = half_to_float(h);
  }
#endif
  return r;
}

struct f16_tag {};

template <>
struct source<f16_tag> {
  const std::uint16_t* p;
  v4d load(std::int64_t i) const { return __builtin_convertvector(half4_to_float(p + i), v4d); }
  double at(std::int64_t i) const {
    std::uint16_t h;
    std::memcpy(&h, p + i, sizeof h);
    return static_cast<double>(half_to_float(h));
  }
};

template <class S>
v4d load_part(const S& s, std::int64_t i, std::int64_t n) {
  v4d v = splat(0.0);
  for (std::int64_t l = 0; l < n; ++l) v[l] = s.at(i + l);
  return v;
}

inline v4i lanes_below(std::int64_t n) {
  return v4i{0, 1, 2, 3} < splat_i(n);
}

// The element rounding and the per-block multipliers for one block.
struct element_rounding {
  bool integer = false;
  bool fnuz_or_int = false;  // a zero code has no sign
  double max = 0.0, lowest = 0.0, min_normal = 0.0, sub_magic = 0.0;
  std::uint64_t half_m1 = 0, drop = 0, low_mask = 0;

  // RNE(t) on the element grid, saturated, with t's sign (a zero may keep a - sign here).
  v4d round(v4d t) const {
    const v4u sign = reinterpret_cast<v4u>(t) & splat_u(k_sign);
    const v4d a = vabs(t);
    const v4d magic = splat(sub_magic);
    const v4d fixed = (a + magic) - magic;  // multiples of the quantum, ties to even
    if (integer) {
      const v4d y = a < magic ? fixed : a;  // >= 2^52: an integer already
      v4d ys = reinterpret_cast<v4d>(reinterpret_cast<v4u>(y) | sign);
      ys = ys > splat(max) ? splat(max) : ys;
      return ys < splat(lowest) ? splat(lowest) : ys;
    }
    const v4u ua = reinterpret_cast<v4u>(a);
    const v4u rn = (ua + splat_u(half_m1) + ((ua >> drop) & splat_u(1))) & ~splat_u(low_mask);
    v4d y = a < splat(min_normal) ? fixed : reinterpret_cast<v4d>(rn);
    y = y > splat(max) ? splat(max) : y;  // saturate (an infinite t too)
    return reinterpret_cast<v4d>(reinterpret_cast<v4u>(y) | sign);
  }
};

struct block_coder {
  bool pow2 = false;
  double div = 1.0, inv = 1.0, inv_unit = 1.0, eff = 1.0;

  block_coder(const block_stats& b, double unit) : block_coder(b.scale, unit) {}
  block_coder(double s, double unit) {
    const auto u = std::bit_cast<std::uint64_t>(s);
    const std::uint64_t e = (u >> 52) & 0x7FF;
    // A normal power of two with a normal reciprocal: x * (1/s) is the quotient x / s.
    pow2 = (u & ((std::uint64_t{1} << 52) - 1)) == 0 && e >= 1 && e <= 2045 && s > 0;
    inv = pow2 ? 1.0 / s : 1.0;
    inv_unit = 1.0 / unit;  // unit is 1 or 2^-6
    div = s == 0.0 ? k_inf : s;  // finite x / inf = 0: quantize()'s t = 0 for a zero scale
    eff = unit * s;
  }
  v4d quotient(v4d x) const { return pow2 ? (x * splat(inv)) * splat(inv_unit) : x / splat(div); }
};

// One element lane group: error terms, counts.
struct lane_state {
  v4d sx = splat(0.0), se = splat(0.0), maxe = splat(-1.0);
  v4i nonfinite_out = splat_i(0);
};

// Codes four elements (x, lanes `valid`) of a block; adds flushes (low 32 bits) and clips
// (high 32 bits) to `counts`.
inline void code4(const element_rounding& er, const block_coder& bc, v4d x, v4i valid,
                  lane_state& st, v4i& counts) {
  const v4i fin = (vabs(x) < splat(k_inf)) & valid;
  const v4d t = bc.quotient(x);
  const v4d dq = er.round(t) * splat(bc.eff);
  const v4d e = vabs(dq - x);
  const v4i fdq = vabs(dq) < splat(k_inf);
  const v4i ok = fin & fdq;
  const v4d zero = splat(0.0);
  st.sx += ok ? x * x : zero;
  st.se += ok ? e * e : zero;
  st.maxe = vmax(st.maxe, ok ? e : splat(-1.0));
  const v4i flush = fin & (x != zero) & (dq == zero);
  const v4i clip = fin & ((t > splat(er.max)) | (t < splat(er.lowest)));
  counts += (flush & splat_i(1)) + (clip & splat_i(std::int64_t{1} << 32));
  st.nonfinite_out += (fin & ~fdq) & splat_i(1);
}

// The error of one element as code4 computes it (lane 0 of a splat), -1 when excluded.
inline double error_of(const element_rounding& er, const block_coder& bc, double x) {
  lane_state st;
  v4i counts = splat_i(0);
  code4(er, bc, splat(x), splat_i(-1), st, counts);
  return st.maxe[0];
}

}  // namespace

bool fast_quantizer::covers(const scheme_config& c) {
  if (c.round != rounding::m_nearest_even || c.over != overflow::m_saturate) return false;
  if (c.kind == scheme_kind::m_asym) return false;
  const auto& e = info(c.element);
  if (e.storage_bits > 8 || c.element == format_id::m_e8m0 || !has_rne_bit_codec(c.element))
    return false;
  if (e.is_float) return e.min_subnormal > 0 && e.mantissa_bits >= 1 && e.is_signed;
  return e.is_signed;
}

fast_quantizer::fast_quantizer(const scheme_config& c) : m_c(c) {
  if (!covers(c)) throw_input_error("scheme", "the fused quantizer does not cover this scheme");
  const auto& e = info(c.element);
  if (c.kind == scheme_kind::m_mx && c.element == format_id::m_i8) m_unit = 0x1.0p-6;
  m_max_value = e.max_finite * m_unit;
  m_flush_ratio = flush_ratio(c);
  m_integer = !e.is_float;
  m_elem_max = e.max_finite;
  m_elem_lowest = e.lowest;
  if (m_integer) {
    m_sub_magic = 0x1.0p52;
  } else {
    m_min_normal = e.min_normal;
    m_sub_magic = e.min_subnormal * 0x1.0p52;
    m_drop = static_cast<std::uint64_t>(52 - e.mantissa_bits);
    m_half_m1 = (std::uint64_t{1} << (m_drop - 1)) - 1;
    m_low_mask = (std::uint64_t{1} << m_drop) - 1;
  }
}

void fast_quantizer::set_tensor_amax(double amax) {
  if (m_c.kind == scheme_kind::m_nvfp4) {
    // quantize(): s_t = amax / (6 * 448), held in fp32; an all-zero tensor keeps s_t = 1.
    const double scale_max = info(m_c.scale_format).max_finite;
    m_tensor_scale =
        amax > 0 ? round_to(format_id::m_f32, amax / (m_max_value * scale_max)) : 1.0;
  } else if (m_c.kind == scheme_kind::m_tensor) {
    m_tensor_amax = amax;
  }
}

namespace {

// quantize()'s store_scale: e8m0 rounds up to a power of two, the others to nearest.
double store_scale(format_id f, double s) {
  if (f == format_id::m_e8m0) {
    int e = std::ilogb(s);
    if (std::ldexp(1.0, e) < s) ++e;
    return std::ldexp(1.0, std::clamp(e, -127, 127));
  }
  return round_to(f, s, rounding::m_nearest_even, overflow::m_saturate);
}

}  // namespace

// The block's scale exactly as quantize() (scheme_quantize.cpp) derives it.
void fast_quantizer::block_scale(block_stats& b) const {
  const auto& c = m_c;
  switch (c.kind) {
    case scheme_kind::m_none: b.scale = 1.0; return;
    case scheme_kind::m_mx: {
      const int emax = c.element == format_id::m_i8 ? 0 : std::ilogb(m_elem_max);
      int x = -127;
      if (b.amax > 0) {
        const int fl = std::ilogb(b.amax);
        const bool pow2 = std::ldexp(1.0, fl) == b.amax;
        switch (c.rule) {
          case mx_rule::m_floor: x = fl - emax; break;
          case mx_rule::m_ceil: x = fl + (pow2 ? 0 : 1) - emax; break;
          case mx_rule::m_rceil: {
            const double mx = m_max_value;
            x = fl - std::ilogb(mx);
            while (std::ldexp(mx, x) < b.amax) ++x;
            while (std::ldexp(mx, x - 1) >= b.amax) --x;
            break;
          }
        }
        b.scale_underflow = x < -127;
        x = std::clamp(x, -127, 127);
      }
      b.scale = std::ldexp(1.0, x);
      b.scale_code = static_cast<std::uint32_t>(x + 127);
      return;
    }
    case scheme_kind::m_nvfp4: {
      const double sb = store_scale(c.scale_format, b.amax / (m_max_value * m_tensor_scale));
      b.scale_code = encode(c.scale_format, sb, rounding::m_nearest_even, overflow::m_saturate);
      b.scale_underflow = b.amax > 0 && sb == 0.0;
      b.scale = sb * m_tensor_scale;
      return;
    }
    default: {
      const double amax = std::max(b.amax, c.amax_floor);
      double s = 1.0;
      if (amax > 0) {
        s = store_scale(c.scale_format, amax / m_max_value);
        b.scale_underflow = s == 0.0;
      } else {
        s = store_scale(c.scale_format, 1.0);
      }
      b.scale = s;
      b.scale_code = encode(c.scale_format, s, rounding::m_nearest_even, overflow::m_saturate);
      return;
    }
  }
}

namespace {

element_rounding rounding_of(bool integer, double max, double lowest, double min_normal,
                             double sub_magic, std::uint64_t half_m1, std::uint64_t drop,
                             std::uint64_t low_mask, bool fnuz_or_int) {
  element_rounding er;
  er.integer = integer;
  er.max = max;
  er.lowest = lowest;
  er.min_normal = min_normal;
  er.sub_magic = sub_magic;
  er.half_m1 = half_m1;
  er.drop = drop;
  er.low_mask = low_mask;
  er.fnuz_or_int = fnuz_or_int;
  return er;
}

template <class S>
void strip_impl(const S& src, const element_rounding& er, double unit, double imposed_amax,
                const std::function<void(block_stats&)>& scale_of, std::int64_t cols,
                std::int64_t row0, std::int64_t nrows, std::int64_t bcols,
                std::span<block_stats> blocks, fast_error_sums& sums) {
  const auto nb = static_cast<std::int64_t>(blocks.size());
  for (std::int64_t j = 0; j < nb; ++j) {
    block_stats& b = blocks[static_cast<std::size_t>(j)];
    b = block_stats{};
    b.row0 = row0;
    b.col0 = j * bcols;
    b.rows = nrows;
    b.cols = std::min(bcols, cols - b.col0);
    b.amax = -1.0;  // running; no finite element yet
  }
  // Pass 1: amax, the first element holding it (row-major within the block), non-finite count.
  std::int64_t nonfinite_in = 0;
  for (std::int64_t r = row0; r < row0 + nrows; ++r) {
    const std::int64_t base = r * cols;
    for (std::int64_t j = 0; j < nb; ++j) {
      block_stats& b = blocks[static_cast<std::size_t>(j)];
      const std::int64_t at = base + b.col0, w = b.cols;
      v4d m = splat(-1.0);
      v4i nf = splat_i(0);
      std::int64_t k = 0;
      for (; k + 4 <= w; k += 4) {
        const v4d a = vabs(src.load(at + k));
        const v4i fin = a < splat(k_inf);
        m = vmax(m, fin ? a : splat(-1.0));
        nf += ~fin & splat_i(1);
      }
      if (k < w) {
        const v4i valid = lanes_below(w - k);
        const v4d a = vabs(load_part(src, at + k, w - k));
        const v4i fin = (a < splat(k_inf)) & valid;
        m = vmax(m, fin ? a : splat(-1.0));
        nf += (valid & ~fin) & splat_i(1);
      }
      const double seg = hmax(m);
      if (seg > b.amax) {
        b.amax = seg;
        for (std::int64_t q = 0; q < w; ++q)
          if (std::fabs(src.at(at + q)) == seg) {
            b.argmax = at + q;
            break;
          }
      }
      const auto n = static_cast<std::int32_t>(hsum(nf));
      b.nonfinite += n;
      nonfinite_in += n;
    }
  }
  for (auto& b : blocks) {
    if (b.amax < 0) b.amax = 0.0;  // no finite element: argmax stays -1
    if (imposed_amax >= 0) {
      if (b.amax != imposed_amax) b.argmax = -1;
      b.amax = imposed_amax;
    }
    scale_of(b);
  }
  // Pass 2: code every element against its block's scale.
  lane_state st;
  for (std::int64_t r = row0; r < row0 + nrows; ++r) {
    const std::int64_t base = r * cols;
    for (std::int64_t j = 0; j < nb; ++j) {
      block_stats& b = blocks[static_cast<std::size_t>(j)];
      const block_coder bc(b, unit);
      const std::int64_t at = base + b.col0, w = b.cols;
      v4i counts = splat_i(0);
      std::int64_t k = 0;
      for (; k + 4 <= w; k += 4) code4(er, bc, src.load(at + k), splat_i(-1), st, counts);
      if (k < w) code4(er, bc, load_part(src, at + k, w - k), lanes_below(w - k), st, counts);
      const std::int64_t c = hsum(counts);
      b.flushed += static_cast<std::int32_t>(c & 0xFFFFFFFF);
      b.clipped += static_cast<std::int32_t>(c >> 32);
    }
  }
  sums.sum_sq += hsum(st.sx);
  sums.sum_sq_err += hsum(st.se);
  const std::int64_t nonfinite_out = hsum(st.nonfinite_out);
  sums.nonfinite_inputs += nonfinite_in;
  sums.nonfinite_outputs += nonfinite_out;
  if (nonfinite_out > 0) sums.sum_sq_err = k_inf;
  // The first element (row-major) holding the strip's largest error, when it beats the sums'.
  const double mx = hmax(st.maxe);
  if (mx > sums.max_err) {
    // Row by row, block by block: the segment's largest error by the vector code, then the
    // element by the same operations on one lane.
    for (std::int64_t r = row0; r < row0 + nrows; ++r)
      for (std::int64_t j = 0; j < nb; ++j) {
        const block_stats& b = blocks[static_cast<std::size_t>(j)];
        const block_coder bc(b, unit);
        const std::int64_t at = r * cols + b.col0, w = b.cols;
        lane_state seg;
        v4i counts = splat_i(0);
        std::int64_t k = 0;
        for (; k + 4 <= w; k += 4) code4(er, bc, src.load(at + k), splat_i(-1), seg, counts);
        if (k < w) code4(er, bc, load_part(src, at + k, w - k), lanes_below(w - k), seg, counts);
        if (hmax(seg.maxe) != mx) continue;
        for (std::int64_t q = 0; q < w; ++q)
          if (error_of(er, bc, src.at(at + q)) == mx) {
            sums.max_err = mx;
            sums.max_err_at = at + q;
            return;
          }
      }
  }
}

// One block into a strip summary; `outliers` is its outlier flushes (outlier_flushes.hpp).
inline void add_to_summary(const block_stats& b, std::int32_t outliers, std::int64_t index,
                           const block_stats* worst, fast_strip_summary& s) {
  s.flushed += b.flushed;
  s.clipped += b.clipped;
  s.scale_underflow += b.scale_underflow ? 1 : 0;
  if (outliers <= 0) return;
  ++s.outlier_blocks;
  s.outlier_flushed += outliers;
  if (worst == nullptr || outliers > s.worst_outlier_flushed ||
      (outliers == s.worst_outlier_flushed && b.amax > worst->amax)) {
    s.worst = index;
    s.worst_outlier_flushed = outliers;
  }
}

// Block scales of a whole row computed four blocks at a time, where quantize()'s scalar rule
// reduces to vector operations: NVFP4 with e4m3fn block scales (a division, then the e4m3fn
// RNE rounding above, which equals round_to(e4m3fn, ., RNE, saturate) on finite non-negative
// values) and MX with the floor rule (the amax's exponent field). Anything else is scalar.
struct scale_plan {
  enum class kind : std::uint8_t { m_scalar, m_nvfp4_e4m3, m_mx_floor } k = kind::m_scalar;
  scheme_kind scheme = scheme_kind::m_none;  // for the outlier flushes
  double flush_ratio = 0.0;
  double denom = 1.0, tensor_scale = 1.0;  // NVFP4: amax / denom, denom = 6 s_t (exact)
  element_rounding e4m3;
  std::int64_t emax = 0;  // MX: the element's largest exponent
};

// A row already widened to doubles, indexed as the array it came from.
struct row_source {
  const double* p;
  std::int64_t base;
  v4d load(std::int64_t i) const {
    v4d v;
    std::memcpy(&v, p + (i - base), sizeof v);
    return v;
  }
  double at(std::int64_t i) const { return p[i - base]; }
};

// Per-block values of one row (structure of arrays, reused across rows), and the row.
struct row_scratch {
  std::vector<double> x;
  std::vector<double> amax, scale, eff, div, inv;
  std::vector<std::int64_t> code;
  std::vector<std::int64_t> underflow;  // 0 or -1 (a vector mask)
  std::vector<std::int32_t> flushed, clipped;
  std::vector<v4i> flush_lanes, clip_lanes;  // pass 2's per-block lane counts (Abs rows)
  void resize(std::size_t n) {
    flush_lanes.resize(n);
    clip_lanes.resize(n);
    amax.resize(n);
    scale.resize(n);
    eff.resize(n);
    div.resize(n);
    inv.resize(n);
    code.resize(n);
    underflow.resize(n);
    flushed.resize(n);
    clipped.resize(n);
  }
};

// One bit per lane of a == m.
inline unsigned equal_bits(v4d a, double m) {
  const v4i eq = a == splat(m);
#ifdef __AVX__
  return static_cast<unsigned>(_mm256_movemask_pd(reinterpret_cast<__m256d>(eq)));
#else
  return (eq[0] ? 1u : 0u) | (eq[1] ? 2u : 0u) | (eq[2] ? 4u : 0u) | (eq[3] ? 8u : 0u);
#endif
}

// One row of full blocks (block_cols a multiple of 4 dividing cols) without non-finite inputs
// or outputs: the common case, with no masks. Returns false (nothing written) when the row
// holds a non-finite value or a block could dequantize beyond the double range, so the
// caller takes the general path.
// W: the block width when it is a compile-time constant (16, 32: loops unroll), else 0.
// Abs (symmetric float element formats): the row is kept as |x| and coded as |x|. Every
// operation below is odd in x (x / s, x * (1/s), the element rounding, which rounds |t| and
// restores the sign, and dq = y * eff), so dq(|x|) = |dq(x)| and dq(|x|) - |x| = +-(dq - x)
// exactly; the terms (x^2, (dq - x)^2, |dq - x|), the flush test (x != 0, dq == 0) and the
// clip test (|t| > max, the range being symmetric) are the same numbers, with no sign to
// split off and put back per element. Integer formats (lowest = -max - 1) take Abs = false.
template <std::int64_t W, bool Abs, class S>
bool row_fast(const S& in, const element_rounding& er, const scale_plan& plan, double unit,
              const std::function<void(block_stats&)>& scale_of, std::int64_t cols,
              std::int64_t row, std::int64_t bcols_rt, std::span<block_stats> blocks,
              row_scratch& w, fast_error_sums& sums, bool scaled, fast_strip_summary* summary) {
  lane_state st;
  const std::int64_t bcols = W > 0 ? W : bcols_rt;
  const auto nb = static_cast<std::int64_t>(blocks.size());
  const std::int64_t base = row * cols;
  w.resize(static_cast<std::size_t>(nb));
  // Pass 1 widens the row to doubles once (w.x, in cache) for the passes after it.
  if (w.x.size() < static_cast<std::size_t>(cols)) w.x.resize(static_cast<std::size_t>(cols));
  double* const xrow = w.x.data();
  const auto keep = [&](std::int64_t i) {  // element i of the row, widened and kept
    const v4d x = Abs ? vabs(in.load(i)) : in.load(i);
    std::memcpy(xrow + (i - base), &x, sizeof x);
    return x;
  };
  const row_source src{xrow, base};
  // Pass 1: every block's amax (its first holder is found only for the blocks reported, by
  // argmax_of below). A non-finite element makes `sum` non-finite; for f64 elements the sum
  // of |x| may also overflow, which sends the row to the general path too. Narrower elements
  // cannot overflow it, so their check is a mask (no chain of dependent additions).
  constexpr bool wide = std::is_same_v<S, source<double>>;
  v4d sum = splat(0.0);
  v4i finite = splat_i(-1);
  const auto check = [&](v4d a) {
    if constexpr (wide) sum += a;
    else finite &= a < splat(k_inf);
  };
  if constexpr (W > 0) {
    for (std::int64_t j = 0; j < nb; ++j) {
      const std::int64_t at = base + j * W;
      v4d m = splat(0.0);
      for (std::int64_t k = 0; k < W / 4; ++k) {
        const v4d a = vabs(keep(at + 4 * k));
        check(a);
        m = vmax(m, a);
      }
      w.amax[static_cast<std::size_t>(j)] = hmax(m);
    }
  }
  for (std::int64_t j = 0; W == 0 && j < nb; ++j) {
    const std::int64_t at = base + j * bcols;
    v4d m = splat(0.0);
    for (std::int64_t k = 0; k < bcols; k += 4) {
      const v4d a = vabs(keep(at + k));
      check(a);
      m = vmax(m, a);
    }
    w.amax[static_cast<std::size_t>(j)] = hmax(m);
  }
  if (!wide && (finite[0] & finite[1] & finite[2] & finite[3]) == 0) return false;  // inf/NaN
  // The first element of block j equal to its amax, 64 elements at a time (one mask word, no
  // branch per vector).
  const auto argmax_of = [&](std::int64_t j) {
    const std::int64_t at = base + j * bcols;
    const double seg = w.amax[static_cast<std::size_t>(j)];
    for (std::int64_t k0 = 0; k0 < bcols; k0 += 64) {
      std::uint64_t bits = 0;
      for (std::int64_t k = k0; k < std::min<std::int64_t>(bcols, k0 + 64); k += 4)
        bits |= std::uint64_t{equal_bits(vabs(src.load(at + k)), seg)} << (k - k0);
      if (bits != 0) return at + k0 + std::countr_zero(bits);
    }
    return at;  // not reached: the amax is one of the block's elements
  };
  if (!(hsum(sum) < k_inf)) return false;  // inf/NaN (or a sum beyond the double range)

  // Scales.
  std::int64_t j0 = 0;
  if (plan.k == scale_plan::kind::m_nvfp4_e4m3) {
    for (; j0 + 4 <= nb; j0 += 4) {
      v4d amax;
      std::memcpy(&amax, &w.amax[static_cast<std::size_t>(j0)], sizeof amax);
      const v4d sb = plan.e4m3.round(amax / splat(plan.denom));
      const v4d sc = sb * splat(plan.tensor_scale);
      std::memcpy(&w.scale[static_cast<std::size_t>(j0)], &sc, sizeof sc);
      const v4i under = (amax > splat(0.0)) & (sb == splat(0.0));
      std::memcpy(&w.underflow[static_cast<std::size_t>(j0)], &under, sizeof under);
      // The e4m3fn code of the value sb: a normal's exponent and mantissa fields, rebiased;
      // a subnormal's count of 2^-9 quanta (read from sb * 512 + 2^52, exact).
      const v4u u = reinterpret_cast<v4u>(sb);
      const v4u normal = (u >> 49) - splat_u(std::uint64_t{1023 - 7} << 3);
      const v4u sub = reinterpret_cast<v4u>(sb * splat(512.0) + splat(0x1.0p52)) -
                      splat_u(std::bit_cast<std::uint64_t>(0x1.0p52));
      const v4i code = reinterpret_cast<v4i>(sb >= splat(0x1.0p-6) ? normal : sub);
      std::memcpy(&w.code[static_cast<std::size_t>(j0)], &code, sizeof code);
    }
  } else if (plan.k == scale_plan::kind::m_mx_floor) {
    for (; j0 < nb; ++j0) {
      const auto jj = static_cast<std::size_t>(j0);
      const double a = w.amax[jj];
      if (a != 0.0 && a < 0x1.0p-1022) break;  // a double subnormal: the scalar rule
      std::int64_t x = -127;
      bool under = false;
      if (a > 0) {
        x = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(a) >> 52) - 1023 - plan.emax;
        under = x < -127;
        x = std::clamp<std::int64_t>(x, -127, 127);
      }
      w.scale[jj] = std::bit_cast<double>(static_cast<std::uint64_t>(x + 1023) << 52);
      w.code[jj] = x + 127;
      w.underflow[jj] = under;
    }
  }
  for (; j0 < nb; ++j0) {
    const auto jj = static_cast<std::size_t>(j0);
    block_stats b;
    b.amax = w.amax[jj];
    scale_of(b);
    w.scale[jj] = b.scale;
    w.code[jj] = b.scale_code;
    w.underflow[jj] = b.scale_underflow;
  }
  // block_coder's rule: a normal power of two 2^(e - 1023) with a normal reciprocal, whose
  // reciprocal is 2^(1023 - e), biased exponent 2046 - e (0: divide instead). Four blocks at a
  // time (the same values as the scalar loop after it, which takes the rest).
  double max_eff = 0.0;
  std::int64_t j1 = 0;
  {
    v4d vmax_eff = splat(0.0);
    for (; j1 + 4 <= nb; j1 += 4) {
      const auto jj = static_cast<std::size_t>(j1);
      v4d sc;
      std::memcpy(&sc, &w.scale[jj], sizeof sc);
      const v4d eff = splat(unit) * sc;
      const v4d div = sc == splat(0.0) ? splat(k_inf) : sc;
      const v4u u = reinterpret_cast<v4u>(sc);
      const v4i e = reinterpret_cast<v4i>((u >> 52) & splat_u(0x7FF));
      const v4i pow2 = ((u & splat_u((std::uint64_t{1} << 52) - 1)) == splat_u(0)) & (e >= splat_i(1)) &
                       (e <= splat_i(2045)) & (sc > splat(0.0));
      const v4i inv = pow2 & ((splat_i(2046) - e) << 52);  // the bits of 0.0 otherwise
      std::memcpy(&w.eff[jj], &eff, sizeof eff);
      std::memcpy(&w.div[jj], &div, sizeof div);
      std::memcpy(&w.inv[jj], &inv, sizeof inv);
      vmax_eff = vmax(vmax_eff, eff);
    }
    max_eff = hmax(vmax_eff);
  }
  for (std::int64_t j = j1; j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    const double s = w.scale[jj];
    w.eff[jj] = unit * s;
    w.div[jj] = s == 0.0 ? k_inf : s;
    const auto u = std::bit_cast<std::uint64_t>(s);
    const std::uint64_t e = (u >> 52) & 0x7FF;
    const bool pow2 = (u & ((std::uint64_t{1} << 52) - 1)) == 0 && e >= 1 && e <= 2045 && s > 0;
    w.inv[jj] = pow2 ? std::bit_cast<double>((2046 - e) << 52) : 0.0;
    max_eff = std::max(max_eff, w.eff[jj]);
  }
  const double inv_unit = 1.0 / unit;  // unit is 1 or 2^-6: exact
  if (!(max_eff * er.max < k_inf)) return false;  // |dq| <= max * eff stays finite otherwise

  // Pass 2 (the same operations as code4, without masks: every element here is finite).
  const v4d zero = splat(0.0);
  const bool symmetric = er.lowest == -er.max;
  // Abs: the element rounding of t >= 0 (element_rounding::round without the sign), with its
  // constants in registers for the whole row.
  const v4d v_max = splat(er.max), v_magic = splat(er.sub_magic), v_min_normal = splat(er.min_normal);
  const v4u v_half = splat_u(er.half_m1), v_keep = ~splat_u(er.low_mask), v_one = splat_u(1);
  const std::uint64_t drop = er.drop;
  const auto round_pos = [&](v4d t) {
    const v4d fixed = (t + v_magic) - v_magic;
    const v4u ut = reinterpret_cast<v4u>(t);
    const v4u rn = (ut + v_half + ((ut >> drop) & v_one)) & v_keep;
    const v4d y = t < v_min_normal ? fixed : reinterpret_cast<v4d>(rn);
    return y > v_max ? v_max : y;
  };
  for (std::int64_t j = 0; Abs && j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    const std::int64_t at = base + j * bcols;
    const double inv = w.inv[jj];
    const v4d eff = splat(w.eff[jj]);
    v4d sx = st.sx, se = st.se, maxe = st.maxe;
    v4i flushes = splat_i(0), clips = splat_i(0);  // minus the count (a true mask lane is -1)
    const auto code = [&](auto quotient) {
      for (std::int64_t k = 0; k < bcols; k += 4) {
        const v4d a = src.load(at + k);  // |x|
        const v4d t = quotient(a);
        const v4d dq = round_pos(t) * eff;
        const v4d d = dq - a;
        sx = fmadd(a, a, sx);
        se = fmadd(d, d, se);
        maxe = vmax(maxe, vabs(d));
        flushes += (a != zero) & (dq == zero);
        clips += t > v_max;
      }
    };
    if (inv != 0.0 && inv_unit == 1.0) {  // x * (1/s) * 1 is x * (1/s)
      const v4d vinv = splat(inv);
      code([&](v4d a) { return a * vinv; });
    } else if (inv != 0.0) {
      const v4d vinv = splat(inv), vinv_unit = splat(inv_unit);
      code([&](v4d a) { return (a * vinv) * vinv_unit; });
    } else {
      const v4d dv = splat(w.div[jj]);
      code([&](v4d a) { return a / dv; });
    }
    st.sx = sx;
    st.se = se;
    st.maxe = maxe;
    w.flush_lanes[jj] = flushes;
    w.clip_lanes[jj] = clips;
  }
  if constexpr (Abs) {
    // The lane counts' horizontal sums, four blocks at a time (a 4x4 transpose by shuffles;
    // integer sums, so the order is immaterial).
    const auto hsum4 = [](const v4i* v) {
      const v4i t0 = __builtin_shufflevector(v[0], v[1], 0, 4, 2, 6) + __builtin_shufflevector(v[0], v[1], 1, 5, 3, 7);
      const v4i t1 = __builtin_shufflevector(v[2], v[3], 0, 4, 2, 6) + __builtin_shufflevector(v[2], v[3], 1, 5, 3, 7);
      return __builtin_shufflevector(t0, t1, 0, 1, 4, 5) + __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
    };
    using v4i32 = std::int32_t __attribute__((vector_size(16)));
    std::int64_t j = 0;
    for (; j + 4 <= nb; j += 4) {
      const auto jj = static_cast<std::size_t>(j);
      const v4i32 f = __builtin_convertvector(-hsum4(&w.flush_lanes[jj]), v4i32);
      const v4i32 c = __builtin_convertvector(-hsum4(&w.clip_lanes[jj]), v4i32);
      std::memcpy(&w.flushed[jj], &f, sizeof f);
      std::memcpy(&w.clipped[jj], &c, sizeof c);
    }
    for (; j < nb; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      w.flushed[jj] = static_cast<std::int32_t>(-hsum(w.flush_lanes[jj]));
      w.clipped[jj] = static_cast<std::int32_t>(-hsum(w.clip_lanes[jj]));
    }
  }
  for (std::int64_t j = 0; !Abs && j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    const std::int64_t at = base + j * bcols;
    const double inv = w.inv[jj];
    const v4d eff = splat(w.eff[jj]);
    v4i flushes = splat_i(0), clips = splat_i(0);  // minus the count (a true mask lane is -1)
    const auto body = [&](v4d x, v4d t) {
      const v4d dq = er.round(t) * eff;
      const v4d d = dq - x;
      st.sx = fmadd(x, x, st.sx);
      st.se = fmadd(d, d, st.se);
      st.maxe = vmax(st.maxe, vabs(d));
      flushes += (x != zero) & (dq == zero);
      // Symmetric ranges (every float format): t > max or t < -max is |t| > max.
      clips += symmetric ? v4i(vabs(t) > splat(er.max))
                         : v4i((t > splat(er.max)) | (t < splat(er.lowest)));
    };
    if (inv != 0.0 && inv_unit == 1.0) {  // x * (1/s) * 1 is x * (1/s)
      const v4d vinv = splat(inv);
      for (std::int64_t k = 0; k < bcols; k += 4) {
        const v4d x = src.load(at + k);
        body(x, x * vinv);
      }
    } else if (inv != 0.0) {
      const v4d vinv = splat(inv), vinv_unit = splat(inv_unit);
      for (std::int64_t k = 0; k < bcols; k += 4) {
        const v4d x = src.load(at + k);
        body(x, (x * vinv) * vinv_unit);
      }
    } else {
      const v4d dv = splat(w.div[jj]);
      for (std::int64_t k = 0; k < bcols; k += 4) {
        const v4d x = src.load(at + k);
        body(x, x / dv);
      }
    }
    w.flushed[jj] = static_cast<std::int32_t>(-hsum(flushes));
    w.clipped[jj] = static_cast<std::int32_t>(-hsum(clips));
  }
  sums.sum_sq += hsum(st.sx);
  sums.sum_sq_err += hsum(st.se);
  const auto fill = [&](std::int64_t j) {
    const auto jj = static_cast<std::size_t>(j);
    block_stats& b = blocks[jj];  // every field written
    b.row0 = row;
    b.col0 = j * bcols;
    b.rows = 1;
    b.cols = bcols;
    b.amax = w.amax[jj];
    b.argmax = argmax_of(j);
    b.scale = w.scale[jj];
    b.scale_code = static_cast<std::uint32_t>(w.code[jj]);
    b.zero_point = 0;
    b.flushed = w.flushed[jj];
    b.clipped = w.clipped[jj];
    b.nonfinite = 0;
    b.scale_underflow = w.underflow[jj] != 0;
  };
  // A new largest error: find its block by the blocks' largest errors (vector), then the
  // element (the same operations on one lane).
  std::int64_t max_err_block = -1;
  if (const double mx = hmax(st.maxe); mx > sums.max_err) {
    sums.max_err = mx;
    for (std::int64_t j = 0; j < nb; ++j) {
      const std::int64_t at = base + j * bcols;
      const block_coder bc(w.scale[static_cast<std::size_t>(j)], unit);
      v4d m = splat(-1.0);
      for (std::int64_t k = 0; k < bcols; k += 4) {
        const v4d x = src.load(at + k);
        m = vmax(m, vabs(er.round(bc.quotient(x)) * splat(bc.eff) - x));
      }
      if (hmax(m) != mx) continue;
      for (std::int64_t k = 0; k < bcols; ++k)
        if (error_of(er, bc, src.at(at + k)) == mx) {
          sums.max_err_at = at + k;
          max_err_block = j;
          break;
        }
      break;
    }
  }
  if (!summary) {
    for (std::int64_t j = 0; j < nb; ++j) fill(j);
    return true;
  }
  // The summary from the per-block arrays: totals four blocks at a time, then the outlier
  // flushes (outlier_flushes.hpp) of each block that flushed, from the widened row, and the
  // worst outlier block by add_to_summary's rules.
  fast_strip_summary& sm = *summary;
  using v4i32 = std::int32_t __attribute__((vector_size(16)));
  v4i tf = splat_i(0), tc = splat_i(0), tu = splat_i(0);
  std::int64_t j2 = 0;
  for (; j2 + 4 <= nb; j2 += 4) {
    const auto jj = static_cast<std::size_t>(j2);
    v4i32 f32, c32;
    std::memcpy(&f32, &w.flushed[jj], sizeof f32);
    std::memcpy(&c32, &w.clipped[jj], sizeof c32);
    v4i under;
    std::memcpy(&under, &w.underflow[jj], sizeof under);
    tf += __builtin_convertvector(f32, v4i);
    tc += __builtin_convertvector(c32, v4i);
    tu -= under != splat_i(0);
  }
  sm.flushed += hsum(tf);
  sm.clipped += hsum(tc);
  sm.scale_underflow += hsum(tu);
  for (std::int64_t j = j2; j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    sm.flushed += w.flushed[jj];
    sm.clipped += w.clipped[jj];
    sm.scale_underflow += w.underflow[jj] != 0 ? 1 : 0;
  }
  // The outlier flushes of block j, four lanes at a time: outlier_block_flushes() (the one
  // definition) on the widened row, with the argmax exclusion done by counting: amax2 is amax
  // when two elements hold amax, else the largest finite |x| below it. test_fast_quantize
  // checks the counts against outlier_block_flushes() on quantize()'s result.
  const auto outliers_of = [&](std::int64_t j) -> std::int32_t {
    const auto jj = static_cast<std::size_t>(j);
    const double amax = w.amax[jj];
    if (!(amax > 0.0) || !(amax < k_inf)) return 0;
    const double* xb = xrow + j * bcols;
    v4d m2 = splat(-1.0);
    v4i eq = splat_i(0);
    for (std::int64_t k = 0; k < bcols; k += 4) {
      v4d a;
      std::memcpy(&a, xb + k, sizeof a);
      a = vabs(a);
      eq -= a == splat(amax);
      m2 = vmax(m2, a < splat(amax) ? a : splat(-1.0));
    }
    const double amax2 = hsum(eq) >= 2 ? amax : std::max(0.0, hmax(m2));
    if (amax2 == 0.0) return 0;
    const double survive = plan.flush_ratio * w.scale[jj] * (amax2 / amax);
    const block_coder bc(w.scale[jj], unit);
    v4i n = splat_i(0);
    for (std::int64_t k = 0; k < bcols; k += 4) {
      v4d x;
      std::memcpy(&x, xb + k, sizeof x);
      const v4d a = vabs(x);
      n -= (a > splat(survive)) & (a < splat(k_inf)) & (er.round(bc.quotient(x)) == splat(0.0));
    }
    return static_cast<std::int32_t>(hsum(n));
  };
  std::int64_t worst = -1;
  std::int32_t worst_f = 0;
  for (std::int64_t j = 0; j < nb; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    if (!scaled || w.underflow[jj] != 0 || w.flushed[jj] == 0) continue;
    const std::int32_t of = outliers_of(j);
    if (of <= 0) continue;
    ++sm.outlier_blocks;
    sm.outlier_flushed += of;
    if (worst < 0 || of > worst_f || (of == worst_f && w.amax[jj] > w.amax[static_cast<std::size_t>(worst)])) {
      worst = j;
      worst_f = of;
    }
  }
  sm.worst_outlier_flushed = worst_f;
  sm.worst = worst;
  if (worst >= 0) fill(worst);
  if (max_err_block >= 0) fill(max_err_block);
  return true;
}


}  // namespace

template <class S>
void fast_quantizer::strip_typed(const S& src, std::int64_t cols, std::int64_t row0,
                                 std::int64_t nrows, std::int64_t block_cols,
                                 std::span<block_stats> blocks, fast_error_sums& sums,
                                 fast_strip_summary* summary) const {
  if (summary) *summary = fast_strip_summary{};
  const bool scaled = m_c.kind != scheme_kind::m_none;
  const auto er = rounding_of(m_integer, m_elem_max, m_elem_lowest, m_min_normal, m_sub_magic,
                              m_half_m1, m_drop, m_low_mask, false);
  const std::function<void(block_stats&)> scale_of = [this](block_stats& b) { block_scale(b); };
  const double imposed = m_c.kind == scheme_kind::m_tensor ? m_tensor_amax : -1.0;
  if (nrows == 1 && imposed < 0 && block_cols % 4 == 0 && cols % block_cols == 0) {
    scale_plan plan;
    plan.scheme = m_c.kind;
    plan.flush_ratio = m_flush_ratio;
    if (m_c.kind == scheme_kind::m_nvfp4 && m_c.scale_format == format_id::m_e4m3fn) {
      plan.k = scale_plan::kind::m_nvfp4_e4m3;
      plan.denom = m_max_value * m_tensor_scale;
      plan.tensor_scale = m_tensor_scale;
      const auto& f = info(format_id::m_e4m3fn);
      plan.e4m3 = rounding_of(false, f.max_finite, f.lowest, f.min_normal,
                              f.min_subnormal * 0x1.0p52, (std::uint64_t{1} << 48) - 1, 49,
                              (std::uint64_t{1} << 49) - 1, false);
    } else if (m_c.kind == scheme_kind::m_mx && m_c.rule == mx_rule::m_floor) {
      plan.k = scale_plan::kind::m_mx_floor;
      plan.emax = m_c.element == format_id::m_i8 ? 0 : std::ilogb(m_elem_max);
    }
    thread_local row_scratch w;
    const bool abs = !m_integer && m_elem_lowest == -m_elem_max;
    const auto fast = [&]<bool Abs>() {
      switch (block_cols) {
        case 16: return row_fast<16, Abs>(src, er, plan, m_unit, scale_of, cols, row0, 16, blocks, w, sums, scaled, summary);
        case 32: return row_fast<32, Abs>(src, er, plan, m_unit, scale_of, cols, row0, 32, blocks, w, sums, scaled, summary);
        default:
          return row_fast<0, Abs>(src, er, plan, m_unit, scale_of, cols, row0, block_cols, blocks, w, sums, scaled,
                                  summary);
      }
    };
    if (abs ? fast.template operator()<true>() : fast.template operator()<false>()) return;
  }
  strip_impl(src, er, m_unit, imposed, scale_of, cols, row0, nrows, block_cols, blocks, sums);
  if (summary)
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      const block_stats& b = blocks[j];
      const block_coder bc(b, m_unit);
      // Blocks a sentinel-imposed amax (the `tensor` kind in bands) gives no argmax hold none.
      const std::int32_t of = scaled ? outlier_block_flushes(
                                           m_c.kind, m_flush_ratio, b, cols, [&](std::int64_t i) { return src.at(i); },
                                           [&](std::int64_t, double x) { return er.round(bc.quotient(splat(x)))[0] == 0.0; })
                                     : 0;
      add_to_summary(b, of, static_cast<std::int64_t>(j),
                     summary->worst < 0 ? nullptr : &blocks[static_cast<std::size_t>(summary->worst)], *summary);
    }
}

void fast_quantizer::strip(const void* data, fast_input in, std::int64_t cols, std::int64_t row0,
                           std::int64_t nrows, std::int64_t block_cols,
                           std::span<block_stats> blocks, fast_error_sums& sums,
                           fast_strip_summary* summary) const {
  switch (in) {
    case fast_input::m_f64:
      return strip_typed(source<double>{static_cast<const double*>(data)}, cols, row0, nrows,
                         block_cols, blocks, sums, summary);
    case fast_input::m_f32:
      return strip_typed(source<float>{static_cast<const float*>(data)}, cols, row0, nrows,
                         block_cols, blocks, sums, summary);
    case fast_input::m_bf16:
      return strip_typed(source<bf16_tag>{static_cast<const std::uint16_t*>(data)}, cols, row0,
                         nrows, block_cols, blocks, sums, summary);
    case fast_input::m_f16:
      return strip_typed(source<f16_tag>{static_cast<const std::uint16_t*>(data)}, cols, row0,
                         nrows, block_cols, blocks, sums, summary);
  }
}

double fast_quantizer::dequant(double x, const block_stats& b) const {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  if (b.scale == 0.0) return 0.0;  // quantize(): t = +0, code +0, dequant +0
  const auto er = rounding_of(m_integer, m_elem_max, m_elem_lowest, m_min_normal, m_sub_magic,
                              m_half_m1, m_drop, m_low_mask, false);
  const block_coder bc(b, m_unit);
  const double dq = (er.round(bc.quotient(splat(x))) * splat(bc.eff))[0];
  // A zero code of an integer or fnuz format has no sign: its value is +0.
  if (dq == 0.0 && (m_integer || info(m_c.element).nan == nan_style::m_fnuz)) return 0.0;
  return dq;
}

namespace {

using v8f = float __attribute__((vector_size(32)));
using v8u32 = std::uint32_t __attribute__((vector_size(32)));

// The finite amax of float-valued elements in eight float lanes: |x| and max are exact in
// float, so this is the double result.
template <class Load8, class Load1>
double finite_amax_f(std::size_t n, Load8 load8, Load1 load1) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  v8f m = v8f{} + 0.0f;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8f a = reinterpret_cast<v8f>(reinterpret_cast<v8u32>(load8(i)) & 0x7FFFFFFFu);
    m = a < inf && a > m ? a : m;
  }
  float r = 0.0f;
  for (int l = 0; l < 8; ++l) r = std::max(r, m[l]);
  for (; i < n; ++i) {
    const double a = std::fabs(load1(i));
    if (a < k_inf) r = std::max(r, static_cast<float>(a));
  }
  return r;
}

// The largest finite |x| of n 16-bit floats (bf16, f16), as its bit pattern, 16 elements at
// a time in integer lanes: |x| is the pattern without the sign bit, a non-negative float's
// pattern orders as its value does, and the pattern is finite when below `inf_bits` (the
// exponent field all ones), so the integer maximum of the finite patterns is the pattern of
// the finite maximum. (0 when there is none: +0.)
std::uint16_t finite_amax_bits(const std::byte* bytes, std::size_t n, std::uint16_t inf_bits) {
  using v16u16 = std::uint16_t __attribute__((vector_size(32)));
  using v16i16 = std::int16_t __attribute__((vector_size(32)));
  v16u16 m = v16u16{} + 0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v16u16 h;
    std::memcpy(&h, bytes + 2 * i, sizeof h);
    const v16u16 a = h & 0x7FFF;
    // Signed compare: both sides are below 0x8000.
    const v16u16 fin = reinterpret_cast<v16u16>(reinterpret_cast<v16i16>(a) < static_cast<std::int16_t>(inf_bits));
    const v16u16 k = a & fin;
    m = k > m ? k : m;
  }
  std::uint16_t r = 0;
  for (int l = 0; l < 16; ++l) r = std::max<std::uint16_t>(r, m[l]);
  for (; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, bytes + 2 * i, sizeof h);
    const auto a = static_cast<std::uint16_t>(h & 0x7FFF);
    if (a < inf_bits) r = std::max(r, a);
  }
  return r;
}

}  // namespace

double fast_quantizer::finite_amax(const void* data, fast_input in, std::size_t n) {
  const auto* bytes = static_cast<const std::byte*>(data);
  switch (in) {
    case fast_input::m_f32:
      return finite_amax_f(
          n,
          [&](std::size_t i) {
            v8f v;
            std::memcpy(&v, bytes + 4 * i, sizeof v);
            return v;
          },
          [&](std::size_t i) { return element(data, in, i); });
    case fast_input::m_bf16:    // finite: exponent field below all ones (0x7F80)
    case fast_input::m_f16: {  // finite: below 0x7C00
      const std::uint16_t bits = finite_amax_bits(bytes, n, in == fast_input::m_bf16 ? 0x7F80 : 0x7C00);
      return element(&bits, in, 0);
    }
    default: break;
  }
  const auto run = [&](const auto& src) {
    v4d m = splat(0.0);
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const v4d a = vabs(src.load(static_cast<std::int64_t>(i)));
      m = vmax(m, a < splat(k_inf) ? a : splat(0.0));
    }
    double r = hmax(m);
    for (; i < n; ++i) {
      const double a = std::fabs(src.at(static_cast<std::int64_t>(i)));
      if (a < k_inf) r = std::max(r, a);
    }
    return r;
  };
  switch (in) {
    case fast_input::m_f64: return run(source<double>{static_cast<const double*>(data)});
    case fast_input::m_f32: return run(source<float>{static_cast<const float*>(data)});
    case fast_input::m_bf16: return run(source<bf16_tag>{static_cast<const std::uint16_t*>(data)});
    case fast_input::m_f16: return run(source<f16_tag>{static_cast<const std::uint16_t*>(data)});
  }
  return 0.0;
}

double fast_quantizer::element(const void* data, fast_input in, std::size_t i) {
  const auto k = static_cast<std::int64_t>(i);
  switch (in) {
    case fast_input::m_f64: return source<double>{static_cast<const double*>(data)}.at(k);
    case fast_input::m_f32: return source<float>{static_cast<const float*>(data)}.at(k);
    case fast_input::m_bf16: return source<bf16_tag>{static_cast<const std::uint16_t*>(data)}.at(k);
    case fast_input::m_f16: return source<f16_tag>{static_cast<const std::uint16_t*>(data)}.at(k);
  }
  return 0.0;
}

}  // namespace numprobe::formats::detail
