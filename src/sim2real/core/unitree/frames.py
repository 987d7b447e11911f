"""The Go2's messages as bytes: the C structs the CRC covers, and the DDS wire format.

Both come from one schema per type (its fields in IDL order: a primitive with a count, or a
nested type), laid out by two sets of rules:

- **C** (what the robot computes its CRC over): little-endian, each field at its natural
  alignment, each struct aligned to its largest member and padded to a multiple of it. LowCmd_
  is 812 bytes (203 words), LowState_ 1180 (295); tests check both against ctypes' layout.
- **CDR** (XCDR1, little-endian, what DDS carries): each primitive aligned to its size from
  the start of the payload, no padding at the end of a struct. cyclonedds' own serializer is
  pure Python and took 0.8 ms per LowState (40 % of a core at 500 Hz); ``struct`` does it in
  a few microseconds. Tests check the bytes against cyclonedds' serializer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Sequence

from sim2real.core.unitree.crc import frame_crc
from sim2real.core.unitree.messages import (
    MOTOR_SLOTS,
    REMOTE_BYTES,
    BmsCmd_,
    BmsState_,
    IMUState_,
    LowCmd_,
    LowState_,
    MotorCmd_,
    MotorState_,
)

# type -> fields in IDL order: (name, primitive format code or nested type, count)
SCHEMA: dict[type, list[tuple[str, Any, int]]] = {
    MotorCmd_: [
        ("mode", "B", 1),
        ("q", "f", 1),
        ("dq", "f", 1),
        ("tau", "f", 1),
        ("kp", "f", 1),
        ("kd", "f", 1),
        ("reserve", "I", 3),
    ],
    BmsCmd_: [("off", "B", 1), ("reserve", "B", 3)],
    LowCmd_: [
        ("head", "B", 2),
        ("level_flag", "B", 1),
        ("frame_reserve", "B", 1),
        ("sn", "I", 2),
        ("version", "I", 2),
        ("bandwidth", "H", 1),
        ("motor_cmd", MotorCmd_, MOTOR_SLOTS),
        ("bms_cmd", BmsCmd_, 1),
        ("wireless_remote", "B", REMOTE_BYTES),
        ("led", "B", 12),
        ("fan", "B", 2),
        ("gpio", "B", 1),
        ("reserve", "I", 1),
        ("crc", "I", 1),
    ],
    IMUState_: [
        ("quaternion", "f", 4),
        ("gyroscope", "f", 3),
        ("accelerometer", "f", 3),
        ("rpy", "f", 3),
        ("temperature", "B", 1),
    ],
    MotorState_: [
        ("mode", "B", 1),
        ("q", "f", 1),
        ("dq", "f", 1),
        ("ddq", "f", 1),
        ("tau_est", "f", 1),
        ("q_raw", "f", 1),
        ("dq_raw", "f", 1),
        ("ddq_raw", "f", 1),
        ("temperature", "B", 1),
        ("lost", "I", 1),
        ("reserve", "I", 2),
    ],
    BmsState_: [
        ("version_high", "B", 1),
        ("version_low", "B", 1),
        ("status", "B", 1),
        ("soc", "B", 1),
        ("current", "i", 1),
        ("cycle", "H", 1),
        ("bq_ntc", "B", 2),
        ("mcu_ntc", "B", 2),
        ("cell_vol", "H", 15),
    ],
    LowState_: [
        ("head", "B", 2),
        ("level_flag", "B", 1),
        ("frame_reserve", "B", 1),
        ("sn", "I", 2),
        ("version", "I", 2),
        ("bandwidth", "H", 1),
        ("imu_state", IMUState_, 1),
        ("motor_state", MotorState_, MOTOR_SLOTS),
        ("bms_state", BmsState_, 1),
        ("foot_force", "h", 4),
        ("foot_force_est", "h", 4),
        ("tick", "I", 1),
        ("wireless_remote", "B", REMOTE_BYTES),
        ("bit_flag", "B", 1),
        ("adc_reel", "f", 1),
        ("temperature_ntc1", "B", 1),
        ("temperature_ntc2", "B", 1),
        ("power_v", "f", 1),
        ("power_a", "f", 1),
        ("fan_frequency", "H", 4),
        ("reserve", "I", 1),
        ("crc", "I", 1),
    ],
}
XCDR1_LITTLE_ENDIAN = b"\x00\x01\x00\x00"  # the encapsulation header of a final type's payload


def _alignment(kind: Any) -> int:
    if isinstance(kind, str):
        return struct.calcsize(kind)
    return max(_alignment(k) for _, k, _ in SCHEMA[kind])


def _c_layout(kind: type, offset: int, out: list[str]) -> int:
    """Append ``kind``'s C layout to ``out`` from ``offset``; the offset after it."""

    def pad_to(align: int) -> None:
        nonlocal offset
        gap = -offset % align
        if gap:
            out.append(f"{gap}x")
            offset += gap

    pad_to(_alignment(kind))
    for _, field, count in SCHEMA[kind]:
        for _ in range(count if not isinstance(field, str) else 1):
            if isinstance(field, str):
                pad_to(struct.calcsize(field))
                out.append(f"{count}{field}")
                offset += count * struct.calcsize(field)
            else:
                offset = _c_layout(field, offset, out)
    pad_to(_alignment(kind))  # trailing padding: an array of the struct keeps every element aligned
    return offset


def _cdr_layout(kind: type, offset: int, out: list[str]) -> int:
    for _, field, count in SCHEMA[kind]:
        if isinstance(field, str):
            size = struct.calcsize(field)
            gap = -offset % size
            if gap:
                out.append(f"{gap}x")
            out.append(f"{count}{field}")
            offset += gap + count * size
        else:
            for _ in range(count):
                offset = _cdr_layout(field, offset, out)
    return offset


def _struct(layout, kind: type) -> struct.Struct:
    parts: list[str] = []
    layout(kind, 0, parts)
    return struct.Struct("<" + "".join(parts))


LOWCMD, LOWSTATE = _struct(_c_layout, LowCmd_), _struct(_c_layout, LowState_)
_CDR: dict[type, struct.Struct] = {LowCmd_: _struct(_cdr_layout, LowCmd_), LowState_: _struct(_cdr_layout, LowState_)}


def _flatten(msg: Any, kind: type, out: list) -> list:
    for name, field, count in SCHEMA[kind]:
        value = getattr(msg, name)
        if isinstance(field, str):
            if count == 1:
                out.append(value)
            else:
                out.extend(value)
        elif count == 1:
            _flatten(value, field, out)
        else:
            for item in value:
                _flatten(item, field, out)
    return out


def _build(kind: type, values: tuple, at: int) -> tuple[Any, int]:
    """A ``kind`` from ``values`` starting at index ``at``; the object and the index after it."""
    fields = {}
    for name, field, count in SCHEMA[kind]:
        if isinstance(field, str):
            fields[name] = values[at] if count == 1 else list(values[at : at + count])
            at += count
        elif count == 1:
            fields[name], at = _build(field, values, at)
        else:
            items = []
            for _ in range(count):
                item, at = _build(field, values, at)
                items.append(item)
            fields[name] = items
    return kind(**fields), at


def _field_indices(kind: type, at: int, prefix: str, out: dict[str, list[int]]) -> int:
    """Where each field of ``kind`` sits in its flat values (IDL order); the index after it."""
    for name, field, count in SCHEMA[kind]:
        if isinstance(field, str):
            out.setdefault(prefix + name, []).extend(range(at, at + count))
            at += count
        else:
            for _ in range(count):
                at = _field_indices(field, at, f"{prefix}{name}.", out)
    return at


def flat_indices(kind: type) -> dict[str, list[int]]:
    """Field path -> its positions in the flat values of a ``kind`` (what :func:`lowstate_values`
    returns): ``"tick"`` one, ``"imu_state.quaternion"`` four, ``"motor_state.q"`` one per motor
    slot in slot order."""
    out: dict[str, list[int]] = {}
    _field_indices(kind, 0, "", out)
    return out


def flat_values(kind: type, data: bytes) -> tuple:
    """A LowCmd_'s or LowState_'s flat field values straight from its DDS payload (header
    included), in IDL order (positions: :func:`flat_indices`)."""
    if bytes(data[:4]) != XCDR1_LITTLE_ENDIAN:
        raise ValueError(
            f"{kind.__name__}: expected an XCDR1 little-endian payload, got header {bytes(data[:4]).hex()}"
        )
    return _CDR[kind].unpack_from(data, 4)


def lowstate_values(data: bytes) -> tuple:
    """A LowState_'s flat field values from its payload: the bridge reads these at 500 Hz
    without building 20 motor objects a sample. A payload in another representation (XCDR2,
    big-endian: not what a Go2 sends) goes through cyclonedds' own deserializer."""
    if bytes(data[:4]) != XCDR1_LITTLE_ENDIAN:
        return lowstate_flat(LowState_.deserialize(data))
    return flat_values(LowState_, data)


def lowstate_flat(msg: LowState_) -> tuple:
    """A LowState_ object's flat field values, as :func:`lowstate_values` gives them."""
    return tuple(_flatten(msg, LowState_, []))


def lowstate_values_crc(values: tuple) -> int:
    """The crc a LowState with these flat values should carry (its own crc value not covered)."""
    return frame_crc(LOWSTATE.pack(*values))


def pack_lowcmd(msg: LowCmd_) -> bytes:
    """The C struct's bytes (what the CRC covers)."""
    return LOWCMD.pack(*_flatten(msg, LowCmd_, []))


def pack_lowstate(msg: LowState_) -> bytes:
    return LOWSTATE.pack(*_flatten(msg, LowState_, []))


def to_cdr(msg: Any) -> bytes:
    """The DDS payload of a LowCmd_ or LowState_ (XCDR1, little-endian), header included."""
    kind = type(msg)
    return XCDR1_LITTLE_ENDIAN + _CDR[kind].pack(*_flatten(msg, kind, []))


def from_cdr(kind: type, data: bytes) -> Any:
    """A LowCmd_ or LowState_ from its DDS payload (header included)."""
    return _build(kind, flat_values(kind, data), 0)[0]


@dataclass(frozen=True)
class LowCmdFrame:
    """A sealed LowCmd as the bridge writes it: its flat values (crc set) and its DDS payload,
    built once; the bridge resends its newest frame with every LowState (500 Hz)."""

    values: tuple
    payload: bytes

    @property
    def crc(self) -> int:
        return self.values[-1]  # crc is LowCmd_'s last field

    def message(self) -> LowCmd_:
        return _build(LowCmd_, self.values, 0)[0]


def lowcmd_frame(values: Sequence) -> LowCmdFrame:
    """Seal a LowCmd's flat values (IDL order, :func:`flat_indices`): its crc computed over the C
    struct as the robot checks it, the DDS payload packed once (padded to whole words, as
    cyclonedds' own writer pads)."""
    sealed = list(values)
    sealed[-1] = frame_crc(LOWCMD.pack(*sealed))
    payload = XCDR1_LITTLE_ENDIAN + _CDR[LowCmd_].pack(*sealed)
    return LowCmdFrame(tuple(sealed), payload.ljust(-(-len(payload) // 4) * 4, b"\0"))


def lowcmd_flat(msg: LowCmd_) -> tuple:
    return tuple(_flatten(msg, LowCmd_, []))


def lowcmd_crc(msg: LowCmd_) -> int:
    """The crc a Go2 expects in ``msg`` (its own crc field is not covered)."""
    return frame_crc(pack_lowcmd(msg))


def lowstate_crc(msg: LowState_) -> int:
    return lowstate_values_crc(lowstate_flat(msg))


def seal(msg: LowCmd_) -> LowCmd_:
    """Set ``msg.crc`` to its CRC (the last thing before it is written); returns ``msg``."""
    msg.crc = lowcmd_crc(msg)
    return msg


def seal_state(msg: LowState_) -> LowState_:
    """Set ``msg.crc`` to its CRC, as a robot does before it sends a LowState; returns ``msg``."""
    msg.crc = lowstate_crc(msg)
    return msg
