"""The `perseus` command of the wheel: the console script runs the perseus binary the wheel
carries (perseus/_bin/perseus), with the same arguments, exit status and signals."""

import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "perseus")
    if not os.access(binary, os.X_OK):
        sys.exit(f"perseus: error: no perseus command at {binary}: this perseus package was not "
                 "installed from the wheel (pip install .); use the build's or the install's "
                 "bin/perseus")
    os.execv(binary, [binary, *sys.argv[1:]])
