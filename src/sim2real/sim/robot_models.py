"""Robot models for the MuJoCo world other than the profile's own URDF.

A model is named by a spec string:

- a path to a URDF or an MJCF file (relative to the project root, or absolute), whose joint
  names are the profile's;
- ``example-robot-data:go2``: the Go2 description of the ``example-robot-data`` package
  (``pip install -e '.[reality]'``), written independently of this project's URDF: other
  masses, inertias and centres of mass, rotor bodies, convex-mesh collisions. Its URDF
  names meshes as ``package://example-robot-data/...``, which MuJoCo cannot resolve, so a
  copy with absolute mesh paths and without the visual meshes is written to the user's cache
  (``~/.cache/sim2real/models/``) and loaded from there; nothing of it enters the repository.
"""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from sim2real.core.errors import InputError
from sim2real.core.paths import resolve

PACKAGE_MODELS = {"example-robot-data:go2": ("example-robot-data", "robots/go2_description/urdf/go2.urdf")}


class ModelError(InputError):
    """A model spec that names no loadable model, with the fix."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sim2real" / "models"


def resolve_model(spec: str | Path) -> Path:
    """The file MuJoCo should load for ``spec`` (see the module docstring)."""
    text = str(spec)
    if text in PACKAGE_MODELS:
        return _package_model(text)
    if any(text.startswith(name.split(":")[0] + ":") for name in PACKAGE_MODELS):
        raise ModelError(f"unknown model {text!r}; packaged models: {', '.join(PACKAGE_MODELS)}")
    path = Path(text).resolve() if Path(text).is_file() else resolve(text)
    if not path.is_file():
        raise ModelError(
            f"model {text!r}: no such file (looked for {path}). Fix: give a URDF or MJCF path, or one "
            f"of {', '.join(PACKAGE_MODELS)}"
        )
    return path


def _package_model(name: str) -> Path:
    package, relative = PACKAGE_MODELS[name]
    share = _installed_share(package)
    urdf = share / relative
    if not urdf.is_file():
        raise ModelError(
            f"model {name!r}: {urdf} is missing from the installed {package} package. Fix: "
            f"pip install --force-reinstall {package}"
        )
    data = urdf.read_bytes()
    out = cache_dir() / f"{name.replace(':', '_')}-{hashlib.sha256(data).hexdigest()[:12]}.urdf"
    if not out.is_file():
        root = ET.fromstring(data)
        tree = ET.ElementTree(root)
        for link in root.iter("link"):
            for visual in link.findall("visual"):
                link.remove(visual)
        prefix = f"package://{package}/"
        for mesh in root.iter("mesh"):
            filename = mesh.get("filename", "")
            if filename.startswith(prefix):
                mesh.set("filename", str(share / filename[len(prefix) :]))
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial")
        tree.write(partial, encoding="utf-8", xml_declaration=True)
        partial.replace(out)  # whole or absent: a second process may be writing the same file
    return out


def _installed_share(package: str) -> Path:
    """The package's data folder as its wheel installs it (cmeel's prefix in site-packages)."""
    import sysconfig

    for key in ("purelib", "platlib"):
        candidate = Path(sysconfig.get_paths()[key]) / "cmeel.prefix" / "share" / package
        if candidate.is_dir():
            return candidate
    raise ModelError(
        f"the {package} package is not installed. Fix: pip install -e '.[reality]' (or pip install {package})"
    )
