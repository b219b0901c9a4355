"""Builds fleet._core with CMake. `pip install .` makes a wheel; the developer scripts build in
place (build/dev, ccache) instead, see scripts/build.sh; scripts/build_wheel.sh makes the
self-contained (repaired) CPU wheel.

Environment: FLEET_WITH_CUDA (AUTO|ON|OFF, default AUTO) picks the CUDA kernels;
FLEET_CMAKE_BUILD_DIR keeps the CMake build in a directory of the caller's (build_wheel.sh uses
build/wheel, beside build/dev, so that both compile with the same relative paths and share
ccache entries) instead of setuptools' temporary one. The benchmarks' native module is never
built here: it is not part of the package."""

import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        package_dir = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(
            os.environ.get("FLEET_CMAKE_BUILD_DIR") or os.path.join(self.build_temp, "cmake")
        )
        os.makedirs(build_dir, exist_ok=True)
        source_dir = os.path.dirname(os.path.abspath(__file__))
        generator = (
            ["-G", "Ninja"]
            if subprocess.call(
                ["ninja", "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            == 0
            else []
        )
        cuda = os.environ.get("FLEET_WITH_CUDA", "AUTO")
        subprocess.check_call(
            [
                "cmake",
                "-S",
                source_dir,
                "-B",
                build_dir,
                *generator,
                f"-DPython3_EXECUTABLE={sys.executable}",
                f"-DFLEET_PACKAGE_DIR={package_dir}",
                f"-DFLEET_WITH_CUDA={cuda}",
                "-DFLEET_BUILD_TESTS=OFF",
                "-DFLEET_BUILD_BENCH=OFF",
                "-DCMAKE_BUILD_TYPE=Release",
            ]
        )
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_core", "-j", jobs])


setup(ext_modules=[CMakeExtension("fleet._core")], cmdclass={"build_ext": CMakeBuild})
