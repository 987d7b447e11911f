"""`sim2real policy info FILE`: what a policy file says about itself, for a person.

Everything comes from the file's own ``sim2real.*`` metadata (what the runtime checks
against the robot), so a file copied to a robot computer can be identified there: which
robot and task, how its actions become joint targets, what it observes, which worlds it
was trained in, and from which checkpoint and commit it was exported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim2real.core.policy_file import PolicyFile


def _distribution(spec: dict[str, Any]) -> str:
    for kind, value in spec.items():
        if kind == "bounds":
            continue
        if isinstance(value, dict):
            return f"{kind}(" + ", ".join(f"{k} {v:g}" for k, v in value.items()) + ")"
        if isinstance(value, (list, tuple)):
            return f"{kind}(" + ", ".join(f"{v:g}" for v in value) + ")"
        return f"{kind}({value})"
    return "fixed"


def _commands(task_config: dict[str, Any]) -> dict[str, Any] | None:
    """The command contract: order, trained ranges, dead zone (docs/policy_format.md)."""
    commands = task_config.get("commands") if isinstance(task_config, dict) else None
    if not isinstance(commands, dict) or "ranges_hardest" not in commands:
        return None
    return {
        "order": ["vx", "vy", "yaw_rate"],
        "ranges": commands["ranges_hardest"],
        "standing_below": commands.get("standing_below", 0.0),
    }


def policy_info(policy: PolicyFile) -> dict[str, Any]:
    """The file's identity and contract as plain data (what ``--json`` prints)."""
    meta = policy.metadata
    training = meta.training_config or {}
    return {
        "path": str(policy.path),
        "sha256": policy.sha256,
        "bytes": Path(policy.path).stat().st_size,
        "robot": meta.robot,
        "task": meta.task,
        "format": meta.format,
        "checkpoint": meta.checkpoint,
        "export_time": meta.export_time,
        "source_commit": meta.source_commit,
        "source_dirty": meta.source_dirty,
        "control_period_s": meta.control_period,
        "joints": [
            {
                "name": name,
                "default": float(meta.default_joint_positions[i]),
                "kp": float(meta.kp[i]),
                "kd": float(meta.kd[i]),
                "action_scale": float(meta.action_scale[i]),
                "action_offset": float(meta.action_offset[i]),
            }
            for i, name in enumerate(meta.joint_names)
        ],
        "action_clip": meta.action_clip,
        "observation": [{"name": t.name, "size": t.size, "scale": t.scale} for t in meta.observation_spec.terms],
        "observation_size": meta.observation_size,
        "gait": meta.task_config.get("gait"),
        "commands": _commands(meta.task_config),
        "actuator": meta.actuator,
        "world": meta.world,
        "difficulty": meta.difficulty,
        "robot_model": meta.robot_model,
        "randomization": meta.randomization,
        "training": {
            key: training.get(key)
            for key in (
                "seed",
                "iterations",
                "num_envs",
                "randomization",
                "curriculum",
                "symmetry",
                "critic_observation",
            )
            if key in training
        },
    }


def describe_policy(policy: PolicyFile) -> str:
    """The same as :func:`policy_info`, as the lines a terminal shows."""
    info = policy_info(policy)
    dirty = {"true": " (uncommitted changes)", "false": ""}.get(str(info["source_dirty"]), " (state unknown)")
    lines = [
        f"{info['path']}  {info['bytes'] / 1024:.0f} kB  sha256 {info['sha256'][:16]}",
        f"  {info['robot']} {info['task']}; exported {info['export_time']} from {info['checkpoint']}",
        f"  source commit {str(info['source_commit'])[:12]}{dirty}",
        f"  control period {info['control_period_s']:g} s ({1.0 / info['control_period_s']:.0f} Hz); "
        f"target = offset + scale * "
        + (f"clip(action, +-{info['action_clip']:g})" if info["action_clip"] is not None else "action (no clip)"),
        f"  {'joint':22} {'default':>8} {'kp':>7} {'kd':>6} {'scale':>6} {'offset':>8}",
    ]
    for joint in info["joints"]:
        lines.append(
            f"  {joint['name']:22} {joint['default']:8.3f} {joint['kp']:7.3g} {joint['kd']:6.3g} "
            f"{joint['action_scale']:6.3g} {joint['action_offset']:8.3f}"
        )
    lines.append(f"  observation: {info['observation_size']} values")
    for term in info["observation"]:
        lines.append(f"    {term['name']:24} {term['size']:3d}  x {term['scale']:g}")
    if info["gait"]:
        lines.append(
            f"  gait clock: {info['gait'].get('frequency')} Hz (the runtime runs it; offsets "
            f"{info['gait'].get('offsets')})"
        )
    commands = info["commands"]
    if commands:
        ranges = ", ".join(
            f"{k} [{commands['ranges'][k][0]:g}, {commands['ranges'][k][1]:g}]"
            for k in commands["order"]
            if k in commands["ranges"]
        )
        dead_zone = commands["standing_below"] or 0.0
        lines.append(
            f"  commands (vx, vy, yaw rate): {ranges}"
            + (f"; |(vx, vy)| under {dead_zone:g} m/s is a stand" if dead_zone > 0 else "")
        )
    actuator, world = info["actuator"], info["world"]
    if actuator and world:
        lines.append(
            f"  trained with: {actuator['model']} at {actuator['pd_rate_hz']:.0f} Hz on {world['engine']}, "
            f"ground friction {world['ground_friction']:g}, spawn {world['spawn_height']:g} m"
            + ("" if info["difficulty"] is None else f", difficulty {info['difficulty']:g}")
        )
    else:
        lines.append("  actuator model and nominal world: not recorded (exported before the file carried them)")
    if info["robot_model"]:
        lines.append(f"  robot model: {info['robot_model']['urdf']} sha256 {info['robot_model']['sha256'][:16]}")
    randomization = info["randomization"]
    if randomization:
        lines.append(f"  trained under randomization {randomization.get('name', '?')}:")
        for name, spec in (randomization.get("parameters") or {}).items():
            lines.append(f"    {name:24} {_distribution(spec)}")
        pushes = randomization.get("pushes")
        if pushes:
            lines.append(
                f"    {'pushes':24} every {pushes['interval'][0]:g}-{pushes['interval'][1]:g} s, "
                f"{pushes['force'][0]:g}-{pushes['force'][1]:g} N for {pushes['duration']:g} s"
            )
    else:
        lines.append("  trained without randomization (nominal worlds only)")
    training = info["training"]
    if training:
        lines.append("  training: " + ", ".join(f"{k} {v}" for k, v in training.items() if k != "randomization"))
    lines.append(
        f"  evaluate: sim2real eval {info['path']}    run: sim2real up --robot {info['robot']} --policy {info['path']}"
    )
    return "\n".join(lines)
