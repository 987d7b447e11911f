"""The supervisor's logic without ROS: modes, every check, responses and the command it sends."""

import dataclasses
import math

import numpy as np
import pytest

from sim2real.core.joint_command import JointTargets
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import Response, SafetyConfigError, load_safety_config, parse_safety_config
from sim2real.core.supervisor import DAMP_SETTLE_S, WAITING_FOR_DRIVER, Mode, SupervisorCore, SupervisorInputs
from sim2real.evaluate.hold_trial import silent_policy_held

GO2 = load_profile("go2")
PERIOD = 0.02
# The Go2's config without its category-1 descent: DAMPING sends the measured positions at once.
DAMP_AT_ONCE = dataclasses.replace(load_safety_config("go2"), damp_duration=0.0)
# The Go2's config holding a silent policy (it ships the category-1 stop for it): the holds.
HOLDING = silent_policy_held(load_safety_config("go2"))


def targets(position) -> JointTargets:
    n = len(position)
    return JointTargets(np.array(position, dtype=float), np.zeros(n), np.zeros(n))


class Rig:
    """A supervisor with inputs that stay fresh unless a test lets one go stale."""

    def __init__(self, config=None, profile=GO2, simulated=True, period=PERIOD):
        self.profile = profile
        self.period = period
        self.core = SupervisorCore(profile, config or load_safety_config("go2"), period, simulated=simulated)
        self.now = 0.0
        n = profile.num_joints
        self.inputs = SupervisorInputs(
            joint_position=profile.default_positions.copy(),
            joint_velocity=np.zeros(n),
            joint_effort=np.zeros(n),
            base_orientation=np.array([0, 0, 0, 1.0]),
        )
        self.policy = profile.default_positions + 0.05
        self.policy_velocity = np.zeros(n)  # the policy's velocity targets
        self.policy_effort = np.zeros(n)  # the policy's feed-forward efforts
        self.fresh = {"joint_states", "imu", "policy"}

    def tick(self, n=1, every=None):
        """``n`` ticks, ``every`` seconds apart (a command period unless given)."""
        decision = None
        for _ in range(n):
            self.now += self.period if every is None else every
            if "joint_states" in self.fresh:
                self.inputs.joint_states_time = self.now
            if "imu" in self.fresh:
                self.inputs.imu_time = self.now
            if "policy" in self.fresh:
                self.inputs.policy_command = targets(self.policy)
                self.inputs.policy_command.velocity = np.array(self.policy_velocity, dtype=float)
                self.inputs.policy_command.effort = np.array(self.policy_effort, dtype=float)
                self.inputs.policy_time = self.now
                self.inputs.policy_stamp = self.now - 0.002
            decision = self.core.tick(self.inputs, self.now)
        return decision

    def request(self, action):
        return self.core.request(action, self.inputs, self.now)

    def engaged(self):
        self.tick(round(3.0 / self.period))  # stand up fully
        accepted, message = self.request("engage")
        assert accepted, message
        return self.tick(round(0.8 / self.period))  # past the blend


def failed(decision, name):
    return [c for c in decision.checks if c.name == name and not c.ok]


def test_no_command_before_the_first_joint_state():
    core = SupervisorCore(GO2, load_safety_config("go2"), PERIOD)
    decision = core.tick(SupervisorInputs(), 0.1)
    assert decision.command is None and decision.mode == Mode.STANDBY


def test_standby_stands_up_smoothly_from_where_the_robot_lies():
    rig = Rig()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)  # calves folded
    rig.inputs.joint_position = lying.copy()
    first = rig.tick().command.position
    assert np.allclose(first, lying, atol=0.01)
    final = rig.tick(int(2.0 / PERIOD) + 5).command.position
    np.testing.assert_allclose(final, GO2.default_positions, atol=1e-9)


def test_a_reset_before_the_robot_stood_starts_the_stand_up_again_from_where_it_lies():
    """A driver that damped on a command gap mid stand-up (the Go2 bridge then takes only
    commands near the robot) leaves the robot lying: the operator's reset starts it again."""
    rig = Rig()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)  # calves folded
    rig.inputs.joint_position = lying.copy()
    rig.tick(int(3.0 / PERIOD))  # the stand-up ran its course; the robot did not follow
    blocked = rig.request("engage")
    assert not blocked[0] and "did not reach its stand" in blocked[1] and "reset" in blocked[1]
    accepted, message = rig.request("reset")
    assert accepted and "standing up again" in message, message
    # from where the robot lies: the targets come down to it (at the rate limits) within a few ticks
    soon = [rig.tick().command.position for _ in range(int(0.2 / PERIOD))]
    assert min(np.max(np.abs(command - lying)) for command in soon) < 0.02
    final = rig.tick(int(2.0 / PERIOD) + 5).command.position
    np.testing.assert_allclose(final, GO2.default_positions, atol=1e-9)
    rig.inputs.joint_position = GO2.default_positions.copy()
    rig.tick()
    assert rig.request("reset") == (True, "nothing to reset in STANDBY")  # it stood: a reset changes nothing


def test_a_robot_that_sank_after_it_stood_is_told_to_damp_then_reset():
    """After the stand-up, a command gap damps the Go2 bridge and the robot sinks while STANDBY
    holds the stand pose. A reset alone leaves a robot that stood as it is (a restart from where
    a sagging robot stands would relax its legs), so the refused engage says: damp, then reset."""
    rig = Rig()
    rig.inputs.joint_position = GO2.default_positions.copy()
    rig.tick(int(3.0 / PERIOD))  # stood
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)
    rig.inputs.joint_position = lying.copy()
    rig.tick()
    blocked = rig.request("engage")
    assert not blocked[0] and "no longer stands" in blocked[1] and "damp, then reset" in blocked[1], blocked
    assert rig.request("reset") == (True, "nothing to reset in STANDBY")
    assert rig.request("damp") == (True, "DAMPING")
    rig.tick(int(3.0 / PERIOD))  # the stop's descent ends
    accepted, message = rig.request("reset")
    assert accepted and message.startswith("STANDBY"), message
    soon = [rig.tick().command.position for _ in range(int(0.2 / PERIOD))]
    assert min(np.max(np.abs(command - lying)) for command in soon) < 0.02  # from where it lies


def test_a_stand_up_reset_goes_on_from_the_targets_the_robot_follows_and_ignores_a_takeover_pressed_with_it():
    rig = Rig()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)
    rig.inputs.joint_position = lying.copy()
    pad = [0] * 8
    rig.inputs.joy_buttons, rig.inputs.joy_time = list(pad), rig.now
    sent = rig.tick(int(0.6 / PERIOD)).command.position
    rig.inputs.joint_position = sent + 0.05  # mid stand-up, the robot following its targets
    buttons = rig.core.config.buttons
    pad[buttons["reset"]] = pad[buttons["takeover"]] = 1
    rig.inputs.joy_buttons = list(pad)
    decision = rig.tick()
    assert decision.mode == Mode.STANDBY  # the takeover pressed with the reset is ignored
    assert any("ignored, pressed with reset" in event for event in decision.events)
    assert np.max(np.abs(decision.command.position - sent)) < 0.02  # from its targets, not a sag to the robot


def test_the_stand_up_waits_where_the_robot_lies_until_its_commands_are_received():
    """Begun before the driver listens, the first command the driver got would be from mid-way
    through the stand-up: a jump from where the robot lies."""
    rig = Rig()
    lying = GO2.default_positions + np.where(np.arange(12) % 3 == 2, -0.8, 0.0)  # calves folded
    rig.inputs.joint_position = lying.copy()
    rig.inputs.commands_received = False
    held = rig.tick(int(3.0 / PERIOD)).command.position
    np.testing.assert_allclose(held, lying, atol=1e-9)
    assert "waiting for the robot's driver" in rig.request("engage")[1]
    # nor a takeover: its hold pose would be reached from mid-way too
    assert rig.request("takeover") == (False, f"refused: {WAITING_FOR_DRIVER}")
    rig.inputs.commands_received = True
    first = rig.tick().command.position
    assert np.max(np.abs(first - lying)) < 0.01  # the stand-up starts now, from where the robot lies
    final = rig.tick(int(2.0 / PERIOD) + 5).command.position
    np.testing.assert_allclose(final, GO2.default_positions, atol=1e-9)


def test_engage_needs_a_fresh_policy_and_then_follows_it_after_a_blend():
    rig = Rig()
    rig.fresh.discard("policy")
    rig.tick(150)
    accepted, message = rig.request("engage")
    assert not accepted and "policy_runtime" in message
    decision = rig.engaged() if rig.fresh.add("policy") is None else None
    assert decision.mode == Mode.ACTIVE
    np.testing.assert_allclose(decision.command.position, rig.policy)


def test_a_go2_whose_policy_goes_silent_gets_the_category_1_stop_within_two_periods():
    rig = Rig()
    rig.engaged()
    rig.fresh.discard("policy")
    modes = [rig.tick().mode for _ in range(8)]
    assert modes[math.ceil(0.1 / PERIOD) + 1] == Mode.DAMPING and "policy_stale" in rig.core.last_trip
    lying = np.array([rig.core.config.damp_pose[name] for name in GO2.joint_names])
    descent = [rig.tick().command.position for _ in range(round((0.2 + rig.core.config.damp_duration) / PERIOD))]
    assert np.abs(np.array(descent) - lying).max(axis=1).min() < 0.01, "the stop never reached damp_pose"


def test_stale_policy_holds_in_place_within_two_periods_and_keeps_publishing():
    rig = Rig(HOLDING)
    rig.engaged()
    rig.fresh.discard("policy")
    modes = [rig.tick().mode for _ in range(8)]
    deadline_ticks = math.ceil(0.1 / PERIOD)
    assert modes[deadline_ticks + 1] == Mode.TAKEOVER
    decision = rig.tick()
    assert decision.command is not None and np.all(np.isfinite(decision.command.position))
    assert "policy_stale" in rig.core.last_trip


def test_nan_action_holds_the_last_safe_targets():
    rig = Rig(dataclasses.replace(load_safety_config("go2"), hold_pose="last"))
    before = rig.engaged().command.position.copy()
    rig.policy = rig.policy.copy()
    rig.policy[3] = math.nan
    decision = rig.tick()
    assert decision.mode == Mode.TAKEOVER and "non_finite_command" in rig.core.last_trip
    assert np.all(np.isfinite(decision.command.position))
    np.testing.assert_allclose(decision.command.position, before, atol=1e-9)


def test_a_stand_pose_hold_moves_from_the_last_targets_to_the_stand_pose_within_hold_duration():
    config = HOLDING  # the shipped Go2 hold: stand
    assert config.hold_pose == "stand"
    rig = Rig(config)
    rig.policy = GO2.default_positions + np.where(np.arange(12) % 3 == 2, 0.3, 0.0)  # mid-stride-ish
    before = rig.engaged().command.position.copy()
    rig.fresh.discard("policy")
    positions = [rig.tick().command.position.copy() for _ in range(round((0.1 + config.hold_duration) / PERIOD) + 3)]
    assert rig.core.mode == Mode.TAKEOVER and "policy_stale" in rig.core.last_trip
    steps = np.abs(np.diff([before, *positions], axis=0)).max(axis=1)
    assert steps.max() < 0.3 * 3 * PERIOD / config.hold_duration  # 2x the smoothstep's peak rate (1.5x the mean)
    np.testing.assert_allclose(positions[-1], GO2.default_positions, atol=1e-9)


def test_the_shipped_panda_hold_keeps_the_targets_last_sent():
    profile = load_profile("panda")
    config = load_safety_config("panda")
    assert config.hold_pose == "last"
    rig = Rig(config, profile)
    before = rig.engaged().command.position.copy()
    rig.fresh.discard("policy")
    later = rig.tick(round(3.0 / PERIOD)).command.position
    assert rig.core.mode == Mode.TAKEOVER
    np.testing.assert_allclose(later, before, atol=1e-9)


def test_an_unknown_hold_pose_is_refused_with_the_choices():
    with pytest.raises(SafetyConfigError, match=r"hold_pose.*\['last', 'stand'\]"):
        parse_safety_config({"hold_pose": "crouch"})


@pytest.mark.parametrize("stream, expected", [("joint_states", Mode.DAMPING), ("imu", Mode.DAMPING)])
def test_stale_sensors_damp(stream, expected):
    rig = Rig(DAMP_AT_ONCE)
    rig.engaged()
    rig.fresh.discard(stream)
    decision = rig.tick(4)
    assert decision.mode == expected
    np.testing.assert_allclose(decision.command.position, rig.inputs.joint_position)
    assert np.all(decision.command.velocity == 0)


def test_tilt_velocity_and_torque_limits_damp():
    for mutate, name in [
        (lambda i: setattr(i, "base_orientation", np.array([math.sin(0.6), 0, 0, math.cos(0.6)])), "base_tilt"),
        (lambda i: i.joint_velocity.__setitem__(2, 30.0), "velocity_limit"),
        (lambda i: i.joint_effort.__setitem__(5, -80.0), "torque_limit"),
    ]:
        rig = Rig()
        rig.engaged()
        mutate(rig.inputs)
        decision = rig.tick()
        assert decision.mode == Mode.DAMPING, name
        assert rig.core.last_trip.split(": ", 1)[1].startswith(name)


def test_targets_are_clamped_to_limits_and_step_limited():
    rig = Rig()
    rig.engaged()
    rig.policy = GO2.upper_limits + 1.0
    decision = rig.tick()
    assert decision.mode == Mode.ACTIVE
    step = rig.core.config.checks["target_step"]["max_step"]
    assert failed(decision, "position_limit") and failed(decision, "target_step")
    assert np.all(decision.command.position <= GO2.upper_limits - 0.05 + 1e-12)
    for _ in range(40):
        previous = decision.command.position
        decision = rig.tick()
        assert np.all(np.abs(decision.command.position - previous) <= step + 1e-12)
    np.testing.assert_allclose(decision.command.position, GO2.upper_limits - 0.05)


def test_ticks_closer_than_a_period_share_one_period_of_target_step():
    """In real time a late policy command and the next one on time tick milliseconds apart: the
    targets still move no further per period than target_step allows."""
    rig = Rig()
    rig.engaged()
    step = rig.core.config.checks["target_step"]["max_step"]
    rig.policy = GO2.upper_limits  # far away: every tick is step-limited
    sent = [rig.tick().command.position]  # a whole step: the period's budget is used
    for every in (0.1, 0.05, 0.85, 1.0, 0.3, 0.3, 0.3, 2.0):
        decision = rig.tick(every=every * rig.period)
        assert decision.mode == Mode.ACTIVE, rig.core.last_trip
        sent.append(decision.command.position)
        moved = np.abs(sent[-1] - sent[-2]).max()
        assert moved <= step * min(every, 1.0) + 1e-9, every
        assert moved >= step * min(every, 1.0) - 1e-9, every  # limited, not stopped
    # The three ticks after the first came within one period in all: one step's worth together.
    assert np.abs(sent[3] - sent[0]).max() == pytest.approx(step)
    half = rig.tick(every=0.5 * rig.period)
    assert "0.175 of 0.35 rad per period left 0.50 of a period after" in failed(half, "target_step")[0].detail


def test_a_command_after_a_tick_that_moved_nothing_keeps_its_whole_step():
    """The timer resends the held targets while the policy is late; its command, arriving just
    after, still moves a whole step: nothing moved in the period before it."""
    rig = Rig()
    rig.engaged()
    step = rig.core.config.checks["target_step"]["max_step"]
    rig.policy = GO2.upper_limits
    held = rig.tick().command.position
    rig.policy = held.copy()
    assert np.array_equal(rig.tick().command.position, held)  # the resend, a period later
    rig.policy = GO2.upper_limits
    late = rig.tick(every=0.05 * rig.period).command.position
    np.testing.assert_allclose(np.abs(late - held).max(), step)
    after = rig.tick(every=0.5 * rig.period).command.position
    np.testing.assert_allclose(np.abs(after - late).max(), 0.5 * step)  # what refilled since


def test_a_clock_that_went_back_allows_one_period_of_target_step_not_none():
    rig = Rig()
    rig.engaged()
    step = rig.core.config.checks["target_step"]["max_step"]
    before = rig.tick().command.position
    rig.policy = GO2.upper_limits
    rig.now -= 5.0
    after = rig.tick().command.position
    np.testing.assert_allclose(np.abs(after - before).max(), step)


def test_tick_overrun_holds():
    rig = Rig()
    rig.engaged()
    rig.inputs.policy_stamp = rig.now - 1.0
    rig.fresh.discard("policy")
    rig.inputs.policy_time = rig.now + PERIOD  # arrives on time, but computed on old data
    decision = rig.tick()
    assert decision.mode == Mode.TAKEOVER and "tick_overrun" in rig.core.last_trip


def test_deadman_must_be_held_when_enabled():
    config = load_safety_config("go2")
    data = {
        "checks": {
            "deadman": {"deadline": 0.5, "response": "hold"},
            "policy_stale": {"deadline": 0.1, "response": "hold"},
        },
        "joystick": dict(config.buttons),
    }
    rig = Rig(parse_safety_config(data))
    rig.inputs.joy_buttons = [0] * 8
    rig.inputs.joy_buttons[config.buttons["deadman"]] = 1
    rig.inputs.joy_time = 0.0
    rig.tick(150)
    rig.inputs.joy_time = rig.now
    assert rig.request("engage")[0]
    rig.inputs.joy_time = rig.now
    assert rig.tick().mode == Mode.ACTIVE
    rig.inputs.joy_buttons[config.buttons["deadman"]] = 0
    assert rig.tick().mode == Mode.TAKEOVER and "deadman" in rig.core.last_trip


def test_estimator_divergence_holds():
    rig = Rig()
    rig.engaged()
    rig.inputs.estimator_diverged = True
    assert rig.tick().mode == Mode.TAKEOVER


def test_a_takeover_follows_only_teleop_sent_after_it_began():
    """A teleop command from before the takeover, though fresh, carries old targets for the
    joints it does not name: the takeover holds until the operator sends one of its own."""
    rig = Rig()
    rig.engaged()
    rig.tick(10)
    held = rig.tick().command.position.copy()
    stale = GO2.default_positions - 0.2
    rig.inputs.teleop_command, rig.inputs.teleop_time = targets(stale), rig.now - 0.05
    assert rig.request("takeover")[0]
    command = rig.tick().command.position
    # The hold's first step from where the robot was (stand hold: toward the stand pose), not a
    # jump to the stale teleop targets.
    assert np.max(np.abs(command - held)) < 0.01 and np.min(np.abs(command - stale)) > 0.2
    new = held + 0.01
    rig.inputs.teleop_command, rig.inputs.teleop_time = targets(new), rig.now + PERIOD
    np.testing.assert_allclose(rig.tick().command.position, new)


def test_joystick_takeover_follows_teleop_and_engage_returns_smoothly():
    rig = Rig()
    rig.engaged()
    buttons = rig.core.config.buttons
    pad = [0] * 8
    rig.inputs.joy_buttons, rig.inputs.joy_time = list(pad), rig.now
    rig.tick()
    pad[buttons["takeover"]] = 1
    rig.inputs.joy_buttons = list(pad)
    teleop = GO2.default_positions - 0.05
    rig.inputs.teleop_command, rig.inputs.teleop_time = targets(teleop), rig.now + PERIOD
    decision = rig.tick()
    assert decision.mode == Mode.TAKEOVER
    np.testing.assert_allclose(decision.command.position, teleop)
    # Teleop stops: the built-in hold pose (stand) takes over without a jump.
    rig.inputs.teleop_time = rig.now - 1.0
    hold = rig.tick().command.position
    assert np.max(np.abs(hold - teleop)) < 0.05
    pad[buttons["takeover"]] = 0
    pad[buttons["engage"]] = 1
    rig.inputs.joy_buttons = list(pad)
    positions = [rig.tick().command.position for _ in range(40)]
    assert rig.core.mode == Mode.ACTIVE
    jumps = np.max(np.abs(np.diff(positions, axis=0)), axis=1)
    assert jumps.max() < 0.02, "the return to ACTIVE must be a blend, not a jump"
    np.testing.assert_allclose(positions[-1], rig.policy)


def test_estop_is_latched_until_reset():
    rig = Rig()
    rig.engaged()
    assert rig.request("estop")[0]
    assert rig.tick().mode == Mode.ESTOP
    for action in ("engage", "takeover", "damp"):
        accepted, message = rig.request(action)
        assert not accepted and "reset" in message
    assert rig.tick(20).mode == Mode.ESTOP
    accepted, message = rig.request("reset")  # the Go2's stop still lowers it: a reset waits
    assert not accepted and "still lowering" in message
    assert rig.tick(100).mode == Mode.ESTOP
    assert rig.request("reset")[0]
    assert rig.tick().mode == Mode.STANDBY


@pytest.mark.parametrize("stream, reason", [("joint_states", "stale"), ("imu", "imu_stale")])
def test_reset_refused_while_a_sensor_is_silent(stream, reason):
    """Without /joint_states a reset has no live robot; without /imu/data the fault persists."""
    rig = Rig()
    rig.engaged()
    rig.fresh.discard(stream)
    assert rig.tick(5).mode == Mode.DAMPING
    accepted, message = rig.request("reset")
    assert not accepted and reason in message


@pytest.mark.parametrize(
    "data, words",
    [
        ({"checks": {"tilt": {"response": "damp"}}}, "checks.tilt: unknown check"),
        ({"checks": {"base_tilt": {"response": "explode"}}}, "unknown response 'explode'"),
        ({"checks": {"base_tilt": {"response": "damp", "max_angel": 1}}}, "unknown settings ['max_angel']"),
        ({"checks": {"base_tilt": {"response": "damp", "max_angle": -1}}}, "checks.base_tilt.max_angle"),
        ({"checks": {"target_step": {"response": "estop"}}}, "use response: clamp"),
        ({"joystick": {"jump": 1}}, "joystick.jump: unknown action"),
        ({"speed": 1}, "unknown fields"),
        (
            {"checks": {"policy_stale": {"response": "hold", "deadline": math.nan}}},
            "checks.policy_stale.deadline: expected a finite number",
        ),
        ({"checks": {"target_step": {"response": "clamp", "max_step": math.inf}}}, "checks.target_step.max_step"),
        ({"checks": {"policy_stale": "hold"}}, "checks.policy_stale: expected a mapping of settings, got 'hold'"),
        ({"joystick": {"estop": 6, "reset": 6}}, "buttons shared by several actions: {6: ['estop', 'reset']}"),
    ],
)
def test_bad_safety_config_names_the_field_and_fix(data, words):
    with pytest.raises(SafetyConfigError) as info:
        parse_safety_config(data, "x.yaml")
    assert words in str(info.value) and "Fix:" in str(info.value)


def test_shipped_configs_load():
    for robot in ("go2", "panda"):
        config = load_safety_config(robot)
        assert config.checks["joint_states_stale"].response == Response.DAMP
    assert "base_tilt" not in load_safety_config("panda").checks


def test_inputs_that_never_arrived_wait_in_standby_and_block_engage():
    rig = Rig()
    rig.fresh.discard("imu")
    rig.inputs.imu_time = None
    decision = rig.tick(150)
    assert decision.mode == Mode.STANDBY, "a missing IMU before engage is waiting, not a fault"
    assert [c.detail for c in decision.checks if c.name == "imu_stale"] == ["waiting for the first /imu/data"]
    accepted, message = rig.request("engage")
    assert not accepted and "/imu/data" in message


def test_engage_refuses_a_policy_that_is_behind():
    rig = Rig()
    rig.tick(150)
    rig.inputs.policy_stamp = rig.now - 0.2
    accepted, message = rig.request("engage")
    assert not accepted and "behind" in message


def test_lockstep_missed_policy_counts_as_stale():
    rig = Rig()
    rig.engaged()
    rig.inputs.policy_missed = True
    decision = rig.tick()
    assert decision.mode == Mode.DAMPING and "lockstep" in rig.core.last_trip


def test_stood_up_after_the_stand_duration():
    rig = Rig()
    rig.tick()
    assert not rig.core.stood_up(rig.now)
    rig.tick(int(rig.core.config.stand_duration / PERIOD) + 1)
    assert rig.core.stood_up(rig.now)


# -- measurements that are no numbers ------------------------------------------------------------
def test_a_nan_joint_state_never_reaches_a_command_and_damps_only_if_it_lasts():
    rig = Rig(DAMP_AT_ONCE)
    before = rig.engaged().command.position.copy()
    good = rig.inputs.joint_position.copy()
    rig.inputs.joint_position = good.copy()
    rig.inputs.joint_position[4] = math.nan
    glitch = rig.tick()
    assert glitch.mode == Mode.ACTIVE and np.all(np.isfinite(glitch.command.position))
    assert any("FR_thigh_joint" in event and "refused" in event for event in glitch.events)
    rig.inputs.joint_position = good.copy()  # one bad sample: nothing else happens
    assert rig.tick().mode == Mode.ACTIVE
    rig.inputs.joint_position[4] = math.inf  # bad samples go on: as stale as no samples
    rig.inputs.joint_velocity = np.zeros(12)
    decisions = [rig.tick() for _ in range(5)]
    assert decisions[-1].mode == Mode.DAMPING and "joint_states_stale" in rig.core.last_trip
    assert "newer ones refused" in rig.core.last_trip
    for decision in decisions:
        assert np.all(np.isfinite(decision.command.position))
    np.testing.assert_allclose(decisions[-1].command.position, good)  # damping at the last valid pose
    assert np.max(np.abs(decisions[-1].command.position - before)) < 0.2
    rig.inputs.joint_position = good.copy()  # valid again: reset works and STANDBY is finite
    assert rig.request("reset")[0]
    assert np.all(np.isfinite(rig.tick(50).command.position))


def test_a_first_joint_state_with_nan_gives_no_command_and_no_engage():
    rig = Rig()
    rig.inputs.joint_position = GO2.default_positions.copy()
    rig.inputs.joint_position[0] = math.nan
    decision = rig.tick(3)
    assert decision.command is None
    assert "waiting for a valid /joint_states" in failed(decision, "joint_states_stale")[0].detail
    accepted, message = rig.request("engage")
    assert not accepted and "stale" in message
    rig.inputs.joint_position = GO2.default_positions.copy()
    assert np.all(np.isfinite(rig.tick().command.position))


def test_a_nan_velocity_or_effort_is_a_missing_interface_and_hides_no_real_violation():
    """ros2_control's joint_state_broadcaster reports an interface a joint lacks as NaN: that
    joint is not checked, every other one is (an argmax over the NaN would pick it and hide them)."""
    rig = Rig()
    rig.engaged()
    rig.inputs.joint_effort = np.full(12, math.nan)  # an arm or leg without effort sensing
    rig.inputs.joint_velocity = np.zeros(12)
    rig.inputs.joint_velocity[0] = math.nan
    assert rig.tick(10).mode == Mode.ACTIVE
    rig.inputs.joint_effort[5] = -80.0
    assert rig.tick().mode == Mode.DAMPING and "torque_limit" in rig.core.last_trip
    rig = Rig()
    rig.engaged()
    rig.inputs.joint_velocity = np.zeros(12)
    rig.inputs.joint_velocity[0], rig.inputs.joint_velocity[5] = math.nan, 1000.0
    assert rig.tick().mode == Mode.DAMPING and "velocity_limit" in rig.core.last_trip


@pytest.mark.parametrize("orientation", [[math.nan, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
def test_an_orientation_that_is_no_unit_quaternion_fails_the_tilt_check(orientation):
    rig = Rig()
    rig.engaged()
    rig.inputs.base_orientation = np.array(orientation)
    assert rig.tick().mode == Mode.DAMPING
    assert "base_tilt" in rig.core.last_trip and "not a unit quaternion" in rig.core.last_trip


def test_a_hold_after_engaging_out_of_teleop_keeps_the_arm_where_it_stopped():
    """Panda (hold_pose: last): engage while teleop is still fresh, then a HOLD trip must keep
    the last targets, not sweep to the stand pose as the end of a teleop session would."""
    profile = load_profile("panda")
    rig = Rig(load_safety_config("panda"), profile)
    rig.engaged()
    assert rig.request("takeover")[0]
    teleop = profile.default_positions + 0.1
    for _ in range(30):
        rig.inputs.teleop_command, rig.inputs.teleop_time = targets(teleop), rig.now + PERIOD
        rig.tick()
    assert rig.request("engage")[0]  # teleop still fresh
    before = rig.tick(40).command.position.copy()
    rig.fresh.discard("policy")
    later = rig.tick(round(1.0 / PERIOD)).command.position
    assert rig.core.mode == Mode.TAKEOVER and "policy_stale" in rig.core.last_trip
    np.testing.assert_allclose(later, before, atol=1e-9)


def test_a_go2_damp_goes_to_the_stand_pose_then_lies_down_then_damps():
    config = load_safety_config("go2")
    rig = Rig()
    rig.engaged()
    sent = rig.tick().command.position.copy()
    assert rig.request("damp")[0]
    settle = round(DAMP_SETTLE_S / PERIOD)
    commands = [rig.tick().command.position.copy() for _ in range(settle + round(config.damp_duration / PERIOD) + 5)]
    assert np.max(np.abs(commands[0] - sent)) < 0.1, "the stop starts from the targets last sent"
    np.testing.assert_allclose(commands[settle - 1], GO2.default_positions, atol=0.02)
    lying = np.array([config.damp_pose[name] for name in GO2.joint_names])
    steps = np.max(np.abs(np.diff(commands[:-5], axis=0)), axis=1)
    assert steps.max() < 0.1, "a smooth descent, not a jump"
    assert np.max(np.abs(commands[-7] - lying)) < 0.02
    # Then only damped (here the rig's joints never moved: a real robot lies in damp_pose by then).
    np.testing.assert_allclose(commands[-1], rig.inputs.joint_position)
