"""sim_robot: the simulated robot as ROS 2 hardware, speaking the hardware contract.

The physics engine is a parameter: ``engine: pybullet`` (``hardware:=sim``, the engine
training uses) or ``engine: mujoco`` (``hardware:=mujoco``, the second engine: sim2sim on
the real graph before hardware). Everything below holds for both.

Publishes ``/joint_states`` (and ``/imu/data`` for robots with a floating base) every
sensing period, takes ``/joint_commands`` (position target, velocity target, feed-forward
effort, matched by joint name) and applies the profile's PD through the simulation
core's actuator model. ``/sim/ground_truth`` (nav_msgs/Odometry) carries the true base
state for estimator tests; ``/diagnostics`` carries the loop's timing.

Clocks:
  real time  the loop runs on a dedicated thread at the sensing period (wall clock).
  lockstep   ``/clock`` is published with sim time; the sim advances one command period
             only after a command stamped at or after the current sim time arrives, so
             it runs exactly as fast as the graph answers (nodes set use_sim_time).

Like a real driver: before the first command it holds the default pose; when commands
stop for ``command_timeout`` it damps; a command it cannot apply (unknown joint, wrong
lengths, non-finite values) is refused with a throttled warning and the last good
command keeps holding.

    ros2 run sim2real sim_robot --ros-args -p robot:=go2 -p lockstep:=true
    ros2 run sim2real sim_robot --ros-args -p robot:=go2 -p engine:=mujoco
"""

from __future__ import annotations

import threading
import time
from typing import NoReturn

from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState

from sim2real.core.joint_command import CommandRefused, JointCommandMapper
from sim2real.core.period_stats import PeriodStats
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import world_to_body
from sim2real.evaluate.reality import load_reality_robot
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.command_source import CommandSource
from sim2real.nodes.params import declare
from sim2real.nodes.sole_publisher import SolePublisherCheck
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import DEFAULT_ENGINE, ENGINES, make_world

NS_PER_S = stamps.NS_PER_S
LOCKSTEP_REPUBLISH_WALL_S = 0.5  # re-announce the current state while the graph is silent
DIAGNOSTICS_PERIOD_S = 1.0
WARN_THROTTLE_S = 2.0


class SimRobotNode(Node):
    def __init__(self, **kwargs):
        super().__init__("sim_robot", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile: a name under config/robots/ or a path to a profile YAML")
        self.lockstep = declare(
            self, "lockstep", False, "Publish /clock and advance only when the graph has answered the current sim time"
        )
        seed = declare(self, "seed", 0, "Seed for terrain and sensor noise; same seed, same run")
        conditions = declare(
            self,
            "conditions",
            "{}",
            "Physical conditions as a YAML mapping, e.g. '{ground_friction: 0.5, latency: 0.01}'",
        )
        # Checked: a NaN timeout would never damp, a negative one would damp almost every step.
        command_timeout = declare(
            self,
            "command_timeout",
            0.0,
            "Seconds without a valid /joint_commands before damping; 0 = the profile's value",
            at_least=0,
        )
        lockstep_period = declare(
            self,
            "lockstep_period",
            0.0,
            "Sim seconds advanced per answered command in lockstep; 0 = the profile's policy period",
            at_least=0,
        )
        suspended = declare(
            self,
            "suspended",
            False,
            "Hold a floating-base robot's trunk in the air, feet clear of the ground (a gantry), "
            "so joint scripts run without it falling",
        )
        engine = declare(self, "engine", DEFAULT_ENGINE, f"Physics engine: {' | '.join(ENGINES)}")
        model = declare(
            self,
            "model",
            "",
            "mujoco only: another robot model than the profile's (URDF/MJCF path or "
            "example-robot-data:go2); '' = the profile's",
        )
        reality = declare(
            self,
            "reality",
            "",
            "A robot of a reality set (config/reality/NAME.yaml): the set's engine and model under "
            "conditions drawn with its hidden seed, shown nowhere; '' = engine, model and conditions as given",
        )
        reality_robot = declare(self, "reality_robot", 0, "With reality: which robot of the set", at_least=0)
        self.profile = load_profile(robot)
        if reality:
            hidden = load_reality_robot(reality, reality_robot, self.profile.name, conditions)
            if hidden.engine != engine:
                raise ValueError(
                    f"reality set {reality!r} runs on {hidden.engine}, and this node's engine is {engine}: "
                    f"set engine:={hidden.engine} (hardware:=mujoco in a launch)"
                )
            engine, model, world_conditions = hidden.engine, hidden.model or "", hidden.conditions
            stated = hidden.stated
            described = f"reality:{reality} robot {reality_robot}, conditions hidden"
        else:
            world_conditions = stated = PhysicalConditions.from_yaml(conditions)
            described = model
        self.world = make_world(
            engine,
            self.profile,
            model=model or None,
            conditions=world_conditions,
            seed=seed,
            suspended=suspended,
        )
        # The noise the IMU message states: a reality robot's driver gives the set's datasheet
        # figure, never the drawn truth.
        self._stated_conditions = stated
        self.world.command(self.profile.default_positions)
        self.command_timeout = command_timeout or self.profile.command_timeout
        self.sensing_ns = round(self.profile.sensing_period * NS_PER_S)
        self.substeps = round(self.profile.sensing_period / self.profile.physics_period)
        self.steps_per_command = max(
            1, round((lockstep_period or self.profile.policy_period) / self.profile.sensing_period)
        )
        self.floating_base = not self.profile.fixed_base

        self.mapper = JointCommandMapper(self.profile.joint_names, self.profile.default_positions)
        self._lock = threading.Lock()
        self._command_ready = threading.Condition(self._lock)
        self._pending = None  # JointTargets copy waiting for the loop
        self._latest_command_stamp_ns = -1
        self._last_command_wall = None  # monotonic time of the last valid command
        self._damping = False
        self._refused = 0
        self._stop = threading.Event()
        self.fault: lifecycle.NodeFault | None = None  # set by the loop thread when it dies
        self.sim_ns = 0
        self.stats = PeriodStats(self.profile.sensing_period)

        self._joint_pub = self.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
        self._imu_pub = self.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH) if self.floating_base else None
        self._truth_pub = (
            self.create_publisher(Odometry, "/sim/ground_truth", qos.SENSOR_PUBLISH) if self.floating_base else None
        )
        self._clock_pub = self.create_publisher(Clock, "/clock", qos.CLOCK) if self.lockstep else None
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        SolePublisherCheck(self, self._joint_pub, "the robot has one driver, this sim")
        if self.lockstep:
            SolePublisherCheck(self, self._clock_pub, "lockstep sim time comes from this sim alone")
        self._source = CommandSource.declared(self, "/joint_commands")
        self.create_subscription(JointState, "/joint_commands", self._on_command, qos.COMMAND)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self._joint_msg = JointState(name=self.profile.joint_names)
        self._thread = threading.Thread(target=self._run_loop, name="sim_robot_loop", daemon=True)
        self.get_logger().info(
            f"{self.profile.name} on {engine}{f' ({described})' if described else ''}: "
            f"{self.profile.num_joints} joints, "
            f"sensing {1 / self.profile.sensing_period:.0f} Hz, "
            f"{'lockstep (publishing /clock)' if self.lockstep else 'real time'}"
            f"{', suspended (feet clear of the ground)' if suspended else ''}"
        )

    # -- commands (executor thread) ------------------------------------------------
    def _on_command(self, msg: JointState, info: dict) -> None:
        # Two parameters, no default: rclpy passes MessageInfo (the publisher's gid) only then.
        if not self._source.accepts(info):
            self.get_logger().error(self._source.refusal(), throttle_duration_sec=WARN_THROTTLE_S)
            return
        with self._lock:
            try:
                targets = self.mapper.apply(msg.name, msg.position, msg.velocity, msg.effort)
            except CommandRefused as exc:
                self._refused += 1
                self.get_logger().warning(
                    f"refused /joint_commands: {exc}; holding the last good command",
                    throttle_duration_sec=WARN_THROTTLE_S,
                )
                return
            self._pending = targets.copy()
            self._latest_command_stamp_ns = stamps.to_ns(msg.header.stamp)
            self._last_command_wall = time.monotonic()
            self._command_ready.notify_all()

    def _apply_pending(self) -> None:
        """Hand the newest command to the world, or damp when commands have stopped."""
        with self._lock:
            pending, self._pending = self._pending, None
            last = self._last_command_wall
        if pending is not None:
            self.world.command(pending.position, pending.velocity, pending.effort)
            if self._damping:
                self.get_logger().info("commands resumed: PD control again")
            self._damping = False
        elif (
            not self.lockstep
            and last is not None
            and not self._damping
            and time.monotonic() - last > self.command_timeout
        ):
            self._damping = True
            self.world.damp()
            self.get_logger().warning(
                f"no valid /joint_commands for {self.command_timeout:.3f} s: damping, as a real driver would"
            )

    # -- loops (own thread) -----------------------------------------------------------
    def _run_loop(self) -> None:
        try:
            self._lockstep_loop() if self.lockstep else self._realtime_loop()
        except Exception as exc:
            if self.context.ok() and not self._stop.is_set():  # a real fault; a shutdown race is not one
                # The process must end with it: a node that spins on without its loop publishes
                # nothing, and a lockstep graph waits for it for ever.
                self.fault = lifecycle.NodeFault("the simulation loop failed", exc)

    def _realtime_loop(self) -> None:
        period = self.profile.sensing_period
        deadline = time.monotonic()
        while not self._stop.is_set():
            self._apply_pending()
            self.world.step(self.substeps)
            self.sim_ns += self.sensing_ns
            self._publish_state(self.get_clock().now().to_msg())
            finished = time.monotonic()
            self.stats.record(deadline, finished)
            deadline += period
            if finished - deadline > 10 * period:  # far behind (e.g. machine paused): resync, don't burst
                deadline = finished
            delay = deadline - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def _lockstep_loop(self) -> None:
        self._publish_state(stamps.to_msg(self.sim_ns))
        while not self._stop.is_set():
            with self._lock:
                answered = self._command_ready.wait_for(
                    lambda: self._latest_command_stamp_ns >= self.sim_ns or self._stop.is_set(),
                    timeout=LOCKSTEP_REPUBLISH_WALL_S,
                )
            if self._stop.is_set():
                return
            if not answered:
                # Nothing answered this sim time yet (controller starting, or gone): re-announce it.
                self._publish_state(stamps.to_msg(self.sim_ns))
                self.get_logger().info(
                    f"lockstep: waiting for /joint_commands stamped at or after sim time "
                    f"{self.sim_ns / NS_PER_S:.3f} s (controllers must use use_sim_time)",
                    throttle_duration_sec=5.0,
                )
                continue
            self._apply_pending()
            for _ in range(self.steps_per_command):
                self.world.step(self.substeps)
                self.sim_ns += self.sensing_ns
                self._publish_state(stamps.to_msg(self.sim_ns))

    # -- publishing ---------------------------------------------------------------------
    def _publish_state(self, stamp: TimeMsg) -> None:
        if self._clock_pub is not None:
            self._clock_pub.publish(Clock(clock=stamp))
        state = self.world.joint_state()
        msg = self._joint_msg
        msg.header.stamp = stamp
        msg.position = state.position.tolist()
        msg.velocity = state.velocity.tolist()
        msg.effort = state.effort.tolist()
        self._joint_pub.publish(msg)
        if not self.floating_base:
            return
        imu = self.world.imu()
        imu_msg = Imu()
        imu_msg.header.stamp = stamp
        imu_msg.header.frame_id = self.profile.imu_link
        o = imu.orientation
        imu_msg.orientation.x, imu_msg.orientation.y, imu_msg.orientation.z, imu_msg.orientation.w = map(float, o)
        w, a = imu.angular_velocity, imu.linear_acceleration
        imu_msg.angular_velocity.x, imu_msg.angular_velocity.y, imu_msg.angular_velocity.z = map(float, w)
        imu_msg.linear_acceleration.x, imu_msg.linear_acceleration.y, imu_msg.linear_acceleration.z = map(float, a)
        conditions = self._stated_conditions
        imu_msg.angular_velocity_covariance[0::4] = [conditions.gyro_noise**2] * 3
        imu_msg.linear_acceleration_covariance[0::4] = [conditions.accelerometer_noise**2] * 3
        self._imu_pub.publish(imu_msg)

        position, orientation = self.world.base_pose()
        linear, angular = self.world.base_velocity()
        truth = Odometry()
        truth.header.stamp = stamp
        truth.header.frame_id = "world"
        truth.child_frame_id = self.profile.base_link
        pose, twist = truth.pose.pose, truth.twist.twist
        pose.position.x, pose.position.y, pose.position.z = map(float, position)
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = map(float, orientation)
        # nav_msgs/Odometry gives the twist in the child (body) frame.
        twist.linear.x, twist.linear.y, twist.linear.z = map(float, world_to_body(orientation, linear))
        twist.angular.x, twist.angular.y, twist.angular.z = map(float, world_to_body(orientation, angular))
        self._truth_pub.publish(truth)

    def _publish_diagnostics(self) -> None:
        summary = self.stats.summary()
        with self._lock:
            refused = self._refused
        mode = "DAMPING" if self._damping else ("COMMANDED" if self._last_command_wall else "HOLDING_DEFAULT")
        level = DiagnosticStatus.WARN if (self._damping or summary["missed_fraction"] > 0.05) else DiagnosticStatus.OK
        values = {
            "mode": mode,
            "sim_time_s": f"{self.sim_ns / NS_PER_S:.3f}",
            "refused_commands": str(refused),
            "refused_writers": str(self._source.refused),
            **{k: f"{v:.4g}" if isinstance(v, float) else str(v) for k, v in summary.items()},
        }
        status = DiagnosticStatus(
            level=level,
            name=f"{self.get_name()}: sensing loop",
            hardware_id=self.profile.name,
            message=mode,
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._command_ready.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        if self._thread.is_alive():
            # Closing the physics under a loop still stepping it would crash the process (and lose
            # its exit code): the loop dies with the process instead.
            self.get_logger().error("the simulation loop did not stop within 2 s; exiting without closing the physics")
            return
        self.world.close()


def main(args=None) -> NoReturn:
    lifecycle.exit_process(lifecycle.run("sim_robot", SimRobotNode, args))


if __name__ == "__main__":
    main()
