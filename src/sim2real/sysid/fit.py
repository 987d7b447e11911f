"""Fit the simulator's physical conditions to sysid recordings with CMA-ES.

What is fitted (names are :class:`PhysicalConditions` fields, so the result feeds the
randomization directly): ``motor_strength``, ``mass_scale``, ``joint_friction`` (Coulomb),
``joint_damping`` (viscous), ``armature`` (rotor inertia), ``latency``, and
``ground_friction`` when a floating-base robot stands on the ground (not on a stand).
Friction, damping and armature are one value for all joints because that is what the
simulator's conditions express (SimWorld adds armature as link inertia about each joint
axis: see ``SimWorld._armature_weights_per_link``); for fixed-base arms the rigid-body
regression, ``rigid_body.py``, identifies them per joint from the measured efforts.

Cost: squared errors between measured and replayed joint positions, velocities (weighted
by ``VELOCITY_WEIGHT`` s) and motor efforts (``EFFORT_WEIGHT`` rad/(N*m)) over windows of
the *training* part of each recording (its first ``train_fraction``); the rest is held out
and only scored. Search: a short CMA-ES run over all parameters finds the basin, least
squares (trust-region reflective, finite-difference Jacobian computed in parallel) polishes
the continuous ones. Uncertainty: the standard deviations come from the Newey-West sandwich at
the optimum (``uncertainty.py``): the residuals of a trajectory are correlated in time, and
position, velocity and effort errors differ in size, where the Gauss-Newton ``s^2 (J^T J)^-1``
assumes independent residuals of one size (docs/sysid.md, Accuracy, compares the two).
Latency moves in whole physics steps: it is settled by comparing the neighbouring steps,
then by walking its profile downhill (neighbours with the other parameters re-polished), and
its std is the step's quantisation std (step / sqrt(12)).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sim2real.core.errors import Sim2RealError
from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.dataset import Dataset
from sim2real.sysid.replay import Replayer, Window, windows
from sim2real.sysid.uncertainty import Z95, gauss_newton_covariance, newey_west_covariance

VELOCITY_WEIGHT = 0.05  # s: 1 rad/s of velocity error costs as much as 0.05 rad of position error
# rad/(N*m): 1 N*m of effort error costs as much as 1 mrad. Positions alone cannot separate
# motor strength from mass, friction and damping (scaling every torque leaves the motion
# unchanged); the measured motor effort fixes the absolute torque scale.
EFFORT_WEIGHT = 1e-3
LATENCY_ROUNDS = 3
LATENCY_PROFILE_STEPS = 4  # least-squares steps per neighbouring latency in the final profile
SKIP_S = 0.04  # s at the start of each window not scored: commands in flight at the start are approximated
# A 95 % interval wider than this share of a parameter's search range: the data leave it loose.
LOOSE_SHARE = 0.25
# What a recording needs to pin each parameter down (what a loose one asks for).
PINNED_BY = {
    "motor_strength": "motions that need large motor efforts (a larger or faster excitation), with efforts recorded",
    "mass_scale": "poses across the joints' range, where gravity loads the joints differently",
    "joint_friction": "slow motions with many velocity reversals",
    "joint_damping": "a wide spread of joint speeds (a faster excitation)",
    "armature": "large joint accelerations (higher excitation frequencies)",
    "ground_friction": "feet that slip or push sideways, which standing still never does",
}

# The replay of a bag recorded on a stand holds the base in the air, so the fitted mass_scale is
# the legs' alone: the trunk's mass (half a quadruped's, and where a payload sits) never loads a
# joint there. `dr from-sysid` keeps its base randomization's mass range for such a fit, unless
# `sysid weigh` has weighed the robot standing.
STAND_MASS_KEY = "mass_scale of the trunk"
STAND_MASS = (
    "recorded on a stand (suspended): the stand carries the trunk, so mass_scale above is the legs'; "
    "the trunk's mass and any payload are not seen (sim2real sysid weigh weighs the robot standing)"
)


@dataclass(frozen=True)
class Parameter:
    name: str
    low: float
    high: float
    nominal: float
    unit: str


def search_space(profile: RobotProfile, suspended: bool = False) -> list[Parameter]:
    """The conditions fitted; ``ground_friction`` only for a floating-base robot recorded
    standing (on a stand its feet never touch the ground, so nothing in the data could fix it)."""
    space = [
        Parameter("motor_strength", 0.5, 1.5, 1.0, ""),
        Parameter("mass_scale", 0.5, 1.6, 1.0, ""),
        Parameter("joint_friction", 0.0, 0.1 * float(profile.effort_limits.min()), 0.0, "N*m"),
        Parameter("joint_damping", 0.0, 2.0, 0.0, "N*m*s/rad"),
        Parameter("armature", 0.0, 0.2, 0.0, "kg*m^2"),
        Parameter("latency", 0.0, 0.04, 0.0, "s"),
    ]
    if not profile.fixed_base and not suspended:
        space.append(Parameter("ground_friction", 0.2, 1.5, 0.8, ""))
    return space


class FitError(Sim2RealError, RuntimeError):
    """The fit did not converge or cannot start; no identified YAML is written."""


@dataclass
class FitOptions:
    window: float = 2.0  # s per replay window
    train_fraction: float = 0.7
    train_seconds: float = 16.0  # s of training windows replayed per cost evaluation
    heldout_seconds: float = 12.0
    popsize: int = 8
    cma_iterations: int = 10  # CMA-ES only finds the basin; least squares converges
    # Least-squares steps before the fit counts as not converged: a 30-s lockstep recording can take
    # more than 30 while still converging; scipy's own default for trf is 100 per parameter.
    max_iterations: int = 100
    tolerance: float = 1e-4  # relative change of the cost that counts as converged
    max_rmse: float = 0.05  # rad: a fit whose training RMSE stays above this does not explain the data
    workers: int = 2
    seed: int = 0
    compare_period: float = 0.01  # s between compared states: finer adds cost, not information
    # s of lags the std's Newey-West sum takes in: about how long a replay's error transient
    # lasts (PD tracking, latency). Of 0.05-0.5 s, a whole window and a lag-one plug-in rule,
    # 0.2 s gave the std closest to the benchmark fits' errors (docs/sysid.md, Accuracy).
    std_bandwidth: float = 0.2


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
    suspended: bool = False  # recorded on a stand and replayed so
    # What std would be if the residuals were independent (benchmarks compare the two).
    std_gauss_newton: dict[str, float] = field(default_factory=dict)
    bandwidth_s: float = 0.0  # s: the lags the Newey-West std took in

    def loose(self) -> dict[str, str]:
        """Parameters the data leave loose, with the reason and what a recording would need."""
        found = {}
        for p in self.space:
            half = Z95 * self.std[p.name]
            if p.name != "latency" and half > LOOSE_SHARE * (p.high - p.low):
                found[p.name] = (
                    f"the data leave it loose: 95 % interval +-{half:.3g} {p.unit}".rstrip()
                    + f", over {LOOSE_SHARE * 100:.0f} % of its search range either side; record {PINNED_BY[p.name]}"
                )
        return found

    def to_dict(self, joint_names: list[str]) -> dict[str, Any]:
        def per_joint(values):
            return {name: round(float(v), 6) for name, v in zip(joint_names, values)}

        parameters = {}
        for p in self.space:
            value, std = self.values[p.name], self.std[p.name]
            # Latency is on the physics-step grid (std = step / sqrt(12)): its interval is the step.
            half = std * (math.sqrt(3.0) if p.name == "latency" else Z95)
            parameters[p.name] = {
                "value": round(value, 6),
                "std": round(std, 6),
                # Clipped to the search range: the fit never leaves it.
                "interval_95": [round(max(value - half, p.low), 6), round(min(value + half, p.high), 6)],
                "nominal": p.nominal,
                "unit": p.unit,
                "search_range": [p.low, p.high],
            }
        return {
            "method": "CMA-ES over replays of the recorded commands in SimWorld (windows from the measured state)",
            # On a stand the trunk hangs from it: read by `dr from-sysid` (see ``STAND_MASS``).
            "suspended": self.suspended,
            "parameters": parameters,
            "not_identified": {
                "per_joint_losses": "SimWorld's joint_friction/joint_damping/armature are one value for all "
                "joints; see rigid_body for per-joint friction and armature (arms)",
                **(
                    {
                        "ground_friction": "recorded on a stand (suspended): the feet never touched the ground",
                        STAND_MASS_KEY: STAND_MASS,
                    }
                    if self.suspended
                    else {}
                ),
                **self.loose(),
            },
            "position_rmse_rad": {
                "train_before": per_joint(self.train_rmse_before),
                "train_after": per_joint(self.train_rmse_after),
                "heldout_before": per_joint(self.heldout_rmse_before),
                "heldout_after": per_joint(self.heldout_rmse_after),
            },
            "optimizer": {
                "evaluations": self.evaluations,
                "iterations": self.iterations,
                "stop": self.stop,
                "wall_time_s": round(self.wall_time, 1),
                "std": f"Newey-West (autocorrelation-consistent), bandwidth {self.bandwidth_s:.2f} s",
            },
        }


# -- evaluation (also in worker processes) ---------------------------------------------------------
_REPLAYER: Replayer | None = None
_WINDOWS: dict[str, list[Window]] = {}
_STRIDE = 1


def _init_worker(profile: RobotProfile, dataset: Dataset, window_sets: dict[str, list[Window]], stride: int) -> None:
    global _REPLAYER, _WINDOWS, _STRIDE
    _REPLAYER = Replayer(profile, dataset)
    _WINDOWS = window_sets
    _STRIDE = stride


def _scored(window: Window) -> tuple[np.ndarray, np.ndarray]:
    """The compared states of a window and which of them are scored."""
    seg = _REPLAYER.segments[window.segment]
    measured = _REPLAYER.compared(window, _STRIDE)
    return measured, seg.t[measured] >= seg.t[window.start] + SKIP_S


def _window_sizes(which: str) -> list[int]:
    """Scored samples per window of a set, in the order :func:`_residuals` joins them."""
    return [int(np.count_nonzero(_scored(window)[1])) for window in _WINDOWS[which]]


def _residuals(conditions: dict[str, float], which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity and effort errors [samples, joints] over a window set (effort
    errors are zero when the recordings carry no effort)."""
    replayer = _REPLAYER
    errors: tuple[list, list, list] = ([], [], [])
    for window in _WINDOWS[which]:
        seg = replayer.segments[window.segment]
        simulated = replayer.run(window, conditions, _STRIDE)
        measured, keep = _scored(window)
        has_effort = bool(np.any(seg.effort))
        for out, sim, real in zip(errors, simulated, (seg.q, seg.dq, seg.effort)):
            error = (sim - real[measured])[keep]
            out.append(error if has_effort or real is not seg.effort else np.zeros_like(error))
    return tuple(np.concatenate(e) for e in errors)  # type: ignore[return-value]


def _residual_vector(job: tuple[dict[str, float], str]) -> np.ndarray:
    q_err, dq_err, effort_err = _residuals(*job)
    return np.concatenate([q_err.ravel(), VELOCITY_WEIGHT * dq_err.ravel(), EFFORT_WEIGHT * effort_err.ravel()])


def _cost(job: tuple[dict[str, float], str]) -> float:
    try:
        r = _residual_vector(job)
    except ValueError:  # conditions the world refuses: worst cost, never a crash of the search
        return math.inf
    value = float(np.mean(r**2)) * 3.0  # the three terms have equal sizes: this sums their mean squares
    return value if math.isfinite(value) else math.inf


def _rmse(job: tuple[dict[str, float], str]) -> np.ndarray:
    q_err, _, _ = _residuals(*job)
    return np.sqrt(np.mean(q_err**2, axis=0))


class _Pool:
    """A process pool, or this process when ``workers`` is 1 (easier to debug).

    Workers come from a fork server, not from a fork of this process: a process with threads
    (DDS, torch, a test session's ROS probes) can be forked while one of them holds a lock, and
    the child then waits on it for ever (in futex_wait). The server imports this module once, so each worker starts warm."""

    def __init__(self, workers: int, init_args: tuple):
        self.pool = None
        if workers > 1:
            # An exception in a pool's initializer makes multiprocessing start the worker again,
            # for ever (map never returns): build the worker state here first, so it is raised.
            global _REPLAYER
            _init_worker(*init_args)
            _REPLAYER.close()
            _REPLAYER = None
            context = mp.get_context("forkserver")
            context.set_forkserver_preload([__name__])
            self.pool = context.Pool(workers, _init_worker, init_args)
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


def _check_options(options: FitOptions) -> None:
    if not 0.0 < options.train_fraction < 1.0:  # NaN fails too
        raise FitError(
            f"train fraction {options.train_fraction!r} must lie strictly between 0 and 1 (the rest "
            "of each recording is held out to judge the fit); e.g. 0.7"
        )
    for name, least in (("max_iterations", 1), ("cma_iterations", 1), ("popsize", 1), ("workers", 0)):
        value = getattr(options, name)  # workers 0: replays in this process
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise FitError(f"{name.replace('_', '-')} must be a whole number >= {least}, got {value!r}")


def _training_and_heldout(dataset: Dataset, options: FitOptions) -> tuple[list[Window], list[Window]]:
    train = _spread(
        windows(dataset.segments, options.window, 0.0, options.train_fraction), options.train_seconds, options.window
    )
    heldout = _spread(
        windows(dataset.segments, options.window, options.train_fraction, 1.0), options.heldout_seconds, options.window
    )
    if not train or not heldout:
        raise FitError(
            f"the recordings ({dataset.duration:.1f} s) are too short for {options.window:g} s windows "
            "in both the training and the held-out part: record at least 20 s of excitation"
        )
    return train, heldout


class _Space:
    """The fitted parameters in normalised coordinates: each one's search range maps onto [0, 1]."""

    def __init__(self, parameters: list[Parameter]):
        self.parameters = parameters
        self.names = [p.name for p in parameters]
        self.lows = np.array([p.low for p in parameters])
        self.spans = np.array([p.high - p.low for p in parameters])
        self.smooth = [i for i, name in enumerate(self.names) if name != "latency"]

    def conditions(self, x: np.ndarray) -> dict[str, float]:
        values = self.lows + self.spans * np.clip(x, 0.0, 1.0)
        return {name: float(v) for name, v in zip(self.names, values)}

    def normalised(self, values: dict[str, float]) -> np.ndarray:
        return np.array([(values[n] - lo) / span for n, lo, span in zip(self.names, self.lows, self.spans)])

    def with_smooth(self, at: dict[str, float], x: np.ndarray) -> dict[str, float]:
        """``at`` with its continuous parameters replaced by ``x`` (normalised), its latency kept."""
        full = self.normalised(at)
        full[self.smooth] = x
        return {**self.conditions(full), "latency": at["latency"]}

    def at_edge(self, values: dict[str, float]) -> list[str]:
        """Parameters stopped by their search range: at the top, or at a bottom other than 0 (friction,
        latency, ... may rest at 0; at any other bound the range, not the robot, stopped them)."""
        full = self.normalised(values)
        return [name for name, x, low in zip(self.names, full, self.lows) if x > 1 - 1e-3 or (low != 0.0 and x < 1e-3)]


def _cma_search(space: _Space, pool: _Pool, x0: np.ndarray, options: FitOptions, log: Callable[[str], None]):
    """CMA-ES over every parameter (latency included) on the training windows: the basin."""
    import cma

    es = cma.CMAEvolutionStrategy(
        np.clip(x0, 0.05, 0.95),
        0.3,
        {
            "bounds": [0.0, 1.0],
            "popsize": options.popsize,
            "maxiter": options.cma_iterations,
            "seed": options.seed + 1,
            "verbose": -9,
        },
    )
    while not es.stop():
        xs = es.ask()
        costs = pool.map(_cost, [(space.conditions(x), "train") for x in xs])
        es.tell(xs, costs)
        log(f"  CMA-ES iteration {es.countiter:3d}: best cost {es.result.fbest:.3e} (weighted mean square, rad^2)")
    return es


class _Polisher:
    """Least squares (trust-region reflective, finite-difference Jacobian replayed in parallel) over
    the continuous parameters, the latency held where :meth:`polish` is told; counts the replays."""

    def __init__(self, space: _Space, pool: _Pool, options: FitOptions, log: Callable[[str], None]):
        self.space, self.pool, self.options, self.log = space, pool, options, log
        self.anchor: dict[str, float] = {}  # the values the polished continuous parameters go into
        self.cache: dict[bytes, np.ndarray] = {}
        self.evaluations = 0

    def _residuals_at(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        jobs = []
        for x in xs:
            full = self.space.normalised(self.anchor)
            full[self.space.smooth] = x
            jobs.append((self.space.conditions(full), "train"))
        return self.pool.map(_residual_vector, jobs)

    def _fun(self, x: np.ndarray) -> np.ndarray:
        key = np.asarray(x).tobytes()
        if key not in self.cache:
            self.cache[key] = self._residuals_at([x])[0]
        return self.cache[key]

    def _jac(self, x: np.ndarray) -> np.ndarray:
        h = 1e-3
        points = []
        for k in range(len(x)):
            up, down = x.copy(), x.copy()
            up[k] = min(1.0, x[k] + h)
            down[k] = max(0.0, x[k] - h)
            points += [up, down]
        r = self._residuals_at(points)
        return np.stack(
            [(r[2 * k] - r[2 * k + 1]) / (points[2 * k][k] - points[2 * k + 1][k]) for k in range(len(x))], axis=1
        )

    def polish(self, at: dict[str, float], x0: np.ndarray, max_nfev: int):
        """Least squares over the continuous parameters from ``x0``, the rest (latency) held at ``at``."""
        from scipy.optimize import least_squares

        self.anchor.clear()
        self.anchor.update(at)
        self.cache.clear()  # residuals depend on the latency held fixed
        result = least_squares(
            self._fun,
            x0,
            jac=self._jac,
            bounds=(0.0, 1.0),
            method="trf",
            ftol=self.options.tolerance,
            xtol=1e-6,
            max_nfev=max_nfev,
        )
        self.evaluations += result.nfev + result.njev * 2 * len(self.space.smooth)
        return result

    def polish_fully(self, at: dict[str, float], x0: np.ndarray):
        polished = self.polish(at, x0, self.options.max_iterations)
        self.log(
            f"least squares (latency {at['latency'] * 1e3:.0f} ms): {polished.message} after "
            f"{polished.nfev} steps; cost {2 * polished.cost / polished.fun.size * 3:.3e}"
        )
        if polished.status <= 0:
            raise FitError(
                f"the fit did not converge: least squares stopped with '{polished.message}' after "
                f"{polished.nfev} steps. Record a longer or richer excitation (all joints moving, "
                "tens of seconds), or raise --max-iterations"
            )
        return polished

    def alternate_with_latency(self, values: dict[str, float], step: float, top: int):
        """Latency trades off against damping and friction: alternate polishing the continuous
        parameters with re-settling the latency until the latency stays put."""
        for _ in range(LATENCY_ROUNDS):
            polished = self.polish_fully(values, self.space.normalised(values)[self.space.smooth])
            values = self.space.with_smooth(values, polished.x)
            latency, n = _settle_latency(self.pool, values, step, top, reach=3)
            self.evaluations += n
            if abs(latency - values["latency"]) < 0.5 * step:
                return values, polished
            values["latency"] = latency
        # The rounds ran out with the latency moved: polish at that latency.
        polished = self.polish_fully(values, self.space.normalised(values)[self.space.smooth])
        return self.space.with_smooth(values, polished.x), polished

    def walk_latency(self, values: dict[str, float], polished, step: float, top: int):
        """Alternating can stop in a valley where latency, damping and armature trade off: a
        latency steps off, with damping and armature bent to make up for it, fits better than
        the right latency with the wrong damping. Walk the latency profile downhill (see
        walk_latency_profile): on the Go2 on a stand it reaches the hidden 16 ms from 0 ms and
        from 8 ms, where comparing the neighbours within two steps alone stops short."""
        start_k = int(round(values["latency"] / step))

        def short_polish(k: int, x: np.ndarray) -> tuple[float, np.ndarray]:
            result = self.polish({**values, "latency": k * step}, x, LATENCY_PROFILE_STEPS)
            return result.cost, result.x

        best_k, _, best_x = walk_latency_profile(start_k, polished.cost, polished.x, top, short_polish)
        if best_k == start_k:
            return values, polished
        self.log(f"latency profile: {best_k * step * 1e3:.0f} ms fits better than {values['latency'] * 1e3:.0f} ms")
        values["latency"] = best_k * step
        polished = self.polish_fully(values, best_x)
        return self.space.with_smooth(values, polished.x), polished


def fit_conditions(
    profile: RobotProfile,
    dataset: Dataset,
    options: FitOptions | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> FitResult:
    """CMA-ES finds the basin (latency included), least squares polishes the continuous
    parameters: CMA-ES alone needs hundreds of replays to converge tightly, which this
    problem (smooth in everything but latency) does not justify."""
    import cma  # noqa: F401  (both used further down: a missing one fails here, before any replay)
    import scipy.optimize  # noqa: F401

    options = options or FitOptions()
    _check_options(options)
    started = time.monotonic()
    space = _Space(search_space(profile, dataset.suspended))
    train, heldout = _training_and_heldout(dataset, options)
    x0 = space.normalised({p.name: p.nominal for p in space.parameters})
    stride = max(1, int(round(options.compare_period / dataset.segments[0].sample_period)))
    pool = _Pool(options.workers, (profile, dataset, {"train": train, "heldout": heldout}, stride))
    try:
        nominal = space.conditions(x0)
        before_train, before_heldout = pool.map(_rmse, [(nominal, "train"), (nominal, "heldout")])
        log(
            f"nominal simulator: training position RMSE {_mean_rmse(before_train) * 1e3:.2f} mrad; "
            f"CMA-ES over {space.names} ({len(train)} training windows of {options.window:g} s)"
        )
        es = _cma_search(space, pool, x0, options, log)
        polisher = _Polisher(space, pool, options, log)
        polisher.evaluations = es.countevals
        values = space.conditions(np.array(es.result.xbest))
        step = profile.physics_period
        top = int(math.floor(next(p.high for p in space.parameters if p.name == "latency") / step + 1e-9))
        values["latency"], n = _settle_latency(pool, values, step, top)
        polisher.evaluations += n
        values, polished = polisher.alternate_with_latency(values, step, top)
        values, polished = polisher.walk_latency(values, polished, step, top)
        after_train, after_heldout = pool.map(_rmse, [(values, "train"), (values, "heldout")])
        if _mean_rmse(after_train) > options.max_rmse:
            raise FitError(
                f"the fit did not converge to a model that explains the data: training position RMSE "
                f"{_mean_rmse(after_train):.3f} rad > {options.max_rmse:g} rad. Check that the bag "
                "matches the robot profile (gains, URDF) and that the robot touched nothing"
            )
        at_edge = space.at_edge(values)
        if at_edge:
            raise FitError(
                f"the fit did not converge inside the search range: {at_edge} ended at a bound "
                f"({ {n: round(values[n], 4) for n in at_edge} }); the simulator model cannot match "
                "this robot (check the profile's gains and limits)"
            )
        spacing = stride * dataset.segments[0].sample_period  # s between scored samples
        uncertainty = _Uncertainty(
            polished,
            [space.parameters[i] for i in space.smooth],
            space.spans[space.smooth],
            pool.map(_window_sizes, ["train"])[0],
            len(profile.joint_names),
            options.std_bandwidth / spacing,
        )
    finally:
        pool.close()
    return FitResult(
        values,
        uncertainty.std(profile.physics_period),
        space.parameters,
        before_train,
        after_train,
        before_heldout,
        after_heldout,
        polisher.evaluations,
        es.countiter,
        f"CMA-ES {es.countiter} iterations; least squares: {polished.message}",
        time.monotonic() - started,
        heldout,
        dataset.suspended,
        uncertainty.std(profile.physics_period, gauss_newton_covariance),
        options.std_bandwidth,
    )


def _mean_rmse(per_joint: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.asarray(per_joint) ** 2)))


def _settle_latency(pool: _Pool, values: dict[str, float], step: float, top: int, reach: int = 1) -> tuple[float, int]:
    """The whole number of physics steps, in [0, top], within ``reach`` of the fit that fits best."""
    centre = min(max(int(round(values["latency"] / step)), 0), top)
    candidates = [k for k in range(centre - reach, centre + reach + 1) if 0 <= k <= top]
    costs = pool.map(_cost, [({**values, "latency": k * step}, "train") for k in candidates])
    return candidates[int(np.argmin(costs))] * step, len(candidates)


def walk_latency_profile(
    start: int, start_cost: float, start_x: Any, top: int, evaluate: Callable[[int, Any], tuple[float, Any]]
) -> tuple[int, float, Any]:
    """Walk the latency profile downhill on the physics-step grid [0, top].

    From the best step so far, evaluate the steps within two of it not evaluated yet
    (``evaluate(k, x) -> (cost, x)``, starting from the best step's ``x``), move to the best
    of them if it fits better, and stop when none does. Every move lowers the cost and
    visits a new step, so the walk ends. Returns the best (step, cost, x)."""
    best = (start, start_cost, start_x)
    seen = {start}
    while True:
        improved = None
        for k in (best[0] + d for d in (-2, -1, 1, 2)):
            if 0 <= k <= top and k not in seen:
                seen.add(k)
                cost, x = evaluate(k, best[2])
                if cost < best[1] and (improved is None or cost < improved[1]):
                    improved = (k, cost, x)
        if improved is None:
            return best
        best = improved


class _Uncertainty:
    """Standard deviations of the polished parameters (latency: its grid's quantisation)."""

    def __init__(
        self,
        polished,
        parameters: list[Parameter],
        spans: np.ndarray,
        window_sizes: list[int],
        joints: int,
        bandwidth: float,
    ):
        self.parameters = parameters
        self.jac = polished.jac / spans  # d residual / d value
        self.residuals = polished.fun
        # Three blocks of residuals (position, velocity, effort), each [samples, joints].
        self.covariance = newey_west_covariance(self.jac, self.residuals, window_sizes, 3, joints, bandwidth)

    def std(self, step: float, covariance_of: Callable | None = None) -> dict[str, float]:
        covariance = self.covariance if covariance_of is None else covariance_of(self.jac, self.residuals)
        std = {p.name: float(math.sqrt(max(covariance[k, k], 0.0))) for k, p in enumerate(self.parameters)}
        std["latency"] = step / math.sqrt(12.0)
        return std
