"""An evaluation suite: named scenarios of what users command, scored as the robot runs them.

``sim2real eval POLICY --suite go2_walk --engine mujoco --worlds nominal go2_reference``.

Each scenario runs the deployed stack, ROS-free, around a simulated robot of either engine:
the policy through :class:`~sim2real.core.policy_slot.PolicySlot` (onnxruntime, the gait
clock, the trained-range clamp), the :class:`~sim2real.core.supervisor.SupervisorCore`
between it and the motors, and the :class:`~sim2real.core.estimation.legged.LegKalmanFilter` on the
sensor readings. The robot spawns in its default pose, the supervisor stands it up, the
policy takes over (engage) and the scenario's velocity command holds. Per scenario and
world set, over the episodes (episode ``k`` draws its world with seed ``seed + k``):

- ``fell``: share of episodes that fell (trunk tilted past ``FALL_TILT`` or lower than
  ``FALL_HEIGHT`` over the ground) or that the supervisor stopped; an episode whose engage
  the supervisor refused (the robot never reached its stand) fails with that reason;
- ``vx``, ``vy``, ``wz``: the achieved body-frame velocity over the scored window (after
  ``settle_s``), and ``velocity_error`` ``|mean (vx, vy) - command|``, ``yaw_rate_error``
  ``|mean wz - command|``;
- ``feet_down``: share of the sensing samples with every foot on the ground;
- ``drift``: horizontal travel of the base over the scored window;
- ``height``: mean trunk height over the ground; ``takeover_height``: its lowest in the
  ``takeover_window_s`` after the engage;
- ``saturation``: share of samples with a joint at its (battery-scaled) torque limit;
- ``estimator_rmse``: the filter's body-frame base velocity against ground truth, and
  ``estimator_diverged``: the share of samples its divergence monitor flagged.

A scenario passes when every target of the suite's ``targets`` that applies holds in every
episode's mean (the zero-command ones only at zero command).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from sim2real.core.config_files import ConfigError, read_config
from sim2real.core.estimation.config import load_estimation_config
from sim2real.core.estimation.legged import LegKalmanFilter
from sim2real.core.joint_command import JointTargets
from sim2real.core.policy_file import PolicyFile, load_policy
from sim2real.core.policy_slot import PolicySlot
from sim2real.core.robot_inputs import RobotInputs
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import quat_to_matrix, tilt_angle
from sim2real.core.safety_config import load_safety_config
from sim2real.core.supervisor import Mode, SupervisorCore, SupervisorInputs
from sim2real.core.units import NS_PER_S
from sim2real.evaluate.ablation import CONDITION_GROUPS, ablated_name, attribution_line, changed_groups, without_group
from sim2real.evaluate.evaluate import (
    EvaluationError,
    check_world_options,
    json_safe,
    local_policy_copy,
    resolve_worlds,
)
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import DEFAULT_ENGINE, make_world
from sim2real.sim.randomization import Randomization
from sim2real.sim.world import height_at

FALL_TILT = 1.0  # rad: the Go2 task's termination tilt
FALL_HEIGHT = 0.12  # m over the ground: the trunk is down
SATURATED = 0.98  # of the torque limit


class SuiteError(ConfigError, EvaluationError):
    """A suite file that cannot be read as a suite."""


class EngageRefused(RuntimeError):
    """The supervisor would not let the policy take over: on the robot, the operator's engage
    would be refused the same way."""


@dataclass(frozen=True)
class Push:
    at: float  # s after the engage
    force: tuple[float, float, float]  # N, world frame, on the trunk's centre of mass
    duration: float  # s


@dataclass(frozen=True)
class Scenario:
    name: str
    command: tuple[float, float, float]  # vx m/s, vy m/s, yaw rate rad/s (body frame)
    duration: float
    pushes: tuple[Push, ...] = ()

    @property
    def zero_command(self) -> bool:
        return not any(self.command)


@dataclass(frozen=True)
class Suite:
    name: str
    robot: str
    stand_s: float
    settle_s: float
    takeover_window_s: float
    targets: dict[str, float]
    scenarios: tuple[Scenario, ...]
    source: str = ""


TARGETS = (
    "velocity_error",
    "yaw_rate_error",
    "yaw_rate_floor",
    "feet_down",
    "drift",
    "takeover_height",
    "estimator_rmse",
)


class _SuiteReader:
    """Reads one suite file's fields; every problem is a SuiteError naming the field and the fix."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, field_name: str, problem: str, fix: str) -> SuiteError:
        return SuiteError(self.path, field_name, problem, fix)

    def number(self, value: Any, field_name: str, low: float = 0.0) -> float:
        try:
            result = float(value)
        except (TypeError, ValueError):
            raise self.fail(field_name, f"expected a number, got {value!r}", "write a number in SI units") from None
        if not math.isfinite(result) or result < low:
            raise self.fail(field_name, f"must be a finite number >= {low:g}, got {value!r}", "fix the value")
        return result

    def push(self, push: Any, at: str) -> Push:
        if (
            not isinstance(push, dict)
            or set(push) != {"at", "force", "duration"}
            or not isinstance(push["force"], list)
            or len(push["force"]) != 3
        ):
            raise self.fail(
                at,
                f"expected {{at: s, force: [fx, fy, fz], duration: s}}, got {push!r}",
                "write {at: 3.0, force: [0, 60, 0], duration: 0.2}",
            )
        return Push(
            self.number(push["at"], f"{at}.at"),
            tuple(self.number(f, f"{at}.force", low=-math.inf) for f in push["force"]),
            self.number(push["duration"], f"{at}.duration"),
        )

    def scenario(self, entry: Any, where: str, duration: float) -> Scenario:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise self.fail(
                where,
                f"expected {{name: ..., command: [vx, vy, yaw_rate]}}, got {entry!r}",
                "give each scenario a name and a command",
            )
        extra = sorted(set(entry) - {"name", "command", "duration", "pushes"})
        if extra:
            raise self.fail(f"{where}.{extra[0]}", "unknown key", "use name, command, duration, pushes")
        command = entry.get("command")
        if not isinstance(command, list) or len(command) != 3:
            raise self.fail(
                f"{where}.command", f"expected [vx, vy, yaw_rate], got {command!r}", "write command: [0.5, 0.0, 0.0]"
            )
        pushes = [self.push(push, f"{where}.pushes[{k}]") for k, push in enumerate(entry.get("pushes") or [])]
        return Scenario(
            entry["name"],
            tuple(self.number(c, f"{where}.command", low=-math.inf) for c in command),
            self.number(entry.get("duration", duration), f"{where}.duration"),
            tuple(pushes),
        )


def load_suite(name_or_path: str | Path) -> Suite:
    """A suite by name (``config/eval/<name>.yaml``) or path; SuiteError names what is wrong."""
    path, data = read_config("eval", name_or_path, SuiteError, "evaluation suite")
    reader = _SuiteReader(path)
    unknown = sorted(
        set(data) - {"robot", "stand_s", "settle_s", "takeover_window_s", "duration", "targets", "scenarios"}
    )
    if unknown:
        raise reader.fail(
            unknown[0], "unknown key", "use robot, stand_s, settle_s, takeover_window_s, duration, targets, scenarios"
        )
    if not isinstance(data.get("robot"), str):
        raise reader.fail("robot", f"expected a robot profile name, got {data.get('robot')!r}", "write robot: go2")
    targets = data.get("targets") or {}
    if not isinstance(targets, dict) or set(targets) - set(TARGETS):
        raise reader.fail("targets", f"unknown targets {sorted(set(targets) - set(TARGETS))}", f"use {list(TARGETS)}")
    duration = reader.number(data.get("duration", 10.0), "duration")
    scenarios = [
        reader.scenario(entry, f"scenarios[{index}]", duration)
        for index, entry in enumerate(data.get("scenarios") or [])
    ]
    if not scenarios:
        raise reader.fail("scenarios", "no scenarios", "list at least one {name: ..., command: [vx, vy, yaw_rate]}")
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise reader.fail("scenarios", f"names repeat: {names}", "give each scenario its own name")
    return Suite(
        name=path.stem,
        robot=data["robot"],
        stand_s=reader.number(data.get("stand_s", 2.5), "stand_s"),
        settle_s=reader.number(data.get("settle_s", 2.0), "settle_s"),
        takeover_window_s=reader.number(data.get("takeover_window_s", 2.0), "takeover_window_s"),
        targets={k: reader.number(v, f"targets.{k}") for k, v in targets.items()},
        scenarios=tuple(scenarios),
        source=str(path),
    )


# ------------------------------------------------------------------------ running
@dataclass
class EpisodeOutcome:
    seed: int
    fell: bool
    reason: str  # why the episode ended early ("" when it ran to the end)
    vx: float
    vy: float
    wz: float
    velocity_error: float
    yaw_rate_error: float
    feet_down: float
    drift: float
    height: float
    takeover_height: float
    saturation: float
    estimator_rmse: float
    estimator_diverged: float
    conditions: dict[str, float] = field(default_factory=dict)
    engaged: bool = True  # False: the supervisor refused the policy's takeover (reason says why)


def _episode_conditions(
    randomization: Randomization | None, rng: np.random.Generator, task_config: dict[str, Any]
) -> dict[str, float]:
    """What a world set draws for one episode, scaled as the policy's task scales it in training
    (the Go2 task multiplies the drawn terrain roughness by ``terrain_roughness_scale``). A
    world set's random pushes are not applied: the scenarios say which pushes they want."""
    if randomization is None:
        return {}
    drawn = dict(randomization.sample(rng))
    if "terrain_roughness" in drawn:
        drawn["terrain_roughness"] *= float(task_config.get("terrain_roughness_scale", 1.0))
    return drawn


@dataclass
class _Scored:
    """What an episode measures once scoring starts (settled after the engage), and its outcome."""

    effort_limits: np.ndarray
    velocity: list = field(default_factory=list)  # body-frame (vx, vy) per sample
    yaw: list = field(default_factory=list)
    feet: list = field(default_factory=list)  # all feet down
    heights: list = field(default_factory=list)
    saturated: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # estimator's body velocity - true
    diverged: list = field(default_factory=list)
    start_xy: np.ndarray | None = None
    final_xy: np.ndarray | None = None

    def sample(self, world, state, estimate, rotation, position, linear, angular, height: float) -> None:
        """One scored sensing period (the estimator's divergence is added by the caller)."""
        if self.start_xy is None:
            self.start_xy = position[:2].copy()
        body_velocity = rotation.T @ linear
        self.velocity.append(body_velocity[:2])
        self.yaw.append((rotation.T @ angular)[2])
        self.feet.append(bool(world.foot_contacts().all()))
        self.heights.append(height)
        limit = SATURATED * self.effort_limits * world.torque_limit_scale
        self.saturated.append(bool(np.any(np.abs(state.effort) >= limit)))
        self.errors.append(estimate.velocity_body - body_velocity)

    def end(self, world) -> None:
        if self.start_xy is not None:
            self.final_xy = world.base_pose()[0][:2]

    def outcome(
        self,
        seed: int,
        fell: bool,
        reason: str,
        engaged: bool,
        command: np.ndarray,
        lowest_after_engage: float,
        conditions: dict[str, float],
    ) -> EpisodeOutcome:
        mean_velocity = np.mean(self.velocity, axis=0) if self.velocity else np.full(2, np.nan)
        mean_yaw = float(np.mean(self.yaw)) if self.yaw else math.nan
        drift = math.nan
        if self.start_xy is not None and self.final_xy is not None and not fell and engaged:
            drift = float(np.linalg.norm(self.final_xy - self.start_xy))
        return EpisodeOutcome(
            seed=seed,
            fell=fell,
            reason=reason,
            vx=float(mean_velocity[0]),
            vy=float(mean_velocity[1]),
            wz=mean_yaw,
            velocity_error=float(np.linalg.norm(mean_velocity - command[:2])),
            yaw_rate_error=abs(mean_yaw - command[2]),
            feet_down=_mean(self.feet),
            drift=drift,
            height=_mean(self.heights),
            takeover_height=lowest_after_engage if math.isfinite(lowest_after_engage) else math.nan,
            saturation=_mean(self.saturated),
            estimator_rmse=(
                float(np.sqrt(np.mean(np.sum(np.square(self.errors), axis=1)))) if self.errors else math.nan
            ),
            estimator_diverged=_mean(self.diverged),
            conditions={k: float(v) for k, v in conditions.items() if v is not None},
            engaged=engaged,
        )


def _mean(values: list) -> float:
    return float(np.mean(values)) if values else math.nan


def run_scenario(
    policy: PolicyFile,
    suite: Suite,
    scenario: Scenario,
    engine: str,
    conditions: dict[str, float],
    seed: int,
    model: str | None = None,
) -> EpisodeOutcome:
    """One episode of one scenario; see the module docstring for what it measures. ``model``:
    on MuJoCo, another robot model than the profile's."""
    profile = load_profile(policy.metadata.robot)
    if profile.kind != "quadruped":
        raise ValueError(f"suite {suite.name!r} scores a quadruped's walking; {profile.name!r} is an {profile.kind}")
    world = make_world(engine, profile, model=model, conditions=PhysicalConditions(**conditions), seed=seed)
    safety = load_safety_config(profile.name)
    period = profile.policy_period
    sensing = profile.sensing_period
    substeps = max(1, round(sensing / profile.physics_period))
    per_tick = max(1, round(period / sensing))
    slot = PolicySlot(profile, [Path(policy.path).resolve().parent])
    slot.start(policy.path)
    inputs = RobotInputs(profile)
    supervisor = SupervisorCore(profile, safety, safety.command_period or period, simulated=True)
    sup_inputs = SupervisorInputs()
    estimator = LegKalmanFilter(profile, load_estimation_config(profile.name))
    command = np.array(scenario.command, dtype=float)
    engage_at = suite.stand_s
    scored_from = engage_at + suite.settle_s
    end = scored_from + scenario.duration
    pushes = sorted(scenario.pushes, key=lambda p: p.at)
    samples = int(round(end / sensing))
    scored = _Scored(profile.effort_limits)
    lowest_after_engage = math.inf
    fell, reason, engaged = False, "", True
    try:
        world.reset()
        world.command(profile.default_positions)
        terrain = world.terrain_heights  # a copy: read once, not at every sample
        for k in range(samples):
            t = k * sensing
            state = world.joint_state()
            imu = world.imu()
            position, orientation, linear, angular = world.base_pose_and_velocity()
            height = float(position[2] - height_at(terrain, position[0], position[1]))
            rotation = quat_to_matrix(orientation)
            estimate = estimator.step(
                t,
                imu.orientation,
                imu.angular_velocity,
                imu.linear_acceleration,
                state.position,
                state.velocity,
                state.effort,
            )
            if k % per_tick == 0:
                try:
                    decision = _control_tick(
                        slot, inputs, supervisor, sup_inputs, profile, state, imu, estimate, command, t, engage_at
                    )
                except EngageRefused as exc:
                    engaged, reason = False, str(exc)
                    break
                if decision is not None:
                    world.command(decision.position, decision.velocity, decision.effort)
                if t >= engage_at and supervisor.mode != Mode.ACTIVE:
                    fell, reason = True, f"supervisor {supervisor.mode.value}: {supervisor.last_trip}"
                    break
            tilt = tilt_angle(orientation)
            if tilt > FALL_TILT or height < FALL_HEIGHT:
                fell, reason = True, f"fall at {t:.2f} s: tilt {math.degrees(tilt):.0f} deg, trunk {height:.3f} m"
                break
            if engage_at <= t < engage_at + suite.takeover_window_s:
                lowest_after_engage = min(lowest_after_engage, height)
            if t >= scored_from:
                scored.sample(world, state, estimate, rotation, position, linear, angular, height)
                scored.diverged.append(estimator.divergence.diverged(t))
            for push in pushes:
                if abs(t - (engage_at + push.at)) < sensing / 2:
                    world.apply_push(push.force, push.duration)
            world.step(substeps)
        scored.end(world)
    finally:
        world.close()
    return scored.outcome(seed, fell, reason, engaged, command, lowest_after_engage, conditions)


def _control_tick(
    slot: PolicySlot,
    inputs: RobotInputs,
    supervisor: SupervisorCore,
    sup_inputs: SupervisorInputs,
    profile,
    state,
    imu,
    estimate,
    command: np.ndarray,
    t: float,
    engage_at: float,
):
    """One policy period of the graph: the runtime's tick and the supervisor's; the command the
    supervisor sends (None: nothing new)."""
    inputs.set_joint_states(profile.joint_names, state.position, state.velocity, int(t * NS_PER_S))
    inputs.set_imu(imu.orientation, imu.angular_velocity)
    inputs.set_state_estimate(estimate.velocity_body)
    inputs.set_velocity_command(*command, now=t)
    targets = slot.tick(inputs.signals(t))
    sup_inputs.joint_position, sup_inputs.joint_velocity = state.position, state.velocity
    sup_inputs.joint_effort = state.effort
    sup_inputs.joint_states_time = t
    sup_inputs.base_orientation, sup_inputs.imu_time = np.asarray(imu.orientation), t
    sup_inputs.policy_command = JointTargets.positions(targets)
    sup_inputs.policy_time = sup_inputs.policy_stamp = t
    if supervisor.mode == Mode.STANDBY and t >= engage_at:
        accepted, message = supervisor.request("engage", sup_inputs, t)
        if not accepted:
            raise EngageRefused(f"the supervisor refused the engage at {t:.2f} s: {message}")
    return supervisor.tick(sup_inputs, t).command


# ------------------------------------------------------------------------ results
@dataclass
class ScenarioResult:
    scenario: str
    world: str
    command: tuple[float, float, float]
    episodes: list[EpisodeOutcome]
    failed_targets: list[str]

    @property
    def passed(self) -> bool:
        return not self.failed_targets

    def mean(self, name: str) -> float:
        values = [getattr(e, name) for e in self.episodes]
        finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        return float(np.mean(finite)) if finite else math.nan

    @property
    def fell(self) -> float:
        return float(np.mean([e.fell for e in self.episodes]))


def _scenario_limits(targets: dict[str, float], scenario: Scenario) -> list[tuple[str, float, bool]]:
    """(metric, limit, whether a larger value fails) for each of the suite's targets that applies
    to ``scenario``; the yaw-rate limit is a share of the commanded rate, with a floor."""
    yaw_rate = None
    if "yaw_rate_error" in targets:
        yaw_rate = max(targets["yaw_rate_error"] * abs(scenario.command[2]), targets.get("yaw_rate_floor", 0.0))
    limits = {
        "velocity_error": (targets.get("velocity_error"), True),
        "yaw_rate_error": (yaw_rate, True),
        "estimator_rmse": (targets.get("estimator_rmse"), True),
        "takeover_height": (targets.get("takeover_height"), False),
    }
    if scenario.zero_command:  # standing still: feet down and no drift
        limits["feet_down"] = (targets.get("feet_down"), False)
        limits["drift"] = (targets.get("drift"), True)
    return [(name, limit, larger) for name, (limit, larger) in limits.items() if limit is not None]


def failed_targets(suite: Suite, scenario: Scenario, episodes: Sequence[EpisodeOutcome]) -> list[str]:
    """The suite's targets this scenario misses, each as 'name value > limit' (see the module doc)."""
    targets, failures = suite.targets, []
    refused = [e for e in episodes if not e.engaged]
    if refused:
        failures.append(f"engage refused in {len(refused)}/{len(episodes)} ({refused[0].reason.split(': ', 1)[-1]})")
    if any(e.fell for e in episodes):
        failures.append(f"fell in {sum(e.fell for e in episodes)}/{len(episodes)}")
    standing = [e for e in episodes if not e.fell and e.engaged]
    for name, limit, larger_fails in _scenario_limits(targets, scenario):
        values = [getattr(e, name) for e in standing if math.isfinite(getattr(e, name))]
        if not values:
            continue
        value = max(values) if larger_fails else min(values)  # the worst episode's
        if larger_fails and value > limit:
            failures.append(f"{name} {value:.3g} > {limit:.3g}")
        elif not larger_fails and value < limit:
            failures.append(f"{name} {value:.3g} < {limit:.3g}")
    return failures


@dataclass
class SuiteReport:
    policy: str
    sha256: str
    suite: str
    engine: str
    model: str | None
    seed: int
    episodes: int
    worlds: list[str]
    results: list[ScenarioResult]
    targets: dict[str, float] = field(default_factory=dict)
    # World sets that run elsewhere than ``engine`` (a reality set): name -> where they ran.
    elsewhere: dict[str, str] = field(default_factory=dict)
    # Ablations (``--ablate``): world set name -> (the world set asked for, the group put back
    # to nominal). Their results are diagnostics: ``passed`` and the plot leave them out.
    ablated: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def measured(self) -> list[ScenarioResult]:
        """The results of the world sets asked for (not of their ablations)."""
        return [r for r in self.results if r.world not in self.ablated]

    @property
    def passed(self) -> bool:
        # An ablation that fails does not fail the policy: a group put back to nominal can make
        # a draw harder (a heavy robot with strong motors, the motors made nominal).
        return all(r.passed for r in self.measured)

    def ablation_passes(self) -> dict[str, dict[str, int]]:
        """Per ablated world set: scenario runs passing as drawn and with each group nominal."""
        counts: dict[str, dict[str, int]] = {}
        for name, (world, group) in self.ablated.items():
            counts.setdefault(world, {"as drawn": sum(r.passed for r in self.results if r.world == world)})
            counts[world][group] = sum(r.passed for r in self.results if r.world == name)
        return counts

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for result, entry in zip(self.results, data["results"]):
            entry["passed"] = result.passed
        data["ablation_passes"] = self.ablation_passes()
        return json_safe(data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    COLUMNS = (
        ("fell", "fell", "{:.0%}"),
        ("vx", "vx", "{:+.2f}"),
        ("vy", "vy", "{:+.2f}"),
        ("wz", "wz", "{:+.2f}"),
        ("velocity_error", "v err", "{:.3f}"),
        ("yaw_rate_error", "wz err", "{:.3f}"),
        ("feet_down", "feet down", "{:.0%}"),
        ("drift", "drift", "{:.3f}"),
        ("height", "height", "{:.3f}"),
        ("takeover_height", "takeover", "{:.3f}"),
        ("saturation", "sat", "{:.1%}"),
        ("estimator_rmse", "est rmse", "{:.3f}"),
        ("estimator_diverged", "est div", "{:.0%}"),
    )

    def table(self) -> str:
        header = ["world", "scenario", "command", *(label for _, label, _ in self.COLUMNS), "result"]
        rows = []
        for r in self.results:
            cells = [r.world, r.scenario, "{:+.1f} {:+.1f} {:+.1f}".format(*r.command)]
            for name, _, form in self.COLUMNS:
                value = r.fell if name == "fell" else r.mean(name)
                cells.append("-" if not math.isfinite(value) else form.format(value))
            cells.append("pass" if r.passed else "FAIL: " + "; ".join(r.failed_targets))
            rows.append(cells)
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        measured = self.measured
        passed = sum(r.passed for r in measured)
        on = self.engine + (f" with model {self.model}" if self.model else "")
        lines = [
            f"suite {self.suite} on {on}: policy {self.policy} (sha256 {self.sha256[:12]}), "
            f"{self.episodes} episode(s) per scenario and world set, seed {self.seed}",
            "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        ]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        for world, where in self.elsewhere.items():
            lines.append(f"{world} ran on {where}; its drawn conditions stay hidden")
        lines.append(
            f"{passed}/{len(measured)} scenario runs pass "
            + ("of the world sets asked for; the ablations, diagnostics, are not counted " if self.ablated else "")
            + "(velocities in the body frame, m/s and rad/s; heights and drift in m)"
        )
        scenarios = len({r.scenario for r in self.results})
        for world, counts in self.ablation_passes().items():
            groups = {group: n for group, n in counts.items() if group != "as drawn"}
            lines.append(attribution_line(world, counts["as drawn"], groups, scenarios))
        return "\n".join(lines)


def _run_chunk(
    policy_path: str, suite: Suite, jobs: list[tuple[int, int, str, dict, int, str, str | None]]
) -> list[tuple[int, int, EpisodeOutcome]]:
    """Run (scenario index, world index, world name, conditions, seed, engine, model) jobs;
    module level so worker processes can run it."""
    policy = load_policy(policy_path)
    return [
        (s, w, run_scenario(policy, suite, suite.scenarios[s], engine, conditions, seed, model))
        for s, w, _, conditions, seed, engine, model in jobs
    ]


def _chosen_scenarios(suite: Suite, names: Sequence[str] | None) -> list[Scenario]:
    """The suite's scenarios named in ``names`` (all when None or empty), in the suite's order."""
    if not names:
        return list(suite.scenarios)
    unknown = sorted(set(names) - {s.name for s in suite.scenarios})
    if unknown:
        raise EvaluationError(
            f"no scenario {unknown} in suite {suite.name!r}; it has {[s.name for s in suite.scenarios]}"
        )
    return [s for s in suite.scenarios if s.name in names]


def evaluate_suite(
    policy: PolicyFile | str | Path,
    suite: Suite | str | Path,
    worlds: Sequence[str],
    episodes: int = 1,
    seed: int = 0,
    engine: str = DEFAULT_ENGINE,
    workers: int = 2,
    scenarios: Sequence[str] | None = None,
    model: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    ray_address: str | None = None,
    ablate: bool = False,
) -> SuiteReport:
    """Run every scenario (or those named in ``scenarios``) ``episodes`` times per world set.

    World sets as :func:`sim2real.evaluate.evaluate.resolve_worlds` reads them. Episode ``k``
    of every scenario of a world set draws its world from ``seed + k``: scenarios compare on
    the same robots. ``workers``: processes (0: this one); with ``ray_address``
    (:mod:`sim2real.train.ray_cluster`) the episodes are Ray tasks on a cluster instead, with the
    same results (each episode is deterministic in its seed). ``progress(done, total)``: called
    after each episode. ``ablate``: each randomized world set's episodes run again once per
    group of conditions their draws changed, with that group nominal
    (:mod:`sim2real.evaluate.ablation`); EvaluationError when no world set draws anything.
    """
    check_world_options(engine, model)
    if episodes < 1:
        raise EvaluationError(f"--episodes must be >= 1, got {episodes}")
    if not isinstance(policy, PolicyFile):
        policy = load_policy(policy)
    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    if suite.robot != policy.metadata.robot:
        raise EvaluationError(
            f"suite {suite.name!r} is for robot {suite.robot!r}; {policy.path} drives "
            f"{policy.metadata.robot!r}. Fix: a suite for {policy.metadata.robot!r} "
            f"(config/eval/{policy.metadata.robot}_*.yaml)"
        )
    chosen = _chosen_scenarios(suite, scenarios)
    world_sets = resolve_worlds(list(worlds), policy)
    runs = _world_runs(world_sets, episodes, seed, engine, model, policy.metadata.task_config, ablate)
    jobs = []
    for r, run in enumerate(runs):
        for k, conditions in enumerate(run.conditions):
            if conditions is None:
                continue  # the source world set's episode, already run
            for scenario in chosen:
                s = suite.scenarios.index(scenario)
                jobs.append((s, r, run.name, conditions, seed + k, run.engine, run.model))
    outcomes = (
        _run_jobs(str(Path(policy.path).resolve()), suite, jobs, workers, progress)
        if ray_address is None
        else _run_jobs_on_ray(ray_address, policy, suite, jobs, workers, progress)
    )
    results = _scenario_results(suite, chosen, runs, outcomes, seed)
    return SuiteReport(
        policy=str(policy.path),
        sha256=policy.sha256,
        suite=suite.name,
        engine=engine,
        model=model,
        seed=seed,
        episodes=episodes,
        worlds=[w.name for w in world_sets],
        results=results,
        targets=dict(suite.targets),
        elsewhere={
            world.name: world.engine + (f" with model {world.model}" if world.model else "")
            for world in world_sets
            if world.hidden and world.engine
        },
        ablated={run.name: (runs[run.source].name, run.group) for run in runs if run.source is not None},
    )


def _scenario_results(
    suite: Suite, chosen: list[Scenario], runs: list[_WorldRun], outcomes: list, seed: int
) -> list[ScenarioResult]:
    """One result per world set and scenario, its episodes in order; an ablation's episode that
    was not run again is a copy of the source world set's."""
    by_run = {(s, r, outcome.seed): outcome for s, r, outcome in outcomes}
    results = []
    for r, run in enumerate(runs):
        for scenario in chosen:
            s = suite.scenarios.index(scenario)
            mine = [
                by_run[(s, r, seed + k)] if conditions is not None else _copied(by_run[(s, run.source, seed + k)])
                for k, conditions in enumerate(run.conditions)
            ]
            if run.hidden:
                for outcome in mine:
                    outcome.conditions = {}  # a reality set's draws stay hidden
            results.append(
                ScenarioResult(scenario.name, run.name, scenario.command, mine, failed_targets(suite, scenario, mine))
            )
    return results


def _copied(outcome: EpisodeOutcome) -> EpisodeOutcome:
    return replace(outcome, conditions=dict(outcome.conditions))


@dataclass
class _WorldRun:
    """A world set as the suite runs it: one asked for, or an ablation of one (``source``, the
    index of the world set it ablates, and ``group``). ``conditions[k]``: episode k's draw; in an
    ablation, None where the episode's draw left the group nominal: that episode is the source
    world set's, not run again."""

    name: str
    engine: str
    model: str | None
    hidden: bool
    conditions: list[dict[str, float] | None]
    source: int | None = None
    group: str | None = None


def _world_runs(
    world_sets: Sequence[Any],
    episodes: int,
    seed: int,
    engine: str,
    model: str | None,
    task_config: dict[str, Any],
    ablate: bool,
) -> list[_WorldRun]:
    """The world sets asked for, each followed by its ablations when ``ablate``."""
    runs: list[_WorldRun] = []
    asked = {world.name for world in world_sets}
    for world in world_sets:
        world_engine, world_model = (world.engine, world.model) if world.engine else (engine, model)
        draws = [
            _episode_conditions(world.randomization, np.random.default_rng(seed + k), task_config)
            for k in range(episodes)
        ]
        source = len(runs)
        runs.append(_WorldRun(world.name, world_engine, world_model, world.hidden, list(draws)))
        if not ablate or world.hidden:  # a reality set's draws are not to be looked into
            continue
        changed = [set(changed_groups(drawn)) for drawn in draws]
        for group in [g for g in CONDITION_GROUPS if any(g in groups for groups in changed)]:
            name = ablated_name(world.name, group)
            if name in asked:
                raise EvaluationError(
                    f"world set {name!r} has the name --ablate gives {world.name!r} with its {group} nominal. "
                    f"Fix: rename the file of world set {name!r}, or run without --ablate"
                )
            conditions = [
                without_group(drawn, group) if group in groups else None for drawn, groups in zip(draws, changed)
            ]
            runs.append(_WorldRun(name, world_engine, world_model, False, conditions, source, group))
    if ablate and len(runs) == len(world_sets):
        raise EvaluationError(
            f"--ablate has nothing to ablate: of the world sets {sorted(asked)}, none drew a condition away "
            "from nominal ('nominal' draws nothing, and a reality set's draws stay hidden). Fix: add a "
            "randomized world set, e.g. --worlds go2_reference"
        )
    return runs


def _run_jobs(
    policy_path: str, suite: Suite, jobs: list, workers: int, progress: Callable[[int, int], None] | None
) -> list[tuple[int, int, EpisodeOutcome]]:
    done: list[tuple[int, int, EpisodeOutcome]] = []
    if workers <= 0 or len(jobs) == 1:
        for job in jobs:
            done += _run_chunk(policy_path, suite, [job])
            if progress:
                progress(len(done), len(jobs))
        return done
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=get_context("spawn"))
    try:
        futures = [pool.submit(_run_chunk, policy_path, suite, [job]) for job in jobs]
        for future in futures:
            done += future.result()
            if progress:
                progress(len(done), len(jobs))
    finally:
        # A failed episode ends the run at once: the jobs not started yet are dropped.
        pool.shutdown(wait=True, cancel_futures=True)
    return done


def _run_jobs_on_ray(
    address: str,
    policy: PolicyFile,
    suite: Suite,
    jobs: list,
    workers: int,
    progress: Callable[[int, int], None] | None,
) -> list[tuple[int, int, EpisodeOutcome]]:
    """Every job a Ray task of one CPU (Ray retries a task whose worker died); the policy file's
    bytes go to the cluster once. Results in job order, as the local run gives them."""
    from sim2real.train.ray_cluster import ray_session

    with ray_session(address, workers) as ray:
        data = ray.put(Path(policy.path).read_bytes())
        task = ray.remote(num_cpus=1, max_retries=3)(_run_chunk_of_bytes)
        waiting = list(enumerate(jobs))
        pending: dict = {}
        results: dict[int, list] = {}
        try:
            while waiting or pending:
                while waiting and len(pending) < max(1, workers):  # --workers episodes at a time
                    index, job = waiting.pop(0)
                    pending[task.remote(data, policy.sha256, suite, [job])] = index
                ready, _ = ray.wait(list(pending), num_returns=1)
                results[pending.pop(ready[0])] = ray.get(ready[0])
                if progress:
                    progress(len(results), len(jobs))
        finally:
            for ref in pending:  # a failed episode ends the run: the others are not waited for
                ray.cancel(ref)
    return [outcome for index in range(len(jobs)) for outcome in results[index]]


def _run_chunk_of_bytes(data: bytes, digest: str, suite: Suite, jobs: list) -> list[tuple[int, int, EpisodeOutcome]]:
    return _run_chunk(local_policy_copy(data, digest), suite, jobs)


def plot_suite(report: SuiteReport, png_path: str | Path) -> Path:
    """Commanded against achieved velocity per scenario (one marker per world set), and the
    estimator's error, with the targets drawn in."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png_path = Path(png_path)
    scenarios = list(dict.fromkeys(r.scenario for r in report.results))
    fig, axes = plt.subplots(1, 3, figsize=(14, 0.35 * len(scenarios) + 2.2), sharey=True)
    y = np.arange(len(scenarios))
    for offset, world in enumerate(report.worlds):
        rows = {r.scenario: r for r in report.results if r.world == world}
        shift = (offset - (len(report.worlds) - 1) / 2) * 0.2
        for axis, name in zip(axes[:2], ("vx", "wz")):
            achieved = [rows[s].mean(name) for s in scenarios]
            axis.scatter(achieved, y + shift, s=18, label=f"{world}")
        axes[2].scatter([rows[s].mean("estimator_rmse") for s in scenarios], y + shift, s=18, label=world)
    for axis, index, label in ((axes[0], 0, "forward velocity vx, m/s"), (axes[1], 2, "yaw rate wz, rad/s")):
        commanded = [next(r.command[index] for r in report.results if r.scenario == s) for s in scenarios]
        axis.scatter(commanded, y, marker="|", s=200, color="black", label="command")
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    limit = report.targets.get("estimator_rmse")
    if limit is not None:
        axes[2].axvline(limit, ls="--", color="grey")
    axes[2].set_xlabel("estimator base-velocity RMSE, m/s" + (" (dashed: target)" if limit is not None else ""))
    axes[2].grid(alpha=0.3)
    axes[0].set_yticks(y, scenarios)
    axes[0].invert_yaxis()
    axes[0].legend(fontsize=8)
    on = report.engine + (f" ({report.model})" if report.model else "")
    fig.suptitle(
        f"suite {report.suite} on {on}: {Path(report.policy).name}, "
        f"{sum(r.passed for r in report.measured)}/{len(report.measured)} pass",
        fontsize=10,
    )
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path
