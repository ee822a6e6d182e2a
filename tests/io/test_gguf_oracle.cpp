// gguf-py as the oracle for the GGUF parser (issue 29): a file its GGUFWriter writes (every
// metadata value type, arrays of strings, a custom alignment, plain and quantized tensors) must
// give the metadata, tensor infos, data offsets and bytes its GGUFReader sees; and the type
// table must match its GGML_QUANT_SIZES.
// Runs the configured interpreter (NUMPROBE_TEST_PYTHON: CMake's Python3_EXECUTABLE, the test
// venv under scripts/test.sh). Skips when it lacks gguf, except under CI=true, where a missing
// oracle is a failure (issue 26).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io_test_util.hpp"
#include "numprobe/io/gguf.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;

const std::string python = NUMPROBE_TEST_PYTHON;

bool have_gguf() {
  static const bool ok =
      !python.empty() &&
      std::system(("'" + python + "' -c 'import gguf, numpy' >/dev/null 2>&1").c_str()) == 0;
  if (!ok) {
    const char* ci = std::getenv("CI");
    EXPECT_FALSE(ci != nullptr && std::string(ci) == "true")
        << "CI=true: " << (python.empty() ? "no python3" : python) << " lacks gguf";
  }
  return ok;
}

int run_python(const fs::path& dir, const std::string& script) {
  const fs::path py = dir / "oracle.py";
  std::ofstream(py) << script;
  const std::string cmd = "cd '" + dir.string() + "' && '" + python + "' '" + py.string() + "'";
  return std::system(cmd.c_str());
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string hex(std::string_view s) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out = "h";
  for (const char c : s) {
    out += k_hex[static_cast<unsigned char>(c) >> 4];
    out += k_hex[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

// A value as the script prints it: strings as "h" + hex of the UTF-8, floats as Python's repr
// of the double (read back exactly by strtod), integers and bools as integers.
bool same(const gguf_value& v, const std::string& want) {
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return hex(x) == want;
        } else if constexpr (std::is_same_v<T, double>) {
          return x == std::strtod(want.c_str(), nullptr);
        } else if constexpr (std::is_same_v<T, bool>) {
          return want == (x ? "1" : "0");
        } else {
          return std::to_string(x) == want;
        }
      },
      v.scalar);
}

const char* const k_script = R"(
import numpy as np
import gguf
from gguf import GGUFWriter, GGUFReader, GGUFValueType as V, GGMLQuantizationType as Q
rng = np.random.default_rng(29)
w = GGUFWriter('o.gguf', 'llama')
w.add_custom_alignment(64)
w.add_uint8('t.u8', 200)
w.add_int8('t.i8', -5)
w.add_uint16('t.u16', 60000)
w.add_int16('t.i16', -30000)
w.add_uint32('t.u32', 4000000000)
w.add_int32('t.i32', -2000000000)
w.add_float32('t.f32', 0.1)
w.add_bool('t.bool', True)
w.add_string('t.str', 'h\u00e9llo w\u00f6rld')
w.add_uint64('t.u64', 2**63 + 5)
w.add_int64('t.i64', -2**62)
w.add_float64('t.f64', 1 / 3)
w.add_array('a.str', ['<unk>', '<s>', '\u2581the', ''])
w.add_array('a.i32', [1, -2, 3])
w.add_array('a.f32', [0.5, -1.25, 3.0e-8])
w.add_array('a.bool', [True, False])
w.add_key_value('a.u64', [1, 2**64 - 1], V.ARRAY, sub_type=V.UINT64)
w.add_key_value('a.u8', [0, 255, 7], V.ARRAY, sub_type=V.UINT8)
w.add_key_value('a.f64', [1e300, -0.5], V.ARRAY, sub_type=V.FLOAT64)
w.add_tensor('a.f32', rng.standard_normal((3, 5)).astype(np.float32))
w.add_tensor('b.f16', rng.standard_normal((2, 3, 4)).astype(np.float16))
w.add_tensor('c.q8_0', rng.integers(0, 256, (4, 2 * 34), dtype=np.uint8), raw_dtype=Q.Q8_0)
w.add_tensor('d.q4_k', rng.integers(0, 256, (2, 144), dtype=np.uint8), raw_dtype=Q.Q4_K)
w.add_tensor('e.i32', rng.integers(-9, 9, (7,), dtype=np.int32))
w.add_tensor('f.iq2_xxs', rng.integers(0, 256, (1, 66), dtype=np.uint8), raw_dtype=Q.IQ2_XXS)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

def enc(v):
    if isinstance(v, str):
        return 'h' + v.encode('utf-8').hex()
    if isinstance(v, float):
        return repr(v)
    return str(int(v))

r = GGUFReader('o.gguf')
with open('o.txt', 'w') as f:
    f.write(f'A {int(r.alignment)} {int(r.data_offset)}\n')
    for k, fld in r.fields.items():
        if k.startswith('GGUF.'):
            continue
        c = fld.contents()
        vals = c if isinstance(c, list) else [c]
        types = ','.join(str(int(t)) for t in fld.types)
        f.write(' '.join(['K', k, types, str(len(vals))] + [enc(v) for v in vals]) + '\n')
    for i, t in enumerate(r.tensors):
        dims = ','.join(str(int(d)) for d in t.shape)
        f.write(f'T {t.name} {int(t.tensor_type)} {dims} {int(t.n_elements)} {int(t.n_bytes)} {int(t.data_offset)}\n')
        open(f't{i}.bin', 'wb').write(t.data.tobytes())
    for q in Q:
        b, s = gguf.GGML_QUANT_SIZES[q]
        f.write(f'Q {int(q)} {q.name} {b} {s}\n')
)";

TEST(gguf_oracle, files_gguf_py_writes_read_as_its_reader_sees_them) {
  if (!have_gguf()) GTEST_SKIP() << python << " with gguf not available";
  const auto dir = test::scratch_dir();
  ASSERT_EQ(run_python(dir, k_script), 0);
  const auto f = gguf_file::open(dir / "o.gguf");
  EXPECT_EQ(f.version(), 3u);
  std::ifstream in(dir / "o.txt");
  std::size_t keys = 0;
  std::size_t tensors = 0;
  std::size_t types = 0;
  for (std::string line; std::getline(in, line);) {
    const auto w = split(line);
    ASSERT_FALSE(w.empty());
    SCOPED_TRACE(line);
    if (w[0] == "A") {
      EXPECT_EQ(std::to_string(f.alignment()), w[1]);
      EXPECT_EQ(std::to_string(f.data_start()), w[2]);
    } else if (w[0] == "K") {
      ASSERT_GE(w.size(), 4u);
      ASSERT_LT(keys, f.metadata().size());
      const auto& [key, v] = f.metadata()[keys++];  // the same order
      EXPECT_EQ(key, w[1]);
      const auto n = std::stoull(w[3]);
      ASSERT_EQ(w.size(), 4 + n);
      if (v.type == gguf_value_type::m_array) {
        EXPECT_EQ(w[2], "9," + std::to_string(static_cast<std::uint32_t>(v.array_type)));
        ASSERT_EQ(v.array.size(), n);
        for (std::size_t i = 0; i < n; ++i) EXPECT_TRUE(same(v.array[i], w[4 + i])) << i;
      } else {
        EXPECT_EQ(w[2], std::to_string(static_cast<std::uint32_t>(v.type)));
        ASSERT_EQ(n, 1u);
        EXPECT_TRUE(same(v, w[4])) << v.summary();
      }
    } else if (w[0] == "T") {
      ASSERT_EQ(w.size(), 7u);
      ASSERT_LT(tensors, f.tensors().size());
      const auto& t = f.tensors()[tensors];
      EXPECT_EQ(t.name, w[1]);
      EXPECT_EQ(std::to_string(static_cast<std::uint32_t>(t.type)), w[2]);
      std::string dims;
      for (const auto d : t.ne) dims += (dims.empty() ? "" : ",") + std::to_string(d);
      EXPECT_EQ(dims, w[3]);  // GGUFReader's shape is ne, innermost first
      EXPECT_EQ(std::to_string(t.elements()), w[4]);
      EXPECT_EQ(std::to_string(t.bytes), w[5]);
      EXPECT_EQ(std::to_string(f.data_start() + t.offset), w[6]);
      std::ifstream bin(dir / ("t" + std::to_string(tensors) + ".bin"), std::ios::binary);
      const std::string want((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
      const auto got = f.data(t);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
      ++tensors;
    } else if (w[0] == "Q") {
      ASSERT_EQ(w.size(), 5u);
      const auto t = find_ggml_type(static_cast<std::uint32_t>(std::stoul(w[1])));
      ASSERT_TRUE(t.has_value()) << "gguf-py knows type " << w[1] << " (" << w[2] << ")";
      EXPECT_EQ(t->name, w[2]);
      EXPECT_EQ(std::to_string(t->block_size), w[3]);
      EXPECT_EQ(std::to_string(t->type_size), w[4]);
      ++types;
    }
  }
  EXPECT_EQ(keys, f.metadata().size());
  EXPECT_EQ(tensors, f.tensors().size());
  EXPECT_EQ(tensors, 6u);
  EXPECT_EQ(types, 34u);  // every type gguf-py defines, and the table has no other
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.find("c.q8_0")->ne, (std::vector<std::uint64_t>{64, 4}));
  EXPECT_EQ(f.find("d.q4_k")->shape(), (std::vector<std::uint64_t>{2, 256}));
}

}  // namespace
}  // namespace numprobe::io
