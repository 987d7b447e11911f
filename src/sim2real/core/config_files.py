"""What every YAML config of the project shares: finding it by name, and failing clearly.

A config is named (``go2``) or given as a path; a named one lives in
``<share>/config/<folder>/<name>.yaml``. Every problem with one is a :class:`ConfigError`
whose message names the file, the field, the problem and the fix.
"""

from __future__ import annotations

from pathlib import Path

from sim2real.core.errors import InputError
from sim2real.core.paths import share_dir


class ConfigError(InputError):
    """A config that cannot be used: ``<file>: <field>: <problem>. Fix: <fix>``."""

    def __init__(self, source: str | Path, field: str, problem: str, fix: str):
        self.source = str(source)
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{source}: {field}: {problem}. Fix: {fix}")


def config_path(folder: str, name_or_path: str | Path) -> Path:
    """``("robots", "go2")`` -> ``<share>/config/robots/go2.yaml``; a path (or a .yaml name) stays.

    A bare name (no folder, no suffix) is a shipped config when one has that name, whatever
    the current directory holds: a training run's ``--out go2`` folder must not hide the
    ``go2`` profile. Any other existing file is a path; a folder never is a config."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml"):
        return candidate
    shipped = share_dir() / "config" / folder / f"{name_or_path}.yaml"
    bare_name = len(candidate.parts) == 1 and not str(name_or_path).startswith(".")
    if candidate.is_file() and not (bare_name and shipped.is_file()):
        return candidate
    return shipped


def available_configs(folder: str) -> list[str]:
    """The names of the shipped configs in ``config/<folder>/``."""
    return sorted(p.stem for p in (share_dir() / "config" / folder).glob("*.yaml"))


def read_config(folder: str, name_or_path: str | Path, error: type[ConfigError], what: str) -> tuple[Path, dict]:
    """Find a config by name or path, read its YAML and require a mapping, raising ``error``
    (a ConfigError subclass) that names the file and the fix for each way this can fail."""
    import yaml

    path = config_path(folder, name_or_path)
    if not path.is_file():
        raise error(
            path,
            "(file)",
            f"no {what} named {str(name_or_path)!r}",
            f"use one of {available_configs(folder)} or give the path to a YAML file",
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise error(path, "(file)", f"not valid YAML ({exc})", "correct the YAML syntax") from exc
    if not isinstance(data, dict):
        raise error(
            path,
            "(file)",
            f"expected a mapping of settings, got {type(data).__name__}",
            f"write the {what} as a YAML mapping, like the shipped files in config/{folder}/",
        )
    return path, data
