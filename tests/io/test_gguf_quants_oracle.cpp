// gguf-py as the oracle of the GGUF block decoders (issue 29): for each decoded type, gguf-py
// 0.19.0's gguf.quants.dequantize and numprobe::io::dequantize_blocks must give the same float32
// bits, NaNs included (payload, sign and quiet bit compared as bits). Three parts per type:
//   random   seeded random block bytes, so the f16 scales are random too (inf, NaN and
//            subnormal among them);
//   extreme  blocks built to hit the edges: every pair of f16 scale/minimum codes from a list
//            (65504, -65504, the smallest and largest subnormals, +-0, +-1, +-inf, quiet and
//            signalling NaNs), sub-block scale bytes all ones (6-bit 63, int8 127/-128) and all
//            zeros, every e8m0 (MXFP4) and every e4m3 (NVFP4) scale byte; F16 and BF16 get all
//            65,536 codes;
//   quant    a seeded normal tensor quantized by gguf.quants.quantize, where gguf-py has it.
// gguf-py is fed arrays of many blocks: NumPy picks the other operand's NaN for a + b when both
// are NaN and the array holds a single block (docs/checkpoints.md "GGUF"), never in real use.
// Runs the configured interpreter (NUMPROBE_TEST_PYTHON); skips when it lacks numpy or gguf,
// except under CI=true, where a missing oracle is a failure (issue 26).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "io_test_util.hpp"
#include "numprobe/io/gguf.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;

const std::string python = NUMPROBE_TEST_PYTHON;

bool have_python() {
  static const bool ok =
      !python.empty() &&
      std::system(("'" + python + "' -c 'import numpy, gguf' >/dev/null 2>&1").c_str()) == 0;
  if (!ok) {
    const char* ci = std::getenv("CI");
    EXPECT_FALSE(ci != nullptr && std::string(ci) == "true")
        << "CI=true: " << (python.empty() ? "no python3" : python) << " lacks numpy/gguf";
  }
  return ok;
}

// Writes, for each type NAME named on its command line: NAME.bin (block bytes), NAME.f32
// (gguf-py's floats) and NAME.parts (one line per part: its name and element count). Each type
// has its own seeded stream, so its data do not depend on which other types run.
constexpr const char* k_script = R"(
import itertools, sys, warnings
import numpy as np
warnings.simplefilter('ignore')
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

H = [0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x3C00, 0xBC00,
     0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE01]
# Byte offsets of each type's f16 fields (scale, then minimum), and its sub-block scale bytes.
F16 = {'Q4_0': [0], 'Q4_1': [0, 2], 'Q5_0': [0], 'Q5_1': [0, 2], 'Q8_0': [0],
       'Q2_K': [80, 82], 'Q3_K': [108], 'Q4_K': [0, 2], 'Q5_K': [0, 2], 'Q6_K': [208],
       'IQ4_NL': [0], 'IQ4_XS': [0]}
SUB = {'Q2_K': (0, 16), 'Q3_K': (96, 12), 'Q4_K': (4, 12), 'Q5_K': (4, 12), 'Q6_K': (192, 16),
       'IQ4_XS': (2, 6)}
SUB_BYTES = {'Q6_K': [0x7F, 0x80, 0x00]}
TYPES = ['F32', 'F16', 'BF16', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q2_K', 'Q3_K', 'Q4_K',
         'Q5_K', 'Q6_K', 'IQ4_NL', 'IQ4_XS', 'MXFP4', 'NVFP4']

def rand_blocks(n, ts):
    return rng.integers(0, 256, (n, ts), dtype=np.uint8)

def set_f16(blocks, off, codes):
    blocks[:, off:off + 2] = np.asarray(codes, dtype='<u2').reshape(-1, 1).view(np.uint8)

def extremes(name, bs, ts):
    if name in ('F16', 'BF16'):
        return np.arange(65536, dtype='<u2').view(np.uint8).reshape(-1, 2)
    if name == 'F32':
        codes = [0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFC00001, 0x00000001,
                 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0, 0x80000000]
        return np.array(codes, dtype='<u4').view(np.uint8).reshape(-1, 4)
    if name == 'MXFP4':
        b = rand_blocks(256, ts)
        b[:, 0] = np.arange(256)
        return b
    if name == 'NVFP4':
        b = rand_blocks(64, ts)
        b[:, :4] = np.arange(256, dtype=np.uint8).reshape(64, 4)
        return b
    fields = F16[name]
    combos = list(itertools.product(H, repeat=len(fields)))
    b = rand_blocks(len(combos), ts)
    for k, off in enumerate(fields):
        set_f16(b, off, [c[k] for c in combos])
    parts = [b]
    if name in SUB:
        off, n = SUB[name]
        for byte in SUB_BYTES.get(name, [0xFF, 0x00]):
            s = rand_blocks(len(H), ts)
            for k, f in enumerate(fields):
                set_f16(s, f, np.roll(H, k))
            s[:, off:off + n] = byte
            parts.append(s)
    return np.concatenate(parts)

def quantized(name, bs):
    data = rng.standard_normal((16, 512)).astype(np.float32)
    data *= np.float32(10.0) ** rng.integers(-4, 4, (16, 1)).astype(np.float32)
    try:
        q = quantize(data, T[name])
    except NotImplementedError:
        return None
    return np.ascontiguousarray(q).view(np.uint8).reshape(-1), dequantize(q, T[name])

for name in sys.argv[1:]:
    rng = np.random.default_rng([29, TYPES.index(name)])
    bs, ts = GGML_QUANT_SIZES[T[name]]
    n_random = max(64, 8192 // bs)
    parts = [('random', rand_blocks(n_random, ts)), ('extreme', extremes(name, bs, ts))]
    raw, floats, lines = [], [], []
    for part, blocks in parts:
        assert blocks.shape[0] > 1  # a lone block takes NumPy's other NaN path
        y = dequantize(blocks, T[name])
        raw.append(blocks.reshape(-1)); floats.append(np.asarray(y, dtype=np.float32).reshape(-1))
        lines.append(f'{part} {floats[-1].size}')
    rt = quantized(name, bs)
    if rt is not None:
        raw.append(rt[0]); floats.append(np.asarray(rt[1], dtype=np.float32).reshape(-1))
        lines.append(f'quant {floats[-1].size}')
    np.concatenate(raw).tofile(f'{name}.bin')
    np.concatenate(floats).astype('<f4').tofile(f'{name}.f32')
    with open(f'{name}.parts', 'w') as f:
        f.write('\n'.join(lines) + '\n')
)";

// Runs the script for one type in DIR; true when it succeeded.
bool run_oracle(const fs::path& dir, const std::string& name) {
  std::ofstream(dir / "oracle.py") << k_script;
  const std::string cmd = "cd '" + dir.string() + "' && '" + python + "' oracle.py " + name;
  return std::system(cmd.c_str()) == 0;
}

std::vector<std::uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct type_case {
  ggml_type type;
  const char* name;
};

const type_case k_cases[] = {
    {ggml_type::m_f32, "F32"},     {ggml_type::m_f16, "F16"},       {ggml_type::m_bf16, "BF16"},
    {ggml_type::m_q4_0, "Q4_0"},   {ggml_type::m_q4_1, "Q4_1"},     {ggml_type::m_q5_0, "Q5_0"},
    {ggml_type::m_q5_1, "Q5_1"},   {ggml_type::m_q8_0, "Q8_0"},     {ggml_type::m_q2_k, "Q2_K"},
    {ggml_type::m_q3_k, "Q3_K"},   {ggml_type::m_q4_k, "Q4_K"},     {ggml_type::m_q5_k, "Q5_K"},
    {ggml_type::m_q6_k, "Q6_K"},   {ggml_type::m_iq4_nl, "IQ4_NL"}, {ggml_type::m_iq4_xs, "IQ4_XS"},
    {ggml_type::m_mxfp4, "MXFP4"}, {ggml_type::m_nvfp4, "NVFP4"},
};

class gguf_quants_oracle : public ::testing::TestWithParam<type_case> {};

TEST_P(gguf_quants_oracle, bit_equal_to_gguf_py) {
  if (!have_python()) GTEST_SKIP() << python << " with numpy and gguf not available";
  const std::string name = GetParam().name;
  const auto dir = test::scratch_dir();
  ASSERT_TRUE(run_oracle(dir, name)) << "the gguf-py oracle script failed";
  const auto raw = read_all(dir / (name + ".bin"));
  const auto want_bytes = read_all(dir / (name + ".f32"));
  ASSERT_EQ(want_bytes.size() % 4, 0u);
  std::vector<std::uint32_t> want(want_bytes.size() / 4);
  std::memcpy(want.data(), want_bytes.data(), want_bytes.size());

  std::vector<float> got(want.size(), std::bit_cast<float>(0x7FBADBADu));  // poison
  dequantize_blocks(GetParam().type, std::as_bytes(std::span<const std::uint8_t>(raw)), got);

  // The parts, for the report and to name where a difference lies.
  std::vector<std::pair<std::string, std::size_t>> parts;
  {
    std::ifstream f(dir / (name + ".parts"));
    std::string part;
    std::size_t n = 0;
    while (f >> part >> n) parts.emplace_back(part, n);
  }
  std::size_t total = 0;
  for (const auto& p : parts) total += p.second;
  ASSERT_EQ(total, want.size());

  std::size_t mismatches = 0;
  std::size_t nans = 0;
  std::size_t start = 0;
  std::ostringstream summary;
  summary << name << ":";
  for (const auto& [part, n] : parts) {
    for (std::size_t i = start; i < start + n; ++i) {
      const auto g = std::bit_cast<std::uint32_t>(got[i]);
      if (std::isnan(std::bit_cast<float>(want[i]))) ++nans;
      if (g != want[i] && ++mismatches <= 8) {
        ADD_FAILURE() << name << " " << part << " element " << i - start << " (block "
                      << (i - start) / static_cast<std::size_t>(info(GetParam().type).block_size)
                      << "): got 0x" << std::hex << g << " (" << got[i] << "), gguf-py 0x"
                      << want[i] << std::dec << " (" << std::bit_cast<float>(want[i]) << ")";
      }
    }
    summary << " " << part << " " << n;
    start += n;
  }
  summary << " elements (" << nans << " NaN), " << mismatches << " differ";
  std::cout << summary.str() << "\n";
  RecordProperty("elements", static_cast<int>(total));
  RecordProperty("nan_elements", static_cast<int>(nans));
  EXPECT_EQ(mismatches, 0u) << summary.str();
}

INSTANTIATE_TEST_SUITE_P(types, gguf_quants_oracle, ::testing::ValuesIn(k_cases),
                         [](const auto& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace numprobe::io
