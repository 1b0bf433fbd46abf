"""Builds the `perseus` wheel: the pure-Python files of python/perseus/ and the pybind11
extension `perseus._perseus`, compiled by CMake (target perseus_python_ext) with Debian's
compilers and libraries. The version is the project version of CMakeLists.txt."""
import os
import re
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
VERSION = re.search(r"project\(perseus VERSION ([0-9.]+)",
                    (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    """Configures the project without tests and builds only the Python extension."""

    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DPERSEUS_TESTS=OFF",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={os.sys.executable}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", "perseus_python_ext",
                        "--parallel", str(os.cpu_count() or 1)], check=True)
        built = next((build / "python" / "perseus").glob("_perseus*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


setup(
    name="perseus",
    version=VERSION,
    description="Perseus: energy optimizer for pipeline-parallel training (client and planner)",
    license="Apache-2.0",
    license_files=["LICENSE", "NOTICE"],
    python_requires=">=3.9",
    packages=["perseus"],
    package_dir={"perseus": "python/perseus"},
    ext_modules=[Extension("perseus._perseus", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
