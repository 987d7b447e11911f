"""The Go2 wireless remote's state, as the robot forwards it in LowState's ``wireless_remote``.

40 bytes, little-endian (Unitree's xRockerBtnDataStruct): head[2], a 16-bit button field
(bit 0 upward: R1, L1, start, select, R2, L2, F1, F2, A, B, X, Y, up, right, down, left),
then float32 sticks lx, rx, ry, the L2 trigger, ly; the rest unused.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Iterable, Sequence

BUTTONS = ("R1", "L1", "start", "select", "R2", "L2", "F1", "F2", "A", "B", "X", "Y", "up", "right", "down", "left")
_LAYOUT = struct.Struct("<2sH5f")  # head, buttons, lx, rx, ry, L2, ly: 24 of the 40 bytes
REMOTE_BYTES = 40


@dataclass(frozen=True)
class RemoteState:
    pressed: frozenset[str]
    lx: float = 0.0  # left stick, right positive
    ly: float = 0.0  # left stick, forward positive
    rx: float = 0.0  # right stick
    ry: float = 0.0
    l2: float = 0.0  # L2 trigger, 0..1

    def sticks_finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.lx, self.ly, self.rx, self.ry, self.l2))


def decode_remote(data: Sequence[int]) -> RemoteState:
    """``wireless_remote`` (40 bytes) -> buttons pressed and stick positions."""
    raw = bytes(data)
    if len(raw) != REMOTE_BYTES:
        raise ValueError(f"wireless_remote is {REMOTE_BYTES} bytes, got {len(raw)}")
    _, bits, lx, rx, ry, l2, ly = _LAYOUT.unpack_from(raw)
    pressed = frozenset(name for bit, name in enumerate(BUTTONS) if bits >> bit & 1)
    return RemoteState(pressed, lx=lx, ly=ly, rx=rx, ry=ry, l2=l2)


def encode_remote(
    pressed: Iterable[str] = (), lx: float = 0.0, ly: float = 0.0, rx: float = 0.0, ry: float = 0.0, l2: float = 0.0
) -> list[int]:
    """The 40 bytes a remote in this state sends (what a Go2 double puts in LowState)."""
    pressed = set(pressed)
    unknown = sorted(pressed - set(BUTTONS))
    if unknown:
        raise ValueError(f"unknown remote buttons {unknown}; the remote has {list(BUTTONS)}")
    bits = sum(1 << bit for bit, name in enumerate(BUTTONS) if name in pressed)
    raw = _LAYOUT.pack(b"\x00\x00", bits, lx, rx, ry, l2, ly)
    return list(raw + bytes(REMOTE_BYTES - len(raw)))


def joy_buttons(state: RemoteState, remote: dict[str, str], joystick: dict[str, int]) -> list[int]:
    """The sensor_msgs/Joy buttons the supervisor reads (``joystick``: action -> Joy index) for
    a remote in ``state`` (``remote``: action -> remote button), so the Go2's own remote is the
    operator's hand: its e-stop button is the supervisor's e-stop."""
    buttons = [0] * (max(joystick.values(), default=-1) + 1)
    for action, index in joystick.items():
        if action in remote and remote[action] in state.pressed:
            buttons[index] = 1
    return buttons


# A stick at rest reads a few hundredths off centre. Two thresholds, so one drifting at the edge
# does not switch between a small velocity and zero (each zero would override a teleop node).
STICK_DEAD_ZONE = 0.05  # back under this on every stick: at rest again
STICK_MOVED = 0.08  # past this on any stick: moved


DEFAULT_MAX_VELOCITY = (1.0, 0.5, 1.0)  # vx m/s, vy m/s, yaw rad/s at full stick


def max_velocity_from(values: Sequence[float] | str, where: str) -> tuple[float, float, float]:
    """The base velocity at full stick from three speeds >= 0 (a sequence, or 'vx,vy,yaw');
    a ValueError that names ``where`` and shows the form otherwise."""
    try:
        speeds = [float(v) for v in (values.split(",") if isinstance(values, str) else values)]
    except (TypeError, ValueError):
        speeds = []
    if len(speeds) != 3 or not all(0.0 <= v < float("inf") for v in speeds):
        shown = values if isinstance(values, str) else list(values)
        raise ValueError(f"{where}:={shown!r}: give three speeds >= 0, vx,vy,yaw in m/s, m/s, rad/s, e.g. 0.6,0.3,0.8")
    return (speeds[0], speeds[1], speeds[2])


def remote_velocity(
    state: RemoteState, max_velocity: tuple[float, float, float], moving: bool = False
) -> tuple[float, float, float] | None:
    """The base velocity command (vx m/s forward, vy m/s left, yaw rate rad/s counter-clockwise)
    the sticks ask for: left stick forward/back and sideways, right stick left/right to turn,
    each scaled to ``max_velocity``; None while the sticks rest (``moving``: they did not rest
    at the last call)."""
    if not state.sticks_finite():
        return None
    sticks = (state.ly, -state.lx, -state.rx)  # stick right is +x on the remote, -y and clockwise on the robot
    if all(abs(v) <= (STICK_DEAD_ZONE if moving else STICK_MOVED) for v in sticks):
        return None
    vx, vy, yaw_rate = (max(-1.0, min(1.0, v)) * limit for v, limit in zip(sticks, max_velocity))
    return vx, vy, yaw_rate
