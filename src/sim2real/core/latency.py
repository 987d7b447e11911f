"""Action latency on the robot: measured every tick, and compensated by predicting the state forward.

Two delays separate a measurement from the motion it causes:

* sensor -> command: from the sensor stamp of the state a policy computed on to the moment
  its command was published (the runtime's own work and queueing), measured each tick;
* command -> actuation: from publishing a command to the motors applying it (supervisor,
  transport, driver, actuator buffers), and the driver's share of it (from /joint_commands,
  the supervisor's output). Drivers that report joint effort echo it: the
  PD law ``tau = kp (q_target - q) - kd dq`` explains the measured efforts only with the
  targets that were really in force, so :class:`ActuationLatencyEstimator` finds the delay
  of the published targets that best explains the measured efforts (least squares over
  candidate delays, per-joint offsets removed: gravity compensation, feed-forward, bias).

:class:`StatePredictor` compensates: before the observation is built it integrates the
joints forward over the total latency with the PD law and the commands that will be in
force meanwhile (the rigid-body inertia from pinocchio), rotates the base orientation by
the measured angular velocity and keeps the estimator's base velocity, so the policy sees
the state at the moment its command takes effect. It lives in the policy runtime, not in
a node of its own: it needs the runtime's own command history and the exact instant of
each observation, and a separate node would add a DDS hop to the very delay it removes.

:func:`latency_randomization` turns measured latencies into a training randomization
(the ``config/randomization`` format), for ``sim2real dr from-latency``.
"""

from __future__ import annotations

import collections
from typing import Iterable, Optional, Sequence

import numpy as np

from sim2real.core.observation import RobotSignals
from sim2real.core.robot_profile import RobotProfile

MAX_LATENCY_S = 0.1  # candidate delays searched: 0 .. this
EXCITATION_RAD = 0.005  # targets must move at least this much (rms) in the window to tell delays apart


class ActuationLatencyEstimator:
    """Command -> actuation delay from the efforts a driver reports (see the module docstring).

    Times are one clock (the node's: sim time in lockstep). The effort reported at a sample
    is taken to be what the state at the previous sample produced under the targets then in
    force, the semantics of a driver that reports the torque it applied over its last period.
    """

    def __init__(
        self,
        profile: RobotProfile,
        window_s: float = 2.0,
        max_latency_s: float = MAX_LATENCY_S,
        resolution_s: Optional[float] = None,
        max_residual_ratio: float = 0.5,
    ):
        self.kp, self.kd = profile.kp, profile.kd
        self.sample_period = profile.sensing_period
        self.window_s = window_s
        self.resolution_s = resolution_s or self.sample_period / 2
        self.candidates = np.arange(0.0, max_latency_s + 1e-9, self.resolution_s)
        samples = int(window_s / self.sample_period) + 2
        self._states: collections.deque = collections.deque(maxlen=samples)
        self._commands: collections.deque = collections.deque(maxlen=samples)
        self.last_residual_ratio = float("nan")
        self.max_residual_ratio = max_residual_ratio

    def add_command(self, t: float, targets: Sequence[float]) -> None:
        self._commands.append((t, np.array(targets, dtype=float)))

    def add_state(
        self, t: float, position: Sequence[float], velocity: Sequence[float], effort: Sequence[float]
    ) -> None:
        if len(effort) == 0:
            return  # a driver without effort feedback: no echo to correlate with
        self._states.append(
            (t, np.asarray(position, dtype=float), np.asarray(velocity, dtype=float), np.asarray(effort, dtype=float))
        )

    def estimate(self) -> Optional[float]:
        """Seconds, or None: too few samples, targets that did not move, or no delay clearly best.

        Safe to call from another thread than the one adding samples (the deques are copied
        first). A loop over the ~100 candidate delays, each over every sample, cost 40-115 ms
        a call; the sums over command runs below, over the commands of the window only, 2-5 ms."""
        states, commands = list(self._states), list(self._commands)
        if len(commands) < 3 or len(states) < 20:
            return None
        t = np.array([s[0] for s in states])
        q = np.array([s[1] for s in states])
        dq = np.array([s[2] for s in states])
        tau = np.array([s[3] for s in states])
        command_t = np.array([c[0] for c in commands])
        targets = np.array([c[1] for c in commands])
        keep = t[1:] >= t[-1] - self.window_s
        t_prev, q_prev, dq_prev, tau_now = t[:-1][keep], q[:-1][keep], dq[:-1][keep], tau[1:][keep]
        if len(t_prev) < 10:
            return None
        # Only the commands that can be in force over the window under some candidate delay: the
        # last one sent before (first sample - largest delay) and every later one. The deque holds
        # ten times more at a 50 Hz policy, and searching them all cost ~7 ms a call.
        first = int(np.searchsorted(command_t, t_prev[0] - self.candidates[-1], side="right"))
        command_t, targets = command_t[max(0, first - 1) :], targets[max(0, first - 1) :]
        # Half a sample of tolerance: a command published at the very instant of a sample counts.
        tolerance = 1e-6
        # Under delay d, command k is in force for the samples with
        # command_t[k] + d <= t < command_t[k+1] + d: a contiguous run, found by one search per
        # (delay, command). The least-squares cost of each delay then follows from sums over
        # those runs (prefix sums), never from a [delays x samples x joints] array.
        n = len(t_prev)
        starts = np.searchsorted(t_prev, command_t[None, :] + self.candidates[:, None] - tolerance, side="left")
        ends = np.concatenate([starts[:, 1:], np.full((len(self.candidates), 1), n)], axis=1)
        counts = (ends - starts).astype(float)  # [delays, commands]
        valid = starts[:, 0] == 0  # a delay reaching back before the first command is not judged
        if not valid.any():
            return None
        measured = tau_now + self.kp * q_prev + self.kd * dq_prev  # tau = kp (target - q) - kd dq
        prefix = np.vstack([np.zeros((1, measured.shape[1])), np.cumsum(measured, axis=0)])
        run_sums = prefix[ends] - prefix[starts]  # [delays, commands, joints]
        sum_mt = np.einsum("ckj,kj->cj", run_sums, targets)
        sum_t = counts @ targets
        sum_tt = counts @ (targets**2)
        sum_m, sum_mm = measured.sum(axis=0), (measured**2).sum(axis=0)
        kp = self.kp
        # sum over samples of (m - kp T - mean)^2, per joint, summed over joints
        cost = sum_mm - 2 * kp * sum_mt + kp**2 * sum_tt - (sum_m - kp * sum_t) ** 2 / n
        costs = np.where(valid, cost.sum(axis=1), np.inf)
        variance = (sum_tt - sum_t**2 / n).sum(axis=1) / (n * targets.shape[1])
        spread = float(np.sqrt(np.clip(variance[valid], 0.0, None)).max())
        if spread < EXCITATION_RAD or not np.isfinite(costs).any():
            return None
        best = int(np.argmin(costs))
        finite = costs[np.isfinite(costs)]
        # The best delay must explain the efforts clearly better than a typical one.
        self.last_residual_ratio = float(costs[best] / np.median(finite)) if np.median(finite) > 0 else 0.0
        if self.last_residual_ratio > self.max_residual_ratio:
            return None  # no delay stands out: the targets were not in force (damping, hold) or too smooth
        return float(self.candidates[best])


class StatePredictor:
    """Predicts the robot's signals ``horizon`` seconds ahead (see the module docstring)."""

    def __init__(self, profile: RobotProfile, history_s: float = 0.5):
        from sim2real.core.kinematics import Kinematics

        self.profile = profile
        self.kinematics = Kinematics(profile)
        self.kp, self.kd = profile.kp, profile.kd
        self.effort_limits, self.velocity_limits = profile.effort_limits, profile.velocity_limits
        self.dt = profile.physics_period
        self._commands: collections.deque = collections.deque(maxlen=max(4, int(history_s / profile.policy_period)))

    def add_command(self, t: float, targets: Sequence[float]) -> None:
        self._commands.append((t, np.array(targets, dtype=float)))

    def _target_at(self, t: float, fallback: np.ndarray) -> np.ndarray:
        target = fallback
        for when, command in self._commands:
            if when <= t + 1e-9:
                target = command
            else:
                break
        return target

    def predict(self, signals: RobotSignals, t: float, horizon: float, actuation_latency: float) -> RobotSignals:
        """``signals`` measured at ``t``; returns the signals expected at ``t + horizon``. The
        command published at time c acts from ``c + actuation_latency``. A new object: the
        measured signals stay as they were."""
        if horizon <= 0 or signals.joint_position is None:
            return signals
        out = RobotSignals(**vars(signals))
        q = np.array(signals.joint_position, dtype=float)
        dq = np.zeros_like(q) if signals.joint_velocity is None else np.array(signals.joint_velocity, dtype=float)
        steps = max(1, int(round(horizon / self.dt)))
        h = horizon / steps
        # Joint-space inertia at the measured pose: enough over a few tens of milliseconds.
        inverse_inertia = np.linalg.inv(self.kinematics.mass_matrix(q))
        # The motors saturate: torque at the effort limits, speed at the velocity limits. Without
        # the speed limit a target step predicted the wrist at tens of rad/s, a state the robot
        # never reaches, and compensation made the shipped reach policy 8x worse at 20 ms.
        for k in range(steps):
            target = self._target_at(t + k * h - actuation_latency, q)
            torque = np.clip(self.kp * (target - q) - self.kd * dq, -self.effort_limits, self.effort_limits)
            dq = np.clip(dq + h * (inverse_inertia @ torque), -self.velocity_limits, self.velocity_limits)
            q = q + h * dq  # semi-implicit Euler: stable for stiff PD at this step
        out.joint_position = q
        if signals.joint_velocity is not None:
            out.joint_velocity = dq
        if signals.end_effector_position is not None:
            out.end_effector_position = self.kinematics.end_effector_position(q)
        if signals.base_orientation is not None and signals.base_angular_velocity is not None:
            out.base_orientation = _rotate(signals.base_orientation, signals.base_angular_velocity, horizon)
        return out


def _rotate(q_xyzw, omega_body, seconds: float) -> np.ndarray:
    """Orientation after turning at body rate ``omega_body`` for ``seconds``: q * exp(omega t / 2)."""
    angle_vector = np.asarray(omega_body, dtype=float) * seconds
    angle = float(np.linalg.norm(angle_vector))
    if angle < 1e-12:
        return np.array(q_xyzw, dtype=float)
    axis = angle_vector / angle
    s = np.sin(angle / 2)
    dx, dy, dz, dw = axis[0] * s, axis[1] * s, axis[2] * s, np.cos(angle / 2)
    x, y, z, w = q_xyzw
    return np.array(
        [
            w * dx + x * dw + y * dz - z * dy,
            w * dy - x * dz + y * dw + z * dx,
            w * dz + x * dy - y * dx + z * dw,
            w * dw - x * dx - y * dy - z * dz,
        ]
    )


def trained_latency(randomization: Optional[dict]) -> float:
    """The largest actuation latency (s) a policy met in training, from its metadata's final
    randomization (``sim2real.randomization``); 0 when it was trained without latency."""
    entry = ((randomization or {}).get("parameters") or {}).get("latency")
    if not isinstance(entry, dict):
        return 0.0
    for kind in ("uniform", "loguniform"):
        if kind in entry:
            return float(entry[kind][1])
    if "constant" in entry:
        return float(entry["constant"])
    if "normal" in entry:
        return float(entry["normal"]["mean"] + 2 * entry["normal"]["std"])
    return 0.0


def read_latency_log(paths: Iterable[str]) -> list[float]:
    """Total latencies (s) from policy_runtime ``latency_log`` files (JSON lines, key ``total_s``)."""
    import json
    from pathlib import Path

    samples = []
    for path in paths:
        file = Path(path)
        if not file.is_file():
            raise ValueError(
                f"latency log {path!r} not found; write one with: sim2real up --robot ROBOT --policy "
                "FILE --latency-log latency.jsonl (launch: latency_log:=latency.jsonl; node parameter "
                "latency_log)"
            )
        for number, line in enumerate(file.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                samples.append(float(json.loads(line)["total_s"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{path}:{number}: not a latency log line ({exc}); expected "
                    '{"total_s": <seconds>, ...} per line as policy_runtime writes it'
                ) from None
    return samples


def latency_randomization(
    samples_s: Iterable[float], name: str = "measured_latency", percentiles: tuple[float, float] = (1.0, 99.0)
) -> tuple[dict, dict]:
    """(randomization, summary): a mapping in the ``config/randomization`` format whose ``latency``
    is uniform over the measured distribution's [p1, p99] (seconds; load the saved YAML with
    ``load_randomization``), and the distribution's figures (samples, p1, p50, p99, max)."""
    samples = np.asarray([s for s in samples_s if np.isfinite(s)], dtype=float)
    if samples.size == 0:
        raise ValueError(
            "no latency samples: run the policy with motion (the runtime measures actuation "
            "latency only while its targets move) and collect again"
        )
    if np.any(samples < 0):
        raise ValueError(
            f"negative latency samples ({samples.min():.4f} s): the clocks of the stamps differ; "
            "measure on one clock (lockstep, or a driver on this computer's time)"
        )
    low, high = (float(v) for v in np.percentile(samples, percentiles))
    parameters = {
        "latency": {"constant": round(low, 4)} if high - low < 1e-4 else {"uniform": [round(low, 4), round(high, 4)]}
    }
    summary = {
        "samples": int(samples.size),
        "p1_s": float(np.percentile(samples, 1)),
        "p50_s": float(np.percentile(samples, 50)),
        "p99_s": float(np.percentile(samples, 99)),
        "max_s": float(samples.max()),
    }
    return {"name": name, "parameters": parameters}, summary


class LatencyMonitor:
    """The runtime's latency bookkeeping: per-tick sensor -> command latency, the actuation latency
    estimated once per :meth:`update` (or :meth:`fit` then :meth:`record`), their distributions, the overrun alarm and, when enabled,
    the compensation of each observation (:meth:`compensate`). Times in seconds, one clock."""

    def __init__(
        self,
        profile: RobotProfile,
        compensate: bool = False,
        horizon: float = 0.0,
        budget: float = 0.0,
        window: int = 3000,
        trained_latency: float = 0.0,
    ):
        """``trained_latency``: the latency (s) the policy was trained to absorb (the top of its
        training randomization, :func:`trained_latency`); only the measured latency beyond it is
        predicted away. Measured with the shipped reach policy (trained up to 17.5 ms), no ROS:
        at 20 ms injected, predicting all 20 ms left 5.0 cm of reach error and the excess 2.5 ms
        0.67 cm (3.3 cm uncompensated); at 40 ms, 7.2 cm and 9.1 cm (47.7 cm uncompensated)."""
        from sim2real.core.policy_tick import RollingStats

        self.enabled = compensate
        self.trained_latency = trained_latency
        self.fixed_horizon = horizon  # s; 0: the measured latency
        self.budget = budget or profile.policy_period
        self.sensor_to_command = RollingStats(window)
        self.actuation = RollingStats(window)
        # Policy command -> motors (the whole path: supervisor, transport, driver), and the
        # driver's share alone (/joint_commands -> motors). The supervisor may forward a command
        # a period late: only the first shows that, and it is what compensation must cover.
        # A delay that varies (a supervisor forwarding now or a period late) fits less sharply.
        self.actuation_estimator = ActuationLatencyEstimator(profile, max_residual_ratio=0.8)
        self.driver_estimator = ActuationLatencyEstimator(profile)
        self.driver = RollingStats(window)
        self._driver: collections.deque = collections.deque(maxlen=9)
        self.predictor = StatePredictor(profile) if compensate else None
        self._estimates: collections.deque = collections.deque(maxlen=9)
        self._raw_sensor_to_command = 0.0  # as measured, negative when the driver's clock runs ahead
        self.clock_ahead = 0  # commands published "before" the state they answer: a driver clock ahead of ours
        self._recent: collections.deque = collections.deque(maxlen=25)  # the horizon follows the last half second

    def on_state(self, t: float, position, velocity, effort) -> None:
        self.actuation_estimator.add_state(t, position, velocity, effort)
        self.driver_estimator.add_state(t, position, velocity, effort)

    def on_command(self, stamp: float, published: float, targets) -> None:
        """The runtime published ``targets`` computed on the state stamped ``stamp``."""
        # Negative: the state's stamp is later than our clock, so the driver stamps with a clock that
        # runs ahead of this computer's. Clamped for the predictor and the statistics, counted, and
        # logged as measured (a log of clamped zeros would read as "no latency").
        self._raw_sensor_to_command = published - stamp
        if self._raw_sensor_to_command < 0:
            self.clock_ahead += 1
        clamped = max(0.0, self._raw_sensor_to_command)
        self.sensor_to_command.add(clamped)
        self._recent.append(clamped)
        if not np.all(np.isfinite(targets)):
            # The supervisor holds instead of sending these: they never act on the motors, and
            # predicted forward they would make every later observation, so every action, NaN.
            return
        self.actuation_estimator.add_command(published, targets)
        if self.predictor is not None:
            self.predictor.add_command(published, targets)

    def on_hardware_command(self, t: float, targets) -> None:
        """The targets the robot receives (/joint_commands, after the supervisor), seen at ``t``:
        their delay to the motors is the driver's share, reported beside the whole path."""
        self.driver_estimator.add_command(t, targets)

    def fit(self) -> tuple[Optional[float], Optional[float]]:
        """(driver's share, whole actuation path) fitted on the recent samples, either None when
        not clear; changes nothing. The search costs 5-10 ms of numpy on 2 cores: a node calls
        this off its executor thread (safe: the estimators copy their samples first) and hands
        the result to :meth:`record` on it."""
        return self.driver_estimator.estimate(), self.actuation_estimator.estimate()

    def record(self, fitted: tuple[Optional[float], Optional[float]]) -> Optional[dict]:
        """Take in a :meth:`fit`. Returns the new sample (sensor_to_command_s, actuation_s,
        total_s), or None when the whole path was not fitted."""
        driver, estimate = fitted
        if driver is not None:
            self._driver.append(driver)
            self.driver.add(driver)
        if estimate is None:
            return None
        self._estimates.append(estimate)
        self.actuation.add(estimate)
        sample = {
            "sensor_to_command_s": self._raw_sensor_to_command,
            "actuation_s": estimate,
            "total_s": self._raw_sensor_to_command + estimate,
        }
        return sample

    def update(self) -> Optional[dict]:
        """Fit and record in one call (about once a second: the fit searches every delay)."""
        return self.record(self.fit())

    @property
    def actuation_latency(self) -> Optional[float]:
        """Median of the recent estimates (one fitted while the supervisor held or damped, targets
        not in force, must not swing the horizon); the driver's share until the whole path is known."""
        recent = self._estimates or self._driver
        return float(np.median(recent)) if recent else None

    @property
    def horizon(self) -> float:
        if self.fixed_horizon > 0:
            total = self.fixed_horizon
        else:
            recent = float(np.median(self._recent)) if self._recent else 0.0
            total = recent + (self.actuation_latency or 0.0)
        return max(0.0, total - self.trained_latency)

    def compensate(self, signals: RobotSignals, stamp: float) -> RobotSignals:
        if self.predictor is None:
            return signals
        horizon = self.horizon
        actuation = self.actuation_latency
        if actuation is None or self.fixed_horizon > 0:  # a given latency: all of it past the publish
            actuation = max(
                0.0, (self.fixed_horizon or horizon) - (float(np.median(self._recent)) if self._recent else 0.0)
            )
        return self.predictor.predict(signals, stamp, horizon, actuation)

    def overrun(self) -> str:
        """Why the latency is over budget ('' when it is not)."""
        summary = self.sensor_to_command.summary_ms("s")
        if not summary:
            return ""
        total = summary["s_p99_ms"] * 1e-3 + (self.actuation_latency or 0.0)
        if total > self.budget:
            return (
                f"latency overrun: sensor->command p99 {summary['s_p99_ms']:.1f} ms + actuation "
                f"{(self.actuation_latency or 0.0) * 1e3:.1f} ms > budget {self.budget * 1e3:.1f} ms"
            )
        return ""

    def summary(self) -> dict[str, str]:
        values = {
            **self.sensor_to_command.summary_ms("sensor_to_command"),
            **self.actuation.summary_ms("actuation"),
            **self.driver.summary_ms("driver_actuation"),
        }
        out = {k: f"{v:.2f}" for k, v in values.items()}
        out["actuation_latency_ms"] = (
            "unknown" if self.actuation_latency is None else f"{self.actuation_latency * 1e3:.1f}"
        )
        out["compensation"] = "on" if self.enabled else "off"
        out["horizon_ms"] = f"{self.horizon * 1e3:.1f}"
        if self.clock_ahead:
            out["clock_ahead_samples"] = str(self.clock_ahead)
        return out
