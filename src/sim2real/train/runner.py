"""PPO training of one robot task: rsl_rl's PPO over worker processes, with curriculum and ADR.

Why not ``OnPolicyRunner.learn``: between two rollouts this loop must update the
curriculum and the adaptive randomization from the episodes just collected and send
them to the worker processes, and a checkpoint must carry their state, the task's
interface and the source commit. ``learn`` has no per-iteration hook, prints a
40-line block per iteration (which fights a progress bar) and saves only its own
state. So the runner is still built as rsl_rl's ``OnPolicyRunner`` (models, PPO,
storage, observation normalization, loading a checkpoint), and this module drives its
algorithm with the same four calls ``learn`` makes per iteration
(``act``/``process_env_step``, ``compute_returns``, ``update``). A checkpoint written
here also loads with ``OnPolicyRunner.load``.

One learner thread while the workers step: on a 2-core machine idle torch threads steal
the env workers' cores (measured: rsl_rl PPO 2.5 -> 4.7 iterations/s with
``torch.set_num_threads(1)``). During the PPO update the workers wait for the next
actions, so the update takes their cores (:func:`update_threads`): a Go2 iteration's
update takes 0.20-0.22 s on 2 threads against 0.31 s on one. MKL runs in its strict reproducibility
mode (``MKL_CBWR``, set in ``sim2real.train``), without which its products split their sums
by thread on AVX-512 processors; with it the weights were bitwise those of one thread here
(``tests/unit/test_runner.py`` checks a run with clipped gradients). torch's own reductions
and a build without MKL are not covered by that mode, so this stays a checked property of
the machine, not a guarantee.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from sim2real.core.errors import Sim2RealError
from sim2real.sim.randomization import Randomization, load_randomization
from sim2real.train.adaptive_dr import AdaptiveRandomization
from sim2real.train.checkpoint import (
    FORMAT,
    describe_env,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    source_revision,
)
from sim2real.train.curriculum import make_curriculum
from sim2real.train.prior import PriorSchedule, prior_from_setting
from sim2real.train.symmetry import MirrorAugmentation, env_mirrors, log_mirror_loss_without_gradients
from sim2real.train.train_config import rsl_rl_config

_DECISION = {"widen": 1.0, "hold": 0.0, "narrow": -1.0}
# Collections of one iteration's rollout before a run that keeps losing Ray workers stops.
MAX_ROLLOUT_ATTEMPTS = 5


class TrainingError(Sim2RealError, RuntimeError):
    """A training run that cannot start or go on, with the reason and the fix."""

    exit_code = 2  # what it names is the run's input: its config, checkpoint or folder


@dataclass
class TrainResult:
    out: Path
    checkpoint: Path
    start_iteration: int
    iterations: int  # completed iterations at the end (the checkpoint's number)
    seconds: float
    env_steps: int
    interrupted: bool = False
    # Per iteration: timings, episodes finished, their mean return and success rate
    # ("iteration_*", when some finished), the same over the last 100 episodes, difficulty.
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def iterations_per_second(self) -> float:
        done = self.iterations - self.start_iteration
        return done / self.seconds if self.seconds > 0 else 0.0

    @property
    def env_steps_per_second(self) -> float:
        return self.env_steps / self.seconds if self.seconds > 0 else 0.0


def _default_make_env(*args: Any, **kwargs: Any):
    from sim2real.train.tasks import make_env

    return make_env(*args, **kwargs)


# Env i of a run with seed s starts from env_seed(s, ...) + i. Runs with neighbouring seeds must
# not share env streams: with s + i, seed 1's env i was seed 0's env i + 1 (15 of 16 streams
# alike). Seed 0 keeps the seeds it always had (0, 1, ...), so its runs stay reproducible.
ENV_SEED_STRIDE = 1_000_003


def env_seed(seed: int, start_iteration: int, num_envs: int) -> int:
    """The seed of env 0 for a run with ``seed``, at ``start_iteration`` (a resume moves on)."""
    return seed * ENV_SEED_STRIDE + start_iteration * num_envs


@dataclass
class _Schedule:
    """Where a run starts and ends, and the iterations of its critic warm-up and rate line."""

    start: int
    total: int
    warmup: dict
    warmup_start: int
    warmup_end: int
    line_end: int


@dataclass
class _Run:
    """What a run carries from one iteration to the next."""

    vec: Any
    env: Any
    alg: Any
    rsl_cfg: dict
    interface: dict
    randomization: Randomization | None
    adr: AdaptiveRandomization | None
    curriculum: Any
    checkpoint: dict | None
    source: Any
    window: deque
    pending: list[dict] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    prior: PriorSchedule | None = None  # lambda per iteration, when the config has a prior
    prior_scale: float | None = None  # the lambda the workers have
    auxiliary: Any = None  # AuxiliaryLosses on robot data, hooked onto PPO
    cloning: Any = None  # its BehaviourCloning term
    cloning_schedule: PriorSchedule | None = None  # beta per iteration
    adaptation: Any = None  # its DomainAdaptation term
    buffers: list = field(default_factory=list)  # the RobotBuffers the terms read, refreshed between iterations


class Trainer:
    """One training run into ``out``. ``config`` is a resolved training config
    (:func:`sim2real.train.train_config.load_train_config`); ``resume`` a checkpoint to
    continue from (its iteration count, models, optimizer, curriculum and ADR state).

    ``make_env(robot, task, seed=, randomization=, config=)`` builds one env in a
    worker; it must be picklable (a module-level function).
    """

    def __init__(
        self,
        config: dict[str, Any],
        out: str | Path,
        resume: str | Path | None = None,
        make_env: Callable[..., Any] = _default_make_env,
        progress: bool = True,
        ray_address: str | None = None,
    ):
        if config.get("prior", {}).get("spec") is not None:
            # The prior's terms go into the run's config (and every checkpoint) inline: a resume
            # or a retrain elsewhere trains on the same terms, whatever became of the file.
            spec = prior_from_setting(config["prior"]["spec"], task=f"{config['robot']}_{config['task']}")
            config = {**config, "prior": {**config["prior"], "spec": spec.to_dict()}}
        self.config = config
        self.out = Path(out)
        self.resume = Path(resume) if resume is not None else None
        self.make_env = make_env
        self.progress = progress
        self.ray_address = ray_address  # None: local worker processes; else where Ray runs (ray_cluster)

    # ------------------------------------------------------------------ setup
    def check_out(self) -> None:
        """Refuse to write a new run over an existing one, or a resumed run into another's folder."""
        existing = latest_checkpoint(self.out) if self.out.is_dir() else None
        if existing is not None and self.resume is None:
            raise TrainingError(
                f"{self.out} already holds a training run ({existing.name}). Fix: choose another "
                f"--out, or continue it with --resume {existing}"
            )
        if existing is not None and Path(self.resume).resolve().parent != self.out.resolve():
            raise TrainingError(
                f"{self.out} holds another training run ({existing.name}): resuming "
                f"{self.resume} there would mix the two runs' checkpoints. Fix: leave out --out "
                "(the run continues in its own folder) or give an empty folder"
            )

    def _randomization(self, checkpoint: dict | None) -> tuple[Randomization | None, AdaptiveRandomization | None]:
        cfg = self.config
        if checkpoint is not None and checkpoint.get("randomization") is not None:
            base = Randomization.from_dict(checkpoint["randomization"], source=self.resume)
        elif cfg["randomization"] is not None:
            base = load_randomization(cfg["randomization"])
        else:
            return None, None
        if not cfg["adr"]["enabled"]:
            return base, None
        settings = cfg["adr"]
        adr = AdaptiveRandomization(
            base,
            target_return=settings["target_return"],
            rate=settings["rate"],
            widen_above=settings["widen_above"],
            narrow_below=settings["narrow_below"],
            parameters=settings["parameters"],
        )
        if checkpoint is not None and checkpoint.get("adr") is not None:
            adr.load_state_dict(checkpoint["adr"])
        return adr.randomization, adr

    def _env_fns(self, randomization: Randomization | None) -> list[Callable[[], Any]]:
        cfg = self.config
        return [
            partial(
                self.make_env,
                cfg["robot"],
                cfg["task"],
                seed=env_seed(cfg["seed"], 0, cfg["num_envs"]) + i,
                randomization=randomization,
                config=cfg["task_config"] or None,
            )
            for i in range(cfg["num_envs"])
        ]

    # ------------------------------------------------------------------ run
    def run(self) -> TrainResult:
        """Restore (or start), build the learner, iterate, checkpoint: rsl_rl's runner's steps,
        with the curriculum and ADR updated between two rollouts."""
        import torch

        torch.set_num_threads(1)
        cfg = self.config
        self.check_out()
        checkpoint = load_checkpoint(self.resume) if self.resume is not None else None
        schedule = self._schedule(checkpoint)
        randomization, adr = self._randomization(checkpoint)
        curriculum = make_curriculum(cfg["curriculum"], total_iterations=schedule.total, source="training config")
        if checkpoint is not None and checkpoint.get("curriculum") is not None:
            curriculum.load_state_dict(checkpoint["curriculum"])
        torch.manual_seed(cfg["seed"] + schedule.start)
        if checkpoint is not None and checkpoint.get("torch_rng") is not None:
            torch.set_rng_state(checkpoint["torch_rng"])

        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "train_config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        source = source_revision()
        with self._vec_env(randomization) as vec:
            run = self._start(vec, checkpoint, schedule, randomization, adr, curriculum, source)
            return self._iterate(run, schedule)

    @contextlib.contextmanager
    def _vec_env(self, randomization: Randomization | None):
        """The envs in local worker processes, or in Ray actors when the run asked for Ray."""
        cfg = self.config
        privileged = cfg.get("critic_observation", "policy") == "privileged"
        if self.ray_address is None:
            from sim2real.train.vec_env import ProcessVecEnv

            with ProcessVecEnv(
                self._env_fns(randomization), workers=cfg["workers"], privileged=privileged, batched=cfg["batched_envs"]
            ) as vec:
                yield vec
            return
        from sim2real.train.ray_cluster import ray_session
        from sim2real.train.ray_vec_env import RayVecEnv

        with ray_session(self.ray_address, cfg["workers"]):
            with RayVecEnv(self._env_fns(randomization), cfg["workers"], privileged, on_replace=_say) as vec:
                yield vec

    def _schedule(self, checkpoint: dict | None) -> _Schedule:
        """Where the run starts (a resumed checkpoint's iteration) and ends, and the iterations of
        its critic warm-up and learning-rate line; refuses a checkpoint of another task, a run
        already complete and a line that would end before it starts."""
        cfg = self.config
        if checkpoint is not None and (checkpoint["robot"], checkpoint["task"]) != (cfg["robot"], cfg["task"]):
            raise TrainingError(
                f"{self.resume} is a {checkpoint['robot']} {checkpoint['task']} checkpoint, not "
                f"{cfg['robot']} {cfg['task']}. Fix: resume with a checkpoint of the same task"
            )
        start = int(checkpoint["iteration"]) if checkpoint is not None else 0
        total = int(cfg["iterations"])
        if start >= total:
            raise TrainingError(
                f"{self.resume} has already run {start} iterations and --iterations is {total}. "
                f"Fix: pass --iterations N with N > {start} (the run's total)"
            )
        warmup = cfg.get("critic_warmup") or {"iterations": 0, "learning_rate": None}
        warmup_start = int((checkpoint or {}).get("warm_start", {}).get("iteration", 0))
        warmup_end = warmup_start + int(warmup["iterations"])
        line_end = cfg["ppo"].get("learning_rate_final_iteration") or total
        if cfg["ppo"].get("learning_rate_final_iteration") and line_end <= warmup_end < total:
            raise TrainingError(
                f"ppo.learning_rate_final_iteration is {line_end}, but the linear schedule starts at "
                f"iteration {warmup_end} (the warm start's iteration plus any critic warm-up). "
                f"Fix: set it above {warmup_end}, or remove it to end the line at the run's end ({total})"
            )
        # A line that ends inside this run's warm-up would put lambda at its final value from the
        # first iteration; one that ended before the run began (a retrain of an annealed run) holds.
        prior_end = (cfg.get("prior") or {}).get("lambda_final_iteration")
        if (
            (cfg.get("prior") or {}).get("spec") is not None
            and prior_end is not None
            and start < prior_end <= warmup_end < total
        ):
            raise TrainingError(
                f"prior.lambda_final_iteration is {prior_end}, but the prior's lambda line starts at iteration "
                f"{warmup_end} (the warm start's iteration plus any critic warm-up). Fix: set it above "
                f"{warmup_end}, or remove lambda_final and lambda_final_iteration for a fixed lambda"
            )
        return _Schedule(start, total, warmup, warmup_start, warmup_end, line_end)

    def _start(
        self,
        vec,
        checkpoint: dict | None,
        schedule: _Schedule,
        randomization: Randomization | None,
        adr: AdaptiveRandomization | None,
        curriculum,
        source: dict,
    ) -> _Run:
        """The envs as rsl_rl sees them and rsl_rl's PPO (symmetry added), loaded from the
        checkpoint if there is one."""
        from rsl_rl.runners import OnPolicyRunner

        from sim2real.train.rsl_rl_env import RslRlVecEnv

        cfg = self.config
        interface = vec.run_on_first(describe_env)
        vec.set_difficulty(curriculum.difficulty)
        env = RslRlVecEnv(
            vec,
            interface["max_episode_steps"],
            cfg=interface["task_config"],
            seed=env_seed(cfg["seed"], schedule.start, cfg["num_envs"]),
        )
        rsl_cfg = rsl_rl_config(cfg)  # plain data: every checkpoint keeps it
        # rsl_rl gets a copy: symmetry adds a function to it (and rsl_rl changes what it is
        # given), and a checkpoint must stay plain data (it loads weights-only).
        runner_cfg = copy.deepcopy(rsl_cfg)
        if runner_cfg["algorithm"].get("symmetry_cfg") is not None:
            mirrors = vec.run_on_first(env_mirrors)
            if isinstance(mirrors, str):
                raise TrainingError(f"symmetry (training config) cannot mirror this task: {mirrors}")
            runner_cfg["algorithm"]["symmetry_cfg"]["data_augmentation_func"] = MirrorAugmentation(mirrors)
        setup_log = io.StringIO()
        with contextlib.redirect_stdout(setup_log):  # rsl_rl prints its models; keep them in a file
            runner = OnPolicyRunner(env, runner_cfg, log_dir=None, device="cpu")
        (self.out / "model.txt").write_text(setup_log.getvalue())
        alg = runner.alg
        if alg.symmetry is not None:
            log_mirror_loss_without_gradients(alg.symmetry)
        if checkpoint is not None:
            self._load_into(alg, checkpoint, interface, rsl_cfg, schedule.start)
        prior = None
        if cfg["prior"]["spec"] is not None:
            settings = cfg["prior"]
            prior = PriorSchedule(
                settings["lambda"], settings["lambda_final"], settings["lambda_final_iteration"], schedule.warmup_end
            )
            vec.call("set_prior", prior_from_setting(settings["spec"], task=f"{cfg['robot']}_{cfg['task']}"), 0.0)
        run = _Run(
            vec=vec,
            env=env,
            alg=alg,
            rsl_cfg=rsl_cfg,
            interface=interface,
            randomization=randomization,
            adr=adr,
            curriculum=curriculum,
            checkpoint=checkpoint,
            source=source,
            window=deque(maxlen=max(100, cfg["num_envs"])),
            prior=prior,
        )
        self._start_robot_data(run, schedule, checkpoint)
        return run

    def _start_robot_data(self, run: _Run, schedule: _Schedule, checkpoint: dict | None) -> None:
        """Behaviour cloning and domain adaptation on robot bags, when the config names them: the
        bags read now (a run does not start on robot data it cannot use), the terms hooked onto
        PPO's optimizer."""
        from sim2real.train.auxiliary import AuxiliaryLosses, BehaviourCloning
        from sim2real.train.domain_adaptation import DomainAdaptation
        from sim2real.train.export import policy_metadata

        cloning, adaptation = self.config["behaviour_cloning"], self.config["domain_adaptation"]
        if cloning["buffer"] is None and adaptation["bags"] is None:
            return
        policy = policy_metadata(
            {"interface": run.interface, "training_config": self.config, "iteration": schedule.start}, self.out
        )
        seed = self.config["seed"] + schedule.start
        terms = []
        if cloning["buffer"] is not None:
            buffer = self._robot_buffer(
                cloning["buffer"], policy, cloning["demonstrations"], cloning["recorded_policy"]
            )
            run.cloning = BehaviourCloning(buffer, cloning["batch_size"], seed=seed)
            run.cloning_schedule = PriorSchedule(
                cloning["beta"], cloning["beta_final"], cloning["beta_final_iteration"], schedule.warmup_end
            )
            run.buffers.append(buffer)
            terms.append(run.cloning)
        if adaptation["bags"] is not None:
            buffer = self._robot_buffer(adaptation["bags"], policy, "policy", adaptation["recorded_policy"])
            storage, generator = run.alg.storage, np.random.default_rng(seed)

            def sim_observations(n: int):
                """n observations of the rollout PPO is updating on."""
                import torch

                observations = storage.observations["policy"].flatten(0, 1)
                return observations[torch.as_tensor(generator.integers(0, len(observations), size=n))]

            hidden = self.config["policy"]["actor_hidden_dims"][-1]
            slices = policy.observation_spec.slices()
            run.adaptation = DomainAdaptation(
                sim_observations,
                lambda: buffer.samples.observations,
                hidden,
                adaptation["batch_size"],
                adaptation["classifier_learning_rate"],
                seed=seed,
                shared=[slices[name] for name in adaptation["shared_terms"] if name in slices],
            )
            if checkpoint is not None and checkpoint.get("domain_adaptation") is not None:
                run.adaptation.load_state_dict(checkpoint["domain_adaptation"])
            run.buffers.append(buffer)
            terms.append(run.adaptation)
        run.auxiliary = AuxiliaryLosses(run.alg, terms, self.config["ppo"]["max_grad_norm"])

    def _robot_buffer(self, roots, policy, demonstrations: str, recorded_policy: str | None):
        from sim2real.core.policy_file import load_policy
        from sim2real.train.robot_data import RobotBuffer

        recorded = load_policy(recorded_policy) if recorded_policy else None
        buffer = RobotBuffer(roots, policy, demonstrations, recorded_policy=recorded)
        samples = buffer.load()
        for note in sorted(set(samples.notes)):
            print(f"robot data: {note}", flush=True)
        print(f"robot data: {len(samples)} samples from {len(samples.bags)} bag(s) in {buffer.root}", flush=True)
        return buffer

    def _load_into(self, alg, checkpoint: dict, interface: dict, rsl_cfg: dict, start: int) -> None:
        if _term_names(checkpoint["interface"]) != _term_names(interface):
            raise TrainingError(
                f"{self.resume}: its policy observes {_term_names(checkpoint['interface'])} "
                f"({checkpoint['interface']['observation_size']} values) and this task config gives "
                f"{_term_names(interface)} ({interface['observation_size']}). Fix: keep the observation "
                "terms of the checkpoint's task config"
            )
        # A warm start from a policy file (or across critic inputs) brings no critic or
        # optimizer: those start afresh. Actor entries it lacks (the action noise) keep
        # their fresh values.
        actor_state = {**alg.actor.state_dict(), **checkpoint["actor_state_dict"]}
        alg.load(
            {**checkpoint, "actor_state_dict": actor_state},
            {
                "actor": True,
                "critic": checkpoint["critic_state_dict"] is not None,
                "optimizer": checkpoint["optimizer_state_dict"] is not None,
            },
            strict=True,
        )
        warm = checkpoint.get("warm_start")
        if warm and warm["iteration"] == start:  # a fine-tune starts at its own config's rate
            _set_learning_rate(alg, rsl_cfg["algorithm"]["learning_rate"])

    def _iterate(self, run: _Run, schedule: _Schedule) -> TrainResult:
        """The iterations from the schedule's start to its end (or Ctrl-C), a checkpoint every
        save_interval and at the end."""
        from torch.utils.tensorboard import SummaryWriter
        from tqdm import tqdm

        cfg = self.config
        learner_threads = update_threads(cfg["workers"])
        writer = SummaryWriter(log_dir=str(self.out), flush_secs=10)
        steps_per_iteration = cfg["num_envs"] * cfg["num_steps_per_env"]
        env_steps, started = 0, time.monotonic()
        completed, interrupted, path = schedule.start, False, None
        bar = tqdm(
            total=schedule.total,
            initial=schedule.start,
            desc=f"train {cfg['robot']} {cfg['task']}",
            unit="it",
            dynamic_ncols=True,
            disable=not self.progress,
        )
        obs = run.env.get_observations()
        run.alg.train_mode()
        try:
            for it in range(schedule.start, schedule.total):
                self._schedule_rate(run, schedule, it)
                self._schedule_prior(run, it)
                self._schedule_robot_data(run, it, schedule, bar)
                obs, losses, times = self._rollout_and_update(run, obs, learner_threads)
                completed = it + 1  # at once: a Ctrl-C from here on saves this update as this iteration's
                env_steps += steps_per_iteration
                episodes = run.env.pop_episodes()
                row = _iteration_row(completed, times, steps_per_iteration, episodes)
                self._adapt_after(run, row, episodes, completed)
                run.history.append(row)
                if run.prior_scale is not None:
                    row["prior_lambda"] = run.prior_scale
                if run.auxiliary is not None:
                    losses = {**losses, **run.auxiliary.pop_statistics()}
                if run.adaptation is not None:
                    row["feature_mmd"] = run.adaptation.feature_distance(run.alg.actor)
                    losses["domain_adaptation/feature_mmd"] = row["feature_mmd"]
                self._log(writer, completed, row, episodes, losses, run.alg, run.randomization)
                bar.set_postfix_str(_postfix(row), refresh=False)
                bar.update(1)
                if completed % cfg["save_interval"] == 0 or completed == schedule.total:
                    path = self._save(run, completed)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
            writer.close()
        if path is None or not path.name.endswith(f"_{completed}.pt"):
            path = self._save(run, completed)
        return TrainResult(
            out=self.out,
            checkpoint=path,
            start_iteration=schedule.start,
            iterations=completed,
            seconds=time.monotonic() - started,
            env_steps=env_steps,
            interrupted=interrupted,
            history=run.history,
        )

    def _schedule_rate(self, run: _Run, schedule: _Schedule, it: int) -> None:
        """The learning rate of iteration ``it``: the critic warm-up's, then the linear line's."""
        warmup, ppo = schedule.warmup, self.config["ppo"]
        if schedule.warmup_start <= it <= schedule.warmup_end and warmup["iterations"]:
            _warm_up_critic(
                run.alg, it < schedule.warmup_end, warmup["learning_rate"], run.rsl_cfg["algorithm"]["learning_rate"]
            )
        if ppo["schedule"] == "linear" and it >= schedule.warmup_end:
            _set_learning_rate(run.alg, linear_rate(ppo, it, schedule.warmup_end, schedule.line_end))

    def _schedule_prior(self, run: _Run, it: int) -> None:
        """The prior's lambda for iteration ``it``, sent to the workers when it changes."""
        if run.prior is None:
            return
        scale = run.prior.at(it)
        if scale != run.prior_scale:
            run.vec.call("set_prior_scale", scale)
            run.prior_scale = scale

    def _schedule_robot_data(self, run: _Run, it: int, schedule: _Schedule, bar) -> None:
        """beta and lambda for iteration ``it`` (beta 0 while a critic warm-up holds the actor),
        and the bags that joined the robot data since the last iteration."""
        from sim2real.train.domain_adaptation import dann_lambda

        if run.auxiliary is None:
            return
        if run.cloning is not None:
            frozen = not any(p.requires_grad for p in run.alg.actor.parameters())
            run.cloning.weight = 0.0 if frozen else run.cloning_schedule.at(it)
        if run.adaptation is not None:
            settings = self.config["domain_adaptation"]
            progress = (it - schedule.warmup_end) / max(1, schedule.total - 1 - schedule.warmup_end)
            run.adaptation.reversal = dann_lambda(progress, settings["lambda"], settings["schedule"])
        for buffer in run.buffers:
            skipped = len(buffer.skipped)
            for bag in buffer.refresh():
                bar.write(f"robot data: {bag} joined ({len(buffer.samples)} samples now)")
            for reason in buffer.skipped[skipped:]:
                bar.write(f"robot data: skipped {reason}")

    def _rollout_and_update(self, run: _Run, obs, learner_threads: int):
        """One rollout of num_steps_per_env steps in every env, then the PPO update; the four
        calls OnPolicyRunner.learn makes. Returns the next observation, the losses and the
        times the rollout started, ended and the update ended."""
        import torch
        from rsl_rl.utils import check_nan

        from sim2real.train.vec_env import RolloutLost

        cfg, alg, env = self.config, run.alg, run.env
        t0 = time.monotonic()
        with torch.inference_mode():
            for attempt in range(MAX_ROLLOUT_ATTEMPTS):
                try:
                    for _ in range(cfg["num_steps_per_env"]):
                        actions = alg.act(obs)
                        obs, rewards, dones, extras = env.step(actions)
                        check_nan(obs, rewards, dones)
                        alg.process_env_step(obs, rewards, dones, extras)
                    break
                except RolloutLost as lost:
                    # A worker's envs lost their states mid-rollout: the steps collected so far
                    # no longer join up in those envs. Collect the whole rollout again.
                    if attempt == MAX_ROLLOUT_ATTEMPTS - 1:
                        raise TrainingError(
                            f"{lost}; the rollout was collected {MAX_ROLLOUT_ATTEMPTS} times and lost "
                            "a worker each time. Fix: check the cluster's machines (`ray status`), then "
                            "continue with --resume from the last checkpoint"
                        ) from None
                    alg.storage.clear()
                    obs = env.get_observations()
                    _say(
                        f"{len(lost.envs)} envs lost their episodes with a worker; this iteration's rollout is collected again"
                    )
            t1 = time.monotonic()
            alg.compute_returns(obs)
        with _torch_threads(torch, learner_threads):
            losses = alg.update()
        return obs, losses, (t0, t1, time.monotonic())

    def _adapt_after(self, run: _Run, row: dict, episodes: list[dict], completed: int) -> None:
        """ADR and the curriculum from the episodes since their last decision (once there are
        min_episodes_per_update of them); new ranges and difficulty go to the workers."""
        run.window.extend(episodes)
        run.pending.extend(episodes)
        if len(run.pending) >= self.config["min_episodes_per_update"]:
            decision = self._adapt(run.adr, run.curriculum, run.pending, completed)
            if decision is not None:
                row["adr_decision"] = _DECISION.get(decision, 0.0)
                if decision != "hold":
                    run.randomization = run.adr.randomization
                    run.vec.set_randomization(run.randomization)
            success_rate, run.pending = _mean(run.pending, "success"), []
        else:
            success_rate = None  # too few episodes to judge: the curriculum holds
        before = run.curriculum.difficulty
        difficulty = run.curriculum.update(completed, success_rate)
        if difficulty != before:
            run.vec.set_difficulty(difficulty)
        row.update(_window_stats(run.window), difficulty=difficulty)

    def _save(self, run: _Run, completed: int) -> Path:
        """A checkpoint rsl_rl's OnPolicyRunner.load reads, plus what a resume needs: the
        configs, the task's interface, the randomization, ADR and curriculum state, the source
        revision and the torch RNG."""
        import torch

        cfg, checkpoint = self.config, run.checkpoint
        state = {
            **run.alg.save(),
            "iter": completed,
            "infos": None,
            "format": FORMAT,
            "iteration": completed,
            "robot": cfg["robot"],
            "task": cfg["task"],
            "training_config": cfg,
            "rsl_rl_config": run.rsl_cfg,
            "interface": run.interface,
            "randomization": None if run.randomization is None else run.randomization.to_dict(),
            "adr": None if run.adr is None else run.adr.state_dict(),
            "curriculum": run.curriculum.state_dict(),
            "source": run.source,
            "torch_rng": torch.get_rng_state(),
            **({"warm_start": checkpoint["warm_start"]} if checkpoint and checkpoint.get("warm_start") else {}),
            **({"domain_adaptation": run.adaptation.state_dict()} if run.adaptation is not None else {}),
        }
        return save_checkpoint(self.out / f"model_{completed}.pt", state)

    def _adapt(self, adr: AdaptiveRandomization | None, curriculum, episodes: list[dict], completed: int) -> str | None:
        """ADR's decision from the episodes since its last one. None (ADR holds) while it is
        off, during its warm-up (an untrained policy's low return says nothing about the
        ranges: ADR would only narrow them towards a point) and until the curriculum is at
        its hardest (a harder task lowers the return too, which ADR would take for a too
        wide randomization)."""
        if (
            adr is None
            or completed <= self.config["adr"]["warmup_iterations"]
            or curriculum.difficulty < curriculum.d_max
        ):
            return None
        # The task's own return: the target was set on it, and a prior's share moves with lambda.
        return adr.update(float(np.mean([task_return(e) for e in episodes])))

    def _log(
        self, writer, it: int, row: dict, episodes: list[dict], losses: dict, alg, randomization: Randomization | None
    ) -> None:
        scalars: dict[str, float] = {
            "Perf/collection_time": row["collect_time"],
            "Perf/learning_time": row["learn_time"],
            "Perf/env_steps_per_s": row["env_steps_per_s"],
            "Curriculum/difficulty": row["difficulty"],
            "Loss/learning_rate": alg.learning_rate,
            "Policy/mean_std": float(alg.get_policy().output_std.detach().mean()),
        }
        scalars.update({k if "/" in k else f"Loss/{k}": v for k, v in losses.items()})
        for key in ("mean_return", "success_rate", "mean_length"):
            if key in row:
                scalars[f"Train/{key}"] = row[key]
        for key, values in _numeric(episodes).items():
            scalars[key] = float(np.mean(values))
        if "adr_decision" in row:
            scalars["ADR/decision"] = row["adr_decision"]
        if "prior_lambda" in row:
            scalars["Prior/lambda"] = row["prior_lambda"]
        if randomization is not None:
            for name, (low, high) in randomization.ranges().items():
                scalars[f"ADR/{name}_low"], scalars[f"ADR/{name}_high"] = low, high
        for tag, value in scalars.items():
            if math.isfinite(value):
                writer.add_scalar(tag, value, it)


def _iteration_row(completed: int, times: tuple[float, float, float], steps: int, episodes: list[dict]) -> dict:
    """An iteration's timings and the figures of the episodes it finished."""
    t0, t1, t2 = times
    row = {
        "iteration": completed,
        "collect_time": t1 - t0,
        "learn_time": t2 - t1,
        "env_steps_per_s": steps / max(t1 - t0, 1e-9),
        "episodes": len(episodes),
    }
    if episodes:
        row["iteration_return"] = _mean(episodes, "return")
        row["iteration_success_rate"] = _mean(episodes, "success")
    return row


def _term_names(interface: dict) -> list[str]:
    """The observation layout as ``name x size * scale`` strings (``observation_terms`` is the
    spec's metadata JSON)."""
    terms = json.loads(interface["observation_terms"])["terms"]
    return [f"{t['name']} x{t['size']} *{t['scale']:g}" for t in terms]


def _warm_up_critic(alg, warming: bool, warmup_rate: float, rate: float) -> None:
    """Each iteration of the critic warm-up (``warming``): no gradient into the actor (weights
    and action noise), no update of its observation normalizer (the behaviour stays exactly
    as loaded), the warm-up's learning rate. Once at its end (``not warming``): all trains
    again, at the PPO rate."""
    for parameter in alg.actor.parameters():
        parameter.requires_grad_(not warming)
    normalizer = getattr(alg.actor, "obs_normalizer", None)
    if normalizer is not None:
        normalizer.train(not warming)
    _set_learning_rate(alg, warmup_rate if warming else rate)


def linear_rate(ppo: dict, iteration: int, first: int, total: int) -> float:
    """The linear schedule's rate at ``iteration``: ``learning_rate`` at ``first`` (the run's
    first PPO iteration after any critic warm-up), ``learning_rate_final`` at ``total`` (the
    run's end, or ``ppo.learning_rate_final_iteration``) and after it.
    Derived from the iteration and the line's end alone, so a resumed run continues the same
    line; a resume with a larger total redraws the line to the new end (the rate steps up)
    unless the config fixes the end."""
    fraction = min(1.0, max(0.0, (iteration - first) / max(1, total - first)))
    return ppo["learning_rate"] + fraction * (ppo["learning_rate_final"] - ppo["learning_rate"])


def _say(message: str) -> None:
    """A line on stderr, above the progress bar when there is one."""
    from tqdm import tqdm

    tqdm.write(f"train: {message}", file=sys.stderr)


def update_threads(workers: int) -> int:
    """Torch threads for the PPO update: while it runs the workers wait, so the learner's own
    core and theirs are free; no more than the cores this process may use."""
    return max(1, min(int(workers) + 1, len(os.sched_getaffinity(0))))


@contextlib.contextmanager
def _torch_threads(torch, threads: int):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _set_learning_rate(alg, rate: float) -> None:
    alg.learning_rate = rate
    for group in alg.optimizer.param_groups:
        group["lr"] = rate


def task_return(episode: dict) -> float:
    """An episode's return without a reward prior's terms (``prior/<name>``)."""
    terms = episode.get("reward_terms") or {}
    return float(episode.get("return", 0.0)) - math.fsum(v for k, v in terms.items() if k.startswith("prior/"))


def _mean(episodes: list[dict], key: str) -> float:
    return float(np.mean([float(e.get(key, 0.0)) for e in episodes]))


def _window_stats(window: deque) -> dict[str, float]:
    if not window:
        return {}
    episodes = list(window)
    return {
        "mean_return": _mean(episodes, "return"),
        "success_rate": _mean(episodes, "success"),
        "mean_length": _mean(episodes, "length"),
    }


def _numeric(episodes: list[dict]) -> dict[str, list[float]]:
    """Per-episode task metrics and reward-term sums, by TensorBoard tag."""
    values: dict[str, list[float]] = {}
    for episode in episodes:
        for key, value in episode.items():
            if key == "reward_terms":
                for term, total in value.items():
                    values.setdefault(f"Reward/{term}", []).append(float(total))
            elif key not in ("return", "length") and isinstance(value, (bool, int, float, np.number)):
                values.setdefault(f"Episode/{key}", []).append(float(value))
    return values


def _postfix(row: dict) -> str:
    parts = []
    if "mean_return" in row:
        parts.append(f"return {row['mean_return']:.2f}")
        parts.append(f"SR {100 * row['success_rate']:.0f}%")
    parts.append(f"d {row['difficulty']:.2f}")
    parts.append(f"{row['env_steps_per_s'] / 1000:.1f}k steps/s")
    return " ".join(parts)


def summary(result: TrainResult) -> str:
    """What a finished run left where, and what to run next."""
    minutes, seconds = divmod(int(result.seconds), 60)
    done = result.iterations - result.start_iteration
    last = result.history[-1] if result.history else {}
    lines = [
        f"{'interrupted' if result.interrupted else 'done'}: {done} iterations in {minutes}m{seconds:02d}s "
        f"({result.iterations_per_second:.2f} it/s, {result.env_steps_per_second:.0f} env steps/s)",
    ]
    mmd = [row["feature_mmd"] for row in result.history if "feature_mmd" in row]
    if mmd:
        lines.append(
            f"  domain adaptation: feature MMD sim/robot {mmd[0]:.4f} after this run's first iteration, {mmd[-1]:.4f} now"
        )
    if "mean_return" in last:
        lines.append(
            f"  last 100 episodes: mean return {last['mean_return']:.3f}, "
            f"success rate {100 * last['success_rate']:.0f}%"
        )
    lines += [
        f"  checkpoint:  {result.checkpoint}",
        f"  tensorboard: tensorboard --logdir {result.out}",
        f"  export:      sim2real export {result.checkpoint} -o {result.out / 'policy.onnx'}",
    ]
    if result.interrupted:
        lines.append(f"  resume:      sim2real train --resume {result.checkpoint}")
    return "\n".join(lines)
