"""Curricula: the schedules' numbers, the automatic rule, state and the config factory."""

from __future__ import annotations

import json

import pytest

from sim2real.train.curriculum import (
    AutomaticCurriculum,
    ConstantCurriculum,
    CurriculumError,
    LinearCurriculum,
    ReverseCurriculum,
    make_curriculum,
)


def test_linear_schedule():
    c = LinearCurriculum(0.2, 1.0, total_iterations=100)
    assert c.difficulty == 0.2
    assert [c.update(t) for t in (0, 25, 50, 100, 150)] == pytest.approx([0.2, 0.4, 0.6, 1.0, 1.0])
    assert c.difficulty == 1.0
    assert c.update(-5) == 0.2
    assert c.update(50, success_rate=0.0) == pytest.approx(0.6)  # the success rate is not its signal


def test_reverse_schedule():
    c = ReverseCurriculum(0.0, 1.0, total_iterations=100, hard_fraction=0.3)
    assert c.difficulty == 1.0
    times = (0, 30, 65, 100, 120)
    assert [c.update(t) for t in times] == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])
    always_hard = ReverseCurriculum(0.0, 1.0, 100, hard_fraction=1.0)
    assert [always_hard.update(t) for t in times] == [1.0] * len(times)
    descending = ReverseCurriculum(0.2, 0.6, 10, hard_fraction=0.0)
    assert [descending.update(t) for t in (0, 5, 10)] == pytest.approx([0.6, 0.4, 0.2])


def test_automatic_raises_lowers_holds_and_clips():
    c = AutomaticCurriculum(0.0, 0.25, step=0.1, raise_above=0.8, lower_below=0.5)
    assert c.difficulty == 0.0
    assert c.update(0, 0.9) == pytest.approx(0.1)
    assert c.update(1, 0.8) == pytest.approx(0.1)  # "above": the threshold itself holds
    assert c.update(2, 0.6) == pytest.approx(0.1)
    assert c.update(3, None) == pytest.approx(0.1)  # no measurement: hold
    assert c.update(4, 0.85) == pytest.approx(0.2)
    assert c.update(5, 1.0) == 0.25  # clipped at d_max
    assert c.update(6, 1.0) == 0.25
    assert c.update(7, 0.4) == pytest.approx(0.15)
    assert c.update(8, 0.5) == pytest.approx(0.15)  # "below": the threshold itself holds
    for t in range(9, 15):
        c.update(t, 0.0)
    assert c.difficulty == 0.0  # clipped at d_min
    assert AutomaticCurriculum(0.0, 1.0, 0.1, 0.8, 0.5, start=0.5).difficulty == 0.5


def test_constant():
    c = ConstantCurriculum(0.7)
    assert c.update(10, 0.0) == c.difficulty == 0.7


@pytest.mark.parametrize(
    "make, feed",
    [
        (lambda: LinearCurriculum(0.0, 1.0, 100), [(10, None), (40, None)]),
        (lambda: ReverseCurriculum(0.0, 1.0, 100, hard_fraction=0.2), [(10, None), (60, None)]),
        (lambda: AutomaticCurriculum(0.0, 1.0, 0.1, 0.8, 0.5), [(0, 0.9), (1, 0.9), (2, 0.95)]),
        (lambda: ConstantCurriculum(0.3), [(5, 1.0)]),
    ],
)
def test_state_round_trip(make, feed):
    c = make()
    for iteration, success in feed:
        c.update(iteration, success)
    state = json.loads(json.dumps(c.state_dict()))
    resumed = make()
    resumed.load_state_dict(state)
    assert resumed.difficulty == c.difficulty
    assert resumed.update(70, 0.9) == c.update(70, 0.9)


def test_state_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="cannot be loaded"):
        LinearCurriculum(0, 1, 10).load_state_dict(ReverseCurriculum(0, 1, 10).state_dict())


def test_constructor_errors():
    with pytest.raises(ValueError, match="d_min <= d_max"):
        LinearCurriculum(1.0, 0.0, 10)
    with pytest.raises(ValueError, match="total_iterations"):
        LinearCurriculum(0.0, 1.0, 0)
    with pytest.raises(ValueError, match="hard_fraction"):
        ReverseCurriculum(0.0, 1.0, 10, hard_fraction=1.5)
    with pytest.raises(ValueError, match="step"):
        AutomaticCurriculum(0.0, 1.0, step=0.0, raise_above=0.8, lower_below=0.5)
    with pytest.raises(ValueError, match="lower_below"):
        AutomaticCurriculum(0.0, 1.0, step=0.1, raise_above=0.5, lower_below=0.8)
    with pytest.raises(ValueError, match="start"):
        AutomaticCurriculum(0.0, 1.0, step=0.1, raise_above=0.8, lower_below=0.5, start=2.0)


# ------------------------------------------------------------------- factory
def test_factory_builds_each_kind():
    linear = make_curriculum({"kind": "linear", "d_min": 0.1, "d_max": 0.9, "total_iterations": 50})
    assert isinstance(linear, LinearCurriculum) and linear.update(25) == pytest.approx(0.5)
    reverse = make_curriculum({"kind": "reverse", "hard_fraction": 0.5}, total_iterations=100)
    assert isinstance(reverse, ReverseCurriculum) and reverse.update(75) == pytest.approx(0.5)
    automatic = make_curriculum({"kind": "automatic", "step": 0.2, "raise_above": 0.7, "lower_below": 0.3})
    assert isinstance(automatic, AutomaticCurriculum) and automatic.update(0, 0.9) == pytest.approx(0.2)
    none = make_curriculum({"kind": "none"})
    assert isinstance(none, ConstantCurriculum) and none.difficulty == 1.0
    assert make_curriculum(None).difficulty == 1.0
    assert make_curriculum({"kind": "none", "difficulty": 0.4}).difficulty == 0.4


def test_factory_takes_total_iterations_from_the_config_first():
    c = make_curriculum({"kind": "linear", "total_iterations": 10}, total_iterations=1000)
    assert c.total_iterations == 10
    assert make_curriculum({"kind": "linear"}, total_iterations=1000).total_iterations == 1000


@pytest.mark.parametrize(
    "config, field, problem",
    [
        ({"kind": "cosine"}, "curriculum.kind", "unknown kind 'cosine'"),
        ({"d_max": 1.0}, "curriculum.kind", "missing 'kind'"),
        ({"kind": "linear", "total_iterations": 10, "speed": 2}, "curriculum.speed", "unknown field"),
        ({"kind": "none", "step": 0.1}, "curriculum.step", "unknown field"),
        ({"kind": "linear"}, "curriculum.total_iterations", "missing"),
        ({"kind": "automatic", "step": 0.1, "raise_above": 0.8}, "curriculum.lower_below", "missing"),
        (
            {"kind": "automatic", "step": "big", "raise_above": 0.8, "lower_below": 0.5},
            "curriculum.step",
            "finite number",
        ),
        ({"kind": "linear", "total_iterations": 10, "d_min": 1.0, "d_max": 0.0}, "curriculum", "d_min <= d_max"),
        ({"kind": "linear", "total_iterations": 10.5}, "curriculum", "total_iterations"),
        (["linear"], "curriculum", "expected a mapping"),
    ],
)
def test_factory_errors_name_the_field_and_the_fix(config, field, problem):
    with pytest.raises(CurriculumError) as caught:
        make_curriculum(config, source="configs/go2_walk.yaml")
    message = str(caught.value)
    assert caught.value.field == field and isinstance(caught.value, ValueError)
    assert message.startswith(f"configs/go2_walk.yaml: {field}: ") and problem in message and "Fix:" in message


def test_a_finished_line_resumed_into_a_longer_run_stays_where_it_ended():
    """`sim2real train --resume model_100.pt --iterations 200`: the line is the one the run was on."""
    finished = make_curriculum({"kind": "linear"}, total_iterations=100)
    finished.update(100)
    longer = make_curriculum({"kind": "linear"}, total_iterations=200)
    longer.load_state_dict(json.loads(json.dumps(finished.state_dict())))
    assert longer.difficulty == 1.0 and longer.update(150) == 1.0
    reverse = make_curriculum({"kind": "reverse", "hard_fraction": 0.5}, total_iterations=100)
    reverse.update(60)
    resumed = make_curriculum({"kind": "reverse", "hard_fraction": 0.5}, total_iterations=200)
    resumed.load_state_dict(reverse.state_dict())
    assert resumed.difficulty == pytest.approx(reverse.difficulty)
