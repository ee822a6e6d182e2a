// Standalone fuzz driver for builds without libFuzzer (g++ CI): mutates a seeded corpus of
// valid .npy and .safetensors images (byte flips, truncations, length-field corruption,
// header text edits) and feeds them to the same entry points as the libFuzzer targets.
// It fails when a valid seed is rejected, when an accepted image yields a view outside its
// buffer, or (under sanitizers, or by crashing) on memory errors.
//
//   fuzz_driver [--seconds T] [--iterations N] [--seed S] [FILE...]
// With FILEs, runs each file once through both parsers (to replay libFuzzer crashes).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_case_entry.hpp"
#include "fuzz_entry.hpp"

namespace {

using namespace numprobe::io;
using bytes = std::vector<std::uint8_t>;

bytes to_u8(const std::vector<std::byte>& b) {
  bytes out(b.size());
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

template <class T>
std::span<const std::byte> raw(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

std::vector<bytes> npy_seeds() {
  std::vector<bytes> s;
  const std::vector<float> f{1.5f, -2.0f, 0.25f, 8.0f, 3.0f, -0.0f};
  const std::vector<std::uint16_t> h{0x3C00, 0x7BFF, 0xFC00, 0x0001};
  const std::vector<std::uint8_t> b{0x7E, 0x80, 0x01, 0xFF, 0x00, 0x33};
  const std::vector<double> d{1.0 / 3, -1e300};
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{2, 3}, dtype::m_f32, raw(f))));
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{4}, dtype::m_f16, raw(h))));
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{2, 2}, dtype::m_bf16, raw(h))));
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{6}, dtype::m_e4m3fn, raw(b))));
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{3, 1, 2}, dtype::m_i8, raw(b))));
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{}, dtype::m_f64,
                              raw(std::vector<double>{d[0]}))));
  s.push_back(to_u8(npy_bytes(std::vector<std::uint64_t>{2}, dtype::m_f64, raw(d))));
  return s;
}

std::vector<bytes> safetensors_seeds() {
  std::vector<bytes> s;
  const std::vector<float> f{1.5f, -2.0f, 0.25f, 8.0f};
  const std::vector<std::uint8_t> b{0x7E, 0x80, 0x01, 0xFF, 0x21, 0x43};
  const std::vector<std::uint16_t> h{0x3F80, 0xC000};
  s.push_back(to_u8(safetensors_bytes({tensor_of("w", {2, 2}, f)})));
  s.push_back(to_u8(safetensors_bytes(
      {tensor_of("a.weight", {4}, f), {"a.scale", dtype::m_e8m0, {6}, raw(b)},
       {"q", dtype::m_e2m1_packed, {12}, raw(b)}, {"r", dtype::m_e3m2_packed, {8}, raw(b)},
       {"h", dtype::m_bf16, {2}, raw(h)}},
      {{"format", "pt"}})));
  s.push_back(to_u8(safetensors_bytes({})));
  return s;
}

// Offsets of the length field for each format, so corruption hits it often.
struct length_field {
  std::size_t at;
  std::size_t width;
};

length_field length_of(const bytes& seed, bool npy) {
  if (!npy) return {0, 8};
  return {8, seed.size() > 6 && seed[6] == 1 ? 2u : 4u};
}

bytes mutate(const bytes& seed, bool npy, std::mt19937_64& rng) {
  bytes m = seed;
  const auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 8) {
      case 0:  // bit flip
        if (!m.empty()) m[pick(m.size())] ^= std::uint8_t(1u << (rng() % 8));
        break;
      case 1:  // random byte
        if (!m.empty()) m[pick(m.size())] = std::uint8_t(rng());
        break;
      case 2:  // truncation
        m.resize(pick(m.size() + 1));
        break;
      case 3: {  // length field: boundary or random values
        const auto lf = length_of(seed, npy);
        if (m.size() < lf.at + lf.width) break;
        static const std::uint64_t special[] = {0, 1, 7, 8, 0xFF, 0xFFFF, 0xFFFFFFFF,
                                                100'000'000, 100'000'001, ~std::uint64_t{0}};
        std::uint64_t v = (rng() % 2) ? special[rng() % std::size(special)] : rng();
        if (rng() % 3 == 0) v = seed.size() - lf.at - lf.width + (rng() % 5) - 2;
        for (std::size_t i = 0; i < lf.width; ++i) m[lf.at + i] = std::uint8_t(v >> (8 * i));
        break;
      }
      case 4: {  // digit edits in the header text: shapes and offsets
        for (int tries = 0; tries < 16 && !m.empty(); ++tries) {
          const std::size_t i = pick(std::min<std::size_t>(m.size(), 512));
          if (m[i] >= '0' && m[i] <= '9') {
            static const char* const repl[] = {"0", "9", "-", "99999999999999999999", "4294967296",
                                               "18446744073709551615", "1.5", "-1"};
            const std::string r = repl[rng() % std::size(repl)];
            m.erase(m.begin() + static_cast<std::ptrdiff_t>(i));
            m.insert(m.begin() + static_cast<std::ptrdiff_t>(i), r.begin(), r.end());
            break;
          }
        }
        break;
      }
      case 5: {  // insert random bytes
        const std::size_t at = pick(m.size() + 1);
        const std::size_t n = 1 + pick(8);
        for (std::size_t k = 0; k < n; ++k) {
          m.insert(m.begin() + static_cast<std::ptrdiff_t>(at), std::uint8_t(rng()));
        }
        break;
      }
      case 6: {  // delete a run
        if (m.empty()) break;
        const std::size_t at = pick(m.size());
        const std::size_t n = std::min(m.size() - at, 1 + pick(8));
        m.erase(m.begin() + static_cast<std::ptrdiff_t>(at),
                m.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      default:  // append data
        m.resize(m.size() + 1 + pick(64), std::uint8_t(rng()));
        break;
    }
  }
  return m;
}

// An accepted image must give views that lie inside the buffer it was parsed from.
bool views_inside(const bytes& m, bool npy, std::string& why) {
  try {
    const auto file = mapped_file::from_bytes(std::as_bytes(std::span<const std::uint8_t>(m)), "x");
    std::vector<tensor_view> views;
    if (npy) {
      views.push_back(parse_npy(file));
    } else {
      views = safetensors_file::parse(file).tensors();
    }
    const auto all = file->bytes();
    for (const auto& v : views) {
      if (v.bytes.size() > 0 && (v.bytes.data() < all.data() ||
                                 v.bytes.data() + v.bytes.size() > all.data() + all.size())) {
        why = "view of '" + v.name + "' lies outside its buffer";
        return false;
      }
      if (checked_byte_count(v.dtype, v.element_count(), "x") != v.bytes.size()) {
        why = "view of '" + v.name + "' has a size that disagrees with its shape";
        return false;
      }
    }
  } catch (const numprobe::error&) {
  }
  return true;
}

bytes read_file(const char* p) {
  std::ifstream f(p, std::ios::binary);
  return bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  std::uint64_t iterations = ~std::uint64_t{0};
  std::uint64_t seed = 1;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--iterations" && i + 1 < argc) {
      iterations = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      files.push_back(argv[i]);
    }
  }
  if (!files.empty()) {
    for (const char* f : files) {
      const auto b = read_file(f);
      numprobe::io::fuzz::run_npy(b.data(), b.size());
      numprobe::io::fuzz::run_safetensors(b.data(), b.size());
    }
    std::printf("replayed %zu files\n", files.size());
    return 0;
  }
  const auto npy = npy_seeds();
  const auto st = safetensors_seeds();
  // Every seed is valid: a rejection here is a parser bug, not a fuzz finding.
  int failures = 0;
  for (const auto& s : npy) {
    try {
      (void)parse_npy(mapped_file::from_bytes(std::as_bytes(std::span<const std::uint8_t>(s)), "seed"));
    } catch (const numprobe::error& e) {
      std::fprintf(stderr, "valid npy seed rejected: %s\n", e.what());
      ++failures;
    }
  }
  for (const auto& s : st) {
    try {
      (void)safetensors_file::parse(
          mapped_file::from_bytes(std::as_bytes(std::span<const std::uint8_t>(s)), "seed"));
    } catch (const numprobe::error& e) {
      std::fprintf(stderr, "valid safetensors seed rejected: %s\n", e.what());
      ++failures;
    }
  }
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t n = 0;
  for (; n < iterations; ++n) {
    if ((n & 255) == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                                  .count() > seconds) {
      break;
    }
    const bool is_npy = (n & 1) == 0;
    const auto& pool = is_npy ? npy : st;
    const bytes m = mutate(pool[rng() % pool.size()], is_npy, rng);
    if (is_npy) {
      numprobe::io::fuzz::run_npy(m.data(), m.size());
    } else {
      numprobe::io::fuzz::run_safetensors(m.data(), m.size());
    }
    // Case ids (`--case ID`) too: a mutated canonical id, every 8th input.
    if ((n & 7) == 7) {
      static const std::string k_ids[] = {
          "attention(T=8192,S=8192,Hq=32,Hkv=8,D=128,in=bf16,mask=causal,seed=7)",
          "attention(B=2,T=3,S=128,Hq=4,Hkv=2,D=64,in=e4m3fn,mask=window,W=16,softcap=30,dist=shifted,shift=-1000,seed=1)"};
      std::string id = k_ids[rng() % 2];
      for (int e = 0, edits = 1 + static_cast<int>(rng() % 4); e < edits && !id.empty(); ++e) {
        const std::size_t at = rng() % id.size();
        switch (rng() % 4) {
          case 0: id[at] = static_cast<char>(rng() & 0xFF); break;
          case 1: id.erase(at, 1 + rng() % 4); break;
          case 2: id.insert(at, id.substr(rng() % id.size(), 1 + rng() % 12)); break;
          default: id.insert(at, std::to_string(static_cast<std::int64_t>(rng()))); break;
        }
      }
      numprobe::fuzz::run_case_id(reinterpret_cast<const std::uint8_t*>(id.data()), id.size());
    }
    std::string why;
    if (!views_inside(m, is_npy, why)) {
      std::fprintf(stderr, "iteration %llu: %s\n", static_cast<unsigned long long>(n), why.c_str());
      ++failures;
    }
  }
  std::printf("fuzz_driver: %llu inputs, seed %llu, %d failures\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(seed), failures);
  return failures == 0 ? 0 : 1;
}
