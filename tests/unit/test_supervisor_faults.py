"""The safety issue's fault matrix, where the answer is the supervisor's logic (no ROS needed):
command limits, IMU orientations, the joystick's e-stop and reset, engaging a robot that
does not stand, the deadman on hardware, configs weaker than a robot needs, deadlines in STANDBY."""

import math

import numpy as np
import pytest
import yaml

from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import SafetyConfigError, load_safety_config, parse_safety_config
from sim2real.core.safety_requirements import check_config_for
from sim2real.core.supervisor import Mode, SupervisorCore
from tests.unit.test_supervisor import DAMP_AT_ONCE, GO2, PERIOD, Rig, targets

GO2_SAFETY = load_safety_config("go2")
BUTTONS = GO2_SAFETY.buttons


def shipped_go2_yaml() -> dict:
    """config/safety/go2.yaml as data, to change one field of."""
    return yaml.safe_load(GO2_SAFETY.source.read_text())


def pad(*actions):
    buttons = [0] * 8
    for action in actions:
        buttons[BUTTONS[action]] = 1
    return buttons


def hold_deadman(rig):
    rig.inputs.joy_buttons = pad("deadman")
    rig.inputs.joy_time = rig.now


# -- case 1: effort and velocity targets limited on the write path; a violation trips ---------
@pytest.mark.parametrize("field, value", [("effort", 1e4), ("velocity", 1e3)])
def test_a_policy_command_over_the_profiles_limits_is_clamped_and_trips_a_hold(field, value):
    rig = Rig()
    rig.engaged()
    command = targets(rig.policy)
    getattr(command, field)[2] = value
    rig.fresh.discard("policy")
    rig.inputs.policy_command, rig.inputs.policy_time = command, rig.now + PERIOD
    rig.inputs.policy_stamp = rig.now
    decision = rig.tick()
    assert decision.mode == Mode.TAKEOVER and "command_limit" in rig.core.last_trip
    assert "FL_calf_joint" in rig.core.last_trip
    limits = GO2.effort_limits if field == "effort" else GO2.velocity_limits
    assert np.all(np.abs(getattr(decision.command, field)) <= limits)


def test_engage_refuses_a_policy_command_over_the_limits():
    rig = Rig()
    rig.tick(150)
    command = targets(rig.policy)
    command.effort[0] = 1e4
    rig.inputs.policy_command = command
    accepted, message = rig.request("engage")
    assert not accepted and "feed-forward effort" in message


# -- cases 4 and 5: an orientation that is no unit quaternion is refused in the core -----------
def test_a_half_norm_quaternion_is_refused_not_read_as_a_small_tilt():
    rig = Rig()
    rig.engaged()
    roll_90 = np.array([math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4)])
    rig.inputs.base_orientation = 0.5 * roll_90  # norm 0.5: not a 0.72 rad tilt, no orientation at all
    decision = rig.tick()
    assert decision.mode == Mode.DAMPING
    assert "base_tilt" in rig.core.last_trip and "not a unit quaternion" in rig.core.last_trip


def test_a_nearly_unit_quaternion_is_normalised_and_accepted():
    rig = Rig()
    rig.engaged()
    rig.inputs.base_orientation = np.array([0.0, 0.0, 0.0, 1.05])
    assert rig.tick(5).mode == Mode.ACTIVE


def test_refused_orientations_go_stale_when_the_tilt_check_is_off():
    config = parse_safety_config(
        {
            "checks": {
                "imu_stale": {"deadline": 0.05, "response": "damp"},
                "policy_stale": {"deadline": 0.1, "response": "hold"},
            }
        }
    )
    rig = Rig(config)
    rig.engaged()
    rig.inputs.base_orientation = np.zeros(4)
    decision = rig.tick(4)
    assert decision.mode == Mode.DAMPING and "imu_stale" in rig.core.last_trip
    assert "refused" in rig.core.last_trip


# -- cases 10 and 11: the e-stop and reset (ISO 13850) ---------------------------------------
def test_estop_reset_and_engage_in_one_joy_message_stay_in_estop():
    rig = Rig()
    rig.engaged()
    rig.inputs.joy_buttons, rig.inputs.joy_time = pad("estop", "reset", "engage"), rig.now
    assert rig.tick().mode == Mode.ESTOP
    assert any("pressed with a stop" in event for event in rig.core.events), rig.core.events
    assert rig.tick(20).mode == Mode.ESTOP


def test_reset_and_engage_pressed_together_reset_only():
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.engaged()
    rig.inputs.joy_buttons = pad("estop")
    rig.tick()
    rig.inputs.joy_buttons = pad()
    rig.tick()
    rig.inputs.joy_buttons = pad("reset", "engage")
    assert rig.tick().mode == Mode.STANDBY
    assert any("pressed with reset" in event for event in rig.core.events)
    assert rig.tick(200).mode == Mode.STANDBY, "the reset restarted motion by itself"


def test_reset_is_refused_while_the_estop_is_held():
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.engaged()
    rig.inputs.joy_buttons = pad("estop")
    rig.tick()
    accepted, message = rig.request("reset")
    assert not accepted and "still pressed" in message and rig.core.mode == Mode.ESTOP
    rig.inputs.joy_buttons = pad()
    assert rig.request("reset")[0]


def test_reset_is_refused_while_the_fault_persists():
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.engaged()
    roll = 1.3
    rig.inputs.base_orientation = np.array([math.sin(roll / 2), 0.0, 0.0, math.cos(roll / 2)])
    assert rig.tick().mode == Mode.DAMPING
    accepted, message = rig.request("reset")
    assert not accepted and "fault persists" in message and "base_tilt" in message
    rig.inputs.base_orientation = np.array([0.0, 0.0, 0.0, 1.0])
    accepted, message = rig.request("reset")
    assert accepted and rig.core.mode == Mode.STANDBY, message


# -- case 12: engage only once the robot stands ---------------------------------------------
def test_engage_right_after_reset_is_refused_until_the_robot_stands():
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.engaged()
    rig.request("damp")
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, 0.9, 0.0)
    rig.inputs.joint_position = lying.copy()
    rig.tick()
    assert rig.request("reset")[0]
    rig.tick(int(0.3 / PERIOD))
    accepted, message = rig.request("engage")
    assert not accepted and "standing up" in message
    rig.tick(150)  # the stand-up ran, but the robot did not follow (it lies on its calves)
    accepted, message = rig.request("engage")
    assert not accepted and "from its stand pose" in message
    rig.inputs.joint_position = GO2.default_positions.copy()
    accepted, message = rig.request("engage")
    assert accepted, message


# -- case 13: the deadman on hardware; teleop under the same limits as the policy --------------
def test_on_hardware_engage_needs_the_deadman_and_letting_go_holds():
    rig = Rig(simulated=False)
    rig.tick(150)
    accepted, message = rig.request("engage")
    assert not accepted and "deadman" in message
    hold_deadman(rig)
    assert rig.request("engage")[0]
    for _ in range(10):
        hold_deadman(rig)
        assert rig.tick().mode == Mode.ACTIVE
    rig.inputs.joy_buttons = pad()
    assert rig.tick().mode == Mode.TAKEOVER and "deadman" in rig.core.last_trip


def test_a_simulated_robot_needs_no_deadman():
    rig = Rig(simulated=True)
    rig.tick(150)
    assert rig.request("engage")[0]


def test_teleop_over_the_limits_is_not_followed_and_never_sent():
    rig = Rig()
    rig.engaged()
    assert rig.request("takeover")[0]
    held = rig.tick().command.position.copy()
    teleop = targets(GO2.default_positions + 0.2)
    teleop.effort[:] = 1e4
    rig.inputs.teleop_command, rig.inputs.teleop_time = teleop, rig.now + PERIOD
    decision = rig.tick()
    assert np.all(np.abs(decision.command.effort) <= GO2.effort_limits)
    assert not np.allclose(decision.command.position, teleop.position)
    assert np.abs(decision.command.position - held).max() < 0.35
    assert any("teleop command refused" in event for event in rig.core.events)


# -- case 14: configs that cannot supervise a robot ------------------------------------------
def test_shipped_configs_pass_the_hardware_requirements():
    for robot in ("go2", "panda"):
        assert check_config_for(load_safety_config(robot), load_profile(robot), simulated=False) == []


def test_an_empty_checks_section_is_refused_on_hardware_and_allowed_in_simulation():
    config = parse_safety_config({"checks": {}})
    with pytest.raises(SafetyConfigError, match=r"checks\.joint_states_stale: missing.*allow_weakened"):
        SupervisorCore(GO2, config, PERIOD, simulated=False)
    SupervisorCore(GO2, config, PERIOD, simulated=True)
    weakened = parse_safety_config({"checks": {}, "allow_weakened": True})
    core = SupervisorCore(GO2, weakened, PERIOD, simulated=False)
    assert any("base_tilt" in w for w in core.weakenings)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"base_tilt": {"max_angle": 3.0, "response": "damp"}}, r"base_tilt\.max_angle: 3 is looser than 1\.2"),
        ({"base_tilt": {"max_angle": 1.0, "response": "hold"}}, r"base_tilt\.response: hold is milder than damp"),
        ({"deadman": {"deadline": 0.5, "response": "hold", "enabled": False}}, r"deadman\.enabled: false"),
    ],
)
def test_a_weakened_check_is_refused_on_hardware(change, match):
    data = shipped_go2_yaml()
    data["checks"].update(change)
    with pytest.raises(SafetyConfigError, match=match):
        SupervisorCore(GO2, parse_safety_config(data), PERIOD, simulated=False)


def test_a_trip_set_to_clamp_is_refused_at_load():
    with pytest.raises(SafetyConfigError, match=r"base_tilt\.response: base_tilt is a trip"):
        parse_safety_config({"checks": {"base_tilt": {"max_angle": 1.0, "response": "clamp"}}})


def test_a_margin_that_leaves_no_room_for_the_stand_pose_is_refused_even_in_simulation():
    config = parse_safety_config({"checks": {"position_limit": {"margin": 10.0, "response": "clamp"}}})
    with pytest.raises(SafetyConfigError, match=r"position_limit\.margin: 10 rad leaves no room.*at most 0\.6"):
        SupervisorCore(GO2, config, PERIOD, simulated=True)


# -- case 19: an explicit deadline in STANDBY ---------------------------------------------------
def test_a_late_sample_in_standby_is_reported_and_a_silent_stream_still_damps():
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.tick(10)
    rig.fresh.discard("joint_states")
    decision = rig.tick(4)  # 80 ms without /joint_states, inside the shipped 0.5 s in STANDBY
    assert decision.mode == Mode.STANDBY
    assert any("not yet a fault" in c.detail for c in decision.checks if c.name == "joint_states_stale")
    assert rig.tick(25).mode == Mode.DAMPING  # silent past 0.5 s: damped
    rig.fresh.add("joint_states")
    rig.tick()
    assert rig.request("reset")[0]
    rig.engaged()
    rig.fresh.discard("joint_states")
    assert rig.tick(4).mode == Mode.DAMPING  # engaged: the 50 ms deadline


# -- case 2: another writer on /joint_commands ------------------------------------------------
def test_another_writer_on_joint_commands_damps_and_blocks_reset_until_it_leaves():
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.engaged()
    rig.inputs.other_command_writers = ("/teleop_tool",)
    assert rig.tick().mode == Mode.DAMPING and "sole_writer" in rig.core.last_trip
    assert "/teleop_tool" in rig.core.last_trip
    accepted, message = rig.request("reset")
    assert not accepted and "sole_writer" in message
    rig.inputs.other_command_writers = ()
    assert rig.request("reset")[0]


def test_damp_and_reset_in_one_joy_message_stay_damped():
    rig = Rig()
    rig.engaged()
    rig.inputs.joy_buttons, rig.inputs.joy_time = pad("damp", "reset"), rig.now
    assert rig.tick().mode == Mode.DAMPING
    assert any("pressed with a stop" in event for event in rig.core.events)


def test_a_press_released_before_the_next_tick_is_obeyed_message_by_message():
    """A tap shorter than a tick (a pad at 100 Hz+, or ticks held off by a slow policy) is two
    /joy messages between ticks; each message's presses keep their own rules."""
    rig = Rig(DAMP_AT_ONCE)  # reset at once: the descent's wait is tested apart
    rig.engaged()
    assert rig.core.joystick(pad("damp")) == {"damp"}
    assert rig.core.joystick(pad()) == frozenset()
    rig.inputs.joy_buttons, rig.inputs.joy_time = pad(), rig.now
    assert rig.tick().mode == Mode.DAMPING
    assert rig.tick(5).mode == Mode.DAMPING  # acted on once
    # Reset, then engage in a later message, both before one tick: the reset alone is a reset,
    # and the engage, a separate act, is judged by itself (refused: the robot has not stood up).
    rig.core.joystick(pad("reset"))
    rig.core.joystick(pad())
    rig.core.joystick(pad("engage"))
    rig.inputs.joy_buttons = pad("engage")
    assert rig.tick().mode == Mode.STANDBY
    assert not any("pressed with reset" in event for event in rig.core.events), rig.core.events
    assert any(event.startswith("joystick engage: ") for event in rig.core.events), rig.core.events


def test_a_takeover_during_the_stand_up_can_engage_once_the_hold_stands():
    rig = Rig()
    rig.tick(10)
    assert rig.request("takeover")[0]
    accepted, message = rig.request("engage")
    assert not accepted and "not stood up" in message
    rig.tick(150)  # the takeover's hold moves to the stand pose
    accepted, message = rig.request("engage")
    assert accepted, message


def test_on_hardware_a_config_without_a_deadman_button_is_refused():
    data = shipped_go2_yaml()
    del data["joystick"]["deadman"]
    with pytest.raises(SafetyConfigError, match=r"joystick\.deadman: missing"):
        SupervisorCore(GO2, parse_safety_config(data), PERIOD, simulated=False)
    weakened = parse_safety_config({**data, "allow_weakened": True})
    rig = Rig(weakened, simulated=False)
    rig.tick(150)
    accepted, message = rig.request("engage")  # the check with no button: never held, fail closed
    assert not accepted and "no joystick button" in message


# -- the Go2's category-1 stop: no restart, no jump, no reset before it ends ------------------
def test_a_second_damp_or_an_estop_during_the_descent_carries_it_on():
    rig = Rig()
    rig.engaged()
    assert rig.request("damp")[0]
    first = [rig.tick().command.position.copy() for _ in range(30)]
    assert rig.request("damp") == (True, "already DAMPING")
    assert rig.request("estop")[0] and rig.core.mode == Mode.ESTOP
    after = [rig.tick().command.position.copy() for _ in range(5)]
    steps = np.max(np.abs(np.diff(first + after, axis=0)), axis=1)
    assert steps.max() < 0.1, "the stop started again: a jump back toward the stand pose"


def test_a_robot_that_never_stood_is_lowered_from_where_it_is_not_stood_up_first():
    rig = Rig()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -1.0, 0.4)
    rig.inputs.joint_position = lying.copy()
    rig.tick(5)  # the stand-up has barely begun
    assert rig.request("damp")[0]
    commands = [rig.tick().command.position.copy() for _ in range(20)]
    assert np.max(np.abs(np.diff(commands, axis=0))) < 0.05
    assert np.max(np.abs(commands[-1] - GO2.default_positions)) > 0.5, "it was lifted toward the stand pose"


def test_with_joint_states_silent_the_stop_keeps_the_lying_pose():
    config = load_safety_config("go2")
    rig = Rig()
    rig.engaged()
    standing = rig.inputs.joint_position.copy()
    rig.fresh.discard("joint_states")
    commands = [rig.tick().command.position.copy() for _ in range(140)]  # damps, descends, stays
    assert rig.core.mode == Mode.DAMPING
    lying = np.array([config.damp_pose[name] for name in GO2.joint_names])
    np.testing.assert_allclose(commands[-1], lying)
    assert np.max(np.abs(commands[-1] - standing)) > 1.0, "the last sample (standing) became the target"
