/*
 * numprobe kernel plugin ABI (`--backend plugin:lib.so`).
 *
 * A plugin is a shared library exporting plain C functions. numprobe owns every buffer and the
 * stream: it allocates the inputs and outputs, passes raw pointers with shapes, strides (in
 * elements), dtypes and scales, and the plugin only computes. Nothing crosses the boundary but
 * C structs of fixed layout, so a plugin can be built with any compiler or language.
 *
 * Required exports:
 *   uint32_t numprobe_kernel_abi_version(void);          return NUMPROBE_KERNEL_ABI_VERSION
 *   int      numprobe_kernel_capabilities(numprobe_capabilities*);
 *   int      numprobe_attention_forward(const numprobe_attention_params*);
 * Optional exports (required when the capability bit says the op is there):
 *   int      numprobe_attention_decode(const numprobe_decode_params*);   NUMPROBE_OP_DECODE
 *   int      numprobe_quantize(const numprobe_quantize_params*);          NUMPROBE_OP_QUANTIZE
 *   const char* numprobe_kernel_last_error(void);   message for the last non-zero status
 *   int      numprobe_attention_forward_variant(const numprobe_attention_params*,
 *                                               const numprobe_kernel_variant*);
 *                                                    NUMPROBE_FEATURE_VARIANTS (see below)
 *   int      numprobe_attention_decode_variant(const numprobe_decode_params*,
 *                                              const numprobe_decode_variant*);
 *                                                    NUMPROBE_FEATURE_DECODE_VARIANTS
 *
 * Additions within ABI version 1 (no struct above changed; a plugin built before them loads
 * and runs unchanged, and numprobe never calls an entry a plugin did not advertise):
 *   - NUMPROBE_FEATURE_VARIANTS and numprobe_attention_forward_variant: the forward call with
 *     a kernel variant (a plugin-defined variant bit set, e.g. an injected fault, and a
 *     requested tile shape). numprobe's built-in GPU kernels take their --inject faults (the
 *     GPU bits of numprobe's fault table) and --tile through it.
 *   - numprobe_kernel_table: the exports as one table of function pointers, for a kernel
 *     library linked into numprobe itself. numprobe registers its built-in GPU kernels from
 *     such a table (no dlopen) and checks it exactly as it checks a loaded plugin.
 *   - NUMPROBE_FEATURE_DECODE_VARIANTS and numprobe_attention_decode_variant: the split-KV
 *     decode with the serving knobs numprobe_decode_params has no field for (T queries per
 *     sequence with a causal or window mask, a split size, an e4m3fn KV cache with per-tensor
 *     or per-KV-head scales, FP8 P, the accumulator promotion, decode faults, the per-split LSE).
 *     `--backend cuda --decode` launches its kernels through it. The table's `decode_variant`
 *     entry is appended at its end: numprobe reads it only when the table's struct_size covers
 *     it, so a table built before it still loads (without the entry).
 *
 * Loading: numprobe dlopen()s the library, calls numprobe_kernel_abi_version() and refuses any
 * value other than its own NUMPROBE_KERNEL_ABI_VERSION, then reads the capabilities and refuses
 * a case they do not cover (dtype, mask, head_dim, softcap) before calling the plugin. Every
 * refusal names the plugin file and the function.
 *
 * Memory. `memory` in the capabilities says where buffers must live:
 *   NUMPROBE_MEMORY_HOST: plain host pointers (CPU plugins).
 *   NUMPROBE_MEMORY_CUDA / NUMPROBE_MEMORY_HIP: numprobe allocates device memory on the device
 *     selected with --device (cudaMalloc / hipMalloc), copies the inputs there, passes device
 *     pointers and its own cudaStream_t / hipStream_t in `stream`, and synchronises the stream
 *     after the call before reading the outputs back. The plugin must enqueue all its work on
 *     `stream` and must not synchronise the device or allocate persistent memory of its own.
 *     (The built-in CUDA kernels adopt this ABI through the same structs.)
 *
 * Layouts. Strides are in elements, innermost last; numprobe passes dense C-order tensors
 * today but plugins must honour the strides they are given.
 *   attention forward: q [B*T, Hq, D], k and v [B*S, Hkv, D] (batch concatenated along the
 *   first axis, flat row b*T + t), o [B*T, Hq, D], lse [B*T, Hq] (natural log; -inf and
 *   o = 0 for a fully masked row; lse.data may be NULL when numprobe does not want it).
 *   Causal and window masks are bottom-right aligned: query t sits at absolute position
 *   S - T + t. GQA: query head h reads KV head h / (Hq / Hkv).
 *
 * Status codes: NUMPROBE_STATUS_OK, or one of the others with a message available from
 * numprobe_kernel_last_error() when exported.
 */
#ifndef NUMPROBE_KERNEL_ABI_H
#define NUMPROBE_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Plugins are compiled against this value and return it from numprobe_kernel_abi_version().
 * Overriding it (-DNUMPROBE_KERNEL_ABI_VERSION=N) builds a plugin numprobe must refuse; the
 * tests do exactly that. Bump it on any change of a struct layout or a function signature. */
#ifndef NUMPROBE_KERNEL_ABI_VERSION
#define NUMPROBE_KERNEL_ABI_VERSION 1u
#endif

#if defined(_WIN32)
#define NUMPROBE_PLUGIN_EXPORT __declspec(dllexport)
#else
#define NUMPROBE_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#define NUMPROBE_MAX_DIMS 4

typedef enum numprobe_status {
  NUMPROBE_STATUS_OK = 0,
  NUMPROBE_STATUS_UNSUPPORTED = 1, /* the plugin does not implement this case: a declared
                                      refusal, reported as "unsupported" (audit: the class is
                                      not-applicable; drift: the point is skipped), never an
                                      error. Cases outside numprobe_capabilities (masks,
                                      softcap, batch, max head_dim) are refused the same way
                                      without a call. */
  NUMPROBE_STATUS_INVALID = 2,     /* arguments inconsistent */
  NUMPROBE_STATUS_FAILED = 3       /* the kernel or the device failed */
} numprobe_status;

/* Element dtypes of buffers. Bit (1u << dtype) is used in capability masks. */
typedef enum numprobe_dtype {
  NUMPROBE_DTYPE_F32 = 0,
  NUMPROBE_DTYPE_F16 = 1,
  NUMPROBE_DTYPE_BF16 = 2,
  NUMPROBE_DTYPE_F64 = 3,
  NUMPROBE_DTYPE_E4M3FN = 4,
  NUMPROBE_DTYPE_E5M2 = 5,
  NUMPROBE_DTYPE_E4M3FNUZ = 6,
  NUMPROBE_DTYPE_E5M2FNUZ = 7,
  NUMPROBE_DTYPE_U8 = 8, /* packed codes (fp4x2, int4x2) and e8m0 scales */
  NUMPROBE_DTYPE_I32 = 9
} numprobe_dtype;

typedef enum numprobe_mask {
  NUMPROBE_MASK_NONE = 0,
  NUMPROBE_MASK_CAUSAL = 1,          /* bottom-right: key j visible iff j <= S - T + t */
  NUMPROBE_MASK_CAUSAL_TOP_LEFT = 2, /* key j visible iff j <= t */
  NUMPROBE_MASK_WINDOW = 3           /* bottom-right sliding window: keys in (pos - W, pos] */
} numprobe_mask;

typedef enum numprobe_memory {
  NUMPROBE_MEMORY_HOST = 0,
  NUMPROBE_MEMORY_CUDA = 1,
  NUMPROBE_MEMORY_HIP = 2
} numprobe_memory;

/* Operation bits of numprobe_capabilities::ops. */
#define NUMPROBE_OP_ATTENTION_FORWARD 0x1u
#define NUMPROBE_OP_DECODE 0x2u
#define NUMPROBE_OP_QUANTIZE 0x4u

/* Feature bits of numprobe_capabilities::features. */
#define NUMPROBE_FEATURE_SOFTCAP 0x1u /* honours softcap > 0 */
#define NUMPROBE_FEATURE_LSE 0x2u     /* writes lse when lse.data != NULL */
#define NUMPROBE_FEATURE_BATCH 0x4u   /* accepts batch > 1 */
#define NUMPROBE_FEATURE_VARIANTS 0x8u /* exports numprobe_attention_forward_variant */
#define NUMPROBE_FEATURE_DECODE_VARIANTS 0x10u /* exports numprobe_attention_decode_variant */

typedef struct numprobe_tensor {
  void* data;                         /* host or device pointer, see `memory` */
  int32_t dtype;                      /* numprobe_dtype */
  int32_t ndim;
  int64_t shape[NUMPROBE_MAX_DIMS];
  int64_t strides[NUMPROBE_MAX_DIMS]; /* in elements */
  float scale;                        /* dequantization scale (value = code * scale); 1 if none */
} numprobe_tensor;

typedef struct numprobe_capabilities {
  uint32_t struct_size;   /* set by numprobe to sizeof(numprobe_capabilities) before the call */
  uint32_t abi_version;   /* the plugin fills NUMPROBE_KERNEL_ABI_VERSION */
  const char* name;       /* short name, static storage */
  const char* description;
  uint32_t ops;           /* NUMPROBE_OP_* */
  uint32_t features;      /* NUMPROBE_FEATURE_* */
  uint32_t input_dtypes;  /* bit (1u << numprobe_dtype) for q, k, v */
  uint32_t output_dtypes; /* bit (1u << numprobe_dtype) for o (lse is always f32) */
  uint32_t masks;         /* bit (1u << numprobe_mask) */
  int32_t memory;         /* numprobe_memory */
  int32_t tile_q;         /* query tile Bq of the kernel (0: opaque) */
  int32_t tile_k;         /* key tile Bk of the kernel (0: opaque) */
  int64_t max_head_dim;   /* 0: any */
} numprobe_capabilities;

typedef struct numprobe_attention_params {
  uint32_t struct_size; /* sizeof(numprobe_attention_params) */
  int64_t batch, queries, seq, heads, kv_heads, head_dim; /* B, T, S, Hq, Hkv, D */
  double scale;         /* softmax scale applied to q.k (already resolved; never 0) */
  double softcap;       /* 0: off; else logits -> softcap * tanh(logits / softcap) */
  int32_t mask;         /* numprobe_mask */
  int64_t window;       /* W for NUMPROBE_MASK_WINDOW */
  int32_t case_dtype;   /* the dtype the case's inputs are exactly representable in */
  numprobe_tensor q, k, v, o, lse;
  int32_t memory;       /* numprobe_memory of every pointer above */
  int32_t device;       /* device ordinal */
  void* stream;         /* cudaStream_t / hipStream_t; NULL for host */
} numprobe_attention_params;

/* Split-KV decode: one query per sequence against a KV cache, split in `num_splits` chunks
 * merged with the log-sum-exp rule. q [B, Hq, D]; k, v [B, S_max, Hkv, D]; seq_lens [B] (i32);
 * o [B, Hq, D]; lse [B, Hq]. */
typedef struct numprobe_decode_params {
  uint32_t struct_size;
  int64_t batch, max_seq, heads, kv_heads, head_dim;
  int64_t num_splits; /* 0: the plugin's choice */
  double scale, softcap;
  numprobe_tensor q, k, v, seq_lens, o, lse;
  int32_t memory;
  int32_t device;
  void* stream;
} numprobe_decode_params;

/* Block-scaled quantization of a [rows, cols] tensor along cols. `scheme` names the scheme as
 * numprobe prints it ("nvfp4", "mxfp4", "mxfp8_e4m3", "fp8_block128", ...). codes and scales are
 * written by the plugin; scales.dtype says how scales are stored (f32, e4m3fn, u8 for e8m0). */
typedef struct numprobe_quantize_params {
  uint32_t struct_size;
  const char* scheme;
  int64_t rows, cols, block;
  numprobe_tensor input, codes, scales;
  float tensor_scale; /* NVFP4 per-tensor scale computed by numprobe; 0 when unused */
  int32_t memory;
  int32_t device;
  void* stream;
} numprobe_quantize_params;

/* A kernel variant for numprobe_attention_forward_variant. variant 0 and tile 0x0 are the
 * kernel numprobe_attention_forward runs. A variant or tile the plugin does not have is refused
 * with NUMPROBE_STATUS_UNSUPPORTED (and a message), never silently replaced. */
typedef struct numprobe_kernel_variant {
  uint32_t struct_size; /* sizeof(numprobe_kernel_variant) */
  uint32_t variant;     /* plugin-defined bits; numprobe's GPU kernels: the fault table's GPU bits */
  int32_t tile_q;       /* requested query/key tile of the kernel; 0 and 0: the plugin's default */
  int32_t tile_k;
} numprobe_kernel_variant;

/* How a decode variant stores the K/V cache (numprobe_decode_variant::kv_storage). */
typedef enum numprobe_kv_storage {
  NUMPROBE_KV_INPUT = 0,          /* k, v in q's dtype */
  NUMPROBE_KV_E4M3FN_TENSOR = 1,  /* k, v e4m3fn codes; value = code * scale[0] (fp32) */
  NUMPROBE_KV_E4M3FN_HEAD = 2     /* k, v e4m3fn codes; value = code * scale[kv head] (fp32) */
} numprobe_kv_storage;

/* A decode variant for numprobe_attention_decode_variant. A zero-initialised struct with
 * struct_size set asks for what numprobe_attention_decode computes: one query per sequence, no
 * mask, K/V in q's dtype, fp32 P and accumulation, no fault. Anything the plugin does not have (a variant bit, a storage, a combination) is
 * refused with NUMPROBE_STATUS_UNSUPPORTED and a message, never silently replaced.
 *
 * With a variant, the decode params' layouts gain the T queries of each sequence (batch
 * concatenated along the first axis, flat row b*T + t): q and o [B*T, Hq, D], lse [B*T, Hq];
 * k, v stay [B, max_seq, Hkv, D]. Query t of sequence b sits at absolute position
 * seq_lens[b] - T + t (bottom-right alignment, as the forward's masks). seq_lens.data may be
 * NULL: every sequence holds max_seq keys (no read-back of the lengths).
 * Splits: keys cut at multiples of the chunk, split_size when > 0 (then num_splits is 0 or
 * ceil(max_seq / split_size)), else ceil(max_seq / num_splits) (num_splits 0: the plugin's
 * choice). A split with no visible key has LSE_i = -inf and is skipped by the merge. */
typedef struct numprobe_decode_variant {
  uint32_t struct_size;    /* sizeof(numprobe_decode_variant) */
  uint32_t variant;        /* plugin-defined bits; numprobe's GPU kernels: the fault table's GPU
                              bits of the decode kernel (gqa-mod, index-wrap, empty-split-nan) */
  int64_t queries;         /* T new queries per sequence (0 reads as 1) */
  int32_t mask;            /* numprobe_mask over each sequence's seq_lens[b] keys */
  int32_t kv_storage;      /* numprobe_kv_storage */
  int64_t window;          /* W for NUMPROBE_MASK_WINDOW (>= 1): keys in (pos - W, pos] */
  int64_t split_size;      /* > 0: keys per split; 0: from num_splits */
  numprobe_tensor k_scale; /* e4m3fn storage: f32 [1] (per tensor) or [Hkv] (per KV head), same
                              memory as the other pointers; k.scale and v.scale are not read */
  numprobe_tensor v_scale;
  int32_t p_e4m3;          /* 1: P * p_prescale rounded to e4m3fn (RNE, saturating) and divided
                              back for P.V only (the row sum l keeps the fp32 P) */
  float p_prescale;        /* finite and > 0 when p_e4m3 */
  int32_t acc_promote;     /* > 0: O accumulated with acc_mantissa fraction bits (truncated) and
                              added into an fp32 accumulator every acc_promote key tiles (the fp8
                              MMA accumulator); 0: fp32 accumulation */
  int32_t acc_mantissa;    /* 1..23, read when acc_promote > 0 */
  numprobe_tensor split_lse; /* f32 [splits, B*T, Hq]: each split's LSE_i (natural log, -inf for
                                an empty split); data NULL when not wanted */
  numprobe_tensor workspace; /* f32 [splits, B*T, Hq, D], dense: the split partials O_i, which the
                                call overwrites (numprobe poisons it with NaN beforehand, outside
                                its timing); data NULL: the plugin's own scratch */
} numprobe_decode_variant;

typedef uint32_t (*numprobe_kernel_abi_version_fn)(void);
typedef int (*numprobe_kernel_capabilities_fn)(numprobe_capabilities*);
typedef int (*numprobe_attention_forward_fn)(const numprobe_attention_params*);
typedef int (*numprobe_attention_decode_fn)(const numprobe_decode_params*);
typedef int (*numprobe_quantize_fn)(const numprobe_quantize_params*);
typedef const char* (*numprobe_kernel_last_error_fn)(void);
typedef int (*numprobe_attention_forward_variant_fn)(const numprobe_attention_params*,
                                                     const numprobe_kernel_variant*);
typedef int (*numprobe_attention_decode_variant_fn)(const numprobe_decode_params*,
                                                    const numprobe_decode_variant*);

/* The exports of a kernel library as one table (a library linked into numprobe; see the
 * additions above). Optional entries are NULL when absent; the rules on them are the exports'.
 * Entries are only ever appended: a reader takes an entry only when struct_size reaches past
 * it, so a table compiled before an entry was added still loads, without it. */
typedef struct numprobe_kernel_table {
  uint32_t struct_size; /* sizeof(numprobe_kernel_table) */
  numprobe_kernel_abi_version_fn abi_version;             /* required */
  numprobe_kernel_capabilities_fn capabilities;           /* required */
  numprobe_attention_forward_fn attention_forward;        /* required */
  numprobe_attention_decode_fn attention_decode;          /* NUMPROBE_OP_DECODE */
  numprobe_quantize_fn quantize;                          /* NUMPROBE_OP_QUANTIZE */
  numprobe_kernel_last_error_fn last_error;               /* optional */
  numprobe_attention_forward_variant_fn forward_variant;  /* NUMPROBE_FEATURE_VARIANTS */
  numprobe_attention_decode_variant_fn decode_variant;    /* NUMPROBE_FEATURE_DECODE_VARIANTS;
                                                             appended (see struct_size) */
} numprobe_kernel_table;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NUMPROBE_KERNEL_ABI_H */
