"""Evaluate a policy file in simulation under sets of worlds, and measure the domain gap.

A *world set* is a distribution of physical conditions an episode is drawn from:
``nominal`` (no randomization), ``dr`` (the randomization stored in the policy file,
i.e. what it was trained on at the end), or a randomization YAML (a name under
``config/randomization/`` or a path). Per world set, over N episodes:

- success rate ``SR = (1/N) sum_i 1(success_i)``, success as the task defines it
  (reach: within 2 cm of the goal for 1 s; walk: no fall and mean velocity error below
  the task's threshold at the evaluation command 0.5 m/s forward);
- mean return (under a randomized world set, the "DR mean"), its standard deviation, and
  the worst-5 % return: the mean of the ``ceil(0.05 N)`` lowest episode returns;
- the means of the task's episode metrics (reach: final and minimum distance; walk:
  velocity and yaw-rate errors, fall rate).
- under a randomized set, where it fails: for each randomized condition, the success rate
  of the episodes that drew it at or below its median and of those above (the JSON also
  holds each episode's seed, outcome, metrics and drawn conditions, to replay one).

With two or more world sets, each later set ``b`` is compared with the first ``a``:
``Delta = R_b - R_a`` and ``GapRatio = |R_b - R_a| / |R_a| x 100 %``.

Episode ``k`` of every world set starts from ``reset(seed=seed + k)`` at difficulty 1,
so a report is reproducible bit for bit for a seed, whatever the number of worker
processes. The policy runs through onnxruntime exactly as the robot will run it
(:func:`sim2real.core.policy_file.load_policy`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sim2real.core.errors import InputError
from sim2real.core.policy_file import PolicyFile, load_policy
from sim2real.sim.engines import DEFAULT_ENGINE, check_engine
from sim2real.sim.randomization import Randomization, load_randomization

# Per task, the fixed situation an evaluation scores (keys are applied only where the
# task config declares them). Walk: the evaluation command, 0.5 m/s forward.
EVAL_TASK_OVERRIDES: dict[str, dict[str, Any]] = {"walk": {"eval_command": [0.5, 0.0, 0.0]}}
_EPISODE_FIELDS = ("return", "length", "success", "reward_terms", "seed", "conditions")
CONDITION_EFFECTS_SHOWN = 5  # in the table; the JSON has them all


class EvaluationError(InputError):
    """An evaluation that cannot run as asked, with the reason and the fix."""


@dataclass(frozen=True)
class WorldSet:
    name: str
    randomization: Randomization | None
    engine: str | None = None  # None: the evaluation's engine; a reality set brings its own
    model: str | None = None
    hidden: bool = False  # a reality set: the drawn conditions stay out of reports


@dataclass
class ConditionEffect:
    """How one randomized condition splits a world set's successes: the success rate of the
    episodes that drew it at or below its median, and of those that drew it above."""

    name: str
    median: float
    success_at_or_below: float
    success_above: float

    @property
    def spread(self) -> float:
        return abs(self.success_above - self.success_at_or_below)


@dataclass
class WorldResult:
    name: str
    randomization: str | None
    episodes: int
    success_rate: float
    mean_return: float
    std_return: float
    worst5_return: float
    mean_length: float
    metrics: dict[str, float]
    returns: list[float] = field(repr=False)
    # Per episode: seed, success, return, length, task metrics and the conditions it drew.
    episode_details: list[dict[str, Any]] = field(default_factory=list, repr=False)
    condition_effects: list[ConditionEffect] = field(default_factory=list)
    engine: str | None = None  # where this world set ran, when not the report's engine (a reality set)
    model: str | None = None


@dataclass
class Gap:
    a: str
    b: str
    delta: float  # R_b - R_a
    gap_ratio_percent: float | None  # |R_b - R_a| / |R_a| x 100; None when R_a == 0


@dataclass
class EvalReport:
    policy: str
    sha256: str
    robot: str
    task: str
    seed: int
    episodes: int
    difficulty: float
    worlds: list[WorldResult]
    gaps: list[Gap]
    engine: str = DEFAULT_ENGINE
    model: str | None = None  # the robot model on MuJoCo when not the profile's

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self) -> str:
        metric_names = sorted({k for w in self.worlds for k in w.metrics})
        header = ["world set", "SR", "mean return", "std", "worst-5%", "length", *metric_names]
        rows = [
            [
                w.name,
                f"{100 * w.success_rate:.1f}%",
                f"{w.mean_return:.3f}",
                f"{w.std_return:.3f}",
                f"{w.worst5_return:.3f}",
                f"{w.mean_length:.0f}",
                *(_fmt(w.metrics.get(m)) for m in metric_names),
            ]
            for w in self.worlds
        ]
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            f"policy {self.policy} (sha256 {self.sha256[:12]}): {self.robot} {self.task}, "
            f"{self.episodes} episodes per world set, seed {self.seed}, difficulty {self.difficulty:g}, "
            f"engine {self.engine}" + (f" with model {self.model}" if self.model else ""),
            "  ".join(h.ljust(w) for h, w in zip(header, widths)),
        ]
        lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
        for world in self.worlds:
            if world.condition_effects and 0.0 < world.success_rate < 1.0:
                lines.append(
                    f"where {world.name} fails: success rate of the episodes that drew each condition at "
                    f"or below its median / above it (most telling first; all in --json)"
                )
                for effect in world.condition_effects[:CONDITION_EFFECTS_SHOWN]:
                    lines.append(
                        f"  {effect.name:<22} <= {effect.median:<8.4g} {100 * effect.success_at_or_below:5.1f} %"
                        f"   > {effect.median:<8.4g} {100 * effect.success_above:5.1f} %"
                    )
        for world in self.worlds:
            if world.engine:
                lines.append(
                    f"{world.name} ran on {world.engine}"
                    + (f" with model {world.model}" if world.model else "")
                    + "; its drawn conditions stay hidden"
                )
        for gap in self.gaps:
            ratio = "undefined (R_a = 0)" if gap.gap_ratio_percent is None else f"{gap.gap_ratio_percent:.1f} %"
            lines.append(f"domain gap {gap.b} vs {gap.a}: Delta = R_b - R_a = {gap.delta:+.3f}, GapRatio = {ratio}")
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON has no NaN), tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def check_world_options(engine: str, model: str | None) -> None:
    """EvaluationError for an unknown engine, or a robot model that will not load on it."""
    try:
        check_engine(engine)
        if model:
            from sim2real.sim.robot_models import resolve_model

            if engine != "mujoco":
                raise ValueError(f"a robot model ({model!r}) is for the mujoco engine. Fix: add --engine mujoco")
            resolve_model(model)
    except ValueError as exc:
        raise EvaluationError(f"--engine/--model: {exc}") from None


def resolve_worlds(specs: list[str], policy: PolicyFile) -> list[WorldSet]:
    """``nominal`` | ``dr`` | a randomization name or YAML path -> world sets (names unique)."""
    worlds: list[WorldSet] = []
    for spec in specs:
        if spec == "nominal":
            world = WorldSet("nominal", None)
        elif spec == "dr":
            stored = policy.metadata.randomization
            if stored is None:
                raise EvaluationError(
                    f"{policy.path} was trained without randomization, so there is no 'dr' "
                    "world set. Fix: use --worlds nominal or a randomization YAML"
                )
            world = WorldSet("dr", Randomization.from_dict(stored, source=f"{policy.path} (sim2real.randomization)"))
        elif spec.startswith("reality:"):
            from sim2real.evaluate.reality import load_reality

            reality = load_reality(spec[len("reality:") :])
            if reality.robot != policy.metadata.robot:
                raise EvaluationError(
                    f"reality set {reality.name!r} is a {reality.robot!r}; {policy.path} drives "
                    f"{policy.metadata.robot!r}. Fix: a reality set for {policy.metadata.robot!r}"
                )
            world = WorldSet(f"reality:{reality.name}", reality.conditions, reality.engine, reality.model, hidden=True)
        else:
            randomization = load_randomization(spec)
            world = WorldSet(Path(spec).stem if Path(spec).suffix else spec, randomization)
        name, n = world.name, 2
        while any(w.name == name for w in worlds):
            name, n = f"{world.name}#{n}", n + 1
        worlds.append(replace(world, name=name))
    if not worlds:
        raise EvaluationError("no world sets given. Fix: --worlds nominal dr")
    return worlds


def eval_task_config(task: str, task_config: dict[str, Any]) -> dict[str, Any]:
    config = json.loads(json.dumps(task_config))
    for key, value in EVAL_TASK_OVERRIDES.get(task, {}).items():
        if key in config:
            config[key] = value
    return config


# ------------------------------------------------------------------ episodes
_SESSIONS: dict[str, PolicyFile] = {}


def run_episodes(env: Any, policy_path: str, sha256: str, seeds: list[int], difficulty: float) -> list[dict]:
    """Run one episode per seed with the policy; returns each episode's summary. Module
    level, so worker processes can run it (each loads the policy once)."""
    policy = _SESSIONS.get(policy_path)
    if policy is None or policy.sha256 != sha256:
        policy = _SESSIONS[policy_path] = load_policy(policy_path)
        if policy.sha256 != sha256:
            raise EvaluationError(
                f"{policy_path} changed while evaluating (sha256 {policy.sha256[:12]}, expected {sha256[:12]})"
            )
    env.set_difficulty(difficulty)
    results = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        total, length, info = 0.0, 0, {}
        done, broken = False, False
        while not done:
            action = policy.act(obs)
            if not np.all(np.isfinite(action)):
                # On the robot the supervisor holds on such an output: the episode fails here.
                broken = True
                break
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        episode = {"seed": int(seed), "return": total, "length": length, "success": False}
        episode.update(info.get("episode", {}))
        episode["conditions"] = {
            name: (None if value is None else float(value))
            for name, value in getattr(env, "episode_conditions", {}).items()
        }
        if broken:
            episode.update(success=False, non_finite_action=True)
        results.append(
            {
                k: (float(v) if isinstance(v, (bool, float, np.number)) else v)
                for k, v in episode.items()
                if k != "reward_terms"
            }
        )
    return results


def _default_make_env(*args: Any, **kwargs: Any):
    from sim2real.train.tasks import make_env

    return make_env(*args, **kwargs)


def evaluate_policy(
    policy: PolicyFile | str | Path,
    worlds: list[str],
    episodes: int,
    seed: int = 0,
    workers: int = 2,
    difficulty: float = 1.0,
    make_env: Callable[..., Any] = _default_make_env,
    progress: bool = True,
    engine: str = DEFAULT_ENGINE,
    model: str | None = None,
    ray_address: str | None = None,
) -> EvalReport:
    """Run ``episodes`` episodes of the policy per world set; see the module docstring.

    ``workers``: processes that run episodes in parallel (0: in this process); with
    ``ray_address`` (:mod:`sim2real.train.ray_cluster`) Ray actors on a cluster instead. Episode
    ``k`` is deterministic in its seed, so the report is the same wherever it ran.
    ``make_env(robot, task, seed=, randomization=, config=, engine=)``: must be picklable.
    ``engine``: the physics engine the episodes run on (:mod:`sim2real.sim.engines`);
    ``model``: on MuJoCo, another robot model than the profile's (:mod:`sim2real.sim.robot_models`).
    """
    from tqdm import tqdm

    if episodes < 1:
        raise EvaluationError(f"--episodes must be >= 1, got {episodes}")
    if not 0.0 <= difficulty <= 1.0:
        raise EvaluationError(f"--difficulty must be in [0, 1] (the task's easiest to hardest), got {difficulty}")
    check_world_options(engine, model)
    if not isinstance(policy, PolicyFile):
        policy = load_policy(policy)
    meta = policy.metadata
    world_sets = resolve_worlds(list(worlds), policy)
    config = eval_task_config(meta.task, meta.task_config)
    seeds = [seed + k for k in range(episodes)]
    bar = tqdm(
        total=episodes * len(world_sets),
        desc=f"eval {meta.robot} {meta.task} ({engine})",
        unit="ep",
        dynamic_ncols=True,
        disable=not progress,
    )
    results = []
    with contextlib.ExitStack() as stack:
        stack.callback(bar.close)
        run_world = partial(_run_world, workers=workers, bar=bar)
        if ray_address is not None:
            from sim2real.train.ray_cluster import ray_session

            stack.enter_context(ray_session(ray_address, workers))
            run_world = partial(run_world, on_ray=True)
        for world in world_sets:
            bar.set_postfix_str(world.name)
            world_engine, world_model = (world.engine, world.model) if world.engine else (engine, model)
            env_fn = partial(
                make_env,
                meta.robot,
                meta.task,
                seed=seed,
                randomization=world.randomization,
                config=config,
                engine=world_engine,
                **({"model": world_model} if world_model else {}),
            )
            summaries = run_world(env_fn, policy, seeds, difficulty)
            if world.hidden:
                for summary in summaries:
                    summary["conditions"] = {}
            results.append(replace(_world_result(world, summaries), engine=world.engine, model=world.model))
    reference = results[0]
    gaps = [
        Gap(
            reference.name,
            other.name,
            other.mean_return - reference.mean_return,
            abs(other.mean_return - reference.mean_return) / abs(reference.mean_return) * 100.0
            if reference.mean_return != 0
            else None,
        )
        for other in results[1:]
    ]
    return EvalReport(
        policy=str(policy.path),
        sha256=policy.sha256,
        robot=meta.robot,
        task=meta.task,
        seed=seed,
        episodes=episodes,
        difficulty=difficulty,
        worlds=results,
        gaps=gaps,
        engine=engine,
        model=model,
    )


def _run_world(
    env_fn: Callable[[], Any],
    policy: PolicyFile,
    seeds: list[int],
    difficulty: float,
    workers: int,
    bar,
    on_ray: bool = False,
) -> list[dict]:
    path, digest = str(Path(policy.path).resolve()), policy.sha256
    if on_ray:
        # Another machine has no file at this path: the policy goes with the episodes.
        return _run_on_ray(env_fn, policy, seeds, difficulty, max(1, workers), bar)
    if workers <= 0:
        env = env_fn()
        _SESSIONS[path] = policy
        try:
            summaries = []
            for seed in seeds:
                summaries += run_episodes(env, path, digest, [seed], difficulty)
                bar.update(1)
            return summaries
        finally:
            env.close()
    from sim2real.train.vec_env import ProcessVecEnv

    workers = min(workers, len(seeds))
    with ProcessVecEnv([env_fn] * workers, workers=workers) as vec:
        return _episodes_in_rounds(vec, run_episodes, (path, digest), seeds, difficulty, bar)


def _episodes_in_rounds(vec, run: Callable[..., list[dict]], policy: tuple, seeds: list[int], difficulty: float, bar):
    """``run(env, *policy, [seed], difficulty)`` for every seed, in rounds of one episode per
    worker of ``vec``: the bar moves, and episode k keeps its seed."""
    workers, summaries = vec.num_envs, []
    for start in range(0, len(seeds), workers):
        chunk = seeds[start : start + workers]
        args = [(*policy, [s], difficulty) for s in chunk] + [None] * (workers - len(chunk))
        for part in vec.run(run, args):
            if part is not None:
                summaries += part
        bar.update(len(chunk))
    return summaries


def _run_on_ray(
    env_fn: Callable[[], Any], policy: PolicyFile, seeds: list[int], difficulty: float, workers: int, bar
) -> list[dict]:
    """The episodes on Ray actors (:class:`sim2real.train.ray_vec_env.RayVecEnv`), one per
    worker at a time, as the local processes run them; the policy file's bytes go along."""
    from sim2real.train.ray_vec_env import RayVecEnv

    workers = min(workers, len(seeds))
    data = Path(policy.path).read_bytes()
    with RayVecEnv([env_fn] * workers, workers=workers) as vec:
        return _episodes_in_rounds(vec, run_episodes_of_bytes, (data, policy.sha256), seeds, difficulty, bar)


def run_episodes_of_bytes(env, data: bytes, digest: str, seeds: list[int], difficulty: float) -> list[dict]:
    """:func:`run_episodes` for a policy sent as its file's bytes (to a machine without the file)."""
    return run_episodes(env, local_policy_copy(data, digest), digest, seeds, difficulty)


def local_policy_copy(data: bytes, digest: str) -> str:
    """A policy file sent as bytes, written on this machine under its digest, in a folder of
    this user's alone; written once (atomically: workers sharing the machine never read half a
    file) and checked against the digest; its path."""
    import hashlib
    import tempfile

    if hashlib.sha256(data).hexdigest() != digest:
        raise EvaluationError(f"the policy sent to this worker does not match its sha256 {digest[:12]}")
    folder = Path(tempfile.gettempdir()) / f"sim2real-policies-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    status = os.lstat(folder)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise EvaluationError(
            f"{folder} is not a folder of this user's alone (a link, another owner, or open to others): "
            "the policy is not written there. Fix: remove it"
        )
    path = folder / f"{digest}.onnx"
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        handle, partial_path = tempfile.mkstemp(dir=folder, suffix=".part")
        try:
            with os.fdopen(handle, "wb") as part:
                part.write(data)
            os.replace(partial_path, path)
        finally:
            if os.path.exists(partial_path):
                os.unlink(partial_path)
    return str(path)


def _world_result(world: WorldSet, summaries: list[dict]) -> WorldResult:
    returns = np.array([s["return"] for s in summaries], dtype=float)
    worst = np.sort(returns)[: max(1, math.ceil(0.05 * len(returns)))]
    metrics: dict[str, float] = {}
    for key in sorted({k for s in summaries for k in s if k not in _EPISODE_FIELDS}):
        values = np.array([s.get(key, np.nan) for s in summaries if isinstance(s.get(key), (int, float))], float)
        if values.size:
            metrics[key] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
    return WorldResult(
        name=world.name,
        randomization=None if world.randomization is None else world.randomization.name,
        episodes=len(summaries),
        success_rate=float(np.mean([bool(s["success"]) for s in summaries])),
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        worst5_return=float(worst.mean()),
        mean_length=float(np.mean([s["length"] for s in summaries])),
        metrics=metrics,
        returns=returns.tolist(),
        episode_details=summaries,
        condition_effects=_condition_effects(summaries),
    )


def _condition_effects(summaries: list[dict]) -> list[ConditionEffect]:
    """Each randomized condition that varied, by how differently the episodes below and above
    its median succeeded (largest difference first): where to look when a world set fails."""
    success = np.array([bool(s["success"]) for s in summaries])
    effects = []
    for name in sorted({k for s in summaries for k in s.get("conditions", {})}):
        values = np.array(
            [np.nan if s.get("conditions", {}).get(name) is None else s["conditions"][name] for s in summaries],
            dtype=float,
        )
        drawn = np.isfinite(values)
        if drawn.sum() < 2:
            continue
        median = float(np.median(values[drawn]))
        low, high = drawn & (values <= median), drawn & (values > median)
        if low.any() and high.any():
            effects.append(ConditionEffect(name, median, float(success[low].mean()), float(success[high].mean())))
    return sorted(effects, key=lambda e: -e.spread)


def plot_returns(report: EvalReport, png_path: str | Path) -> Path:
    """Histogram and box plot of the episode returns per world set."""
    import matplotlib

    matplotlib.use("Agg")  # headless: evaluation runs on servers and CI
    import matplotlib.pyplot as plt

    png_path = Path(png_path)
    fig, (hist, box) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    all_returns = np.concatenate([w.returns for w in report.worlds])
    bins = np.histogram_bin_edges(all_returns, bins=min(30, max(5, len(all_returns) // 4)))
    for world in report.worlds:
        hist.hist(
            world.returns,
            bins=bins,
            alpha=0.5,
            label=f"{world.name}: SR {100 * world.success_rate:.0f}%, mean {world.mean_return:.2f}",
        )
        hist.axvline(world.worst5_return, ls="--", lw=0.8, color=hist.patches[-1].get_facecolor()[:3])
    hist.set_xlabel("episode return")
    hist.set_ylabel("episodes")
    hist.legend(fontsize=8)
    hist.set_title("returns (dashed: worst-5 % mean)", fontsize=9)
    box.boxplot([w.returns for w in report.worlds], tick_labels=[w.name for w in report.worlds])
    box.set_ylabel("episode return")
    title = f"{report.robot} {report.task} ({report.engine}), {report.episodes} episodes per world set"
    if report.gaps and report.gaps[0].gap_ratio_percent is not None:
        title += f", GapRatio {report.gaps[0].b} vs {report.gaps[0].a}: {report.gaps[0].gap_ratio_percent:.1f} %"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path
