"""A runtime for sim2real policy files written from docs/policy_format.md alone.

It imports nothing of sim2real on purpose: it stands for a third party who has a policy file
and the format's page, and checks that the page is enough (tests/unit/test_policy_format.py).
Signals come in as a dict of SI arrays (joint arrays in the file's joint order, quaternions
x, y, z, w, body frame x forward, z up).
"""

from __future__ import annotations

import json
import math

import numpy as np
import onnxruntime

# The terms that are one signal as it arrives (the schema's "source" of each).
SIGNAL_TERMS = {
    "base_ang_vel": "base_angular_velocity",
    "joint_vel": "joint_velocity",
    "base_lin_vel": "base_linear_velocity",
    "joint_pos": "joint_position",
    "ee_position": "end_effector_position",
}


class IndependentPolicy:
    def __init__(self, path):
        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        props = dict(self.session.get_modelmeta().custom_metadata_map)
        if props.get("sim2real.format") != "sim2real.policy/1":
            raise ValueError("not a sim2real.policy/1 file")

        def read(key):
            return json.loads(props["sim2real." + key])

        self.joint_names = read("joint_names")
        n = len(self.joint_names)
        self.terms = read("observation_terms")["terms"]
        self.action_scale = np.array(read("action_scale"), dtype=float)
        self.action_offset = np.array(read("action_offset"), dtype=float)
        self.action_clip = read("action_clip")
        self.default = np.array(read("default_joint_positions"), dtype=float)
        self.period = float(props["sim2real.control_period"])
        task = read("task_config") if "sim2real.task_config" in props else {}
        commands = task.get("commands") or {}
        hardest = commands.get("ranges_hardest")
        self.velocity_ranges = None if hardest is None else np.array([hardest[k] for k in ("vx", "vy", "yaw_rate")])
        self.standing_below = float(commands.get("standing_below", 0.0))
        box = (task.get("goal") or {}).get("box")
        self.goal_box = None if box is None else np.array(box, dtype=float)
        gait = task.get("gait")
        self.phase = 0.0
        self.phase_step = None if not gait else float(gait["frequency"]) * self.period
        self.last_action = np.zeros(n)

    def _command(self, command):
        command = np.array(command, dtype=float)
        if 0 < math.hypot(command[0], command[1]) < self.standing_below:
            command[:2] = 0.0
        if self.velocity_ranges is not None:
            command = np.clip(command, self.velocity_ranges[:, 0], self.velocity_ranges[:, 1])
        return command

    def _term(self, name, signals):
        if name in SIGNAL_TERMS:
            return np.asarray(signals[SIGNAL_TERMS[name]], dtype=float)
        if name == "projected_gravity":
            x, y, z, w = (float(v) for v in signals["base_orientation"])
            k = 2.0 / (x * x + y * y + z * z + w * w)
            return np.array([-k * (x * z - y * w), -k * (y * z + x * w), -(1.0 - k * (x * x + y * y))])
        if name == "velocity_command":
            return self._command(signals["velocity_command"])
        if name == "joint_pos_rel":
            return np.asarray(signals["joint_position"], dtype=float) - self.default
        if name == "last_action":
            return self.last_action
        if name in ("goal_position", "goal_offset"):
            goal = np.asarray(signals["goal_position"], dtype=float)
            if self.goal_box is not None:
                goal = np.clip(goal, self.goal_box[:, 0], self.goal_box[:, 1])
            if name == "goal_position":
                return goal
            return goal - np.asarray(signals["end_effector_position"], dtype=float)
        if name == "gait_clock":
            angle = 2.0 * math.pi * self.phase
            return np.array([math.sin(angle), math.cos(angle)])
        raise ValueError(f"unknown term {name}")

    def step(self, signals):
        """(observation, joint targets) for one policy step."""
        parts = [term["scale"] * self._term(term["name"], signals) for term in self.terms]
        observation = np.concatenate(parts).astype(np.float32)
        if self.phase_step is not None:
            self.phase = (self.phase + self.phase_step) % 1.0
        actions = self.session.run(["actions"], {"obs": observation[None, :]})[0][0].astype(float)
        clipped = actions if self.action_clip is None else np.clip(actions, -self.action_clip, self.action_clip)
        if np.all(np.isfinite(actions)):
            self.last_action = clipped
        return observation, self.action_offset + self.action_scale * clipped
