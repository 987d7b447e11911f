"""What the start-up can tell about DDS security (SROS2) from the environment, ROS-free.

SROS2 is switched on per process by ``ROS_SECURITY_ENABLE=true``, with
``ROS_SECURITY_STRATEGY=Enforce`` (a process without valid security files then fails to
start, instead of running unprotected) and ``ROS_SECURITY_KEYSTORE`` (the keystore made by
``ros2 security create_keystore``, holding one enclave per node). The graph's nodes can check
this much at start; whether the permissions themselves say what docs/security.md asks (only
the supervisor may publish /joint_commands, ...) is the keystore owner's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping


@dataclass(frozen=True)
class SecurityState:
    enabled: bool
    enforced: bool
    keystore: str
    problems: tuple[str, ...]  # what leaves the robot's DDS traffic open (empty: SROS2 enforced)

    def describe(self) -> str:
        if not self.problems:
            return f"SROS2 enforced (keystore {self.keystore})"
        return "DDS security off or incomplete: " + "; ".join(self.problems) + " (docs/security.md)"


def security_state(environment: Mapping[str, str], enclave: str = "") -> SecurityState:
    """``environment``: the process environment; ``enclave``: the node's expected enclave path
    in the keystore (e.g. ``/sim2real/safety_supervisor``), checked when given."""
    enabled = environment.get("ROS_SECURITY_ENABLE", "").lower() == "true"
    enforced = environment.get("ROS_SECURITY_STRATEGY", "") == "Enforce"
    keystore = environment.get("ROS_SECURITY_KEYSTORE", "")
    problems = []
    if not enabled:
        problems.append(
            "ROS_SECURITY_ENABLE is not true: any participant on the domain can publish to every "
            "topic and call every service"
        )
    if enabled and not enforced:
        problems.append("ROS_SECURITY_STRATEGY is not Enforce: a node without security files starts unprotected")
    if enabled and not keystore:
        problems.append("ROS_SECURITY_KEYSTORE is not set")
    elif enabled and not Path(keystore).is_dir():
        problems.append(f"ROS_SECURITY_KEYSTORE {keystore} is not a folder")
    elif enabled and enclave and not (Path(keystore) / "enclaves" / enclave.strip("/")).is_dir():
        problems.append(f"no enclave {enclave} in {keystore} (ros2 security create_enclave {keystore} {enclave})")
    return SecurityState(enabled, enforced, keystore, tuple(problems))
