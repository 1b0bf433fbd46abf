"""Builds the `perseus` wheel: the pure-Python files of python/perseus/, the pybind11 extension
`perseus._perseus` and the `perseus` command (perseus/_bin/perseus, run by the console script
`perseus`), compiled by CMake (targets perseus_python_ext and perseus) with Debian's compilers
and libraries. The version is the project version of CMakeLists.txt. `pip install -v` shows
CMake's progress."""
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
    """Configures the project without tests and builds the Python extension and the command."""

    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DPERSEUS_TESTS=OFF",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={os.sys.executable}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        print("perseus: building the Python extension and the perseus command with CMake "
              f"in {build} (minutes on a few cores; pip install -v shows the progress)",
              flush=True)
        subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", "perseus_python_ext",
                        "perseus", "--parallel", str(os.cpu_count() or 1)], check=True)
        built = next((build / "python" / "perseus").glob("_perseus*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)
        command = target.parent / "_bin" / "perseus"
        command.parent.mkdir(exist_ok=True)
        shutil.copy2(build / "src" / "perseus", command)


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
    entry_points={"console_scripts": ["perseus = perseus._command:main"]},
    zip_safe=False,
)
