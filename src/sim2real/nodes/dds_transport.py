"""The DDS transport of the graph's processes: UDP, not Fast DDS's shared memory.

Fast DDS's shared-memory transport guards each reader's port with a lock that every writing
process takes for each sample it pushes. A process frozen (SIGSTOP, a debugger, a hung driver)
or killed while it holds such a lock leaves every other writer to that port blocked inside
``publish()`` for the lock's 1 s timeout: a driver that freezes mid-publish would stall the
supervisor's own checks and commands for a second, twenty times its sensing deadline
(tests/ros/test_dds_transport.py shows it with and without this setting). UDP shares no lock
between processes: a frozen or dead peer only stops receiving.

Every node of the graph and every command-line node sets this up before ``rclpy.init`` (Fast DDS
2.14 and later read ``FASTDDS_BUILTIN_TRANSPORTS``: Jazzy's, Kilted's, the PyPI wheels' 3.2):

- discovery on this machine only (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, as `make demo` and
  the tests run), for which rmw_fastrtps always adds shared memory: the same setup from an XML
  profile without it (``config/dds/localhost_udp.xml``, named in the variable of the Fast DDS
  at hand, loaded with the range ``SYSTEM_DEFAULT`` so that rmw_fastrtps keeps the profile's
  transports);
- any other range (a robot on its network): Fast DDS's built-in transports cut to UDPv4.

Kept as the user set them: transports chosen (``FASTDDS_BUILTIN_TRANSPORTS`` other than UDPv4, or
a Fast DDS XML profile of their own), static peers with the LOCALHOST range (which the profile would drop), the deprecated
``ROS_LOCALHOST_ONLY=1``, and another DDS implementation (``RMW_IMPLEMENTATION``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, MutableMapping

from sim2real.core.paths import share_dir

TRANSPORTS_VARIABLE = "FASTDDS_BUILTIN_TRANSPORTS"
# Either names an XML file that may configure the transports itself. Fast DDS 3 (Kilted, the PyPI
# wheels) reads the first; Fast DDS 2 (Humble, Jazzy) only the second.
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
FAST_DDS_2_DISTROS = ("humble", "jazzy")
RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
GRAPH_TRANSPORTS = "UDPv4"
FAST_DDS_RMWS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")


PROFILE_FILE = Path("dds") / "localhost_udp.xml"


def profiles_variable(environ: Mapping[str, str] = os.environ) -> str:
    """The variable this process's Fast DDS reads its XML profile from: a sourced Humble or Jazzy
    (``ROS_DISTRO``) has Fast DDS 2; anything else (Kilted, the PyPI wheels) Fast DDS 3."""
    return PROFILE_VARIABLES[1] if environ.get("ROS_DISTRO") in FAST_DDS_2_DISTROS else PROFILE_VARIABLES[0]


def localhost_profile() -> str:
    return str(share_dir() / "config" / PROFILE_FILE)


def _is_ours(profile: str | None) -> bool:
    """The profile this module sets, wherever the process that set it found the share folder
    (a source checkout, a pip or a colcon install)."""
    return bool(profile) and Path(profile).parts[-2:] == PROFILE_FILE.parts


def transport_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str | None]:
    """The variables a graph process sets (None: removes) before it creates its DDS participant:
    none where the user chose the transports or the discovery in a way this would change. Applied
    again in a process started from a set-up one, it gives the same set-up, or the one for the
    range that process was given."""
    profiles = profiles_variable(environ)
    ours = _is_ours(environ.get(profiles))
    transports = environ.get(TRANSPORTS_VARIABLE)
    users_profile = any(environ.get(v) and not _is_ours(environ.get(v)) for v in PROFILE_VARIABLES)
    other_dds = environ.get("RMW_IMPLEMENTATION", FAST_DDS_RMWS[0]) not in FAST_DDS_RMWS
    if users_profile or other_dds or transports not in (None, "", GRAPH_TRANSPORTS):
        return {}
    if environ.get("ROS_LOCALHOST_ONLY") == "1":
        return {}
    discovery = environ.get(RANGE_VARIABLE)
    if ours and discovery == "SYSTEM_DEFAULT":
        return {}  # set up already
    if discovery == "LOCALHOST":
        if environ.get("ROS_STATIC_PEERS"):
            return {}
        return {profiles: localhost_profile(), RANGE_VARIABLE: "SYSTEM_DEFAULT", TRANSPORTS_VARIABLE: None}
    return {TRANSPORTS_VARIABLE: GRAPH_TRANSPORTS, profiles: None}


def set_graph_transport(environ: MutableMapping[str, str]) -> None:
    """Apply :func:`transport_environment` to ``environ`` (a process's own, or a child's)."""
    for name, value in transport_environment(environ).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value


def use_graph_transport() -> None:
    """Set the graph's transport for the DDS participants this process creates from now on
    (rcl and Fast DDS read these variables when a context and a participant are created)."""
    set_graph_transport(os.environ)
