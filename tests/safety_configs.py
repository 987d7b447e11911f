"""Safety configs for tests: a shipped one with some checks' settings changed, written as YAML."""

from __future__ import annotations

from pathlib import Path

import yaml

from sim2real.core.safety_config import safety_config_path


def shipped_with(robot: str, directory: Path, **checks: dict) -> Path:
    """``config/safety/<robot>.yaml`` with each named check's settings updated, written into
    ``directory``; the path, for a ``safety_config`` launch argument."""
    data = yaml.safe_load(safety_config_path(robot).read_text())
    for name, settings in checks.items():
        data["checks"][name] = {**data["checks"][name], **settings}
    path = Path(directory) / f"{robot}_safety.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
