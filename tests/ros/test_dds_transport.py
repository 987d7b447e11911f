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

from sim2real.nodes.dds_transport import PROFILES_VARIABLE, RANGE_VARIABLE, TRANSPORTS_VARIABLE, set_graph_transport
from tests.ros.dds_freeze_roles import STALL_S

pytestmark = pytest.mark.ros
ROLES = Path(__file__).with_name("dds_freeze_roles.py")


def _freezes(set_up: bool, freezes: int, stop_at_first: bool) -> dict:
    """Run writer, reader and timed publisher, each discovering on this machine only (as the
    demo and the tests do), with the graph's transport set up or with rmw_fastrtps's own."""
    env = {k: v for k, v in os.environ.items() if k not in (TRANSPORTS_VARIABLE, PROFILES_VARIABLE)}
    env[RANGE_VARIABLE] = "LOCALHOST"
    if set_up:
        set_graph_transport(env)
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
            timeout=120,
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
    default = _freezes(set_up=False, freezes=1500, stop_at_first=True)
    assert default["stalls"] >= 1, default
    assert default["worst_s"] >= STALL_S
