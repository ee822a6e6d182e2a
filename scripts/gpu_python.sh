#!/usr/bin/env bash
# The Python package on the GPU machine (issue 19): builds numprobe (CLI, CPU backends) and the
# package, then runs what CI cannot (no torch there): the PyTorch kernel under the pytest plugin
# and numprobe.drift with torch inputs (examples/python/test_torch_kernel.py), the fp4 migration
# acceptance run on a random-initialised Llama (examples/python/accept_fake_quant.py), and
# bench/python_bench.py (in-process drift vs exec vs exec-worker; bindings overhead), and
# bench/mma_chain_triton.py (Triton's chained fp8 P.V against numprobe's MMA model, bit for bit;
# issue 31). Logs under $OUT; a summary table last.
#   scripts/gpu_python.sh            # TOMLPP_INCLUDE_DIR defaults to .carry/include when present
set -u
OUT=${OUT:-$PWD/gpu-python-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu-python}
SITE=${SITE:-/tmp/numprobe-site}
declare -A RESULT
toml=()
if [[ -n "${TOMLPP_INCLUDE_DIR:-}" ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$TOMLPP_INCLUDE_DIR")
elif [[ -d .carry/include/toml++ ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$PWD/.carry/include"); fi
export PYTHONUNBUFFERED=1
step() {  # step NAME COMMAND...: runs it, logs to $OUT/NAME.txt, records pass/FAIL and seconds
  local name=$1 t=$SECONDS rc
  shift
  "$@" > "$OUT/$name.txt" 2>&1
  rc=$?
  RESULT[$name]="$([ $rc -eq 0 ] && echo pass || echo "FAIL(rc=$rc)") $((SECONDS - t))s"
  echo "== $name: ${RESULT[$name]}"
  tail -60 "$OUT/$name.txt"
}
step build bash -c "cmake -S . -B $BUILD_DIR -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUMPROBE_ENABLE_CUDA=OFF \
  -DNUMPROBE_ENABLE_HIP=OFF -DNUMPROBE_BUILD_TESTS=OFF -DNUMPROBE_BUILD_BENCH=OFF ${toml[*]} && \
  cmake --build $BUILD_DIR -j $(nproc) --target numprobe"
step package bash -c "CMAKE_ARGS='${toml[*]}' CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q \
  --no-build-isolation --no-deps --target $SITE ./python"
export PYTHONPATH=$SITE NUMPROBE_CLI=$PWD/$BUILD_DIR/numprobe
step torch_kernel python3 -m pytest -q -s -p no:cacheprovider examples/python/test_torch_kernel.py
step accept python3 examples/python/accept_fake_quant.py --schemes nvfp4,mxfp4 --preset default,torchao \
  --seq 512 --json "$OUT/accept.json"
step bench python3 bench/python_bench.py --cli "$NUMPROBE_CLI" --repeats 3
step mma_chain python3 bench/mma_chain_triton.py "$NUMPROBE_CLI" --keys 512
echo
printf '%-14s %s\n' step result
for k in build package torch_kernel accept bench mma_chain; do printf '%-14s %s\n' "$k" "${RESULT[$k]:-not run}"; done
