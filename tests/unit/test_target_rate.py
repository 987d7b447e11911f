"""Velocity targets rate-limited to the profile's acceleration and jerk limits (target_rate), as
libfranka's rate limiter does: the write path of the safety issue's case 1, second order."""

import math

import numpy as np
import pytest
import yaml

from sim2real.core.robot_profile import ProfileError, load_profile, profile_path
from sim2real.core.safety_config import SafetyConfigError, load_safety_config, parse_safety_config
from sim2real.core.safety_requirements import check_config_for
from sim2real.core.supervisor import Mode
from tests.unit.test_supervisor import GO2, Rig

PANDA = load_profile("panda")
PANDA_SAFETY = load_safety_config("panda")


def velocities_sent(rig, target, ticks):
    """Velocity targets sent while the policy asks ``target`` on every joint; every tick's checks."""
    rig.policy_velocity = np.full(rig.profile.num_joints, target)
    sent, checks = [], []
    for _ in range(ticks):
        decision = rig.tick()
        assert decision.mode == Mode.ACTIVE, rig.core.last_trip  # a clamp, never a trip
        sent.append(decision.command.velocity.copy())
        checks.append({c.name: c for c in decision.checks})
    return np.array(sent), checks


def test_the_panda_profile_carries_frankas_joint_acceleration_and_jerk_limits():
    np.testing.assert_allclose(PANDA.acceleration_limits, [15, 7.5, 10, 12.5, 15, 20, 20])
    np.testing.assert_allclose(PANDA.jerk_limits, [7500, 3750, 5000, 6250, 7500, 10000, 10000])
    assert np.all(np.isinf(GO2.acceleration_limits)) and np.all(np.isinf(GO2.jerk_limits))


def test_a_velocity_step_ramps_at_the_acceleration_limit_and_stops_on_the_target():
    rig = Rig(PANDA_SAFETY, PANDA)
    rig.engaged()
    target = 2.0  # rad/s, under every joint's velocity limit
    sent, checks = velocities_sent(rig, target, 60)
    steps = np.diff(np.vstack([np.zeros(7), sent]), axis=0)
    assert np.all(np.abs(steps) <= PANDA.acceleration_limits * rig.period + 1e-9)
    assert not checks[0]["target_rate"].ok and "panda_joint2" in checks[0]["target_rate"].detail
    assert np.all(sent <= target + 1e-9), "the limited target overshot"
    np.testing.assert_allclose(sent[-1], target)  # 2 rad/s at 7.5 rad/s^2: 0.27 s, 14 ticks
    assert checks[-1]["target_rate"].ok


def test_velocity_targets_ticked_closer_than_a_period_change_by_their_share_of_a_period():
    rig = Rig(PANDA_SAFETY, PANDA)
    rig.engaged()
    rig.policy_velocity = np.full(7, 2.0)
    first = rig.tick(every=0.1 * rig.period).command.velocity
    second = rig.tick(every=0.1 * rig.period).command.velocity
    limit = PANDA.acceleration_limits * rig.period
    assert np.all(np.abs(first) <= 0.1 * limit + 1e-9) and np.all(np.abs(second - first) <= 0.1 * limit + 1e-9)
    assert np.all(second > first)  # slower, not stopped


def test_at_1_khz_the_acceleration_of_the_velocity_targets_changes_within_the_jerk_limit():
    rig = Rig(PANDA_SAFETY, PANDA, period=0.001)
    rig.engaged()
    sent, _ = velocities_sent(rig, 1.0, 400)
    acceleration = np.diff(np.vstack([np.zeros((2, 7)), sent]), axis=0) / rig.period
    jerk = np.diff(acceleration, axis=0) / rig.period
    assert np.all(np.abs(jerk) <= PANDA.jerk_limits * (1 + 1e-6))
    assert np.all(np.abs(acceleration) <= PANDA.acceleration_limits * (1 + 1e-6))
    assert np.abs(jerk).max() > 0.5 * PANDA.jerk_limits.min()  # the jerk limit was what bound
    np.testing.assert_allclose(sent[-1], 1.0)
    # Past the target by at most the discrete steps' rounding, j dt^2 / 8 (under 0.001 rad/s here).
    assert np.all(sent - 1.0 <= PANDA.jerk_limits * rig.period**2 / 8 + 1e-9)


def test_back_to_zero_is_limited_too():
    rig = Rig(PANDA_SAFETY, PANDA)
    rig.engaged()
    velocities_sent(rig, 1.0, 30)
    sent, _ = velocities_sent(rig, 0.0, 30)
    assert abs(sent[0][1] - (1.0 - 7.5 * rig.period)) < 1e-9  # joint 2: one tick at -7.5 rad/s^2
    np.testing.assert_allclose(sent[-1], 0.0, atol=1e-12)


def test_a_profile_without_the_limits_passes_velocity_targets_unchanged():
    rig = Rig()  # the Go2: Unitree publishes no acceleration limits
    rig.engaged()
    sent, checks = velocities_sent(rig, 5.0, 3)
    np.testing.assert_allclose(sent, 5.0)
    assert not any("target_rate" in c for c in checks)  # nothing to limit: not even reported


@pytest.mark.parametrize("field, value", [("acceleration", -1.0), ("jerk", math.inf), ("acceleration", "fast")])
def test_a_bad_acceleration_or_jerk_limit_in_a_profile_is_refused_with_its_field(tmp_path, field, value):
    data = yaml.safe_load(profile_path("panda").read_text())
    data["joints"][1][field] = value
    data["urdf"] = str(PANDA.urdf)
    path = tmp_path / "panda.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=rf"joints\[1\] \(panda_joint2\)\.{field}"):
        load_profile(path)


def test_hardware_needs_target_rate_where_the_profile_has_the_limits():
    data = yaml.safe_load(PANDA_SAFETY.source.read_text())
    del data["checks"]["target_rate"]
    config = parse_safety_config(data)
    with pytest.raises(SafetyConfigError, match="checks.target_rate"):
        check_config_for(config, PANDA, simulated=False)
    go2 = yaml.safe_load(load_safety_config("go2").source.read_text())
    del go2["checks"]["target_rate"]
    assert check_config_for(parse_safety_config(go2), GO2, simulated=False) == []


def test_a_zero_rate_factor_is_refused_at_load():
    data = yaml.safe_load(PANDA_SAFETY.source.read_text())
    data["checks"]["target_rate"]["factor"] = 0
    with pytest.raises(SafetyConfigError, match="checks.target_rate.factor: must be > 0"):
        parse_safety_config(data)


def test_after_a_damp_and_a_reset_the_ramp_starts_from_zero_again():
    rig = Rig(PANDA_SAFETY, PANDA)
    rig.engaged()
    velocities_sent(rig, 2.0, 30)
    assert rig.request("damp")[0]
    assert np.all(rig.tick(3).command.velocity == 0.0)
    assert rig.request("reset")[0]
    rig.policy_velocity = np.zeros(7)
    rig.engaged()
    sent, _ = velocities_sent(rig, 2.0, 2)
    np.testing.assert_allclose(sent[0], PANDA.acceleration_limits * rig.period)  # one tick from rest


def test_a_partial_profile_limits_only_the_joints_it_names(tmp_path):
    data = yaml.safe_load(profile_path("panda").read_text())
    for joint in data["joints"][3:]:
        del joint["acceleration"], joint["jerk"]
    data["urdf"] = str(PANDA.urdf)
    path = tmp_path / "panda.yaml"
    path.write_text(yaml.safe_dump(data))
    partial = load_profile(path)
    assert np.all(np.isinf(partial.acceleration_limits[3:]))
    rig = Rig(PANDA_SAFETY, partial)
    rig.engaged()
    sent, _ = velocities_sent(rig, 1.0, 1)
    assert np.all(np.isfinite(sent))
    np.testing.assert_allclose(sent[0][3:], 1.0)
    np.testing.assert_allclose(sent[0][:3], PANDA.acceleration_limits[:3] * rig.period)
