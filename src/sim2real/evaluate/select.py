"""`sim2real select RUN`: export the run's last checkpoints, evaluate each, keep the best.

Under domain randomization a policy's success rate swings between checkpoints a hundred
iterations apart (the Go2 recipe, seed 1: 96 %, 80 %, 88 % at 1100, 1200, 1300), so the
file to ship is chosen by evaluation, not by iteration. Every candidate is evaluated on
the same episodes (same seeds) and ranked by its weakest world set's success rate, then by
that world set's mean return; a tie goes to the later checkpoint.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sim2real.evaluate.evaluate import EvalReport, EvaluationError, evaluate_policy
from sim2real.train.checkpoint import checkpoints_of
from sim2real.train.export import export_policy


@dataclass
class Candidate:
    checkpoint: Path
    iteration: int
    report: EvalReport

    @property
    def weakest(self):
        return min(self.report.worlds, key=lambda w: (w.success_rate, w.mean_return))

    def score(self) -> tuple[float, float, int]:
        return self.weakest.success_rate, self.weakest.mean_return, self.iteration


def select_checkpoint(
    run: str | Path,
    worlds: list[str],
    episodes: int,
    last: int = 5,
    seed: int = 0,
    workers: int = 2,
    output: str | Path | None = None,
    progress: bool = True,
    difficulty: float = 1.0,
    log: Callable[[str], None] = print,
    ray_address: str | None = None,
) -> tuple[Candidate, list[Candidate], Path]:
    """(best, every candidate in iteration order, the exported file). ``output`` default:
    ``<run>/policy.onnx``. ``ray_address``: evaluate on Ray (:func:`evaluate_policy`)."""
    found = checkpoints_of(run)
    if not found:
        raise EvaluationError(f"{run} holds no model_<iteration>.pt: give a training run folder")
    if last < 1:
        raise EvaluationError(f"--last must be >= 1, got {last}")
    chosen = found[-last:]
    output = Path(output) if output is not None else Path(run) / "policy.onnx"
    candidates = []
    with contextlib.ExitStack() as stack:
        if ray_address is not None:  # one Ray for every candidate's evaluation
            from sim2real.train.ray_cluster import ray_session

            stack.enter_context(ray_session(ray_address, workers))
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="sim2real-select-"))
        for iteration, checkpoint in chosen:
            exported = export_policy(checkpoint, Path(tmp) / f"model_{iteration}.onnx").path
            report = evaluate_policy(
                exported,
                worlds,
                episodes,
                seed=seed,
                workers=workers,
                difficulty=difficulty,
                progress=progress,
                ray_address=ray_address,
            )
            candidate = Candidate(checkpoint, iteration, report)
            candidates.append(candidate)
            log(
                f"  {checkpoint.name}: "
                + ", ".join(
                    f"{w.name} {100 * w.success_rate:.0f} % (return {w.mean_return:.2f})" for w in report.worlds
                )
            )
        best = max(candidates, key=Candidate.score)
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / f"model_{best.iteration}.onnx", output)
    return best, candidates, output
