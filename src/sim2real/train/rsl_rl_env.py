"""The process vector env seen through rsl_rl's ``VecEnv`` contract (rsl-rl-lib 5.x).

What rsl_rl 5.5 reads, and where it comes from here:

- observations are a ``TensorDict`` of groups: ``"policy"``, what the deployed actor sees,
  and, when the vector env gathers it, ``"privileged"``, simulator truth (true body
  velocity, contacts, the episode's physical conditions) for an asymmetric critic. The
  runner config maps the model inputs to them (:func:`obs_groups`): the actor always reads
  ``policy`` alone; the critic reads ``policy`` (``critic_observation: policy``) or
  ``policy`` + ``privileged`` (``critic_observation: privileged``). A better value
  estimate under randomization sharpens the advantages; the actor, and with it the
  deployed observation contract, does not change;
- ``dones`` is terminal *or* time-out; ``extras["time_outs"]`` marks the time-outs, so
  PPO bootstraps their value instead of treating the cut as the end of the world;
- ``extras["log"]`` holds per-episode means of the episodes that ended this step under
  ``"Episode/<key>"`` (rsl_rl's ``Logger`` averages and writes them), only when some ended;
- ``episode_length_buf`` counts steps of the running episodes. Writing it does not move
  the envs (``init_at_random_ep_len`` has no effect): episode time lives in the envs.

Finished episodes are also kept whole for the training loop (:meth:`pop_episodes`),
which needs their success flags and returns for the curriculum and adaptive DR.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from sim2real.train.vec_env import ProcessVecEnv, RolloutLost

CRITIC_OBSERVATIONS = ("policy", "privileged")


def obs_groups(critic_observation: str = "policy") -> dict[str, list[str]]:
    """rsl_rl's ``obs_groups`` for what the critic observes (``policy`` or ``privileged``)."""
    if critic_observation not in CRITIC_OBSERVATIONS:
        raise ValueError(f"critic_observation must be one of {CRITIC_OBSERVATIONS}, got {critic_observation!r}")
    critic = ["policy"] if critic_observation == "policy" else ["policy", "privileged"]
    return {"actor": ["policy"], "critic": critic}


class RslRlVecEnv(VecEnv):
    def __init__(self, vec_env: ProcessVecEnv, max_episode_length: int, cfg: dict | None = None, seed: int | None = 0):
        self.vec_env = vec_env
        self.num_envs = vec_env.num_envs
        self.num_actions = vec_env.num_actions
        self.max_episode_length = int(max_episode_length)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long)
        self.device = "cpu"
        self.cfg = cfg if cfg is not None else {}
        self._seed = seed
        self._obs: TensorDict | None = None
        self._episodes: list[dict] = []

    def _wrap(self, obs: np.ndarray) -> TensorDict:
        groups = {"policy": torch.from_numpy(obs)}
        if self.vec_env.privileged:
            groups["privileged"] = torch.from_numpy(self.vec_env.privileged_obs)
        return TensorDict(groups, batch_size=[self.num_envs])

    def reset(self) -> TensorDict:
        self._obs = self._wrap(self.vec_env.reset(seed=self._seed))
        self.episode_length_buf.zero_()
        return self._obs

    def get_observations(self) -> TensorDict:
        return self._obs if self._obs is not None else self.reset()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        if self._obs is None:
            self.reset()
        try:
            out = self.vec_env.step(actions.detach().to("cpu", torch.float32).numpy())
        except RolloutLost as lost:
            # The trainer collects the rollout again from these observations.
            self._obs = self._wrap(lost.obs)
            self.episode_length_buf[lost.envs] = 0
            raise
        self._obs = self._wrap(out.obs)
        dones = torch.from_numpy(out.dones)
        self.episode_length_buf += 1
        self.episode_length_buf[dones] = 0
        extras: dict[str, Any] = {"time_outs": torch.from_numpy(out.time_outs).float()}
        if out.episodes:
            finished = [episode for _, episode in out.episodes]
            self._episodes.extend(finished)
            extras["log"] = _episode_means(finished)
        return self._obs, torch.from_numpy(out.rewards), dones.long(), extras

    def pop_episodes(self) -> list[dict]:
        """The episodes finished since the last call (each the env's ``info["episode"]``)."""
        episodes, self._episodes = self._episodes, []
        return episodes

    def close(self) -> None:
        self.vec_env.close()


def _episode_means(episodes: list[dict]) -> dict[str, torch.Tensor]:
    """Numeric scalar entries of the episodes, and their reward terms, as per-key tensors."""
    values: dict[str, list[float]] = {}
    for episode in episodes:
        for key, value in episode.items():
            if key == "reward_terms":
                for term, total in value.items():
                    values.setdefault(f"Episode_Reward/{term}", []).append(float(total))
            elif isinstance(value, (bool, int, float, np.number)):
                values.setdefault(f"Episode/{key}", []).append(float(value))
    return {key: torch.tensor(v) for key, v in values.items()}
