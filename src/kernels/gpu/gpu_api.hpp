#pragma once
// Host-side interface of the GPU kernels: plain C++, no vendor headers, so providers and tests
// compile with the host compiler alone. The same kernel sources compiled by nvcc give
// cuda_api(), compiled by hipcc give hip_api(); a provider is written once against this table.
#include <cstdint>
#include <string>
#include <vector>

namespace numprobe::gpu {

// Fault variants: compile-time template parameters of the kernels (one bit each). Names and
// meanings are the emulator's (src/kernels/emu/flash_attention.hpp).
enum fault_bits : std::uint32_t {
  k_fault_none = 0,
  k_fault_skip_rescale = 1u << 0,
  k_fault_stale_max = 1u << 1,
  k_fault_rowsum_bf16 = 1u << 2,
  k_fault_acc_bf16 = 1u << 3,
  k_fault_mask_top_left = 1u << 4,
  k_fault_no_empty_guard = 1u << 5,
  k_fault_drop_tail_tile = 1u << 6,
  k_fault_finite_sentinel = 1u << 7,
};

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

}  // namespace numprobe::gpu
