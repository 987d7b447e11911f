"""state_estimator: base (quadruped) or joint and end-effector (arm) state from proprioception.

Thin adapter around :mod:`sim2real.core.estimation`.

In real time the samples are taken in batches, every ``batch_period`` (default half the
policy period, 10 ms on the Go2), from polled subscriptions (:mod:`sim2real.nodes.polled`),
without an executor wake-up and a Python callback per message (at 500 Hz of /joint_states
and /imu/data those were most of the node's CPU). Quadruped, ``filter_update:=batch`` (the
default): each IMU sample of the batch integrates the base over its own interval and the
legs (the newest joint state) update the filter once, at the newest sample
(:meth:`LegKalmanFilter.step_batch`; on a recorded trot 0.015 m/s of velocity RMSE against
0.006 per sample, nearly all of it the estimate held between batches, at a quarter of the CPU,
benchmarks/estimation.py). ``filter_update:=sample``: every
sample DDS kept goes through the whole filter, in the order it was received. Either way the
estimate is published once per batch: at the batch rate (100 Hz on the Go2), normally at most
one batch period older than the newest sample; ``batch_period:=0.002`` publishes one per IMU sample.
DDS keeps 50 samples of each topic (100 ms at 500 Hz): a node starved for longer loses the
oldest, and ``/diagnostics`` counts the IMU samples missed. In lockstep (``use_sim_time``)
each sample is handled as it arrives and every IMU sample gets its estimate, so what a
policy sees does not depend on how fast the machine runs the graph.

Quadruped: every /imu/data sample (with the newest /joint_states received before it) steps
the leg Kalman filter; ``/state_estimate`` (nav_msgs/Odometry, frame ``odom``, child the
base link: pose in the world, twist in the body frame, as nav_msgs defines it, with the
filter's covariance) carries the estimate, stamped with its IMU sample's stamp. Divergence
(innovation NIS out of bounds, non-finite state, runaway covariance) is reported on
``/diagnostics`` as status ``state_estimator: divergence`` with level ERROR and a message
containing "diverged", the form the safety supervisor reads; while healthy the same status
says "no divergence" at level OK.

Arm: every /joint_states sample is filtered; every ``arm_publish_period`` (default the policy
period) the node publishes ``/state_estimate/joint_states`` (filtered
position and velocity), ``/state_estimate/joint_accelerations`` (std_msgs/Float64MultiArray,
profile joint order) and ``/state_estimate/end_effector`` (nav_msgs/Odometry in the base
frame: end-effector pose and twist).

/diagnostics also carries the IMU samples filtered per second (of sensor time and of node
time), the compute time per filter step (a sample, or a batch with ``filter_update:=batch``),
the samples per step and the sample rate one core could sustain.

    ros2 run sim2real state_estimator --ros-args -p robot:=go2
"""

from __future__ import annotations

import time
from typing import NoReturn

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray

from sim2real.core.estimation.arm import ArmEstimator
from sim2real.core.estimation.config import load_estimation_config
from sim2real.core.estimation.legged import LegKalmanFilter
from sim2real.core.estimation.samples import imu_sample
from sim2real.core.joint_state_order import JointStateOrder
from sim2real.core.policy_tick import RollingStats
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import matrix_to_quat, quat_to_matrix
from sim2real.nodes import lifecycle, qos, stamps
from sim2real.nodes.diagnostics import publish_status
from sim2real.nodes.imu_reading import ImuReading, imu_reading
from sim2real.nodes.params import declare
from sim2real.nodes.polled import NEWEST_ONLY, Inputs

DIAGNOSTICS_PERIOD_S = 1.0
WARN_THROTTLE_S = 2.0
FILTER_UPDATES = ("batch", "sample")
ORIENTATION_VARIANCE = 1e-4  # rad^2, used when the IMU leaves its orientation covariance unknown


class StateEstimatorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("state_estimator", **kwargs)
        robot = declare(self, "robot", "go2", "Robot profile: a name under config/robots/ or a path")
        config = declare(
            self,
            "estimation_config",
            "",
            "Estimator settings: a name under config/estimation/ or a path; '' = the robot's name",
        )
        self.profile = load_profile(robot)
        self.config = load_estimation_config(config or self.profile.name)
        self.quadruped = self.profile.kind == "quadruped"
        self.step_time = RollingStats()
        self._count = 0  # IMU (arm: joint) samples into the filter in this diagnostics window
        self._steps = 0  # filter calls in this window: a sample each, or a batch each
        self._window_start = time.monotonic()
        self._joint_order = JointStateOrder(self.profile.joint_names, self.profile.name)
        self._joints = None  # (position, velocity, effort) in profile order
        self.refused = 0  # samples ignored: malformed or not finite
        self._t = 0.0
        self._window_t0 = None  # stamp of the first estimate of this diagnostics window
        self._last_imu_t = None
        self.imu_missed = 0  # IMU samples absent between two that arrived (by their stamps)
        self.sim_time = self.get_parameter("use_sim_time").value
        self.batch_period = declare(
            self,
            "batch_period",
            self.profile.policy_period / 2,
            "s between batches: every sample received since the last batch goes "
            "through the filter and the newest estimate is published",
        )
        if not self.batch_period > 0:
            raise ValueError(
                f"parameter batch_period:={self.batch_period} must be > 0 s (0.002: an estimate per sample at 500 Hz)"
            )
        self.filter_update = declare(
            self,
            "filter_update",
            "batch",
            "Quadruped, real time: 'batch' (each IMU sample of a batch integrates the "
            "base, the legs update the filter once, at the newest) or 'sample' (every "
            "IMU sample through the whole filter, at about 4x the CPU)",
        )
        if self.filter_update not in FILTER_UPDATES:
            raise ValueError(f"parameter filter_update:={self.filter_update!r}: use one of {list(FILTER_UPDATES)}")
        # Lockstep steps the filter per sample whatever is asked: the run must not depend on the machine.
        self._one_update_per_batch = self.quadruped and self.filter_update == "batch" and not self.sim_time
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # Real time, polled: no executor spins the companion; the batch timer takes all DDS kept.
        self._sample_subs = Inputs(self, polled=not self.sim_time, suffix="samples")
        self._imu_sub = None
        # One leg update per batch uses the newest joint state alone: DDS keeps only that one (each
        # taken message costs its conversion to Python, ~30 us for a Go2's).
        self._joint_sub = self._sample_subs.subscribe(
            JointState,
            "/joint_states",
            self._on_joint_states,
            qos.SENSOR_SUBSCRIBE,
            NEWEST_ONLY if self._one_update_per_batch else qos.SENSOR_SUBSCRIBE,
        )
        if self.quadruped:
            self.filter = LegKalmanFilter(self.profile, self.config)
            self._odom = Odometry()
            self._odom.header.frame_id = "odom"
            self._odom.child_frame_id = self.profile.base_link
            self._pub = self.create_publisher(Odometry, "/state_estimate", qos.SENSOR_PUBLISH)
            # Raw when polled: every sample read in place (nodes/imu_reading.py), not built into an Imu.
            self._imu_sub = self._sample_subs.subscribe(
                Imu, "/imu/data", self._on_imu, qos.SENSOR_SUBSCRIBE, qos.SENSOR_SUBSCRIBE, raw=True
            )
        else:
            self.arm = ArmEstimator(self.profile, self.config)
            # Every joint state is filtered; the end effector (two pinocchio passes and three
            # messages) is published at the policy rate: at the sensing rate it took a large share
            # of a 2-core robot computer from the policy runtime (graph tests saw it go stale).
            self._arm_period = declare(
                self,
                "arm_publish_period",
                self.profile.policy_period,
                "s between arm estimates published (every joint state is filtered)",
            )
            self._arm_next = -1.0
            self._joints_pub = self.create_publisher(JointState, "/state_estimate/joint_states", qos.SENSOR_PUBLISH)
            self._accel_pub = self.create_publisher(
                Float64MultiArray, "/state_estimate/joint_accelerations", qos.SENSOR_PUBLISH
            )
            self._ee_pub = self.create_publisher(Odometry, "/state_estimate/end_effector", qos.SENSOR_PUBLISH)
        if not self.sim_time:
            # On the steady clock: a system clock stepped back (NTP) must not stop the batches.
            self.create_timer(self.batch_period, self._on_batch, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        what = "leg Kalman filter per /imu/data sample" if self.quadruped else "arm joint filter per /joint_states"
        how = (
            "each sample as it comes (lockstep)"
            if self.sim_time
            else f"in batches every {self.batch_period * 1e3:g} ms"
        )
        self.get_logger().info(
            f"{self.profile.name}: {what}, {how} (settings: config/estimation/{config or self.profile.name})"
        )

    # -- inputs -----------------------------------------------------------------------------
    def _on_batch(self) -> None:
        if self._one_update_per_batch:
            self._filter_batch()
        else:
            self._filter_each_sample()

    def _filter_batch(self) -> None:
        """filter_update:=batch: the IMU samples since the last batch, in the order DDS received
        them (then by stamp), with the newest usable joint state: one leg update, the estimate out.
        Receive order, not stamp order: across a stamp that jumps back (a restarted driver, a
        stepped clock) stamp order would integrate one step of the whole jump."""
        # IMU first, as in _filter_each_sample: a joint state arriving between the takes is used.
        imu = sorted(self._take_imu(), key=lambda taken: (taken[1], taken[0].stamp_ns))
        joint_state = self._joint_sub.take_newest()  # DDS keeps only the newest (NEWEST_ONLY)
        if joint_state is not None:
            self._on_joint_states(joint_state[0])  # refused: the previous one stays
        samples, newest = [], None
        for reading, _ in imu:
            try:
                samples.append(
                    imu_sample(
                        reading.stamp_ns * 1e-9,
                        reading.orientation,
                        reading.angular_velocity,
                        reading.linear_acceleration,
                    )
                )
            except ValueError as exc:
                self._refuse(f"/imu/data: {exc}")
                continue
            newest = reading
        if not samples or self._joints is None:
            return  # the legs are the measurement: nothing to fuse without them yet
        start = time.perf_counter()
        try:
            estimate = self.filter.step_batch(samples, *self._joints)
        except ValueError as exc:  # inputs are checked: a singular innovation covariance
            self._refuse(f"a batch the filter could not update with ({exc})")
            return
        self._count_missed([sample.t for sample in samples])
        self._t = samples[-1].t
        self._done(start, len(samples), samples[0].t)
        self._publish_estimate(estimate, newest)

    def _filter_each_sample(self) -> None:
        """Every sample since the last batch, in the order DDS received them (then by stamp, and a
        joint state before an IMU sample of the same instant); then the newest quadruped estimate out."""
        # IMU first: a joint state that arrives between the two takes is newer than every IMU
        # sample taken, and sorts after them, instead of being missed by an IMU sample after it.
        samples = [
            (received, reading.stamp_ns, 1, reading)
            for reading, received in (self._take_imu() if self._imu_sub is not None else ())
        ]
        samples += [(received, stamps.to_ns(msg.header.stamp), 0, msg) for msg, received in self._joint_sub.take_all()]
        samples.sort(key=lambda sample: sample[:3])
        newest = None
        for _, _, kind, msg in samples:
            if kind == 0:
                self._on_joint_states(msg)
            else:
                newest = self._step_imu(msg) or newest
        if newest is not None:
            self._publish_estimate(*newest)

    def _take_imu(self) -> list[tuple[ImuReading, int]]:
        """Real time: every /imu/data sample DDS kept, read, with its receive time (ns)."""
        taken = []
        for data, received in self._imu_sub.take_all():
            try:
                taken.append((imu_reading(data), received))
            except ValueError as exc:
                self._refuse(str(exc))
        return taken

    def _on_imu(self, msg: Imu) -> None:
        """Lockstep: each IMU sample as it comes, and its estimate out."""
        estimate = self._step_imu(imu_reading(msg))
        if estimate is not None:
            self._publish_estimate(*estimate)

    def _on_joint_states(self, msg: JointState) -> bool:
        """Keep the state for the filter (arm: filter it); False if it was refused."""
        try:
            index = self._joint_order.index_of(msg.name, msg.position, msg.velocity, msg.effort)
        except ValueError as exc:
            self._refuse(str(exc))
            return False
        position = np.asarray(msg.position, dtype=float)[index]
        velocity = np.asarray(msg.velocity, dtype=float)[index] if len(msg.velocity) else np.zeros(len(index))
        effort = np.asarray(msg.effort, dtype=float)[index] if len(msg.effort) else None
        if effort is not None and not np.all(np.isfinite(effort)):
            effort = None  # no effort sensing (ros2_control reports a missing interface as NaN)
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(velocity))):
            self._refuse("/joint_states with NaN or infinite positions or velocities")
            return False
        self._joints = (position, velocity, effort)
        if not self.quadruped:
            self._step_arm(stamps.to_ns(msg.header.stamp) * 1e-9, msg.header.stamp)
        return True

    def _refuse(self, what: str) -> None:
        # Folded in, a NaN would make the estimate NaN for good; a short array would raise in the callback.
        self.refused += 1
        self.get_logger().warning(
            f"ignoring {what} ({self.refused} samples ignored so far)", throttle_duration_sec=WARN_THROTTLE_S
        )

    def _step_imu(self, reading: ImuReading):
        """One IMU sample through the filter: (estimate, reading), or None if it was not used."""
        if self._joints is None:
            return None  # the legs are the measurement: nothing to fuse without them yet
        start = time.perf_counter()
        t = reading.stamp_ns * 1e-9
        try:
            estimate = self.filter.step(
                t, reading.orientation, reading.angular_velocity, reading.linear_acceleration, *self._joints
            )
        except ValueError as exc:
            self._refuse(f"/imu/data: {exc}")
            return None
        self._count_missed((t,))
        self._t = t
        self._done(start)
        return estimate, reading

    def _count_missed(self, stamps_s) -> None:
        """IMU samples absent between those used, by their stamps (s)."""
        period = self.profile.sensing_period
        for t in stamps_s:
            if self._last_imu_t is not None and t - self._last_imu_t > 1.5 * period:
                self.imu_missed += round((t - self._last_imu_t) / period) - 1
            self._last_imu_t = t

    def _publish_estimate(self, estimate, reading: ImuReading) -> None:
        odom = self._odom
        odom.header.stamp = stamps.to_msg(reading.stamp_ns)
        pose, twist = odom.pose, odom.twist
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = map(float, estimate.position)
        o = pose.pose.orientation
        o.x, o.y, o.z, o.w = reading.orientation
        R = quat_to_matrix(estimate.orientation)
        v_body = R.T @ estimate.velocity
        twist.twist.linear.x, twist.twist.linear.y, twist.twist.linear.z = map(float, v_body)
        w = twist.twist.angular
        w.x, w.y, w.z = reading.angular_velocity
        P = estimate.covariance
        pose_cov = np.zeros((6, 6))
        pose_cov[:3, :3] = P[0:3, 0:3]
        orientation_cov = np.asarray(reading.orientation_covariance).reshape(3, 3)
        pose_cov[3:, 3:] = orientation_cov if orientation_cov[0, 0] > 0 else np.eye(3) * ORIENTATION_VARIANCE
        twist_cov = np.zeros((6, 6))
        twist_cov[:3, :3] = R.T @ P[3:6, 3:6] @ R
        twist_cov[3:, 3:] = np.asarray(reading.angular_velocity_covariance).reshape(3, 3)
        pose.covariance = pose_cov.ravel().tolist()
        twist.covariance = twist_cov.ravel().tolist()
        self._pub.publish(odom)

    def _step_arm(self, t: float, stamp) -> None:
        start = time.perf_counter()
        position, velocity, _ = self._joints
        self.arm.filter(t, position, velocity)
        if t < self._arm_next and not stamps.jumped_back(t, self._arm_next, self._arm_period):
            return
        self._arm_next = t + self._arm_period - 1e-9
        e = self.arm.estimate()
        joints = JointState(name=self.profile.joint_names)
        joints.header.stamp = stamp
        joints.position, joints.velocity = e.joint_position.tolist(), e.joint_velocity.tolist()
        self._joints_pub.publish(joints)
        self._accel_pub.publish(Float64MultiArray(data=e.joint_acceleration.tolist()))
        ee = Odometry()
        ee.header.stamp = stamp
        ee.header.frame_id = self.profile.base_link
        ee.child_frame_id = self.profile.end_effector_link
        ee.pose.pose.position.x, ee.pose.pose.position.y, ee.pose.pose.position.z = map(float, e.ee_position)
        x, y, z, w = matrix_to_quat(e.ee_rotation)
        ee.pose.pose.orientation.x, ee.pose.pose.orientation.y = x, y
        ee.pose.pose.orientation.z, ee.pose.pose.orientation.w = z, w
        # nav_msgs/Odometry's twist is in the child frame: the end effector's own axes.
        lin, ang = e.ee_rotation.T @ e.ee_linear_velocity, e.ee_rotation.T @ e.ee_angular_velocity
        ee.twist.twist.linear.x, ee.twist.twist.linear.y, ee.twist.twist.linear.z = map(float, lin)
        ee.twist.twist.angular.x, ee.twist.twist.angular.y, ee.twist.twist.angular.z = map(float, ang)
        self._ee_pub.publish(ee)
        self._t = t
        self._done(start)

    def _done(self, start: float, samples: int = 1, first_t: float | None = None) -> None:
        """A filter step over ``samples`` IMU samples (the first at ``first_t``) done."""
        self.step_time.add(time.perf_counter() - start)
        self._count += samples
        self._steps += 1
        if self._window_t0 is None:
            self._window_t0 = self._t if first_t is None else first_t

    # -- diagnostics ----------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        now = time.monotonic()
        elapsed = now - self._window_start
        # IMU samples into the filter per second of sensor time (the IMU rate when every sample is
        # used; in lockstep, sim time) and per second of wall time. A step is one filter call: a
        # sample, or a batch of them (filter_update:=batch); the capacity is the samples per
        # second one core could take at the median step.
        span = self._t - self._window_t0 if self._window_t0 is not None else 0.0
        values = {
            "rate_hz": f"{(self._count - 1) / span if span > 0 else 0.0:.1f}",
            "wall_rate_hz": f"{self._count / elapsed if elapsed > 0 else 0.0:.1f}",
            "samples_ignored": str(self.refused),
            "imu_samples_missed": str(self.imu_missed),
        }
        samples_per_step = self._count / self._steps if self._steps else 1.0
        values["samples_per_step"] = f"{samples_per_step:.1f}"
        self._count, self._steps, self._window_start, self._window_t0 = 0, 0, now, None
        steps = self.step_time.summary_ms("step")
        values.update({k: f"{v:.3f}" for k, v in steps.items()})
        if steps:
            values["capacity_hz"] = f"{1e3 * samples_per_step / steps['step_p50_ms']:.0f}"
        level, message = DiagnosticStatus.OK, "no divergence"
        if self.quadruped:
            monitor = self.filter.divergence
            values.update(
                {
                    "window_nis_per_dof": f"{monitor.mean_nis:.2f}",
                    "nis_bound": f"{monitor.bound:.2f}",
                    "divergence_events": str(monitor.events),
                    "contact": "".join("1" if c else "0" for c in self.filter.contact_detector.contact),
                }
            )
            if monitor.diverged(self._t):
                level, message = DiagnosticStatus.ERROR, f"diverged: {monitor.reason}"
            if self._joints is None:
                level, message = DiagnosticStatus.WARN, "no divergence; waiting for /joint_states"
        publish_status(self, self._diag_pub, level, "divergence", message, values, self.profile.name)

    def destroy_node(self) -> None:
        self._sample_subs.destroy()
        super().destroy_node()


def main(args=None) -> NoReturn:
    lifecycle.exit_process(
        lifecycle.run("state_estimator", StateEstimatorNode, args, executor=lifecycle.events_executor_unless_lockstep)
    )


if __name__ == "__main__":
    main()
