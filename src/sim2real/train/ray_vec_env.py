"""The vector env's envs stepped by Ray actors, on any machine of a Ray cluster.

The contract is :class:`sim2real.train.vec_env.ProcessVecEnv`'s, and so is the work: each
actor owns a slice of the envs (the same slices, seeds and per-episode bookkeeping, the same
code: :class:`~sim2real.train.vec_env.EnvSlice`), so the learner sees the same arrays for the
same seeds whether the envs run in local processes or on a cluster.

The steps of a rollout, the call made most, do not go through Ray's task calls: each worker
also listens on a TCP port of its node and the learner sends it the actions and receives its
answer over that connection (``multiprocessing.connection``, authenticated with a key drawn
for the run), as the local pipes do. Measured on 2 cores (``benchmarks/ray_scaling.py``): Ray
actor calls cost 1.4-1.9 ms a step of 1-2 workers, the connections 0.22-0.48 ms, the local
pipes 0.22-0.32 ms.
Ray places the workers, restarts them and carries every other command (reset, settings,
evaluation episodes). The connection needs the ports between the machines open, as Ray's own
workers do.

A worker lost (its process killed, its machine gone) is restarted by Ray (actor fault
tolerance, ``max_restarts``); every answer carries the identity of the process that gave it,
so a worker restarted between two commands is noticed too. The replacement builds its envs
again and is given the settings the learner sent (the last ``set_difficulty``,
``set_randomization``, ``set_prior_scale``, ... calls); then

- a ``reset``, ``call``, ``get_attr`` or ``run`` is sent to it again: an evaluation episode
  is deterministic in its seed, so the answer is the one the lost worker would have given;
- a ``step`` cannot be: the lost envs' states went with the worker, and what the other
  workers did in that step is dropped, to keep every env in step with the learner. Every env
  starts a new episode (seeds of the last reset moved on by ``REPLACEMENT_SEED_STRIDE`` each
  time) and ``step`` raises :class:`~sim2real.train.vec_env.RolloutLost` with the observations
  to go on from; so does the first step after a worker replaced between two steps (noticed by
  a setting the learner sent). The trainer collects that iteration's rollout again.

An env that raises is not a lost worker: its traceback comes back as a
:class:`~sim2real.train.vec_env.WorkerError`, as from a local worker.
"""

from __future__ import annotations

import logging
import os
import pickle
import secrets
import threading
import time
import traceback
import uuid
from multiprocessing.connection import AuthenticationError, Client, Listener
from typing import Any, Callable, Sequence

import numpy as np

from sim2real.train.ray_cluster import check_room, import_ray
from sim2real.train.vec_env import (
    EnvFn,
    EnvSlice,
    RolloutLost,
    VecEnvBase,
    VecStep,
    WorkerError,
    answer,
    describe,
)

# Restarts per actor before its loss ends the run (an env whose constructor crashes its
# process would otherwise be restarted for ever).
MAX_RESTARTS = 5
# How long a worker may take to start (or to come back), before the run gives up on it.
START_TIMEOUT_S = 120.0
# How long one step of a worker may take before the run gives up on it.
STEP_TIMEOUT_S = 300.0
# After a lost worker the envs reset with the seeds of the last reset moved on by this, times
# the number of such restarts so far: new episodes, and reproducible ones.
REPLACEMENT_SEED_STRIDE = 7_919_000

log = logging.getLogger(__name__)


class _WorkerGone(Exception):
    """Inside a step: a worker's process is gone, or is not the one the learner knows."""


class _SliceWorker:
    """One Ray actor: a slice of envs, answering the vector env's commands as a local worker
    does. Each answer comes with the identity of this process, new at every (re)start."""

    def __init__(self, env_fns: list[EnvFn], privileged: bool):
        self.identity = uuid.uuid4().hex
        self.envs = EnvSlice(env_fns, privileged)
        self._listener: Listener | None = None
        # Steps run on the step server's thread, commands on the actor's: never both at once on
        # the envs (a physics engine is not thread-safe), even when the learner gave up on a step.
        self._envs_lock = threading.Lock()

    def describe(self) -> tuple[str, tuple]:
        with self._envs_lock:
            return self.identity, describe(self.envs)

    def answer(self, command: str, argument: Any) -> tuple[str, Any]:
        with self._envs_lock:
            return self.identity, answer(self.envs, command, argument)

    def listen(self, authkey: bytes) -> tuple[str, tuple[str, int]]:
        """Start serving steps on a port of this node: (this process's identity, the address).
        One connection is served at a time, until the learner closes it (after a lost step, or
        at the end); then the next."""
        import ray

        if self._listener is None:
            self._listener = Listener((ray.util.get_node_ip_address(), 0), authkey=authkey)
            threading.Thread(target=self._serve_steps, name="sim2real-steps", daemon=True).start()
        return self.identity, self._listener.address

    def _serve_steps(self) -> None:
        while True:
            try:
                connection = self._listener.accept()
            except (AuthenticationError, OSError, EOFError):
                continue  # not our learner, or it gave up connecting
            try:
                while True:
                    data = connection.recv_bytes()  # EOFError / OSError: the learner closed or is gone
                    try:
                        with self._envs_lock:
                            answer = pickle.dumps((self.identity, self.envs.step(pickle.loads(data))))
                    except BaseException:  # the env's own error (an OSError too), or what does not pickle
                        answer = pickle.dumps(("error", traceback.format_exc()))
                    connection.send_bytes(answer)
            except (EOFError, OSError):
                pass  # wait for the next connection
            connection.close()

    def ping(self) -> str:
        """This process's identity: answered on the actor's main thread while a step runs."""
        return self.identity

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        with self._envs_lock:
            self.envs.close()


class RayVecEnv(VecEnvBase):
    """``len(env_fns)`` envs over ``workers`` Ray actors of ``cpus_per_worker`` CPUs each.
    Ray must be connected (:func:`sim2real.train.ray_cluster.ray_session`). ``env_fns`` are
    sent to the actors with cloudpickle: functions of an installed module, or partials of them.
    ``on_replace(message)`` hears of each replaced worker (the trainer logs it)."""

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        workers: int = 2,
        privileged: bool = False,
        cpus_per_worker: float = 1.0,
        on_replace: Callable[[str], None] | None = None,
    ):
        ray = import_ray()
        if not env_fns:
            raise ValueError("RayVecEnv needs at least one env")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._ray = ray
        self.num_envs = len(env_fns)
        self.num_workers = min(workers, self.num_envs)
        check_room(ray, self.num_workers, cpus_per_worker)
        slices = np.array_split(np.arange(self.num_envs), self.num_workers)
        self._slices = [(int(s[0]), int(s[-1]) + 1) for s in slices]
        self.privileged = bool(privileged)
        self.privileged_obs: np.ndarray | None = None
        self.replacements = 0
        self._on_replace = on_replace or log.warning
        self._settings: dict[str, tuple] = {}  # method -> (args, kwargs) of the last set_* call
        self._reset_seed: int | None = None
        self._was_reset = False
        self._closed = False
        self._episode_restarts = 0  # how often lost workers made the envs start new episodes
        self._envs_lost = False  # a worker was replaced since the last step
        self._authkey = secrets.token_bytes(32)
        self._connections: list[Any] = [None] * self.num_workers  # to each worker's step server
        actor = ray.remote(num_cpus=cpus_per_worker, max_restarts=MAX_RESTARTS, max_task_retries=0)(_SliceWorker)
        self._actors = [actor.remote(list(env_fns[b:e]), self.privileged) for b, e in self._slices]
        self._identities: list[str | None] = [None] * self.num_workers
        try:
            spaces = self._start_all()
        except BaseException:
            self.close()
            raise
        self.single_observation_space, self.single_action_space, self.privileged_size = spaces
        self.obs_size = int(np.prod(self.single_observation_space.shape))
        self.num_actions = int(np.prod(self.single_action_space.shape))

    # ------------------------------------------------------------------ commands
    def reset(self, seed: int | None = None) -> np.ndarray:
        """Reset every env (env ``i`` with ``seed + i``); returns the stacked observations."""
        self._reset_seed, self._was_reset = seed, True
        obs = self._reset_all(seed)
        self._envs_lost = False  # every env, a replacement's too, has just started an episode
        return obs

    def step(self, actions: np.ndarray) -> VecStep:
        self._check_open()
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"actions must have shape {(self.num_envs, self.num_actions)}, got {actions.shape}")
        if not self._was_reset:
            raise RuntimeError("step before reset: call reset() first")
        if self._envs_lost:
            self._step_lost()  # a worker was replaced since the last step: its envs are new
        sent = []
        for index, (begin, end) in enumerate(self._slices):
            try:
                self._connection(index).send(actions[begin:end])
                sent.append(index)
            except (_WorkerGone, EOFError, OSError):
                pass
        answers = {}
        for index in sent:
            try:  # every answer is read, so no worker is still stepping when the envs are reset
                answers[index] = self._step_answer(index)
            except (_WorkerGone, EOFError, OSError):
                pass
        if len(answers) < self.num_workers or any(answers[i][0] != self._identities[i] for i in answers):
            self._step_lost()  # a worker's process is gone with its envs, or restarted since it last answered
        parts = [answers[i][1] for i in range(self.num_workers)]
        episodes = [(b + i, episode) for (b, _), part in zip(self._slices, parts) for i, episode in part[4]]
        if self.privileged:
            self.privileged_obs = np.concatenate([p[5] for p in parts])
        return VecStep(*(np.concatenate([p[k] for p in parts]) for k in range(4)), episodes, self.privileged_obs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``env.method(*args, **kwargs)`` on every env; the results in env order. A
        ``set_*`` call is remembered and given again to a worker that replaces a lost one."""
        if method.startswith("set_"):
            self._settings.pop(method, None)  # replayed in the order they were last sent
            self._settings[method] = (args, kwargs)
        parts = self._command_all([("call", (method, args, kwargs))] * self.num_workers)
        return [result for part in parts for result in part]

    def get_attr(self, name: str) -> Any:
        """A picklable attribute of env 0 (all envs are built alike)."""
        return self._command(0, "get_attr", name)

    def run(self, fn: Callable[..., Any], args: Sequence[tuple | None]) -> list[Any]:
        """``fn(env_i, *args[i])`` in the workers, in parallel (see ``ProcessVecEnv.run``)."""
        if len(args) != self.num_envs:
            raise ValueError(f"run needs one args entry per env ({self.num_envs}), got {len(args)}")
        parts = self._command_all([("run", (fn, list(args[b:e]))) for b, e in self._slices])
        return [result for part in parts for result in part]

    def worker_pids(self) -> list[int]:
        """The process id of each worker (on its own machine)."""
        self._check_open()
        return self._ray.get([actor.pid.remote() for actor in self._actors])

    # ------------------------------------------------------------------ lifetime
    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        self._disconnect()
        ray = self._ray
        if not ray.is_initialized():
            return
        try:
            ray.wait([a.close.remote() for a in self._actors], num_returns=len(self._actors), timeout=timeout)
        except Exception:  # a worker already gone has nothing to close
            pass
        for actor in self._actors:
            ray.kill(actor, no_restart=True)

    # ------------------------------------------------------------------ plumbing
    @staticmethod
    def _seeds(seed: int | None, begin: int, end: int) -> list[int] | None:
        return None if seed is None else [seed + i for i in range(begin, end)]

    def _connection(self, index: int) -> Any:
        """The connection to worker ``index``'s step server (opened at its first step, again
        after a lost step). _WorkerGone if the worker is not the process the learner knows."""
        ray = self._ray
        if self._connections[index] is None:
            listening = self._actors[index].listen.remote(self._authkey)
            try:
                identity, address = ray.get(listening, timeout=START_TIMEOUT_S)
            except ray.exceptions.RayTaskError as error:
                self.close(timeout=1.0)
                raise WorkerError(f"Ray env worker {index} could not serve steps:\n{error}") from None
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                raise _WorkerGone(index) from None
            if identity != self._identities[index]:
                raise _WorkerGone(index)  # restarted while idle: not reset, nor given its settings
            try:
                self._connections[index] = Client(tuple(address), authkey=self._authkey)
            except OSError as error:
                if not self._alive(index):
                    raise _WorkerGone(index) from None
                self.close(timeout=1.0)
                raise WorkerError(
                    f"could not connect to Ray env worker {index} at {address[0]}:{address[1]} ({error}). "
                    "Fix: open the TCP ports between the machines (docs/distributed.md, Set up a cluster)"
                ) from None
        return self._connections[index]

    def _alive(self, index: int) -> bool:
        """Whether worker ``index`` is the process the learner knows (asked through Ray)."""
        try:
            return self._ray.get(self._actors[index].ping.remote(), timeout=START_TIMEOUT_S) == self._identities[index]
        except (self._ray.exceptions.RayActorError, self._ray.exceptions.GetTimeoutError):
            return False

    def _step_answer(self, index: int) -> tuple[str, Any]:
        """Worker ``index``'s answer to the step sent. A machine that vanishes closes no
        connection: while waiting, Ray is asked every second whether the worker lives."""
        ray, connection = self._ray, self._connections[index]
        deadline, ping = time.monotonic() + STEP_TIMEOUT_S, None
        while not connection.poll(1.0):
            if time.monotonic() > deadline:
                self.close(timeout=1.0)
                raise WorkerError(f"vec env worker {index} took over {STEP_TIMEOUT_S:g} s for a step")
            if ping is None:
                ping = self._actors[index].ping.remote()
            if ray.wait([ping], timeout=0)[0]:
                try:
                    if ray.get(ping) != self._identities[index]:
                        raise _WorkerGone(index)
                except ray.exceptions.ActorDiedError:
                    raise _WorkerGone(index) from None
                except ray.exceptions.RayActorError:
                    pass  # unavailable for now (a network blip, a restart under way): ask again
                ping = None
        identity, part = connection.recv()
        if identity == "error":
            self.close(timeout=1.0)
            begin, end = self._slices[index]
            raise WorkerError(f"vec env worker {index} (envs {begin}..{end - 1}) failed:\n{part}")
        return identity, part

    def _disconnect(self, index: int | None = None) -> None:
        """Close the step connections (to one worker, or all)."""
        for i in range(self.num_workers) if index is None else [index]:
            connection, self._connections[i] = self._connections[i], None
            if connection is not None:
                connection.close()

    def _start_all(self) -> tuple:
        refs = [a.describe.remote() for a in self._actors]
        ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=START_TIMEOUT_S)
        if len(ready) < len(refs):
            raise WorkerError(
                f"{len(refs) - len(ready)} of {len(refs)} Ray env workers did not start within "
                f"{START_TIMEOUT_S:g} s (the cluster's CPUs may be taken by other jobs: `ray status`)"
            )
        try:
            described = [self._result(i, ref) for i, ref in enumerate(refs)]
        except self._ray.exceptions.RayActorError as error:
            raise WorkerError(
                f"a Ray env worker could not start: {error}. Fix: install this commit with its `ray` extra on "
                "every machine of the cluster (pip install -e '.[ray]'); the error above names the missing piece"
            ) from None
        self._identities = [identity for identity, _ in described]
        return described[0][1]

    def _result(self, index: int, ref: Any) -> Any:
        """The answer of worker ``index``; an env's own error as WorkerError (the run ends)."""
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as error:
            self.close(timeout=1.0)
            begin, end = self._slices[index]
            raise WorkerError(f"vec env worker {index} (envs {begin}..{end - 1}) failed:\n{error}") from None

    def _collect(self, refs: list[Any]) -> tuple[list[Any], list[int]]:
        """Every worker's answer (without its identity), and the workers lost on the way or
        restarted since their last answer (None in their place)."""
        parts: list[Any] = []
        lost: list[int] = []
        for index, ref in enumerate(refs):
            try:
                identity, part = self._result(index, ref)
            except self._ray.exceptions.RayActorError:
                identity, part = None, None
            if identity is None or identity != self._identities[index]:
                part = None
                lost.append(index)
            parts.append(part)
        return parts, lost

    def _command(self, index: int, command: str, argument: Any = None) -> Any:
        self._check_open()
        parts, lost = self._collect([self._actors[index].answer.remote(command, argument)])
        if lost:
            self._replace(index, reset=command != "reset")
            return self._command(index, command, argument)
        return parts[0]

    def _command_all(self, commands: list[tuple]) -> list[Any]:
        """One command to every worker, in parallel; a lost worker is replaced and asked again."""
        self._check_open()
        parts, lost = self._collect([a.answer.remote(*c) for a, c in zip(self._actors, commands)])
        for index in lost:
            self._replace(index, reset=commands[index][0] != "reset")
            parts[index] = self._command(index, *commands[index])
        return parts

    def _reset_all(self, seed: int | None) -> np.ndarray:
        parts = self._command_all([("reset", self._seeds(seed, b, e)) for b, e in self._slices])
        if self.privileged:
            self.privileged_obs = np.concatenate([p[1] for p in parts])
        return np.concatenate([p[0] for p in parts])

    def _replace(self, index: int, reset: bool = False) -> None:
        """Bring a lost worker's replacement to where the learner believes it is: started and
        the settings given; with ``reset``, its envs reset (new seeds) if the vector env's were."""
        ray = self._ray
        self.replacements += 1
        self._disconnect(index)  # to the lost process; the next step connects to the new one
        begin, end = self._slices[index]
        actor = self._actors[index]
        deadline, died = time.monotonic() + START_TIMEOUT_S, 0
        while True:
            error: Exception | None = None
            try:
                self._identities[index], _ = ray.get(actor.describe.remote(), timeout=START_TIMEOUT_S)
                self._restore(index, reset)
                break
            except ray.exceptions.GetTimeoutError as timeout:
                error, died = timeout, 99  # pending: no machine has a CPU free for it
            except ray.exceptions.RayTaskError as raised:
                error, died = raised, 99
            except ray.exceptions.RayActorError as lost:
                # A call may reach the lost process before Ray notices its death: "died" once
                # or twice is not final, Ray's restarts running out is.
                error, died = lost, died + isinstance(lost, ray.exceptions.ActorDiedError)
            if died > 3 or time.monotonic() > deadline:
                self.close(timeout=1.0)
                raise WorkerError(
                    f"vec env worker {index} (envs {begin}..{end - 1}) was lost and Ray could not restart it "
                    f"({type(error).__name__}: {error}). Fix: `ray status` (a free CPU on a live machine?); a "
                    "training run continues from its last checkpoint with --resume"
                ) from None
            time.sleep(0.2)
        if self._was_reset:
            self._envs_lost = True  # the next step starts every env on a new episode
        self._on_replace(
            f"Ray env worker {index} (envs {begin}..{end - 1}) was lost; Ray restarted it "
            f"(replacement {self.replacements})"
        )

    def _restore(self, index: int, reset: bool) -> None:
        """A replacement given the learner's settings and, with ``reset``, its envs reset (new
        seeds) if the vector env's were. A RayActorError: it was lost again meanwhile."""
        actor, (begin, end) = self._actors[index], self._slices[index]
        for method, (args, kwargs) in self._settings.items():
            self._result(index, actor.answer.remote("call", (method, args, kwargs)))
        if reset and self._was_reset:
            self._episode_restarts += 1
            self._result(index, actor.answer.remote("reset", self._seeds(self._moved_seed(), begin, end)))

    def _moved_seed(self) -> int | None:
        """The seed of the episodes after the last reset's, moved on once per restart of episodes."""
        if self._reset_seed is None:
            return None
        return self._reset_seed + REPLACEMENT_SEED_STRIDE * self._episode_restarts

    def _step_lost(self) -> None:
        """A step lost a worker, or a worker was replaced since the last step: replace what is
        lost, start every env on a new episode, raise RolloutLost."""
        self._disconnect()  # what the other workers answered to this step is not read
        _, lost = self._collect([a.describe.remote() for a in self._actors])
        for index in lost:
            self._replace(index)
        self._episode_restarts += 1
        obs = self._reset_all(self._moved_seed())
        self._envs_lost = False
        raise RolloutLost(lost, list(range(self.num_envs)), obs, self.privileged_obs)
