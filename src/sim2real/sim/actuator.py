"""Joint actuators of a simulated robot: PD in torque mode, latency, torque limit, joint losses.

One :class:`Actuator` drives all joints of a robot at once (numpy over joints). It is
called once per physics step with the measured joint state and returns the torque for
that step; it keeps its own clock in physics steps, so a command is stamped with the
step it was given at and delivered ``latency`` later.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Sequence

import numpy as np

ArrayLike = Sequence[float] | np.ndarray | float

# Lower bound on the tanh smoothing velocity of Coulomb friction, rad/s: below this the
# "friction" would stop being a friction model and become a numerical switch.
MIN_FRICTION_VELOCITY = 0.01
# PyBullet applies these torques explicitly for a whole step, so a velocity-opposing gain c
# on a joint of inertia I changes dq by the factor (1 - c*dt/I): above c = I/dt it reverses
# the motion (which no damper does) and above 2*I/dt it diverges. A real damper that strong
# stops the joint within a step anyway, so capping c at a fraction of I/dt changes nothing
# physical; the fraction 0.5 leaves room for poses where the inertia is lower than in the
# default pose it was measured in. Applies to the damping mode, joint damping and the slope
# of the Coulomb term at dq = 0.
STABLE_FRACTION = 0.5


def pd_torque(target_q, q, target_dq, dq, kp, kd, feedforward, out: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """``kp*(target_q - q) + kd*(target_dq - dq) + feedforward`` into ``out``, elementwise: on one
    robot's joints or on rows of several robots' (the batched training task), the same
    operations in the same order, so the same bits per joint."""
    np.subtract(target_q, q, out=out)
    out *= kp
    np.subtract(target_dq, dq, out=scratch)
    scratch *= kd
    out += scratch
    out += feedforward
    return out


def minus_joint_losses(
    motor, dq, viscous_gain, friction_velocity, coulomb, out: np.ndarray, scratch: np.ndarray
) -> np.ndarray:
    """The torque a joint receives: ``motor - viscous_gain*dq - coulomb*tanh(dq/friction_velocity)``
    into ``out``, elementwise (see :func:`pd_torque`)."""
    np.multiply(viscous_gain, dq, out=scratch)
    np.subtract(motor, scratch, out=out)
    np.divide(dq, friction_velocity, out=scratch)
    np.tanh(scratch, out=scratch)
    scratch *= coulomb
    out -= scratch
    return out


class Actuator:
    """PD actuators in torque mode for ``n`` joints, with an actuation latency buffer.

    Per physics step, in position mode::

        motor = clip(strength * (kp*(q_t - q) + kd*(dq_t - dq) + tau_ff), +-effort_limit*torque_scale)

    and in damping mode (what a motor driver does when commands stop)::

        motor = clip(strength * (-damping_kd * dq), +-effort_limit*torque_scale)

    (plus, in both modes, any bias torque the robot's controller adds, inside the clip).

    The joint receives ``motor - joint_damping*dq - joint_friction*tanh(dq/v_s)``;
    :attr:`motor_torque` is what a motor driver would report as effort. Once the joints'
    inertia is known (:meth:`set_joint_losses`), damping gains are capped at the largest
    value a one-step explicit integration can follow (see ``STABLE_FRACTION``).

    A command given at step ``k`` becomes the active command at the first step
    ``>= k + round(latency / period)``; when several are due, the latest wins.
    """

    def __init__(
        self, effort_limits: ArrayLike, period: float, damping_kd: float, kp: ArrayLike = 0.0, kd: ArrayLike = 0.0
    ):
        limits = np.array(effort_limits, dtype=float).reshape(-1)
        if limits.size == 0 or np.any(limits <= 0) or not np.all(np.isfinite(limits)):
            raise ValueError(f"effort_limits must be positive and finite, got {limits}")
        if not period > 0:
            raise ValueError(f"period must be > 0 s, got {period}")
        self.n = limits.size
        self.period = float(period)
        self.effort_limits = limits
        self.default_kp = self._vector(kp, "kp")
        self.default_kd = self._vector(kd, "kd")
        if not damping_kd >= 0:
            raise ValueError(f"damping_kd must be >= 0, got {damping_kd}")
        self.damping_kd = float(damping_kd)

        self._strength = 1.0
        self._torque_scale = 1.0
        self._cap = limits.copy()
        self._neg_cap = -limits
        self._latency = 0.0
        self._delay_steps = 0
        self._coulomb = np.zeros(self.n)
        self._viscous = np.zeros(self.n)
        self._inertia: np.ndarray | None = None
        self._friction_velocity = np.full(self.n, MIN_FRICTION_VELOCITY)
        self._has_losses = False

        self._queue: deque[tuple[int, tuple[np.ndarray, ...]]] = deque()
        self._now = 0
        self._damping = False
        self._target_q = np.zeros(self.n)
        self._target_dq = np.zeros(self.n)
        self._feedforward = np.zeros(self.n)
        self._kp = self.default_kp.copy()
        self._kd = self.default_kd.copy()
        self._neg_damping_gain = np.full(self.n, -self.damping_kd)
        self._viscous_gain = np.zeros(self.n)

        self.motor_torque = np.zeros(self.n)
        self.joint_torque = np.zeros(self.n)
        self._scratch = np.zeros(self.n)

    # ----------------------------------------------------------------- conditions
    @property
    def strength(self) -> float:
        return self._strength

    @strength.setter
    def strength(self, value: float) -> None:
        if not value >= 0:
            raise ValueError(f"motor strength must be >= 0, got {value}")
        self._strength = float(value)

    @property
    def torque_scale(self) -> float:
        """Fraction of the effort limit available (battery sag); capped at 1."""
        return self._torque_scale

    @torque_scale.setter
    def torque_scale(self, value: float) -> None:
        if not value >= 0:
            raise ValueError(f"torque scale must be >= 0, got {value}")
        self._torque_scale = min(1.0, float(value))
        np.multiply(self.effort_limits, self._torque_scale, out=self._cap)
        np.negative(self._cap, out=self._neg_cap)

    @property
    def latency(self) -> float:
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        if not seconds >= 0:
            raise ValueError(f"latency must be >= 0 s, got {seconds}")
        self._latency = float(seconds)
        # Nearest step, not ceil: the delay is within half a step of the request rather than
        # up to a whole step late. A change applies to commands already in flight too, which
        # keeps the queue ordered by delivery time.
        self._delay_steps = int(math.floor(seconds / self.period + 0.5))

    @property
    def latency_steps(self) -> int:
        return self._delay_steps

    def set_joint_losses(
        self, friction: ArrayLike | None = None, damping: ArrayLike | None = None, inertia: ArrayLike | None = None
    ) -> None:
        """Coulomb friction (N*m), viscous damping (N*m*s/rad) and the joints' effective
        inertia (kg*m^2, used only to keep the velocity-opposing terms numerically stable)."""
        if friction is not None:
            self._coulomb[:] = self._vector(friction, "joint friction", non_negative=True)
        if damping is not None:
            self._viscous[:] = self._vector(damping, "joint damping", non_negative=True)
        if inertia is not None:
            self._inertia = self._vector(inertia, "joint inertia", positive=True)
        # tanh rather than sign: a sign flip applied for a whole explicit step makes a joint
        # near rest chatter at the step rate and pump energy; tanh has a finite slope that
        # brings it to rest. The price is no true stiction: under a load below the friction
        # level a joint creeps at < v_s instead of sticking.
        velocity = np.full(self.n, MIN_FRICTION_VELOCITY)
        damping_mode_gain = np.full(self.n, self.damping_kd)
        viscous = self._viscous.copy()
        if self._inertia is not None:
            largest = STABLE_FRACTION * self._inertia / self.period
            np.maximum(velocity, self._coulomb / largest, out=velocity)
            np.minimum(damping_mode_gain, largest, out=damping_mode_gain)
            np.minimum(viscous, largest, out=viscous)
        self._friction_velocity = velocity
        self._neg_damping_gain = -damping_mode_gain
        self._viscous_gain = viscous
        self._has_losses = bool(np.any(self._coulomb > 0) or np.any(self._viscous > 0))

    @property
    def friction_velocity(self) -> np.ndarray:
        """The tanh smoothing velocity v_s per joint, rad/s."""
        return self._friction_velocity.copy()

    @property
    def damping_gains(self) -> np.ndarray:
        """Damping-mode gain per joint as applied (damping_kd, capped for stability), N*m*s/rad."""
        return -self._neg_damping_gain

    @property
    def joint_damping_gains(self) -> np.ndarray:
        """Viscous joint damping per joint as applied (capped for stability), N*m*s/rad."""
        return self._viscous_gain.copy()

    # ------------------------------------------------------------------- commands
    def command(
        self,
        position: ArrayLike,
        velocity: ArrayLike | None = None,
        effort: ArrayLike | None = None,
        kp: ArrayLike | None = None,
        kd: ArrayLike | None = None,
    ) -> None:
        """Queue a PD command; it becomes active ``latency`` after the current step."""
        q = self._vector(position, "position", scalar_ok=False)
        dq = np.zeros(self.n) if velocity is None else self._vector(velocity, "velocity", scalar_ok=False)
        ff = np.zeros(self.n) if effort is None else self._vector(effort, "effort", scalar_ok=False)
        gains_p = self.default_kp if kp is None else self._vector(kp, "kp", non_negative=True)
        gains_d = self.default_kd if kd is None else self._vector(kd, "kd", non_negative=True)
        self._queue.append((self._now, (q, dq, ff, gains_p, gains_d)))

    def damp(self) -> None:
        """Switch to damping mode now, dropping commands still in flight.

        Not delayed by the latency: on hardware the driver itself falls back to damping
        when commands stop arriving, so no communication delay is involved; commands
        given before this call are superseded by it.
        """
        self._queue.clear()
        self._damping = True

    def reset(self, hold_position: ArrayLike) -> None:
        """Clear the clock and the queue and hold ``hold_position`` with the default gains,
        as if that command had been active for longer than any latency."""
        self._queue.clear()
        self._now = 0
        self._damping = False
        self._target_q = self._vector(hold_position, "hold_position", scalar_ok=False)
        self._target_dq = np.zeros(self.n)
        self._feedforward = np.zeros(self.n)
        self._kp = self.default_kp
        self._kd = self.default_kd
        self.motor_torque.fill(0.0)
        self.joint_torque.fill(0.0)

    @property
    def damping_mode(self) -> bool:
        return self._damping

    @property
    def steps(self) -> int:
        """Physics steps computed since the last reset."""
        return self._now

    @property
    def pending(self) -> int:
        """Commands given but not yet delivered."""
        return len(self._queue)

    # ----------------------------------------------------------------- hot path
    def compute(self, q: np.ndarray, dq: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        """Torque for this physics step at state (q, dq); advances the clock one step.

        ``bias`` is a torque the robot's own controller adds to every command (gravity
        compensation); it goes through the motors, so strength and limit apply to it.
        Returns an internal buffer (valid until the next call): the joint torque.
        """
        if self._queue and self._queue[0][0] <= self._now - self._delay_steps:
            self._deliver()
        out = self.motor_torque
        if self._damping:
            np.multiply(dq, self._neg_damping_gain, out=out)
        else:
            pd_torque(self._target_q, q, self._target_dq, dq, self._kp, self._kd, self._feedforward, out, self._scratch)
        if bias is not None:
            out += bias
        if self._strength != 1.0:
            out *= self._strength
        np.minimum(out, self._cap, out=out)
        np.maximum(out, self._neg_cap, out=out)
        self._now += 1
        if not self._has_losses:
            return out
        return minus_joint_losses(
            out, dq, self._viscous_gain, self._friction_velocity, self._coulomb, self.joint_torque, self._scratch
        )

    def _deliver(self) -> None:
        due = self._now - self._delay_steps
        entry = None
        while self._queue and self._queue[0][0] <= due:
            entry = self._queue.popleft()
        assert entry is not None
        self._damping = False
        (self._target_q, self._target_dq, self._feedforward, self._kp, self._kd) = entry[1]

    def _vector(
        self, value: ArrayLike, name: str, *, scalar_ok: bool = True, non_negative: bool = False, positive: bool = False
    ) -> np.ndarray:
        array = np.array(value, dtype=float)
        if array.ndim == 0 and scalar_ok:
            array = np.full(self.n, float(array))
        if array.shape != (self.n,):
            raise ValueError(
                f"{name}: expected {self.n} values (one per joint, in profile order), got shape {array.shape}"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name}: values must be finite, got {array}")
        if non_negative and np.any(array < 0):
            raise ValueError(f"{name}: values must be >= 0, got {array}")
        if positive and np.any(array <= 0):
            raise ValueError(f"{name}: values must be > 0, got {array}")
        return array
