"""The state estimator against PyBullet ground truth, on recorded scripted-trot runs (no ROS)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim2real.core.estimation.arm import ArmEstimator
from sim2real.core.estimation.config import EstimationError, estimation_config_from_dict, load_estimation_config
from sim2real.core.estimation.legged import BIAS, LegKalmanFilter
from sim2real.core.estimation.samples import imu_sample
from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import load_profile
from sim2real.core.rotations import quat_to_matrix
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.scripted_gait import record_trot, replay_estimator
from sim2real.sim.world import SimWorld

# Realistic proprioception noise: encoder and IMU white noise in the sim, constant IMU biases added on replay.
NOISE = dict(joint_position_noise=0.002, joint_velocity_noise=0.05, gyro_noise=0.01, accelerometer_noise=0.1)
GYRO_BIAS = (0.002, -0.003, 0.002)
ACCEL_BIAS = (0.05, -0.05, 0.08)


@pytest.fixture(scope="module")
def go2():
    return load_profile("go2")


def record(profile, seconds=5.0, events=None, seed=3):
    with SimWorld(profile, PhysicalConditions(**NOISE), seed=seed) as world:
        return record_trot(world, seconds, events=events).arrays()


@pytest.fixture(scope="module")
def trot(go2):
    return record(go2)


def replay(profile, recording, config=None, batch=1):
    estimator = LegKalmanFilter(profile, config or load_estimation_config("go2"))
    return replay_estimator(estimator, recording, GYRO_BIAS, ACCEL_BIAS, batch=batch)


def test_config_errors_name_the_field_and_fix():
    with pytest.raises(EstimationError, match="swing_inflaton.*unknown setting"):
        estimation_config_from_dict({"swing_inflaton": 10.0})
    with pytest.raises(EstimationError, match="contact.off_force.*hysteresis"):
        estimation_config_from_dict({"contact": {"on_force": 20.0, "off_force": 30.0}})
    with pytest.raises(EstimationError, match="contact.source.*use one of"):
        estimation_config_from_dict({"contact": {"source": "vision"}})
    with pytest.raises(EstimationError, match="no estimation config named"):
        load_estimation_config("nonexistent_robot")
    with pytest.raises(EstimationError, match="accelerometer_noise"):
        estimation_config_from_dict({"accelerometer_noise": 0})
    # 0 switches these off: no bias state, no gyro noise carried through the legs. Not the
    # encoders' velocity noise: the arm's filter measures with it.
    off = estimation_config_from_dict({"accelerometer_bias_prior": 0, "accelerometer_bias_noise": 0, "gyro_noise": 0})
    assert off.accelerometer_bias_prior == off.gyro_noise == 0.0
    with pytest.raises(EstimationError, match="joint_velocity_noise"):
        estimation_config_from_dict({"joint_velocity_noise": 0})


def test_foot_jacobians_match_finite_differences(go2):
    kinematics = Kinematics(go2)
    q = go2.default_positions + np.random.default_rng(0).normal(0, 0.2, go2.num_joints)
    positions, jacobians = kinematics.foot_jacobians(q)
    np.testing.assert_allclose(positions, kinematics.foot_positions(q))
    step = 1e-6
    for joint in range(go2.num_joints):
        dq = np.zeros(go2.num_joints)
        dq[joint] = step
        numeric = (kinematics.foot_positions(q + dq) - kinematics.foot_positions(q - dq)) / (2 * step)
        np.testing.assert_allclose(jacobians[:, :, joint], numeric, atol=1e-6)


def test_tracks_ground_truth_on_a_noisy_trot(go2, trot):
    result = replay(go2, trot)
    metrics = result.metrics(trot)
    assert metrics["mean_speed_mps"] > 0.3, f"the scripted trot hardly moved: {metrics}"
    assert metrics["velocity_rmse_mps"] < 0.05, metrics
    assert metrics["drift_percent"] < 2.0, metrics
    assert not result.diverged.any(), f"false divergence, peak NIS {result.window_nis.max():.2f}"


def test_a_batch_of_one_is_the_per_sample_step_bit_for_bit(go2, trot):
    by_sample, by_batch = (LegKalmanFilter(go2, load_estimation_config("go2")) for _ in range(2))
    for k in range(400):
        imu = (trot["orientation"][k], trot["gyro"][k], trot["accel"][k])
        joints = (trot["joint_position"][k], trot["joint_velocity"][k], trot["joint_effort"][k])
        one = by_sample.step(float(trot["t"][k]), *imu, *joints)
        other = by_batch.step_batch([imu_sample(float(trot["t"][k]), *imu)], *joints)
        assert np.array_equal(one.velocity, other.velocity) and np.array_equal(one.covariance, other.covariance)
    assert np.array_equal(by_sample.x, by_batch.x) and np.array_equal(by_sample.P, by_batch.P)


def test_a_batch_per_policy_tick_tracks_within_the_target(go2, trot):
    """Five IMU samples (10 ms, half the Go2's policy period) per update, as the node does in real
    time: each row holds the newest estimate made by then, as a consumer of /state_estimate sees it.
    That hold over a trot's changing velocity is most of its error (0.016 m/s measured; 0.005 at
    the updates themselves, 0.007 per sample): well inside the 0.05 target."""
    batched = replay(go2, trot, batch=5)
    metrics = batched.metrics(trot)
    assert metrics["velocity_rmse_mps"] < 0.025, metrics
    assert metrics["drift_percent"] < 2.0, metrics
    assert not batched.diverged.any()


def test_a_batch_refuses_nothing_to_fuse_and_non_finite_joints(go2, trot):
    estimator = LegKalmanFilter(go2, load_estimation_config("go2"))
    joints = (trot["joint_position"][0], trot["joint_velocity"][0], trot["joint_effort"][0])
    with pytest.raises(ValueError, match="at least one IMU sample"):
        estimator.step_batch([], *joints)
    sample = imu_sample(0.0, trot["orientation"][0], trot["gyro"][0], trot["accel"][0])
    with pytest.raises(ValueError, match="joint_velocity NaN or infinite"):
        estimator.step_batch([sample], joints[0], np.full(12, np.inf), joints[2])
    with pytest.raises(ValueError, match="not a unit quaternion"):
        imu_sample(0.0, (0.0, 0.0, 0.0, 0.0), trot["gyro"][0], trot["accel"][0])
    assert estimator._t is None and not estimator.x.any()


def test_contact_from_effort_switches_with_the_trot(go2, trot):
    result = replay(go2, trot)
    lifts = np.sum(np.diff(result.contact.astype(int), axis=0) == -1, axis=0)
    true_lifts = np.sum(np.diff(trot["true_contact"].astype(int), axis=0) == -1, axis=0)
    # Every foot lifts and lands repeatedly (a 0.3 s gait over 4.5 s), and the estimate agrees
    # with PyBullet's contact points most of the time (the misses are at touch-down and lift-off).
    assert np.all(lifts >= 5), (lifts, true_lifts)
    assert result.metrics(trot)["contact_agreement"] > 0.8


def test_contact_from_gait_phase(go2, trot):
    base = load_estimation_config("go2")
    config = dataclasses.replace(base, contact=dataclasses.replace(base.contact, source="gait", gait_period=0.3))
    # The gait clock starts with the trot (after 0.5 s standing): shift the recording's time.
    shifted = dict(trot, t=trot["t"] - 0.5)
    result = replay(go2, shifted, config)
    moving = shifted["t"] > 0
    # Equal but for samples on a phase boundary, where two float clocks may round apart.
    agreement = (result.contact[moving] == np.asarray(trot["script_stance"])[moving]).mean()
    assert agreement > 0.98, agreement
    assert result.metrics(shifted)["velocity_rmse_mps"] < 0.08


def test_divergence_on_a_hard_foot_slip_not_on_a_push(go2):
    def slip(world):  # the floor turns to ice and the robot is shoved sideways: the feet slide
        world.set_condition("ground_friction", 0.02)
        world.apply_push((0.0, 200.0, 0.0), 0.3)

    def push(world):  # same shove on a grippy floor: the feet hold, nothing diverges
        world.apply_push((0.0, 100.0, 0.0), 0.2)

    pushed = replay(go2, record(go2, 4.5, {3.0: push}))
    assert not pushed.diverged.any(), (
        f"a push that the feet held is not divergence (peak NIS {pushed.window_nis.max():.2f})"
    )
    slipped_recording = record(go2, 4.5, {3.0: slip})
    slipped = replay(go2, slipped_recording)
    assert slipped.diverged.any(), f"hard slip not detected (peak NIS {slipped.window_nis.max():.2f})"
    first = slipped_recording["t"][np.argmax(slipped.diverged)]
    assert 3.0 <= first < 3.3, f"divergence reported at {first:.3f} s, the slip starts at 3.0 s"


def test_arm_estimator_filters_velocity_and_gives_end_effector_twist():
    panda = load_profile("panda")
    with SimWorld(panda, PhysicalConditions(joint_position_noise=0.001, joint_velocity_noise=0.02), seed=1) as world:
        estimator = ArmEstimator(panda, load_estimation_config("panda"))
        kinematics = Kinematics(panda)
        dt = panda.sensing_period
        raw, filtered, truth_v, twist_error = [], [], [], []
        previous = None
        for k in range(1500):
            t = (k + 1) * dt
            world.command(panda.default_positions + 0.3 * np.sin(2 * np.pi * 0.5 * t))
            world.step(round(dt / panda.physics_period))
            measured, true = world.joint_state(), world.true_joint_state()
            e = estimator.step(t, measured.position, measured.velocity)
            if k > 250:
                raw.append(measured.velocity - true.velocity)
                filtered.append(e.joint_velocity - true.velocity)
                truth_v.append(true.velocity)
                ee_true = kinematics.end_effector_position(true.position)
                if previous is not None:
                    twist_error.append(e.ee_linear_velocity - (ee_true - previous) / dt)
                previous = ee_true
            np.testing.assert_allclose(e.ee_rotation @ e.ee_rotation.T, np.eye(3), atol=1e-9)
    raw, filtered = np.sqrt(np.mean(np.square(raw))), np.sqrt(np.mean(np.square(filtered)))
    assert filtered < 0.6 * raw, (filtered, raw)
    assert np.sqrt(np.mean(np.square(twist_error))) < 0.02


def test_a_nan_sample_is_refused_and_the_estimate_stays_finite(go2, trot):
    """One NaN accelerometer sample, folded in, would leave the position NaN for good."""
    estimator = LegKalmanFilter(go2, load_estimation_config("go2"))
    fields = ("orientation", "gyro", "accel", "joint_position", "joint_velocity", "joint_effort")

    def sample(k, **bad):
        values = {f: np.array(trot[f][k], dtype=float) for f in fields}
        values.update(bad)
        return (float(trot["t"][k]), *(values[f] for f in fields))

    for k in range(100):
        estimator.step(*sample(k))
    state = estimator.x.copy()
    with pytest.raises(ValueError, match="linear_acceleration NaN or infinite"):
        estimator.step(*sample(100, accel=np.array([np.nan, 0.0, 9.81])))
    np.testing.assert_array_equal(estimator.x, state)
    for k in range(101, 300):
        estimate = estimator.step(*sample(k))
    assert np.all(np.isfinite(estimate.position)) and not estimator.divergence.diverged(estimate.stamp)

    panda = load_profile("panda")
    arm = ArmEstimator(panda, load_estimation_config("panda"))
    arm.step(0.0, panda.default_positions, np.zeros(7))
    with pytest.raises(ValueError, match="joint_position NaN or infinite"):
        arm.step(0.002, np.full(7, np.nan), np.zeros(7))
    assert np.all(np.isfinite(arm.step(0.004, panda.default_positions, np.zeros(7)).joint_position))


def test_the_filter_learns_the_accelerometer_bias(go2, trot):
    """The replay adds a constant accelerometer bias; the filter's bias state finds it from the
    legs, and tracks better than the same filter without it."""
    estimator = LegKalmanFilter(go2, load_estimation_config("go2"))
    with_bias = replay_estimator(estimator, trot, GYRO_BIAS, ACCEL_BIAS).metrics(trot)
    np.testing.assert_allclose(estimator.x[BIAS], ACCEL_BIAS, atol=0.01)
    # The same small velocity random walk without the bias state leaves the bias in the velocity
    # (0.029 m/s against 0.007). A wide one (0.3) absorbs most of it on this trot (0.012) but lets
    # the reference robots' encoder noise through (up to 0.15 m/s on the suite's reference draw).
    config = dataclasses.replace(
        load_estimation_config("go2"), accelerometer_bias_prior=0.0, accelerometer_bias_noise=0.0
    )
    without = replay(go2, trot, config).metrics(trot)
    assert with_bias["velocity_rmse_mps"] < 0.5 * without["velocity_rmse_mps"], (with_bias, without)


def test_encoder_velocity_noise_is_carried_through_the_legs(go2):
    """With encoders as noisy as the reference randomization's (0.75 rad/s), a filter told that
    noise (through each leg's Jacobian) trusts the legs less and tracks better than one told only
    foot_velocity_noise."""
    with SimWorld(go2, PhysicalConditions(**{**NOISE, "joint_velocity_noise": 0.75}), seed=3) as world:
        noisy = record_trot(world, 5.0).arrays()
    told = replay(go2, noisy).metrics(noisy)
    config = dataclasses.replace(load_estimation_config("go2"), joint_velocity_noise=0.0, gyro_noise=0.0)
    untold = replay(go2, noisy, config).metrics(noisy)
    assert told["velocity_rmse_mps"] < 0.75 * untold["velocity_rmse_mps"], (told, untold)
    assert told["velocity_rmse_mps"] < 0.05, told


@pytest.mark.parametrize("mass_scale", [0.8, 1.0, 1.25])
def test_a_go2_stood_up_from_lying_stands_on_four_feet(go2, mass_scale):
    """From the folded lying pose (the supervisor's damp_pose: feet unloaded, so the filter lifts
    them) up to the stand pose over 2 s as the supervisor does, no impact, held by the PD alone
    (no feed-forward): the front feet end with 14-22 N by the joint efforts, under on_force, and
    land as still feet on off_force's load (still_speed). A Go2 of the reference masses reads all
    four feet in contact once it stands."""
    from sim2real.core.safety_config import load_safety_config

    lying = np.array([load_safety_config("go2").damp_pose[name] for name in go2.joint_names])
    with SimWorld(go2, PhysicalConditions(mass_scale=mass_scale), seed=0) as world:
        estimator = LegKalmanFilter(go2, load_estimation_config("go2"))
        substeps = max(1, round(go2.sensing_period / go2.physics_period))
        lie, rise, hold = 1.5, 2.0, 1.5  # s
        standing = []
        for k in range(int((lie + rise + hold) / go2.sensing_period)):
            t = k * go2.sensing_period
            blend = min(1.0, max(0.0, (t - lie) / rise))
            world.command((1.0 - blend) * lying + blend * go2.default_positions)
            world.step(substeps)
            joints, imu = world.joint_state(), world.imu()
            estimate = estimator.step(
                t,
                imu.orientation,
                imu.angular_velocity,
                imu.linear_acceleration,
                joints.position,
                joints.velocity,
                joints.effort,
            )
            if t >= lie + rise + 0.5:
                standing.append(estimate.contact)
    assert np.all(standing), np.mean(standing, axis=0)


def test_a_fast_foot_does_not_land_on_its_force_alone():
    """With landing_speed set, a free foot whose effort-balanced force passes on_force lands only
    while it moves slower than that (a fast swing's own dynamics read as force too), unless fewer
    than two feet stand (the filter's velocity, which the speed builds on, may then be far off).
    With still_speed set, a foot that still lands on off_force's load (a slow stand-up)."""
    from sim2real.core.estimation.config import ContactConfig
    from sim2real.core.estimation.legged import ContactDetector

    jacobians = np.zeros((4, 3, 12))
    legs = [np.arange(3 * foot, 3 * foot + 3) for foot in range(4)]
    for foot, joints in enumerate(legs):
        jacobians[foot][:, joints] = np.eye(3)

    def feet(detector, vertical_n, speed):
        effort = np.zeros(12)
        effort[[3 * foot + 2 for foot in range(4)]] = -np.asarray(vertical_n, dtype=float)  # tau = -J^T f
        return detector.update(0.0, np.eye(3), jacobians, effort, legs, np.asarray(speed, dtype=float)).copy()

    gated = ContactDetector(ContactConfig(on_force=30.0, off_force=12.0, landing_speed=1.0), 4)
    # Two feet stand (loaded, still), two swing free.
    assert feet(gated, [40, 40, 0, 0], [0, 0, 0, 0]).tolist() == [True, True, False, False]
    assert feet(gated, [40, 40, 40, 40], [0, 0, 2, 2]).tolist() == [True, True, False, False]  # too fast
    assert feet(gated, [40, 40, 40, 40], [0, 0, 0.2, 0.2]).all()  # slow enough: landed
    assert feet(gated, [40, 40, 40, 40], [2, 2, 2, 2]).all()  # standing: the speed gates landing only
    # No foot down (a robot lifted): the gate stands aside, else no foot could land again.
    assert not feet(gated, [0, 0, 0, 0], [0, 0, 0, 0]).any()
    assert feet(gated, [40, 40, 40, 40], [2, 2, 2, 2]).all()
    still = ContactDetector(ContactConfig(on_force=30.0, off_force=12.0, landing_speed=1.0, still_speed=0.1), 4)
    assert not feet(still, [0, 0, 0, 0], [0, 0, 0, 0]).any()
    assert not feet(still, [15, 15, 15, 15], [0.5, 0.5, 0.5, 0.5]).any()  # under on_force, moving
    assert feet(still, [15, 15, 15, 15], [0.05, 0.05, 0.05, 0.05]).all()  # loaded slowly, still


def test_the_gyro_noise_through_each_lever_arm_is_the_skew_product(go2):
    """The gyro's share of each foot's velocity noise, sigma^2 [r]x [r]x^T with r the foot's
    lever arm in the world frame, written out as |r|^2 I - r r^T."""
    config = dataclasses.replace(load_estimation_config("go2"), joint_velocity_noise=0.0, gyro_noise=0.03)
    estimator = LegKalmanFilter(go2, config)
    rng = np.random.default_rng(4)
    q = rng.standard_normal(4)
    R = quat_to_matrix(q / np.linalg.norm(q))
    feet_body = rng.uniform(-0.4, 0.4, (4, 3))
    cov = estimator._sensor_velocity_noise(R, feet_body, np.zeros((4, 6, go2.num_joints)))
    for foot, r in enumerate(feet_body @ R.T):
        skew = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
        np.testing.assert_allclose(cov[foot], 0.03**2 * skew @ skew.T, rtol=0, atol=1e-16)
