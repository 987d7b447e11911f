"""Many gymnasium envs stepped in a few worker processes, as one batch.

Measured on a 2-core machine: one process per env (gymnasium's AsyncVectorEnv) gains
little, because every step pays a pipe round trip per env; two processes that each
step several envs in a loop scale best (Panda reach: 12k env steps/s with 16 envs
over 2 workers, 7k in one process). So a worker here owns a slice of the envs and
answers each command for its whole slice with stacked arrays.

Contract of :meth:`ProcessVecEnv.step`:

- env ``i`` is reset with ``seed + i`` by :meth:`reset`, so a run is reproducible;
- an env whose episode ended is reset at once (auto-reset): the returned observation
  is the first one of its next episode;
- ``terminated`` and ``time_outs`` are separate: a time-out is an episode cut short by
  the time limit, whose last state still has a value (PPO bootstraps it);
- each finished episode comes back as ``(env_index, episode)``, where ``episode`` is the
  env's ``info["episode"]`` with ``return``, ``length`` and the per-term reward sums
  (``reward_terms``) filled in when the env did not give them;
- with ``privileged=True`` every reset and step also gathers each env's
  ``privileged_observation()`` (simulator truth for an asymmetric critic), aligned with
  ``obs`` (after auto-reset too): :attr:`ProcessVecEnv.privileged_obs`, ``VecStep.privileged``.

A worker that raises takes the whole vector env down: the parent re-raises a
:class:`WorkerError` carrying the worker's traceback, and closes the other workers.
Workers exit when the parent closes them, when the parent process dies (their pipe
reaches EOF), and ignore Ctrl-C, which the parent handles.
"""

from __future__ import annotations

import abc
import multiprocessing as mp
import os
import signal
import sys
import traceback
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from sim2real.core.errors import Sim2RealError

EnvFn = Callable[[], Any]

# Workers must not start thread pools that fight each other and the learner for 2 cores.
_SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


class WorkerError(Sim2RealError, RuntimeError):
    """An env in a worker process raised; the message carries the worker's traceback."""


class RolloutLost(Sim2RealError, RuntimeError):
    """A step lost envs with the worker that ran them (a vector env whose workers can be
    replaced: :class:`sim2real.train.ray_vec_env.RayVecEnv`). The workers lost in this step
    (``workers``; empty when one was replaced before it, or only a connection broke) are replaced and the envs in ``envs`` have started new
    episodes; ``obs`` (and ``privileged``) is every env's observation to go on from. The
    rollout being collected no longer joins up in those envs: collect it again."""

    def __init__(self, workers: list[int], envs: list[int], obs, privileged):
        lost = (
            f"env worker(s) {workers} lost mid-step and replaced"
            if workers
            else "a worker was replaced since the last step, or a step's connection broke"
        )
        super().__init__(f"{lost}; envs {envs[0]}..{envs[-1]} started new episodes")
        self.workers, self.envs, self.obs, self.privileged = workers, envs, obs, privileged


class VecStep(NamedTuple):
    obs: np.ndarray  # (num_envs, obs_size) float32; after auto-reset where an episode ended
    rewards: np.ndarray  # (num_envs,) float32
    terminated: np.ndarray  # (num_envs,) bool: a terminal state (fall, success that ends the task)
    time_outs: np.ndarray  # (num_envs,) bool: truncated by the time limit and not terminal
    episodes: list[tuple[int, dict]]  # finished episodes of this step, by env index
    privileged: np.ndarray | None = None  # (num_envs, privileged_size) float32 when asked for

    @property
    def dones(self) -> np.ndarray:
        return self.terminated | self.time_outs


class VecEnvBase(abc.ABC):
    """What every vector env (local processes, Ray actors) shares beyond its transport: the
    commands built on ``call`` and ``run``, and its lifetime (a context manager, closed once)."""

    num_envs: int
    _closed: bool

    @abc.abstractmethod
    def call(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``env.method(*args, **kwargs)`` on every env; the results in env order."""

    @abc.abstractmethod
    def run(self, fn: Callable[..., Any], args: Sequence[tuple | None]) -> list[Any]:
        """``fn(env_i, *args[i])`` in the workers for every ``i`` whose ``args[i]`` is not None."""

    @abc.abstractmethod
    def close(self, timeout: float = 5.0) -> None:
        """Stop the workers (idempotent)."""

    def run_on_first(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(env_0, *args)`` in its worker (see :meth:`run`)."""
        return self.run(fn, [args] + [None] * (self.num_envs - 1))[0]

    def set_difficulty(self, difficulty: float) -> None:
        self.call("set_difficulty", difficulty)

    def set_randomization(self, randomization: Any) -> None:
        self.call("set_randomization", randomization)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the vector env is closed")


class ProcessVecEnv(VecEnvBase):
    """``len(env_fns)`` envs over ``workers`` processes. ``env_fns`` must be picklable
    (module-level functions or ``functools.partial`` of them), because workers are
    started with ``spawn``: a fresh interpreter, no state inherited from the learner.
    ``batched``: each worker steps its envs together where their task can be
    (:class:`BatchedEnvSlice`), with the same results."""

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        workers: int = 2,
        start_method: str = "spawn",
        privileged: bool = False,
        batched: bool = False,
    ):
        if not env_fns:
            raise ValueError("ProcessVecEnv needs at least one env")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.num_envs = len(env_fns)
        self.num_workers = min(workers, self.num_envs)
        slices = np.array_split(np.arange(self.num_envs), self.num_workers)
        self._slices = [(int(s[0]), int(s[-1]) + 1) for s in slices]
        self._pipes: list[Any] = []
        self._processes: list[mp.Process] = []
        self._closed = False
        self.privileged = bool(privileged)
        self.privileged_obs: np.ndarray | None = None  # of the last reset or step, when privileged

        context = mp.get_context(start_method)
        saved = {key: os.environ.get(key) for key in _SINGLE_THREAD}
        os.environ.update(_SINGLE_THREAD)  # spawn copies the environment at start
        try:
            for index, (begin, end) in enumerate(self._slices):
                parent, child = context.Pipe()
                process = context.Process(
                    target=_worker_main,
                    args=(child, list(env_fns[begin:end]), self.privileged, batched),
                    name=f"sim2real-vec-env-{index}",
                    daemon=True,
                )
                process.start()
                child.close()  # only the worker holds its end: its death or ours reaches the other as EOF
                self._pipes.append(parent)
                self._processes.append(process)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        spaces = self._gather()
        self.single_observation_space, self.single_action_space, self.privileged_size = spaces[0]
        self.obs_size = int(np.prod(self.single_observation_space.shape))
        self.num_actions = int(np.prod(self.single_action_space.shape))

    # ------------------------------------------------------------------ commands
    def reset(self, seed: int | None = None) -> np.ndarray:
        """Reset every env (env ``i`` with ``seed + i``); returns the stacked observations."""
        self._check_open()
        for pipe, (begin, end) in zip(self._pipes, self._slices):
            seeds = None if seed is None else [seed + i for i in range(begin, end)]
            pipe.send(("reset", seeds))
        parts = self._gather()
        if self.privileged:
            self.privileged_obs = np.concatenate([p[1] for p in parts])
        return np.concatenate([p[0] for p in parts])

    def step(self, actions: np.ndarray) -> VecStep:
        self._check_open()
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"actions must have shape {(self.num_envs, self.num_actions)}, got {actions.shape}")
        for pipe, (begin, end) in zip(self._pipes, self._slices):
            pipe.send(("step", actions[begin:end]))
        parts = self._gather()
        episodes = [(begin + i, episode) for (begin, _), part in zip(self._slices, parts) for i, episode in part[4]]
        if self.privileged:
            self.privileged_obs = np.concatenate([p[5] for p in parts])
        return VecStep(*(np.concatenate([p[k] for p in parts]) for k in range(4)), episodes, self.privileged_obs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``env.method(*args, **kwargs)`` on every env; the results in env order."""
        self._check_open()
        for pipe in self._pipes:
            pipe.send(("call", (method, args, kwargs)))
        return [result for part in self._gather() for result in part]

    def get_attr(self, name: str) -> Any:
        """A picklable attribute of env 0 (all envs are built alike): profile, task_name, ..."""
        self._check_open()
        self._pipes[0].send(("get_attr", name))
        return self._receive(0)

    def run(self, fn: Callable[..., Any], args: Sequence[tuple | None]) -> list[Any]:
        """``fn(env_i, *args[i])`` in the workers, in parallel, for every ``i`` whose
        ``args[i]`` is not None; results in env order (None where skipped). For work
        that is not a step (evaluation episodes) and for values that do not pickle (an
        ObservationSpec holds functions: compute there what you need). ``fn`` must be
        picklable (module level)."""
        self._check_open()
        if len(args) != self.num_envs:
            raise ValueError(f"run needs one args entry per env ({self.num_envs}), got {len(args)}")
        for pipe, (begin, end) in zip(self._pipes, self._slices):
            pipe.send(("run", (fn, list(args[begin:end]))))
        return [result for part in self._gather() for result in part]

    # ------------------------------------------------------------------ lifetime
    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        for pipe in self._pipes:
            try:
                pipe.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for process in self._processes:
            process.join(timeout)
            if process.is_alive():
                process.terminate()
                process.join(1.0)
        for pipe in self._pipes:
            pipe.close()

    def __del__(self) -> None:
        try:
            self.close(timeout=1.0)
        except Exception:  # interpreter shutdown may have torn down multiprocessing
            pass

    # ------------------------------------------------------------------ plumbing
    def _gather(self) -> list[Any]:
        return [self._receive(i) for i in range(self.num_workers)]

    def _receive(self, index: int) -> Any:
        self._check_open()
        try:
            status, payload = self._pipes[index].recv()
        except (EOFError, ConnectionResetError, OSError):
            code = self._processes[index].exitcode
            self.close(timeout=1.0)
            raise WorkerError(
                f"vec env worker {index} died without answering (exit code {code}); its own error, "
                "if any, is printed above. A script that starts workers needs an "
                '`if __name__ == "__main__":` guard (workers are spawned)'
            ) from None
        if status == "error":
            self.close(timeout=1.0)
            begin, end = self._slices[index]
            raise WorkerError(f"vec env worker {index} (envs {begin}..{end - 1}) failed:\n{payload}")
        return payload


class EnvSlice:
    """The envs of one worker, with the per-episode bookkeeping the parent relies on."""

    def __init__(self, env_fns: list[EnvFn], privileged: bool = False):
        self.envs = [fn() for fn in env_fns]
        self.privileged = privileged
        self.returns = np.zeros(len(self.envs))
        self.lengths = np.zeros(len(self.envs), dtype=np.int64)
        self.terms: list[dict[str, float]] = [{} for _ in self.envs]

    def reset(self, seeds: list[int] | None) -> np.ndarray:
        obs = []
        for i, env in enumerate(self.envs):
            seed = None if seeds is None else seeds[i]
            observation, _ = env.reset(seed=seed)
            if seed is not None:
                env.action_space.seed(seed)
            obs.append(observation)
            self._clear(i)
        return np.stack(obs).astype(np.float32, copy=False), self._privileged()

    def _privileged(self) -> np.ndarray | None:
        if not self.privileged:
            return None
        return np.stack([env.privileged_observation() for env in self.envs]).astype(np.float32, copy=False)

    def step(self, actions: np.ndarray) -> tuple:
        n = len(self.envs)
        obs, rewards = [None] * n, np.zeros(n, dtype=np.float32)
        terminated, time_outs = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        episodes = []
        for i, env in enumerate(self.envs):
            observation, reward, term, trunc, info = env.step(actions[i])
            rewards[i] = reward
            self.returns[i] += reward
            self.lengths[i] += 1
            for name, value in info.get("reward_terms", {}).items():
                self.terms[i][name] = self.terms[i].get(name, 0.0) + float(value)
            if term or trunc:
                episode = {
                    "return": float(self.returns[i]),
                    "length": int(self.lengths[i]),
                    "reward_terms": dict(self.terms[i]),
                }
                episode.update(info.get("episode", {}))
                episodes.append((i, episode))
                terminated[i], time_outs[i] = bool(term), bool(trunc) and not term
                observation, _ = env.reset()
                self._clear(i)
            obs[i] = observation
        return (
            np.stack(obs).astype(np.float32, copy=False),
            rewards,
            terminated,
            time_outs,
            episodes,
            self._privileged(),
        )

    def _clear(self, i: int) -> None:
        self.returns[i], self.lengths[i], self.terms[i] = 0.0, 0, {}

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass


class BatchedEnvSlice(EnvSlice):
    """The envs of one worker stepped together when their task can be
    (:mod:`sim2real.train.envs.go2_walk_batch`): the same answers as :class:`EnvSlice`, row for
    row, for a fraction of its per-env Python; one at a time, as :class:`EnvSlice`, when it
    cannot (another task, a reward prior: said once on stderr). The envs themselves (``envs``)
    reset the episodes and answer ``call``/``run``/``get_attr``. While an episode runs in the
    batch, an env's own per-step state (its world's time and actuator, its last reward) is that
    of the episode's start: a ``run`` that steps or resets it, or a new world, is refused at the
    next step; a command set through ``call`` (``set_fixed_command``) is taken over."""

    def __init__(self, env_fns: list[EnvFn], privileged: bool = False):
        from sim2real.train.envs.go2_walk_batch import BatchRefused, Go2WalkBatch

        self.batch = None
        super().__init__(env_fns, privileged)
        try:
            self.batch = Go2WalkBatch(self.envs)
        except BatchRefused as refused:
            self._one_at_a_time(str(refused))
        self._stepped_together = False
        self._term_sums = np.zeros((len(self.envs), 0 if self.batch is None else len(self.batch.term_names)))

    def _one_at_a_time(self, reason: str) -> None:
        self.batch = None
        print(f"sim2real: this worker steps its envs one at a time: {reason}", file=sys.stderr, flush=True)

    def reset(self, seeds: list[int] | None) -> tuple:
        from sim2real.train.envs.go2_walk_batch import BatchRefused

        obs, privileged = super().reset(seeds)
        if self.batch is not None:
            try:
                for i in range(len(self.envs)):
                    self.batch.pull(i)
            except BatchRefused as refused:  # every env has just reset: one at a time from here is the same
                self._one_at_a_time(str(refused))
        self._stepped_together = False
        return obs, privileged

    def step(self, actions: np.ndarray) -> tuple:
        from sim2real.train.envs.go2_walk_batch import BatchRefused

        batch = self.batch
        if batch is not None:
            try:
                for env in self.envs:
                    batch.check_prior(env)
            except BatchRefused as refused:
                if self._stepped_together:  # the envs' own state is that of their episodes' start
                    raise BatchRefused(
                        f"{refused}, and the envs' episodes already run in the batch: train with "
                        "batched_envs: false, or set the prior before the first step"
                    ) from None
                self._one_at_a_time(str(refused))
                batch = None
        if batch is None:
            return super().step(actions)
        self._stepped_together = True
        rewards, terms, terminated, truncated, ended = batch.step(actions)
        self.returns += rewards
        self.lengths += 1
        self._term_sums += terms
        obs = batch.observe()
        privileged = batch.privileged() if self.privileged else None
        episodes = []
        for i in np.flatnonzero(terminated | truncated):
            env = self.envs[i]
            episode = {
                "return": float(self.returns[i]),
                "length": int(self.lengths[i]),
                "reward_terms": dict(zip(batch.term_names, self._term_sums[i].tolist())),
            }
            episode.update(ended[i])
            episodes.append((int(i), episode))
            obs[i], _ = env.reset()
            batch.pull(i)
            if privileged is not None:
                privileged[i] = env.privileged_observation()
            self._clear(i)
        return obs, rewards.astype(np.float32), terminated, truncated & ~terminated, episodes, privileged

    def _clear(self, i: int) -> None:
        super()._clear(i)
        if self.batch is not None:
            self._term_sums[i] = 0.0


def describe(envs: EnvSlice) -> tuple:
    """What a worker tells its parent first: its envs' observation and action spaces and the
    privileged observation's size (0 unless asked for)."""
    first = envs.envs[0]
    if envs.privileged and not hasattr(first, "privileged_observation"):
        raise TypeError(
            f"{type(first).__name__} has no privileged_observation(): it cannot feed a "
            "privileged critic. Fix: train with critic_observation: policy"
        )
    size = len(first.privileged_names()) if envs.privileged else 0
    return first.observation_space, first.action_space, size


def answer(envs: EnvSlice, command: str, argument: Any) -> Any:
    """What a worker answers to one command of its parent (the loop handles ``close``)."""
    if command == "step":
        return envs.step(argument)
    if command == "reset":
        return envs.reset(argument)
    if command == "call":
        method, args, kwargs = argument
        return [getattr(env, method)(*args, **kwargs) for env in envs.envs]
    if command == "get_attr":
        return getattr(envs.envs[0], argument)
    if command == "run":
        fn, args = argument
        return [None if a is None else fn(env, *a) for env, a in zip(envs.envs, args)]
    raise ValueError(f"unknown vec env command {command!r}")


def _worker_main(pipe: Any, env_fns: list[EnvFn], privileged: bool = False, batched: bool = False) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    envs = None
    try:
        envs = (BatchedEnvSlice if batched else EnvSlice)(env_fns, privileged)
        pipe.send(("ok", describe(envs)))
        while True:
            command, argument = pipe.recv()
            if command == "close":
                break
            result = answer(envs, command, argument)
            pipe.send(("ok", result))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass  # the parent is gone or closing: nothing left to answer
    except BaseException:
        try:
            pipe.send(("error", traceback.format_exc()))
        except Exception:
            pass
    finally:
        if envs is not None:
            envs.close()
        pipe.close()
