"""The Go2's low-level protocol: message layout, CRC, motor order by name, the remote's bytes.

Each is checked against a second, independent computation: the CRC against the catalogue's
check value and a bit-by-bit loop over uint32 words; the C layout against ctypes' own layout
of the same structs; the DDS types against a real cyclonedds serialization round trip."""

import ctypes
import os
import random
import struct
import time

import pytest
import yaml

from sim2real.core.robot_profile import ProfileError, load_profile, profile_path
from sim2real.core.unitree.crc import crc32_mpeg2, frame_crc
from sim2real.core.unitree.dds import UnitreeDds
from sim2real.core.unitree.frames import (
    LOWCMD,
    LOWSTATE,
    lowcmd_crc,
    lowcmd_flat,
    lowcmd_frame,
    lowstate_values,
    pack_lowcmd,
    pack_lowstate,
    seal,
)
from sim2real.core.unitree.messages import LowCmd_, LowState_
from sim2real.core.unitree.remote import BUTTONS, decode_remote, encode_remote

GO2 = load_profile("go2")
# A DDS domain of this test run's own (tests/conftest.py draws ROS_DOMAIN_ID at random).
# Domains 14-19 (ports below the ephemeral range; tests/ros/test_unitree_bridge.py explains):
# `make test` runs these tests while the bridge tests' doubles write rt/lowstate on 1-13.
DOMAIN = 14 + int(os.environ["ROS_DOMAIN_ID"]) % 4  # this file uses DOMAIN to DOMAIN + 2


def crc_bit_by_bit(frame: bytes) -> int:
    """The CRC as the protocol states it: each little-endian uint32 word but the last, MSB first."""
    crc = 0xFFFFFFFF
    words = struct.unpack(f"<{len(frame) // 4}I", frame)[:-1]
    for word in words:
        for bit in range(31, -1, -1):
            top = crc >> 31
            crc = (crc << 1) & 0xFFFFFFFF
            if top ^ (word >> bit & 1):
                crc ^= 0x04C11DB7
    return crc


# -- ctypes' layout of the same structs (the compiler's alignment rules, not ours) -------------
def _array(kind, n):
    return kind * n


class CMotorCmd(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_uint8),
        ("q", ctypes.c_float),
        ("dq", ctypes.c_float),
        ("tau", ctypes.c_float),
        ("kp", ctypes.c_float),
        ("kd", ctypes.c_float),
        ("reserve", _array(ctypes.c_uint32, 3)),
    ]


class CBmsCmd(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint8), ("reserve", _array(ctypes.c_uint8, 3))]


_HEAD = [
    ("head", _array(ctypes.c_uint8, 2)),
    ("level_flag", ctypes.c_uint8),
    ("frame_reserve", ctypes.c_uint8),
    ("sn", _array(ctypes.c_uint32, 2)),
    ("version", _array(ctypes.c_uint32, 2)),
    ("bandwidth", ctypes.c_uint16),
]


class CLowCmd(ctypes.Structure):
    _fields_ = _HEAD + [
        ("motor_cmd", _array(CMotorCmd, 20)),
        ("bms_cmd", CBmsCmd),
        ("wireless_remote", _array(ctypes.c_uint8, 40)),
        ("led", _array(ctypes.c_uint8, 12)),
        ("fan", _array(ctypes.c_uint8, 2)),
        ("gpio", ctypes.c_uint8),
        ("reserve", ctypes.c_uint32),
        ("crc", ctypes.c_uint32),
    ]


class CIMUState(ctypes.Structure):
    _fields_ = [
        ("quaternion", _array(ctypes.c_float, 4)),
        ("gyroscope", _array(ctypes.c_float, 3)),
        ("accelerometer", _array(ctypes.c_float, 3)),
        ("rpy", _array(ctypes.c_float, 3)),
        ("temperature", ctypes.c_uint8),
    ]


class CMotorState(ctypes.Structure):
    _fields_ = (
        [("mode", ctypes.c_uint8)]
        + [(n, ctypes.c_float) for n in ("q", "dq", "ddq", "tau_est", "q_raw", "dq_raw", "ddq_raw")]
        + [("temperature", ctypes.c_uint8), ("lost", ctypes.c_uint32), ("reserve", _array(ctypes.c_uint32, 2))]
    )


class CBmsState(ctypes.Structure):
    _fields_ = [
        ("version_high", ctypes.c_uint8),
        ("version_low", ctypes.c_uint8),
        ("status", ctypes.c_uint8),
        ("soc", ctypes.c_uint8),
        ("current", ctypes.c_int32),
        ("cycle", ctypes.c_uint16),
        ("bq_ntc", _array(ctypes.c_uint8, 2)),
        ("mcu_ntc", _array(ctypes.c_uint8, 2)),
        ("cell_vol", _array(ctypes.c_uint16, 15)),
    ]


class CLowState(ctypes.Structure):
    _fields_ = _HEAD + [
        ("imu_state", CIMUState),
        ("motor_state", _array(CMotorState, 20)),
        ("bms_state", CBmsState),
        ("foot_force", _array(ctypes.c_int16, 4)),
        ("foot_force_est", _array(ctypes.c_int16, 4)),
        ("tick", ctypes.c_uint32),
        ("wireless_remote", _array(ctypes.c_uint8, 40)),
        ("bit_flag", ctypes.c_uint8),
        ("adc_reel", ctypes.c_float),
        ("temperature_ntc1", ctypes.c_uint8),
        ("temperature_ntc2", ctypes.c_uint8),
        ("power_v", ctypes.c_float),
        ("power_a", ctypes.c_float),
        ("fan_frequency", _array(ctypes.c_uint16, 4)),
        ("reserve", ctypes.c_uint32),
        ("crc", ctypes.c_uint32),
    ]


def randomised(msg, c_struct, rng):
    """Fill the IDL message and the ctypes struct with the same random values, field by field."""
    for name, kind in c_struct._fields_:
        value = getattr(msg, name)
        if isinstance(value, list):
            element = kind._type_
            if issubclass(element, ctypes.Structure):
                for i, item in enumerate(value):
                    randomised(item, getattr(c_struct, name)[i], rng)
                continue
            new = [_random(element, rng) for _ in value]
            setattr(msg, name, new)
            getattr(c_struct, name)[:] = new
        elif issubclass(kind, ctypes.Structure):
            randomised(value, getattr(c_struct, name), rng)
        else:
            new = _random(kind, rng)
            setattr(msg, name, new)
            setattr(c_struct, name, new)
    return msg


def _random(kind, rng):
    if kind is ctypes.c_float:
        return struct.unpack("<f", struct.pack("<f", rng.uniform(-100, 100)))[0]  # exactly a float32
    bits = ctypes.sizeof(kind) * 8
    signed = kind in (ctypes.c_int16, ctypes.c_int32)
    return rng.randrange(-(1 << bits - 1), 1 << bits - 1) if signed else rng.randrange(0, 1 << bits)


def test_the_crc_is_crc32_mpeg2_by_its_catalogue_check_value():
    assert crc32_mpeg2(b"123456789") == 0x0376E6E7


@pytest.mark.parametrize("seed", range(3))
def test_the_frame_crc_equals_a_bit_by_bit_computation_over_the_words(seed):
    rng = random.Random(seed)
    for size in (LOWCMD.size, LOWSTATE.size):
        frame = bytes(rng.randrange(256) for _ in range(size))
        assert frame_crc(frame) == crc_bit_by_bit(frame)


@pytest.mark.parametrize(
    "message, c_type, pack, size", [(LowCmd_, CLowCmd, pack_lowcmd, 812), (LowState_, CLowState, pack_lowstate, 1180)]
)
def test_the_packed_layout_is_the_c_structs_byte_for_byte(message, c_type, pack, size):
    assert ctypes.sizeof(c_type) == size
    c_struct = c_type()
    msg = randomised(message(), c_struct, random.Random(7))
    assert pack(msg) == bytes(c_struct)


@pytest.mark.parametrize(
    "message, c_type, pack", [(LowCmd_, CLowCmd, pack_lowcmd), (LowState_, CLowState, pack_lowstate)]
)
def test_the_wire_bytes_are_cyclonedds_own_and_round_trip(message, c_type, pack):
    msg = randomised(message(), c_type(), random.Random(3))
    wire = msg.serialize()
    assert wire == msg.__idl__.serialize(msg)  # cyclonedds' own (pure Python) serializer
    assert pack(message.deserialize(wire)) == pack(msg)
    assert pack(message.__idl__.deserialize(wire)) == pack(msg)


def test_messages_cross_a_real_dds_domain_by_name_and_type(tmp_path):
    robot, bridge = UnitreeDds(DOMAIN, "lo", role="robot"), UnitreeDds(DOMAIN, "lo", role="bridge")
    state = randomised(LowState_(), CLowState(), random.Random(5))
    command = seal(randomised(LowCmd_(), CLowCmd(), random.Random(6)))
    received_states, received_commands = [], []
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not (received_states and received_commands):
        robot.write(state)
        bridge.write(command)
        received_states += list(bridge.take_states(0.05))
        received_commands += list(robot.take_commands(0.05))
    assert received_states and received_commands, "nothing crossed the DDS domain in 10 s"
    assert pack_lowstate(received_states[0]) == pack_lowstate(state)
    assert pack_lowcmd(received_commands[0]) == pack_lowcmd(command)
    # The bridge's own paths: a frame's payload written as it is, LowStates taken as flat values.
    frame = lowcmd_frame(lowcmd_flat(command))
    payloads, values = [], []
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not (payloads and values):
        robot.write(state)
        bridge.write_frame(frame)
        values += bridge.take_state_values(0.05)
        payloads += robot.take_payloads(0.05)
    assert payloads and values, "nothing crossed the DDS domain in 10 s"
    assert payloads[0] == frame.payload and frame.crc == command.crc
    assert pack_lowcmd(LowCmd_.deserialize(payloads[0])) == pack_lowcmd(command)
    assert values[0] == lowstate_values(state.serialize())


def test_another_writer_on_lowcmd_is_found_by_discovery():
    """What the bridge's preflight calls the robot's sport mode: a second rt/lowcmd writer."""
    bridge = UnitreeDds(DOMAIN + 1, "lo", role="bridge")
    robot = UnitreeDds(DOMAIN + 1, "lo", role="robot")  # reads rt/lowcmd, writes rt/lowstate: no rival
    time.sleep(0.5)
    assert bridge.other_command_writers() == []
    rival = UnitreeDds(DOMAIN + 1, "lo", role="bridge")
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not bridge.other_command_writers():
        time.sleep(0.1)
    assert len(bridge.other_command_writers()) == 1
    rival.close()
    robot.close()


def test_the_robots_publishing_lowstate_are_found_by_discovery():
    """Each robot (or simulator) on the domain writes rt/lowstate: the bridge counts them."""
    domain = DOMAIN + 2  # apart from the other tests here
    bridge = UnitreeDds(domain, "lo", role="bridge")
    robot = UnitreeDds(domain, "lo", role="robot")
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not bridge.other_state_writers():
        time.sleep(0.1)
    assert len(bridge.other_state_writers()) == 1
    second = UnitreeDds(domain, "lo", role="robot")
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and len(bridge.other_state_writers()) < 2:
        time.sleep(0.1)
    assert len(bridge.other_state_writers()) == 2
    assert bridge.other_command_writers() == []  # robots read rt/lowcmd: no rival commander
    second.close()
    robot.close()
    bridge.close()


def test_a_sealed_command_carries_its_crc_and_any_change_breaks_it():
    msg = seal(LowCmd_(head=[0xFE, 0xEF], level_flag=0xFF))
    assert msg.crc == lowcmd_crc(msg) == crc_bit_by_bit(pack_lowcmd(msg))
    msg.motor_cmd[4].q = 0.5
    assert lowcmd_crc(msg) != msg.crc


def test_motors_map_to_joints_by_name_in_the_sdks_order():
    slots = dict(zip(GO2.joint_names, GO2.unitree.slots(GO2.joint_names)))
    assert [
        slots[f"{leg}_{part}_joint"] for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")
    ] == list(range(12))
    assert GO2.unitree.head == (0xFE, 0xEF) and GO2.unitree.level_flag == 0xFF
    assert load_profile("panda").unitree is None


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda m: m.pop("FL_hip_joint"), r"joints without a motor: \['FL_hip_joint'\]"),
        (lambda m: m.update(FL_hip_joint=0), r"motor indices given to several joints: \[0\]"),
        (lambda m: m.update(FL_hip_joint=20), r"unitree.motors.FL_hip_joint: .*0..19"),
        (lambda m: m.update(tail_joint=12), r"names that are no joint: \['tail_joint'\]"),
    ],
)
def test_a_bad_motor_table_is_refused_with_its_field(tmp_path, change, match):
    data = yaml.safe_load(profile_path("go2").read_text())
    change(data["unitree"]["motors"])
    data["urdf"] = str(GO2.urdf)
    path = tmp_path / "go2.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=match):
        load_profile(path)


def test_the_remote_round_trips_and_each_button_is_its_bit():
    state = decode_remote(encode_remote({"A", "L1"}, lx=0.25, ly=-0.5, rx=0.75, ry=1.0, l2=0.5))
    assert state.pressed == {"A", "L1"}
    assert (state.lx, state.ly, state.rx, state.ry, state.l2) == (0.25, -0.5, 0.75, 1.0, 0.5)
    for bit, name in enumerate(BUTTONS):
        raw = encode_remote({name})
        assert int.from_bytes(bytes(raw[2:4]), "little") == 1 << bit
    a_pressed = encode_remote({"A"})
    assert a_pressed[3] == 0x01 and a_pressed[2] == 0  # A is bit 8: the second byte's lowest bit
    with pytest.raises(ValueError, match="40 bytes"):
        decode_remote([0] * 24)
    with pytest.raises(ValueError, match="unknown remote buttons"):
        encode_remote({"Z"})
