"""The safety supervisor's logic, ROS-free: modes, checks and the command it sends each tick.

Modes::

    STANDBY --engage--> ACTIVE (policy) <--takeover/engage--> TAKEOVER (human or hold)
       any --damp--> DAMPING      any --estop--> ESTOP (latched)      DAMPING/ESTOP --reset--> STANDBY

Every tick (:meth:`SupervisorCore.tick`) evaluates every enabled check, applies the most
severe response raised (clamp < hold < damp < estop, see :mod:`safety_config`) and
returns the command to publish. Once the first joint state has arrived, a command is
returned every tick, whatever the inputs do:

- STANDBY: interpolate from the pose found at entry to the stand (default) pose, then hold it.
- ACTIVE: the policy's command, clamped to the position limits and the step limit per period;
  cross-faded from the held pose over ``blend_duration`` after a takeover.
- TAKEOVER: ``/teleop/joint_commands`` while fresh; otherwise a hold. With ``hold_pose: last``
  (arms) a HOLD trip keeps the last targets sent (a category-2 stop: stop where you are, with
  no jump in joint torque) and an operator's takeover interpolates to the stand pose over
  ``stand_duration``. With ``hold_pose: stand`` both interpolate from the last targets to the
  stand pose over ``hold_duration`` (a robot whose stopped pose cannot be held). For the
  shipped Go2 trot stopped mid-stride, a quick move to the stand pose did better than keeping
  the last targets (``benchmarks/supervisor_hold.py``), so the Go2 uses ``stand`` and the
  Panda ``last``.
- DAMPING / ESTOP: position target = measured position, velocity target 0: with the
  profile's PD this is pure joint damping. A robot with a ``damp_pose`` (the Go2, which
  falls when damped) first makes an IEC 60204-1 category-1 stop: to the stand pose in 0.3 s
  if it stood, then down to ``damp_pose`` over ``damp_duration``, then damping. An e-stop
  during a damp continues that stop; a reset waits for it to end. With /joint_states gone
  silent it keeps the lying pose as the target (the last sample is the pose before the fault).

Before any policy gets the robot: engage from STANDBY waits for the stand-up and for the joints
near the stand pose; a reset is refused while the e-stop is pressed or a damp-or-worse fault
persists, and never restarts motion by itself (ISO 13850); on hardware the deadman must be held.
Velocity targets and feed-forward efforts never leave over the profile's limits, whatever their
source; a policy command that asks for more trips ``command_limit``, a teleop one is not followed.

A NaN or infinite measurement never reaches a command: a /joint_states sample with a
non-finite position counts as no sample (the last valid one is kept and ages, so
``joint_states_stale`` damps if they go on); a NaN velocity or effort is a joint without that
interface (ros2_control's joint_state_broadcaster reports it so) and is left out of its limit
check, while every other joint is checked; an IMU orientation that is not a unit quaternion (NaN,
REP-145's all-zero "no orientation", a norm of 0.5) fails ``base_tilt`` (the tilt cannot be
known) and does not count as a fresh sample, so ``imu_stale`` damps if no valid one follows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Callable, Optional, Sequence, TypeGuard, cast

import numpy as np

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.rotations import tilt_angle, unit_orientation
from sim2real.core.safety_config import OPERATOR_ACTIONS, CheckConfig, Response, SafetyConfig
from sim2real.core.safety_requirements import check_config_for
from sim2real.core.stand_effort import standing_efforts

# The engage's refusal of a robot that never reached its stand (a driver that damped mid stand-up):
# a reset in STANDBY stands it up again from where it is. The sysid recorder acts on this advice.
RESTART_STAND = "then reset (the stand-up starts again from where it is)"

TELEOP_FRESH_S = 0.2  # teleop older than this no longer steers; the hold pose takes over
# Engage from STANDBY needs the measured joints this close to the stand pose (rad): a robot still
# lying on the ground, or held off its stand, is no state a policy was trained on. In PyBullet a
# Go2 collapsed by damping lies 1.2 rad from it (calves); stood up again at the stand gains it sags
# under its weight 0.37-0.48 rad (calves) without the stand's feed-forward, 0.09 rad with it, and
# 0.58 rad with it on a robot 20 % heavier with motors 15 % weaker; the bound sits below lying.
ENGAGE_STAND_TOLERANCE = 0.7
# rad: a reset before the robot stood starts the stand-up again from the last targets when every
# joint is this near them (the robot follows: they hold it up), else from the measured joints.
# Inside the Go2 bridge's RESYNC_TOLERANCE (0.25) with a margin: the bridge checks against a newer
# reading of a robot that may still be sinking.
RESTART_TOLERANCE = 0.15
WAITING_FOR_DRIVER = (
    "waiting for the robot's driver to read /joint_commands (DDS discovery): the stand-up starts "
    "from where the robot lies once it does"
)
# s of the category-1 stop's first step, to the stand pose (four feet down) under a robot that
# walked. Stopping the shipped trot at 1.0 m/s (benchmarks/supervisor_hold.py, 20 stops): 0.2 s
# left 7 of 20 damped stops landing over 0.5 m/s, 0.3 s 3, 0.4 s 2 (but 4 of 20 silent-policy
# stops bad).
DAMP_SETTLE_S = 0.3


# check(name, failed, detail): one check's result, kept if the robot's safety config has that check.
_Check = Callable[[str, bool, str], None]


class Mode(str, Enum):
    STANDBY = "STANDBY"
    ACTIVE = "ACTIVE"
    TAKEOVER = "TAKEOVER"
    DAMPING = "DAMPING"
    ESTOP = "ESTOP"


@dataclass
class SupervisorInputs:
    """The newest message of each stream and when it arrived (node clock, s)."""

    joint_position: Optional[np.ndarray] = None
    joint_velocity: Optional[np.ndarray] = None
    joint_effort: Optional[np.ndarray] = None
    joint_states_time: Optional[float] = None
    base_orientation: Optional[np.ndarray] = None  # x, y, z, w
    imu_time: Optional[float] = None
    policy_command: Optional[JointTargets] = None
    policy_time: Optional[float] = None
    policy_stamp: Optional[float] = None  # header.stamp: when the policy's input was measured
    teleop_command: Optional[JointTargets] = None
    teleop_time: Optional[float] = None
    joy_buttons: Optional[list[int]] = None
    joy_time: Optional[float] = None
    estimator_diverged: bool = False
    other_command_writers: tuple[str, ...] = ()  # nodes besides this one publishing /joint_commands
    # Whether anything receives /joint_commands yet (None: unknown). While nothing does, the
    # stand-up waits where the robot is: begun earlier, its first command to reach the driver
    # would be one from mid-way through it, a jump from where the robot lies.
    commands_received: Optional[bool] = None
    # Lockstep: sim time stands still while the supervisor waits for the policy, so a dead
    # policy never looks stale by the clock; the node sets this after a wall-clock wait.
    policy_missed: bool = False


@dataclass
class CheckResult:
    name: str
    ok: bool
    response: Response
    detail: str = ""


@dataclass
class Decision:
    mode: Mode
    command: Optional[JointTargets]
    checks: list[CheckResult]
    events: list[str] = field(default_factory=list)


class SupervisorCore:
    def __init__(self, profile: RobotProfile, config: SafetyConfig, command_period: float, simulated: bool = False):
        """``simulated``: the robot is a simulation, so ``hardware_only`` checks (the deadman) are
        skipped and a config weaker than hardware needs is accepted (see
        :mod:`sim2real.core.safety_requirements`, which raises SafetyConfigError otherwise)."""
        self.weakenings = check_config_for(config, profile, simulated)
        self.profile = profile
        self.config = config
        self.simulated = simulated
        # Largest |velocity target| and |feed-forward effort| sent: factor x the profile's limits,
        # never past them.
        limit = self._check("command_limit")
        factor = 1.0 if limit is None else min(1.0, limit["factor"])
        self._max_velocity = factor * profile.velocity_limits
        self._max_effort = factor * profile.effort_limits
        # Largest acceleration and jerk of the velocity targets sent (inf: the profile gives none).
        rate = self._check("target_rate")
        rate_factor = 1.0 if rate is None else rate["factor"]  # > 0 (safety_config)
        self._max_acceleration = rate_factor * profile.acceleration_limits  # inf stays inf
        self._max_jerk = rate_factor * profile.jerk_limits
        self._velocity_acceleration = np.zeros(profile.num_joints)  # of the velocity targets last sent
        self._rate_limited = rate is not None and profile.rate_limited and command_period > 0
        self._damp_pose = (
            np.array([config.damp_pose[name] for name in profile.joint_names])
            if config.damp_pose and config.damp_duration > 0
            else None
        )
        self.period = command_period
        self.mode = Mode.STANDBY
        self.last_trip: str = ""
        self.trips = 0  # mode changes the checks caused (not an operator's)
        self.events: list[str] = []
        margin = config.checks["position_limit"]["margin"] if "position_limit" in config.checks else 0.0
        self._low = profile.lower_limits + margin
        self._high = profile.upper_limits - margin
        self._last_sent: Optional[JointTargets] = None
        self._last_sent_time: Optional[float] = None
        self._step_budget: Optional[np.ndarray] = None  # rad each joint may still move this period (target_step)
        self._segment_start: Optional[np.ndarray] = None  # pose a STANDBY/TAKEOVER trajectory starts from
        self._segment_time = 0.0
        self._segment_effort: Optional[np.ndarray] = None  # the feed-forward sent when the segment began
        self._effort_from_stand = True  # the segment's feed-forward is a stand's (see _enter)
        self._hold_in_place = False  # TAKEOVER after a HOLD trip: stay where we stopped
        self._following_teleop = False
        self._mode_since = -math.inf  # when the current mode was entered
        self._blend_from: Optional[np.ndarray] = None
        self._blend_effort: Optional[np.ndarray] = None  # feed-forward at the engage, faded out with the pose
        self._blend_time = 0.0
        # Feed-forward of the stand (stand_effort): held with the stand pose, faded in as it is reached.
        self._stand_effort = (
            standing_efforts(profile) if config.stand_effort == "gravity" else np.zeros(len(profile.joint_names))
        )
        self._stands_with_effort = bool(self._stand_effort.any())
        self._previous_buttons: list[int] = []  # of the newest /joy message noted (joystick())
        self._pending_presses: list[frozenset[str]] = []  # per /joy message, until the next tick
        self._stand_restarts = 0  # resets that started the stand-up again in STANDBY
        # The newest /joint_states with every position finite, and when it came.
        self._valid_state: Optional[tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray], Optional[float]]] = (
            None
        )
        self._refused_state = ""  # why the newest sample was refused ("" when it was valid)
        self._valid_orientation: Optional[tuple[np.ndarray, Optional[float]]] = None
        self._refused_orientation = ""
        self._stood = False  # the stand-up finished at the stand pose since the last start or reset
        self._ever_stood = False  # since start: the longer STANDBY deadline covers only the first stand-up
        self._descent_via_stand = False
        self._refused_teleop = ""

    def _check(self, name: str) -> Optional[CheckConfig]:
        """The config of check ``name`` when it applies to this run (enabled, and not a
        hardware-only check on a simulated robot)."""
        config = self.config.checks.get(name)
        if config is None or not config.enabled or (config.hardware_only and self.simulated):
            return None
        return config

    def _validated(self, inputs: SupervisorInputs) -> SupervisorInputs:
        """``inputs`` with a non-finite /joint_states sample, or an IMU orientation that is no
        unit quaternion, replaced by the last valid one (its arrival time too, so it goes stale
        and the stale check damps), or by none before a valid one has come."""
        return self._validated_state(self._validated_orientation(inputs))

    def _validated_orientation(self, inputs: SupervisorInputs) -> SupervisorInputs:
        o = inputs.base_orientation
        if o is None:
            return inputs
        try:  # the rule of every node; normalised: a norm of 0.98 is rounding, not a tilt
            self._valid_orientation = (unit_orientation(o), inputs.imu_time)
            self._refused_orientation = ""
            return replace(inputs, base_orientation=self._valid_orientation[0].copy())
        except ValueError as exc:
            reason = str(exc)
        if reason != self._refused_orientation:
            self.events.append(reason)
            self._refused_orientation = reason
        # The refused orientation stays for base_tilt, which fails on it at once (the tilt is
        # unknown); the time is the last valid sample's, so imu_stale damps if no valid one comes.
        return replace(inputs, imu_time=None if self._valid_orientation is None else self._valid_orientation[1])

    def _validated_state(self, inputs: SupervisorInputs) -> SupervisorInputs:
        q = inputs.joint_position
        if q is None:
            return inputs
        q = np.asarray(q, dtype=float)
        dq = None if inputs.joint_velocity is None else np.asarray(inputs.joint_velocity, dtype=float)
        # Only positions make a sample usable: ros2_control's joint_state_broadcaster fills an
        # interface a joint lacks (velocity, effort) with NaN, and the limit checks skip those.
        bad = ~np.isfinite(q)
        if not bad.any():
            if self._valid_state is None or self._valid_state[3] != inputs.joint_states_time:
                self._valid_state = (
                    q.copy(),
                    None if dq is None else dq.copy(),
                    None if inputs.joint_effort is None else np.array(inputs.joint_effort, dtype=float),
                    inputs.joint_states_time,
                )
            self._refused_state = ""
            return inputs
        joints = [self.profile.joint_names[i] for i in np.flatnonzero(bad)]
        reason = f"/joint_states with NaN or infinite positions for {joints} refused"
        if reason != self._refused_state:
            self.events.append(reason)
            self._refused_state = reason
        if self._valid_state is None:
            return replace(inputs, joint_position=None, joint_velocity=None, joint_effort=None, joint_states_time=None)
        position, velocity, effort, received = self._valid_state
        return replace(
            inputs,
            joint_position=position.copy(),
            joint_velocity=None if velocity is None else velocity.copy(),
            joint_effort=None if effort is None else effort.copy(),
            joint_states_time=received,
        )

    # -- operator requests (services, joystick) ---------------------------------------------
    def request(self, action: str, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        """engage | takeover | damp | estop | reset. Returns (accepted, message)."""
        return self._request(action, self._validated(inputs), now)

    def _request(self, action: str, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        """:meth:`request` on inputs already validated (the tick's joystick presses)."""
        handler = {
            "estop": self._request_estop,
            "damp": self._request_damp,
            "reset": self._request_reset,
            "takeover": self._request_takeover,
            "engage": self._request_engage,
        }.get(action)
        if handler is None:
            return False, f"unknown request {action!r}; use one of {', '.join(OPERATOR_ACTIONS)}"
        return handler(inputs, now)

    def _request_estop(self, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        self._enter(Mode.ESTOP, now, inputs, "operator: estop")
        return True, "ESTOP (latched until reset)"

    def _request_damp(self, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        if self.mode == Mode.ESTOP:
            return False, "ESTOP is latched: call reset first"
        if self.mode == Mode.DAMPING:
            return True, "already DAMPING"
        self._enter(Mode.DAMPING, now, inputs, "operator: damp")
        return True, "DAMPING"

    def _request_reset(self, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        mode = self.mode
        if mode == Mode.STANDBY and not self._stood:
            return self._restart_stand_up(inputs, now)
        if mode not in (Mode.ESTOP, Mode.DAMPING):
            return True, f"nothing to reset in {mode.value}"
        if not self._fresh(inputs.joint_states_time, now, "joint_states_stale"):
            return False, "refused: /joint_states are stale; reset needs a live robot"
        # ISO 13850: a reset is a separate act once the e-stop is released, and it never
        # hides a fault that is still there (it would trip again within a few ticks).
        if self._pressed(inputs, "estop"):
            return False, (
                f"refused: the e-stop (joystick button {self.config.buttons['estop']}) is still "
                "pressed; release it, then reset"
            )
        persisting = [c for c in self._evaluate(inputs, now) if not c.ok and c.response >= Response.DAMP]
        if persisting:
            fault = persisting[0]
            return False, f"refused: the fault persists ({fault.name}: {fault.detail}); clear it, then reset"
        left = self._descent_left(now)
        if left > 0:
            return False, f"refused: the stop is still lowering the robot ({left:.1f} s left); reset once it lies"
        self._enter(Mode.STANDBY, now, inputs, "operator: reset")
        return True, "STANDBY (engage once the robot stands)"

    def _request_takeover(self, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        mode = self.mode
        if mode in (Mode.ESTOP, Mode.DAMPING):
            return False, f"refused in {mode.value}: reset first"
        if mode == Mode.STANDBY and inputs.commands_received is False:
            return False, f"refused: {WAITING_FOR_DRIVER}"
        self._hold_in_place = False
        if mode != Mode.TAKEOVER:
            self._enter(Mode.TAKEOVER, now, inputs, "operator: takeover")
        return True, "TAKEOVER"

    def _request_engage(self, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        mode = self.mode
        if mode in (Mode.ESTOP, Mode.DAMPING):
            return False, f"refused in {mode.value}: reset first"
        if mode == Mode.ACTIVE:
            return True, "already ACTIVE"
        problem = self._engage_blocker(inputs, now)
        if problem:
            return False, f"refused: {problem}"
        self._stood = self._ever_stood = True  # what the engage checks just found
        # Not None: the engage checks found /joint_states fresh, and their time comes only with positions.
        self._blend_from = (
            self._last_sent.position.copy()
            if self._last_sent is not None
            else cast(np.ndarray, inputs.joint_position).copy()
        )
        # Only a stand that carried a feed-forward hands it over; otherwise the policy's effort goes
        # out as it is from the first tick.
        self._blend_effort = (
            self._last_sent.effort.copy() if self._last_sent is not None and self._stands_with_effort else None
        )
        self._blend_time = now
        self._enter(Mode.ACTIVE, now, inputs, "operator: engage")
        return True, "ACTIVE"

    def resume_active(self, inputs: SupervisorInputs, now: float) -> None:
        """Enter ACTIVE as if engaged earlier, without the stand-up and the operator's checks:
        for a replay or trial that starts from a state recorded while a policy ran. No node
        calls this; on a robot, ACTIVE comes only from an accepted engage."""
        inputs = self._validated(inputs)
        self._stood = self._ever_stood = True
        self._blend_from = None
        self._enter(Mode.ACTIVE, now, inputs, "operator: replay of a running policy")

    def stop_command(self, inputs: SupervisorInputs, now: float) -> Optional[JointTargets]:
        """The last command when the supervisor itself stops (None before any valid state): the
        measured position with zero velocity, so the driver's PD holds the joints where they
        are; otherwise the driver keeps the last target sent, a policy's mid-stride one."""
        inputs = self._validated(inputs)
        if inputs.joint_position is None or not self._fresh(inputs.joint_states_time, now, "joint_states_stale"):
            return None  # where the joints are now is unknown: an old pose at full gain would be a jump
        return JointTargets.positions(inputs.joint_position)

    def stood_up(self, now: float) -> bool:
        """STANDBY's stand-up motion has finished: the robot holds its stand pose."""
        return (
            self.mode == Mode.STANDBY
            and self._segment_start is not None
            and now - self._segment_time >= self.config.stand_duration
        )

    def _pressed(self, inputs: SupervisorInputs, action: str) -> bool:
        """The newest /joy message holds ``action``'s button down (whatever its age: a pad that
        went silent with the e-stop pressed still means the e-stop)."""
        index = self.config.buttons.get(action)
        buttons = inputs.joy_buttons
        return index is not None and buttons is not None and index < len(buttons) and buttons[index] == 1

    def _restart_stand_up(self, inputs: SupervisorInputs, now: float) -> tuple[bool, str]:
        """A reset in STANDBY before the robot stood: the stand-up starts again, from the measured
        joints unless the robot follows the last targets. A driver that damped on a command gap
        (the Go2 bridge does, then takes only commands near the robot) takes the new stand-up's
        first command, and a robot that was blocked is tried again from where it now lies."""
        if not self._fresh(inputs.joint_states_time, now, "joint_states_stale") or inputs.joint_position is None:
            return False, "refused: /joint_states are stale; the stand-up needs a live robot"
        measured = np.array(inputs.joint_position, dtype=float)
        last = self._last_sent.position if self._last_sent is not None else None
        # A robot that followed the targets goes on from them (from where it is, they hold it up);
        # one that did not (damped, blocked) starts from where it is.
        followed = last is not None and bool(np.all(np.abs(last - measured) <= RESTART_TOLERANCE))
        self._start_segment(last if followed and last is not None else measured, now, carry_effort=followed)
        self._stand_restarts += 1
        self.events.append("operator: reset: the stand-up starts again")
        return True, "STANDBY (standing up again; engage once it stands)"

    def _stand_problem(self, inputs: SupervisorInputs, now: float) -> str:
        """Why the robot does not stand yet in STANDBY ("" once its stand-up finished and the
        measured joints reached the stand pose)."""
        if self._segment_start is None:
            return "waiting for the first /joint_states"
        if inputs.commands_received is False:
            return WAITING_FOR_DRIVER
        left = self.config.stand_duration - (now - self._segment_time)
        if left > 0:
            return f"the robot is still standing up ({left:.1f} s left); engage once it stands"
        error = np.abs(np.asarray(inputs.joint_position, dtype=float) - self.profile.default_positions)
        worst = int(np.argmax(error))
        if error[worst] > ENGAGE_STAND_TOLERANCE:
            # Once it stood, a reset in STANDBY leaves the robot as it is (a standing robot sags; a
            # restart from where it is would relax its legs): the way back is a stop first.
            then = "damp, then reset (the stand-up starts again from where it lies)" if self._stood else RESTART_STAND
            return (
                f"{self.profile.joint_names[worst]} is {error[worst]:.2f} rad from its stand pose (max "
                f"{ENGAGE_STAND_TOLERANCE} rad): the robot did not reach its stand or no longer stands; lift it "
                f"or clear what blocks it, {then}"
            )
        return ""

    def _deadman_held(self, inputs: SupervisorInputs, now: float, deadline: float) -> bool:
        return self._pressed(inputs, "deadman") and inputs.joy_time is not None and now - inputs.joy_time <= deadline

    def _engage_blocker(self, inputs: SupervisorInputs, now: float) -> str:
        if not self._fresh(inputs.joint_states_time, now, "joint_states_stale"):
            return "/joint_states are stale"
        if self.mode == Mode.STANDBY:
            problem = self._stand_problem(inputs, now)
            if problem:
                return problem
        elif not self._stood:  # a takeover before the stand-up finished: the hold moves to the stand pose
            return (
                "the robot has not stood up since the last start or reset: engage once the hold has brought "
                f"it to its stand pose ({self._stand_problem(inputs, now)})"
            )
        deadman = self._check("deadman")
        if deadman is not None and not self._deadman_held(inputs, now, deadman["deadline"]):
            button = self.config.buttons.get("deadman")
            return (
                f"hold the deadman (joystick button {button}) to engage"
                if button is not None
                else "the deadman check is on but no joystick button is mapped to it (joystick.deadman)"
            )
        if (
            not self.profile.fixed_base
            and "imu_stale" in self.config.checks
            and not self._fresh(inputs.imu_time, now, "imu_stale")
        ):
            return "/imu/data is stale"
        if not self._fresh(inputs.policy_time, now, "policy_stale"):
            return "no fresh /policy/joint_commands: is policy_runtime running?"
        if not _finite(inputs.policy_command):
            return "the policy's command is not finite"
        over = self._over_limits(inputs.policy_command)
        if over:
            return f"the policy's command asks {over}"
        overrun = self._check("tick_overrun")
        if overrun is not None and inputs.policy_stamp is not None and inputs.policy_time is not None:
            lag = inputs.policy_time - inputs.policy_stamp
            if lag > overrun["max_age"]:
                return f"the policy is behind: its command was computed on data {lag * 1e3:.0f} ms old"
        return ""

    # -- the joystick ----------------------------------------------------------------------------
    def joystick(self, buttons: Sequence[int]) -> frozenset[str]:
        """Note one /joy message: the operator actions whose buttons it presses anew, against the
        message before it. The next tick acts on them, message by message, so a press released
        before that tick is still obeyed (an edge test against the last tick's buttons misses it).
        A caller that does not call this per message gets the test once a tick, on the inputs."""
        pressed = frozenset(
            action
            for action in OPERATOR_BUTTONS
            if (index := self.config.buttons.get(action)) is not None
            and newly_pressed(index, self._previous_buttons, buttons)
        )
        self._previous_buttons = list(buttons)
        if pressed:
            self._pending_presses.append(pressed)
        return pressed

    # -- the tick ------------------------------------------------------------------------------
    def tick(self, inputs: SupervisorInputs, now: float) -> Decision:
        self.events = []
        inputs = self._validated(inputs)
        if inputs.joy_buttons is not None and list(inputs.joy_buttons) != self._previous_buttons:
            self.joystick(inputs.joy_buttons)  # a message the caller did not note
        self._handle_buttons(inputs, now)
        if inputs.joint_position is None:
            # Nothing measured yet: no command can be safe. The driver's own start-up behaviour holds.
            waiting = (
                "waiting for the first /joint_states"
                if not self._refused_state
                else f"waiting for a valid /joint_states ({self._refused_state})"
            )
            return Decision(
                self.mode, None, [CheckResult("joint_states_stale", False, Response.NONE, waiting)], self.events
            )
        if self._segment_start is None or (
            inputs.commands_received is False and self.mode == Mode.STANDBY and not self._stood
        ):
            # The first state, or no driver listening yet: the stand-up starts from where the robot is,
            # with none of its weight carried yet.
            self._start_segment(inputs.joint_position, now, carry_effort=False)
        checks = self._evaluate(inputs, now)
        worst = max((c for c in checks if not c.ok), key=lambda c: c.response, default=None)
        if worst is not None and worst.response >= Response.HOLD:
            self._respond(worst, inputs, now)
        command = self._command(inputs, now)
        command = self._filter(command, checks, self._share_of_a_period(now))
        self._last_sent, self._last_sent_time = command, now
        if self.mode in (Mode.STANDBY, Mode.TAKEOVER) and not self._stood:
            # A takeover without teleop moves to the stand pose too (over stand_duration at most).
            self._stood = not self._stand_problem(inputs, now)
            self._ever_stood = self._ever_stood or self._stood
        return Decision(self.mode, command, checks, self.events)

    def _respond(self, check: CheckResult, inputs: SupervisorInputs, now: float) -> None:
        reason = f"{check.name}: {check.detail}"
        if check.response == Response.ESTOP and self.mode != Mode.ESTOP:
            self._enter(Mode.ESTOP, now, inputs, reason)
        elif check.response == Response.DAMP and self.mode not in (Mode.DAMPING, Mode.ESTOP):
            self._enter(Mode.DAMPING, now, inputs, reason)
        elif check.response == Response.HOLD and self.mode == Mode.ACTIVE:
            self._hold_in_place = self.config.hold_pose == "last"
            self._enter(Mode.TAKEOVER, now, inputs, reason)

    def _enter(self, mode: Mode, now: float, inputs: SupervisorInputs, reason: str) -> None:
        event = f"{self.mode.value} -> {mode.value}: {reason}"
        self.events.append(event)
        if not reason.startswith("operator"):
            self.last_trip = event
            self.trips += 1
        stopping = self.mode in (Mode.DAMPING, Mode.ESTOP)
        # A takeover of a robot standing in STANDBY keeps its stand's feed-forward; a hold of a
        # robot that walked adds none (stopping a trot, the legs' snap to the stand pose is enough).
        self._effort_from_stand = self.mode == Mode.STANDBY
        self.mode = mode
        self._mode_since = now
        if stopping and mode in (Mode.DAMPING, Mode.ESTOP):
            return  # an e-stop during a damp: the stop under way goes on, it does not start again
        # The stop's first step to the stand pose puts four feet down under a robot that walked; a
        # robot that never stood (lying, mid stand-up) is lowered from where it is.
        self._descent_via_stand = self._stood and mode in (Mode.DAMPING, Mode.ESTOP)
        if mode in (Mode.STANDBY, Mode.DAMPING, Mode.ESTOP):
            self._stood = False  # damped, the robot may have sunk or fallen: it stands up again first
        self._following_teleop = False  # a teleop session belongs to one TAKEOVER
        if mode != Mode.TAKEOVER:
            self._hold_in_place = False
        start = self._last_sent.position if self._last_sent is not None else inputs.joint_position
        self._start_segment(start, now)

    def _start_segment(self, start: Optional[np.ndarray], now: float, carry_effort: bool = True) -> None:
        """A STANDBY/TAKEOVER/stop trajectory starts from ``start`` now; its feed-forward goes on
        from the one last sent (a standing robot keeps its weight carried), or from none when
        ``carry_effort`` is False (a restart from where a robot that did not follow lies)."""
        self._segment_start = None if start is None else np.array(start, dtype=float)
        self._segment_time = now
        self._segment_effort = self._last_sent.effort.copy() if carry_effort and self._last_sent is not None else None

    def _handle_buttons(self, inputs: SupervisorInputs, now: float) -> None:
        pending, self._pending_presses = self._pending_presses, []
        for pressed in pending:
            self._handle_presses(pressed, inputs, now)

    def _handle_presses(self, pressed: frozenset[str], inputs: SupervisorInputs, now: float) -> None:
        """The presses of one /joy message: the rules hold for buttons pressed together."""
        was_reset = stopped = False
        for action in OPERATOR_BUTTONS:
            if action not in pressed:
                continue
            if was_reset and action in ("takeover", "engage"):
                # A reset never restarts motion by itself (ISO 13850): motion is a later, separate act.
                self.events.append(
                    f"joystick {action}: ignored, pressed with reset; press it again once the robot stands"
                )
                continue
            if stopped and action == "reset":  # the stop of this very message stands
                self.events.append(
                    "joystick reset: ignored, pressed with a stop (damp or e-stop); release both, then reset"
                )
                continue
            before, restarts = self.mode, self._stand_restarts
            accepted, message = self._request(action, inputs, now)
            restarted = self._stand_restarts != restarts
            was_reset = was_reset or (action == "reset" and accepted and (before != self.mode or restarted))
            stopped = stopped or (action in ("estop", "damp") and accepted)
            if not accepted:
                self.events.append(f"joystick {action}: {message}")

    # -- checks --------------------------------------------------------------------------------
    def _fresh(self, received: Optional[float], now: float, check: str) -> bool:
        config = self.config.checks.get(check)
        deadline = config["deadline"] if config else math.inf
        return received is not None and now - received <= deadline

    def _evaluate(self, inputs: SupervisorInputs, now: float) -> list[CheckResult]:
        results: list[CheckResult] = []

        def check(name: str, failed: bool, detail: str) -> None:
            config: CheckConfig | None = self._check(name)
            if config is None:
                return
            results.append(CheckResult(name, not failed, config.response, detail if failed else ""))

        self._stream_checks(inputs, now, check, results)
        if self.mode == Mode.ACTIVE:
            self._policy_checks(inputs, now, check)
        self._state_checks(inputs, check)
        return results

    def _stream_checks(self, inputs: SupervisorInputs, now: float, check: _Check, results: list[CheckResult]) -> None:
        """Is each input stream fresh: /joint_states, /imu/data (floating base), the policy (ACTIVE)."""
        active = self.mode == Mode.ACTIVE
        # Until the robot first stands after start, no policy runs and the stand-up's targets do not
        # depend on the newest sample: a stream must be silent for standby_deadline to trip. A busy
        # start-up (DDS discovery, the other nodes loading) delays samples 60-70 ms on 2 cores, and
        # each such trip would need an operator's reset before anything could engage. Later
        # stand-ups (after a reset) keep the checks' own deadlines.
        standby = self.mode == Mode.STANDBY and not self._ever_stood
        refused = {"joint_states_stale": self._refused_state, "imu_stale": self._refused_orientation}
        for name, received, topic, applies in (
            ("joint_states_stale", inputs.joint_states_time, "/joint_states", True),
            ("imu_stale", inputs.imu_time, "/imu/data", not self.profile.fixed_base),
            ("policy_stale", inputs.policy_time, "/policy/joint_commands", active),
        ):
            config = self.config.checks.get(name)
            if config is None or not applies:
                continue
            if received is None and self.mode == Mode.STANDBY:
                # Never arrived yet, nothing engaged: waiting, not a fault (engage checks freshness).
                results.append(CheckResult(name, False, Response.NONE, f"waiting for the first {topic}"))
                continue
            late = math.inf if received is None else now - received
            newer = f"; newer ones refused: {refused[name]}" if refused.get(name) else ""
            deadline = max(config["deadline"], self.config.standby_deadline) if standby else config["deadline"]
            detail = f"no {topic} for {late:.3f} s (deadline {deadline:.3f} s{' in STANDBY' if standby else ''}){newer}"
            if standby and config["deadline"] < late <= deadline:
                results.append(CheckResult(name, False, Response.NONE, f"{detail}: late, not yet a fault"))
                continue
            check(name, late > deadline, detail)

    def _policy_checks(self, inputs: SupervisorInputs, now: float, check: _Check) -> None:
        """What ACTIVE asks of the policy's command and the operator."""
        if inputs.policy_missed:
            check("policy_stale", True, "lockstep: no /policy/joint_commands for this tick within the wall-clock wait")
        check(
            "non_finite_command", not _finite(inputs.policy_command), "the policy's command has NaN or infinite values"
        )
        overrun = self._check("tick_overrun")
        if overrun is not None and inputs.policy_stamp is not None and inputs.policy_time is not None:
            lag = inputs.policy_time - inputs.policy_stamp
            check(
                "tick_overrun",
                lag > overrun["max_age"],
                f"policy command computed on data {lag * 1e3:.1f} ms old (max {overrun['max_age'] * 1e3:.1f} ms)",
            )
        deadman = self._check("deadman")
        if deadman is not None:  # with no button mapped it is never held: fail closed
            check(
                "deadman",
                not self._deadman_held(inputs, now, deadman["deadline"]),
                "the operator's deadman is not held (or /joy is silent)",
            )
        if _finite(inputs.policy_command):
            over = self._over_limits(inputs.policy_command)
            check("command_limit", bool(over), f"the policy's command asks {over}")

    def _state_checks(self, inputs: SupervisorInputs, check: _Check) -> None:
        """The robot's measured state and the graph around it, in every mode."""
        if inputs.joint_velocity is not None and len(inputs.joint_velocity):
            self._limit_check(
                check,
                "velocity_limit",
                np.abs(inputs.joint_velocity),
                self.profile.velocity_limits,
                "velocity",
                "rad/s",
            )
        if inputs.joint_effort is not None and len(inputs.joint_effort):
            self._limit_check(
                check, "torque_limit", np.abs(inputs.joint_effort), self.profile.effort_limits, "effort", "N*m"
            )
        if inputs.base_orientation is not None and "base_tilt" in self.config.checks:
            orientation = inputs.base_orientation
            limit = self.config.checks["base_tilt"]["max_angle"]
            tilt = tilt_angle(orientation)  # NaN for anything that is not an orientation
            if math.isnan(tilt):
                check("base_tilt", True, f"{self._refused_orientation or 'no orientation'}: the tilt is unknown")
            else:
                check("base_tilt", tilt > limit, f"base tilted {tilt:.2f} rad (max {limit:.2f} rad)")
        check("estimator_divergence", inputs.estimator_diverged, "the state estimator reports divergence")
        check(
            "sole_writer",
            bool(inputs.other_command_writers),
            f"other publishers on /joint_commands: {', '.join(inputs.other_command_writers)}; a driver that does "
            "not check the writer obeys them: stop them (or give this graph its own ROS_DOMAIN_ID)",
        )

    def _over_limits(self, command: JointTargets) -> str:
        """What in ``command`` exceeds the command limits ("" when nothing does)."""
        max_velocity, max_effort = self._max_velocity, self._max_effort
        for values, limits, what, unit in (
            (command.velocity, max_velocity, "velocity target", "rad/s"),
            (command.effort, max_effort, "feed-forward effort", "N*m"),
        ):
            ratio = np.abs(values) / limits
            worst = int(np.argmax(ratio))
            if ratio[worst] > 1.0:
                return (
                    f"{what} {values[worst]:.2f} {unit} on {self.profile.joint_names[worst]} "
                    f"(limit {limits[worst]:.2f})"
                )
        return ""

    def _limit_check(
        self, check: _Check, name: str, measured: np.ndarray, limits: np.ndarray, what: str, unit: str
    ) -> None:
        config = self.config.checks.get(name)
        if config is None:
            return
        # A NaN reading is a joint without that interface (ros2_control fills it with NaN): those
        # joints are not checked, and the others are (an argmax over NaN would pick it and hide them).
        # ``measured`` is an absolute value: an infinite reading stays infinite, over any limit.
        ratio = np.where(np.isnan(measured), -np.inf, measured / (config["factor"] * limits))
        worst = int(np.argmax(ratio))
        check(
            name,
            bool(ratio[worst] > 1.0),
            f"{self.profile.joint_names[worst]} {what} {measured[worst]:.2f} {unit} "
            f"> {config['factor']:.2f} x limit {limits[worst]:.2f}",
        )

    # -- the command -------------------------------------------------------------------------------
    def _command(self, inputs: SupervisorInputs, now: float) -> JointTargets:
        q = np.asarray(inputs.joint_position, dtype=float)
        if self.mode in (Mode.DAMPING, Mode.ESTOP):
            return self._stopped_command(inputs, q, now)
        if self.mode == Mode.ACTIVE:
            return self._active_command(inputs, q, now)
        teleop = self._teleop_to_follow(inputs, now)
        if teleop is not None:
            self._following_teleop = True
            return teleop.copy()
        if self._following_teleop:  # teleop went silent: the hold starts where teleop left the joints
            self._following_teleop = False
            self._hold_in_place = False
            assert self._last_sent is not None  # the tick that followed teleop sent its command
            self._start_segment(self._last_sent.position, now)
            self._effort_from_stand = False
        start = self._segment_start if self._segment_start is not None else q
        if self._hold_in_place and self.mode == Mode.TAKEOVER:
            return JointTargets.positions(start)
        duration = (
            self.config.hold_duration
            if self.mode == Mode.TAKEOVER and self.config.hold_pose == "stand"
            else self.config.stand_duration
        )
        alpha = 1.0 if duration <= 0 else min(1.0, (now - self._segment_time) / duration)
        command = JointTargets.positions(_smoothstep(start, self.profile.default_positions, alpha))
        if self.mode == Mode.STANDBY or self._effort_from_stand:
            # The weight comes onto the legs as they reach the stand: the feed-forward moves with the
            # pose, from what was sent when the trajectory began (none from lying; all of it standing).
            # A takeover during the stand-up finishes it the same way.
            command.effort = _smoothstep(self._segment_effort_or_zero(), self._stand_effort, alpha)
        return command

    def _segment_effort_or_zero(self) -> np.ndarray:
        if self._segment_effort is None or not self._stands_with_effort:
            return np.zeros_like(self._stand_effort)
        return self._segment_effort

    def _stopped_command(self, inputs: SupervisorInputs, q: np.ndarray, now: float) -> JointTargets:
        """DAMPING / ESTOP: the descent to the lying pose where there is one, else hold where measured."""
        if self._damp_pose is not None and self._segment_start is not None:
            descent = self._descent(now - self._segment_time)
            if descent is not None:
                return JointTargets.positions(descent)
            if not self._fresh(inputs.joint_states_time, now, "joint_states_stale"):
                # Lowered without feedback: the last sample is the pose before the fault, and
                # "hold it" would stand the robot back up. The lying pose stays the target.
                return JointTargets.positions(self._damp_pose)
        return JointTargets.positions(q)

    def _active_command(self, inputs: SupervisorInputs, q: np.ndarray, now: float) -> JointTargets:
        """ACTIVE: the policy's command, blended in from the engage; never a non-finite one."""
        policy = inputs.policy_command
        if not _finite(policy):  # even with its check disabled, a NaN never leaves here
            held = self._last_sent.position if self._last_sent is not None else q
            return JointTargets.positions(held)
        command = policy.copy()
        if self._blend_from is not None and self.config.blend_duration > 0:
            alpha = min(1.0, (now - self._blend_time) / self.config.blend_duration)
            command.position = (1 - alpha) * self._blend_from + alpha * policy.position
            if self._blend_effort is not None:  # the stand's feed-forward hands over with the pose
                command.effort = (1 - alpha) * self._blend_effort + alpha * policy.effort
            if alpha >= 1.0:
                self._blend_from = None
        return command

    def _teleop_to_follow(self, inputs: SupervisorInputs, now: float) -> Optional[JointTargets]:
        """The teleop command to follow in TAKEOVER (None: hold), within the policy's limits.

        Only teleop sent since this TAKEOVER began: an older command, though fresh, names
        targets for the joints it leaves out from before the takeover (the policy's, or the
        stand pose), and following it would jump them there."""
        command = inputs.teleop_command
        if not (
            self.mode == Mode.TAKEOVER
            and command is not None
            and _finite(command)
            and inputs.teleop_time is not None
            and inputs.teleop_time >= self._mode_since
            and now - inputs.teleop_time <= TELEOP_FRESH_S
        ):
            return None
        over = self._over_limits(command)
        if over:  # teleop passes the same limits as the policy: one over them is not followed
            reason = f"teleop command refused: it asks {over}; holding"
            if reason != self._refused_teleop:
                self.events.append(reason)
            self._refused_teleop = reason
            return None
        self._refused_teleop = ""
        return command

    def _descent(self, elapsed: float) -> Optional[np.ndarray]:
        """The category-1 stop's targets ``elapsed`` s after DAMPING/ESTOP began (None once it is
        over: then only damping): first to the stand pose in ``damp_settle`` s (four feet down,
        the stride's momentum taken), then to ``damp_pose`` in ``damp_duration`` s."""
        assert self._segment_start is not None and self._damp_pose is not None  # _command checks both first
        settle = self._descent_settle()
        if elapsed < settle:
            return _smoothstep(self._segment_start, self.profile.default_positions, elapsed / settle)
        if elapsed < settle + self.config.damp_duration:
            origin = self.profile.default_positions if settle else self._segment_start
            return _smoothstep(origin, self._damp_pose, (elapsed - settle) / self.config.damp_duration)
        return None

    def _descent_settle(self) -> float:
        return DAMP_SETTLE_S if self._descent_via_stand else 0.0

    def _descent_left(self, now: float) -> float:
        """s until the category-1 stop under way has lowered the robot (0: none under way)."""
        if self._damp_pose is None or self.mode not in (Mode.DAMPING, Mode.ESTOP):
            return 0.0
        return max(0.0, self._descent_settle() + self.config.damp_duration - (now - self._segment_time))

    def _share_of_a_period(self, now: float) -> float:
        """The time since the last command sent, in command periods, at most one. The limits per
        period refill by this share: target_step's budget per joint, and the velocity rate
        limiter's time step. So two ticks closer than a period (in real time, a late policy
        command and the next one on time) together move the targets no further than one tick a
        period would, while a tick after one that moved nothing keeps its whole step. A clock
        that went back counts as a period."""
        if self._last_sent_time is None or now < self._last_sent_time:
            return 1.0
        share = (now - self._last_sent_time) / self.period
        # Real time stamps are epoch seconds (2.4e-7 s apart as floats): a tick a period apart
        # keeps the whole period, whatever the rounding, at any command rate.
        tolerance = max(1e-4, 4.0 * math.ulp(now) / self.period)
        return 1.0 if share > 1.0 - tolerance else share

    def _filter(self, command: JointTargets, checks: list[CheckResult], share: float) -> JointTargets:
        if self.mode in (Mode.DAMPING, Mode.ESTOP):
            self._velocity_acceleration[:] = 0.0  # the stop sends zero velocity targets
            self._step_budget = None  # after the stop, a whole step again
            return command  # measured positions or the stop's descent: clamping would pull the joints
        # Whatever the source, no velocity target or feed-forward effort over the limits leaves here.
        max_velocity, max_effort = self._max_velocity, self._max_effort
        command.velocity = np.clip(command.velocity, -max_velocity, max_velocity)
        command.effort = np.clip(command.effort, -max_effort, max_effort)
        self._limit_velocity_rate(command, checks, share)
        position = command.position
        limited = np.clip(position, self._low, self._high)
        if "position_limit" in self.config.checks and self.config.checks["position_limit"].enabled:
            moved = np.abs(limited - position) > 1e-12
            checks.append(
                CheckResult(
                    "position_limit",
                    not moved.any(),
                    Response.CLAMP,
                    f"targets clamped for {[self.profile.joint_names[i] for i in np.flatnonzero(moved)]}"
                    if moved.any()
                    else "",
                )
            )
            position = limited
        step = self.config.checks.get("target_step")
        if step is not None and step.enabled and self._last_sent is not None:
            max_step = step["max_step"]
            budget = self._step_budget if self._step_budget is not None else np.full(len(position), max_step)
            budget = np.minimum(max_step, budget + share * max_step)
            delta = position - self._last_sent.position
            too_far = np.abs(delta) > budget
            if too_far.any():
                left = float(budget[too_far].min())
                detail = (
                    f"target steps above {max_step:.2f} rad per period limited"
                    if left >= max_step
                    else f"target steps limited: {left:.3f} of {max_step:.2f} rad per period left "
                    f"{share:.2f} of a period after the last command"
                )
            checks.append(
                CheckResult("target_step", not too_far.any(), Response.CLAMP, detail if too_far.any() else "")
            )
            delta = np.clip(delta, -budget, budget)
            self._step_budget = budget - np.abs(delta)
            position = self._last_sent.position + delta
        command.position = position
        return command

    def _limit_velocity_rate(self, command: JointTargets, checks: list[CheckResult], share: float) -> None:
        """Velocity targets reach a new value no faster than the profile's acceleration and jerk
        limits allow (``target_rate``), as libfranka's rate limiter does. The acceleration is also
        kept low enough to come back to zero, at the jerk limit, by the time the target is reached,
        so the limited target does not overshoot (by more than a jerk step's rounding). The step
        is the time since the last command, up to a period (``share``)."""
        if not self._rate_limited or self._last_sent is None:
            return
        dt = self.period * max(share, 1e-6)
        previous = self._last_sent.velocity
        gap = command.velocity - previous
        wanted = gap / dt
        # The largest acceleration from which the jerk limit still brings the acceleration back to
        # zero, one step of dt at a time, within the gap: a^2 / 2j + a dt / 2 = |gap|.
        jerk = self._max_jerk
        with np.errstate(invalid="ignore"):  # no jerk limit (inf): inf - inf
            stoppable = np.where(
                np.isinf(jerk), np.inf, jerk * (np.sqrt(dt * dt / 4.0 + 2.0 * np.abs(gap) / jerk) - dt / 2.0)
            )
        wanted = np.clip(wanted, -stoppable, stoppable)
        jerk_step = jerk * dt
        acceleration = self._velocity_acceleration + np.clip(
            wanted - self._velocity_acceleration, -jerk_step, jerk_step
        )
        acceleration = np.clip(acceleration, -self._max_acceleration, self._max_acceleration)
        limited = np.clip(previous + acceleration * dt, -self._max_velocity, self._max_velocity)
        # A target reached exactly is not a limit (floating point would report it as one).
        limited = np.where(np.abs(limited - command.velocity) <= 1e-9, command.velocity, limited)
        moved = np.abs(limited - command.velocity) > 1e-9
        checks.append(
            CheckResult(
                "target_rate",
                not moved.any(),
                Response.CLAMP,
                f"velocity targets rate-limited for {[self.profile.joint_names[i] for i in np.flatnonzero(moved)]}"
                if moved.any()
                else "",
            )
        )
        self._velocity_acceleration = (limited - previous) / dt
        command.velocity = limited


# The joystick's operator actions, most severe first: presses in one message are acted on in this order.
OPERATOR_BUTTONS = ("estop", "damp", "reset", "takeover", "engage")


def newly_pressed(index: int, before: Sequence[int], now: Sequence[int]) -> bool:
    """Whether joystick button ``index`` is down in ``now`` and was not in ``before``."""
    return index < len(now) and now[index] == 1 and not (index < len(before) and before[index] == 1)


def _finite(command: Optional[JointTargets]) -> TypeGuard[JointTargets]:
    return command is not None and all(
        np.all(np.isfinite(a)) for a in (command.position, command.velocity, command.effort)
    )


def _smoothstep(start: np.ndarray, end: np.ndarray, alpha: float) -> np.ndarray:
    """From ``start`` (alpha 0) to ``end`` (alpha 1) with zero velocity at both ends."""
    a = min(1.0, max(0.0, alpha))
    s = a * a * (3 - 2 * a)
    return (1 - s) * start + s * end
