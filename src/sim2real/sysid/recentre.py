"""Identified parameters -> a randomization centred on them (``sim2real dr from-sysid``).

Each identified condition gets a range centred on its value whose half-width comes from
its uncertainty, with a floor per kind that follows common sim-to-real practice:

- ``mass_scale``: narrow (+-max(2 std, 2 %)): masses are measured well and a wide mass
  range mostly teaches the policy to be timid;
- ``motor_strength``: normal(mean, max(std, 3 %)): torque constants drift with temperature;
- ``joint_friction``, ``joint_damping``, ``ground_friction``: wide (+-max(3 std, 50 % / 30 % / 30 %)):
  friction changes with temperature, wear and load, and one excitation sees only one of those;
- ``latency``: +-max(2 std, 2 ms): it varies with load on the robot computer;
- ``armature``: +-max(2 std, 30 %, 0.002 kg*m^2): a rotor's inertia does not change, but one
  value for all joints only approximates motors of different sizes.

Conditions the fit did not identify (sensor noise, pushes, terrain) are taken unchanged from
a base randomization (by default ``<robot>_reference`` when it exists), so the result is a
complete training randomization. So is ``mass_scale`` of a quadruped fitted on a stand
(``sysid record --suspended``): the stand carries the trunk, so the fit saw the legs' masses
only, and a narrow range around them would train on a robot lighter than one with a payload;
unless ``sysid weigh`` weighed the robot standing: its ``mass_scale`` is then the whole robot's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sim2real.core.config_files import ConfigError
from sim2real.sim.randomization import Randomization, load_randomization, physical_bounds, randomization_path
from sim2real.sysid.identified_file import read_identified

# name -> (kind, std multiple, relative floor, absolute floor)
RULES: dict[str, tuple[str, float, float, float]] = {
    "mass_scale": ("uniform", 2.0, 0.02, 0.0),
    "motor_strength": ("normal", 1.0, 0.03, 0.0),
    "joint_friction": ("uniform", 3.0, 0.5, 0.05),
    "joint_damping": ("uniform", 3.0, 0.5, 0.02),
    "ground_friction": ("uniform", 3.0, 0.3, 0.05),
    "latency": ("uniform", 2.0, 0.0, 0.002),
    "armature": ("uniform", 2.0, 0.3, 0.002),
}
DEFAULT_RULE = ("uniform", 2.0, 0.1, 0.0)


def recentred(identified_path: str | Path, base: str | Path | None = None, name: str | None = None) -> dict[str, Any]:
    """The randomization mapping (YAML format of :mod:`sim2real.sim.randomization`), validated."""
    return _recentred(identified_path, base, name)[0]


def _recentred(
    identified_path: str | Path, base: str | Path | None = None, name: str | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The randomization mapping, and the identified conditions whose base range it kept (why)."""
    identified = read_identified(identified_path)
    robot = identified.get("robot", "robot")
    base_randomization = _base(robot, base)
    parameters: dict[str, Any] = {}
    if base_randomization is not None:
        parameters.update(base_randomization.to_dict()["parameters"])
    kept = kept_from_base(identified, base_randomization)
    for key, entry in identified["simulator"]["parameters"].items():
        if key in kept:
            continue
        value, std = float(entry["value"]), float(entry["std"])
        kind, multiple, relative, absolute = RULES.get(key, DEFAULT_RULE)
        physical = physical_bounds(key)
        old = base_randomization.parameters.get(key) if base_randomization is not None else None
        bounds = list(old.bounds) if old is not None else list(physical)
        if kind == "normal":
            sigma = max(std, relative * abs(value), absolute)
            low, high = value - 2 * sigma, value + 2 * sigma
            spec: dict[str, Any] = {"normal": {"mean": round(value, 6), "std": round(sigma, 6)}}
        else:
            half = max(multiple * std, relative * abs(value), absolute)
            low, high = max(value - half, physical[0]), value + half
            spec = {"uniform": [round(low, 6), round(high, 6)]}
        # The base's bounds widen to include the new range: measurement beats a prior estimate.
        bounds = [min(bounds[0], max(low, physical[0])), max(bounds[1], min(high, physical[1]))]
        # null = the physical limit (an open limit like mass_scale > 0 has no finite number to write).
        spec["bounds"] = [None if b in physical else round(b, 6) for b in bounds]
        parameters[key] = spec
    data = {
        "name": name or f"{robot}_identified",
        "parameters": parameters,
        "pushes": base_randomization.to_dict()["pushes"] if base_randomization is not None else None,
    }
    Randomization.from_dict(data, source=f"recentred from {identified_path}")  # validate before anyone writes it
    return data, kept


def kept_from_base(identified: dict[str, Any], base: Randomization | None) -> dict[str, str]:
    """Identified conditions whose base range is kept, with the reason (said by the command and in
    the file it writes)."""
    simulator = identified["simulator"]
    # Files written before the fit said "suspended" name ground friction as not identified on a stand.
    reasons = simulator.get("not_identified") or {}
    on_stand = bool(simulator.get("suspended")) or "suspended" in str(reasons.get("ground_friction", ""))
    if (
        not on_stand
        or simulator.get("weighed")
        or "mass_scale" not in simulator["parameters"]
        or base is None
        or "mass_scale" not in base.parameters
    ):
        return {}
    value = float(simulator["parameters"]["mass_scale"]["value"])
    return {
        "mass_scale": f"fitted on a stand (suspended): {value:.3g} is the legs' mass scale; the stand carried the "
        f"trunk, so the base's range is kept (to centre it, weigh the robot standing: sim2real sysid weigh BAG "
        f"--robot ROBOT --fit THIS_FILE -o WEIGHED.yaml, then dr from-sysid WEIGHED.yaml)"
    }


def _base(robot: str, base: str | Path | None) -> Randomization | None:
    if base == "none":
        return None
    if base is None:
        candidate = f"{robot}_reference"
        try:
            randomization_path(candidate)
        except ConfigError:
            return None
        if not Path(randomization_path(candidate)).is_file():
            return None
        base = candidate
    return load_randomization(base)


def write_recentred(
    identified_path: str | Path, out: str | Path, base: str | Path | None = None
) -> tuple[Path, dict[str, str]]:
    """The file written and the identified conditions whose base range it kept, with the reason."""
    data, kept = _recentred(identified_path, base)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Domain randomization re-centred on identified parameters ({identified_path}),\n"
        "# written by 'sim2real dr from-sysid'. Identified conditions: centre = identified value,\n"
        "# width from its uncertainty (friction kept wide, mass narrow); the others come from the\n"
        "# base randomization unchanged. Train with: sim2real train --config <train config using it>\n"
        + "".join(f"# {name} kept from the base: {reason}\n" for name, reason in kept.items())
    )
    out.write_text(header + yaml.safe_dump(data, sort_keys=False))
    return out, kept
