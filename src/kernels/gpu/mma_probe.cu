// Tensor-core probe kernels (issue 31; mma_probe.hpp): one warp per dot product. The operands
// are placed in the PTX ISA's fragment layouts ("Matrix Fragments for mma.m16n8k16 / k8 / k32"):
// every row of A holds the vector's a (in the k order of the layout), every column of B its b,
// and every element of C its c, so every element of D is the same designed dot product. Lane 0's
// first accumulator register is the result; every other D element must equal it bit for bit
// (NaN with NaN), which checks the row/column placement on the device itself (a mismatch is a
// backend error). The k placement is what the property vectors depend on: a wrong k order shows
// in the grouping and fraction-bits verdicts. The register layouts are in mma_probe_fragments.cuh
// (shared with wgmma's A-in-registers form). The wgmma kernels (sm_90a) are in wgmma_probe.cu;
// this file's host harness runs both.
#include <cuda_fp8.h>

#include <cstring>
#include <string>

#include "src/kernels/gpu/gpu_check.cuh"
#include "src/kernels/gpu/mma_probe.hpp"
#include "src/kernels/gpu/mma_probe_fragments.cuh"
#include "src/kernels/gpu/mma_probe_launch.hpp"
#include "src/kernels/gpu/platform.cuh"

namespace numprobe::gpu {
namespace {

// fp8 mma.sync with an fp16 accumulator is PTX ISA 8.4 (CUDA 12.4).
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define NUMPROBE_HAVE_FP8_F16ACC 1
#else
#define NUMPROBE_HAVE_FP8_F16ACC 0
#endif

// One mma.sync with 4 A and 2 B registers: fp32 C/D (4 .f32), fp16 C/D (2 .f16x2) or s32 C/D
// (4 .s32). Macros because the instruction's name is part of the asm string literal.
#define NUMPROBE_MMA_SYNC_F32(SHAPE_TYPES, D, A, B, C)                                                      \
  asm volatile("mma.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n" \
               : "=f"(D[0]), "=f"(D[1]), "=f"(D[2]), "=f"(D[3])                                         \
               : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]), "f"(C[0]), "f"(C[1]),  \
                 "f"(C[2]), "f"(C[3]))
#define NUMPROBE_MMA_SYNC_F16(SHAPE_TYPES, D, A, B, C)                                           \
  asm volatile("mma.sync.aligned." SHAPE_TYPES " {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};\n"      \
               : "=r"(D[0]), "=r"(D[1])                                                          \
               : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]), "r"(C[0]), "r"(C[1]))
#define NUMPROBE_MMA_SYNC_S32(SHAPE_TYPES, D, A, B, C)                                                      \
  asm volatile("mma.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n" \
               : "=r"(D[0]), "=r"(D[1]), "=r"(D[2]), "=r"(D[3])                                         \
               : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]), "r"(C[0]), "r"(C[1]),  \
                 "r"(C[2]), "r"(C[3]))

template <mma_probe_op OP>
__global__ void mma_probe_kernel(const float* a, const float* b, const std::uint32_t* c, std::uint32_t* d, int k,
                                 unsigned* mismatches) {
  constexpr in_kind IN = input_of(OP);
  constexpr mma_probe_acc ACC = acc_of(OP);
  const int v = blockIdx.x;
  const int lane = threadIdx.x;
  const int t = lane & 3;         // threadID_in_group
  const float* av = a + static_cast<long>(v) * k;
  const float* bv = b + static_cast<long>(v) * k;
  std::uint32_t ra[4] = {0, 0, 0, 0};
  std::uint32_t rb[2] = {0, 0};
  load_a_fragment<IN>(av, t, ra);
  load_b_fragment<IN>(bv, t, rb);
  // The four D elements this lane holds, as accumulator words (fp32 bits, or s32).
  std::uint32_t out[4] = {0, 0, 0, 0};
  const std::uint32_t cw = c[v];
  if constexpr (ACC == mma_probe_acc::m_f32) {
    const float cv = __uint_as_float(cw);
    float rc[4] = {cv, cv, cv, cv};
    float rd[4] = {0.f, 0.f, 0.f, 0.f};
    if constexpr (OP == mma_probe_op::m_f16_k16)
      NUMPROBE_MMA_SYNC_F32("m16n8k16.row.col.f32.f16.f16.f32", rd, ra, rb, rc);
    else if constexpr (OP == mma_probe_op::m_bf16_k16)
      NUMPROBE_MMA_SYNC_F32("m16n8k16.row.col.f32.bf16.bf16.f32", rd, ra, rb, rc);
    else if constexpr (OP == mma_probe_op::m_tf32_k8)
      NUMPROBE_MMA_SYNC_F32("m16n8k8.row.col.f32.tf32.tf32.f32", rd, ra, rb, rc);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    else if constexpr (OP == mma_probe_op::m_e4m3_k32)
      NUMPROBE_MMA_SYNC_F32("m16n8k32.row.col.f32.e4m3.e4m3.f32", rd, ra, rb, rc);
    else if constexpr (OP == mma_probe_op::m_e5m2_k32)
      NUMPROBE_MMA_SYNC_F32("m16n8k32.row.col.f32.e5m2.e5m2.f32", rd, ra, rb, rc);
#else
    else
      __trap();  // the host refuses fp8 below sm_89 (mma_probe_unsupported); reaching here is a bug
#endif
    for (int i = 0; i < 4; ++i) out[i] = __float_as_uint(rd[i]);
  } else if constexpr (ACC == mma_probe_acc::m_f16) {
    // C/D: reg0 = (row g, cols 2t, 2t+1), reg1 = (row g+8, same), each an f16x2.
    const float cv = __uint_as_float(cw);
    const std::uint32_t c2 = pack_f16(cv, cv);
    std::uint32_t rc[2] = {c2, c2};
    std::uint32_t rd[2] = {0, 0};
    if constexpr (OP == mma_probe_op::m_f16_k16_f16acc)
      NUMPROBE_MMA_SYNC_F16("m16n8k16.row.col.f16.f16.f16.f16", rd, ra, rb, rc);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && NUMPROBE_HAVE_FP8_F16ACC
    else if constexpr (OP == mma_probe_op::m_e4m3_k32_f16acc)
      NUMPROBE_MMA_SYNC_F16("m16n8k32.row.col.f16.e4m3.e4m3.f16", rd, ra, rb, rc);
    else if constexpr (OP == mma_probe_op::m_e5m2_k32_f16acc)
      NUMPROBE_MMA_SYNC_F16("m16n8k32.row.col.f16.e5m2.e5m2.f16", rd, ra, rb, rc);
#else
    else
      __trap();
#endif
    for (int i = 0; i < 4; ++i) out[i] = half_to_float_bits(rd[i / 2] >> (16 * (i % 2)));
  } else {
    std::uint32_t rc[4] = {cw, cw, cw, cw};
    std::uint32_t rd[4] = {0, 0, 0, 0};
    if constexpr (OP == mma_probe_op::m_s8_k32)
      NUMPROBE_MMA_SYNC_S32("m16n8k32.row.col.s32.s8.s8.s32", rd, ra, rb, rc);
    else
      NUMPROBE_MMA_SYNC_S32("m16n8k32.row.col.satfinite.s32.s8.s8.s32", rd, ra, rb, rc);
    for (int i = 0; i < 4; ++i) out[i] = rd[i];
  }
  // Every D element is the same dot product: compare with lane 0's first (bits; for floating
  // accumulators any NaN equals any NaN).
  const std::uint32_t ref = __shfl_sync(0xffffffffu, out[0], 0);
  for (int i = 0; i < 4; ++i) {
    const bool nan_pair = ACC != mma_probe_acc::m_s32 && isnan(__uint_as_float(out[i])) && isnan(__uint_as_float(ref));
    if (out[i] != ref && !nan_pair) atomicAdd(mismatches, 1u);
  }
  if (lane == 0) d[v] = out[0];
}

#undef NUMPROBE_MMA_SYNC_F32
#undef NUMPROBE_MMA_SYNC_F16
#undef NUMPROBE_MMA_SYNC_S32

template <mma_probe_op OP>
void launch(int count, const float* a, const float* b, const std::uint32_t* c, std::uint32_t* d, int k,
            unsigned* mismatches) {
  mma_probe_kernel<OP><<<count, 32>>>(a, b, c, d, k, mismatches);
}

}  // namespace

int mma_probe_k(mma_probe_op op) {
  switch (op) {
    case mma_probe_op::m_tf32_k8:
    case mma_probe_op::m_wgmma_tf32_k8:
    case mma_probe_op::m_wgmma_rs_tf32_k8: return 8;
    case mma_probe_op::m_f16_k16:
    case mma_probe_op::m_bf16_k16:
    case mma_probe_op::m_wgmma_f16_k16:
    case mma_probe_op::m_wgmma_bf16_k16:
    case mma_probe_op::m_f16_k16_f16acc:
    case mma_probe_op::m_wgmma_f16_k16_f16acc:
    case mma_probe_op::m_wgmma_rs_f16_k16:
    case mma_probe_op::m_wgmma_rs_bf16_k16: return 16;
    default: return 32;  // fp8 and s8
  }
}

mma_probe_acc mma_probe_accumulator(mma_probe_op op) { return acc_of(op); }

namespace {

bool is_wgmma(mma_probe_op op) {
  switch (op) {
    case mma_probe_op::m_wgmma_f16_k16:
    case mma_probe_op::m_wgmma_bf16_k16:
    case mma_probe_op::m_wgmma_tf32_k8:
    case mma_probe_op::m_wgmma_e4m3_k32:
    case mma_probe_op::m_wgmma_e5m2_k32:
    case mma_probe_op::m_wgmma_f16_k16_f16acc:
    case mma_probe_op::m_wgmma_e4m3_k32_f16acc:
    case mma_probe_op::m_wgmma_e5m2_k32_f16acc:
    case mma_probe_op::m_wgmma_s8_k32:
    case mma_probe_op::m_wgmma_s8_k32_sat: return true;
    default: return a_in_registers(op);
  }
}

}  // namespace

std::string mma_probe_unsupported(mma_probe_op op, int arch) {
  if (is_wgmma(op)) {
#if NUMPROBE_HAVE_WGMMA
    // wgmma is sm_90a's alone: Blackwell (sm_100+) has tcgen05 instead.
    return arch == 90 ? "" : "needs sm_90 (wgmma is Hopper's; the kernel is sm_90a code)";
#else
    (void)arch;
    return "this build has no sm_90a code (nvcc older than 12.0)";
#endif
  }
  const in_kind in = input_of(op);
  const bool fp8 = in == in_kind::e4m3 || in == in_kind::e5m2;
  if (fp8 && acc_of(op) == mma_probe_acc::m_f16 && !NUMPROBE_HAVE_FP8_F16ACC)
    return "this build's nvcc is older than 12.4 (fp8 mma.sync with an fp16 accumulator is PTX ISA 8.4)";
  const int need = fp8 ? 89 : 80;
  return arch >= need ? "" : "needs sm_" + std::to_string(need) + " or newer";
}

const char* mma_probe_instruction(mma_probe_op op) {
  switch (op) {
    case mma_probe_op::m_f16_k16: return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    case mma_probe_op::m_bf16_k16: return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case mma_probe_op::m_tf32_k8: return "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
    case mma_probe_op::m_e4m3_k32: return "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
    case mma_probe_op::m_e5m2_k32: return "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32";
    case mma_probe_op::m_wgmma_f16_k16: return "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16";
    case mma_probe_op::m_wgmma_bf16_k16: return "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16";
    case mma_probe_op::m_wgmma_tf32_k8: return "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32";
    case mma_probe_op::m_wgmma_e4m3_k32: return "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3";
    case mma_probe_op::m_wgmma_e5m2_k32: return "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2";
    case mma_probe_op::m_f16_k16_f16acc: return "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16";
    case mma_probe_op::m_e4m3_k32_f16acc: return "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16";
    case mma_probe_op::m_e5m2_k32_f16acc: return "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16";
    case mma_probe_op::m_wgmma_f16_k16_f16acc: return "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16";
    case mma_probe_op::m_wgmma_e4m3_k32_f16acc: return "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3";
    case mma_probe_op::m_wgmma_e5m2_k32_f16acc: return "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2";
    case mma_probe_op::m_s8_k32: return "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
    case mma_probe_op::m_s8_k32_sat: return "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32";
    case mma_probe_op::m_wgmma_s8_k32: return "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8";
    case mma_probe_op::m_wgmma_s8_k32_sat: return "wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.s8";
    case mma_probe_op::m_wgmma_rs_f16_k16: return "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 (A in registers)";
    case mma_probe_op::m_wgmma_rs_bf16_k16: return "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 (A in registers)";
    case mma_probe_op::m_wgmma_rs_tf32_k8: return "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 (A in registers)";
    case mma_probe_op::m_wgmma_rs_e4m3_k32: return "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 (A in registers)";
    case mma_probe_op::m_wgmma_rs_e5m2_k32: return "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 (A in registers)";
  }
  return "?";
}

mma_probe_device cuda_mma_probe_device(int ordinal) {
  int n = 0;
  NUMPROBE_GPU_CHECK(GetDeviceCount, &n);
  if (ordinal < 0 || ordinal >= n)
    throw_backend_error("--device", "device " + std::to_string(ordinal) + " not present (" + std::to_string(n) +
                                        " CUDA devices visible)");
  cudaDeviceProp p{};
  NUMPROBE_GPU_CHECK(GetDeviceProperties, &p, ordinal);
  return {ordinal, p.name, p.major * 10 + p.minor};
}

std::vector<std::uint32_t> cuda_mma_probe(int ordinal, mma_probe_op op, int count, const float* a, const float* b,
                                          const std::uint32_t* c) {
  const mma_probe_device dev = cuda_mma_probe_device(ordinal);
  if (const std::string why = mma_probe_unsupported(op, dev.arch); !why.empty())
    throw_backend_error(mma_probe_instruction(op),
                        why + "; device " + std::to_string(ordinal) + " is sm_" + std::to_string(dev.arch));
  std::vector<std::uint32_t> out(static_cast<std::size_t>(count));
  if (count == 0) return out;
  NUMPROBE_GPU_CHECK(SetDevice, ordinal);
  const int k = mma_probe_k(op);
  const std::size_t n_ab = static_cast<std::size_t>(count) * k * sizeof(float);
  const std::size_t n_c = static_cast<std::size_t>(count) * sizeof(std::uint32_t);
  float *da = nullptr, *db = nullptr;
  std::uint32_t *dc = nullptr, *dd = nullptr;
  unsigned* dm = nullptr;
  NUMPROBE_GPU_CHECK(Malloc, &da, n_ab);
  NUMPROBE_GPU_CHECK(Malloc, &db, n_ab);
  NUMPROBE_GPU_CHECK(Malloc, &dc, n_c);
  NUMPROBE_GPU_CHECK(Malloc, &dd, n_c);
  NUMPROBE_GPU_CHECK(Memcpy, da, a, n_ab, cudaMemcpyHostToDevice);
  NUMPROBE_GPU_CHECK(Memcpy, db, b, n_ab, cudaMemcpyHostToDevice);
  NUMPROBE_GPU_CHECK(Memcpy, dc, c, n_c, cudaMemcpyHostToDevice);
  NUMPROBE_GPU_CHECK(Memset, dd, 0xff, n_c);  // poison: an unwritten fp output reads NaN
  NUMPROBE_GPU_CHECK(Malloc, &dm, sizeof(unsigned));
  NUMPROBE_GPU_CHECK(Memset, dm, 0, sizeof(unsigned));
#define NUMPROBE_CASE(OP) \
  case mma_probe_op::OP: launch<mma_probe_op::OP>(count, da, db, dc, dd, k, dm); break;
  switch (op) {
    NUMPROBE_CASE(m_f16_k16)
    NUMPROBE_CASE(m_bf16_k16)
    NUMPROBE_CASE(m_tf32_k8)
    NUMPROBE_CASE(m_e4m3_k32)
    NUMPROBE_CASE(m_e5m2_k32)
    NUMPROBE_CASE(m_f16_k16_f16acc)
    NUMPROBE_CASE(m_e4m3_k32_f16acc)
    NUMPROBE_CASE(m_e5m2_k32_f16acc)
    NUMPROBE_CASE(m_s8_k32)
    NUMPROBE_CASE(m_s8_k32_sat)
    default:
#if NUMPROBE_HAVE_WGMMA
      launch_wgmma_probe(op, count, da, db, dc, dd, k, dm);
#endif
      break;
  }
#undef NUMPROBE_CASE
  check_launch(mma_probe_instruction(op));
  NUMPROBE_GPU_CHECK(DeviceSynchronize);
  NUMPROBE_GPU_CHECK(Memcpy, out.data(), dd, n_c, cudaMemcpyDeviceToHost);
  unsigned mismatches = 0;
  NUMPROBE_GPU_CHECK(Memcpy, &mismatches, dm, sizeof(unsigned), cudaMemcpyDeviceToHost);
  NUMPROBE_GPU_CHECK(Free, dm);
  NUMPROBE_GPU_CHECK(Free, da);
  NUMPROBE_GPU_CHECK(Free, db);
  NUMPROBE_GPU_CHECK(Free, dc);
  NUMPROBE_GPU_CHECK(Free, dd);
  if (mismatches != 0)
    throw_backend_error(mma_probe_instruction(op), std::to_string(mismatches) +
                                                       " accumulator elements differ from D(0,0): the probe's fragment"
                                                       " placement does not match this device (a bug in mma_probe.cu)");
  return out;
}

}  // namespace numprobe::gpu
