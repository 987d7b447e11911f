"""What a sysid bag says about itself (``custom_data`` in metadata.yaml), in one place,
so the recorder node and the sim recorder write the same keys."""

from __future__ import annotations

import datetime
import hashlib
import json

from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.excitation import Excitation

# custom_data key: true when the robot hung on a stand, feet clear of the ground.
SUSPENDED = "suspended"


def profile_hash(profile: RobotProfile) -> str:
    """sha256 of the profile file and its URDF: a fit against a changed robot can be detected."""
    digest = hashlib.sha256()
    for path in (profile.source, profile.urdf):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def bag_custom_data(
    profile: RobotProfile, excitation: Excitation, source: str, extra: dict | None = None
) -> dict[str, str]:
    data = {
        "sim2real.kind": "sysid",
        "robot": profile.name,
        "robot_profile_sha256": profile_hash(profile),
        "recorded_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "recorded_by": source,
        "excitation": json.dumps(excitation.describe()),
    }
    for key, value in (extra or {}).items():
        data[key] = value if isinstance(value, str) else json.dumps(value)
    return data
