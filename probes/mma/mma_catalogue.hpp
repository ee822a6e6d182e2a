#pragma once
// The test-vector catalogue of `numprobe mma` (issue 31; docs/hardware.md): per property of a
// tensor-core path, dot products designed so that each hypothesis predicts a different
// output. The catalogue is static (every vector is known before anything runs), so it can be
// written to a file and fed to other implementations (bench/mma_torch.py); the classifier
// (mma_classify.hpp) picks the vectors that matter once the earlier properties are known.
//
// Design (after Fasi, Higham, Mikaitis, Pranesh 2021, PeerJ CS 7:e330): a cancelling pair
// +2^E, -2^E fixes the group's largest exponent at E while contributing nothing, so a small
// third term shows, exactly and independently of the output rounding, whether the internal
// sum kept it, how it rounded, and whether it shared the pair's group.
#include <string>
#include <vector>

#include "numprobe/formats/format.hpp"
#include "src/kernels/emu/mma_model.hpp"
#include "src/providers/mma_device.hpp"

namespace numprobe::probes {

// One MMA path as the catalogue sees it: the element format of A and B, the instruction's K,
// and the accumulator: fp32, fp16 (the floating-point catalogue, its exponents scaled into
// fp16's range), or s32 (i8 inputs: the integer catalogue).
struct mma_path {
  std::string name;  // e.g. mma.sync.m16n8k16.f32.bf16, or the model name for --model
  formats::format_id input = formats::format_id::m_bf16;
  int k = 16;
  providers::mma_family family = providers::mma_family::m_mma_sync;  // the device instruction
  providers::mma_accumulator accumulator = providers::mma_accumulator::m_f32;

  [[nodiscard]] providers::mma_instruction instruction() const { return {family, input, k, accumulator}; }
  [[nodiscard]] bool integer() const {
    return accumulator == providers::mma_accumulator::m_s32 || accumulator == providers::mma_accumulator::m_s32_satfinite;
  }
  // The floating-point accumulator's format (f32 or f16); f32 for integer paths (unused there).
  [[nodiscard]] formats::format_id output() const {
    return accumulator == providers::mma_accumulator::m_f16 ? formats::format_id::m_f16 : formats::format_id::m_f32;
  }
};

// The path a named model describes: its name, input, K and accumulator (mma_sync family).
[[nodiscard]] mma_path mma_model_path(const emu::mma_model& m);

// True when x is a value the path's accumulator holds (fp32, fp16, or s32).
[[nodiscard]] bool mma_accumulator_holds(const mma_path& path, double x);

struct mma_vector {
  std::string id;        // property(parameter), e.g. fraction_bits(j=14)
  std::string property;  // products, fraction_bits, internal_rounding, output_rounding,
                         // grouping, c_handling, subnormals, nonfinite; integer paths:
                         // products, overflow
  int param = 0;         // the vector's parameter (j, F candidate, P', m ...)
  int sign = 1;          // for signed variants
  std::vector<double> a, b;
  double c = 0.0;
};

// The exponent of the cancelling pair's product (2^E) for the path's input format.
[[nodiscard]] int mma_pair_exponent(const mma_path& path);
// The largest j of the fraction-bits sweep (the small term 2^(E-j) still a product of two
// normal values of the format).
[[nodiscard]] int mma_max_shift(const mma_path& path);

// Every vector of the catalogue for the path, in a fixed order.
[[nodiscard]] std::vector<mma_vector> mma_catalogue(const mma_path& path);

// The paths numprobe's probe kernels run: mma.sync, then wgmma (sm_90 only), each with fp32
// accumulators, then fp16 accumulators, then s8 with s32 (wrapping, then .satfinite), then
// wgmma with A from registers (fp32 accumulators).
[[nodiscard]] std::vector<mma_path> mma_device_paths();

}  // namespace numprobe::probes
