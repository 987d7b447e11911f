"""Latency measurement and compensation against the simulator's injected actuation latency (no ROS)."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.core.latency import ActuationLatencyEstimator, StatePredictor, latency_randomization
from sim2real.core.observation import RobotSignals
from sim2real.core.robot_profile import load_profile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.randomization import Randomization
from sim2real.sim.world import SimWorld

PANDA = load_profile("panda")


def drive(latency: float, seconds: float = 3.0, seed: int = 0, on_state=None, on_command=None):
    """50 Hz random-walk targets around the ready pose, in the lockstep order: a command at
    sim time T (computed on the state stamped T), then the sensing periods up to the next one."""
    rng = np.random.default_rng(seed)
    substeps = round(PANDA.sensing_period / PANDA.physics_period)
    per_command = round(PANDA.policy_period / PANDA.sensing_period)
    with SimWorld(PANDA, PhysicalConditions(latency=latency), seed=seed) as world:
        target = PANDA.default_positions.copy()
        t = 0.0
        for _ in range(int(seconds / PANDA.policy_period)):
            target = np.clip(
                target + rng.normal(0, 0.03, PANDA.num_joints),
                PANDA.default_positions - 0.3,
                PANDA.default_positions + 0.3,
            )
            world.command(target)
            if on_command:
                on_command(t, target, world)
            for _ in range(per_command):
                world.step(substeps)
                t += PANDA.sensing_period
                if on_state:
                    on_state(t, world.joint_state())


@pytest.mark.parametrize("injected", [0.0, 0.010, 0.020, 0.040])
def test_actuation_latency_recovered_within_2ms(injected):
    estimator = ActuationLatencyEstimator(PANDA)
    drive(
        injected,
        on_state=lambda t, s: estimator.add_state(t, s.position, s.velocity, s.effort),
        on_command=lambda t, target, world: estimator.add_command(t, target),
    )
    measured = estimator.estimate()
    assert measured is not None, "no estimate despite moving targets"
    assert abs(measured - injected) <= 0.002, f"injected {injected * 1e3:.0f} ms, measured {measured * 1e3:.1f} ms"


def test_no_estimate_without_motion():
    estimator = ActuationLatencyEstimator(PANDA)
    for k in range(200):
        estimator.add_state(k * 0.002, PANDA.default_positions, np.zeros(7), np.zeros(7))
        if k % 10 == 0:
            estimator.add_command(k * 0.002, PANDA.default_positions)
    assert estimator.estimate() is None


def test_prediction_brings_the_state_closer_to_when_the_command_acts():
    latency = 0.020
    log = {}

    def on_command(t, target, world):
        state = world.true_joint_state()
        log[round(t, 6)] = (state.position.copy(), state.velocity.copy(), target.copy())

    truth = {}
    drive(
        latency,
        seconds=2.0,
        seed=1,
        on_command=on_command,
        on_state=lambda t, s: truth.__setitem__(round(t, 6), s.position.copy()),
    )
    # Replay: at each command time, predict 20 ms ahead from that state with the commands known then.
    replay = StatePredictor(PANDA)
    raw, predicted = [], []
    for t, (q, dq, target) in sorted(log.items()):
        future = truth.get(round(t + latency, 6))
        if future is not None and t > 0.2:
            signals = RobotSignals(joint_position=q, joint_velocity=dq)
            ahead = replay.predict(signals, t, latency, latency).joint_position
            raw.append(q - future)
            predicted.append(ahead - future)
        replay.add_command(t, target)
    raw, predicted = np.sqrt(np.mean(np.square(raw))), np.sqrt(np.mean(np.square(predicted)))
    assert predicted < 0.5 * raw, f"prediction error {predicted:.4f} rad vs {raw:.4f} rad without"


def test_a_non_finite_command_never_enters_the_prediction():
    """The supervisor holds instead of sending it; predicted forward, it would make every later
    observation NaN, so every later action, until the runtime restarts."""
    from sim2real.core.latency import LatencyMonitor

    monitor = LatencyMonitor(PANDA, compensate=True, horizon=0.03)
    signals = RobotSignals(joint_position=PANDA.default_positions.copy(), joint_velocity=np.zeros(7))
    monitor.on_command(0.0, 0.001, PANDA.default_positions + 0.1)
    monitor.on_command(0.02, 0.021, np.full(7, np.nan))
    predicted = monitor.predictor.predict(signals, 0.04, 0.03, 0.0)
    assert np.all(np.isfinite(predicted.joint_position)) and np.all(np.isfinite(predicted.joint_velocity))


def test_measured_latencies_become_a_loadable_randomization():
    samples = np.random.default_rng(0).uniform(0.015, 0.025, 500)
    data, summary = latency_randomization(samples)
    randomization = Randomization.from_dict(data)
    low, high = randomization.ranges()["latency"]
    assert 0.015 <= low < 0.016 and 0.024 < high <= 0.025
    assert summary["samples"] == 500 and 0.019 < summary["p50_s"] < 0.021
    with pytest.raises(ValueError, match="no latency samples"):
        latency_randomization([])


def test_dr_from_latency_command_writes_a_loadable_randomization(tmp_path, capsys):
    from sim2real.cli.main import main
    from sim2real.sim.randomization import load_randomization

    log = tmp_path / "latency.jsonl"
    log.write_text(
        "".join(
            f'{{"t": {k}, "sensor_to_command_s": 0.001, "actuation_s": {0.018 + 0.0001 * k}, '
            f'"total_s": {0.019 + 0.0001 * k}}}\n'
            for k in range(30)
        )
    )
    out = tmp_path / "robot_latency.yaml"
    assert main(["dr", "from-latency", str(log), "-o", str(out)]) == 0
    low, high = load_randomization(out).ranges()["latency"]
    assert 0.019 <= low < 0.0195 and 0.0215 < high <= 0.0219
    said = capsys.readouterr().out + out.read_text()
    assert f"p1 {low * 1e3:.1f} ms" in said, said  # the range's low end, named beside p50 and p99
    assert main(["dr", "from-latency", str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    assert "latency_log" in capsys.readouterr().err
    # On a base (an identified randomization, say): its other ranges kept, its latency replaced.
    combined = tmp_path / "reference_latency.yaml"
    assert main(["dr", "from-latency", str(log), "--base", "go2_reference", "-o", str(combined)]) == 0
    reference, merged = load_randomization("go2_reference").ranges(), load_randomization(combined).ranges()
    assert merged["latency"] == load_randomization(out).ranges()["latency"] != reference["latency"]
    assert {k: v for k, v in merged.items() if k != "latency"} == {k: v for k, v in reference.items() if k != "latency"}
    assert load_randomization(combined).name == "reference_latency"
    assert main(["dr", "from-latency", str(log), "--base", "no_such_ranges", "-o", str(combined)]) == 2
    assert "no_such_ranges" in capsys.readouterr().err


def test_only_the_latency_beyond_training_is_compensated():
    from sim2real.core.latency import LatencyMonitor, trained_latency

    assert trained_latency({"parameters": {"latency": {"uniform": [0.0, 0.0175]}}}) == 0.0175
    assert trained_latency({"parameters": {"latency": {"constant": 0.01}}}) == 0.01
    assert trained_latency(None) == 0.0
    monitor = LatencyMonitor(PANDA, compensate=True, trained_latency=0.0175)
    monitor._estimates.append(0.020)
    assert monitor.horizon == pytest.approx(0.0025)
    monitor._estimates[0] = 0.010
    assert monitor.horizon == 0.0


def test_a_driver_clock_ahead_of_ours_is_counted_and_logged_as_measured_not_as_zero():
    """A negative sensor->command time reaches the log as measured: clamped to 0, `dr
    from-latency`'s clock check could never fire and the log would read as no latency at all."""
    from sim2real.core.latency import LatencyMonitor

    monitor = LatencyMonitor(PANDA)
    monitor.on_command(1.000, 0.970, PANDA.default_positions)  # published 30 ms "before" its state
    sample = monitor.record((None, 0.010))
    assert sample["sensor_to_command_s"] == pytest.approx(-0.030) and sample["total_s"] == pytest.approx(-0.020)
    assert monitor.summary()["clock_ahead_samples"] == "1"
    assert monitor.horizon >= 0.0  # the predictor still sees no negative latency
    with pytest.raises(ValueError, match="negative latency samples .* the clocks of the stamps differ"):
        latency_randomization([sample["total_s"]] * 10)
