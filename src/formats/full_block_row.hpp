#pragma once
// The block quantizer's row path for the common case (rne_block_quantizer.hpp): one row of
// full blocks (block_cols a multiple of 4 dividing cols) without non-finite inputs or outputs,
// with no masks.
//
// Private to numprobe (the block quantizer): not installed.
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "src/formats/block_scale_rule.hpp"
#include "src/formats/element_loads.hpp"
#include "src/formats/rne_block_quantizer.hpp"
#include "src/formats/rne_lane_codec.hpp"
#include "src/formats/row_scratch.hpp"
#include "src/formats/strip_segments.hpp"

namespace numprobe::formats::detail {

// After pass 2 of a row: `blocks` from the per-block arrays (all of them without a summary;
// with one, the summary from the arrays and the widened row, then blocks[worst] and
// blocks[also] where >= 0). full_block_row.cpp.
void finish_full_block_row(const row_scratch& w, const element_rounding& er, double unit,
                           double flush_ratio, std::int64_t cols, std::int64_t row,
                           std::int64_t bcols, std::span<block_stats> blocks, bool scaled,
                           strip_summary* summary, std::int64_t also);

// One row of full blocks. Returns false (nothing written, nothing handed to `errors`) when
// the row holds a non-finite value or a block could dequantize beyond the double range, so
// the caller takes the masked path (masked_strip.hpp).
// W: the block width when it is a compile-time constant (16, 32: loops unroll), else 0.
// Abs (symmetric float element formats): the row is kept as |x| and coded as |x|. Every
// operation below is odd in x (x / s, x * (1/s), the element rounding, which rounds |t| and
// restores the sign, and dq = y * eff), so dq(|x|) = |dq(x)| and dq(|x|) - |x| = +-(dq - x)
// exactly; the terms (x^2, (dq - x)^2, |dq - x|), the flush test (x != 0, dq == 0) and the
// clip test (|t| > max, the range being symmetric) are the same numbers, with no sign to
// split off and put back per element. Integer formats (lowest = -max - 1) take Abs = false.
template <std::int64_t W, bool Abs, class S, class Errors>
bool full_block_row(const S& in, const element_rounding& er, const scale_plan& plan,
                    const block_scale_rule& rule, double unit, double flush_ratio,
                    std::int64_t cols, std::int64_t row, std::int64_t bcols_rt,
                    std::span<block_stats> blocks, row_scratch& w, Errors& errors, bool scaled,
                    strip_summary* summary) {
  typename Errors::lanes st;
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
  // finish_full_block_row). A non-finite element makes `sum` non-finite; for f64 elements the sum
  // of |x| may also overflow, which sends the row to the masked path too. Narrower elements
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
  if (!(hsum(sum) < k_inf)) return false;  // inf/NaN (or a sum beyond the double range)

  // Scales and block_coder's multipliers (block_scale_rule.hpp).
  row_scales(plan, rule, nb, w);
  const double max_eff = row_multipliers(nb, unit, w);
  const double inv_unit = 1.0 / unit;  // unit is 1 or 2^-6: exact
  if (!(max_eff * er.max < k_inf)) return false;  // |dq| <= max * eff stays finite otherwise

  // Pass 2 (the same operations as code_lanes, without masks: every element here is finite).
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
    auto acc = st;  // in registers for the block
    v4i flushes = splat_i(0), clips = splat_i(0);  // minus the count (a true mask lane is -1)
    const auto code = [&](auto quotient) {
      for (std::int64_t k = 0; k < bcols; k += 4) {
        const v4d a = src.load(at + k);  // |x|
        const v4d t = quotient(a);
        const v4d dq = round_pos(t) * eff;
        acc.add(a, dq);
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
    st = acc;
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
      st.add(x, dq);
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
  const strip_segments segs{in, er, unit, cols, row, std::int64_t{1}, nb, bcols,
                            [&](std::int64_t j) { return w.scale[static_cast<std::size_t>(j)]; }};
  const std::int64_t also = st.add_to(errors, 0, segs);
  finish_full_block_row(w, er, unit, flush_ratio, cols, row, bcols, blocks, scaled, summary, also);
  return true;
}

}  // namespace numprobe::formats::detail
