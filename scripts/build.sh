#!/usr/bin/env bash
# In-place developer build of fleet._core into fleet/ (ccache makes rebuilds fast), then an
# editable install so `import fleet` and the `fleetrun` command work from .venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CCACHE_BASEDIR="$ROOT" CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
BUILD_DIR="${FLEET_BUILD_DIR:-build/dev}"
JOBS="${FLEET_BUILD_JOBS:-$(nproc)}"
# One build of a build directory at a time: two ninjas in one tree (a test script's set-up beside
# a developer's build) overwrite each other's objects and leave a half-written _core.so.
mkdir -p "$BUILD_DIR"
exec 9>"$BUILD_DIR/.build.lock"
if ! flock -n 9; then
  echo "[build] waiting for another build of $BUILD_DIR to finish"
  flock 9
fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DPython3_EXECUTABLE="$ROOT/.venv/bin/python" \
        -DFLEET_WITH_CUDA="${FLEET_WITH_CUDA:-AUTO}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
echo "[build] compiling fleet._core ($BUILD_DIR, $JOBS jobs)"
# Progress lines are dropped; the build's own status decides (grep finding no line is no error).
set +o pipefail
ninja -C "$BUILD_DIR" -j "$JOBS" | grep -vE '^\[[0-9]+/[0-9]+\] '
ninja_status=${PIPESTATUS[0]}
set -o pipefail
if [ "$ninja_status" -ne 0 ]; then
  echo "[build] failed (ninja exit $ninja_status)" >&2
  exit "$ninja_status"
fi
# Link the source tree into .venv the way an editable install would (a .pth entry and the
# console script), without pip re-running the CMake build.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$ROOT" > "$site/fleet-dev.pth"
cat > .venv/bin/fleetrun <<EOS
#!$ROOT/.venv/bin/python
import sys
from fleet.launch.main import main
sys.exit(main())
EOS
chmod +x .venv/bin/fleetrun
