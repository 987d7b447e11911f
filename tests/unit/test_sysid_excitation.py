"""Excitation trajectories: inside the profile's limits, starting and ending at rest at the default pose."""

import numpy as np
import pytest

from sim2real.core.robot_profile import load_profile
from sim2real.sysid.excitation import (
    KINDS,
    STANDING_AMPLITUDE,
    Excitation,
    ExcitationError,
    excitation_defaults,
    leg_joints,
    make_excitation,
)

DT = 0.001


@pytest.mark.parametrize("robot", ["panda", "go2"])
@pytest.mark.parametrize("kind", KINDS)
def test_excitation_stays_inside_limits_and_starts_and_ends_at_rest(robot, kind):
    profile = load_profile(robot)
    margin, fraction = 0.1, 0.5
    excitation = make_excitation(profile, kind, duration=12.0, ramp=2.0, margin=margin, velocity_fraction=fraction)
    t = np.arange(0.0, excitation.duration + DT / 2, DT)
    q, dq = excitation.sample(t)
    assert np.all(q >= profile.lower_limits + margin - 1e-9)
    assert np.all(q <= profile.upper_limits - margin + 1e-9)
    assert np.all(np.abs(dq) <= fraction * profile.velocity_limits + 1e-9)
    np.testing.assert_allclose(q[0], profile.default_positions, atol=1e-12)
    np.testing.assert_allclose(q[-1], profile.default_positions, atol=1e-9)
    assert np.abs(dq[0]).max() < 1e-9 and np.abs(dq[-1]).max() < 1e-3
    # The joints really move (a trajectory that stands still identifies nothing).
    assert np.all(np.ptp(q, axis=0) > 0.05)
    # The velocity is the derivative of the position.
    np.testing.assert_allclose(np.gradient(q, DT, axis=0)[1:-1], dq[1:-1], atol=2e-3)


@pytest.mark.parametrize("robot", ["panda", "go2"])
@pytest.mark.parametrize("kind", KINDS)
def test_each_joint_moves_exactly_the_amplitude_asked(robot, kind):
    """A summed shape (Fourier, multisine) is normalised to a peak of 1, so --amplitude 0.1
    moves a joint 0.1 rad from the default pose, not 0.41 (a Fourier sum's raw peak)."""
    profile = load_profile(robot)
    excitation = make_excitation(profile, kind, duration=12.0, ramp=2.0, amplitude=0.1)
    t = np.arange(0.0, excitation.duration + DT / 2, DT)
    q, _ = excitation.sample(t)
    excursion = np.abs(q - profile.default_positions).max(0)
    # The limits lower no joint's amplitude at this size: each moves exactly what was asked.
    np.testing.assert_allclose(excitation.amplitude, 0.1)
    np.testing.assert_allclose(excursion, 0.1, rtol=1e-6)


def test_an_amplitude_the_limits_lower_is_reported_as_moved():
    """At 0.25 rad and 1 Hz the Panda's speed limit (half of 2.175 rad/s) binds: the amplitude
    is lowered, and what the excitation reports is what the joints do."""
    profile = load_profile("panda")
    excitation = make_excitation(profile, "chirp", duration=12.0, ramp=2.0, amplitude=0.25)
    q, _ = excitation.sample(np.arange(0.0, excitation.duration + DT / 2, DT))
    excursion = np.abs(q - profile.default_positions).max(0)
    assert excitation.amplitude.min() < 0.25
    np.testing.assert_allclose(excursion, excitation.amplitude, rtol=1e-6)


def test_a_description_without_a_gain_rebuilds_the_unscaled_shape():
    """Bags written before shapes were normalised carry no gain: they replay as recorded."""
    profile = load_profile("panda")
    excitation = make_excitation(profile, "multisine", duration=10.0)
    old = excitation.describe()
    gain = np.asarray(old["params"].pop("gain"))
    t = np.linspace(0, 10, 301)
    scaled = excitation.sample(t)[0] - excitation.default
    unscaled = Excitation.from_description(old).sample(t)[0] - excitation.default
    np.testing.assert_allclose(unscaled * gain * 6, scaled, atol=1e-12)


def test_description_rebuilds_the_same_trajectory():
    profile = load_profile("panda")
    excitation = make_excitation(profile, "fourier", duration=10.0, seed=3)
    copy = Excitation.from_description(excitation.describe())
    t = np.linspace(0, 10, 301)
    np.testing.assert_array_equal(copy.sample(t)[0], excitation.sample(t)[0])
    assert excitation.condition_number is not None and excitation.condition_number > 1


def test_only_chosen_joints_move():
    profile = load_profile("panda")
    excitation = make_excitation(profile, "multisine", joints=["panda_joint2", "panda_joint4"], duration=8.0)
    q, _ = excitation.sample(np.linspace(0, 8, 801))
    moving = np.ptp(q, axis=0) > 1e-9
    assert [n for n, m in zip(profile.joint_names, moving) if m] == ["panda_joint2", "panda_joint4"]


def test_bad_arguments_name_the_problem():
    profile = load_profile("panda")
    with pytest.raises(ExcitationError, match="not joints of robot"):
        make_excitation(profile, joints=["elbow"])
    with pytest.raises(ExcitationError, match="unknown"):
        make_excitation(profile, kind="square")
    with pytest.raises(ExcitationError, match="twice the ramp"):
        make_excitation(profile, duration=3.0, ramp=2.0)
    for name, value in (
        ("amplitude", float("nan")),
        ("f_max", float("inf")),
        ("amplitude", 0.0),
        ("duration", float("inf")),
    ):  # NaN targets, or a message that blames something else
        with pytest.raises(ExcitationError, match=f"{name} must be a finite number > 0"):
            make_excitation(profile, **{name: value})


@pytest.mark.parametrize("legs", [1, 2])
def test_a_standing_quadruped_moves_its_legs_in_turn(legs):
    """legs 1: each leg alone in its quarter of the time; legs 2: the diagonal pairs in halves.
    The other legs hold the stand pose; each moving joint still moves exactly the amplitude."""
    go2 = load_profile("go2")
    excitation = make_excitation(go2, "multisine", duration=8.0, amplitude=0.1, legs=legs)
    t = np.arange(0.0, 8.0 + DT / 2, DT)
    q, dq = excitation.sample(t)
    moving = np.abs(q - go2.default_positions) > 1e-9
    chains = leg_joints(go2)
    assert [c[0] for c in chains] == ["FL_hip_joint", "FR_hip_joint", "RL_hip_joint", "RR_hip_joint"]
    groups = chains if legs == 1 else [chains[0] + chains[3], chains[1] + chains[2]]
    window = 8.0 / len(groups)
    for k, group in enumerate(groups):
        inside = (t > k * window) & (t < (k + 1) * window)
        columns = [go2.joint_names.index(j) for j in group]
        others = [i for i in range(go2.num_joints) if i not in columns]
        assert moving[inside][:, columns].any(axis=0).all()
        assert not moving[inside][:, others].any()
    np.testing.assert_allclose(np.abs(q - go2.default_positions).max(0), 0.1, rtol=1e-6)
    np.testing.assert_allclose(np.gradient(q, DT, axis=0)[1:-1], dq[1:-1], atol=2e-3)
    copy = Excitation.from_description(excitation.describe())
    np.testing.assert_array_equal(copy.sample(t)[0], q)


def test_legs_in_turn_need_a_robot_with_four_legs():
    with pytest.raises(ExcitationError, match="has no four legs"):
        make_excitation(load_profile("panda"), "chirp", legs=1)
    with pytest.raises(ExcitationError, match="legs must be 0"):
        make_excitation(load_profile("go2"), "chirp", legs=3)


def test_the_defaults_move_a_standing_quadruped_gently_one_leg_at_a_time():
    assert excitation_defaults(load_profile("go2"), suspended=False) == (STANDING_AMPLITUDE, 1)
    assert excitation_defaults(load_profile("go2"), suspended=True) == (0.6, 0)
    assert excitation_defaults(load_profile("panda"), suspended=False) == (0.6, 0)


def test_a_chirp_leg_by_leg_sweeps_the_whole_band_in_each_window():
    """Each leg sweeps f_min -> f_max in its own window: the first leg does not get only the
    low quarter of the band and the last one the high quarter."""
    go2 = load_profile("go2")
    excitation = make_excitation(go2, "chirp", duration=40.0, amplitude=0.1, legs=1)
    t = np.arange(0.0, 40.0, DT)
    q, _ = excitation.sample(t)
    crossings = []
    for k, hip in enumerate(["FL_hip_joint", "FR_hip_joint", "RL_hip_joint", "RR_hip_joint"]):
        inside = (t > 10.0 * k + 2.5) & (t < 10.0 * (k + 1) - 2.5)  # the window's plateau
        x = q[inside, go2.joint_names.index(hip)] - go2.default_positions[go2.joint_names.index(hip)]
        crossings.append(int(np.count_nonzero(np.diff(np.sign(x)) != 0)))
    assert max(crossings) - min(crossings) <= 2, crossings
