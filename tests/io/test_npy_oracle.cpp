// numpy as the oracle for .npy: files numpy writes (header versions 1, 2 and 3, ml_dtypes
// types included) must read exactly, and files we write must read exactly in numpy.
// Runs the configured interpreter (NUMPROBE_TEST_PYTHON: CMake's Python3_EXECUTABLE, the test
// venv under scripts/test.sh). Skips when it lacks numpy or ml_dtypes, except under CI=true,
// where a missing oracle is a failure (issue 26).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "io_test_util.hpp"
#include "numprobe/io/npy.hpp"

namespace numprobe::io {
namespace {

namespace fs = std::filesystem;

const std::string python = NUMPROBE_TEST_PYTHON;

bool have_python() {
  static const bool ok =
      !python.empty() &&
      std::system(("'" + python + "' -c 'import numpy, ml_dtypes' >/dev/null 2>&1").c_str()) == 0;
  if (!ok) {
    const char* ci = std::getenv("CI");
    EXPECT_FALSE(ci != nullptr && std::string(ci) == "true")
        << "CI=true: " << (python.empty() ? "no python3" : python) << " lacks numpy/ml_dtypes";
  }
  return ok;
}

int run_python(const fs::path& dir, const std::string& script) {
  const fs::path py = dir / "oracle.py";
  std::ofstream(py) << script;
  const std::string cmd = "cd '" + dir.string() + "' && '" + python + "' '" + py.string() + "'";
  return std::system(cmd.c_str());
}

std::vector<double> read_f64(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<double> out(b.size() / 8);
  std::memcpy(out.data(), b.data(), out.size() * 8);
  return out;
}

void expect_same_values(const std::vector<double>& got, const std::vector<double>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]";
    } else {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(got[i]), std::bit_cast<std::uint64_t>(want[i]))
          << what << " [" << i << "] got " << got[i] << " want " << want[i];
    }
  }
}

// (numpy/ml_dtypes type, our dtype when the descr does not say it)
const char* const k_types[][2] = {
    {"np.float64", ""},  {"np.float32", ""},  {"np.float16", ""},
    {"ml_dtypes.bfloat16", ""}, {"np.int8", ""}, {"np.uint8", ""},
    {"np.int16", ""},   {"np.uint16", ""},  {"np.int32", ""},
    {"np.uint32", ""},  {"np.int64", ""},   {"np.bool_", ""},
    {"ml_dtypes.float8_e5m2", ""}, {"ml_dtypes.float8_e4m3fn", "e4m3fn"},
    {"ml_dtypes.float8_e4m3fnuz", "e4m3fnuz"}, {"ml_dtypes.float8_e8m0fnu", "e8m0"},
    {"ml_dtypes.float4_e2m1fn", "e2m1"}, {"ml_dtypes.float6_e3m2fn", "e3m2"},
};

TEST(npy_oracle, files_numpy_writes_read_exactly) {
  if (!have_python()) GTEST_SKIP() << python << " with numpy and ml_dtypes not available";
  const auto dir = test::scratch_dir();
  std::string script = R"(
import numpy as np, ml_dtypes, warnings
warnings.simplefilter('ignore')
from numpy.lib import format as npf
rng = np.random.default_rng(7)
def make(t, shape):
    n = int(np.prod(shape))
    if t is np.bool_:
        a = rng.integers(0, 2, n).astype(np.bool_)
    elif np.issubdtype(np.dtype(t), np.integer):
        info = np.iinfo(t)
        a = rng.integers(info.min, info.max, n, dtype=np.int64, endpoint=True).astype(t)
    else:
        bits = np.dtype(t).itemsize * 8
        # fp4/fp6 live in the low bits of a byte; the high bits of a valid value are zero.
        if 'float4' in np.dtype(t).name or 'float6' in np.dtype(t).name:
            bits = ml_dtypes.finfo(t).bits
        codes = rng.integers(0, 2**bits, n, dtype=np.uint64)
        a = codes.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(t).itemsize]).view(t)
    return a.reshape(shape)
types = [)";
  for (const auto& t : k_types) script += std::string(t[0]) + ", ";
  script += R"(]
for i, t in enumerate(types):
    for v in (1, 2, 3):
        a = make(t, (3, 5, 7))
        with open(f't{i}_v{v}.npy', 'wb') as f:
            npf.write_array(f, a, version=(v, 0))
        a.astype(np.float64).tofile(f't{i}_v{v}.f64')
)";
  ASSERT_EQ(run_python(dir, script), 0);
  for (std::size_t i = 0; i < std::size(k_types); ++i) {
    for (int ver : {1, 2, 3}) {
      const std::string stem = "t" + std::to_string(i) + "_v" + std::to_string(ver);
      auto v = read_npy(dir / (stem + ".npy"));
      if (*k_types[i][1] != '\0') v = v.reinterpret(parse_dtype(k_types[i][1]));
      EXPECT_EQ(v.shape, (std::vector<std::uint64_t>{3, 5, 7})) << stem;
      expect_same_values(v.to_doubles(), read_f64(dir / (stem + ".f64")),
                         std::string(k_types[i][0]) + " v" + std::to_string(ver));
    }
  }
}

TEST(npy_oracle, files_we_write_read_exactly_in_numpy) {
  if (!have_python()) GTEST_SKIP() << python << " with numpy and ml_dtypes not available";
  const auto dir = test::scratch_dir();
  // Every code of the 8- and 16-bit types, so nothing is left to chance.
  const std::vector<std::pair<dtype, std::string>> cases{
      {dtype::m_f64, "np.float64"},   {dtype::m_f32, "np.float32"},
      {dtype::m_f16, "np.float16"},   {dtype::m_bf16, "ml_dtypes.bfloat16"},
      {dtype::m_i8, "np.int8"},       {dtype::m_u8, "np.uint8"},
      {dtype::m_i16, "np.int16"},     {dtype::m_u16, "np.uint16"},
      {dtype::m_i32, "np.int32"},     {dtype::m_u32, "np.uint32"},
      {dtype::m_i64, "np.int64"},     {dtype::m_bool, "np.bool_"},
      {dtype::m_e4m3fn, "ml_dtypes.float8_e4m3fn"}, {dtype::m_e5m2, "ml_dtypes.float8_e5m2"},
      {dtype::m_e8m0, "ml_dtypes.float8_e8m0fnu"},
  };
  std::string script =
      "import numpy as np, ml_dtypes, sys, warnings\nwarnings.simplefilter('ignore')\nbad = 0\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto [type, np_type] = cases[i];
    const std::size_t width = static_cast<std::size_t>(bits(type)) / 8;
    const std::size_t n = width <= 2 ? (std::size_t{1} << (8 * width)) : 4096;
    std::vector<std::uint8_t> b(n * width);
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    for (std::size_t k = 0; k < n; ++k) {
      std::uint64_t code = k;
      if (width > 2) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64: seeded, reproducible
        code = s;
      }
      if (type == dtype::m_bool) code &= 1;
      for (std::size_t j = 0; j < width; ++j) b[k * width + j] = std::uint8_t(code >> (8 * j));
    }
    const std::string stem = "w" + std::to_string(i);
    const std::vector<std::uint64_t> shape{n / 16, 16};
    write_npy(dir / (stem + ".npy"), shape, type, std::as_bytes(std::span<const std::uint8_t>(b)));
    // Our exact decode, for numpy to compare its own values with.
    tensor_view v = read_npy(dir / (stem + ".npy"));
    if (v.dtype == dtype::m_raw8) v = v.reinterpret(type);
    const auto vals = v.to_doubles();
    std::ofstream(dir / (stem + ".f64"), std::ios::binary)
        .write(reinterpret_cast<const char*>(vals.data()),
               static_cast<std::streamsize>(vals.size() * 8));
    std::ofstream(dir / (stem + ".raw"), std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    script += "a = np.load('" + stem + ".npy')\n";
    script += "t = np.dtype(" + np_type + ")\n";
    script += "if a.dtype != t: a = a.view(t)\n";
    script += "want = np.fromfile('" + stem + ".f64', dtype=np.float64)\n";
    script += "ok = a.shape == (" + std::to_string(n / 16) + ", 16) and a.tobytes() == open('" +
              stem + ".raw', 'rb').read() and np.array_equal(a.astype(np.float64).ravel(), want, "
              "equal_nan=True)\n";
    script += "if not ok: print('numpy disagrees on', '" + np_type + "'); bad += 1\n";
  }
  script += "sys.exit(1 if bad else 0)\n";
  EXPECT_EQ(run_python(dir, script), 0);
}

}  // namespace
}  // namespace numprobe::io
