"""Test-wide settings: keep DDS traffic on this machine and away from other runs; a rerun
only for a test marked timing_sensitive, with its reason."""

import os
import random
import signal
import tempfile

import pytest

from sim2real.nodes.dds_transport import set_graph_transport

# A random domain per test session: two test runs (or a demo) on one machine never
# see each other's topics. Set before any test imports rclpy or starts a node.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(20, 99)))
# Discovery on loopback only: tests never send DDS traffic off this machine.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
# The DDS transport the graph's own processes use (sim2real.nodes.dds_transport), for the
# tests' probe nodes too.
set_graph_transport(os.environ)
# What nodes record about "the robot" (the policy audit log) goes to a folder of this session,
# never to the user's ~/.local/state/sim2real.
os.environ.setdefault("SIM2REAL_STATE_DIR", tempfile.mkdtemp(prefix="sim2real-state-"))


_reasons: dict[str, str] = {}  # test -> why it is marked timing_sensitive


def pytest_configure(config):
    """SIM2REAL_TEST_PRIORITY=idle (for the tests without a DDS graph run beside other work): this
    session and every process it starts (xdist workers, fit pools, CLI subprocesses) run at
    SCHED_IDLE, only on a core nothing else wants. `make test` does not use it: it runs the graph
    tests alone, as a host may freeze a busy VM's vCPUs past any priority inside it."""
    if os.environ.get("SIM2REAL_TEST_PRIORITY") == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        # Started in the background (`... pytest tests/unit &`), the session inherits SIGINT ignored
        # (as a shell's background job does): Ctrl-C then would not stop it. It stops as a foreground one.
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """No test reruns silently. A test may rerun only where it is marked
    ``@pytest.mark.timing_sensitive(reason=...)`` (once, and the summary lists it with the reason
    and why its first run failed); every other failure fails the run. SIM2REAL_RERUNS=0 turns
    even those reruns off (when hunting the cause)."""
    reruns = int(os.environ.get("SIM2REAL_RERUNS", "1"))
    for item in items:
        marker = item.get_closest_marker("timing_sensitive")
        if marker is None:
            continue
        if not marker.kwargs.get("reason"):
            raise pytest.UsageError(f"{item.nodeid}: timing_sensitive needs reason='why it may fail by timing'")
        _reasons[item.nodeid] = marker.kwargs["reason"]
        item.add_marker(pytest.mark.flaky(reruns=reruns, reruns_delay=1))


_reruns = []


def pytest_runtest_logreport(report):
    if report.outcome == "rerun":
        _reruns.append(report)


def pytest_terminal_summary(terminalreporter):
    """A rerun that passed still says why its first run failed: a flaky test is a bug to find."""
    if not _reruns:
        return
    terminalreporter.section(f"{len(_reruns)} rerun(s): why the earlier run failed")
    for report in _reruns:
        terminalreporter.write_line(
            f"RERUN {report.nodeid} ({report.when}), marked timing_sensitive: {_reasons.get(report.nodeid, '')}"
        )
        terminalreporter.write_line(report.longreprtext[-4000:])
