#!/usr/bin/env bash
# Runs the libFuzzer targets for the tensor-file, case-id and scenario parsers.
#   [FUZZ_BUILD_DIR=DIR] scripts/fuzz.sh [SECONDS_PER_TARGET=60] [OUT_DIR]
# With FUZZ_BUILD_DIR: runs the targets of that CMake tree, which must be a clang one (CI's
# sanitizer tree: NUMPROBE_SANITIZE=ON instruments every library for coverage, ASan and UBSan);
# they are brought up to date first, so one build serves the tests and the fuzzers. OUT_DIR
# defaults to DIR/fuzz.
# Without it, self-contained: finds clang++ (or CXX_FUZZ), compiles the io and formats sources
# straight into each target (so the parsers themselves carry coverage and ASan instrumentation)
# and builds fuzz_scenario through its own CMake tree; OUT_DIR defaults to build-fuzz.
# Exits non-zero when a target finds a crash, leak or sanitizer report; the reproducer is
# left in OUT_DIR (replay it with fuzz_driver FILE or the target itself).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=""
if [[ -n "${FUZZ_BUILD_DIR:-}" ]]; then
  build="$(cd "$FUZZ_BUILD_DIR" && pwd)"
  out="${2:-$build/fuzz}"
else
  out="${2:-$root/build-fuzz}"
fi
targets=(fuzz_npy fuzz_safetensors fuzz_gguf fuzz_case_id fuzz_scenario)

cxx="${CXX_FUZZ:-}"
if [[ -z "$build" && -z "$cxx" ]]; then
  for c in clang++ clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
  done
  if [[ -z "$cxx" ]]; then
    echo "fuzz.sh: no clang++ found (set CXX_FUZZ, or FUZZ_BUILD_DIR to a clang build)" >&2
    exit 2
  fi
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"  # the targets run from inside it
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -Wno-psabi -I"$root/include" -I"$root")
# The io layer and the formats layer it decodes with; formats needs nothing else.
sources=("$root"/src/io/*.cpp "$root"/src/formats/*.cpp)

# le BYTES VALUE: VALUE as BYTES little-endian bytes, printf-escaped.
le() { local n="$1" v="$2" i; for ((i = 0; i < n; i++)); do printf '\\x%02x' $(((v >> (8 * i)) & 255)); done; }

# Seed corpora: a few valid files, so the fuzzer starts past the magic and the length field.
seed_npy() {  # seed_npy NAME DICT DATA_BYTES(printf-escaped)
  local h="$2" dir="$out/corpus_fuzz_npy"
  mkdir -p "$dir"
  printf "\\x93NUMPY\\x01\\x00$(le 2 ${#h})%s$3" "$h" > "$dir/$1"
}
seed_st() {  # seed_st NAME JSON DATA_BYTES(printf-escaped)
  local h="$2" dir="$out/corpus_fuzz_safetensors"
  mkdir -p "$dir"
  printf "$(le 8 ${#h})%s$3" "$h" > "$dir/$1"
}
seed_npy f4 "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" '\x00\x00\xc0\x3f\x00\x00\x80\xbf'
seed_npy bf16 "{'descr': '<V2', 'fortran_order': False, 'shape': (1, 2), }" '\x80\x3f\x00\xc0'
seed_npy u1 "{'descr': '|u1', 'fortran_order': False, 'shape': (), }" '\x07'
seed_st f32 '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' '\x00\x00\xc0\x3f\x00\x00\x80\xbf'
seed_st mixed '{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"q":{"dtype":"F4","shape":[4],"data_offsets":[4,6]},"s":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[6,9]}}' '\x80\x3f\x00\xc0\x21\x43\x01\x02\x03'
seed_gguf() {  # seed_gguf NAME BYTES(printf-escaped): a whole GGUF image
  mkdir -p "$out/corpus_fuzz_gguf"
  printf "$2" > "$out/corpus_fuzz_gguf/$1"
}
# GGUF v3: one key (general.name = "m"), one tensor 'w' with ne = [4, 2] of type T and offset 0;
# header 24 + key 33 + info 41 = 98 bytes, padded to 128, then the data.
gguf_one() {  # gguf_one TYPE DATA_BYTES(printf-escaped) NE0 NE1
  printf '%s' "GGUF$(le 4 3)$(le 8 1)$(le 8 1)$(le 8 12)general.name$(le 4 8)$(le 8 1)m"
  printf '%s' "$(le 8 1)w$(le 4 2)$(le 8 "$3")$(le 8 "$4")$(le 4 "$1")$(le 8 0)"
  printf '%s' "$(le 8 0)$(le 8 0)$(le 8 0)$(le 6 0)$2"
}
q8_quants="$(le 8 1157442765409226768)"  # 0x1010101010101010
seed_gguf f32 "$(gguf_one 0 "$(le 4 1069547520)$(le 4 3212836864)$(le 8 0)$(le 8 0)$(le 8 0)" 4 2)"
seed_gguf q8_0 "$(gguf_one 8 "$(le 2 15360)$q8_quants$q8_quants$q8_quants$q8_quants" 32 1)"

# Text parsers (issue 15): case ids and scenario TOML.
seed_txt() {  # seed_txt TARGET NAME TEXT
  mkdir -p "$out/corpus_$1"
  printf '%s' "$3" > "$out/corpus_$1/$2"
}
seed_txt fuzz_case_id basic 'attention(T=8192,S=8192,Hq=32,Hkv=8,D=128,in=bf16,mask=causal,seed=7)'
seed_txt fuzz_case_id window 'attention(B=2,T=3,S=128,Hq=4,Hkv=2,D=64,in=e4m3fn,mask=window,W=16,softcap=30,dist=shifted,shift=-1000,seed=1)'
seed_txt fuzz_scenario quant $'[defaults]\nseed = 3\n[[check]]\nname = "q"\nprobe = "quant"\nshape = "16x64"\nsweep = { seed = [1, 2] }\nbounds = [{ expr = "sqnr_db>=1", basis = "x" }]\n'
cp "$root"/scenarios/*.toml "$out/corpus_fuzz_scenario/" 2>/dev/null || true

# The scenario loader needs every probe's parameter table: built through CMake with the whole
# tree instrumented for coverage and ASan.
build_scenario_target() {
  cmake -S "$root" -B "$out/cmake" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$cxx" -DNUMPROBE_ENABLE_CUDA=OFF -DNUMPROBE_ENABLE_HIP=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" >/dev/null
  cmake --build "$out/cmake" --target fuzz_scenario
  cp "$out/cmake/tests/fuzz/fuzz_scenario" "$out/fuzz_scenario"
}

# build_standalone TARGET: compiles TARGET into $out (no FUZZ_BUILD_DIR).
build_standalone() {
  echo "== building $1 with $cxx"
  if [[ "$1" == fuzz_scenario ]]; then
    build_scenario_target
  elif [[ "$1" == fuzz_case_id ]]; then
    # The case-id parser lives in core (with the formats it names).
    "$cxx" "${flags[@]}" "$root/tests/fuzz/$1.cpp" "$root"/src/core/attention_case.cpp \
      "$root"/src/core/id_fields.cpp "$root"/src/formats/*.cpp -lfmt -o "$out/$1"
  else
    "$cxx" "${flags[@]}" "$root/tests/fuzz/$1.cpp" "${sources[@]}" -lfmt -o "$out/$1"
  fi
}

if [[ -n "$build" ]]; then
  # The targets exist only in a clang tree (tests/fuzz/CMakeLists.txt).
  if ! cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"; then
    echo "fuzz.sh: $build has no fuzz targets up to date (it must be a clang build)" >&2
    exit 2
  fi
fi

status=0
for target in "${targets[@]}"; do
  if [[ -n "$build" ]]; then
    bin="$build/tests/fuzz/$target"
  else
    build_standalone "$target"
    bin="$out/$target"
  fi
  corpus="$out/corpus_$target"
  mkdir -p "$corpus"
  echo "== running $target for ${seconds}s"
  # -rss_limit_mb bounds memory: a parser that allocates from an unchecked size fails here.
  if ! (cd "$out" && "$bin" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 \
         -max_len=65536 -timeout=10 -print_final_stats=1); then
    echo "fuzz.sh: $target found a failure (reproducer in $out)" >&2
    status=1
  fi
done
exit "$status"
