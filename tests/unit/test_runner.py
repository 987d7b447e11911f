"""The PPO runner on the toy task: checkpoints, resume, curriculum/ADR state, the rsl_rl contract."""

from __future__ import annotations

import contextlib
import io
import os
from functools import partial
from pathlib import Path

import pytest
import torch

from sim2real.train.checkpoint import (
    FORMAT,
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    warm_start,
)
from sim2real.train.rsl_rl_env import RslRlVecEnv
from sim2real.train.runner import Trainer, TrainingError, env_seed, linear_rate, summary, update_threads
from sim2real.train.train_config import TrainConfigError, load_train_config, override_config, rsl_rl_config
from sim2real.train.vec_env import ProcessVecEnv
from tests.unit.toy_env import make_toy, make_toy_task, toy_training_config, write_toy_randomization


@pytest.fixture
def toy_config(tmp_path):
    return toy_training_config(tmp_path)


def test_run_writes_checkpoints_with_everything_export_and_resume_need(toy_config, tmp_path):
    result = Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run()
    assert result.iterations == 3 and not result.interrupted
    assert sorted(p.name for p in (tmp_path / "run").glob("model_*.pt")) == ["model_1.pt", "model_2.pt", "model_3.pt"]
    assert list((tmp_path / "run").glob("events.out.tfevents.*"))
    checkpoint = load_checkpoint(result.checkpoint)
    assert checkpoint["format"] == FORMAT and checkpoint["iteration"] == checkpoint["iter"] == 3
    assert (checkpoint["robot"], checkpoint["task"]) == ("toy", "reach")
    interface = checkpoint["interface"]
    assert interface["joint_names"] == ["slider"] and interface["observation_size"] == 2
    assert interface["action_scale"] == [0.1] and interface["control_period"] == 0.02
    assert interface["task_config"]["goal"] == 1.0 and interface["max_episode_steps"] == 20
    assert checkpoint["training_config"]["num_envs"] == 4
    assert checkpoint["rsl_rl_config"]["algorithm"]["learning_rate"] == 3e-4
    # 4 envs x 8 steps x 3 iterations: the 4 first episodes (20 steps) end in iteration 3, at
    # full difficulty, so ADR decides once (widen: any return beats -100).
    low, high = checkpoint["randomization"]["parameters"]["motor_strength"]["uniform"]
    assert low < 0.9 and high > 1.1
    assert checkpoint["adr"]["decisions"] == ["widen"]
    assert checkpoint["curriculum"] == {"kind": "linear", "difficulty": 1.0, "iteration": 3, "total_iterations": 2}
    assert checkpoint["source"]["commit"] != ""
    assert "checkpoint:" in summary(result) and "sim2real export" in summary(result)


def test_adr_holds_until_the_curriculum_is_at_its_hardest(toy_config, tmp_path):
    toy_config["curriculum"]["total_iterations"] = 10
    checkpoint = load_checkpoint(
        Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    )
    assert checkpoint["adr"]["decisions"] == []
    assert checkpoint["randomization"]["parameters"]["motor_strength"]["uniform"] == [0.9, 1.1]


def test_adr_acts_at_the_end_of_a_line_that_rounds_below_d_max(toy_config, tmp_path):
    """0.2 + 1.0 * (0.9 - 0.2) is 0.8999999999999999: ADR must still see the hardest difficulty."""
    toy_config["curriculum"].update(d_min=0.2, d_max=0.9)
    checkpoint = load_checkpoint(
        Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    )
    assert checkpoint["adr"]["decisions"] == ["widen"]


def test_adr_with_a_linear_curriculum_that_ends_with_the_run_is_refused(toy_config):
    with pytest.raises(
        TrainConfigError,
        match=r"curriculum.total_iterations: .*ADR \(which waits for d_max\) "
        r"would never act.*Fix: set curriculum.total_iterations below",
    ):
        override_config(toy_config, {"curriculum": {"kind": "linear", "d_min": 0.5, "d_max": 1.0}})


def test_neighbouring_seeds_share_no_env_streams_and_seed_0_keeps_its_own():
    assert [env_seed(0, 0, 16) + i for i in range(3)] == [0, 1, 2]  # the shipped runs' seeds, unchanged
    assert env_seed(0, 5, 16) == 80  # a resume moves on by the env steps' worth of seeds, as before
    seeds = {s: set(range(env_seed(s, 0, 16), env_seed(s, 0, 16) + 16)) for s in range(4)}
    assert all(not seeds[a] & seeds[b] for a in seeds for b in seeds if a < b)


def test_a_resume_into_another_runs_folder_is_refused(toy_config, tmp_path):
    Trainer(toy_config, tmp_path / "a", make_env=make_toy_task, progress=False).run()
    Trainer(toy_config, tmp_path / "b", make_env=make_toy_task, progress=False).run()
    with pytest.raises(TrainingError, match="holds another training run .*would mix the two runs"):
        Trainer(
            toy_config, tmp_path / "b", resume=tmp_path / "a" / "model_3.pt", make_env=make_toy_task, progress=False
        ).check_out()
    Trainer(
        toy_config, tmp_path / "a", resume=tmp_path / "a" / "model_3.pt", make_env=make_toy_task, progress=False
    ).check_out()  # its own folder: fine


def test_resume_continues_the_run_and_its_state(toy_config, tmp_path):
    out = tmp_path / "run"
    Trainer(toy_config, out, make_env=make_toy_task, progress=False).run()
    first = load_checkpoint(out / "model_3.pt")
    more = override_config(first["training_config"], {"iterations": 6})
    result = Trainer(more, out, resume=out / "model_3.pt", make_env=make_toy_task, progress=False).run()
    assert (result.start_iteration, result.iterations) == (3, 6)
    assert latest_checkpoint(out).name == "model_6.pt"
    resumed = load_checkpoint(out / "model_6.pt")
    assert resumed["curriculum"]["iteration"] == 6
    assert resumed["adr"]["history"][:2] == first["adr"]["history"]  # continued, not restarted
    assert len(resumed["adr"]["decisions"]) == 2
    assert not torch.equal(resumed["actor_state_dict"]["mlp.0.weight"], first["actor_state_dict"]["mlp.0.weight"])


def test_warm_start_fine_tunes_under_a_new_config_and_counts_on(toy_config, tmp_path):
    Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run()
    first = load_checkpoint(tmp_path / "run" / "model_3.pt")
    wider = write_toy_randomization(tmp_path / "wider.yaml", 0.5, 1.5)
    config = override_config(
        toy_config, {"iterations": 5, "randomization": str(wider), "adr.enabled": False, "ppo.learning_rate": 1e-4}
    )
    warm = save_checkpoint(
        tmp_path / "ft" / "warm_start.pt", warm_start(first, config, tmp_path / "run" / "model_3.pt")
    )
    result = Trainer(config, tmp_path / "ft", resume=warm, make_env=make_toy_task, progress=False).run()
    assert (result.start_iteration, result.iterations) == (3, 5)
    tuned = load_checkpoint(tmp_path / "ft" / "model_5.pt")
    assert tuned["warm_start"] == {"from": str(tmp_path / "run" / "model_3.pt"), "iteration": 3}
    assert tuned["randomization"]["parameters"]["motor_strength"]["uniform"] == [0.5, 1.5]  # the new ranges
    assert tuned["adr"] is None and tuned["training_config"]["ppo"]["learning_rate"] == 1e-4
    assert tuned["optimizer_state_dict"]["param_groups"][0]["lr"] == 1e-4  # not the stored optimizer's
    assert tuned["curriculum"]["iteration"] == 5  # same kind: the schedule carried on
    assert not torch.equal(tuned["actor_state_dict"]["mlp.0.weight"], first["actor_state_dict"]["mlp.0.weight"])
    # Resuming the fine-tune is a plain resume: the optimizer's own rate, not a reset to the config's.
    tuned["optimizer_state_dict"]["param_groups"][0]["lr"] = 5e-5
    save_checkpoint(tmp_path / "ft" / "model_5.pt", tuned)
    more = override_config(tuned["training_config"], {"iterations": 6})
    Trainer(more, tmp_path / "ft", resume=tmp_path / "ft" / "model_5.pt", make_env=make_toy_task, progress=False).run()
    assert load_checkpoint(tmp_path / "ft" / "model_6.pt")["optimizer_state_dict"]["param_groups"][0]["lr"] == 5e-5


def test_warm_start_keeps_only_an_automatic_curriculum_clamped_to_the_new_range(toy_config, tmp_path):
    Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run()
    first = load_checkpoint(tmp_path / "run" / "model_3.pt")
    assert first["curriculum"]["kind"] == "linear"
    assert warm_start(first, toy_config)["curriculum"] is None  # a schedule starts afresh
    first["curriculum"] = {"kind": "automatic", "difficulty": 0.9}
    automatic = override_config(
        toy_config,
        {"curriculum": {"kind": "automatic", "d_max": 0.6, "step": 0.1, "raise_above": 0.8, "lower_below": 0.2}},
    )
    warm = warm_start(first, automatic)
    assert warm["curriculum"] == {"kind": "automatic", "difficulty": 0.9} and warm["torch_rng"] is None
    from sim2real.train.curriculum import make_curriculum

    curriculum = make_curriculum(automatic["curriculum"], total_iterations=3)
    curriculum.load_state_dict(warm["curriculum"])
    assert curriculum.difficulty == 0.6
    # A config without a curriculum section (a few lines naming a robot, task and randomization)
    # fine-tunes at its fixed difficulty.
    assert warm_start(first, {**toy_config, "curriculum": None})["curriculum"] is None


def test_warm_start_refuses_other_networks_with_the_difference(toy_config, tmp_path):
    Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run()
    first = load_checkpoint(tmp_path / "run" / "model_3.pt")
    bigger = override_config(toy_config, {"policy.actor_hidden_dims": [64, 64]})
    with pytest.raises(CheckpointError, match=r"actor_hidden_dims .* -> \[64, 64\].*Fix: keep the checkpoint's policy"):
        warm_start(first, bigger, "model_3.pt")


def test_refuses_to_overwrite_a_run_or_to_resume_past_its_end(toy_config, tmp_path):
    out = tmp_path / "run"
    Trainer(toy_config, out, make_env=make_toy_task, progress=False).run()
    with pytest.raises(TrainingError, match="already holds a training run"):
        Trainer(toy_config, out, make_env=make_toy_task, progress=False).run()
    with pytest.raises(TrainingError, match="already run 3 iterations"):
        Trainer(toy_config, out, resume=out / "model_3.pt", make_env=make_toy_task, progress=False).run()


def test_a_linear_schedule_decays_the_rate_toward_its_final_value_at_the_run_end(toy_config, tmp_path):
    ppo = {"learning_rate": 3e-4, "learning_rate_final": 1e-4}
    assert [linear_rate(ppo, it, 0, 4) for it in (0, 2, 4, 9)] == pytest.approx([3e-4, 2e-4, 1e-4, 1e-4])
    assert linear_rate(ppo, 12, 10, 14) == pytest.approx(2e-4)  # counted from the end of a warm-up
    toy_config["ppo"].update(schedule="linear", learning_rate_final=1e-4)
    assert rsl_rl_config(toy_config)["algorithm"]["schedule"] == "fixed"  # rsl_rl must not move it too
    assert "learning_rate_final" not in rsl_rl_config(toy_config)["algorithm"]
    checkpoint = load_checkpoint(
        Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    )
    # The rate the last of the 3 iterations trained with: 2/3 of the way down.
    assert checkpoint["optimizer_state_dict"]["param_groups"][0]["lr"] == pytest.approx(3e-4 - 2 / 3 * 2e-4)
    older = {**toy_config, "ppo": {k: v for k, v in toy_config["ppo"].items() if k != "learning_rate_final"}}
    older["ppo"]["schedule"] = "fixed"  # a config written before the schedule existed resumes as it was
    assert override_config(older, {"iterations": 9})["ppo"]["learning_rate_final"] is None


def test_a_linear_schedule_keeps_its_line_across_a_resume_and_starts_after_a_warm_up(toy_config, tmp_path):
    toy_config["ppo"].update(schedule="linear", learning_rate_final=1e-4)
    run = tmp_path / "run"
    Trainer(toy_config, run, make_env=make_toy_task, progress=False).run()
    more = override_config(load_checkpoint(run / "model_3.pt")["training_config"], {"iterations": 6})
    Trainer(more, run, resume=run / "model_3.pt", make_env=make_toy_task, progress=False).run()
    # Iteration 5 of a 6-iteration line that starts at 0 (not at the resume's 3).
    assert (
        load_checkpoint(run / "model_6.pt")["optimizer_state_dict"]["param_groups"][0]["lr"]
        == pytest.approx(linear_rate(toy_config["ppo"], 5, 0, 6))
        == pytest.approx(3e-4 - 5 / 6 * 2e-4)
    )
    # A warm start from iteration 6 with a 2-iteration critic warm-up: the line starts at 8.
    tuned = override_config(more, {"iterations": 10, "critic_warmup.iterations": 2})
    warm = save_checkpoint(
        tmp_path / "ft" / "warm_start.pt", warm_start(load_checkpoint(run / "model_6.pt"), tuned, run / "model_6.pt")
    )
    Trainer(tuned, tmp_path / "ft", resume=warm, make_env=make_toy_task, progress=False).run()
    rate = load_checkpoint(tmp_path / "ft" / "model_10.pt")["optimizer_state_dict"]["param_groups"][0]["lr"]
    assert rate == pytest.approx(linear_rate(toy_config["ppo"], 9, 8, 10)) == pytest.approx(2e-4)


def test_a_final_iteration_past_the_end_stops_a_run_part_way_down_the_longer_line(toy_config, tmp_path):
    toy_config["ppo"].update(schedule="linear", learning_rate_final=1e-4)
    longer = override_config(toy_config, {"iterations": 6})
    Trainer(longer, tmp_path / "long", make_env=make_toy_task, progress=False).run()
    part = override_config(toy_config, {"iterations": 3, "ppo.learning_rate_final_iteration": 6})
    Trainer(part, tmp_path / "part", make_env=make_toy_task, progress=False).run()
    long, short = load_checkpoint(tmp_path / "long" / "model_3.pt"), load_checkpoint(tmp_path / "part" / "model_3.pt")
    # Iteration 2 of the 6-iteration line, and the very weights of the longer run's third iteration.
    assert short["optimizer_state_dict"]["param_groups"][0]["lr"] == pytest.approx(3e-4 - 2 / 6 * 2e-4)
    assert all(torch.equal(long["actor_state_dict"][k], v) for k, v in short["actor_state_dict"].items())
    # After the line's end the final rate holds.
    assert linear_rate(toy_config["ppo"], 8, 0, 6) == pytest.approx(1e-4)
    # A warm start at iteration 3 whose line would end at 3: refused before any worker starts.
    tuned = override_config(part, {"iterations": 5, "ppo.learning_rate_final_iteration": 3})
    warm = save_checkpoint(
        tmp_path / "ft" / "warm_start.pt", warm_start(short, tuned, tmp_path / "part" / "model_3.pt")
    )
    with pytest.raises(
        TrainingError,
        match=r"learning_rate_final_iteration is 3, but the linear schedule starts at "
        r"iteration 3.*Fix: set it above 3",
    ):
        Trainer(tuned, tmp_path / "ft", resume=warm, make_env=make_toy_task, progress=False).run()


def test_a_line_that_ends_before_the_run_holds_its_final_rate(toy_config, tmp_path):
    toy_config["ppo"].update(schedule="linear", learning_rate_final=1e-4, learning_rate_final_iteration=2)
    checkpoint = load_checkpoint(
        Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    )
    assert checkpoint["optimizer_state_dict"]["param_groups"][0]["lr"] == pytest.approx(1e-4)  # iteration 2 of 3


def test_the_update_on_the_idle_workers_cores_gives_bitwise_the_weights_of_one_thread(
    toy_config, tmp_path, monkeypatch
):
    # The learner's core and each worker's: all free while the workers wait for the update.
    assert update_threads(1) == min(2, len(os.sched_getaffinity(0)))
    # The shipped recipes' networks, a recipe-sized minibatch (256 samples) so torch splits the
    # products across threads, and gradients clipped every step (the norm is a reduction too).
    toy_config.update(num_envs=8, num_steps_per_env=64, iterations=2)
    toy_config["policy"].update(actor_hidden_dims=[512, 256, 128], critic_hidden_dims=[512, 256, 128])
    toy_config["ppo"]["max_grad_norm"] = 1e-3
    from rsl_rl.algorithms import PPO

    seen = []
    update = PPO.update

    def counted(alg, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return update(alg, *args, **kwargs)

    monkeypatch.setattr(PPO, "update", counted)
    weights = []
    for threads in (1, 2):
        monkeypatch.setattr("sim2real.train.runner.update_threads", lambda workers, n=threads: n)
        checkpoint = load_checkpoint(
            Trainer(toy_config, tmp_path / f"run{threads}", make_env=make_toy_task, progress=False).run().checkpoint
        )
        weights.append(
            {**checkpoint["actor_state_dict"], **{f"critic.{k}": v for k, v in checkpoint["critic_state_dict"].items()}}
        )
    assert seen == [1, 1, 2, 2]  # each run's two updates, on the threads asked
    assert torch.get_num_threads() == 1  # and the learner back on one thread after them
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    first = load_checkpoint(tmp_path / "run2" / "model_1.pt")["actor_state_dict"]["mlp.0.weight"]
    assert not torch.equal(first, weights[1]["mlp.0.weight"])  # the second update moved them


@pytest.mark.parametrize(
    "text, error",
    [
        ("ppo: {learning_rat: 0.001}", r"ppo.learning_rat: unknown field"),
        ("ppo: {schedule: linear}", r"ppo.learning_rate_final: the linear schedule needs a final rate"),
        (
            "ppo: {schedule: linear, learning_rate: 1.0e-4, learning_rate_final: 3.0e-4}",
            r"needs a final rate in \(0, learning_rate\], got 0.0003",
        ),
        ("ppo: {learning_rate_final: 1.0e-5}", r"only the linear schedule uses a final rate"),
        ("ppo: {learning_rate_final_iteration: 900}", r"only the linear schedule has a final iteration"),
        (
            "ppo: {schedule: linear, learning_rate_final: 1.0e-5, learning_rate_final_iteration: 9.5}",
            r"ppo.learning_rate_final_iteration: expected an iteration \(a whole number >= 1\), got 9.5",
        ),
        ("num_envs: 0", r"num_envs: expected an integer >= 1"),
        ("robot: go2", "the file is for robot 'go2'"),
        ("adr: {enabled: true}", "adaptive DR needs a randomization"),
        ("symmetry: {augmentation: 1}", r"symmetry.augmentation: expected true or false, got 1"),
        ("symmetry: {mirror_loss_coef: -0.1}", r"symmetry.mirror_loss_coef: expected a number >= 0, got -0.1"),
        ("symmetry: {mirror: true}", r"symmetry.mirror: unknown field"),
    ],
    ids=[
        "unknown-field",
        "linear-without-final",
        "final-above-start",
        "final-without-linear",
        "final-iteration-without-linear",
        "fractional-final-iteration",
        "zero-envs",
        "other-robot",
        "adr-without-ranges",
        "symmetry-not-a-bool",
        "negative-mirror-loss",
        "symmetry-unknown-key",
    ],
)
def test_config_errors_name_the_field(tmp_path, text, error):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text + "\n")
    with pytest.raises(TrainConfigError, match=error):
        load_train_config("toy", "reach", bad)


@pytest.mark.parametrize("robot,task", [("go2", "walk"), ("panda", "reach")])
def test_shipped_configs_load(robot, task):
    config = load_train_config(robot, task, overrides={"num_envs": 8})
    assert config["num_envs"] == 8 and config["ppo"]["schedule"] == "linear"
    assert config["ppo"]["learning_rate"] == 3e-4 and config["policy"]["obs_normalization"] is True


@pytest.mark.parametrize(
    "path",
    sorted([*Path("config/train").glob("*.yaml"), *Path("config/experiments").rglob("*.yaml")]),
    ids=lambda p: str(p.relative_to("config")),
)
def test_every_training_config_in_the_repository_loads(path):
    config = load_train_config(None, None, path)  # each file names its robot and task (or extends one that does)
    assert config["iterations"] > 0


def test_adapter_satisfies_rsl_rl_on_policy_runner(tmp_path, toy_config):
    """The contract check: rsl_rl's own learn() runs on the adapter, bootstrapping time-outs
    and logging the episodes' extras."""
    from rsl_rl.runners import OnPolicyRunner

    vec = ProcessVecEnv([partial(make_toy) for _ in range(4)], workers=2)
    env = RslRlVecEnv(vec, max_episode_length=20)
    try:
        obs, rewards, dones, extras = env.step(torch.zeros(4, 1))
        assert obs["policy"].shape == (4, 2) and rewards.shape == (4,) and dones.shape == (4,)
        assert extras["time_outs"].shape == (4,)
        for _ in range(19):
            obs, rewards, dones, extras = env.step(torch.zeros(4, 1))
        assert dones.all() and extras["time_outs"].all() and "Episode/success" in extras["log"]
        assert env.episode_length_buf.eq(0).all() and len(env.pop_episodes()) == 4
        with contextlib.redirect_stdout(io.StringIO()):
            runner = OnPolicyRunner(env, rsl_rl_config(toy_config), log_dir=str(tmp_path / "rsl"), device="cpu")
            runner.learn(num_learning_iterations=2)
        assert list((tmp_path / "rsl").glob("model_*.pt"))
    finally:
        env.close()


def test_cli_train_usage_errors(tmp_path, capsys):
    from sim2real.cli.main import main

    assert main(["train", "--robot", "panda", "--task", "reach"]) == 2
    assert "--out and either --robot and --task or a --config naming them are required" in capsys.readouterr().err
    assert main(["train", "--robot", "panda", "--out", str(tmp_path / "x")]) == 2
    assert "are required" in capsys.readouterr().err
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text("iterations: 3\n")
    assert main(["train", "--config", str(unnamed), "--out", str(tmp_path / "x")]) == 2
    assert "robot: not set, and not given on the command line. Fix: add `robot: ...`" in capsys.readouterr().err
    flying = tmp_path / "flying.yaml"
    flying.write_text("robot: panda\ntask: fly\n")
    assert main(["train", "--config", str(flying), "--out", str(tmp_path / "x")]) == 2
    assert "no task 'fly' for robot 'panda'" in capsys.readouterr().err
    typo = tmp_path / "typo.yaml"
    typo.write_text("robot: panda\ntask: reach\ntask_config:\n  rewrads: {}\n")
    assert main(["train", "--config", str(typo), "--out", str(tmp_path / "typo_run")]) == 2
    assert "task_config: overrides: unknown task config key 'rewrads'" in capsys.readouterr().err
    assert not (tmp_path / "typo_run").exists()  # refused before the run's folder is made
    assert main(["train", "--robot", "panda", "--task", "fly", "--out", str(tmp_path / "x")]) == 2
    assert "no task 'fly' for robot 'panda'" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "missing.pt")]) == 2
    assert "missing.pt: no such file" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "missing.pt"), "--config", "x.yaml"]) == 2
    assert "--config cannot be combined with --resume" in capsys.readouterr().err
    assert main(["train", "--resume", "a.pt", "--init-from", "b.pt", "--out", str(tmp_path / "x")]) == 2
    assert "--resume and --init-from exclude each other" in capsys.readouterr().err
    assert main(["train", "--init-from", "b.pt"]) == 2
    assert "--init-from needs --out" in capsys.readouterr().err


def test_cli_train_takes_robot_and_task_from_the_config(tmp_path, capsys):
    """`sim2real train --config my_panda_reach.yaml --out ...`, as `dr from-sysid` advises."""
    from sim2real.cli.main import main

    config = tmp_path / "my_panda_reach.yaml"
    config.write_text("robot: panda\ntask: reach\nrandomization: panda_reference\n")
    assert (
        main(
            [
                "train",
                "--config",
                str(config),
                "--out",
                str(tmp_path / "run"),
                "--iterations",
                "1",
                "--num-envs",
                "2",
                "--workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    run = load_checkpoint(tmp_path / "run" / "model_1.pt")
    assert (run["robot"], run["task"]) == ("panda", "reach")
    assert run["training_config"]["randomization"] == "panda_reference"


@pytest.mark.slow
def test_cli_fine_tune_from_a_panda_checkpoint(tmp_path, capsys):
    from sim2real.cli.main import main

    small = ["--num-envs", "2", "--workers", "1", "--no-progress"]
    assert (
        main(
            [
                "train",
                "--robot",
                "panda",
                "--task",
                "reach",
                "--out",
                str(tmp_path / "run"),
                "--iterations",
                "2",
                *small,
            ]
        )
        == 0
    )
    fine_tune = [
        "train",
        "--init-from",
        str(tmp_path / "run" / "model_2.pt"),
        "--out",
        str(tmp_path / "ft"),
        "--iterations",
        "3",
        *small,
    ]
    assert main(fine_tune) == 0
    assert "warm start from" in capsys.readouterr().out
    tuned = load_checkpoint(tmp_path / "ft" / "model_3.pt")
    assert tuned["warm_start"]["iteration"] == 2 and tuned["robot"] == "panda"
    short = [
        "train",
        "--init-from",
        str(tmp_path / "run" / "model_2.pt"),
        "--out",
        str(tmp_path / "ft2"),
        "--iterations",
        "2",
        *small,
    ]
    assert main(short) == 2
    assert "has already run 2 iterations" in capsys.readouterr().err
    assert not (tmp_path / "ft2" / "warm_start.pt").exists()
    assert main(fine_tune) == 2  # the fine-tune's folder now holds a run
    assert "already holds a training run (model_3.pt)" in capsys.readouterr().err
