"""`sim2real eval --suite ... --ablate`: a world set's draw run again with one group of
conditions nominal, to say which condition costs a scenario."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sim2real.cli.main import main
from sim2real.evaluate.ablation import CONDITION_GROUPS, ablated_name, attribution_line, changed_groups, without_group
from sim2real.evaluate.evaluate import EvaluationError, WorldSet
from sim2real.evaluate.suite import EpisodeOutcome, ScenarioResult, SuiteReport, _world_runs, evaluate_suite
from sim2real.sim.conditions import PhysicalConditions

# Motors at 30 % of their strength cannot hold a Go2 up (at 85 %, and 20 % heavier, its stand sags
# 0.58 rad at a rear calf); a grippier floor changes nothing for a robot that stands: only the
# motors cost the stand.
WEAK_MOTORS = """
name: weak_motors
parameters:
  motor_strength: {constant: 0.3}
  ground_friction: {constant: 1.0}
"""
# Latency drawn from a normal clipped at 0: seed 3 draws 20 ms, seed 4 none.
SOMETIMES_LATE = """
name: weak_sometimes_late
parameters:
  motor_strength: {constant: 0.3}
  latency: {normal: {mean: 0.0, std: 0.01}, bounds: [0.0, 0.02]}
"""


def test_the_groups_name_every_condition_once():
    names = [name for group in CONDITION_GROUPS.values() for name in group]
    assert sorted(names) == sorted(PhysicalConditions.names())


def test_a_group_is_changed_only_by_a_value_away_from_nominal():
    nominal = dataclasses.asdict(PhysicalConditions())
    assert changed_groups(nominal) == []
    assert changed_groups({}) == []
    drawn = {"terrain_roughness": 0.04, "mass_scale": 1.0, "battery_voltage": 23.0, "gyro_noise": 0.1}
    assert changed_groups(drawn) == ["terrain", "motors", "sensor noise"]
    assert without_group(drawn, "motors") == {"terrain_roughness": 0.04, "mass_scale": 1.0, "gyro_noise": 0.1}
    assert ablated_name("go2_reference", "joint losses") == "go2_reference minus joint losses"


def test_the_attribution_line_puts_the_groups_that_pass_most_first():
    line = attribution_line("go2_reference", 4, {"mass": 4, "terrain": 12, "latency": 5}, 13)
    assert line == "go2_reference: 4/13 pass as drawn; with terrain nominal 12, latency nominal 5, mass nominal 4"


class _Draws:
    """A world set's randomization interface over fixed draws, one per episode in order."""

    pushes = None

    def __init__(self, draws):
        self.draws = list(draws)

    def sample(self, rng):
        return dict(self.draws.pop(0))


def test_an_ablation_plans_only_the_episodes_whose_draw_changed_its_group():
    world = WorldSet("drawn", _Draws([{"terrain_roughness": 0.05, "latency": 0.01}, {"latency": 0.02}]))
    nominal = WorldSet("nominal", None)
    runs = _world_runs([nominal, world], 2, 0, "pybullet", None, {}, ablate=True)
    assert [run.name for run in runs] == ["nominal", "drawn", "drawn minus terrain", "drawn minus latency"]
    terrain, latency = runs[2], runs[3]
    assert terrain.source == latency.source == 1 and (terrain.group, latency.group) == ("terrain", "latency")
    assert terrain.conditions == [{"latency": 0.01}, None]  # episode 1 drew flat ground: the draw's own
    assert latency.conditions == [{"terrain_roughness": 0.05}, {}]


def test_ablate_refuses_world_sets_with_nothing_to_ablate_and_names_that_clash(holding_policy, short_suite, tmp_path):
    with pytest.raises(EvaluationError, match="nothing to ablate.*Fix: add a randomized world set"):
        evaluate_suite(holding_policy, short_suite, ["nominal", "reality:go2_independent"], workers=0, ablate=True)
    clash = tmp_path / "weak_motors minus motors.yaml"
    clash.write_text(WEAK_MOTORS)
    (tmp_path / "weak_motors.yaml").write_text(WEAK_MOTORS)
    with pytest.raises(
        EvaluationError, match="has the name --ablate gives .weak_motors. with its motors nominal.*Fix: rename"
    ):
        evaluate_suite(
            holding_policy, short_suite, [str(tmp_path / "weak_motors.yaml"), str(clash)], workers=0, ablate=True
        )


def test_weak_motors_fail_the_stand_and_the_ablation_says_it_is_the_motors(
    holding_policy, short_suite, tmp_path, capsys, monkeypatch
):
    world = tmp_path / "weak_motors.yaml"
    world.write_text(WEAK_MOTORS)
    monkeypatch.chdir(tmp_path)
    code = main(
        ["eval", str(holding_policy), "--suite", str(short_suite), "--worlds", str(world), "--ablate"]
        + ["--scenarios", "stand_still", "--workers", "0", "--no-progress", "--no-plot", "--require-pass"]
    )
    out = capsys.readouterr().out
    assert code == 1  # the world set asked for fails: the ablations do not make it pass
    rows = {line.split("  ")[0]: line for line in out.splitlines() if line.startswith("weak_motors")}
    assert "FAIL" in rows["weak_motors"]
    assert rows["weak_motors minus motors"].rstrip().endswith("pass")
    assert "FAIL" in rows["weak_motors minus ground friction"]
    assert "0/1 scenario runs pass of the world sets asked for" in out
    assert "weak_motors: 0/1 pass as drawn; with motors nominal 1, ground friction nominal 0" in out
    data = json.loads((tmp_path / "runs" / "eval" / "hold_go2_short_pybullet.json").read_text())
    assert data["ablation_passes"] == {"weak_motors": {"as drawn": 0, "ground friction": 0, "motors": 1}}
    assert data["ablated"]["weak_motors minus motors"] == ["weak_motors", "motors"]
    conditions = {r["world"]: r["episodes"][0]["conditions"] for r in data["results"]}
    assert conditions["weak_motors minus motors"] == {"ground_friction": 1.0}


def _result(world: str, passed: bool) -> ScenarioResult:
    outcome = EpisodeOutcome(0, False, "", 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.3, 0.3, 0.0, 0.01, 0.0)
    return ScenarioResult("stand_still", world, (0.0, 0.0, 0.0), [outcome], [] if passed else ["drift 0.1 > 0.05"])


def test_an_ablation_that_fails_does_not_fail_the_world_set_asked_for():
    """A group put back to nominal can make a draw harder (a heavy robot whose strong motors
    carried it): the policy is judged on the world sets asked for."""
    report = SuiteReport(
        "hold.onnx",
        "0" * 64,
        "go2_short",
        "pybullet",
        None,
        0,
        1,
        ["drawn"],
        [_result("drawn", True), _result("drawn minus motors", False)],
        ablated={"drawn minus motors": ("drawn", "motors")},
    )
    assert report.passed and [r.world for r in report.measured] == ["drawn"]
    assert report.ablation_passes() == {"drawn": {"as drawn": 1, "motors": 0}}
    assert "1/1 scenario runs pass of the world sets asked for" in report.table()


def test_an_episode_whose_draw_left_a_group_nominal_is_the_source_world_sets_own(holding_policy, short_suite, tmp_path):
    world = tmp_path / "weak_sometimes_late.yaml"
    world.write_text(SOMETIMES_LATE)
    totals = []
    report = evaluate_suite(
        holding_policy,
        short_suite,
        [str(world)],
        episodes=2,
        seed=3,
        workers=0,
        scenarios=["stand_still"],
        ablate=True,
        progress=lambda done, total: totals.append(total),
    )
    runs = {r.world: r for r in report.results}
    drawn, late = runs["weak_sometimes_late"], runs["weak_sometimes_late minus latency"]
    assert [e.conditions["latency"] for e in drawn.episodes] == [0.02, 0.0]
    # two episodes as drawn, two with the motors nominal, one with the latency nominal: the second
    # episode drew no latency, so its run as drawn stands for it
    assert totals[-1] == 5
    assert "latency" not in late.episodes[0].conditions
    copy, source = late.episodes[1], drawn.episodes[1]
    assert copy == source and copy is not source and copy.conditions is not source.conditions
