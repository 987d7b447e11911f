"""Adaptive domain randomization: the threshold rule's numbers, per-boundary ADR against
synthetic successes, bounds, and checkpoint state (no ROS, no simulation)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.randomization import Randomization, load_randomization
from sim2real.train.adaptive_dr import AdaptiveRandomization, BoundaryAdaptiveRandomization


def make_dr() -> Randomization:
    return Randomization.from_dict(
        {
            "name": "test",
            "parameters": {
                "ground_friction": {"uniform": [0.4, 1.0], "bounds": [0.1, 1.5]},
                "latency": {"uniform": [0.01, 0.02], "bounds": [0.0, 0.03]},
                "mass_scale": {"loguniform": [0.8, 1.25], "bounds": [0.5, 2.0]},
                "motor_strength": {"normal": {"mean": 1.0, "std": 0.05}, "bounds": [0.7, 1.3]},
                "gyro_noise": {"constant": 0.01},
            },
            "pushes": {"interval": [5, 10], "force": [50, 100], "duration": 0.15},
        }
    )


def assert_valid(randomization: Randomization) -> None:
    for name, dist in randomization.parameters.items():
        low, high = dist.range()
        assert dist.bounds[0] <= low <= high <= dist.bounds[1], (name, low, high, dist.bounds)


# ------------------------------------------------------------ threshold rule
def test_widens_exactly_as_the_rule_says():
    adr = AdaptiveRandomization(make_dr(), target_return=100.0, rate=0.1)
    assert adr.update(110.5) == "widen"
    r = adr.randomization.ranges()
    assert r["ground_friction"] == pytest.approx((0.4 * 0.95, 1.0 * 1.1))
    assert r["latency"] == pytest.approx((0.01 * 0.95, 0.02 * 1.1))
    assert r["mass_scale"] == pytest.approx((0.8 * 0.95, 1.25 * 1.1))
    assert r["motor_strength"] == pytest.approx((0.9 * 0.95, 1.1 * 1.1))
    ms = adr.randomization.parameters["motor_strength"]
    assert (ms.mean, ms.std) == (pytest.approx((0.855 + 1.21) / 2), pytest.approx((1.21 - 0.855) / 4))
    assert adr.randomization.parameters["mass_scale"].kind == "loguniform"


def test_narrows_exactly_as_the_rule_says():
    adr = AdaptiveRandomization(make_dr(), target_return=100.0, rate=0.1)
    assert adr.update(79.5) == "narrow"
    r = adr.randomization.ranges()
    assert r["ground_friction"] == pytest.approx((0.4 * 1.1, 1.0 * 0.95))
    assert r["latency"] == pytest.approx((0.01 * 1.1, 0.02 * 0.95))
    assert r["mass_scale"] == pytest.approx((0.8 * 1.1, 1.25 * 0.95))


def test_holds_between_the_thresholds_and_leaves_constants_and_pushes_alone():
    dr = make_dr()
    adr = AdaptiveRandomization(dr, target_return=100.0)
    for value in (110.0, 100.0, 80.0, 95.0):  # "more than" 10 % / 20 %: the edges hold
        assert adr.update(value) == "hold"
    assert adr.randomization.ranges() == dr.ranges()
    adr.update(200.0)
    adr.update(0.0)
    assert adr.randomization.parameters["gyro_noise"] == dr.parameters["gyro_noise"]
    assert adr.randomization.pushes == dr.pushes


@pytest.mark.parametrize(
    "target, widen, hold, narrow",
    [
        (-100.0, -89.0, -95.0, -121.0),  # 10 % of |target| above -100 is -90; 20 % below is -120
        (100.0, 111.0, 85.0, 79.0),
        (0.0, 0.5, 0.0, -0.5),
    ],
)
def test_thresholds_use_the_absolute_target(target, widen, hold, narrow):
    adr = AdaptiveRandomization(make_dr(), target_return=target)
    assert [adr.decide(widen), adr.decide(hold), adr.decide(narrow)] == ["widen", "hold", "narrow"]


def test_rule_parameters_are_configurable():
    adr = AdaptiveRandomization(make_dr(), target_return=100.0, rate=0.2, widen_above=0.5, narrow_below=0.5)
    assert adr.update(140.0) == "hold"
    assert adr.update(151.0) == "widen"
    assert adr.randomization.ranges()["ground_friction"] == pytest.approx((0.4 * 0.9, 1.0 * 1.2))


def test_never_leaves_bounds_and_keeps_low_below_high():
    dr = make_dr()
    rng = np.random.default_rng(0)
    adr = AdaptiveRandomization(dr, target_return=100.0, rate=0.3)
    for _ in range(60):
        adr.update(1000.0)
        assert_valid(adr.randomization)
    r = adr.randomization.ranges()
    assert r["ground_friction"] == pytest.approx((0.1, 1.5))  # both at the bounds
    assert r["latency"][1] == 0.03
    for _ in range(100):
        adr.update(-1000.0)
        assert_valid(adr.randomization)
    for _ in range(500):
        adr.update(float(rng.normal(100.0, 40.0)))
        assert_valid(adr.randomization)
        conditions, probe = adr.sample(rng)
        assert probe is None
        for name, value in conditions.items():
            PhysicalConditions.check(name, value)


def test_narrowing_never_leaves_the_previous_range():
    dr = Randomization.from_dict({"parameters": {"ground_friction": {"uniform": [1.0, 1.05]}}})
    adr = AdaptiveRandomization(dr, target_return=1.0, rate=0.1)
    adr.update(0.0)  # 1.0*1.1 = 1.1 would cross 1.05*0.95: collapses onto the centre
    assert adr.randomization.ranges()["ground_friction"] == pytest.approx((1.025, 1.025))


def test_history_and_decisions():
    adr = AdaptiveRandomization(make_dr(), target_return=100.0)
    first = adr.randomization.ranges()
    assert [adr.update(v) for v in (120.0, 100.0, 50.0)] == ["widen", "hold", "narrow"]
    assert len(adr.history) == 4 and adr.history[0] == first
    assert adr.history[1] == adr.history[2] != adr.history[0]
    assert adr.history[3] == adr.randomization.ranges()
    assert adr.decisions == ["widen", "hold", "narrow"]


def test_threshold_state_round_trip_through_json():
    adr = AdaptiveRandomization(make_dr(), target_return=100.0)
    for value in (120.0, 130.0, 50.0):
        adr.update(value)
    state = json.loads(json.dumps(adr.state_dict(), allow_nan=False))
    resumed = AdaptiveRandomization(make_dr(), target_return=100.0)
    resumed.load_state_dict(state)
    assert resumed.randomization.ranges() == adr.randomization.ranges()
    assert resumed.history == adr.history and resumed.decisions == adr.decisions
    for value in (150.0, 10.0, 105.0):
        assert resumed.update(value) == adr.update(value)
    assert resumed.randomization.ranges() == adr.randomization.ranges()
    with pytest.raises(ValueError, match="cannot be loaded"):
        BoundaryAdaptiveRandomization(make_dr()).load_state_dict(state)


def test_threshold_argument_errors():
    with pytest.raises(ValueError, match="rate"):
        AdaptiveRandomization(make_dr(), 100.0, rate=1.5)
    with pytest.raises(ValueError, match="target_return"):
        AdaptiveRandomization(make_dr(), math.nan)
    with pytest.raises(ValueError, match="cannot adapt"):
        AdaptiveRandomization(make_dr(), 100.0, parameters=["gyro_noise"])
    with pytest.raises(ValueError, match="mean_return"):
        AdaptiveRandomization(make_dr(), 100.0).update(math.nan)
    with pytest.raises(ValueError, match="probes"):
        AdaptiveRandomization(make_dr(), 100.0).record(("latency", "low"), 1.0)


def test_adapting_a_subset():
    adr = AdaptiveRandomization(make_dr(), 100.0, parameters=["latency"])
    adr.update(200.0)
    assert adr.randomization.ranges()["ground_friction"] == (0.4, 1.0)
    assert adr.randomization.ranges()["latency"] != (0.01, 0.02)


# -------------------------------------------------------- per-boundary ADR
def feed(adr, probe, success, times):
    for _ in range(times):
        adr.record(probe, success)


def test_boundary_moves_the_right_boundary_in_the_right_direction():
    adr = BoundaryAdaptiveRandomization(make_dr(), buffer_size=5, t_low=0.3, t_high=0.7, step_fraction=0.1)
    assert adr.steps["ground_friction"] == pytest.approx(0.06)  # 10 % of the width 0.6

    def friction():
        return adr.randomization.ranges()["ground_friction"]

    feed(adr, ("ground_friction", "high"), 1.0, 4)
    assert friction() == (0.4, 1.0)  # buffer not full yet
    adr.record(("ground_friction", "high"), 1.0)
    assert friction() == pytest.approx((0.4, 1.06))  # succeeds at the edge: outward
    feed(adr, ("ground_friction", "low"), 0.8, 5)
    assert friction() == pytest.approx((0.34, 1.06))
    feed(adr, ("ground_friction", "high"), 0.0, 5)
    assert friction() == pytest.approx((0.34, 1.0))  # fails at the edge: inward
    feed(adr, ("ground_friction", "low"), 0.5, 5)  # between t_low and t_high: stays
    assert friction() == pytest.approx((0.34, 1.0))
    assert adr.randomization.ranges()["latency"] == (0.01, 0.02)
    assert [(m["side"], m["direction"]) for m in adr.moves] == [
        ("high", "outward"),
        ("low", "outward"),
        ("high", "inward"),
    ]


def test_boundary_respects_bounds_and_the_nominal_centre():
    adr = BoundaryAdaptiveRandomization(make_dr(), buffer_size=2)
    feed(adr, ("ground_friction", "high"), 1.0, 200)
    feed(adr, ("ground_friction", "low"), 1.0, 200)
    assert adr.randomization.ranges()["ground_friction"] == pytest.approx((0.1, 1.5))
    feed(adr, ("ground_friction", "high"), 0.0, 400)
    feed(adr, ("ground_friction", "low"), 0.0, 400)
    assert adr.randomization.ranges()["ground_friction"] == pytest.approx((0.7, 0.7))  # initial centre
    assert_valid(adr.randomization)


def test_boundary_steps_a_loguniform_in_log_space():
    adr = BoundaryAdaptiveRandomization(make_dr(), buffer_size=1, step_fraction=0.1)
    step = 0.1 * math.log(1.25 / 0.8)
    adr.record(("mass_scale", "high"), 1.0)
    adr.record(("mass_scale", "low"), 1.0)
    assert adr.randomization.ranges()["mass_scale"] == pytest.approx((0.8 * math.exp(-step), 1.25 * math.exp(step)))
    assert adr.randomization.parameters["mass_scale"].kind == "loguniform"
    assert adr.nominal["mass_scale"] == pytest.approx(1.0)


def test_boundary_sampling_probes_the_current_boundaries():
    dr = make_dr()
    always = BoundaryAdaptiveRandomization(dr, probe_probability=1.0)
    never = BoundaryAdaptiveRandomization(dr, probe_probability=0.0)
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(400):
        conditions, probe = always.sample(rng)
        name, side = probe
        seen.add(probe)
        assert conditions[name] == dr.parameters[name].range()[0 if side == "low" else 1]
        assert set(conditions) == set(dr.parameters)
        assert never.sample(rng)[1] is None
    assert seen == {
        (n, s) for n in ("ground_friction", "latency", "mass_scale", "motor_strength") for s in ("low", "high")
    }  # never the constant
    half = BoundaryAdaptiveRandomization(dr, probe_probability=0.5)
    probes = sum(half.sample(rng)[1] is not None for _ in range(2000))
    assert 900 < probes < 1100


def test_boundary_adr_finds_what_a_synthetic_policy_can_handle():
    """A 'policy' that succeeds iff friction >= 0.3 and latency <= 0.025 s: the friction
    low boundary settles near 0.3, the latency high one near 0.025, the others open up."""
    adr = BoundaryAdaptiveRandomization(
        make_dr(), buffer_size=10, t_low=0.4, t_high=0.8, parameters=["ground_friction", "latency"]
    )
    rng = np.random.default_rng(2)
    for _ in range(20000):
        conditions, probe = adr.sample(rng)
        success = float(conditions["ground_friction"] >= 0.3 and conditions["latency"] <= 0.025)
        adr.record(probe, success)
        for name, value in conditions.items():
            PhysicalConditions.check(name, value)
    friction, latency = adr.randomization.ranges()["ground_friction"], adr.randomization.ranges()["latency"]
    assert 0.3 - 0.06 <= friction[0] <= 0.3 + 0.06 and friction[1] == pytest.approx(1.5)
    assert latency[0] == pytest.approx(0.0) and 0.025 - 0.002 <= latency[1] <= 0.025 + 0.002
    assert_valid(adr.randomization)


def test_boundary_update_logs_iterations():
    adr = BoundaryAdaptiveRandomization(make_dr(), buffer_size=1)
    assert adr.update() == "hold"
    adr.record(("latency", "high"), 1.0)
    assert adr.update(123.0) == "widen"
    adr.record(("latency", "high"), 0.0)
    assert adr.update() == "narrow"
    adr.record(("latency", "high"), 1.0)
    adr.record(("latency", "low"), 0.0)
    assert adr.update() == "mixed"
    assert len(adr.history) == 5 and adr.history[-1] == adr.randomization.ranges()


def test_boundary_state_round_trip_through_json():
    adr = BoundaryAdaptiveRandomization(make_dr(), buffer_size=4)
    rng = np.random.default_rng(3)
    for _ in range(300):
        conditions, probe = adr.sample(rng)
        adr.record(probe, float(rng.random() < 0.7))
    adr.update()
    state = json.loads(json.dumps(adr.state_dict(), allow_nan=False))
    resumed = BoundaryAdaptiveRandomization(make_dr(), buffer_size=4)
    resumed.load_state_dict(state)
    assert resumed.randomization.ranges() == adr.randomization.ranges()
    assert resumed.buffers == adr.buffers and resumed.moves == adr.moves and resumed.history == adr.history
    a, b = np.random.default_rng(4), np.random.default_rng(4)
    for _ in range(300):
        (ca, pa), (cb, pb) = adr.sample(a), resumed.sample(b)
        assert (ca, pa) == (cb, pb)
        success = float(ca["ground_friction"] > 0.5)
        adr.record(pa, success)
        resumed.record(pb, success)
    assert resumed.randomization.ranges() == adr.randomization.ranges()


def test_boundary_argument_errors():
    with pytest.raises(ValueError, match="t_low"):
        BoundaryAdaptiveRandomization(make_dr(), t_low=0.8, t_high=0.5)
    with pytest.raises(ValueError, match="buffer_size"):
        BoundaryAdaptiveRandomization(make_dr(), buffer_size=0)
    with pytest.raises(ValueError, match="probe_probability"):
        BoundaryAdaptiveRandomization(make_dr(), probe_probability=1.5)
    with pytest.raises(ValueError, match="steps given"):
        BoundaryAdaptiveRandomization(make_dr(), steps={"gyro_noise": 0.1})
    zero_width = Randomization.from_dict({"parameters": {"latency": {"uniform": [0.01, 0.01]}}})
    with pytest.raises(ValueError, match="zero width"):
        BoundaryAdaptiveRandomization(zero_width)
    assert BoundaryAdaptiveRandomization(zero_width, steps={"latency": 0.005}).steps == {"latency": 0.005}
    with pytest.raises(ValueError, match="unknown probe"):
        BoundaryAdaptiveRandomization(make_dr()).record(("latency", "middle"), 1.0)


def test_reference_configs_adapt_without_leaving_valid_conditions():
    rng = np.random.default_rng(5)
    for name in ("go2_reference", "panda_reference"):
        dr = load_randomization(name)
        widen = AdaptiveRandomization(dr, target_return=1.0)
        boundary = BoundaryAdaptiveRandomization(dr, buffer_size=1)
        for _ in range(100):
            widen.update(10.0)
            conditions, probe = boundary.sample(rng)
            boundary.record(probe, 1.0)
            for adapted in (widen.sample(rng)[0], conditions):
                for key, value in adapted.items():
                    PhysicalConditions.check(key, value)
        assert_valid(widen.randomization)
        assert_valid(boundary.randomization)
