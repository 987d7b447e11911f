"""The identified-parameters file (``config/identified/<robot>.yaml``): written by
``sim2real sysid fit``, read by ``sim2real dr from-sysid``.

Layout::

    robot: panda
    robot_profile_sha256: ...        # of the profile + URDF the bags were recorded with
    identified_utc: ...
    bags: [...]
    simulator:                       # SimWorld conditions (fit.FitResult.to_dict)
      parameters: {motor_strength: {value, std, nominal, unit, search_range}, ...}
      position_rmse_rad: {train_before, train_after, heldout_before, heldout_after}
    rigid_body: {...}                # arms only (rigid_body.RigidBodyResult.to_dict)
    plots: [...]
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import yaml

from sim2real.core.config_files import ConfigError
from sim2real.sim.conditions import PhysicalConditions

FORMAT_VERSION = 1


class IdentifiedError(ConfigError):
    """An identified-parameters file that cannot be used; names the file, field and fix."""


def write_identified(path: str | Path, content: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "format_version": FORMAT_VERSION,
        "identified_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **content,
    }
    header = (
        "# Identified parameters, written by 'sim2real sysid fit' (or 'sysid weigh'). Values in SI units; the simulator's\n"
        "# std are Newey-West (the data's scatter, not simulator mismatch), rigid_body's Gauss-Newton\n"
        "# (lower bounds). Re-centre a randomization on them with:\n"
        f"#   sim2real dr from-sysid {path} -o config/randomization/<robot>_identified.yaml\n"
    )
    path.write_text(header + yaml.safe_dump(document, sort_keys=False))
    return path


def read_identified(path: str | Path) -> dict[str, Any]:
    """The file's mapping, with ``simulator.parameters`` checked: every key a PhysicalConditions
    name with a finite ``value`` and ``std >= 0``."""
    path = Path(path)
    if not path.is_file():
        raise IdentifiedError(path, "(file)", "no such file", "run 'sim2real sysid fit BAG... -o FILE' first")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise IdentifiedError(
            path, "(file)", f"not valid YAML ({exc})", "regenerate it with sim2real sysid fit"
        ) from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("simulator"), dict)
        or not isinstance(data["simulator"].get("parameters"), dict)
    ):
        raise IdentifiedError(
            path, "simulator.parameters", "missing", "this is not a file written by 'sim2real sysid fit'; regenerate it"
        )
    for name, entry in data["simulator"]["parameters"].items():
        field = f"simulator.parameters.{name}"
        if name not in PhysicalConditions.names():
            raise IdentifiedError(
                path, field, "not a physical condition", f"use one of {list(PhysicalConditions.names())}"
            )
        if not isinstance(entry, dict) or "value" not in entry or "std" not in entry:
            raise IdentifiedError(path, field, "needs 'value' and 'std'", "regenerate the file with sim2real sysid fit")
        try:
            PhysicalConditions.check(name, entry["value"])
        except ValueError as exc:
            raise IdentifiedError(
                path, f"{field}.value", str(exc), "regenerate the file with sim2real sysid fit"
            ) from None
        std = entry["std"]
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not std >= 0:
            raise IdentifiedError(
                path,
                f"{field}.std",
                f"must be a number >= 0, got {std!r}",
                "regenerate the file with sim2real sysid fit",
            )
    return data
