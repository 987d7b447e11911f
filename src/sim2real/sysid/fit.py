"""Fit the simulator's physical conditions to sysid recordings with CMA-ES.

What is fitted (names are :class:`PhysicalConditions` fields, so the result feeds the
randomization directly): ``motor_strength``, ``mass_scale``, ``joint_friction`` (Coulomb),
``joint_damping`` (viscous), ``latency``, and ``ground_friction`` when a floating-base robot
touches the ground. Friction and damping are one value for all joints because that is what
the simulator's conditions express. Armature (rotor inertia) is not fitted: PyBullet loads
no armature from a URDF and SimWorld has no condition for it.

Cost: mean squared error between measured and replayed joint positions (plus velocities
weighted by ``VELOCITY_WEIGHT`` s) over windows of the *training* part of each recording
(the first ``train_fraction`` of its time); the rest is held out and only scored.
Uncertainty: Gauss-Newton covariance ``s^2 (J^T J)^-1`` from a finite-difference Jacobian
of the residuals at the optimum. The residuals of a trajectory are correlated in time,
so read these standard deviations as lower bounds. Latency moves in whole physics steps:
after CMA-ES it is settled by comparing the neighbouring steps, and its std is at least
the step's quantisation std (step / sqrt(12)).
"""
from __future__ import annotations

import math
import multiprocessing as mp
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.dataset import Dataset
from sim2real.sysid.replay import Replayer, Window, windows

VELOCITY_WEIGHT = 0.05  # s: 1 rad/s of velocity error costs as much as 0.05 rad of position error
SKIP_S = 0.04  # s at the start of each window not scored: commands in flight at the start are approximated


@dataclass(frozen=True)
class Parameter:
    name: str
    low: float
    high: float
    nominal: float
    unit: str


def search_space(profile: RobotProfile) -> list[Parameter]:
    space = [
        Parameter("motor_strength", 0.5, 1.5, 1.0, ""),
        Parameter("mass_scale", 0.5, 1.6, 1.0, ""),
        Parameter("joint_friction", 0.0, 0.1 * float(profile.effort_limits.min()), 0.0, "N*m"),
        Parameter("joint_damping", 0.0, 2.0, 0.0, "N*m*s/rad"),
        Parameter("latency", 0.0, 0.04, 0.0, "s"),
    ]
    if not profile.fixed_base:
        space.append(Parameter("ground_friction", 0.2, 1.5, 0.8, ""))
    return space


class FitError(RuntimeError):
    """The fit did not converge or cannot start; no identified YAML is written."""


@dataclass
class FitOptions:
    window: float = 2.0  # s per replay window
    train_fraction: float = 0.7
    train_seconds: float = 16.0  # s of training windows replayed per cost evaluation
    heldout_seconds: float = 12.0
    popsize: int = 10
    max_iterations: int = 60
    tolerance: float = 1e-3  # relative change of the best cost that counts as converged
    max_rmse: float = 0.05  # rad: a fit whose training RMSE stays above this does not explain the data
    workers: int = 2
    seed: int = 0
    compare_period: float = 0.01  # s between compared states: finer adds cost, not information


@dataclass
class FitResult:
    values: dict[str, float]
    std: dict[str, float]
    space: list[Parameter]
    train_rmse_before: np.ndarray
    train_rmse_after: np.ndarray
    heldout_rmse_before: np.ndarray
    heldout_rmse_after: np.ndarray
    evaluations: int
    iterations: int
    stop: str
    wall_time: float
    heldout_windows: list[Window] = field(default_factory=list)

    def to_dict(self, joint_names: list[str]) -> dict[str, Any]:
        def per_joint(values):
            return {name: round(float(v), 6) for name, v in zip(joint_names, values)}
        parameters = {}
        for p in self.space:
            parameters[p.name] = {"value": round(self.values[p.name], 6), "std": round(self.std[p.name], 6),
                                  "nominal": p.nominal, "unit": p.unit, "search_range": [p.low, p.high]}
        return {
            "method": "CMA-ES over replays of the recorded commands in SimWorld (windows from the measured state)",
            "parameters": parameters,
            "not_identified": {
                "armature": "SimWorld cannot express it (PyBullet loads no URDF armature; no condition exists)",
                "per_joint_friction": "SimWorld's joint_friction/joint_damping are one value for all joints; "
                                      "see rigid_body for per-joint friction (arms)",
            },
            "position_rmse_rad": {
                "train_before": per_joint(self.train_rmse_before), "train_after": per_joint(self.train_rmse_after),
                "heldout_before": per_joint(self.heldout_rmse_before),
                "heldout_after": per_joint(self.heldout_rmse_after),
            },
            "optimizer": {"evaluations": self.evaluations, "iterations": self.iterations, "stop": self.stop,
                          "wall_time_s": round(self.wall_time, 1)},
        }


# -- evaluation (also in worker processes) ---------------------------------------------------------
_REPLAYER: Replayer | None = None
_WINDOWS: dict[str, list[Window]] = {}
_STRIDE = 1


def _init_worker(profile: RobotProfile, dataset: Dataset, window_sets: dict[str, list[Window]], stride: int) -> None:
    global _REPLAYER, _WINDOWS, _STRIDE
    _REPLAYER = Replayer(profile, dataset.segments)
    _WINDOWS = window_sets
    _STRIDE = stride


def _residuals(conditions: dict[str, float], which: str) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity errors [samples, joints] over a window set."""
    replayer = _REPLAYER
    q_err, dq_err = [], []
    for window in _WINDOWS[which]:
        seg = replayer.segments[window.segment]
        q, dq = replayer.run(window, conditions, _STRIDE)
        measured = replayer.compared(window, _STRIDE)
        keep = seg.t[measured] >= seg.t[window.start] + SKIP_S
        q_err.append((q - seg.q[measured])[keep])
        dq_err.append((dq - seg.dq[measured])[keep])
    return np.concatenate(q_err), np.concatenate(dq_err)


def _cost(job: tuple[dict[str, float], str]) -> float:
    try:
        q_err, dq_err = _residuals(*job)
    except ValueError:  # conditions the world refuses: worst cost, never a crash of the search
        return math.inf
    value = float(np.mean(q_err ** 2) + VELOCITY_WEIGHT ** 2 * np.mean(dq_err ** 2))
    return value if math.isfinite(value) else math.inf


def _rmse(job: tuple[dict[str, float], str]) -> np.ndarray:
    q_err, _ = _residuals(*job)
    return np.sqrt(np.mean(q_err ** 2, axis=0))


def _residual_vector(job: tuple[dict[str, float], str]) -> np.ndarray:
    q_err, dq_err = _residuals(*job)
    return np.concatenate([q_err.ravel(), VELOCITY_WEIGHT * dq_err.ravel()])


class _Pool:
    """A process pool, or this process when ``workers`` is 1 (no fork, easier to debug)."""

    def __init__(self, workers: int, init_args: tuple):
        self.pool = None
        if workers > 1:
            self.pool = mp.get_context("fork").Pool(workers, _init_worker, init_args)
        else:
            _init_worker(*init_args)

    def map(self, fn: Callable, jobs: list) -> list:
        return self.pool.map(fn, jobs) if self.pool is not None else [fn(j) for j in jobs]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
        elif _REPLAYER is not None:
            _REPLAYER.close()


def _spread(items: list[Window], seconds: float, window: float) -> list[Window]:
    """At most ``seconds`` worth of windows, evenly spread over the list."""
    count = max(1, int(seconds / window))
    if len(items) <= count:
        return items
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, count).round()]


def fit_conditions(profile: RobotProfile, dataset: Dataset, options: FitOptions | None = None,
                   log: Callable[[str], None] = lambda _: None) -> FitResult:
    import cma

    options = options or FitOptions()
    started = time.monotonic()
    space = search_space(profile)
    train = _spread(windows(dataset.segments, options.window, 0.0, options.train_fraction),
                    options.train_seconds, options.window)
    heldout = _spread(windows(dataset.segments, options.window, options.train_fraction, 1.0),
                      options.heldout_seconds, options.window)
    if not train or not heldout:
        raise FitError(f"the recordings ({dataset.duration:.1f} s) are too short for {options.window:g} s windows "
                       "in both the training and the held-out part: record at least 20 s of excitation")
    lows = np.array([p.low for p in space])
    spans = np.array([p.high - p.low for p in space])

    def conditions(x: np.ndarray) -> dict[str, float]:
        values = lows + spans * np.clip(x, 0.0, 1.0)
        return {p.name: float(v) for p, v in zip(space, values)}

    x0 = np.array([(p.nominal - p.low) / (p.high - p.low) for p in space])
    stride = max(1, int(round(options.compare_period / dataset.segments[0].sample_period)))
    pool = _Pool(options.workers, (profile, dataset, {"train": train, "heldout": heldout}, stride))
    try:
        nominal = conditions(x0)
        before_train, before_heldout = pool.map(_rmse, [(nominal, "train"), (nominal, "heldout")])
        es = cma.CMAEvolutionStrategy(np.clip(x0, 0.05, 0.95), 0.3, {
            "bounds": [0.0, 1.0], "popsize": options.popsize, "maxiter": options.max_iterations,
            "tolfun": 0.0, "tolx": 1e-4, "seed": options.seed + 1, "verbose": -9,
            "tolflatfitness": 10})
        best_history: list[float] = []
        stop_reason = ""
        while not es.stop():
            xs = es.ask()
            costs = pool.map(_cost, [(conditions(x), "train") for x in xs])
            es.tell(xs, costs)
            best_history.append(float(es.result.fbest))
            log(f"  iteration {es.countiter:3d}: best cost {es.result.fbest:.3e} "
                f"(position RMSE ~{math.sqrt(es.result.fbest) * 1e3:.2f} mrad)")
            if len(best_history) > 8:
                old, new = best_history[-9], best_history[-1]
                if old - new <= options.tolerance * old:
                    stop_reason = f"best cost changed < {options.tolerance:g} (relative) in 8 iterations"
                    break
        if not stop_reason:
            reasons = es.stop()
            stop_reason = ", ".join(f"{k}" for k in reasons) or "stopped"
            if "maxiter" in reasons or "maxfevals" in reasons:
                raise FitError(f"the fit did not converge within {options.max_iterations} iterations "
                               f"(best cost still changing: {best_history[-9:] if best_history else []}); "
                               "record a longer or richer excitation, or raise --max-iterations")
        best = np.array(es.result.xbest)
        values = conditions(best)
        values["latency"] = _settle_latency(pool, values, profile.physics_period)
        after_train, after_heldout = pool.map(_rmse, [(values, "train"), (values, "heldout")])
        if float(np.sqrt(np.mean(after_train ** 2))) > options.max_rmse:
            raise FitError(f"the fit did not converge to a model that explains the data: training position RMSE "
                           f"{np.sqrt(np.mean(after_train ** 2)):.3f} rad > {options.max_rmse:g} rad. Check that "
                           "the bag matches the robot profile (gains, URDF) and that the robot did not touch anything")
        at_edge = [p.name for p, x in zip(space, best) if p.low != 0.0 and (x < 0.005 or x > 0.995)]
        if at_edge:
            raise FitError(f"the fit did not converge inside the search range: {at_edge} ended at a bound "
                           f"({ {n: round(values[n], 4) for n in at_edge} }); the simulator model cannot match this "
                           "robot (check the profile's gains and limits)")
        std = _uncertainty(pool, values, space, profile.physics_period)
        evaluations = es.countevals
        iterations = es.countiter
    finally:
        pool.close()
    return FitResult(values, std, space, before_train, after_train, before_heldout, after_heldout,
                     evaluations, iterations, stop_reason, time.monotonic() - started, heldout)


def _settle_latency(pool: _Pool, values: dict[str, float], step: float) -> float:
    """The whole number of physics steps nearest the fit, or a neighbour if that fits better."""
    centre = int(round(values["latency"] / step))
    candidates = [k for k in (centre - 1, centre, centre + 1) if k >= 0]
    costs = pool.map(_cost, [({**values, "latency": k * step}, "train") for k in candidates])
    return candidates[int(np.argmin(costs))] * step


def _uncertainty(pool: _Pool, values: dict[str, float], space: list[Parameter], step: float) -> dict[str, float]:
    continuous = [p for p in space if p.name != "latency"]
    jobs = [(values, "train")]
    deltas = []
    for p in continuous:
        h = 1e-3 * (p.high - p.low)
        deltas.append(h)
        centre = values[p.name]
        up = min(centre + h, p.high) if centre + h <= p.high else centre
        down = max(centre - h, p.low)
        jobs += [({**values, p.name: up}, "train"), ({**values, p.name: down}, "train")]
    results = pool.map(_residual_vector, jobs)
    r0 = results[0]
    columns = []
    for k, p in enumerate(continuous):
        up_value = min(values[p.name] + deltas[k], p.high)
        down_value = max(values[p.name] - deltas[k], p.low)
        columns.append((results[1 + 2 * k] - results[2 + 2 * k]) / max(up_value - down_value, 1e-12))
    J = np.stack(columns, axis=1)
    dof = max(1, r0.size - J.shape[1])
    sigma2 = float(r0 @ r0) / dof
    covariance = sigma2 * np.linalg.pinv(J.T @ J)
    std = {p.name: float(math.sqrt(max(covariance[k, k], 0.0))) for k, p in enumerate(continuous)}
    std["latency"] = step / math.sqrt(12.0)
    return std
