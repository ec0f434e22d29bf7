"""`python -m idem_check ARGS` runs the installed idem-check binary with ARGS."""

from __future__ import annotations

import os
import subprocess
import sys

from idem_check import find_binary


def main() -> int:
    try:
        binary = find_binary()
    except FileNotFoundError as error:
        print(f"python -m idem_check: {error}", file=sys.stderr)
        return 1
    if os.name == "nt":
        # Windows has no exec: run it as a child and pass its exit code on.
        return subprocess.run([binary, *sys.argv[1:]]).returncode
    os.execv(binary, [binary, *sys.argv[1:]])
    return 1  # not reached: execv replaced this process


if __name__ == "__main__":
    sys.exit(main())
