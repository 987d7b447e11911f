"""Where ``--ray [ADDRESS]`` runs: a Ray started for the run on this machine, or a cluster.

``ADDRESS`` as the commands take it:

- ``""`` (``--ray`` alone): a local Ray started for this command and stopped at its end,
  with as many CPUs as the machine has (at least one per worker);
- ``auto``: the cluster this machine joined with ``ray start`` (or ``RAY_ADDRESS``);
- ``HOST:PORT``: the head's GCS address ``ray start --head`` printed;
- ``ray://HOST:PORT``: a Ray Client server (the head's port 10001 by default).

Ray is an extra (``pip install -e '.[ray]'``): this module imports it only when a command
asks for it, and says how to install it when it is missing. Every machine of a cluster needs
this package installed at the same version (the workers build the envs from it).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from sim2real.core.errors import Sim2RealError

# The object store holds only the envs' arrays and the evaluation summaries (kilobytes): Ray's
# default (30 % of the RAM, in /dev/shm) would take what a container often does not have.
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2


class RayError(Sim2RealError, RuntimeError):
    """Ray is missing, or the cluster cannot be reached or cannot hold the workers."""


def import_ray():
    """The ``ray`` module, or a clear error with the install command."""
    try:
        import ray
    except ImportError as error:
        raise RayError(
            f"--ray needs Ray, which is not installed ({error}). Fix: pip install -e '.[ray]' "
            "(on every machine of the cluster), or leave out --ray to run on this machine"
        ) from None
    return ray


def describe_address(address: str) -> str:
    return "a local Ray started for this run" if address == "" else f"the Ray cluster at {address}"


@contextlib.contextmanager
def ray_session(address: str, workers: int = 1) -> Iterator[object]:
    """Ray connected for the block: started here when ``address`` is ``""`` (and stopped at
    the end), else joined at ``address``. Inside an existing session (a test's cluster, a
    caller that already connected) it is used as it is. Yields the ``ray`` module."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    try:
        if address == "":
            cpus = max(int(workers), len(os.sched_getaffinity(0)))
            ray.init(
                address="local",  # a new Ray even where `ray start` runs one (that is `auto`)
                num_cpus=cpus,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                logging_level="WARNING",
                log_to_driver=True,
            )
        else:
            ray.init(address=address, logging_level="WARNING", log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError) as error:
        if address == "":
            raise RayError(
                f"could not start a local Ray: {error}. Fix: `ray stop` ends a Ray left over on this "
                "machine; Ray's logs are in /tmp/ray/session_latest/logs"
            ) from None
        raise RayError(
            f"could not reach {describe_address(address)}: {error}. Fix: make this machine a node of the "
            "cluster (`ray start --address HEAD:PORT`, the address `ray start --head` printed) and use "
            "--ray auto, or connect through Ray Client (--ray ray://HEAD:10001); `ray status` on the head "
            "lists the nodes"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def check_room(ray, workers: int, cpus_per_worker: float) -> None:
    """Refuse at once what would wait forever: more workers than the cluster has CPUs for."""
    total = float(ray.cluster_resources().get("CPU", 0.0))
    if total < workers * cpus_per_worker:
        raise RayError(
            f"the Ray cluster has {total:g} CPUs; {workers} workers need {cpus_per_worker:g} each. "
            f"Fix: --workers {max(1, int(total // cpus_per_worker))}, or add machines (`ray start "
            "--address HEAD:PORT` on each)"
        )
