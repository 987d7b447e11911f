"""The policy runtime without ROS: inputs -> signals, validation, dry run, swap with cross-fade."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sim2real.core.kinematics import Kinematics
from sim2real.core.observation import ObservationSpec
from sim2real.core.paths import share_dir
from sim2real.core.policy_slot import PolicyRefused, PolicySlot
from sim2real.core.policy_tick import STALE, PolicyRuntime
from sim2real.core.robot_inputs import RobotInputs, missing_inputs, unbuildable_terms
from sim2real.core.robot_profile import load_profile
from tests.policy_models import metadata, write_clock_policy, write_policy, write_target_policy

GO2 = load_profile("go2")
PANDA = load_profile("panda")
PERIOD_NS = round(GO2.policy_period * 1e9)
LEVEL = (0.0, 0.0, 0.0, 1.0)


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    """Policy files shared by the tests (torch export is the slow part)."""
    root = tmp_path_factory.mktemp("policies")
    d = GO2.default_positions
    files = {
        "stand": write_target_policy(root / "stand.onnx", GO2, d),
        "lean": write_target_policy(root / "lean.onnx", GO2, d + 0.2),
        "far": write_target_policy(root / "far.onnx", GO2, d + 0.8),
        "nan": write_policy(root / "nan.onnx", metadata(GO2), math.nan),
        "huge": write_policy(root / "huge.onnx", metadata(GO2), 1e6),
        "unclipped_huge": write_policy(root / "unclipped_huge.onnx", metadata(GO2, action_clip=None), 500.0),
    }
    (root / "corrupt.onnx").write_bytes(b"\x08\x07not an onnx model at all" * 20)
    files["corrupt"] = root / "corrupt.onnx"
    return root, files


def feed(inputs: RobotInputs, tick: int, q=None, imu=True) -> int:
    stamp = tick * PERIOD_NS
    q = GO2.default_positions if q is None else q
    inputs.set_joint_states(GO2.joint_names, q, np.zeros(GO2.num_joints), stamp)
    if imu:
        inputs.set_imu(LEVEL, (0.0, 0.0, 0.0))
    return stamp


def running_slot(root, path, ticks=60, **settings):
    slot = PolicySlot(GO2, [root], **settings)
    slot.start(path)
    inputs = RobotInputs(GO2)
    runtime = PolicyRuntime(slot, inputs)
    for tick in range(ticks):
        stamp = feed(inputs, tick)
        assert runtime.tick(stamp * 1e-9, stamp).targets is not None
    return slot, inputs, runtime


# -- robot inputs ----------------------------------------------------------------------------------
def test_joint_states_are_matched_by_name_into_profile_order():
    inputs = RobotInputs(GO2)
    order = list(reversed(range(GO2.num_joints)))
    names = [GO2.joint_names[i] for i in order] + ["gripper"]
    q = np.arange(GO2.num_joints, dtype=float)
    inputs.set_joint_states(names, [*q[order], 9.0], [*(-q[order]), 0.0], 123)
    signals = inputs.signals(0.0)
    np.testing.assert_array_equal(signals.joint_position, q)
    np.testing.assert_array_equal(signals.joint_velocity, -q)
    assert inputs.joint_states_stamp_ns == 123


def test_joint_states_without_a_profile_joint_are_refused_and_the_last_state_kept():
    inputs = RobotInputs(GO2)
    feed(inputs, 0)
    with pytest.raises(ValueError, match="lack joints \\['FL_hip_joint'\\]"):
        inputs.set_joint_states(GO2.joint_names[1:], np.zeros(11), np.zeros(11), 5)
    with pytest.raises(ValueError, match="12 names, 3 positions"):
        inputs.set_joint_states(GO2.joint_names, np.zeros(3), (), 5)
    np.testing.assert_array_equal(inputs.signals(0.0).joint_position, GO2.default_positions)
    # A refused message in another name order leaves the kept state in its own order.
    with pytest.raises(ValueError, match="12 names, 11 positions"):
        inputs.set_joint_states(list(reversed(GO2.joint_names)), np.zeros(11), (), 6)
    np.testing.assert_array_equal(inputs.signals(0.0).joint_position, GO2.default_positions)


def test_missing_inputs_name_the_term_and_the_topic():
    spec = ObservationSpec.from_config(
        [{"name": "base_lin_vel"}, {"name": "projected_gravity"}, {"name": "joint_vel"}, {"name": "last_action"}],
        GO2.num_joints,
    )
    inputs = RobotInputs(GO2)
    assert inputs.missing(spec, 0.0) == [
        "policy needs base_lin_vel: no /state_estimate received",
        "policy needs projected_gravity: no /imu/data received",
        "policy needs joint_vel: no /joint_states velocity received",
    ]
    inputs.set_joint_states(GO2.joint_names, GO2.default_positions, (), 0)  # a driver without velocities
    inputs.set_imu(LEVEL, (0.0, 0.0, 0.0))
    assert inputs.missing(spec, 0.0) == [
        "policy needs base_lin_vel: no /state_estimate received",
        "policy needs joint_vel: no /joint_states velocity received",
    ]
    feed(inputs, 1)
    inputs.set_state_estimate((0.5, 0.0, 0.0))
    assert inputs.missing(spec, 0.0) == []
    np.testing.assert_array_equal(inputs.signals(0.0).base_linear_velocity, (0.5, 0.0, 0.0))


def test_velocity_command_is_zero_until_cmd_vel_and_again_when_it_goes_silent():
    inputs = RobotInputs(GO2, cmd_vel_timeout=0.5)
    np.testing.assert_array_equal(inputs.signals(0.0).velocity_command, (0.0, 0.0, 0.0))
    inputs.set_velocity_command(0.6, -0.1, 0.3, now=10.0)
    np.testing.assert_array_equal(inputs.signals(10.4).velocity_command, (0.6, -0.1, 0.3))
    np.testing.assert_array_equal(inputs.signals(10.6).velocity_command, (0.0, 0.0, 0.0))


def test_goal_only_in_the_base_frame_and_the_end_effector_from_forward_kinematics():
    inputs = RobotInputs(PANDA)
    spec = ObservationSpec.from_config([{"name": "goal_offset"}], PANDA.num_joints)
    inputs.set_joint_states(PANDA.joint_names, PANDA.default_positions, np.zeros(7), 0)
    assert inputs.missing(spec, 0.0) == ["policy needs goal_offset: no /goal_pose received"]
    with pytest.raises(ValueError, match="frame 'world' ignored"):
        inputs.set_goal((0.5, 0.0, 0.4), "world")
    inputs.set_goal((0.5, 0.0, 0.4), PANDA.base_link)
    signals = inputs.signals(0.0)
    ee = Kinematics(PANDA).end_effector_position(PANDA.default_positions)
    np.testing.assert_allclose(signals.end_effector_position, ee)
    np.testing.assert_allclose(spec.observe(signals), np.array([0.5, 0.0, 0.4]) - ee, atol=1e-6)


def test_terms_a_robot_can_never_supply_are_named():
    arm_on_go2 = ObservationSpec.from_config([{"name": "ee_position"}], GO2.num_joints)
    assert unbuildable_terms(arm_on_go2, GO2) == [
        "observation term 'ee_position' cannot be built: robot 'go2' has no end_effector_link for forward kinematics"
    ]
    legged_on_panda = ObservationSpec.from_config([{"name": "projected_gravity"}, {"name": "joint_vel"}], 12)
    problems = unbuildable_terms(legged_on_panda, PANDA)
    assert "'projected_gravity' cannot be built: robot 'panda' has a fixed base" in problems[0]
    assert problems[1] == "observation term 'joint_vel' has 12 values, robot 'panda' has 7 joints"


# -- validation --------------------------------------------------------------------------------------
def test_paths_outside_the_policy_directories_are_refused_symlinks_resolved(policies, tmp_path):
    root, files = policies
    slot = PolicySlot(GO2, [root])
    outside = tmp_path / "elsewhere.onnx"
    outside.write_bytes(files["stand"].read_bytes())
    with pytest.raises(PolicyRefused, match="is outside the policy directories") as info:
        slot.validate(outside)
    assert str(root) in info.value.reason
    link = root / "link_to_elsewhere.onnx"
    link.symlink_to(outside)
    with pytest.raises(PolicyRefused, match=f"resolves to {outside}"):
        slot.validate(link)
    with pytest.raises(PolicyRefused, match="outside"):
        slot.validate(root / ".." / outside.parent.name / outside.name)
    with pytest.raises(PolicyRefused, match="empty policy path"):
        slot.validate("  ")
    assert slot.validate(files["stand"]).sha256


def test_corrupt_and_mislabelled_files_are_refused(policies):
    root, files = policies
    slot = PolicySlot(GO2, [root])
    with pytest.raises(PolicyRefused, match="not a valid ONNX model"):
        slot.validate(files["corrupt"])
    with pytest.raises(PolicyRefused, match="cannot read the file"):
        slot.validate(root / "missing.onnx")
    wrong_input = write_policy(root / "wrong_input.onnx", metadata(GO2), 0.0, input_size=40)
    with pytest.raises(PolicyRefused, match=r"has shape \[.*40\], metadata says \[batch, 47\]"):
        slot.validate(wrong_input)


def test_metadata_differences_from_the_profile_are_all_listed(policies):
    root, _ = policies
    kp, kd = GO2.kp.copy(), GO2.kd.copy()
    kp[1], kd[11] = 25.0, 0.8
    path = write_policy(
        root / "other_robot.onnx", metadata(GO2, robot="go2_clone", control_period=0.01, kp=kp, kd=kd), 0.0
    )
    with pytest.raises(PolicyRefused) as info:
        PolicySlot(GO2, [root]).validate(path)
    reason = info.value.reason
    assert "does not match robot profile 'go2'" in reason
    assert "robot: trained for 'go2_clone', running 'go2'" in reason
    assert "control period: policy 0.01 s, robot 0.02 s" in reason
    assert "kp (policy vs robot): FL_thigh_joint 25 vs 20" in reason
    assert "kd (policy vs robot): RR_calf_joint 0.8 vs 0.5" in reason


def test_wrong_joints_and_joint_order_are_refused(policies):
    root, _ = policies
    swapped = list(GO2.joint_names)
    swapped[0], swapped[3] = swapped[3], swapped[0]
    reordered = write_policy(root / "reordered.onnx", metadata(GO2, joint_names=tuple(swapped)), 0.0)
    with pytest.raises(PolicyRefused, match="joint order: index 0 is 'FR_hip_joint' in the policy, 'FL_hip_joint'"):
        PolicySlot(GO2, [root]).validate(reordered)
    renamed = list(GO2.joint_names)
    renamed[2] = "FL_knee_joint"
    other = write_policy(root / "renamed.onnx", metadata(GO2, joint_names=tuple(renamed)), 0.0)
    with pytest.raises(PolicyRefused) as info:
        PolicySlot(GO2, [root]).validate(other)
    assert "the policy has ['FL_knee_joint'], which robot 'go2' lacks" in info.value.reason
    assert "robot 'go2' has ['FL_calf_joint'], which the policy lacks" in info.value.reason


def test_start_refuses_a_mismatched_model_as_a_configuration_error(policies):
    root, _ = policies
    panda_policy = write_policy(root / "panda.onnx", metadata(PANDA), 0.0)
    with pytest.raises(ValueError) as info:  # PolicyRefused: the node exits with status 2
        PolicySlot(GO2, [root]).start(panda_policy)
    for words in (
        "robot: trained for 'panda'",
        "joints: the policy has ['panda_joint1'",
        "robot 'go2' has ['FL_hip_joint'",
    ):
        assert words in str(info.value)


# -- dry run -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, words",
    [
        ("nan", "dry run: non-finite actions for ['FL_hip_joint'"),
        ("huge", "dry run: action 1e+06 on FL_hip_joint exceeds its action_clip 100"),
        ("unclipped_huge", "exceeds the action bound (parameter action_bound) 100"),
        ("far", "dry run: joint targets would jump 0.800 rad on FL_hip_joint (max_jump 0.5 rad)"),
    ],
)
def test_dry_run_refuses_unsafe_outputs_and_the_running_policy_is_untouched(policies, name, words):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["stand"])
    before = slot.active
    event = slot.propose(files[name])
    assert not event.accepted and words in event.reason, event.reason
    assert slot.active is before and slot.refused == 1 and slot.swaps == 0
    stamp = feed(inputs, 60)
    np.testing.assert_allclose(runtime.tick(stamp * 1e-9, stamp).targets, GO2.default_positions, atol=1e-6)


def test_a_running_target_that_is_not_finite_does_not_switch_the_jump_check_off(policies):
    """NaN - x compared with max_jump is False: a NaN in the running targets must not let every
    candidate through, however far it jumps on the other joints."""
    root, files = policies
    slot, _, _ = running_slot(root, files["stand"])
    slot._targets[0] = np.nan  # the running policy failed on one joint; the supervisor held it
    far = slot.propose(files["far"])
    assert not far.accepted and "jump 0.800 rad on FL_thigh_joint" in far.reason, far.reason
    lean = slot.propose(files["lean"])
    assert lean.accepted and lean.dry_run.jump == pytest.approx(0.2, abs=1e-6)


def test_non_finite_velocity_commands_and_goals_are_refused_and_the_previous_ones_kept():
    go2 = RobotInputs(GO2, cmd_vel_timeout=0.5)
    go2.set_velocity_command(0.5, 0.0, 0.0, now=1.0)
    for bad in ((math.nan, 0.0, 0.0), (0.0, math.inf, 0.0), (0.0, 0.0, -math.inf)):
        with pytest.raises(ValueError, match="non-finite"):
            go2.set_velocity_command(*bad, now=1.1)
    np.testing.assert_array_equal(go2.signals(1.4).velocity_command, (0.5, 0.0, 0.0))
    np.testing.assert_array_equal(go2.signals(1.6).velocity_command, (0.0, 0.0, 0.0))  # it timed out as usual
    panda = RobotInputs(PANDA)
    panda.set_goal((0.5, 0.0, 0.4))
    with pytest.raises(ValueError, match="not three finite numbers"):
        panda.set_goal((0.5, math.nan, 0.4))
    np.testing.assert_array_equal(panda.signals(0.0).goal_position, (0.5, 0.0, 0.4))


def test_dry_run_refuses_a_candidate_whose_inputs_have_not_arrived(policies):
    root, files = policies
    entries = [{"name": "base_lin_vel", "scale": 2.0}, {"name": "projected_gravity"}, {"name": "joint_pos_rel"}]
    path = write_policy(root / "needs_estimate.onnx", metadata(GO2, observation=entries), 0.0)
    slot, _, _ = running_slot(root, files["stand"])
    event = slot.propose(path)
    assert event.reason == "policy needs base_lin_vel: no /state_estimate received"


def test_a_swap_before_the_first_tick_skips_the_dry_run(policies):
    root, files = policies
    slot = PolicySlot(GO2, [root])
    slot.start(files["stand"])
    event = slot.propose(files["far"])  # nothing commanded yet: no jump to protect against
    assert event.accepted and event.dry_run.ticks == 0 and "skipped" in event.dry_run.describe()


# -- the swap ------------------------------------------------------------------------------------------
def test_swap_at_a_tick_boundary_cross_fades_with_bounded_steps(policies):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["stand"], crossfade=0.2)
    event = slot.propose(files["lean"])
    assert event.accepted, event.reason
    assert event.dry_run.ticks == 50 and event.dry_run.jump == pytest.approx(0.2, abs=1e-6)
    assert event.sha256_old == slot.active.policy.sha256 != event.sha256_new
    assert slot.active.policy.path == files["stand"]  # staged, not running: the swap waits for a tick
    sent = []
    for tick in range(60, 75):
        stamp = feed(inputs, tick)
        sent.append(runtime.tick(stamp * 1e-9, stamp).targets)
    steps = np.max(np.abs(np.diff([GO2.default_positions, *sent], axis=0)), axis=1)
    assert steps[0] == pytest.approx(0.02, abs=1e-6)  # the very next tick already moves 1/10 of the way
    assert np.max(steps) <= 0.2 / 10 + 1e-6
    np.testing.assert_allclose(sent[9], GO2.default_positions + 0.2, atol=1e-6)
    np.testing.assert_allclose(sent[-1], GO2.default_positions + 0.2, atol=1e-6)
    assert slot.active.policy.sha256 == event.sha256_new and len(slot.running) == 1
    assert event.completed and event.fade_ticks == 10
    assert event.swap_gap == pytest.approx(0.2, abs=1e-6) and event.largest_step == pytest.approx(0.02, abs=1e-6)
    assert "cross-faded over 10 ticks, largest step 0.020 rad" in event.describe()


def test_during_the_fade_both_policies_run_on_their_own_last_action(policies):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["stand"])
    assert slot.propose(files["lean"]).accepted
    stamp = feed(inputs, 60)
    runtime.tick(stamp * 1e-9, stamp)
    outgoing, incoming = slot.running
    np.testing.assert_allclose(outgoing.last_action, 0.0, atol=1e-6)
    np.testing.assert_allclose(incoming.last_action, 0.2 / 0.25, atol=1e-6)
    assert runtime.inference.summary_ms("x")  # both inferences timed


def test_no_crossfade_swaps_whole_on_the_next_tick_and_a_second_swap_waits_for_the_fade(policies):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["stand"], crossfade=0.0)
    swap = slot.propose(files["lean"])
    assert swap.accepted
    busy = slot.propose(files["stand"])
    assert not busy.accepted and "is staged and not yet running" in busy.reason
    stamp = feed(inputs, 60)
    np.testing.assert_allclose(runtime.tick(stamp * 1e-9, stamp).targets, GO2.default_positions + 0.2, atol=1e-6)
    # what the node logs and reports of the swap; before a step was measured (a swap staged before the
    # slot's first tick) it says so
    assert "gap 0.200 rad" in swap.describe() and "largest step 0.200 rad" in swap.describe()
    assert "no step yet" in dataclasses.replace(swap, largest_step=None).describe()
    assert slot.propose(files["stand"]).accepted


def test_a_refused_swap_during_a_fade_names_the_fade(policies):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["stand"], crossfade=0.2)
    assert slot.propose(files["lean"]).accepted
    stamp = feed(inputs, 60)
    runtime.tick(stamp * 1e-9, stamp)
    event = slot.propose(files["stand"])
    assert "is still cross-fading" in event.reason


# -- the tick --------------------------------------------------------------------------------------------
def test_runtime_waits_with_the_reason_then_ticks_and_times_itself(policies):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["stand"], ticks=0)
    feed(inputs, 0, imu=False)
    tick = runtime.tick(0.0, 0)
    assert tick.targets is None and tick.waiting.startswith("policy needs base_ang_vel: no /imu/data received")
    stamp = feed(inputs, 3)
    assert runtime.tick(stamp * 1e-9, stamp).targets is not None
    assert runtime.waiting == ""
    stamp = feed(inputs, 4)
    assert runtime.tick(stamp * 1e-9, stamp, age=GO2.policy_period * 2).waiting == STALE
    stamp = feed(inputs, 6)
    runtime.tick(stamp * 1e-9, stamp)
    runtime.published(1.0, 1.0005)
    summary = runtime.summary()
    assert summary["ticks"] == 2 and summary["ticks_skipped"] == 2 and summary["stale_observations"] == 1
    assert summary["tick_latency_p50_ms"] == pytest.approx(0.5)
    assert summary["inference_max_ms"] > 0


def test_settings_are_checked():
    with pytest.raises(ValueError, match="max_jump must be a positive number"):
        PolicySlot(GO2, [], max_jump=0.0)
    with pytest.raises(ValueError, match="crossfade must be >= 0"):
        PolicySlot(GO2, [], crossfade=-1.0)


def test_missing_inputs_ignore_what_each_policy_supplies_itself():
    spec = metadata(GO2).observation_spec
    signals = RobotInputs(GO2).signals(0.0)
    assert all("last_action" not in reason for reason in missing_inputs(spec, signals))


def test_a_gait_clock_policy_runs_its_own_clock_from_phase_zero(policies):
    root, files = policies
    slot, _, _ = running_slot(root, files["stand"], ticks=7)
    running = slot.running[0]
    assert "gait_clock" in running.spec.names
    # 2 Hz at 50 Hz ticks: 0.04 cycles a tick, 7 ticks so far.
    assert running.clock.phase == pytest.approx((7 * 2.0 * GO2.policy_period) % 1.0)


def test_a_gait_policy_swapped_onto_a_running_gait_takes_up_its_phase(policies):
    """A trot swapped onto itself mid-stride: the candidate's dry run sees the running gait's
    phases and it goes on in step (with its own clock from 0, its targets would be 0.61 rad away: refused)."""
    root, _ = policies
    path = write_clock_policy(root / "clock.onnx", GO2, amplitude=0.6)
    slot, inputs, runtime = running_slot(root, path, ticks=60)  # 2.4 cycles: phase 0.4
    event = slot.propose(path)
    assert event.accepted, event.reason
    assert event.dry_run.jump < 1e-5
    phase_before = slot.running[0].gait_phase
    stamp = feed(inputs, 60)
    runtime.tick(stamp * 1e-9, stamp)
    assert event.swap_gap < 1e-5
    assert slot.running[1].gait_phase == pytest.approx(slot.running[0].gait_phase)
    assert slot.running[0].gait_phase == pytest.approx((phase_before + 2.0 * GO2.policy_period) % 1.0)


def test_a_gait_clock_policy_without_a_gait_frequency_is_refused(policies, tmp_path):
    root, _ = policies
    path = write_policy(root / "no_gait.onnx", metadata(GO2, task_config={}), 0.0)
    slot = PolicySlot(GO2, [root])
    with pytest.raises(PolicyRefused, match="no gait.frequency"):
        slot.start(path)


def test_a_nan_input_is_waited_out_and_never_poisons_the_shipped_policy():
    """A NaN gyro sample is refused at the edge; a NaN joint position makes the tick wait,
    naming the input; the next clean tick is finite (a NaN fed back as last_action would make
    every later tick NaN)."""
    policy = share_dir() / "policies" / "go2_walk.onnx"
    slot, inputs, runtime = running_slot(policy.parent, policy, ticks=0)
    for tick in range(5):
        stamp = feed(inputs, tick)
        assert np.all(np.isfinite(runtime.tick(stamp * 1e-9, stamp).targets))
    with pytest.raises(ValueError, match="angular velocity"):
        inputs.set_imu(LEVEL, (math.nan, 0.0, 0.0))
    broken = GO2.default_positions.copy()
    broken[4] = math.nan
    stamp = feed(inputs, 5, q=broken)
    waiting = runtime.tick(stamp * 1e-9, stamp)
    assert waiting.targets is None and "/joint_states has NaN or infinite values" in waiting.waiting
    for tick in range(6, 10):
        stamp = feed(inputs, tick)
        assert np.all(np.isfinite(runtime.tick(stamp * 1e-9, stamp).targets))


def test_a_non_finite_action_is_not_fed_back_as_last_action(policies):
    root, files = policies
    slot, inputs, runtime = running_slot(root, files["nan"], ticks=0)
    stamp = feed(inputs, 0)
    assert not np.all(np.isfinite(runtime.tick(stamp * 1e-9, stamp).targets))  # the supervisor holds on it
    np.testing.assert_array_equal(slot.running[0].last_action, np.zeros(GO2.num_joints))


def test_a_state_estimate_that_stopped_coming_counts_as_missing():
    """Fault matrix case 9: a killed state_estimator's last velocity must not stay in the observation."""
    inputs = RobotInputs(GO2)
    inputs.set_state_estimate((0.5, 0.0, 0.0), now=1.0)
    assert inputs.signals(1.2).base_linear_velocity is not None
    assert inputs.signals(1.3).base_linear_velocity is None
