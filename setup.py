"""Builds the `perseus` wheel: the pure-Python files of python/perseus/, the pybind11 extension
`perseus._perseus` and the `perseus` command (perseus/_bin/perseus, run by the console script
`perseus`), compiled by CMake (targets perseus_python_ext and perseus) with Debian's compilers
and libraries. The version is the project version of CMakeLists.txt. pip hides a build's output
unless -v, so the build's progress (every tenth of the compile steps) also goes to the user's
terminal (/dev/tty) where there is one; piped or in CI, nothing extra is written."""
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


STEP = re.compile(rb"^\[(\d+)/(\d+)\]|^\[\s*(\d+)%\]")  # Ninja's [n/N], Make's [ p%]


def open_terminal():
    """The user's terminal, or None where there is none (a pipe, CI)."""
    try:
        return open("/dev/tty", "w")
    except OSError:
        return None


def build_with_progress(command, terminal):
    """Runs `command`, its output on stdout (what `pip install -v` shows) and its progress on
    `terminal` each time another tenth of the steps is done."""
    shown = 0
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as build:
        for line in build.stdout:
            os.sys.stdout.buffer.write(line)
            step = STEP.match(line)
            if not step or terminal is None:
                continue
            done, total, percent = step.groups()
            percent = int(percent) if percent else 100 * int(done) // max(int(total), 1)
            if percent >= shown + 10 or percent == 100 > shown:
                shown = percent - percent % 10
                terminal.write(f"\nperseus: compiled {percent} %" +
                               (f" ({int(done)}/{int(total)} steps)" if total else ""))
                terminal.flush()
    os.sys.stdout.flush()
    if build.returncode:
        raise subprocess.CalledProcessError(build.returncode, command)


class CMakeBuild(build_ext):
    """Configures the project without tests and builds the Python extension and the command."""

    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DPERSEUS_TESTS=OFF",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={os.sys.executable}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        terminal = open_terminal()
        note = ("perseus: building the Python extension and the perseus command with CMake "
                f"in {build} (minutes on a few cores)")
        print(note, flush=True)
        if terminal:
            terminal.write(f"\n{note}")
            terminal.flush()
        subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
        build_with_progress(["cmake", "--build", str(build), "--target", "perseus_python_ext",
                             "perseus", "--parallel", str(os.cpu_count() or 1)], terminal)
        if terminal:
            terminal.write("\n")
            terminal.close()
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
