"""Domain randomization configs: samplers against their distributions, validity in a real
world, reproducibility, the reference YAMLs, serialisation and config errors (no ROS)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from sim2real.core.robot_profile import load_profile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.randomization import (
    NOMINAL,
    Distribution,
    PushSpec,
    Randomization,
    RandomizationError,
    available_randomizations,
    load_randomization,
    physical_bounds,
)
from sim2real.sim.world import SimWorld

N = 4000
P_MIN = 0.01  # fixed seeds: a KS p-value below this would be a real mismatch, not bad luck


@pytest.fixture(scope="module")
def go2_dr():
    return load_randomization("go2_reference")


@pytest.fixture(scope="module")
def panda_dr():
    return load_randomization("panda_reference")


def draws(dist: Distribution, seed: int = 0, n: int = N) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([dist.sample(rng) for _ in range(n)])


# ------------------------------------------------------------------ samplers
def test_uniform_sampler_matches_uniform():
    samples = draws(Distribution.uniform(0.3, 1.2, (0.0, 2.0)))
    assert samples.min() >= 0.3 and samples.max() <= 1.2
    assert stats.kstest(samples, stats.uniform(loc=0.3, scale=0.9).cdf).pvalue > P_MIN


def test_loguniform_sampler_matches_reciprocal():
    samples = draws(Distribution.loguniform(0.8, 1.25, (0.5, 2.0)), seed=1)
    assert samples.min() >= 0.8 and samples.max() <= 1.25
    assert stats.kstest(samples, stats.loguniform(0.8, 1.25).cdf).pvalue > P_MIN
    # and not merely uniform: the log-uniform median is the geometric mean
    assert np.median(samples) == pytest.approx(1.0, abs=0.02)


def test_normal_sampler_is_clipped_to_bounds_and_normal_inside():
    mean, std, bounds = 1.0, 0.08, (0.9, 1.1)  # bounds at +-1.25 std: the clip matters
    samples = draws(Distribution.normal(mean, std, bounds), seed=2)
    assert samples.min() == 0.9 and samples.max() == 1.1
    # The clip puts each tail's mass exactly on the bound ...
    tail = stats.norm.cdf(-1.25)
    for bound in bounds:
        count = int(np.sum(samples == bound))
        assert stats.binomtest(count, N, tail).pvalue > P_MIN
    # ... and inside, a clipped normal is the normal truncated to the bounds.
    inside = samples[(samples > 0.9) & (samples < 1.1)]
    truncated = stats.truncnorm(-1.25, 1.25, loc=mean, scale=std)
    assert stats.kstest(inside, truncated.cdf).pvalue > P_MIN


def test_unclipped_normal_matches_normal():
    samples = draws(Distribution.normal(1.0, 0.08, (0.0, 5.0)), seed=3)
    assert stats.kstest(samples, stats.norm(loc=1.0, scale=0.08).cdf).pvalue > P_MIN


def test_constant_sampler():
    assert set(draws(Distribution.constant(0.01, (0.0, 1.0)), n=10)) == {0.01}


def test_reference_samples_follow_their_configured_distributions(go2_dr):
    rng = np.random.default_rng(4)
    episodes = [go2_dr.sample(rng) for _ in range(N)]
    for name, dist in go2_dr.parameters.items():
        values = np.array([e[name] for e in episodes])
        if dist.kind == "uniform":
            reference = stats.uniform(loc=dist.low, scale=dist.high - dist.low).cdf
        elif dist.kind == "loguniform":
            reference = stats.loguniform(dist.low, dist.high).cdf
        else:  # the reference normal's bounds lie beyond 3.75 std: the clip is invisible here
            reference = stats.norm(loc=dist.mean, scale=dist.std).cdf
        assert stats.kstest(values, reference).pvalue > P_MIN, name


# ---------------------------------------------------------- physical validity
@pytest.mark.parametrize("name", ["go2_reference", "panda_reference"])
def test_every_sample_and_every_bound_is_a_valid_condition(name):
    dr = load_randomization(name)
    rng = np.random.default_rng(5)
    edges = dr.with_ranges({n: d.bounds for n, d in dr.parameters.items()})
    for randomization in (dr, edges):
        for _ in range(500):
            for key, value in randomization.sample(rng).items():
                assert PhysicalConditions.check(key, value) == value


@pytest.mark.parametrize("robot, name", [("go2", "go2_reference"), ("panda", "panda_reference")])
def test_a_real_world_accepts_sampled_conditions(robot, name):
    dr = load_randomization(name)
    rng = np.random.default_rng(6)
    widest = dr.with_ranges({n: d.bounds for n, d in dr.parameters.items()})
    world = SimWorld(load_profile(robot), seed=1)
    try:
        for randomization in (dr, dr, widest):
            values = randomization.sample(rng)
            world.set_conditions(**values)
            world.reset()
            world.step(5)
            applied = world.conditions
            assert {k: getattr(applied, k) for k in values} == values
        if dr.pushes is not None:
            world.apply_push(dr.pushes.sample_force(rng), dr.pushes.duration)
            world.step(5)
    finally:
        world.close()


def test_default_bounds_are_the_physically_valid_range():
    dr = Randomization.from_dict(
        {"parameters": {"mass_scale": {"uniform": [0.9, 1.1]}, "latency": {"uniform": [0.0, 0.01]}}}
    )
    assert dr.parameters["latency"].bounds == (0.0, math.inf)
    low, high = dr.parameters["mass_scale"].bounds  # valid range (0, inf): open at 0
    assert 0.0 < low < 1e-300 and high == math.inf
    assert physical_bounds("mass_scale") == (low, high)
    wide = dr.with_ranges({"mass_scale": (-1.0, 2.0)})
    assert PhysicalConditions.check("mass_scale", wide.parameters["mass_scale"].low) > 0


# ------------------------------------------------------------ reproducibility
def test_seeded_sampling_is_reproducible_and_seeds_differ(go2_dr):
    a, b, c = (np.random.default_rng(s) for s in (7, 7, 8))
    first = [go2_dr.sample(a) for _ in range(20)]
    assert first == [go2_dr.sample(b) for _ in range(20)]
    assert first != [go2_dr.sample(c) for _ in range(20)]


def test_sampling_does_not_depend_on_the_yaml_order(go2_dr):
    data = go2_dr.to_dict()
    data["parameters"] = dict(reversed(list(data["parameters"].items())))
    shuffled = Randomization.from_dict(data)
    assert go2_dr.sample(np.random.default_rng(9)) == shuffled.sample(np.random.default_rng(9))


def test_pushes_sample_horizontal_forces_in_every_direction(go2_dr):
    pushes = go2_dr.pushes
    rng = np.random.default_rng(10)
    forces = np.array([pushes.sample_force(rng) for _ in range(N)])
    assert forces.shape == (N, 3) and np.all(forces[:, 2] == 0)
    magnitudes = np.linalg.norm(forces, axis=1)
    assert stats.kstest(magnitudes, stats.uniform(loc=50.0, scale=50.0).cdf).pvalue > P_MIN
    headings = np.arctan2(forces[:, 1], forces[:, 0])
    assert stats.kstest(headings, stats.uniform(loc=-math.pi, scale=2 * math.pi).cdf).pvalue > P_MIN
    intervals = [pushes.sample_interval(rng) for _ in range(200)]
    assert 5.0 <= min(intervals) and max(intervals) <= 10.0


def test_push_strength_matches_its_documented_velocity_change(go2_dr):
    # The YAML promises 0.5-1.0 m/s on a free 15 kg body: F * t / m.
    pushes, mass = go2_dr.pushes, load_profile("go2").spec_mass
    assert pushes.force[0] * pushes.duration / mass == pytest.approx(0.5)
    assert pushes.force[1] * pushes.duration / mass == pytest.approx(1.0)


# ------------------------------------------------------------ reference files
def test_reference_files_load():
    assert {"go2_reference", "panda_reference", "nominal"} <= set(available_randomizations())
    for name in available_randomizations():
        assert load_randomization(name).name == name


def test_reference_contents(go2_dr, panda_dr):
    p = go2_dr.parameters
    assert (p["ground_friction"].kind, p["ground_friction"].range()) == ("uniform", (0.3, 1.2))
    assert (p["mass_scale"].kind, p["mass_scale"].range()) == ("loguniform", (0.8, 1.25))
    assert (p["motor_strength"].kind, p["motor_strength"].mean, p["motor_strength"].std) == ("normal", 1.0, 0.08)
    assert p["latency"].range() == (0.0, 0.025)
    assert p["terrain_roughness"].range() == (0.0, 0.15)
    assert p["battery_voltage"].range() == (22.0, 25.2)
    # Every condition but armature, which the reference leaves at the URDF's (none) until it
    # is identified on the robot (sim2real sysid fit, then dr from-sysid).
    assert set(p) == set(PhysicalConditions.names()) - {"armature"}
    assert go2_dr.pushes == PushSpec((5.0, 10.0), (50.0, 100.0), 0.15)
    assert not {"terrain_roughness", "battery_voltage", "ground_friction"} & set(panda_dr.parameters)
    assert panda_dr.pushes is None
    nominal = load_randomization("nominal")
    assert nominal.parameters == {} and nominal.pushes is None
    assert nominal.sample(np.random.default_rng(0)) == NOMINAL.sample(np.random.default_rng(0)) == {}


def test_load_by_path(tmp_path, go2_dr):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"parameters": {"latency": {"uniform": [0.0, 0.01]}}}))
    dr = load_randomization(path)
    assert dr.name == "mine" and dr.source == path
    assert load_randomization(str(go2_dr.source)).parameters == go2_dr.parameters


# ----------------------------------------------------- ranges and serialisation
def test_ranges(go2_dr):
    ranges = go2_dr.ranges()
    assert ranges["motor_strength"] == pytest.approx((1.0 - 0.16, 1.0 + 0.16))
    assert ranges["ground_friction"] == (0.3, 1.2)


def test_normal_range_is_clipped_to_bounds():
    dist = Distribution.normal(1.0, 0.2, (0.7, 1.3))
    assert dist.range() == (0.7, 1.3)


def test_with_ranges_returns_a_new_clipped_randomization(go2_dr):
    moved = go2_dr.with_ranges({"ground_friction": (0.1, 5.0), "motor_strength": (0.9, 1.3), "mass_scale": (0.9, 1.1)})
    assert go2_dr.ranges()["ground_friction"] == (0.3, 1.2)  # the original is untouched
    assert moved.ranges()["ground_friction"] == (0.1, 2.0)  # clipped to bounds [0.05, 2.0]
    normal = moved.parameters["motor_strength"]
    assert (normal.kind, normal.mean, normal.std) == ("normal", pytest.approx(1.1), pytest.approx(0.1))
    assert moved.parameters["mass_scale"].kind == "loguniform"
    assert moved.ranges()["latency"] == go2_dr.ranges()["latency"]
    assert moved.pushes == go2_dr.pushes
    with pytest.raises(ValueError, match="not randomized"):
        go2_dr.with_ranges({"gravity": (0, 1)})
    with pytest.raises(ValueError, match="above high"):
        go2_dr.with_ranges({"latency": (0.02, 0.01)})
    constant = Randomization.from_dict({"parameters": {"latency": {"constant": 0.01}}})
    with pytest.raises(ValueError, match="declare it uniform"):
        constant.with_ranges({"latency": (0.0, 0.02)})


@pytest.mark.parametrize("name", ["go2_reference", "panda_reference", "nominal"])
def test_to_dict_round_trips_through_json_and_yaml(name, tmp_path):
    dr = load_randomization(name).with_ranges({})
    text = json.dumps(dr.to_dict(), allow_nan=False)  # strict JSON: ONNX metadata, checkpoints
    back = Randomization.from_dict(json.loads(text))
    assert (back.name, back.parameters, back.pushes) == (dr.name, dr.parameters, dr.pushes)
    path = tmp_path / "saved.yaml"
    path.write_text(yaml.safe_dump(dr.to_dict()))
    again = load_randomization(path)
    assert (again.name, again.parameters, again.pushes) == (dr.name, dr.parameters, dr.pushes)


def test_adapted_ranges_and_unbounded_parameters_round_trip(go2_dr):
    adapted = go2_dr.with_ranges({"motor_strength": (0.95, 1.25), "mass_scale": (0.85, 1.5)})
    back = Randomization.from_dict(json.loads(json.dumps(adapted.to_dict(), allow_nan=False)))
    for name, interval in adapted.ranges().items():
        assert back.ranges()[name] == pytest.approx(interval), name
    open_ended = Randomization.from_dict({"parameters": {"latency": {"uniform": [0.0, 0.01]}}})
    data = open_ended.to_dict()
    assert data["parameters"]["latency"]["bounds"] == [0.0, None]
    assert Randomization.from_dict(json.loads(json.dumps(data))).parameters == open_ended.parameters


# ------------------------------------------------------------------- errors
BAD = {
    "unknown parameter": (
        {"parameters": {"gravity": {"uniform": [0, 1]}}},
        "parameters.gravity",
        "unknown physical condition",
    ),
    "low above high": (
        {"parameters": {"latency": {"uniform": [0.02, 0.01]}}},
        "parameters.latency.uniform",
        "above high",
    ),
    "bad kind": (
        {"parameters": {"latency": {"gaussian": [0.0, 0.01]}}},
        "parameters.latency.gaussian",
        "unknown field",
    ),
    "no distribution": ({"parameters": {"latency": {"bounds": [0.0, 0.1]}}}, "parameters.latency", "no distribution"),
    "two distributions": (
        {"parameters": {"latency": {"uniform": [0, 0.1], "constant": 0.0}}},
        "parameters.latency",
        "several distributions",
    ),
    "range outside bounds": (
        {"parameters": {"ground_friction": {"uniform": [0.3, 1.2], "bounds": [0.5, 2.0]}}},
        "parameters.ground_friction.uniform",
        "outside the bounds",
    ),
    "range outside valid range": (
        {"parameters": {"latency": {"uniform": [-0.01, 0.01]}}},
        "parameters.latency.uniform",
        "outside the bounds",
    ),
    "bounds outside valid range": (
        {"parameters": {"mass_scale": {"uniform": [0.9, 1.1], "bounds": [0.0, 2.0]}}},
        "parameters.mass_scale.bounds",
        "physically valid range",
    ),
    "bounds reversed": (
        {"parameters": {"latency": {"uniform": [0.0, 0.01], "bounds": [0.1, 0.0]}}},
        "parameters.latency.bounds",
        "above max",
    ),
    "normal mean outside bounds": (
        {"parameters": {"motor_strength": {"normal": {"mean": 2.0, "std": 0.1}, "bounds": [0.5, 1.5]}}},
        "parameters.motor_strength.normal.mean",
        "outside the bounds",
    ),
    "normal std negative": (
        {"parameters": {"motor_strength": {"normal": {"mean": 1.0, "std": -0.1}}}},
        "parameters.motor_strength.normal.std",
        "must be >= 0",
    ),
    "normal missing std": (
        {"parameters": {"motor_strength": {"normal": {"mean": 1.0}}}},
        "parameters.motor_strength.normal.std",
        "missing",
    ),
    "loguniform from zero": (
        {"parameters": {"latency": {"loguniform": [0.0, 0.01]}}},
        "parameters.latency.loguniform",
        "low must be > 0",
    ),
    "not a number": (
        {"parameters": {"latency": {"uniform": ["a", 0.01]}}},
        "parameters.latency.uniform",
        "finite number",
    ),
    "not a pair": (
        {"parameters": {"latency": {"uniform": [0.01]}}},
        "parameters.latency.uniform",
        "expected [low, high]",
    ),
    "parameter not a mapping": ({"parameters": {"latency": 0.01}}, "parameters.latency", "expected a mapping"),
    "parameters not a mapping": ({"parameters": ["latency"]}, "parameters", "expected a mapping"),
    "file not a mapping": (["parameters"], "(file)", "expected a mapping"),
    "unknown top-level field": ({"parameters": {}, "pusehs": None}, "pusehs", "unknown field"),
    "unknown push field": (
        {"pushes": {"interval": [5, 10], "force": [50, 100], "duration": 0.1, "torque": 1}},
        "pushes.torque",
        "unknown field",
    ),
    "push missing duration": ({"pushes": {"interval": [5, 10], "force": [50, 100]}}, "pushes.duration", "missing"),
    "push interval zero": (
        {"pushes": {"interval": [0, 10], "force": [50, 100], "duration": 0.1}},
        "pushes.interval",
        "must be > 0",
    ),
    "push force reversed": (
        {"pushes": {"interval": [5, 10], "force": [100, 50], "duration": 0.1}},
        "pushes.force",
        "above high",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_yaml_names_file_field_and_fix(case, tmp_path):
    data, field, problem = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RandomizationError) as caught:
        load_randomization(path)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.source == str(path) and error.field == field
    message = str(error)
    assert str(path) in message and field in message and problem in message and "Fix:" in message


def test_yaml_syntax_error_and_missing_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("parameters: {latency: [")
    with pytest.raises(RandomizationError, match="(?s)not valid YAML.*Fix:"):
        load_randomization(path)
    with pytest.raises(RandomizationError, match="no randomization named 'no_such_dr'.*Fix: use one of"):
        load_randomization("no_such_dr")


def test_from_dict_errors_name_the_given_source():
    with pytest.raises(RandomizationError, match=r"^checkpoint\.pt: parameters\.gravity: .*Fix:"):
        Randomization.from_dict({"parameters": {"gravity": {"constant": 1}}}, source="checkpoint.pt")
    with pytest.raises(RandomizationError, match=r"^<dict>: "):
        Randomization.from_dict({"parameters": {"gravity": {"constant": 1}}})


def test_unbounded_bounds_may_be_written_as_null_or_inf(tmp_path):
    path = tmp_path / "open.yaml"
    path.write_text("parameters:\n  latency: {uniform: [0.0, 0.01], bounds: [null, .inf]}\n")
    assert load_randomization(path).parameters["latency"].bounds == (0.0, math.inf)


def test_reference_yaml_comments_every_field():
    """Every parameter and push line carries a comment (units and source)."""
    for name in ("go2_reference", "panda_reference"):
        path = Path(load_randomization(name).source)
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and stripped != "parameters:":
                assert "#" in line, f"{path.name}: uncommented line {line!r}"


def test_a_normal_narrowed_to_its_centre_round_trips():
    """Adaptive randomization can collapse a range onto its centre: std 0 must save and load."""
    from sim2real.sim.randomization import Distribution, Randomization

    collapsed = Randomization("r", {"motor_strength": Distribution.normal(1.0, 0.0, (0.7, 1.3))}, None, None)
    again = Randomization.from_dict(collapsed.to_dict())
    assert again.sample(np.random.default_rng(0)) == {"motor_strength": 1.0}
