"""A short PPO run on Panda reach improves the policy, end to end: train, export, evaluate.

About a minute on 2 cores. The run is deterministic for its seed (synchronous rollouts,
a single-threaded learner), so the margins below do not flake.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim2real.cli.main import main
from sim2real.train.runner import Trainer
from sim2real.train.train_config import load_train_config

pytestmark = pytest.mark.slow

ITERATIONS = 60


def test_short_ppo_run_on_panda_reach_improves_return(tmp_path, capsys):
    config = load_train_config(
        "panda", "reach", overrides={"iterations": ITERATIONS, "save_interval": 1, "num_envs": 16}
    )  # half the shipped batch: minutes
    result = Trainer(config, tmp_path / "run", progress=False).run()
    assert result.iterations == ITERATIONS and result.checkpoint.name == f"model_{ITERATIONS}.pt"

    batches = [row["iteration_return"] for row in result.history if "iteration_return" in row]
    assert len(batches) >= 4  # 6 s episodes end every ~12 iterations
    assert np.mean(batches[-2:]) > batches[0] + 1.0, batches

    # The same episodes (seeds) for the policy after one update and after the run.
    returns, success = {}, {}
    for iteration in (1, ITERATIONS):
        policy = tmp_path / f"policy_{iteration}.onnx"
        assert main(["export", str(tmp_path / "run" / f"model_{iteration}.pt"), "-o", str(policy)]) == 0
        capsys.readouterr()
        assert (
            main(
                [
                    "eval",
                    str(policy),
                    "--worlds",
                    "nominal",
                    "dr",
                    "--episodes",
                    "8",
                    "--difficulty",
                    "0.3",
                    "--json",
                    "--no-progress",
                    "--no-plot",
                ]
            )
            == 0
        )
        report = json.loads(capsys.readouterr().out)
        returns[iteration] = report["worlds"][0]["mean_return"]
        success[iteration] = report["worlds"][0]["success_rate"]
        assert report["gaps"][0]["gap_ratio_percent"] is not None
    assert returns[ITERATIONS] > returns[1] + 1.0, returns
    assert success[ITERATIONS] >= 0.5 > success[1], success  # within 2 cm for 1 s
