"""The Go2 bridge's decisions without DDS: joints by name into motor slots, the damping frame,
the IMU reordered, the remote onto the supervisor's joystick, and each preflight failure."""

import numpy as np
import pytest

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.unitree.frames import flat_indices, lowcmd_crc, lowstate_values, seal_state, to_cdr
from sim2real.core.unitree.low_level import POS_STOP, VEL_STOP, Go2LowLevel
from sim2real.core.unitree.messages import LowState_
from sim2real.core.unitree.preflight import preflight
from sim2real.core.unitree.remote import encode_remote, joy_buttons

GO2 = load_profile("go2")
LOW = Go2LowLevel(GO2)
SDK_SLOT = {
    "FR_hip_joint": 0,
    "FR_thigh_joint": 1,
    "FR_calf_joint": 2,
    "FL_hip_joint": 3,
    "FL_thigh_joint": 4,
    "FL_calf_joint": 5,
    "RR_hip_joint": 6,
    "RR_thigh_joint": 7,
    "RR_calf_joint": 8,
    "RL_hip_joint": 9,
    "RL_thigh_joint": 10,
    "RL_calf_joint": 11,
}  # unitree_sdk2's Go2 motor order


def state(**changes) -> LowState_:
    """A healthy LowState: standing, charged, cool, sealed; ``changes`` applied before sealing."""
    msg = LowState_(head=[0xFE, 0xEF], level_flag=0xFF, tick=1000, power_v=25.2)
    msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
    for name, q in zip(GO2.joint_names, GO2.default_positions):
        msg.motor_state[SDK_SLOT[name]].q = float(q)
        msg.motor_state[SDK_SLOT[name]].temperature = 40
    for key, value in changes.items():
        setattr(msg, key, value)
    return seal_state(msg)


def healthy_window(n=500, period=0.002):
    return [(i * period, LOW.read(state(tick=1000 + 2 * i))) for i in range(n)]


def test_a_command_reaches_each_joints_own_motor_slot():
    q = GO2.default_positions.copy()
    q[GO2.joint_names.index("FL_thigh_joint")] = 1.23
    effort = np.zeros(12)
    effort[GO2.joint_names.index("RR_calf_joint")] = -4.5
    cmd = LOW.command(JointTargets(q, np.zeros(12), effort))
    assert cmd.crc == lowcmd_crc(cmd)
    assert cmd.motor_cmd[SDK_SLOT["FL_thigh_joint"]].q == pytest.approx(1.23)
    assert cmd.motor_cmd[SDK_SLOT["RR_calf_joint"]].tau == pytest.approx(-4.5)
    for name, i in SDK_SLOT.items():
        motor = cmd.motor_cmd[i]
        assert motor.mode == 0x01 and motor.kp == GO2.kp[GO2.joint_names.index(name)]
    for unused in cmd.motor_cmd[12:]:  # slots no joint uses: loops off
        assert (unused.mode, unused.q, unused.dq, unused.kp, unused.kd) == (0, POS_STOP, VEL_STOP, 0.0, 0.0)
    assert list(cmd.head) == [0xFE, 0xEF] and cmd.level_flag == 0xFF


def test_a_command_frame_is_the_sealed_lowcmd_on_the_wire():
    """The bridge writes frames filled by index and packed once: the same LowCmd, CRC and bytes
    cyclonedds' own serializer makes of it."""
    q = GO2.default_positions + np.linspace(-0.3, 0.3, 12)
    for frame in (LOW.command_frame(JointTargets(q, np.full(12, 0.5), np.full(12, -1.5))), LOW.damping_frame()):
        cmd = frame.message()
        assert frame.crc == cmd.crc == lowcmd_crc(cmd)
        wire = cmd.__idl__.serialize(cmd)
        assert frame.payload == wire.ljust(-(-len(wire) // 4) * 4, b"\0")  # as DataWriter.write pads
    cmd = LOW.command_frame(JointTargets(q, np.zeros(12), np.zeros(12))).message()
    assert [cmd.motor_cmd[SDK_SLOT[name]].q for name in GO2.joint_names] == pytest.approx(q)


def test_the_damping_frame_only_damps():
    cmd = LOW.damping()
    for i in SDK_SLOT.values():
        motor = cmd.motor_cmd[i]
        assert (motor.kp, motor.kd, motor.dq, motor.tau) == (0.0, GO2.damping_kd, 0.0, 0.0)
    assert cmd.crc == lowcmd_crc(cmd)


def test_a_lowstate_reads_by_name_with_the_quaternion_in_ros_order():
    msg = state()
    msg.motor_state[SDK_SLOT["RL_calf_joint"]].dq = 3.5
    msg.imu_state.quaternion = [0.9, 0.1, 0.2, 0.3]  # w, x, y, z as the robot sends it
    reading = LOW.read(seal_state(msg))
    assert reading.crc_ok
    assert reading.velocity[GO2.joint_names.index("RL_calf_joint")] == pytest.approx(3.5)
    np.testing.assert_allclose(reading.orientation, [0.1, 0.2, 0.3, 0.9], rtol=1e-6)
    msg.tick += 1  # changed after sealing
    assert not LOW.read(msg).crc_ok


def test_a_lowstate_read_from_its_dds_payload_is_read_field_by_field():
    """The bridge reads each LowState's flat values off the wire (no LowState_ built): every field
    it uses lands where the message object has it, in every motor slot."""
    rng = np.random.default_rng(7)
    msg = LowState_(tick=123456, power_v=24.5, wireless_remote=encode_remote({"L1"}, lx=0.5, ry=-0.25))
    msg.imu_state.quaternion = [0.5, 0.5, -0.5, 0.5]
    msg.imu_state.gyroscope, msg.imu_state.accelerometer = [0.125, -0.25, 0.375], [0.5, 0.25, 9.75]  # float32-exact
    for motor in msg.motor_state:  # the 8 slots a Go2 does not use too: none may leak in
        motor.q, motor.dq, motor.tau_est = (float(np.float32(v)) for v in rng.normal(size=3))
        motor.temperature = int(rng.integers(20, 90))
    seal_state(msg)
    reading = LOW.read_values(lowstate_values(to_cdr(msg)))
    motors = [msg.motor_state[SDK_SLOT[name]] for name in GO2.joint_names]
    np.testing.assert_array_equal(reading.position, [m.q for m in motors])
    np.testing.assert_array_equal(reading.velocity, [m.dq for m in motors])
    np.testing.assert_array_equal(reading.effort, [m.tau_est for m in motors])
    np.testing.assert_array_equal(reading.motor_temperature, [m.temperature for m in motors])
    np.testing.assert_array_equal(reading.orientation, [0.5, -0.5, 0.5, 0.5])
    np.testing.assert_array_equal(reading.angular_velocity, [0.125, -0.25, 0.375])
    np.testing.assert_array_equal(reading.linear_acceleration, [0.5, 0.25, 9.75])
    assert (reading.tick, reading.battery_voltage, reading.crc_ok) == (123456, 24.5, True)
    assert reading.remote.pressed == {"L1"} and (reading.remote.lx, reading.remote.ry) == (0.5, -0.25)
    assert len(flat_indices(LowState_)["motor_state.q"]) == 20


def test_a_lowstate_in_another_representation_is_read_through_cyclonedds():
    """XCDR2 is not what a Go2 sends, but a reader must not fall over on it: it takes the slow way."""
    msg = state(tick=4242)
    xcdr2 = msg.__idl__.serialize(msg, use_version_2=True)
    assert xcdr2[:4] != to_cdr(msg)[:4]
    reading, usual = LOW.read_values(lowstate_values(xcdr2)), LOW.read_values(lowstate_values(to_cdr(msg)))
    assert reading.tick == 4242 and reading.crc_ok
    np.testing.assert_array_equal(reading.position, usual.position)


def test_the_remote_presses_the_supervisors_buttons():
    config = load_safety_config("go2")
    reading = LOW.read(state(wireless_remote=encode_remote({"L1", "select"})))
    buttons = joy_buttons(reading.remote, config.remote, config.buttons)
    pressed = {action for action, index in config.buttons.items() if buttons[index]}
    assert pressed == {"deadman", "estop"}


def test_a_healthy_robot_passes_preflight():
    assert preflight(healthy_window(), 1.0, GO2) == []


def _set(path, value):
    def change(msg):
        target = msg
        for part in path[:-1]:
            target = target[part] if isinstance(part, int) else getattr(target, part)
        if isinstance(path[-1], int):
            target[path[-1]] = value
        else:
            setattr(target, path[-1], value)

    return change


def window_with(change=None, sealed_change=None, n=500, period=0.002, tick_step=2):
    """500 samples over 1 s; ``change`` applied to each before sealing, ``sealed_change`` after."""
    window = []
    for i in range(n):
        msg = state(tick=1000 + tick_step * i)
        if change:
            change(msg)
            seal_state(msg)
        if sealed_change:
            sealed_change(msg)
        window.append((i * period, LOW.read(msg)))
    return window


@pytest.mark.parametrize(
    "window, writers, words",
    [
        (window_with(n=250, period=0.004), [], "lowstate: 250 Hz over 1 s, need >= 450 Hz"),
        (window_with(tick_step=0), [], "lowstate tick: 499 of 499 samples did not advance"),
        (window_with(sealed_change=_set(("crc",), 12345)), [], "lowstate CRC: 500 of 500 samples invalid"),
        (window_with(_set(("imu_state", "quaternion"), [0.5, 0.0, 0.0, 0.0])), [], "IMU quaternion norm 0.500"),
        (
            window_with(_set(("motor_state", SDK_SLOT["FL_calf_joint"], "q"), -0.5)),
            [],
            "joint FL_calf_joint at -0.500 rad, outside its limits",
        ),
        (window_with(_set(("power_v",), 20.0)), [], "battery 20.0 V, need >= 22.0 V"),
        (
            window_with(_set(("motor_state", SDK_SLOT["FR_hip_joint"], "temperature"), 95)),
            [],
            "motor FR_hip_joint at 95 C, need <= 70 C",
        ),
        (window_with(), ["sport"], "rt/lowcmd has other writers (sport): the robot's sport mode"),
    ],
    ids=["slow", "frozen", "crc", "quaternion", "joint", "battery", "hot", "writer"],
)
def test_each_preflight_failure_is_one_line_with_value_limit_and_fix(window, writers, words):
    failures = preflight(window, 1.0, GO2, writers)
    assert len(failures) == 1, failures
    assert failures[0].startswith(words)
    assert ": " in failures[0][len(words) :], failures[0]  # the fix follows the value and the limit


def test_a_profile_without_a_unitree_section_is_refused():
    with pytest.raises(ValueError, match="no unitree: section"):
        Go2LowLevel(load_profile("panda"))


def test_the_sticks_ask_a_base_velocity_only_when_off_centre():
    from sim2real.core.unitree.remote import decode_remote, remote_velocity

    limits = (1.0, 0.5, 1.0)
    assert remote_velocity(decode_remote(encode_remote(lx=0.02, ly=-0.03)), limits) is None
    vx, vy, yaw = remote_velocity(decode_remote(encode_remote(ly=0.5, lx=1.0, rx=-0.5)), limits)
    assert (vx, vy, yaw) == pytest.approx((0.5, -0.5, 0.5))  # forward, to the right, turning left
    assert remote_velocity(decode_remote(encode_remote(ly=3.0)), limits)[0] == 1.0  # clamped at full stick
    edge = decode_remote(encode_remote(ly=0.06))  # between the two thresholds
    assert remote_velocity(edge, limits) is None and remote_velocity(edge, limits, moving=True) is not None
