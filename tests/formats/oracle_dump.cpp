// oracle_dump: the C++ side of scripts/oracle/check_formats.py. It reads raw little-endian
// input values and writes our codes or values, so the script can compare them with ml_dtypes.
//   oracle_dump decode FORMAT OUT.f64                    every code 0 .. 2^storage_bits - 1
//   oracle_dump encode FORMAT IN.f64|IN.f32 OUT.u32 [rne|rtz] [default|saturate|nan|inf]
//   oracle_dump roundf FORMAT IN.f32 OUT.f32             round_float_to (the fast float paths)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "numprobe/base/error.hpp"
#include "numprobe/formats/format.hpp"

namespace {
namespace nf = numprobe::formats;

template <class T>
std::vector<T> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) numprobe::throw_input_error(path, "cannot open");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() % sizeof(T) != 0) numprobe::throw_input_error(path, "size not a multiple");
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

template <class T>
void write_all(const std::string& path, const std::vector<T>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!out) numprobe::throw_input_error(path, "cannot write");
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

int run(int argc, char** argv) {
  if (argc < 4) numprobe::throw_input_error("usage", "oracle_dump decode|encode|roundf FORMAT ...");
  const std::string mode = argv[1];
  const auto id = nf::parse_format(argv[2]);
  if (mode == "decode") {
    const auto bits = nf::info(id).bits;  // fp6: 64 codes, though stored in a byte
    if (bits > 16) numprobe::throw_input_error(argv[2], "decode dumps formats of <= 16 bits");
    std::vector<double> out(std::size_t{1} << bits);
    for (std::uint32_t c = 0; c < out.size(); ++c) out[c] = nf::decode(id, c);
    write_all(argv[3], out);
    return 0;
  }
  if (mode == "roundf" && argc >= 5) {
    auto in = read_all<float>(argv[3]);
    for (float& x : in) x = nf::round_float_to(id, x);
    write_all(argv[4], in);
    return 0;
  }
  if (mode == "encode" && argc >= 5) {
    nf::codec_options opt;
    if (argc > 5) {
      const std::string r = argv[5];
      opt.round = r == "rtz" ? nf::rounding::m_toward_zero : nf::rounding::m_nearest_even;
    }
    if (argc > 6) {
      const std::string o = argv[6];
      opt.over = o == "saturate" ? nf::overflow::m_saturate
                 : o == "nan"    ? nf::overflow::m_nan
                 : o == "inf"    ? nf::overflow::m_inf
                                 : nf::overflow::m_format_default;
    }
    const std::string path = argv[3];
    std::vector<std::uint32_t> out;
    if (ends_with(path, ".f32")) {
      const auto in = read_all<float>(path);
      out.resize(in.size());
      nf::encode_many(id, std::span<const float>(in), out, opt);
    } else {
      const auto in = read_all<double>(path);
      out.resize(in.size());
      nf::encode_many(id, std::span<const double>(in), out, opt);
    }
    write_all(argv[4], out);
    return 0;
  }
  numprobe::throw_input_error("usage", "unknown mode or missing arguments");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const numprobe::error& e) {
    std::fprintf(stderr, "oracle_dump: %s\n", e.what());
    return 2;
  }
}
