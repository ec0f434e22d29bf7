"""idem-check, the native binary, installed by pip; `find_binary` says where it landed."""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = ["find_binary"]


def find_binary(name: str = "idem-check") -> str:
    """The path of the installed binary NAME (idem-check or idem-reference-server).

    pip puts the wheel's binaries in the scripts folder of the scheme it installed into: the
    environment's, the user's (`pip install --user`), or a `bin` beside the package (`pip install
    --target`). Raises FileNotFoundError naming the folders it looked in.
    """
    exe = name + (sysconfig.get_config_var("EXE") or "")
    candidates = [sysconfig.get_path("scripts")]
    user_scheme = _user_scheme()
    if user_scheme:
        candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates.append(os.path.join(package_root, "bin"))
    for folder in candidates:
        path = os.path.join(folder, exe)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"{exe} is not installed beside the idem_check package (looked in {', '.join(candidates)})")


def _user_scheme() -> str | None:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and sys._framework:  # type: ignore[attr-defined]
        return "osx_framework_user"
    return "posix_user"
