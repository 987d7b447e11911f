"""The physics engines a world can run on, by name: ``pybullet`` (training's engine) and
``mujoco`` (the second engine, an independent check before hardware).

Both world classes take the same arguments and offer the same calls (see
:class:`~sim2real.sim.world.SimWorld`); everything that builds a world goes through
:func:`make_world`, so an engine is one argument everywhere (``--engine``, ``engine:``).
"""

from __future__ import annotations

from typing import Any

ENGINES = ("pybullet", "mujoco")
DEFAULT_ENGINE = "pybullet"


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"unknown physics engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    return engine


def world_class(engine: str) -> type:
    """The world class of an engine (imported on first use: MuJoCo loads only when asked for)."""
    if check_engine(engine) == "mujoco":
        from sim2real.sim.mujoco_world import MujocoWorld

        return MujocoWorld
    from sim2real.sim.world import SimWorld

    return SimWorld


def make_world(engine: str, profile, model: str | None = None, **kwargs: Any):
    """A world of ``engine`` for ``profile``; keyword arguments as SimWorld's. ``model``: another
    robot model than the profile's (MuJoCo only; :mod:`sim2real.sim.robot_models`)."""
    if model:
        if check_engine(engine) != "mujoco":
            raise ValueError(
                f"a robot model ({model!r}) is for the mujoco engine; PyBullet loads the profile's "
                "URDF. Fix: run on MuJoCo (--engine mujoco, hardware:=mujoco), or leave the model out"
            )
        kwargs["model"] = model
    return world_class(engine)(profile, **kwargs)
