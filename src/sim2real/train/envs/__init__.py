"""Gymnasium environments of the training tasks; build them with :func:`sim2real.train.tasks.make_env`."""

from sim2real.train.envs.base import RobotTaskEnv
from sim2real.train.envs.go2_walk import Go2WalkEnv
from sim2real.train.envs.panda_reach import PandaReachEnv

__all__ = ["RobotTaskEnv", "Go2WalkEnv", "PandaReachEnv"]
