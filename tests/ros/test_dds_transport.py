"""The graph's DDS transport (sim2real.nodes.dds_transport) against Fast DDS's default, on a
peer that freezes while it writes: with the shared-memory transport another writer to the same
reader blocks inside publish() for up to a second; with the graph's UDP it never does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from sim2real.nodes.dds_transport import PROFILE_VARIABLES, RANGE_VARIABLE, TRANSPORTS_VARIABLE, set_graph_transport
from tests.ros.dds_freeze_roles import STALL_S

pytestmark = pytest.mark.ros
ROLES = Path(__file__).with_name("dds_freeze_roles.py")
# What a user may have set that would keep either set-up from being the one asked for.
CHOICES = (
    TRANSPORTS_VARIABLE,
    *PROFILE_VARIABLES,
    "RMW_IMPLEMENTATION",
    "ROS_STATIC_PEERS",
    "ROS_LOCALHOST_ONLY",
    "ROS_DISTRO",
)


def _environment(set_up: bool) -> dict[str, str]:
    """Discovery on this machine only (as the demo and the tests do), on Fast DDS, with the
    graph's transport set up or with rmw_fastrtps's own LOCALHOST set-up."""
    env = {k: v for k, v in os.environ.items() if k not in CHOICES}
    env[RANGE_VARIABLE] = "LOCALHOST"
    if set_up:
        set_graph_transport(env)
    return env


def _freezes(set_up: bool, freezes: int, stop_at_first: bool) -> dict:
    """Run writer, reader and timed publisher, all with the same set-up."""
    env = _environment(set_up)
    writer_topic, timed_topic = (f"/dds_freeze_{uuid.uuid4().hex[:8]}_{t}" for t in ("writer", "timed"))
    started = [
        subprocess.Popen(
            [sys.executable, str(ROLES), "writer", writer_topic], env=env, stdout=subprocess.PIPE, text=True
        ),
        subprocess.Popen([sys.executable, str(ROLES), "reader", writer_topic, timed_topic], env=env),
    ]
    try:
        assert started[0].stdout.readline().strip() == "matched", "the writer found no reader"
        timed = subprocess.run(
            [
                sys.executable,
                str(ROLES),
                "timed",
                timed_topic,
                str(started[0].pid),
                str(freezes),
                str(int(stop_at_first)),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert timed.returncode == 0, timed.stderr[-3000:]
        return json.loads(timed.stdout.strip().splitlines()[-1])
    finally:
        for process in started:
            process.kill()  # SIGKILL ends a stopped process too
            process.wait()


def test_a_frozen_writer_never_blocks_another_writer_on_the_graph_transport():
    graph = _freezes(set_up=True, freezes=300, stop_at_first=False)
    assert graph["freezes"] == 300
    assert graph["stalls"] == 0, graph
    # rmw_fastrtps's own LOCALHOST set-up (shared memory and UDP), frozen until the first stall:
    # the hazard the graph's transport removes. Seen in about one freeze in 15 on 2 cores.
    default = _freezes(set_up=False, freezes=1000, stop_at_first=True)
    # A Fast DDS whose shared memory no longer blocks here fails this: the graph may then need
    # its transport no more (sim2real.nodes.dds_transport).
    assert default["stalls"] >= 1, default
    assert default["worst_s"] >= STALL_S


@pytest.mark.parametrize("writer_set_up", [True, False], ids=["graph_to_rmw_default", "rmw_default_to_graph"])
def test_the_graph_and_a_tool_on_rmw_fastrtps_s_own_setup_hear_each_other(writer_set_up):
    """A tool the user starts (`ros2 topic echo`, a teleop node) keeps rmw_fastrtps's own set-up:
    it and a graph node reach each other over UDP, both ways."""
    topic = f"/dds_talk_{uuid.uuid4().hex[:8]}"
    writer = subprocess.Popen(
        [sys.executable, str(ROLES), "writer", topic],
        env=_environment(writer_set_up),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        counted = subprocess.run(
            [sys.executable, str(ROLES), "count", topic, "8"],
            env=_environment(not writer_set_up),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert counted.returncode == 0, counted.stderr[-3000:]
        assert writer.stdout.readline().strip() == "matched"
        assert json.loads(counted.stdout.strip().splitlines()[-1])["received"] > 100
    finally:
        writer.kill()
        writer.wait()
