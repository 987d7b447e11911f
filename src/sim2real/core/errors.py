"""The base of every error the project raises for the user to act on.

Each one's message names the problem and what to do next. The command line prints it and
exits with ``exit_code`` instead of a traceback: 2 for bad input (a file, a config, an
argument: :class:`InputError`, also a ValueError), 1 for work that could not be done.
"""

from __future__ import annotations


class Sim2RealError(Exception):
    """An error with a message for the user, who can act on it."""

    exit_code = 1


class InputError(Sim2RealError, ValueError):
    """Bad input: a file, a configuration or an argument that cannot work as given."""

    exit_code = 2
