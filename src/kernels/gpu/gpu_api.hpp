#pragma once
// Host-side interface of the GPU kernels: plain C++, no vendor headers, so providers and tests
// compile with the host compiler alone. The same kernel sources compiled by nvcc give
// cuda_api(), compiled by hipcc give hip_api(); a provider is written once against this table.
#include <cstdint>
#include <string>
#include <vector>

#include "numprobe/kernel_abi.h"
#include "src/kernels/fault_table.hpp"

namespace numprobe::gpu {

// Fault variants: compile-time template parameters of the kernels (one bit each). Names, bits
// and meanings are the shared fault table's (src/kernels/fault_table.hpp). The address faults
// (k_runtime_faults) are run-time flags of the fault-free variant instead: they change which K/V
// row or head is read once per block or tile, not the inner loops, so they cost no instantiation.
enum fault_bits : std::uint32_t {
  k_fault_none = 0,
  k_fault_skip_rescale = kernels::gpu_bit(kernels::fault::m_skip_rescale),
  k_fault_stale_max = kernels::gpu_bit(kernels::fault::m_stale_max),
  k_fault_rowsum_bf16 = kernels::gpu_bit(kernels::fault::m_rowsum_bf16),
  k_fault_acc_bf16 = kernels::gpu_bit(kernels::fault::m_acc_bf16),
  k_fault_mask_top_left = kernels::gpu_bit(kernels::fault::m_mask_top_left),
  k_fault_no_empty_guard = kernels::gpu_bit(kernels::fault::m_no_empty_guard),
  k_fault_drop_tail_tile = kernels::gpu_bit(kernels::fault::m_drop_tail_tile),
  k_fault_finite_sentinel = kernels::gpu_bit(kernels::fault::m_finite_sentinel),
  k_fault_gqa_mod = kernels::gpu_bit(kernels::fault::m_gqa_mod),          // forward and decode
  k_fault_index_wrap = kernels::gpu_bit(kernels::fault::m_index_wrap),    // forward and decode
  k_fault_empty_split_nan = kernels::gpu_bit(kernels::fault::m_empty_split_nan),  // decode
};
inline constexpr std::uint32_t k_runtime_faults = k_fault_gqa_mod | k_fault_index_wrap;
inline constexpr std::uint32_t k_decode_faults = kernels::gpu_bits(kernels::k_gpu_decode);
static_assert(k_decode_faults == (k_fault_gqa_mod | k_fault_index_wrap | k_fault_empty_split_nan));
using kernels::k_index_wrap_rows;

enum class attention_path : std::uint8_t {
  m_mma,     // tensor cores (NVIDIA mma.sync); the default where the platform has it
  m_scalar,  // fp32 FMA dot products, one query row per thread (the HIP path; runs on CUDA too)
};

enum class attention_mask : std::uint8_t { m_none, m_causal, m_causal_top_left, m_window };

struct device_facts {
  int ordinal = 0;
  std::string name;
  std::string arch;  // "sm_90", "gfx90a"
  int warp_width = 0;
  int multiprocessors = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t shared_per_block_optin = 0;
  int clock_khz = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;
};

// One forward attention launch, on host data. Inputs hold values already representable in the
// dtype (the rounded inputs), as float. Q is [B*T, Hq, D]; K and V are [B*S, Hkv, D].
struct attention_request {
  std::int64_t batch = 1, t = 0, s = 0, hq = 0, hkv = 0, d = 0;
  bool fp16 = false;  // false: bf16
  float scale = 0.f;
  float softcap = 0.f;
  attention_mask mask = attention_mask::m_none;
  std::int64_t window = 0;
  std::uint32_t faults = k_fault_none;
  attention_path path = attention_path::m_mma;
  int device = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  // Flat rows (b*T + t) to return, in this order.
  const std::int64_t* rows = nullptr;
  std::int64_t n_rows = 0;
};

struct attention_result {
  std::vector<float> o;    // [n_rows, Hq, D]: the kernel's output in the input dtype, widened
  std::vector<float> lse;  // [n_rows, Hq]: natural log, fp32
  double kernel_ms = 0.0;  // the attention kernel alone (events)
  // NaN/Inf in the rows that were computed but not returned, counted on the device, so a NaN
  // outside the sampled rows is still a finding (as attention_output::outside). LSE -inf is
  // left alone: it is right for a row that sees no key.
  struct {
    std::int64_t o_nan = 0, o_inf = 0, lse_nan = 0, lse_inf = 0, rows = 0;
  } outside;
};

// Kernel facts reported to probes and reports.
struct kernel_facts {
  int tile_q = 0, tile_k = 0, warps = 0;
  std::string exp_impl, mma_impl, tanh_impl, compiled_for;
};

struct backend_api {
  const char* vendor;  // "cuda" | "hip"
  // Number of visible devices; 0 (never throws) when there is no device or no driver.
  int (*device_count)();
  // The reason device_count() is 0, in the runtime's own words ("" when devices exist).
  std::string (*no_device_reason)();
  // Facts about one device; throws a backend error naming the failing call.
  device_facts (*device_info)(int ordinal);
  kernel_facts (*attention_kernel_facts)(attention_path path, std::int64_t head_dim);
  // Runs one forward attention. Device output buffers are poisoned (NaN) before the launch.
  // Throws numprobe::error: backend (exit 3) naming the failing call, or input (exit 2) for a
  // shape the compiled kernels do not cover.
  attention_result (*attention_forward)(const attention_request& req);
};

// Defined only in builds that compiled the kernels for that vendor.
[[nodiscard]] const backend_api& cuda_api();
[[nodiscard]] const backend_api& hip_api();

// ------------------------------------------------------------------ quantize (issue 4)
// Quantize kernels (src/kernels/gpu/quantize*.cu): codes and scales bit-exact with
// numprobe::formats::quantize on the same float inputs (docs/gpu.md, "Quantize kernels").
enum class quant_kind : std::uint8_t {
  m_tensor,    // one scale for the tensor (amax reduction on the device first)
  m_row_block, // blocks of block_cols along a row: 1x128 fp8, MX (32), NVFP4 (16), int4 groups
  m_block2d,   // block_rows x 128 tiles (DeepSeek-V3 128x128 weights)
  m_mx,        // OCP MX: e8m0 shared exponent by mx_rule
  m_nvfp4,     // e4m3 block scale x fp32 tensor scale amax / (6 * 448)
  m_asym,      // AWQ: uint4 with f16 scale and zero point per group
};
enum class quant_elem : std::uint8_t { m_e4m3, m_e2m1, m_i4, m_u4 };
enum class quant_scale : std::uint8_t { m_f32, m_f16, m_e4m3, m_e8m0 };

struct quant_request {
  quant_kind kind = quant_kind::m_tensor;
  quant_elem elem = quant_elem::m_e4m3;
  quant_scale scale = quant_scale::m_f32;
  std::int64_t rows = 0, cols = 0;
  std::int64_t block_rows = 1, block_cols = 128;  // block2d tile / row-block length (16..128)
  double amax_floor = 0.0;  // DeepSeek-V3 activations: max(amax, 1e-4)
  int mx_rule = 0;          // formats::mx_rule order: floor, ceil, rceil, even, nearest
  // NVFP4 conventions (formats::quant_conventions): scale_division in its enum order,
  // scale_floor min-normal, scale_arith fp32.
  int nv_division = 0;
  bool nv_min_normal_floor = false;
  bool nv_fp32_arith = false;
  bool hw_cvt = true;       // use cvt.rn.satfinite.e4m3x2.f32 where the device has it
  bool dequant = false;     // int4 only: also run the int4 -> fp16 (0x6400) dequant kernel
  int device = 0;
  const float* x = nullptr;  // [rows, cols] row-major
};

struct quant_device_result {
  std::vector<std::uint8_t> packed;      // as the kernel wrote them (4-bit: 2 per byte, low first)
  std::vector<std::uint32_t> codes;      // unpacked, one per element
  std::vector<std::uint32_t> scale_codes;  // per block, row-major block grid (tensor: 1)
  std::vector<std::uint8_t> zero_points;   // m_asym
  float tensor_scale = 1.f;              // NVFP4 s_t; 1 otherwise
  std::vector<std::uint16_t> dequant_f16;  // int4 dequant output (fp16 bits), when asked
  double kernel_ms = 0.0;                // the quantize kernel alone
  double amax_ms = 0.0;                  // the tensor amax pass (tensor, NVFP4)
  std::string conversion;                // "cvt.rn.satfinite.e4m3x2.f32" or "software"
};

// Achieved bandwidth of one quantize kernel over a device-generated fp32 tensor of `bytes`
// against a device-to-device copy of the same bytes, both timed in the same call.
struct quant_bandwidth {
  double quant_ms = 0.0, amax_ms = 0.0, copy_ms = 0.0;
  double quant_bytes = 0.0, copy_bytes = 0.0;  // bytes read + written
  double quant_gbs = 0.0, copy_gbs = 0.0;
};

struct quant_api {
  const char* vendor;
  // Throws numprobe::error: input (exit 2) for a shape/scheme the kernels do not cover,
  // backend (exit 3) naming a failing call. Device outputs are poisoned before each launch.
  quant_device_result (*quantize)(const quant_request& req);
  quant_bandwidth (*bandwidth)(const quant_request& shape, std::int64_t bytes, int iters);
};

[[nodiscard]] const quant_api& cuda_quant_api();
[[nodiscard]] const quant_api& hip_quant_api();

// ------------------------------------------------------------------ split-KV decode (issue 4)
// Flash-decoding (src/kernels/gpu/flash_decode*.cu): T = 1..8 new queries over S cached keys,
// S cut into `splits` ranges; each split writes (O_i, LSE_i) in fp32, a merge kernel combines
// LSE = log sum exp(LSE_i), O = sum exp(LSE_i - LSE) O_i. Empty splits (no visible key) have
// LSE_i = -inf and contribute 0; a row with no visible key gives O = 0, LSE = -inf.
enum class kv_format : std::uint8_t {
  m_input,          // K/V in the input dtype (bf16/fp16)
  m_e4m3_tensor,    // e4m3fn K/V with one fp32 scale for K and one for V
  m_e4m3_head,      // e4m3fn K/V with one fp32 scale per KV head for K and for V
};

struct decode_request {
  std::int64_t batch = 1, t = 1, s = 0, hq = 0, hkv = 0, d = 0;
  bool fp16 = false;
  float scale = 0.f;
  attention_mask mask = attention_mask::m_none;  // none, causal (bottom-right), window
  std::int64_t window = 0;
  int splits = 1;  // >= 1; splits larger than S leave empty splits (handled exactly)
  std::int64_t split_size = 0;  // > 0: keys per split instead (splits = ceil(S / split_size))
  std::uint32_t faults = k_fault_none;  // run-time flags, k_decode_faults only
  // FP8 P and the fp8 MMA accumulator model (flash_decode.cuh): P * p_prescale to e4m3fn for
  // P.V; acc_promote > 0: O keeps acc_mantissa fraction bits, promoted to fp32 every N tiles.
  bool p_e4m3 = false;
  float p_prescale = 1.f;
  int acc_promote = 0;
  int acc_mantissa = 13;
  kv_format kv = kv_format::m_input;
  // FP8 KV: codes are formed on the host by the caller (e4m3fn bytes), scales per tensor
  // (k_scale[0]) or per KV head (k_scale[h]).
  const std::uint8_t* k8 = nullptr;
  const std::uint8_t* v8 = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int device = 0;
  const float* q = nullptr;  // [B*T, Hq, D]
  const float* k = nullptr;  // [B*S, Hkv, D] (m_input)
  const float* v = nullptr;
  // A ragged batch: member b holds seq_lens[b] (1..s) keys, the first of its s slots (host
  // memory, [batch]; null: every member holds s). Launched through abi_decode only, whose
  // entry runs one launch per sequence with splits cut at multiples of ceil(s / splits) (the
  // longest sequence's geometry) or of split_size; no split LSE comes back.
  const std::int32_t* seq_lens = nullptr;
  // Set: the kernels are launched through this plugin-ABI entry of the built-in kernel table
  // (builtin_kernel_table.hpp) on numprobe_decode_params + numprobe_decode_variant over the same
  // device buffers (every knob above as the variant, the split LSE written into the workspace
  // read back as split_lse); the validation, upload, poisoning, timing and read-back around it
  // are unchanged. A non-zero status rethrows the table's own exception, else is a backend
  // error with abi_last_error's text. Null: the kernels are launched directly.
  numprobe_attention_decode_variant_fn abi_decode = nullptr;
  numprobe_kernel_last_error_fn abi_last_error = nullptr;
};

struct decode_result {
  std::vector<float> o;    // [B*T, Hq, D], output dtype widened
  std::vector<float> lse;  // [B*T, Hq], natural log
  std::vector<float> split_lse;  // [splits, B*T, Hq]: per-split LSE (-inf for empty splits)
  double kernel_ms = 0.0;  // split kernel + merge
};

struct decode_api {
  const char* vendor;
  decode_result (*decode)(const decode_request& req);
};
[[nodiscard]] const decode_api& cuda_decode_api();
[[nodiscard]] const decode_api& hip_decode_api();

}  // namespace numprobe::gpu

#include <cstddef>

namespace numprobe::gpu {

// ------------------------------------------------------------------ device memory (issue 8)
// What the plugin provider needs to run a device-memory plugin (NUMPROBE_MEMORY_CUDA / _HIP):
// allocate on the selected device, copy in and out, poison, a stream of numprobe's own, and a
// checked synchronisation. Behind this table so that src/providers stays host-compiler-only
// (src/kernels/gpu/device_memory.cu). Every function throws a backend error (exit 3) naming the
// failing runtime call.
struct device_memory_api {
  const char* vendor;
  int (*device_count)();  // 0 (never throws) without a device or driver
  void* (*alloc)(int device, std::size_t bytes);
  void (*release)(void* p) noexcept;
  void (*copy_to_device)(void* dst, const void* src, std::size_t bytes);
  void (*copy_to_host)(void* dst, const void* src, std::size_t bytes);
  void (*fill)(void* p, int byte, std::size_t bytes);  // 0xFF poisons (NaN in f32/f16/bf16)
  void* (*create_stream)(int device);
  void (*destroy_stream)(void* stream) noexcept;
  // Waits for `stream`, then checks for an error left by its work (a faulting plugin kernel).
  void (*synchronize)(void* stream);
};
[[nodiscard]] const device_memory_api& cuda_device_memory_api();
[[nodiscard]] const device_memory_api& hip_device_memory_api();

}  // namespace numprobe::gpu

namespace numprobe::gpu {

// ------------------------------------------------------------------ looped softmax (issue 9)
// One block per row walking the row in chunks (src/kernels/gpu/looped_softmax.cuh): the
// emulator's looped softmax (src/kernels/emu/looped_softmax*) on the GPU, m and l in fp32,
// outputs fp32. Faults: k_fault_no_empty_guard, k_fault_rowsum_bf16, k_fault_finite_sentinel
// (one at a time, compiled variants).
enum class softmax_dtype : std::uint8_t { m_bf16, m_f16, m_f32 };

struct softmax_request {
  std::int64_t rows = 0, vocab = 0, chunk = 1024;
  softmax_dtype dtype = softmax_dtype::m_bf16;  // logits as the kernel reads them
  float temperature = 1.f, softcap = 0.f;
  std::uint32_t faults = k_fault_none;
  int device = 0;
  const float* logits = nullptr;        // [rows, V], exact in dtype; masked entries -inf
  const std::int64_t* targets = nullptr;  // [rows]; -1: no target
};

struct softmax_device_result {
  std::vector<float> p, logp;  // [rows, V]
  std::vector<float> lse, ce;  // [rows]
  double kernel_ms = 0.0;
};

struct softmax_api {
  const char* vendor;
  // Throws numprobe::error: input (exit 2) for a bad shape, chunk or fault, backend (exit 3)
  // naming a failing call. Outputs are poisoned (NaN) before the launch.
  softmax_device_result (*softmax)(const softmax_request& req);
};
[[nodiscard]] const softmax_api& cuda_softmax_api();
[[nodiscard]] const softmax_api& hip_softmax_api();

}  // namespace numprobe::gpu
