"""Failure bundles on disk: a rosbag2 directory with ``failure.json`` beside ``metadata.yaml``.

::

    <root>/20261130T041815Z_supervisor_damping/
        metadata.yaml                                   rosbag2 (readable by ros2 bag, rosbags)
        20261130T041815Z_supervisor_damping.mcap        the pre- and post-event windows
        failure.json                                    why, when, which robot and policy, context

A bundle appears whole or not at all: it is written into ``<root>/.partial/<name>`` (so
its files carry their final names) and renamed into place when complete (a rename within
one filesystem is atomic), so a crash while writing leaves only the hidden staging
directory, which :func:`clean_partials` removes. :func:`rotate` keeps the bundles under a byte quota and above a free-space
floor by deleting the oldest first.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

from sim2real.core.bags import write_bag
from sim2real.core.errors import InputError

FAILURE_FILE = "failure.json"
STAGING_DIR = ".partial"  # bundles being written: <root>/.partial/<name>
LEGACY_PARTIAL_PREFIX = ".partial-"  # staging as <root>/.partial-<name> (its MCAP kept that name)
# A bundle's name starts with its UTC time; the collector writes it to the millisecond.
BUNDLE_TIME_FORMAT = "%Y%m%dT%H%M%S.%fZ"


class BundleError(InputError):
    """No such bundle, or an ambiguous name; the message lists what is there."""


@dataclass(frozen=True)
class Bundle:
    path: Path
    info: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.name

    def size_bytes(self) -> int:
        return directory_size(self.path)


def directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_bundle(
    root: str | Path,
    name: str,
    connections: Mapping[str, str],
    messages: Iterable[tuple[str, int, bytes]],
    info: Mapping[str, Any],
) -> Path:
    """Write one bundle atomically; returns its final path. ``name`` must be new under ``root``."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    if final.exists():
        raise FileExistsError(
            f"{final} already exists; bundle names carry the event time and reason, "
            "so two events with one name are one event"
        )
    partial = partial_path(root, name)
    if partial.exists():
        shutil.rmtree(partial)
    partial.parent.mkdir(exist_ok=True)
    write_bag(partial, connections, messages)
    failure = partial / FAILURE_FILE
    with open(failure, "w") as handle:
        json.dump(info, handle, indent=2, default=_json_default)
        handle.flush()
        os.fsync(handle.fileno())
    for item in partial.iterdir():
        # The rename publishes the bundle: its files must be on disk before that.
        with open(item, "rb") as handle:
            os.fsync(handle.fileno())
    os.rename(partial, final)
    _fsync_dir(root)
    return final


def partial_path(root: str | Path, name: str) -> Path:
    """Where bundle ``name`` is written before it is renamed into ``root``."""
    return Path(root) / STAGING_DIR / name


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.generic):
            return value.item()
    except ImportError:
        pass
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to failure.json")


def clean_partials(root: str | Path) -> list[Path]:
    """Remove the partial directories a crash mid-write left behind; returns them."""
    root = Path(root)
    removed = []
    staging = root / STAGING_DIR
    if staging.is_dir():
        removed += [item for item in staging.iterdir()]
        shutil.rmtree(staging, ignore_errors=True)
    if root.is_dir():
        for item in root.iterdir():
            if item.name.startswith(LEGACY_PARTIAL_PREFIX) and item.is_dir():
                shutil.rmtree(item, ignore_errors=True)
                removed.append(item)
    return removed


def list_bundles(root: str | Path) -> list[Bundle]:
    """The complete bundles under ``root``, oldest first (by wall-clock event time, then name)."""
    root = Path(root).expanduser()
    bundles: list[Bundle] = []
    if not root.is_dir():
        return bundles
    for item in root.iterdir():
        failure = item / FAILURE_FILE
        if item.name.startswith(".") or not failure.is_file():
            continue
        try:
            info = json.loads(failure.read_text())
        except (OSError, ValueError):
            info = {"reason": "(unreadable failure.json)"}
        bundles.append(Bundle(item, info))
    return sorted(bundles, key=lambda b: (_wall_time(b), b.name))


def _wall_time(bundle: Bundle) -> float:
    """When the event happened (s since the epoch): ``time_ns`` is the node's clock, which in
    lockstep is sim time and restarts with every run, so it cannot order bundles."""
    try:
        return datetime.fromisoformat(str(bundle.info["wall_time"])).timestamp()
    except (KeyError, ValueError):
        pass
    try:  # the name starts with the event's UTC time, e.g. 20261130T041815.123Z_fall
        return (
            datetime.strptime(bundle.name.split("_", 1)[0], BUNDLE_TIME_FORMAT).replace(tzinfo=timezone.utc).timestamp()
        )
    except ValueError:
        return 0.0


def find_bundle(root: str | Path, name_or_path: str | Path) -> Bundle:
    """A bundle by path, by name under ``root`` or by a unique name prefix; the error lists them."""
    candidate = Path(name_or_path).expanduser()
    if (candidate / FAILURE_FILE).is_file():
        try:
            return Bundle(candidate, json.loads((candidate / FAILURE_FILE).read_text()))
        except (OSError, ValueError) as exc:
            raise BundleError(
                f"{candidate / FAILURE_FILE} cannot be read ({exc}): the bundle is damaged. Fix: "
                "look at it with `ros2 bag info`, or delete it"
            ) from None
    bundles = list_bundles(root)
    matches = [b for b in bundles if b.name == str(name_or_path)] or [
        b for b in bundles if b.name.startswith(str(name_or_path))
    ]
    if len(matches) == 1:
        return matches[0]
    names = [b.name for b in bundles]
    if not matches:
        raise BundleError(
            f"no failure bundle {str(name_or_path)!r} in {root}; bundles there: "
            f"{names or 'none'}. Fix: `sim2real failures list --dir DIR` shows them"
        )
    raise BundleError(
        f"{str(name_or_path)!r} matches {len(matches)} bundles in {root} "
        f"({[b.name for b in matches]}). Fix: give more of the name"
    )


def rotate(root: str | Path, quota_bytes: int, min_free_bytes: int = 0, keep: Iterable[Path] = ()) -> list[Path]:
    """Delete the oldest bundles until they fit ``quota_bytes`` and the disk keeps
    ``min_free_bytes`` free; bundles in ``keep`` stay. Returns the deleted paths."""
    root = Path(root)
    keep = {Path(p).resolve() for p in keep}
    bundles = [(b, b.size_bytes()) for b in list_bundles(root)]
    total = sum(size for _, size in bundles)
    deleted = []
    for bundle, size in bundles:
        free = shutil.disk_usage(root).free if root.exists() else min_free_bytes
        if total <= quota_bytes and free >= min_free_bytes:
            break
        if bundle.path.resolve() in keep:
            continue
        shutil.rmtree(bundle.path, ignore_errors=True)
        total -= size
        deleted.append(bundle.path)
    return deleted
