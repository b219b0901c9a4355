#!/usr/bin/env bash
# Packs the libraries Fleet's build links that the lent GPU machines lack (gRPC, abseil, Gloo,
# libdeflate, RocksDB, GoogleTest, OpenBLAS headers, pkg-config, and what they need) from this machine's
# Debian 12 packages into .gpu_deps/deps.tar.xz (git-ignored), for scripts/gpu_check.sh to unpack
# at /tmp/fleet_deps on the device machine. The machine is Ubuntu 24.04 (glibc 2.39), which runs
# Debian 12's binaries (glibc 2.36); the protobuf and abseil versions match Ubuntu's own.
#
# Usage (here, with network to the Debian archive): bash scripts/gpu_deps_pack.sh [--source-only]
# It also writes .gpu_deps/src.tar.gz, a snapshot of HEAD (what gpu_check.sh builds there);
# --source-only refreshes just that, after new commits.
# Paths inside the packages that name /usr are rewritten to /tmp/fleet_deps/usr (pkg-config
# files, Gloo's CMake targets); static libraries other than GoogleTest's are left out (the build
# links the shared ones), which keeps the archive within the device's 64 MiB carry limit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX=/tmp/fleet_deps
PACKAGES=(
  libgrpc++-dev libgrpc++1.51 libgrpc-dev libgrpc29 protobuf-compiler-grpc
  libabsl-dev libabsl20220623 libgloo-dev libgloo0 libhiredis-dev libhiredis0.14
  libibverbs-dev libibverbs1 libnl-3-200 libnl-route-3-200 libdeflate-dev libdeflate0
  libre2-dev libre2-9 libc-ares-dev libc-ares2 libssl-dev libssl3 zlib1g-dev zlib1g
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
  libopenblas-pthread-dev libopenblas0-pthread libgtest-dev libgmock-dev
  pkgconf pkgconf-bin libpkgconf3
  librocksdb-dev librocksdb7.8 libgflags2.2 libsnappy1v5
)
mkdir -p "$ROOT/.gpu_deps"
commit="$(git -C "$ROOT" rev-parse HEAD)"
git -C "$ROOT" archive --format=tar --prefix=./ HEAD >"$ROOT/.gpu_deps/src.tar"
echo "HEAD $commit ($(git -C "$ROOT" log -1 --format=%cd))" >"$ROOT/.gpu_deps/SNAPSHOT"
tar -rf "$ROOT/.gpu_deps/src.tar" -C "$ROOT/.gpu_deps" --transform 's#^#./#' SNAPSHOT
gzip -f "$ROOT/.gpu_deps/src.tar" && rm "$ROOT/.gpu_deps/SNAPSHOT"
echo "snapshot of $commit: $(ls -la "$ROOT/.gpu_deps/src.tar.gz" | awk '{print $5}') bytes"
[ "${1:-}" = "--source-only" ] && exit 0
debs=/tmp/fleet_gpu_debs  # the downloaded packages, kept out of the carried folder
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$debs"
(cd "$debs" && apt-get download "${PACKAGES[@]}" >/dev/null)
for f in "$debs"/*.deb; do dpkg -x "$f" "$stage/root"; done
cd "$stage/root"
find . -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
rm -rf usr/share/doc usr/share/man usr/share/lintian
# Some libraries (zlib, libssl) install under /lib: gather them where the rest are, and make
# libz.so, which points at /lib/..., relative.
if [ -d lib/x86_64-linux-gnu ]; then cp -a lib/x86_64-linux-gnu/. usr/lib/x86_64-linux-gnu/; fi
ln -sf "$(basename "$(readlink usr/lib/x86_64-linux-gnu/libz.so)")" usr/lib/x86_64-linux-gnu/libz.so
find . -name '*.pc' -exec sed -i "s#=/usr#=$PREFIX/usr#" {} +
sed -i "s#\"/usr/lib/#\"$PREFIX/usr/lib/#g" usr/share/cmake/Gloo/GlooTargets-*.cmake
tar -cJf "$ROOT/.gpu_deps/deps.tar.xz" .
ls -la "$ROOT/.gpu_deps/deps.tar.xz"
