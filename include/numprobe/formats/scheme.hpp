#pragma once
// Block-scaling schemes: how a tensor is cut into blocks, how each block's scale is chosen and
// stored, and how elements are coded against it (NUMERICS.md, "Block-scaling schemes").
//
// Geometry: a tensor is viewed as 2D [rows, cols] (leading dims flattened into rows). `axis`
// names the axis a block runs along (the reduction axis; 1 = cols by default), so per-channel
// and per-token are both one scale per row unless axis = 0 is asked for.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numprobe/formats/conventions.hpp"
#include "numprobe/formats/format.hpp"

namespace numprobe::formats {

enum class scheme_kind : std::uint8_t {
  m_none,     // plain cast, scale 1
  m_tensor,   // one scale for the whole tensor
  m_channel,  // one scale per output channel (a row of a [out, in] weight)
  m_token,    // one scale per token (a row of a [tokens, hidden] activation)
  m_group,    // groups of G along `axis`, the last one partial when the axis is not a multiple
  m_block2d,  // block_rows x block_cols tiles (DeepSeek-V3: 128x128 weights, 1x128 activations)
  m_mx,       // OCP MX v1.0: blocks of 32, e8m0 shared exponent
  m_nvfp4,    // blocks of 16, e4m3 block scale times an fp32 tensor scale
  m_asym,     // asymmetric groups with a zero point (AWQ): s = (max-min)/qmax, z, (q - z) s
};

// How an MX shared exponent is derived from the block amax (all are used in practice;
// docs/quant-conventions.md cites each).
enum class mx_rule : std::uint8_t {
  m_floor,  // OCP: X = floor(log2(amax)) - emax_elem; maxima in (max, 2^(emax+1)) x 2^X clip
  m_ceil,   // X = ceil(log2(amax)) - emax_elem (ModelOpt); never clips, may waste a binade
  m_rceil,  // X = ceil(log2(amax / max_elem)) (cuBLAS, cvt.rp ue8m0); the tightest no-clip
  m_even,   // X = floor(log2(RNE_m(amax))) - emax_elem: amax's significand rounded to the
            // element's m mantissa bits first (torchao ScaleCalculationMode.EVEN)
  m_nearest,  // X = round(log2(amax)) - emax_elem: floor, plus 1 when amax >= sqrt(2) 2^floor
              // (log2 rounded to nearest; sqrt(2) 2^e is irrational, so there is no tie)
};

struct scheme_config {
  scheme_kind kind = scheme_kind::m_none;
  format_id element = format_id::m_e4m3fn;
  format_id scale_format = format_id::m_f32;  // f32, f16, bf16, e4m3fn, e8m0
  int axis = 1;                               // the axis blocks run along (0 = rows, 1 = cols)
  std::int64_t group = 128;                   // m_group / m_asym group size along `axis`
  std::int64_t block_rows = 128, block_cols = 128;  // m_block2d tile
  double amax_floor = 0.0;  // DeepSeek-V3 activations: s = max(amax, 1e-4) / 448
  mx_rule rule = mx_rule::m_floor;
  quant_conventions conv;  // NVFP4 element scaling, block-scale floor and arithmetic
  rounding round = rounding::m_nearest_even;
  overflow over = overflow::m_saturate;  // scaled formats clamp (MX, NVFP4 definitions)
  std::uint64_t seed = 0;                // stochastic rounding stream
  int zero_point_bits = 4;               // m_asym: zeros packed as uint4 (AWQ/GPTQ qzeros)
};

// One named scheme or preset, as `numprobe formats` lists it.
struct scheme_info {
  std::string_view name;
  std::string_view description;
  scheme_config defaults;
  // Bits per element including scales (and zero points), for a 4096x4096 tensor.
  double bits_per_element;
};

[[nodiscard]] std::span<const scheme_info> all_schemes();
// Throws numprobe::error (exit 2) naming `place` on an unknown name.
[[nodiscard]] const scheme_info& find_scheme(std::string_view name,
                                             const std::string& place = "scheme");
[[nodiscard]] std::string_view name(scheme_kind k);
[[nodiscard]] std::string_view name(mx_rule r);
[[nodiscard]] mx_rule parse_mx_rule(std::string_view text, const std::string& place = "rule");

// Checks a config against a [rows, cols] tensor (element/scale formats, block sizes, axis);
// throws numprobe::error (exit 2) naming the offending setting.
void validate(const scheme_config& c, std::int64_t rows, std::int64_t cols);

// The block grid: how many blocks along rows and cols, and each block's extent.
struct block_grid {
  std::int64_t rows = 0, cols = 0;              // tensor
  std::int64_t block_rows = 1, block_cols = 1;  // nominal block (the last may be partial)
  std::int64_t grid_rows = 0, grid_cols = 0;
  [[nodiscard]] std::int64_t count() const { return grid_rows * grid_cols; }
};
[[nodiscard]] block_grid grid_of(const scheme_config& c, std::int64_t rows, std::int64_t cols);

// Exact bits per element of a [rows, cols] tensor: element storage bits, plus every stored
// scale, zero point and tensor scale spread over the elements.
[[nodiscard]] double bits_per_element(const scheme_config& c, std::int64_t rows,
                                      std::int64_t cols);

struct block_stats {
  std::int64_t row0 = 0, col0 = 0;  // first element
  std::int64_t rows = 0, cols = 0;  // extent (partial blocks are smaller)
  double amax = 0.0;                // over finite inputs
  std::int64_t argmax = -1;         // flat index of the element that set the scale (-1: none)
  double scale = 1.0;               // effective multiplier: dequant = value(code) * scale
  std::uint32_t scale_code = 0;     // the block scale as stored (the format's code)
  int zero_point = 0;               // m_asym only
  std::int32_t flushed = 0;         // finite non-zero inputs that dequantize to zero
  std::int32_t clipped = 0;         // finite inputs whose scaled magnitude exceeds the max
  std::int32_t nonfinite = 0;       // NaN or inf inputs
  bool scale_underflow = false;     // the ideal scale fell below the scale format's range
};

struct quant_result {
  scheme_config config;
  block_grid grid;
  std::vector<std::uint32_t> codes;  // one unpacked element code per input, row-major
  std::vector<double> dequant;       // exact dequantized values (double holds every product)
  std::vector<block_stats> blocks;   // grid_rows x grid_cols, row-major
  double tensor_scale = 1.0;         // NVFP4 s_t (fp32); 1 otherwise
  std::int64_t flushed = 0, clipped = 0, scale_underflow_blocks = 0;
  std::int64_t nan_inputs = 0, inf_inputs = 0;
};

// Quantizes a row-major [rows, cols] tensor. NaN/inf inputs are counted, excluded from amax,
// and coded as the element format codes them (NaN where it has one, else per `over`).
[[nodiscard]] quant_result quantize(const scheme_config& c, std::span<const double> values,
                                    std::int64_t rows, std::int64_t cols);

}  // namespace numprobe::formats
