"""The supervisor acts on estimator divergence only when the running policy reads the estimate
(policy_runtime says so in its diagnostics); handlers driven directly, with real messages."""

from __future__ import annotations

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from sim2real.nodes.safety_supervisor import SafetySupervisorNode

pytestmark = pytest.mark.ros


@pytest.fixture
def supervisor(make_any):
    return make_any(SafetySupervisorNode, robot="go2")


def estimator(diverged: bool) -> DiagnosticStatus:
    return DiagnosticStatus(
        name="state_estimator: divergence",
        message="diverged" if diverged else "no divergence",
        level=DiagnosticStatus.ERROR if diverged else DiagnosticStatus.OK,
    )


def runtime(reads_estimate: str) -> DiagnosticStatus:
    return DiagnosticStatus(
        name="policy_runtime: policy",
        message="running",
        values=[KeyValue(key="observes_state_estimate", value=reads_estimate)],
    )


def test_divergence_counts_until_the_runtime_says_its_policy_does_not_read_the_estimate(supervisor):
    supervisor._on_diagnostics(DiagnosticArray(status=[estimator(True)]))
    assert supervisor.inputs.estimator_diverged  # nobody said otherwise: assume the policy reads it
    supervisor._on_diagnostics(DiagnosticArray(status=[runtime("false")]))
    assert not supervisor.inputs.estimator_diverged
    supervisor._on_diagnostics(DiagnosticArray(status=[runtime("true")]))
    assert supervisor.inputs.estimator_diverged
    supervisor._on_diagnostics(DiagnosticArray(status=[estimator(False)]))
    assert not supervisor.inputs.estimator_diverged
