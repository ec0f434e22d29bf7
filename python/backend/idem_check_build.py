"""The build backend of the Python package: maturin, with two steps of its own first.

- Building without cargo (pip falling back to the sdist on a platform that has no wheel) stops
  with one line saying how to install Rust. maturin on its own would download a toolchain from
  outside PyPI in the middle of a `pip install`, which a CI machine without that access cannot
  do and a reviewer would not expect.
- A wheel built from source holds idem-reference-server too, like the published wheels:
  maturin builds the binaries of one package (idem-check), so this builds the reference server's
  with cargo and stages it in idem_check.data/scripts/, which maturin puts in the wheel's scripts.

scripts/package and the release workflow call maturin directly and stage the reference server
themselves; this module only runs when pip or `python -m build` builds the project.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import maturin

NO_CARGO = (
    "idem-check: building from source needs Rust's cargo, which is not on PATH: "
    "install Rust (rustup, https://rustup.rs) and retry, or use a platform that has a prebuilt wheel"
)
DATA_SCRIPTS = os.path.join("idem_check.data", "scripts")


def _require_cargo() -> None:
    if shutil.which("cargo") is None:
        sys.stderr.write(NO_CARGO + "\n")
        sys.stderr.flush()
        raise SystemExit(1)


def _option(args: list, name: str):
    """The value of option NAME (`--name VALUE` or `--name=VALUE`) in ARGS, or None."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def _stage_reference_server(config_settings) -> None:
    """Builds idem-reference-server and copies it to idem_check.data/scripts/.

    With the profile and target maturin is given (MATURIN_PEP517_ARGS or the config settings;
    maturin's own default, release, otherwise), so both binaries of the wheel match.
    """
    if os.path.isdir(DATA_SCRIPTS) and any(n.startswith("idem-reference-server") for n in os.listdir(DATA_SCRIPTS)):
        return
    args = maturin.get_maturin_pep517_args(config_settings)
    command = ["cargo", "build", "--locked", "-p", "idem-reference-server", "--bin", "idem-reference-server",
               "--profile", _option(args, "--profile") or "release", "--message-format=json-render-diagnostics"]
    target = _option(args, "--target")
    if target:
        command += ["--target", target]
    print("Running `{}`".format(" ".join(command)), file=sys.stderr)
    built = subprocess.run(command, stdout=subprocess.PIPE, check=True)
    for line in built.stdout.decode().splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable"):
            os.makedirs(DATA_SCRIPTS, exist_ok=True)
            executable = message["executable"]
            shutil.copy2(executable, os.path.join(DATA_SCRIPTS, os.path.basename(executable)))
            return
    raise SystemExit("idem-check: cargo built no idem-reference-server executable")


def get_requires_for_build_wheel(config_settings=None):
    _require_cargo()
    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    _require_cargo()
    return maturin.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _require_cargo()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cargo()
    _stage_reference_server(config_settings)
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    _require_cargo()
    return maturin.build_sdist(sdist_directory, config_settings)
