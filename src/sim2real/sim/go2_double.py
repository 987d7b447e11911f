"""A Go2 double: the project's PyBullet Go2 behind the robot's own DDS topics.

It speaks what a real Go2 speaks in low-level mode, byte for byte (cyclonedds, Unitree's types,
:mod:`sim2real.core.unitree`): it publishes ``rt/lowstate`` at 500 Hz (tick in ms, IMU
quaternion w first, motor q/dq/tau_est and temperature, battery voltage, the remote's 40 bytes,
CRC) and applies each ``rt/lowcmd`` per motor, ``tau + kp (q_cmd - q) + kd (dq_cmd - dq)``,
after checking its CRC (a bad one is dropped and counted, as the robot does). With
``--sport-mode`` its own sport-mode writer holds the robot standing and writes ``rt/lowcmd``
until released, as a Go2 does after power-on.

Tests and demos drive it on stdin, one command a line:
    status                  one line of JSON: counts, the trunk's position, its horizontal path
                            and lowest height since the start or the last mark (ground truth),
                            and the motors' q of the newest LowCmd applied
    mark                    path and lowest height from now on
    remote [BUTTON ...]     the remote's buttons held from now on (none: all released)
    sticks LX LY RX RY      the remote's sticks from now on (-1..1; 0 0 0 0: at rest)
    fault NAME on|off       drop_lowstate, freeze_tick, bad_crc, low_battery, hot_motor
    release                 release sport mode (the SDK's MotionSwitcher on a real robot)
    quit

    python -m sim2real.sim.go2_double --domain 0 --interface lo
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import numpy as np

from sim2real.core import realtime
from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.unitree.dds import UnitreeDds
from sim2real.core.unitree.frames import lowcmd_crc, seal_state
from sim2real.core.unitree.low_level import Go2LowLevel
from sim2real.core.unitree.messages import LowState_
from sim2real.core.unitree.remote import encode_remote
from sim2real.sim.world import SimWorld

FAULTS = ("drop_lowstate", "freeze_tick", "bad_crc", "low_battery", "hot_motor")
BATTERY_V = 25.2  # a charged pack (config/robots/go2.yaml: battery_nominal_voltage)
LOW_BATTERY_V = 20.0  # under the profile's min_battery_voltage
MOTOR_TEMPERATURE = 40  # deg C, a motor at work
HOT_MOTOR = 95  # deg C, over the profile's max_motor_temperature
LYING_HEIGHT = 0.1  # m, trunk centre of a Go2 lying folded (it settles from there)
MAX_CATCH_UP = 25  # sensing periods a loop that fell behind runs back to back (50 ms)
PATH_SAMPLE_S = 0.02  # the trunk's path is summed over 50 Hz samples, as `sim2real demo` sums its distance


class Go2Double:
    def __init__(self, domain: int, interface: str = "lo", seed: int = 0, sport_mode: bool = False):
        self.profile = load_profile("go2")
        self.low_level = Go2LowLevel(self.profile)
        self.world = SimWorld(self.profile, seed=seed)
        # As a Go2 is switched on: lying folded on the floor (the safety config's lying pose).
        lying = load_safety_config("go2").damp_pose
        self.world.reset(
            joint_positions=[lying[name] for name in self.profile.joint_names], base_position=(0.0, 0.0, LYING_HEIGHT)
        )
        self.dds = UnitreeDds(domain, interface, role="robot")
        # The sport-mode service is another writer on rt/lowcmd, in a participant of its own.
        self.sport = UnitreeDds(domain, interface, role="bridge") if sport_mode else None
        self.period = self.profile.sensing_period
        self.substeps = round(self.period / self.profile.physics_period)
        self._stand = self.low_level.command(JointTargets.positions(self.profile.default_positions))
        self.faults: set[str] = set()
        self.remote = encode_remote()
        self._buttons: list[str] = []
        self._sticks = {"lx": 0.0, "ly": 0.0, "rx": 0.0, "ry": 0.0}
        # applied: LowCmd applied; driven: those with position gains (not only damping); foreign:
        # LowCmd from another writer than sport mode received while sport mode runs (a fight)
        self.counts = {"applied": 0, "driven": 0, "bad_crc": 0, "states": 0, "foreign": 0, "skipped": 0}
        self.first_driven_gap: float | None = None  # rad, first driven frame's targets to the joints
        # s from the last new driven frame (a bridge resends the newest with every LowState) to the
        # damping frame that followed it, on this process's clock (a command repeated unchanged,
        # such as a held pose, is not new: timed from its first frame); and when that damping
        # frame came, on the machine's monotonic clock, which every process here shares
        self.driven_to_damping: float | None = None
        self.damped_at: float | None = None
        self._last_driven: tuple[int, float] | None = None  # (crc, when first applied)
        self.tick = 0
        # Ground truth a robot does not send, since the start or the last `mark`: the trunk's
        # horizontal path (m) over PATH_SAMPLE_S samples of physics time, and its lowest height (m).
        self.path_m = 0.0
        self.min_height = float("inf")
        self._path_every = max(1, round(PATH_SAMPLE_S / self.period))
        self._steps = 0
        self._last_sample = np.asarray(self.world.base_pose()[0], dtype=float)
        self.newest_applied = None  # the newest LowCmd applied (status reports its q and gains)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._passive()

    def _passive(self) -> None:
        """Motors off: no command yet (a Go2 in low-level mode before anyone writes rt/lowcmd)."""
        zero = np.zeros(self.profile.num_joints)
        self.world.command(self.world.true_joint_state().position, zero, zero, kp=0.0, kd=0.0)

    # -- one control period -------------------------------------------------------------------
    def step(self) -> None:
        """Apply the newest command, advance one sensing period of physics, send a LowState."""
        with self._lock:
            if self.sport is not None:
                self.world.command(self.profile.default_positions)  # sport mode stands
                self.sport.write(self._stand)
                for cmd in self.dds.take(0.0):  # on a real Go2 both writers would reach the motors
                    self.counts["foreign"] += cmd.crc != self._stand.crc
            else:
                for cmd in self.dds.take(0.0):
                    if lowcmd_crc(cmd) != cmd.crc:
                        self.counts["bad_crc"] += 1
                        continue
                    q, dq, tau, kp, kd = self.low_level.joint_targets(cmd)
                    if np.any(kp > 0) and self.first_driven_gap is None:
                        measured = self.world.true_joint_state().position
                        self.first_driven_gap = float(np.max(np.abs(q - measured)))
                    self.world.command(q, dq, tau, kp=kp, kd=kd)
                    self.counts["applied"] += 1
                    driven = bool(np.any(kp > 0))
                    self.counts["driven"] += driven
                    if driven and (self._last_driven is None or self._last_driven[0] != cmd.crc):
                        self._last_driven = (cmd.crc, time.monotonic())
                    elif not driven and self._last_driven is not None:
                        self.damped_at = time.monotonic()
                        self.driven_to_damping = self.damped_at - self._last_driven[1]
                        self._last_driven = None
                    self.newest_applied = cmd
            self.world.step(self.substeps)
            self._steps += 1
            if self._steps % self._path_every == 0:
                self._sample_path()
            if "freeze_tick" not in self.faults:
                self.tick = (self.tick + round(self.period * 1000)) % 2**32
            if "drop_lowstate" not in self.faults:
                self.dds.write(self.lowstate())
                self.counts["states"] += 1

    def _sample_path(self) -> None:
        position = np.asarray(self.world.base_pose()[0], dtype=float)
        self.path_m += float(np.linalg.norm(position[:2] - self._last_sample[:2]))
        self._last_sample = position
        self.min_height = min(self.min_height, float(position[2]))

    def lowstate(self) -> LowState_:
        state = self.world.true_joint_state()
        imu = self.world.imu()
        msg = LowState_(
            head=[0xFE, 0xEF],
            level_flag=0xFF,
            tick=self.tick,
            wireless_remote=list(self.remote),
            power_v=LOW_BATTERY_V if "low_battery" in self.faults else BATTERY_V,
        )
        x, y, z, w = (float(v) for v in imu.orientation)
        msg.imu_state.quaternion = [w, x, y, z]
        msg.imu_state.gyroscope = [float(v) for v in imu.angular_velocity]
        msg.imu_state.accelerometer = [float(v) for v in imu.linear_acceleration]
        for i, slot in enumerate(self.low_level.slots):
            motor = msg.motor_state[slot]
            motor.mode = self.low_level.interface.motor_mode  # the profile's unitree: section, checked present
            motor.q, motor.dq, motor.tau_est = (
                float(state.position[i]),
                float(state.velocity[i]),
                float(state.effort[i]),
            )
            motor.temperature = HOT_MOTOR if "hot_motor" in self.faults and i == 0 else MOTOR_TEMPERATURE
        seal_state(msg)
        if "bad_crc" in self.faults:
            msg.crc ^= 0x1
        return msg

    # -- stdin -------------------------------------------------------------------------------
    def handle(self, line: str) -> str:
        words = line.split()
        if not words:
            return ""
        with self._lock:
            if words[0] == "remote":
                self._buttons = words[1:]
                self.remote = encode_remote(self._buttons, **self._sticks)
            elif words[0] == "sticks" and len(words) == 5:
                self._sticks = dict(zip(("lx", "ly", "rx", "ry"), map(float, words[1:])))
                self.remote = encode_remote(self._buttons, **self._sticks)
            elif words[0] == "fault" and len(words) == 3 and words[1] in FAULTS and words[2] in ("on", "off"):
                (self.faults.add if words[2] == "on" else self.faults.discard)(words[1])
            elif words[0] == "release":
                if self.sport is not None:
                    self.sport.close()
                    self.sport = None
                    self._passive()
            elif words[0] == "status":
                frame = self.newest_applied
                position, _ = self.world.base_pose()
                gains = self.low_level.joint_targets(frame)[3:] if frame else (np.zeros(1), np.zeros(1))
                return json.dumps(
                    {
                        **self.counts,
                        "sport_mode": self.sport is not None,
                        "first_driven_gap": self.first_driven_gap,
                        "driven_to_damping": self.driven_to_damping,
                        "damped_at": self.damped_at,
                        "last_kp_max": float(np.max(gains[0])),
                        "last_kd_max": float(np.max(gains[1])),
                        "base_position": [float(v) for v in position],
                        "path_m": self.path_m,
                        "min_height": self.min_height if self.min_height < float("inf") else None,
                        "sim_time": float(self.world.time),
                        "applied_q": [m.q for m in frame.motor_cmd] if frame else None,
                    }
                )
            elif words[0] == "mark":
                self.path_m, self.min_height = 0.0, float("inf")
                self._last_sample = np.asarray(self.world.base_pose()[0], dtype=float)
            elif words[0] == "quit":
                self._stop.set()
            else:
                return (
                    f"unknown command {line.strip()!r}: use status, remote [BUTTON ...], sticks LX LY RX RY, fault "
                    f"{{{'|'.join(FAULTS)}}} on|off, release, mark or quit"
                )
        return "ok"

    def run(self, duration: float = float("inf")) -> None:
        """Physics in step with the wall clock, as a robot's is: a loop that fell behind (a loaded
        machine) runs the periods it owes back to back, each with its LowState, so its time never
        runs slower than the controller's (which would speed up a policy's gait). Over
        MAX_CATCH_UP periods behind, the rest are skipped (and counted)."""
        start = time.monotonic()
        done = 0
        while not self._stop.is_set() and time.monotonic() - start < duration:
            due = int((time.monotonic() - start) / self.period) + 1
            if due - done > MAX_CATCH_UP:
                self.counts["skipped"] += due - done - MAX_CATCH_UP
                done = due - MAX_CATCH_UP
            while done < due and not self._stop.is_set():
                self.step()
                done += 1
            delay = start + done * self.period - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def close(self) -> None:
        self.world.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", type=int, default=0, help="DDS domain of rt/lowstate and rt/lowcmd (default 0)")
    parser.add_argument("--interface", default="lo", help="network interface (default lo: this machine only)")
    parser.add_argument("--seed", type=int, default=0, help="terrain and noise seed")
    parser.add_argument("--sport-mode", action="store_true", help="start with sport mode writing rt/lowcmd")
    parser.add_argument("--duration", type=float, default=float("inf"), help="s to run (default: until quit)")
    parser.add_argument(
        "--realtime",
        type=int,
        default=0,
        metavar="PRIORITY",
        help="run at this SCHED_FIFO priority with memory locked, as the robot's own firmware loop runs "
        "(above the graph's, e.g. 90; default 0: normal scheduling)",
    )
    args = parser.parse_args(argv)
    try:
        request = realtime.RealtimeRequest(args.realtime, lock_memory=args.realtime > 0)
    except realtime.RealtimeRequestError as exc:
        parser.error(f"--realtime: {exc}")
    double = Go2Double(args.domain, args.interface, args.seed, args.sport_mode)
    # After the DDS participant exists: its threads are the ones that deliver rt/lowstate.
    for line in realtime.apply(request).lines():
        print(f"go2 double: {line}", flush=True)

    def read_stdin() -> None:
        for line in sys.stdin:
            reply = double.handle(line)
            if reply:
                print(reply, flush=True)
        double.handle("quit")  # stdin closed: the test or the terminal went away

    # The banner before the reader starts: a reply printed meanwhile would end up inside its line.
    print(
        f"go2 double: rt/lowstate at {1 / double.period:.0f} Hz on domain {args.domain}, interface "
        f"{args.interface}{', sport mode on' if double.sport else ''}",
        flush=True,
    )
    threading.Thread(target=read_stdin, daemon=True).start()
    try:
        double.run(args.duration)
    finally:
        print(
            f"go2 double: {double.counts['applied']} LowCmd applied, {double.counts['bad_crc']} dropped for a bad "
            f"CRC, {double.counts['states']} LowState sent",
            flush=True,
        )
        double.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
