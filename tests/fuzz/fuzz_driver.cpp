// Standalone fuzz driver for builds without libFuzzer (g++ CI): mutates a seeded corpus of
// valid .npy, .safetensors and GGUF images (byte flips, truncations, length-field corruption,
// header text edits) and feeds them to the same entry points as the libFuzzer targets.
// It fails when a valid seed is rejected, when an accepted image yields a view outside its
// buffer, or (under sanitizers, or by crashing) on memory errors.
//
//   fuzz_driver [--seconds T] [--iterations N] [--seed S] [FILE...]
// With FILEs, runs each file once through every parser (to replay libFuzzer crashes).
#include <bit>
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

// A tiny GGUF writer for the seeds: little-endian fields, each tensor's data at the next
// aligned offset (the parser's own tests build hostile images; these are all valid).
class gguf_seed {
 public:
  explicit gguf_seed(std::uint32_t version = 3, std::uint32_t alignment = 32)
      : m_version(version), m_alignment(alignment) {
    if (alignment != 32) key_u32("general.alignment", alignment);
  }
  gguf_seed& key_str(std::string_view k, std::string_view v) {
    key(k, 8);
    str(m_kv, v);
    return *this;
  }
  gguf_seed& key_u32(std::string_view k, std::uint32_t v) {
    key(k, 4);
    le(m_kv, v, 4);
    return *this;
  }
  gguf_seed& key_f32(std::string_view k, float v) {
    key(k, 6);
    le(m_kv, std::bit_cast<std::uint32_t>(v), 4);
    return *this;
  }
  gguf_seed& key_bool(std::string_view k, bool v) {
    key(k, 7);
    m_kv.push_back(v ? 1 : 0);
    return *this;
  }
  gguf_seed& key_strings(std::string_view k, const std::vector<std::string>& v) {
    key(k, 9);
    le(m_kv, 8, 4);
    le(m_kv, v.size(), 8);
    for (const auto& x : v) str(m_kv, x);
    return *this;
  }
  // An array of `n` elements of value type `type`, `width` bytes each, from a counter.
  gguf_seed& key_array(std::string_view k, std::uint32_t type, int width, std::uint64_t n) {
    key(k, 9);
    le(m_kv, type, 4);
    le(m_kv, n, 8);
    for (std::uint64_t i = 0; i < n; ++i) le(m_kv, 0x3F00 + i * 0x0101, width);
    return *this;
  }
  gguf_seed& tensor(std::string_view name, const std::vector<std::uint64_t>& ne, ggml_type type) {
    const auto& ti = info(type);
    std::uint64_t n = 1;
    for (const auto d : ne) n *= d;
    const std::uint64_t size = n / static_cast<std::uint64_t>(ti.block_size) *
                               static_cast<std::uint64_t>(ti.type_size);
    m_data.resize((m_data.size() + m_alignment - 1) / m_alignment * m_alignment);
    str(m_infos, name);
    le(m_infos, ne.size(), 4);
    for (const auto d : ne) le(m_infos, d, 8);
    le(m_infos, static_cast<std::uint32_t>(type), 4);
    le(m_infos, m_data.size(), 8);
    // Fixed pseudo-random block bytes (scales included: NaN and inf scales are inputs too).
    for (std::uint64_t i = 0; i < size; ++i) {
      m_state = m_state * 6364136223846793005ull + 1442695040888963407ull;
      m_data.push_back(static_cast<std::uint8_t>(m_state >> 56));
    }
    ++m_tensors;
    return *this;
  }
  [[nodiscard]] bytes image() const {
    bytes out{'G', 'G', 'U', 'F'};
    le(out, m_version, 4);
    le(out, m_tensors, 8);
    le(out, m_keys, 8);
    out.insert(out.end(), m_kv.begin(), m_kv.end());
    out.insert(out.end(), m_infos.begin(), m_infos.end());
    out.resize((out.size() + m_alignment - 1) / m_alignment * m_alignment);
    out.insert(out.end(), m_data.begin(), m_data.end());
    return out;
  }

 private:
  static void le(bytes& b, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  static void str(bytes& b, std::string_view s) {
    le(b, s.size(), 8);
    b.insert(b.end(), s.begin(), s.end());
  }
  void key(std::string_view k, std::uint32_t type) {
    str(m_kv, k);
    le(m_kv, type, 4);
    ++m_keys;
  }
  std::uint32_t m_version;
  std::uint64_t m_alignment;
  std::uint64_t m_keys = 0;
  std::uint64_t m_tensors = 0;
  std::uint64_t m_state = 29;
  bytes m_kv, m_infos, m_data;
};

std::vector<bytes> gguf_seeds() {
  std::vector<bytes> s;
  // Every type numprobe decodes, one non-decoded quantized type and one integer type.
  gguf_seed all;
  all.key_str("general.architecture", "llama")
      .key_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "\xe2\x96\x81the"})
      .key_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .key_bool("tokenizer.ggml.add_bos_token", true)
      .key_u32("llama.context_length", 4096);
  const std::pair<ggml_type, std::vector<std::uint64_t>> k_tensors[] = {
      {ggml_type::m_f32, {4, 2}},   {ggml_type::m_f16, {8}},      {ggml_type::m_bf16, {4, 2, 2}},
      {ggml_type::m_q4_0, {32, 2}}, {ggml_type::m_q4_1, {32}},    {ggml_type::m_q5_0, {32}},
      {ggml_type::m_q5_1, {32}},    {ggml_type::m_q8_0, {64}},    {ggml_type::m_q2_k, {256}},
      {ggml_type::m_q3_k, {256}},   {ggml_type::m_q4_k, {256}},   {ggml_type::m_q5_k, {256}},
      {ggml_type::m_q6_k, {256}},   {ggml_type::m_iq4_nl, {32}},  {ggml_type::m_iq4_xs, {256}},
      {ggml_type::m_mxfp4, {32}},   {ggml_type::m_nvfp4, {64}},   {ggml_type::m_q8_k, {256}},
      {ggml_type::m_i32, {3}},
  };
  for (const auto& [type, ne] : k_tensors) all.tensor("t." + std::string(info(type).name), ne, type);
  s.push_back(all.image());
  // Version 2, metadata only: arrays of several widths.
  gguf_seed meta(2);
  meta.key_str("general.name", "m")
      .key_array("a.u8", 0, 1, 5)
      .key_array("a.i16", 3, 2, 3)
      .key_array("a.u64", 10, 8, 2)
      .key_array("a.f64", 12, 8, 2);
  s.push_back(meta.image());
  // A custom alignment.
  gguf_seed wide(3, 64);
  wide.tensor("w", {8}, ggml_type::m_f32).tensor("q", {32, 3}, ggml_type::m_q8_0);
  s.push_back(wide.image());
  return s;
}

enum class image_kind { m_npy, m_safetensors, m_gguf };

// Offsets of a length field for each format, so corruption hits it often. GGUF has many: the
// two counts, or any 8- or 4-byte field of the first 512 bytes (string lengths, ne, offsets).
struct length_field {
  std::size_t at;
  std::size_t width;
};

length_field length_of(const bytes& seed, image_kind kind, std::mt19937_64& rng) {
  switch (kind) {
    case image_kind::m_npy: return {8, seed.size() > 6 && seed[6] == 1 ? 2u : 4u};
    case image_kind::m_safetensors: return {0, 8};
    case image_kind::m_gguf: break;
  }
  switch (rng() % 3) {
    case 0: return {8, 8};
    case 1: return {16, 8};
    default: return {static_cast<std::size_t>(rng() % std::min<std::size_t>(seed.size(), 512)),
                     rng() % 2 ? 8u : 4u};
  }
}

bytes mutate(const bytes& seed, image_kind kind, std::mt19937_64& rng) {
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
        const auto lf = length_of(seed, kind, rng);
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

// An accepted GGUF image: each tensor's data inside the buffer, sized from ne and its type, at
// an aligned offset.
bool gguf_views_inside(const std::shared_ptr<const mapped_file>& file, std::string& why) {
  const auto f = gguf_file::parse(file);
  const auto all = file->bytes();
  for (const auto& t : f.tensors()) {
    const auto d = f.data(t);
    const auto& ti = info(t.type);
    if (d.size() > 0 && (d.data() < all.data() || d.data() + d.size() > all.data() + all.size())) {
      why = "data of '" + t.name + "' lies outside its buffer";
      return false;
    }
    if (d.size() != t.bytes ||
        t.bytes != t.elements() / static_cast<std::uint64_t>(ti.block_size) *
                       static_cast<std::uint64_t>(ti.type_size) ||
        t.offset % f.alignment() != 0 || f.data_start() % f.alignment() != 0) {
      why = "data of '" + t.name + "' has a size or offset that disagrees with its info";
      return false;
    }
  }
  return true;
}

// An accepted image must give views that lie inside the buffer it was parsed from.
bool views_inside(const bytes& m, image_kind kind, std::string& why) {
  try {
    const auto file = mapped_file::from_bytes(std::as_bytes(std::span<const std::uint8_t>(m)), "x");
    if (kind == image_kind::m_gguf) return gguf_views_inside(file, why);
    std::vector<tensor_view> views;
    if (kind == image_kind::m_npy) {
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
      numprobe::io::fuzz::run_gguf(b.data(), b.size());
    }
    std::printf("replayed %zu files\n", files.size());
    return 0;
  }
  const auto npy = npy_seeds();
  const auto st = safetensors_seeds();
  const auto gg = gguf_seeds();
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
  for (const auto& s : gg) {
    try {
      (void)gguf_file::parse(mapped_file::from_bytes(std::as_bytes(std::span<const std::uint8_t>(s)), "seed"));
    } catch (const numprobe::error& e) {
      std::fprintf(stderr, "valid gguf seed rejected: %s\n", e.what());
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
    const auto kind = static_cast<image_kind>(n % 3);
    const auto& pool = kind == image_kind::m_npy ? npy : kind == image_kind::m_safetensors ? st : gg;
    const bytes m = mutate(pool[rng() % pool.size()], kind, rng);
    switch (kind) {
      case image_kind::m_npy: numprobe::io::fuzz::run_npy(m.data(), m.size()); break;
      case image_kind::m_safetensors: numprobe::io::fuzz::run_safetensors(m.data(), m.size()); break;
      case image_kind::m_gguf: numprobe::io::fuzz::run_gguf(m.data(), m.size()); break;
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
    if (!views_inside(m, kind, why)) {
      std::fprintf(stderr, "iteration %llu: %s\n", static_cast<unsigned long long>(n), why.c_str());
      ++failures;
    }
  }
  std::printf("fuzz_driver: %llu inputs, seed %llu, %d failures\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(seed), failures);
  return failures == 0 ? 0 : 1;
}
