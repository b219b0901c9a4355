#!/usr/bin/env bash
# The GPU check, for a lent GPU machine (one H100/H200, Ubuntu 24.04, Python 3.12, CUDA 13,
# PyTorch; no package registry): unpack the libraries the build links that the machine lacks,
# build Fleet for sm_90, run the C++ CUDA tests, tests/python/gpu and benchmarks/gpu_train.py,
# and leave the logs and the benchmark's JSON under $OUT (default: build/gpu-out). Meant to end
# within 8 minutes; each stage's log is written as it runs, so a timeout still returns them.
#
# Before a device call, here: bash scripts/gpu_deps_pack.sh   (writes .gpu_deps/deps.tar.xz and
# .gpu_deps/src.tar.gz, a snapshot of the committed tree: the shared working tree may hold other
# people's unfinished edits, so the device builds HEAD, not the working tree).
# The device call (the tool `run`, carry [".gpu_deps"], timeout_s 540):
#     bash scripts/gpu_check.sh
# Stages can be skipped with GPU_CHECK_SKIP="bench" (or "cpp", "py"), e.g. for a rerun;
# GPU_CHECK_PS_SCALE="2x6 4x12" adds parameter-server scaling runs (scripts/ps_scale_check.sh),
# GPU_CHECK_PS_SSD="<ps_ssd.py arguments>" the SSD tier's benchmark, GPU_CHECK_BLAS="auto
# Haswell" one core's CTR-DNN step under OpenBLAS's own kernel choice and forced ones,
# GPU_CHECK_GLOO="6 12g" the workers' Gloo group check (scripts/gloo_check.py);
# GPU_CHECK_TARGETS (default "_core fleet_cpp_tests") names what to build (just _core when a C++
# test of another area does not compile; the C++ stage is then skipped).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$ROOT/build/gpu-out}"
mkdir -p "$OUT"
DEPS_TAR="${GPU_DEPS_TAR:-$ROOT/.gpu_deps/deps.tar.xz}"
if [ -f "$ROOT/.gpu_deps/src.tar.gz" ] && [ -z "${GPU_CHECK_IN_SNAPSHOT:-}" ]; then
  rm -rf /tmp/fleet_src && mkdir -p /tmp/fleet_src
  tar -xzf "$ROOT/.gpu_deps/src.tar.gz" -C /tmp/fleet_src
  exec env GPU_CHECK_IN_SNAPSHOT=1 OUT="$OUT" GPU_DEPS_TAR="$DEPS_TAR" bash /tmp/fleet_src/scripts/gpu_check.sh
fi
cd "$ROOT"
DEPS=/tmp/fleet_deps
BUILD="${GPU_CHECK_BUILD_DIR:-$ROOT/build/gpu}"
SKIP="${GPU_CHECK_SKIP:-}"
TARGETS="${GPU_CHECK_TARGETS:-_core fleet_cpp_tests}"
[[ "$TARGETS" == *fleet_cpp_tests* ]] || SKIP="$SKIP cpp"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # the fleet package of this tree
PY="${PYTHON:-python3}"
started=$(date +%s)
stage() { echo "[gpu_check +$(( $(date +%s) - started ))s] $*" | tee -a "$OUT/summary.txt"; }

stage "source: $(cat "$ROOT/SNAPSHOT" 2>/dev/null || echo "working tree $ROOT")"
stage "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1); $(nproc) cores; $($PY --version 2>&1)"
if [ ! -d "$DEPS/usr" ]; then
  mkdir -p "$DEPS" && tar -xJf "$DEPS_TAR" -C "$DEPS" || { stage "FAILED: unpacking $DEPS_TAR"; exit 1; }
fi
LIBDIR="$DEPS/usr/lib/x86_64-linux-gnu"
export PATH="$DEPS/usr/bin:$PATH"
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig:$LIBDIR/openblas-pthread/pkgconfig:$DEPS/usr/share/pkgconfig"

stage "configure"
# The carried protoc and grpc_cpp_plugin need the carried libraries while the build runs; the
# built programs find them through their RPATH.
if [ ! -f "$BUILD/build.ninja" ]; then
  LD_LIBRARY_PATH="$LIBDIR" cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$(command -v "$PY")" -DFLEET_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFLEET_BUILD_BENCH=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -DCMAKE_PREFIX_PATH="$DEPS/usr" \
    -DCMAKE_LIBRARY_PATH="$LIBDIR;$LIBDIR/openblas-pthread" \
    -DCMAKE_INCLUDE_PATH="$DEPS/usr/include/x86_64-linux-gnu/openblas-pthread" \
    -DGloo_DIR="$DEPS/usr/share/cmake/Gloo" \
    >"$OUT/configure.log" 2>&1 || { stage "FAILED: configure (configure.log)"; tail -30 "$OUT/configure.log"; exit 1; }
fi
stage "build"
LD_LIBRARY_PATH="$LIBDIR" ninja -C "$BUILD" -j "$(nproc)" $TARGETS >"$OUT/build.log" 2>&1 \
  || { stage "FAILED: build (build.log)"; grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
stage "built"
# Which libstdc++ _core uses, and whether it exports any of it (it must not: a shared library it
# loads would bind to that copy; see CMakeLists.txt's --exclude-libs).
core_so="$(ls "$ROOT"/fleet/_core*.so 2>/dev/null | head -1)"
[ -n "$core_so" ] && stage "_core: libstdc++ $(ldd "$core_so" | grep -c 'libstdc++') shared, \
$(nm -D --defined-only "$core_so" | grep -c -E ' _ZNSo|_ZNSt6locale') of its std::ostream/locale exported"
# At run time the carried libraries' own dependencies (libgrpc.so.29 under libgrpc++, hiredis
# under Gloo, gflags and snappy under RocksDB) are not on the built programs' RPATH: put them, and only them (not the carried
# libssl or zlib, which the machine has), on the library path.
RT="$DEPS/runtime"
mkdir -p "$RT"
for lib in "$LIBDIR"/lib{grpc,gpr,absl,re2,cares,hiredis,ibverbs,nl-,deflate,upb,address_sorting,protobuf,protoc,rocksdb,gflags,snappy}*.so* \
           "$DEPS"/usr/lib/libgloo*.so*; do
  [ -e "$lib" ] && ln -sf "$lib" "$RT/"
done
export LD_LIBRARY_PATH="$RT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

status=0
if [[ "$SKIP" != *cpp* ]]; then
  stage "C++ CUDA tests"
  "$BUILD/tests/cpp/fleet_cpp_tests" --gtest_filter='Cuda*:DeviceMemory*:Nccl*' 2>&1 \
    | tee "$OUT/cpp_tests.log" | tail -5
  [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; stage "C++ CUDA tests FAILED"; }
fi
if [[ "$SKIP" != *py* ]]; then
  stage "tests/python/gpu"
  timeout 200 "$PY" -m pytest -q -p no:cacheprovider --timeout 60 -rs tests/python/gpu 2>&1 \
    | tee "$OUT/python_gpu_tests.log" | tail -15
  [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; stage "tests/python/gpu FAILED"; }
fi
if [[ "$SKIP" != *bench* ]]; then
  stage "benchmarks/gpu_train.py"
  PYTHONPATH="$ROOT" timeout 240 "$PY" benchmarks/gpu_train.py 2>&1 | tee "$OUT/gpu_train.log"
  tail -1 "$OUT/gpu_train.log" > "$OUT/gpu_train.json"
fi
# The workers' Gloo group as a PS job builds it, without training (scripts/gloo_check.py:
# fleetrun's plan and environment, the TCP store at worker 0, util_base's connect), at each rank
# count of GPU_CHECK_GLOO ("6 12"): once plain, twice with a gRPC server and client busy in every
# rank. A crash prints the rank, the signal and its native and Python stacks; after a failure (or
# with GPU_CHECK_GLOO_DEBUGGER=1) 12 ranks run again with rank 0 under gdb or cuda-gdb, for the
# backtrace at the fault itself.
gloo_failed=""
for ranks in ${GPU_CHECK_GLOO:-}; do
  for mode in "" "--grpc --repeat 2"; do
    name="gloo_${ranks}${mode:+_grpc}"
    stage "scripts/gloo_check.py --ranks $ranks $mode"
    # shellcheck disable=SC2086  # $mode holds several arguments
    PYTHONPATH="$ROOT" timeout 150 "$PY" scripts/gloo_check.py --ranks "$ranks" $mode \
      --timeout 60 --log_dir "$OUT/$name" 2>&1 | tee "$OUT/$name.log" | tail -80
    [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1 gloo_failed=1; stage "$name FAILED"; }
  done
done
if [ -n "$gloo_failed${GPU_CHECK_GLOO_DEBUGGER:-}" ]; then
  stage "scripts/gloo_check.py --ranks 12 --grpc --debugger"
  PYTHONPATH="$ROOT" timeout 200 "$PY" scripts/gloo_check.py --ranks 12 --grpc --debugger \
    --timeout 180 --log_dir "$OUT/gloo_gdb" 2>&1 | tee "$OUT/gloo_gdb.log" | tail -150
fi
# Issue #31's SSD tier where the server has cores of its own: benchmarks/ps_ssd.py with the
# arguments in GPU_CHECK_PS_SSD (e.g. "--rows 5000000 --budget_mb 51.2 --seconds 30").
if [ -n "${GPU_CHECK_PS_SSD:-}" ]; then
  stage "benchmarks/ps_ssd.py $GPU_CHECK_PS_SSD"
  # shellcheck disable=SC2086  # the arguments are meant to split
  PYTHONPATH="$ROOT" timeout "${GPU_CHECK_PS_SSD_TIMEOUT:-200}" "$PY" benchmarks/ps_ssd.py \
    $GPU_CHECK_PS_SSD 2>&1 | tee "$OUT/ps_ssd.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; stage "ps_ssd.py FAILED"; }
  tail -1 "$OUT/ps_ssd.log" >"$OUT/ps_ssd.json"
fi
# One core's speed there (the scale runs' single process took 210 us of CPU a sample there,
# against about 35 here): the CPU, the kernel OpenBLAS picks for it, and
# benchmarks/ctr_dnn_train.py --quick (the step against its GEMMs alone, one thread) once with
# OpenBLAS's own choice ("auto") and once for each OPENBLAS_CORETYPE named in GPU_CHECK_BLAS.
if [ -n "${GPU_CHECK_BLAS:-}" ]; then
  lscpu >"$OUT/lscpu.txt" 2>&1
  blas_so="$(ldd "$core_so" | awk '/libopenblas/ {print $3}')"
  stage "cpu: $(grep -m1 'Model name' "$OUT/lscpu.txt" | sed 's/.*: *//'); _core's OpenBLAS \
$blas_so: $(OPENBLAS_VERBOSE=2 "$PY" -c "import ctypes; ctypes.CDLL('$blas_so')" 2>&1 | grep Core)"
  for core in $GPU_CHECK_BLAS; do
    stage "benchmarks/ctr_dnn_train.py --quick, OpenBLAS core $core"
    if [ "$core" = auto ]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE="$core"; fi
    PYTHONPATH="$ROOT" timeout 150 "$PY" benchmarks/ctr_dnn_train.py --quick \
      >"$OUT/ctr_dnn_$core.log" 2>&1 || { status=1; stage "ctr_dnn_train.py ($core) FAILED"; }
    grep '^{' "$OUT/ctr_dnn_$core.log" | tail -1 | "$PY" -c 'import json, sys
f = json.loads(sys.stdin.read())["fleet"]
print("samples/s %.0f, GEMMs alone %.0f, fraction %.2f" % (f["samples_per_sec"],
      f["gemm_only_samples_per_sec"], f["gemm_limit_fraction"]))' 2>&1 | tee -a "$OUT/summary.txt"
  done
  unset OPENBLAS_CORETYPE
fi
# Issue #28's scale run (CPU only): benchmarks/ps_train.py at each "SERVERSxWORKERS" of
# GPU_CHECK_PS_SCALE against one process, one round each, on GPU_CHECK_PS_ROWS generated rows.
[ -n "${GPU_CHECK_PS_SCALE:-}" ] && export PYTHONFAULTHANDLER=1  # a crash names its Python line
for config in ${GPU_CHECK_PS_SCALE:-}; do
  servers="${config%x*}" workers="${config#*x}"
  stage "benchmarks/ps_train.py: $servers servers x $workers workers, ${GPU_CHECK_PS_ROWS:-1200000} rows"
  PYTHONPATH="$ROOT" timeout "${GPU_CHECK_PS_TIMEOUT:-240}" "$PY" benchmarks/ps_train.py \
    --skip_peer --rounds 1 --rows "${GPU_CHECK_PS_ROWS:-1200000}" --servers "$servers" \
    --workers "$workers" 2>&1 | tee "$OUT/ps_train_$config.log"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    status=1
    stage "ps_train.py $config FAILED"
    # A failed job's logs stay in ps_train.py's scratch folder: keep every worker's rate and
    # any crash report (the native one fleetrun turns on, then PYTHONFAULTHANDLER's) of this
    # configuration's jobs.
    for log in /tmp/fleet_ps_train_*/fleet_*/workerlog.* /tmp/fleet_ps_train_*/fleet_*/serverlog.*; do
      [ -e "$log" ] || continue
      grep -H -E "samples=|Fatal Python|Segmentation|File \"|Thread 0x|Current thread|native crash report|^  #[0-9]+ 0x|end of the C\+\+ stack" "$log"
    done >"$OUT/ps_train_${config}_failed.txt" 2>&1
    rm -rf /tmp/fleet_ps_train_*
  fi
  tail -1 "$OUT/ps_train_$config.log" >"$OUT/ps_train_$config.json"
done
stage "done (status $status)"
exit $status
