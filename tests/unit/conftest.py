"""Fixtures of the evaluation suite's tests (test_eval_suite, test_eval_ablation): a short Go2
suite file and a policy that holds the stand pose."""

from __future__ import annotations

import pytest

from sim2real.core.robot_profile import load_profile
from tests.policy_models import write_target_policy
from tests.unit.eval_suites import SHORT_SUITE

GO2 = load_profile("go2")


@pytest.fixture(scope="module")
def short_suite(tmp_path_factory):
    path = tmp_path_factory.mktemp("suite") / "go2_short.yaml"
    path.write_text(SHORT_SUITE)
    return path


@pytest.fixture(scope="module")
def holding_policy(tmp_path_factory):
    """Holds the stand pose whatever it is told: stands perfectly, never walks."""
    return write_target_policy(tmp_path_factory.mktemp("policies") / "hold.onnx", GO2, GO2.default_positions)
