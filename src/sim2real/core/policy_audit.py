"""The policy audit log: one JSON line per policy start or swap request, appended, never rewritten.

Each line: ``time`` (UTC ISO 8601), ``robot``, ``file``, ``sha256``, ``signer`` (the trusted
key that verified it, or null when no trusted_keys are set), ``origin`` (who asked: ``start``
for the launch parameter, ``cli ...`` for `sim2real policy swap`, ``parameter service`` for
any other SetParameters client such as `ros2 param set`, ``parameter (atomic or in-process)``
for a refused swap by another route),
``accepted`` and ``reason``. `sim2real policy history` prints it.

The file is opened for append on every record and synced to disk before the swap goes on,
so a power cut loses no accepted swap; a line cut short by a crash is reported by the reader,
and the lines around it still read.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

AUDIT_FILE = "policy_audit.jsonl"


def state_dir() -> Path:
    """Where the project keeps what it records about a robot: ``$SIM2REAL_STATE_DIR``, else
    ``$XDG_STATE_HOME/sim2real``, else ``~/.local/state/sim2real`` (the XDG default)."""
    explicit = os.environ.get("SIM2REAL_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state") / "sim2real"


def default_audit_log() -> Path:
    return state_dir() / AUDIT_FILE


class AuditLog:
    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()

    def record(
        self, *, robot: str, file: str, sha256: str, signer: Optional[str], origin: str, accepted: bool, reason: str
    ) -> dict[str, Any]:
        entry = {
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "robot": robot,
            "file": file,
            "sha256": sha256 or None,
            "signer": signer,
            "origin": origin,
            "accepted": bool(accepted),
            "reason": reason,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab+") as out:
            cut_short = False
            if out.seek(0, os.SEEK_END) > 0:
                out.seek(-1, os.SEEK_END)
                cut_short = out.read(1) != b"\n"
            # A line a crash cut short stays alone on its line: this record must not join it.
            out.write((("\n" if cut_short else "") + json.dumps(entry) + "\n").encode())
            out.flush()
            os.fsync(out.fileno())
        return entry


@dataclass
class History:
    entries: list[dict[str, Any]]
    damaged_lines: list[int]  # 1-based numbers of lines that are not a record (a crash mid-write)


def read_history(path: str | Path) -> History:
    """Every record of the log at ``path``; FileNotFoundError if there is none."""
    entries, damaged = [], []
    with open(Path(path).expanduser(), encoding="utf-8", errors="replace") as log:
        for number, line in enumerate(log, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                damaged.append(number)
                continue
            if isinstance(entry, dict):
                entries.append(entry)
            else:
                damaged.append(number)
    return History(entries, damaged)


def format_history(history: History) -> str:
    lines = []
    for e in history.entries:
        verdict = "accepted" if e.get("accepted") else "REFUSED"
        sha = (e.get("sha256") or "-")[:12]
        signer = e.get("signer") or "unsigned"
        line = (
            f"{e.get('time', '?')}  {verdict:8}  {e.get('origin', '?')}  {e.get('file', '?')}  sha256 {sha}  {signer}"
        )
        if e.get("reason"):
            line += f"\n    {e['reason']}"
        lines.append(line)
    if history.damaged_lines:
        lines.append(f"(lines {history.damaged_lines} are not records: cut short by a crash?)")
    return "\n".join(lines) if lines else "(no policy starts or swaps recorded)"
