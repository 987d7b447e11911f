"""policy_runtime: runs the ONNX policy and publishes its joint targets for the supervisor.

Thin adapter around :mod:`sim2real.core.policy_tick` (the tick),
:mod:`sim2real.core.policy_slot` (the running policy and hot-swap) and
:mod:`sim2real.core.robot_inputs` (messages -> RobotSignals).

Inputs: /joint_states, /imu/data, /state_estimate (nav_msgs/Odometry), /cmd_vel
(geometry_msgs/Twist), /goal_pose (geometry_msgs/PoseStamped, base frame); a policy
waits, with the reason in /diagnostics, until every input its observation needs has
arrived. Output: /policy/joint_commands (names + position targets), stamped with the
/joint_states stamp the targets were computed from, so the supervisor's tick_overrun
check measures the data's age.

Ticks are driven by /joint_states: the first state at or after each policy-period
boundary of its stamps is computed on at once, in real time and in lockstep alike.
A free-running timer would compute on a state up to one sensing period old and drift
against the driver's clock; here the command leaves as soon as the observation allows.
/imu/data and /state_estimate are polled at the tick (:mod:`sim2real.nodes.polled`), not
handled per message: a callback per 500 Hz message is what filled a core.

Latency (:mod:`sim2real.core.latency`): every tick the time from the state's stamp to the
command's publication; once a second the actuation latency, from the efforts in /joint_states
against the targets the supervisor sent (/joint_commands). Both as p50/p99/max in the
``policy_runtime: latency`` diagnostics status (WARN on overrun of ``latency_budget``).
``latency_compensation:=true`` predicts each observation forward by the measured latency;
``latency_log`` appends the samples for ``sim2real dr from-latency``.

Hot-swap: ``ros2 param set /policy_runtime policy_path new.onnx`` (or ``sim2real policy
swap``). The node's SetParameters service answers asynchronously: the model is loaded,
validated and dry-run on a loader thread while the executor keeps running the control
callbacks (their own callback group); the answer is sent when the loader is done. A
refused model is reported in the SetParameters result and the running policy keeps
running. One executor thread rather than rclpy's MultiThreadedExecutor: at 1 kHz of
sensor messages (joint states + IMU) its per-callback thread hand-off cannot keep up on
a 2-core robot computer (measured: most states arrived too late to compute on). The
default is rclpy's EventsExecutor: it dispatches each /joint_states message without
rebuilding a wait set, which halves the node's CPU (benchmarks/control_loop.py, across
nodes: 28 % of a core against 57 % with the SingleThreadedExecutor, `-p executor:=single`).
It was the default once before and was reverted for 195 ms command gaps during hot-swaps;
those came from a graph that saturated both cores (a callback per 500 Hz message in every
node), not from the executor, and the hot-swap graph tests pass with it since the nodes poll.

Trust: policies are swapped in only from ``policy_dirs`` (the starting file itself is allowed,
not its folder); with ``trusted_keys`` only files signed by a trusted ed25519 key run, at
start and at every swap (:mod:`sim2real.core.policy_signing`); files over ``max_policy_mb``
are refused before they are read. Every start and swap request, accepted or refused, with who
asked, is appended to the audit log (``audit_log``; `sim2real policy history`).

    ros2 run sim2real policy_runtime --ros-args -p robot:=go2 -p policy_path:=policies/go2_walk.onnx
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import ParameterType, SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import Imu, JointState

from sim2real.core import realtime
from sim2real.core.latency import LatencyMonitor, trained_latency
from sim2real.core.paths import share_dir
from sim2real.core.policy_audit import AuditLog, default_audit_log
from sim2real.core.policy_signing import TrustedKeys
from sim2real.core.policy_slot import (
    DEFAULT_ACTION_BOUND,
    DEFAULT_CROSSFADE,
    DEFAULT_MAX_JUMP,
    DEFAULT_MAX_OVERREACH,
    PolicySlot,
)
from sim2real.core.policy_tick import STALE, PolicyRuntime
from sim2real.core.robot_inputs import CMD_VEL_TIMEOUT_S, RobotInputs
from sim2real.core.robot_profile import load_profile
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.imu_reading import imu_reading
from sim2real.nodes.params import declare, refuse_clock_change
from sim2real.nodes.policy_swap import SWAP_ORIGIN
from sim2real.nodes.polled import PolledSubscription, companion_node

EXECUTORS = ("single", "multi", "events")
DIAGNOSTICS_PERIOD_S = 1.0
LOADER_SWITCH_INTERVAL_S = 0.0005
DEFAULT_MAX_POLICY_MB = 50.0  # the shipped policies are under 1 MB

WARN_THROTTLE_S = 2.0


class PolicyRuntimeNode(Node):
    def __init__(self, **kwargs):
        super().__init__("policy_runtime", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile name or path")
        policy_path = declare(
            self,
            "policy_path",
            "",
            "ONNX policy file (sim2real export). Set it while running "
            "to hot-swap: refused with the reason, or swapped at a tick boundary",
            read_only=False,
        )
        policy_dirs = declare(
            self,
            "policy_dirs",
            [str(share_dir() / "policies")],
            "Directories policies may be swapped in from (symlinks resolved); the starting "
            "policy file itself is allowed, never its whole folder",
        )
        trusted_keys = declare(
            self,
            "trusted_keys",
            "",
            "Directory of trusted ed25519 public keys (*.pub, sim2real policy keygen); when "
            "set, only policies signed by one of them run, at start and at every swap; "
            "'' = unsigned policies run",
        )
        max_policy_mb = declare(
            self,
            "max_policy_mb",
            DEFAULT_MAX_POLICY_MB,
            "MB: a larger policy file is refused before it is read",
            above=0,
        )
        max_overreach = declare(
            self,
            "max_overreach",
            DEFAULT_MAX_OVERREACH,
            "rad a joint target may pass its joint limit; a tick past it is withheld "
            "(NaN: the supervisor holds) and a candidate doing it in its dry run is refused",
        )
        audit_log = declare(
            self,
            "audit_log",
            "",
            "Append-only log of every policy start and swap request (sim2real policy history); "
            "'' = policy_audit.jsonl in $SIM2REAL_STATE_DIR or ~/.local/state/sim2real",
        )
        crossfade = declare(
            self,
            "crossfade",
            DEFAULT_CROSSFADE,
            "s over which a swap moves the joint targets from the old policy to the new one",
        )
        max_jump = declare(
            self,
            "max_jump",
            DEFAULT_MAX_JUMP,
            "rad: a new policy whose targets differ more from the running one's (dry run on the "
            "newest input) is refused",
        )
        action_bound = declare(
            self,
            "action_bound",
            DEFAULT_ACTION_BOUND,
            "|action| allowed in the dry run of a policy exported without an action_clip",
        )
        cmd_vel_timeout = declare(
            self, "cmd_vel_timeout", CMD_VEL_TIMEOUT_S, "s: an older /cmd_vel counts as zero (stand still)"
        )
        compensate = declare(
            self,
            "latency_compensation",
            False,
            "Predict the state forward by the measured latency (joints: PD with the commands "
            "in flight; base orientation: gyro) before building each observation",
        )
        horizon = declare(
            self,
            "compensation_horizon",
            0.0,
            "s of latency to compensate (e.g. measured earlier); 0 = the live measurement "
            "(sensor->command + actuation). Only the part beyond the latency the policy was "
            "trained with (its metadata's randomization) is predicted away",
        )
        budget = declare(
            self,
            "latency_budget",
            0.0,
            "s: sensor->command p99 + actuation latency above this is an overrun (WARN in "
            "/diagnostics); 0 = the policy period",
        )
        self.latency_log = declare(
            self,
            "latency_log",
            "",
            "Append each measured latency sample (JSON lines) to this file, for `sim2real dr from-latency`; '' = none",
        )
        self.fit_actuation = (
            declare(
                self,
                "fit_actuation",
                True,
                "Fit the actuation latency from the driver's effort echo once a second "
                "(5-10 ms of numpy on its own thread); always on with "
                "latency_compensation or latency_log",
            )
            or compensate
            or bool(self.latency_log)
        )
        self.executor_kind = declare(
            self,
            "executor",
            "events",
            "rclpy executor: single (SingleThreadedExecutor), multi (MultiThreadedExecutor) "
            "or events (rclpy.experimental.EventsExecutor); see benchmarks/control_loop.py",
        )
        if self.executor_kind not in EXECUTORS:
            raise ValueError(f"parameter executor:={self.executor_kind!r} must be one of {list(EXECUTORS)}")
        if not policy_path:
            raise ValueError(
                "parameter policy_path is empty: give the ONNX policy to run "
                "(-p policy_path:=policies/<robot>_<task>.onnx)"
            )

        self.profile = load_profile(robot)
        self.inputs = RobotInputs(self.profile, cmd_vel_timeout)
        self.refused_inputs = 0  # messages dropped at the edge: malformed or not finite
        self.audit = AuditLog(audit_log or default_audit_log())
        keys = TrustedKeys(trusted_keys) if trusted_keys else None  # SignatureError (a ValueError): exit 2
        self.slot = PolicySlot(
            self.profile,
            policy_dirs,
            max_jump=max_jump,
            crossfade=crossfade,
            action_bound=action_bound,
            max_overreach=max_overreach,
            max_bytes=round(max_policy_mb * 1e6),
            trusted_keys=keys,
        )
        try:
            policy = self.slot.start(policy_path)  # PolicyRefused (a ValueError): exit 2 with every difference
        except ValueError as exc:
            self._audit(policy_path, "", None, "start", False, str(exc))
            raise
        self._audit(policy_path, policy.sha256, policy.signer.signer if policy.signer else None, "start", True, "")
        self.latency = LatencyMonitor(
            self.profile, compensate, horizon, budget, trained_latency=trained_latency(policy.metadata.randomization)
        )
        self.runtime = PolicyRuntime(self.slot, self.inputs, latency_monitor=self.latency)
        self.sim_time = self.get_parameter("use_sim_time").value
        self._period_ns = round(self.profile.policy_period * stamps.NS_PER_S)
        self._next_tick_ns = 0
        self._last_state_wall = None
        self._last_waiting = None
        self._logged_until = 0.0  # requested_at of the last swap logged as done
        self._command = JointState(name=self.profile.joint_names)
        self._guard_trips_seen = 0

        # The control callbacks in their own group: the SetParameters coroutine holds the default
        # group while it awaits the loader, and the executor must keep running these meanwhile.
        control = MutuallyExclusiveCallbackGroup()
        self._command_pub = self.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(
            JointState, "/joint_states", self._on_joint_states, qos.SENSOR_SUBSCRIBE, callback_group=control
        )
        # The IMU and the estimate only matter at a tick: polled then, not a callback each (500 Hz).
        self._inputs_node = companion_node(self, "inputs")
        self._imu = PolledSubscription(self._inputs_node, self, Imu, "/imu/data", raw=True, shared=True)
        self._state_estimate = PolledSubscription(self._inputs_node, self, Odometry, "/state_estimate", shared=True)
        self.create_subscription(
            JointState, "/joint_commands", self._on_hardware_command, qos.COMMAND, callback_group=control
        )
        self.create_subscription(Twist, "/cmd_vel", self._on_cmd_vel, qos.COMMAND, callback_group=control)
        self.create_subscription(PoseStamped, "/goal_pose", self._on_goal, qos.COMMAND, callback_group=control)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        # Under realtime:=true one step below the control thread, which it must never hold off.
        self._loader = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="policy_loader", initializer=realtime.below_own_priority
        )
        self._fitter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="latency_fit")
        self._latency_fit = None
        # While a model loads (Python-heavy: metadata, dry run), the control callbacks wait for the
        # GIL up to the switch interval: 5 ms by default (measured: tick p99 2 ms, max 12 ms), 0.5 ms
        # here (p99 0.3 ms, max 2 ms). Process-wide, and harmless in a process that is mostly idle.
        # The loader is deliberately not niced: preempted on a busy machine while holding the GIL,
        # a niced loader stalled the ticks for over 0.1 s (priority inversion).
        sys.setswitchinterval(LOADER_SWITCH_INTERVAL_S)
        self._preapproved: str | None = None
        service = next(s for s in self.services if s.srv_type is SetParameters)
        self._set_parameters_now = service.callback
        service.callback = self._set_parameters_service
        meta = policy.metadata
        self.get_logger().info(
            f"{self.profile.name}: running {policy_path} (sha256 {policy.sha256}, task "
            f"{meta.task}, commit {meta.source_commit}) at {1 / self.profile.policy_period:.0f} Hz; "
            f"policy directories {[str(d) for d in self.slot.policy_dirs]}"
        )

    # -- inputs (control group) ---------------------------------------------------------------
    def _now(self) -> float:
        now = self.get_clock().now().nanoseconds
        stamp = self.inputs.joint_states_stamp_ns or 0
        # In lockstep the clock message may trail the state it announces (as in the supervisor).
        return max(now, stamp) * 1e-9 if self.sim_time else now * 1e-9

    def _on_joint_states(self, msg: JointState) -> None:
        received = time.perf_counter()
        try:
            self.inputs.set_joint_states(msg.name, msg.position, msg.velocity, stamps.to_ns(msg.header.stamp))
        except ValueError as exc:
            self._refuse_input(str(exc))
            return
        self._last_state_wall = time.monotonic()
        if self.fit_actuation and len(msg.effort) == len(msg.name) and len(msg.velocity) == len(msg.name):
            inputs = self.inputs
            self.latency.on_state(
                inputs.joint_states_stamp_ns * 1e-9,
                inputs.in_profile_order(msg.position),
                inputs.in_profile_order(msg.velocity),
                inputs.in_profile_order(msg.effort),
            )
        self._maybe_tick(received)

    def _on_hardware_command(self, msg: JointState) -> None:
        # What the supervisor sent the robot: the reference for the actuation latency.
        if list(msg.name) == self.profile.joint_names and len(msg.position) == self.profile.num_joints:
            self.latency.on_hardware_command(self._now(), msg.position)

    def _poll_inputs(self) -> None:
        imu = self._imu.take_newest()
        if imu is not None:
            try:
                reading = imu_reading(imu[0])
                self.inputs.set_imu(reading.orientation, reading.angular_velocity)
            except ValueError as exc:  # the previous sample stays; the supervisor sees the IMU go stale
                self._refuse_input(str(exc))
        estimate = self._state_estimate.take_newest()
        if estimate is not None:
            v = estimate[0].twist.twist.linear  # nav_msgs/Odometry: twist in the child (body) frame
            self.inputs.set_state_estimate((v.x, v.y, v.z), estimate[1] * 1e-9 if not self.sim_time else self._now())

    def _on_cmd_vel(self, msg: Twist) -> None:
        try:
            self.inputs.set_velocity_command(msg.linear.x, msg.linear.y, msg.angular.z, self._now())
        except ValueError as exc:
            self._refuse_input(str(exc))

    def _on_goal(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        try:
            self.inputs.set_goal((p.x, p.y, p.z), msg.header.frame_id)
        except ValueError as exc:
            self._refuse_input(str(exc))

    def _refuse_input(self, why: str) -> None:
        """A message dropped at the edge (malformed, not finite): counted in /diagnostics."""
        self.refused_inputs += 1
        self.get_logger().warning(
            f"{why} ({self.refused_inputs} inputs refused so far)", throttle_duration_sec=WARN_THROTTLE_S
        )

    # -- the tick (control group) -----------------------------------------------------------------
    def _maybe_tick(self, received: float) -> None:
        stamp = self.inputs.joint_states_stamp_ns
        if stamp < self._next_tick_ns:
            if not stamps.jumped_back(stamp, self._next_tick_ns, self._period_ns):
                return
            self.get_logger().warning(
                "/joint_states stamps jumped back (robot or sim restarted?): ticking on the new time line"
            )
        now = self._now()
        age = None if self.sim_time else now - stamp * 1e-9
        self._poll_inputs()
        tick = self.runtime.tick(now, stamp, age)
        if tick.waiting == STALE:
            return  # the next, fresher state of this period may still tick
        self._next_tick_ns = stamps.next_period_start_ns(stamp, self._period_ns)
        if tick.targets is None:
            if tick.waiting != self._last_waiting:
                self.get_logger().info(f"waiting: {tick.waiting}")
                self._last_waiting = tick.waiting
            return
        if self._last_waiting:
            self.get_logger().info("all inputs present: policy running")
            self._last_waiting = ""
        msg = self._command
        msg.header.stamp = stamps.to_msg(stamp)
        msg.position = tick.targets.tolist()
        self._command_pub.publish(msg)
        self.runtime.published(received, time.perf_counter())
        self.latency.on_command(stamp * 1e-9, self._now(), tick.targets)
        if not np.all(np.isfinite(tick.targets)):
            # Published anyway: the supervisor must see the fault (it holds), not a silent gap.
            guard = self.slot.guard_trips != self._guard_trips_seen
            self._guard_trips_seen = self.slot.guard_trips
            self.get_logger().error(
                self.slot.guard_reason if guard else "policy output is not finite",
                throttle_duration_sec=WARN_THROTTLE_S,
            )

    # -- hot-swap (default group; the model loads on the loader thread) ------------------------------
    async def _set_parameters_service(
        self, request: SetParameters.Request, response: SetParameters.Response
    ) -> SetParameters.Response:
        # `sim2real policy swap` says who asks in a swap_origin pseudo-parameter of the same request.
        origin = (
            next(
                (
                    p.value.string_value
                    for p in request.parameters
                    if p.name == SWAP_ORIGIN and p.value.type == ParameterType.PARAMETER_STRING
                ),
                "",
            )
            or "parameter service"
        )
        for parameter in request.parameters:
            if parameter.name == SWAP_ORIGIN:
                response.results.append(SetParametersResult(successful=True))
                continue
            if parameter.name == "policy_path" and parameter.value.type == ParameterType.PARAMETER_STRING:
                path = parameter.value.string_value
                event = await self._on_loader(self.slot.propose, path, self._recorder(origin))
                self._log_proposal(event, origin)
                if not event.accepted:
                    response.results.append(SetParametersResult(successful=False, reason=event.reason))
                    continue
                self._preapproved = path  # already validated and staged: the on-set callback lets it through
            response.results.append(
                self._set_parameters_now(
                    SetParameters.Request(parameters=[parameter]), SetParameters.Response()
                ).results[0]
            )
        return response

    async def _on_loader(self, function, *args):
        """``function(*args)`` on the loader thread; the executor runs other callbacks meanwhile."""
        done = Future()
        executor = self.executor

        def work():
            try:
                done.set_result(function(*args))
            except Exception as exc:  # handed to the awaiting coroutine, which re-raises it
                done.set_exception(exc)
            if executor is not None:
                executor.wake()  # resume the awaiting coroutine now, not at the next message

        self._loader.submit(work)
        return await done

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        for parameter in parameters:
            if parameter.name == "use_sim_time":
                return refuse_clock_change([parameter])
            if parameter.name != "policy_path":
                continue
            if not isinstance(parameter.value, str):
                return SetParametersResult(successful=False, reason="policy_path must be a string (a file path)")
            if parameter.value == self._preapproved:
                self._preapproved = None
                continue
            # Not through the SetParameters service (set_parameters_atomically, or in-process): the
            # model would load on the executor's thread and stall the control callbacks for as long
            # as it takes (0.4-1.6 s for a large file). Refused, with the way that works.
            reason = (
                "policy_path is swapped only through the set_parameters service (`ros2 param set`, "
                "`sim2real policy swap`), which loads the model off the control path"
            )
            self._audit(parameter.value, "", None, "parameter (atomic or in-process)", False, reason)
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _log_proposal(self, event, origin: str) -> None:
        if event.accepted:
            self.get_logger().info(f"hot-swap staged ({origin}): {event.describe()}")
        else:
            self.get_logger().warning(f"hot-swap ({origin}) {event.describe()}")
        if not event.accepted:  # an accepted one was recorded before it was staged (_recorder)
            self._audit(event.path, event.sha256_new, event.signer, origin, False, event.reason)

    def _recorder(self, origin: str):
        """The audit record of an accepted swap, written (and synced) before it is staged."""

        def record(event) -> None:
            self.audit.record(
                robot=self.profile.name,
                file=str(event.path),
                sha256=event.sha256_new,
                signer=event.signer,
                origin=origin,
                accepted=True,
                reason="",
            )

        return record

    def _audit(self, path: str, sha256: str, signer: str | None, origin: str, accepted: bool, reason: str) -> None:
        try:
            self.audit.record(
                robot=self.profile.name,
                file=str(path),
                sha256=sha256,
                signer=signer,
                origin=origin,
                accepted=accepted,
                reason=reason,
            )
        except OSError as exc:  # the swap itself stands; the operator must learn the log is not kept
            self.get_logger().error(f"policy audit log {self.audit.path} not written: {exc}")

    # -- diagnostics (default group) ------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        events = list(self.slot.events)
        for event in events:
            if event.completed and event.requested_at > self._logged_until:
                # Logged here, not by the control thread that finished the cross-fade.
                self.get_logger().info(f"hot-swap done: {event.describe()} (now running sha256 {event.sha256_new})")
                self._logged_until = event.requested_at
        summary = self.runtime.summary()
        active = self.slot.active.policy
        waiting = self.runtime.waiting
        silent = self._last_state_wall is None or time.monotonic() - self._last_state_wall > 0.5
        if silent:
            waiting = waiting or "no /joint_states for more than 0.5 s"
        values = {
            "state": f"waiting: {waiting}" if waiting else "running",
            "policy_path": str(active.path),
            "sha256": active.sha256,
            "task": active.metadata.task,
            "source_commit": active.metadata.source_commit,
            "executor": self.executor_kind,
            # The supervisor acts on estimator divergence only for a policy that reads the estimate.
            "observes_state_estimate": str(any(r.reads_state_estimate for r in self.slot.running)).lower(),
            **{k: f"{v:.3f}" if isinstance(v, float) else str(v) for k, v in summary.items()},
            "swaps": str(self.slot.swaps),
            "refused_swaps": str(self.slot.refused),
            "refused_inputs": str(self.refused_inputs),
            "signer": active.signer.signer if active.signer else "unsigned (no trusted_keys)",
            "action_guard_trips": str(self.slot.guard_trips),
            "commands_clamped": str(self.slot.commands_clamped),
        }
        if self.slot.guard_reason:
            values["last_action_guard"] = self.slot.guard_reason
        if self.slot.last_clamp:
            values["last_clamp"] = self.slot.last_clamp
        swaps = [e for e in events if e.accepted]
        refusals = [e for e in events if not e.accepted]
        if swaps:
            values["last_swap"] = swaps[-1].describe()
        if refusals:
            values["last_refusal"] = refusals[-1].describe()
        level = DiagnosticStatus.WARN if waiting else DiagnosticStatus.OK
        if summary["non_finite_ticks"]:
            level = DiagnosticStatus.ERROR
        status = DiagnosticStatus(
            level=level,
            name=f"{self.get_name()}: policy",
            hardware_id=self.profile.name,
            message=values["state"],
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
        )
        # A hot-swapped policy may have been trained with another latency range.
        self.latency.trained_latency = trained_latency(active.metadata.randomization)
        sample = self._latency_fit_result() if self.fit_actuation else None
        if sample is not None and self.latency_log:
            with open(self.latency_log, "a") as log:
                log.write(json.dumps({"t": self.get_clock().now().nanoseconds * 1e-9, **sample}) + "\n")
        overrun = self.latency.overrun()
        latency = DiagnosticStatus(
            level=DiagnosticStatus.WARN if overrun else DiagnosticStatus.OK,
            name=f"{self.get_name()}: latency",
            hardware_id=self.profile.name,
            message=overrun or "within budget",
            values=[KeyValue(key=k, value=v) for k, v in self.latency.summary().items()],
        )
        array = DiagnosticArray(status=[status, latency])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)

    def _latency_fit_result(self) -> dict | None:
        """Record the last fit, if it finished, and start the next one off the executor thread.

        A fit in this callback (15-30 ms then) held the executor every second: /joint_states queued,
        arrived over a period old and were skipped (measured across nodes on 2 cores: p50 3.4 ms,
        p99 21 ms, about 20 stale states a second)."""
        previous, sample = self._latency_fit, None
        if previous is not None:
            if not previous.done():
                return None
            sample = self.latency.record(previous.result())
        self._latency_fit = self._fitter.submit(self.latency.fit)
        return sample

    def stop(self) -> None:
        self._fitter.shutdown(wait=True, cancel_futures=True)
        self._loader.shutdown(wait=True, cancel_futures=True)

    def destroy_node(self) -> None:
        self._imu.destroy()
        self._state_estimate.destroy()
        self._inputs_node.destroy_node()
        super().destroy_node()


def make_executor(kind: str, context=None):
    if kind == "multi":
        return MultiThreadedExecutor(num_threads=2, context=context)
    if kind == "events":
        return lifecycle.events_executor(context=context)
    return SingleThreadedExecutor(context=context)


def main(args=None) -> NoReturn:
    lifecycle.exit_process(
        lifecycle.run(
            "policy_runtime", PolicyRuntimeNode, args, executor=lambda node: make_executor(node.executor_kind)
        )
    )


if __name__ == "__main__":
    main()
