"""Where the project's data files (config/, urdf/, launch/, policies/) live.

The same code runs from a source checkout, a pip install (data under
``<prefix>/share/sim2real``) and a colcon install (found through the ament index),
so every lookup of a shipped file goes through :func:`share_dir`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = "sim2real"
_MARKER = Path("config") / "robots"


def _candidates() -> list[Path]:
    found: list[Path] = []
    env = os.environ.get("SIM2REAL_SHARE")
    if env:
        found.append(Path(env))
    # Source checkout (editable or colcon --symlink-install): src/sim2real/core/paths.py -> repo root.
    found.append(Path(__file__).resolve().parents[3])
    try:
        from ament_index_python.packages import get_package_share_directory

        found.append(Path(get_package_share_directory(PACKAGE)))
    except Exception:  # not in an ament workspace: fall through to the prefix layout
        pass
    found.append(Path(sys.prefix) / "share" / PACKAGE)
    return found


def share_dir() -> Path:
    """The directory that holds ``config/``, ``urdf/`` and ``launch/``."""
    for candidate in _candidates():
        if (candidate / _MARKER).is_dir():
            return candidate
    tried = ", ".join(str(c) for c in _candidates())
    raise FileNotFoundError(
        f"sim2real data files not found (looked in: {tried}). "
        "Install the package (pip install -e . or colcon build) or set SIM2REAL_SHARE "
        "to the directory that contains config/robots/."
    )


def resolve(relative: str | os.PathLike[str], base: Path | None = None) -> Path:
    """Resolve a path from a config file: absolute stays, relative is taken from ``base``
    (the config file's project root) and then from :func:`share_dir`."""
    path = Path(relative)
    if path.is_absolute():
        return path
    if base is not None and (base / path).exists():
        return base / path
    return share_dir() / path
