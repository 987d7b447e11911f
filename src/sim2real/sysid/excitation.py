"""Excitation trajectories for system identification, bounded by the robot profile.

Every trajectory is ``q(t) = q_default + A * e(t) * s(t)`` per excited joint: ``s`` is the
shape (chirp, multisine or a finite Fourier series), ``e`` a sin^2 envelope that rises over
``ramp`` seconds and falls over the last ``ramp`` seconds, so the motion starts and ends at
the default pose with zero velocity. Each shape is scaled so that ``e * s`` peaks at
exactly 1 over the trajectory (a per-joint ``gain`` for the summed shapes), so ``A`` is the
joint's largest excursion in rad: the requested amplitude, or less where the position must
stay inside the limits (minus ``margin``) or the speed under ``velocity_fraction`` x the
velocity limit, checked on a 1 ms grid.

A floating-base robot recorded standing moves its legs one or two at a time (``legs``):
each group of joints (a leg, or a diagonal pair) gets its own window of the duration with
its own envelope while the other legs hold the stand pose and carry the robot.

A description (:meth:`Excitation.describe`) is a plain mapping that rebuilds the same
trajectory (:meth:`Excitation.from_description`); sysid bags carry it in their metadata.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from sim2real.core.errors import InputError
from sim2real.core.robot_profile import RobotProfile

KINDS = ("chirp", "multisine", "fourier")
CHECK_STEP = 0.001  # s, grid on which bounds are enforced
FOURIER_CANDIDATES = 24  # random coefficient sets tried; the best conditioned one is kept


# A standing quadruped (not on a stand) moves one leg at a time by this much: the Go2 then
# tilts at most ~7 deg in sysid.standing_check (multisine, 40 s; 0.15 rad: ~16 deg; 0.3 rad
# tips it over; Fourier excitations tilt it less).
STANDING_AMPLITUDE = 0.1
DEFAULT_AMPLITUDE = 0.6


def excitation_defaults(profile: RobotProfile, suspended: bool) -> tuple[float, int]:
    """(amplitude rad, legs at a time) when the user gives none: a fixed-base arm or a robot
    hanging on a stand moves every joint at once; a standing quadruped one leg at a time, gently."""
    if profile.fixed_base or suspended:
        return DEFAULT_AMPLITUDE, 0
    return STANDING_AMPLITUDE, 1 if len(profile.foot_links) == 4 else 0


def recording_arguments(
    profile: RobotProfile,
    suspended: bool,
    kind: str,
    joints: str,
    duration: float,
    amplitude: float,
    f_min: float,
    f_max: float,
    velocity_fraction: float,
    legs: int,
) -> dict[str, Any]:
    """:func:`make_excitation`'s keyword arguments (but the seed) from a recording's parameters, as
    sysid_logger and the recording plan take them: ``joints`` comma-separated ('' = all),
    ``amplitude`` 0 and ``legs`` -1 for the robot's defaults (:func:`excitation_defaults`)."""
    auto_amplitude, auto_legs = excitation_defaults(profile, suspended)
    return {
        "kind": kind,
        "joints": [j for j in joints.split(",") if j] or None,
        "duration": duration,
        "amplitude": amplitude or auto_amplitude,
        "f_min": f_min,
        "f_max": f_max,
        "velocity_fraction": velocity_fraction,
        "legs": auto_legs if legs < 0 else legs,
    }


class ExcitationError(InputError):
    """An excitation that cannot be built; the message names the argument and the fix."""


@dataclass
class Excitation:
    """An excitation of ``joints`` (profile joint names) around the profile's default pose."""

    kind: str
    joint_names: list[str]
    excited: list[str]
    default: np.ndarray
    amplitude: np.ndarray  # rad per profile joint (0 for joints held)
    duration: float
    ramp: float
    params: dict[str, Any] = field(default_factory=dict)
    condition_number: float | None = None

    # ------------------------------------------------------------------ evaluation
    def sample(self, t: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Target (position, velocity) at time ``t`` (s, scalar or array); shape [..., joints]."""
        t = np.clip(np.asarray(t, dtype=float), 0.0, self.duration)
        env, denv = self._envelopes(t)
        shape, dshape = self._shape(t)
        position = self.default + self.amplitude * (env * shape)
        velocity = self.amplitude * (denv * shape + env * dshape)
        return position, velocity

    def _envelopes(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Envelope and its derivative per joint: shape [..., joints]. With ``windows`` each
        joint rises and falls within its own [start, end]; otherwise over the whole duration."""
        windows = self.params.get("windows")
        if not windows:
            env, denv = _envelope(t, self.duration, self.ramp)
            return env[..., None] * np.ones(len(self.joint_names)), denv[..., None] * np.ones(len(self.joint_names))
        start, end = np.asarray(windows, dtype=float).T
        local = t[..., None] - start
        env, denv = _envelope(np.clip(local, 0.0, end - start), end - start, self.ramp)
        inside = (local >= 0) & (local <= end - start)
        return np.where(inside, env, 0.0), np.where(inside, denv, 0.0)

    def _shape(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unit shapes s(t), ds/dt for every profile joint: shape [..., joints]."""
        n = len(self.joint_names)
        t = t[..., None]
        p = self.params
        if self.kind == "chirp":
            f0, f1 = p["f_min"], p["f_max"]
            phase = np.asarray(p["phases"], dtype=float)[:n]
            length = np.full(n, self.duration)
            if p.get("windows"):
                # Each group sweeps the whole band within its own window, not a slice of it.
                start, end = np.asarray(p["windows"], dtype=float).T
                t = np.clip(t - start, 0.0, None)
                length = np.where(end > start, end - start, self.duration)
            rate = (f1 - f0) / length
            angle = 2 * math.pi * (f0 * t + 0.5 * rate * t * t) + phase
            return np.sin(angle), np.cos(angle) * 2 * math.pi * (f0 + rate * t)
        if self.kind == "multisine":
            freqs = np.asarray(p["frequencies"], dtype=float)  # [joints, K]
            phases = np.asarray(p["phases"], dtype=float)
            angle = 2 * math.pi * freqs * t[..., None] + phases
            gain = _gain(p, n, 1.0 / freqs.shape[1])
            return gain * np.sin(angle).sum(-1), gain * (np.cos(angle) * 2 * math.pi * freqs).sum(-1)
        # Fourier: sum_l a_l sin(l w t) + b_l cos(l w t), times the gain that makes its peak 1.
        a = np.asarray(p["a"], dtype=float)  # [joints, L]
        b = np.asarray(p["b"], dtype=float)
        w = 2 * math.pi * p["base_frequency"]
        harmonics = np.arange(1, a.shape[1] + 1)
        angle = w * harmonics * t[..., None]
        gain = _gain(p, n, 1.0)
        s = (a * np.sin(angle) + b * np.cos(angle)).sum(-1)
        ds = (w * harmonics * (a * np.cos(angle) - b * np.sin(angle))).sum(-1)
        return gain * s, gain * ds

    # ------------------------------------------------------------------ description
    def describe(self) -> dict[str, Any]:
        def plain(value):
            if isinstance(value, np.ndarray):
                return value.tolist()
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        return {
            "kind": self.kind,
            "joint_names": list(self.joint_names),
            "excited": list(self.excited),
            "default": self.default.tolist(),
            "amplitude": self.amplitude.tolist(),
            "duration": self.duration,
            "ramp": self.ramp,
            "params": plain(self.params),
            "condition_number": self.condition_number,
        }

    @classmethod
    def from_description(cls, data: dict[str, Any]) -> "Excitation":
        try:
            return cls(
                kind=data["kind"],
                joint_names=list(data["joint_names"]),
                excited=list(data["excited"]),
                default=np.asarray(data["default"], dtype=float),
                amplitude=np.asarray(data["amplitude"], dtype=float),
                duration=float(data["duration"]),
                ramp=float(data["ramp"]),
                params=dict(data["params"]),
                condition_number=data.get("condition_number"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ExcitationError(
                f"excitation description is incomplete or malformed ({exc!r}); it must come from Excitation.describe()"
            ) from None


def _gain(params: dict[str, Any], joints: int, default: float) -> np.ndarray:
    """Per-joint scale of a summed shape; a description without one (older bags) used ``default``."""
    return np.asarray(params.get("gain", [default] * joints), dtype=float)


def _normalise(exc: Excitation) -> None:
    """Set the summed shape's per-joint gain so that envelope x shape peaks at exactly 1 on
    the check grid: a sum of sines peaks anywhere from 1/K to K times a single one, so without
    it the requested amplitude would say little about the motion."""
    if exc.kind == "chirp":
        return  # a sine: its peak is 1 already
    exc.params["gain"] = [1.0] * len(exc.joint_names)
    t = np.arange(0.0, exc.duration + CHECK_STEP, CHECK_STEP)
    env, _ = exc._envelopes(t)
    shape, _ = exc._shape(t)
    peak = np.abs(env * shape).max(0)
    exc.params["gain"] = np.where(peak > 1e-12, 1.0 / np.maximum(peak, 1e-12), 1.0).tolist()


def _envelope(t: np.ndarray, duration: float, ramp: float) -> tuple[np.ndarray, np.ndarray]:
    """sin^2 rise over [0, ramp] and fall over [duration - ramp, duration]; 1 between."""
    rise = np.clip(t / ramp, 0.0, 1.0)
    fall = np.clip((duration - t) / ramp, 0.0, 1.0)
    up, down = np.sin(0.5 * math.pi * rise) ** 2, np.sin(0.5 * math.pi * fall) ** 2
    # d/dt sin^2(pi/2 x) = pi/2 * sin(pi x) * dx/dt
    dup = np.where((t > 0) & (t < ramp), 0.5 * math.pi * np.sin(math.pi * rise) / ramp, 0.0)
    ddown = np.where((t > duration - ramp) & (t < duration), -0.5 * math.pi * np.sin(math.pi * fall) / ramp, 0.0)
    return up * down, dup * down + up * ddown


def check_excitation(
    profile: RobotProfile,
    kind: str = "fourier",
    joints: Sequence[str] | None = None,
    duration: float = 40.0,
    amplitude: float = 0.6,
    f_min: float = 0.1,
    f_max: float = 1.0,
    ramp: float = 2.0,
    velocity_fraction: float = 0.5,
    legs: int = 0,
) -> tuple[list[str], list | None, float]:
    """The checks of :func:`make_excitation`'s arguments, without its search (seconds for a
    Fourier excitation): a recording plan refuses a bad one before any process starts.
    Returns the excited joints, the legs' windows (None: all at once) and the ramp."""
    if kind not in KINDS:
        raise ExcitationError(f"excitation kind {kind!r} is unknown; use one of {list(KINDS)}")
    names = profile.joint_names
    excited = list(names) if not joints else list(joints)
    unknown = [j for j in excited if j not in names]
    if unknown:
        raise ExcitationError(f"joints {unknown} are not joints of robot {profile.name!r}; use some of {names}")
    for name, value in (
        ("duration", duration),
        ("ramp", ramp),
        ("amplitude", amplitude),
        ("f_min", f_min),
        ("f_max", f_max),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            # NaN would pass every comparison below and become NaN targets streamed to the robot.
            raise ExcitationError(f"{name} must be a finite number > 0, got {value!r}")
    if not duration > 2 * ramp:
        raise ExcitationError(f"duration {duration:g} s must exceed twice the ramp ({ramp:g} s)")
    if not 0 < f_min < f_max:
        raise ExcitationError(f"frequencies must satisfy 0 < f_min < f_max, got f_min={f_min:g}, f_max={f_max:g} Hz")
    if not 0 < velocity_fraction <= 1:
        raise ExcitationError(f"velocity_fraction {velocity_fraction:g} must be in (0, 1]")
    windows = None
    if legs:
        windows, ramp = _leg_windows(profile, excited, legs, duration, ramp)
    return excited, windows, ramp


def make_excitation(
    profile: RobotProfile,
    kind: str = "fourier",
    joints: Sequence[str] | None = None,
    duration: float = 40.0,
    amplitude: float = 0.6,
    f_min: float = 0.1,
    f_max: float = 1.0,
    ramp: float = 2.0,
    margin: float = 0.1,
    velocity_fraction: float = 0.5,
    seed: int = 0,
    legs: int = 0,
) -> Excitation:
    """An excitation of ``joints`` (default: all) within the profile's limits.

    ``amplitude`` (rad) is each excited joint's largest excursion from the default pose;
    the position and velocity limits may lower it (:attr:`Excitation.amplitude` says by how much). Frequencies lie in
    [f_min, f_max] Hz. ``fourier`` picks, among random coefficient sets, the one whose
    rigid-body regressor (pinocchio, fixed base) has the lowest condition number.
    ``legs`` (floating base): 0 moves every excited joint at once; 1 one leg at a time; 2 a
    diagonal pair at a time, each group in its own window of ``duration``.
    """
    excited, windows, ramp = check_excitation(
        profile, kind, joints, duration, amplitude, f_min, f_max, ramp, velocity_fraction, legs
    )
    names = profile.joint_names
    rng = np.random.default_rng(seed)
    n = len(names)
    mask = np.array([name in excited for name in names])
    base = Excitation(
        kind, list(names), excited, profile.default_positions.copy(), np.zeros(n), float(duration), float(ramp)
    )
    if kind == "chirp":
        base.params = {"f_min": f_min, "f_max": f_max, "phases": (2 * math.pi * np.arange(n) / n).tolist()}
        candidates = [base]
    elif kind == "multisine":
        k = 6
        # Interleaved frequency lines: each joint owns its own lines, so in the spectrum every
        # response can be traced back to the joint that caused it.
        lines = np.linspace(f_min, f_max, k * n).reshape(k, n).T
        index = np.arange(1, k + 1)
        phases = np.tile(-math.pi * index * (index - 1) / k, (n, 1))  # Schroeder phases: low crest factor
        base.params = {"frequencies": lines.tolist(), "phases": phases.tolist()}
        candidates = [base]
    else:
        harmonics = max(1, int(math.floor(f_max / f_min)))
        harmonics = min(harmonics, 5)
        base_frequency = f_max / harmonics
        candidates = []
        for _ in range(FOURIER_CANDIDATES):
            a, b = rng.normal(size=(n, harmonics)), rng.normal(size=(n, harmonics))
            # Higher harmonics get smaller coefficients, so accelerations stay moderate.
            a /= np.arange(1, harmonics + 1)
            b /= np.arange(1, harmonics + 1)
            candidates.append(
                Excitation(
                    kind,
                    list(names),
                    excited,
                    base.default.copy(),
                    np.zeros(n),
                    float(duration),
                    float(ramp),
                    {"base_frequency": base_frequency, "a": a.tolist(), "b": b.tolist()},
                )
            )
    for candidate in candidates:
        if windows is not None:
            candidate.params["windows"] = windows
            candidate.params["legs"] = legs
        _normalise(candidate)
        _fit_amplitude(candidate, profile, mask, amplitude, margin, velocity_fraction)
    if len(candidates) == 1:
        return candidates[0]
    scored = [(_condition_number(c, profile), i) for i, c in enumerate(candidates)]
    best_cond, best = min(scored)
    chosen = candidates[best]
    chosen.condition_number = float(best_cond)
    return chosen


def leg_joints(profile: RobotProfile) -> list[list[str]]:
    """The actuated joints between the base and each foot, in ``foot_links`` order (from the URDF)."""
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(profile.urdf))
    legs = []
    for foot in profile.foot_links:
        if not model.existFrame(foot):
            raise ExcitationError(f"foot link {foot!r} of robot {profile.name!r} is not in its URDF")
        joint = model.frames[model.getFrameId(foot)].parentJoint
        chain = []
        while joint > 0:
            chain.append(model.names[joint])
            joint = model.parents[joint]
        legs.append([name for name in profile.joint_names if name in chain])
    return legs


def _leg_windows(
    profile: RobotProfile, excited: Sequence[str], legs: int, duration: float, ramp: float
) -> tuple[list[list[float]], float]:
    """Per profile joint, the [start, end] s of its group's window (unexcited joints: [0, 0]),
    and the ramp, shortened to a quarter of a window where the windows are short."""
    if legs not in (1, 2):
        raise ExcitationError(f"legs must be 0 (all at once), 1 or 2 at a time, got {legs!r}")
    if profile.fixed_base or len(profile.foot_links) != 4:
        raise ExcitationError(f"legs:={legs}: robot {profile.name!r} has no four legs to excite in turn; use legs 0")
    chains = leg_joints(profile)  # in foot_links order: FL, FR, RL, RR
    groups = chains if legs == 1 else [chains[0] + chains[3], chains[1] + chains[2]]  # the diagonals
    in_legs = {j for chain in chains for j in chain}
    stray = [j for j in excited if j not in in_legs]
    if stray:
        raise ExcitationError(
            f"joints {stray} belong to no leg of robot {profile.name!r}, so legs:={legs} cannot "
            "give them a window; excite them with legs 0 (or leave them out)"
        )
    groups = [[j for j in group if j in excited] for group in groups]
    groups = [group for group in groups if group]
    window = duration / len(groups)
    windows = {name: [0.0, 0.0] for name in profile.joint_names}
    for k, group in enumerate(groups):
        for name in group:
            windows[name] = [k * window, (k + 1) * window]
    return [windows[name] for name in profile.joint_names], ramp if len(groups) == 1 else min(ramp, window / 4)


def _fit_amplitude(
    exc: Excitation, profile: RobotProfile, mask: np.ndarray, amplitude: float, margin: float, velocity_fraction: float
) -> None:
    t = np.arange(0.0, exc.duration + CHECK_STEP, CHECK_STEP)
    exc.amplitude = np.ones(len(exc.joint_names))
    unit_q, unit_dq = exc.sample(t)
    excursion_up = (unit_q - exc.default).max(0)
    excursion_down = -(unit_q - exc.default).min(0)
    speed = np.abs(unit_dq).max(0)
    room_up = profile.upper_limits - margin - exc.default
    room_down = exc.default - (profile.lower_limits + margin)
    tiny = 1e-12
    bound = np.minimum.reduce(
        [
            np.full_like(room_up, amplitude),
            np.where(excursion_up > tiny, room_up / np.maximum(excursion_up, tiny), np.inf),
            np.where(excursion_down > tiny, room_down / np.maximum(excursion_down, tiny), np.inf),
            np.where(speed > tiny, velocity_fraction * profile.velocity_limits / np.maximum(speed, tiny), np.inf),
        ]
    )
    blocked = [name for name, ok, b in zip(exc.joint_names, mask, bound) if ok and b <= 1e-3]
    if blocked:
        raise ExcitationError(
            f"joints {blocked} cannot move: their default pose lies within {margin:g} rad of a "
            "limit; lower the margin or leave them out of the excited joints"
        )
    exc.amplitude = np.where(mask, np.maximum(bound, 0.0), 0.0)


def _condition_number(exc: Excitation, profile: RobotProfile, samples: int = 200) -> float:
    """Condition number of the stacked rigid-body regressor (base columns, scaled) along ``exc``."""
    from sim2real.sysid.rigid_body import RegressorModel

    model = RegressorModel(profile)
    t = np.linspace(exc.ramp, exc.duration - exc.ramp, samples)
    q, dq = exc.sample(t)
    h = 1e-3
    ddq = (exc.sample(t + h)[1] - exc.sample(t - h)[1]) / (2 * h)
    Y = model.stacked(q, dq, ddq)[:, model.base_columns]
    norms = np.linalg.norm(Y, axis=0)
    Y = Y / np.where(norms > 0, norms, 1.0)
    return float(np.linalg.cond(Y))
