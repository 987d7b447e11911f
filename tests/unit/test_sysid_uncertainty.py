"""The fit's standard deviations: intervals that hold their level when residuals are correlated."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.sysid.uncertainty import Z95, gauss_newton_covariance, newey_west_covariance, sample_scores

WINDOWS, SAMPLES = 6, 200
BANDWIDTH = 100  # samples: past the errors' correlation time at rho 0.98 (50 samples)
TRUE = np.array([1.0, -2.0])


def regression(rng: np.random.Generator, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """A linear fit over replay-like windows: smooth regressors (a trajectory's sensitivities)
    and AR(1) errors with correlation ``rho`` from one 10 ms sample to the next."""
    t = np.arange(SAMPLES) * 0.01
    regressors, errors = [], []
    for _ in range(WINDOWS):
        phases = rng.uniform(0.0, 2 * np.pi, 2)
        regressors.append(
            np.stack([np.sin(2 * np.pi * 0.7 * t + phases[0]), np.cos(2 * np.pi * 0.4 * t + phases[1])], 1)
        )
        innovations = rng.normal(0.0, np.sqrt(1 - rho**2), SAMPLES)
        e = np.empty(SAMPLES)
        e[0] = rng.normal()
        for i in range(1, SAMPLES):
            e[i] = rho * e[i - 1] + innovations[i]
        errors.append(e)
    x = np.concatenate(regressors)
    return x, x @ TRUE + 0.1 * np.concatenate(errors)


def coverage(rho: float, trials: int = 300) -> tuple[float, float]:
    """Share of trials whose 95 % interval holds the true value: HAC, Gauss-Newton."""
    rng = np.random.default_rng(0)
    held_hac, held_gn = [], []
    for _ in range(trials):
        x, y = regression(rng, rho)
        fitted = np.linalg.lstsq(x, y, rcond=None)[0]
        residuals = x @ fitted - y
        hac = newey_west_covariance(x, residuals, [SAMPLES] * WINDOWS, blocks=1, joints=1, bandwidth=BANDWIDTH)
        error = np.abs(fitted - TRUE)
        held_hac.append(error <= Z95 * np.sqrt(np.diag(hac)))
        held_gn.append(error <= Z95 * np.sqrt(np.diag(gauss_newton_covariance(x, residuals))))
    return float(np.mean(held_hac)), float(np.mean(held_gn))


@pytest.mark.parametrize("rho", [0.9, 0.98])
def test_with_correlated_residuals_the_hac_interval_holds_its_level_where_gauss_newton_does_not(rho):
    hac, gauss_newton = coverage(rho)
    assert hac >= 0.88, hac
    assert gauss_newton <= 0.5, gauss_newton  # what Gauss-Newton gives for correlated residuals


def test_with_independent_residuals_both_intervals_hold_their_level():
    hac, gauss_newton = coverage(0.0)
    # A long bandwidth costs the HAC estimate some precision on white residuals (0.923 here).
    assert 0.90 <= hac <= 0.98 and 0.92 <= gauss_newton <= 0.98, (hac, gauss_newton)


def test_scores_sum_the_blocks_and_joints_of_one_time_sample():
    rng = np.random.default_rng(1)
    blocks, samples, joints, params = 3, 5, 2, 4
    jac = rng.normal(size=(blocks * samples * joints, params))
    residuals = rng.normal(size=blocks * samples * joints)
    scores = sample_scores(jac, residuals, blocks, joints)
    row = lambda b, t, j: (b * samples + t) * joints + j  # noqa: E731
    t = 3
    expected = sum(jac[row(b, t, j)] * residuals[row(b, t, j)] for b in range(blocks) for j in range(joints))
    np.testing.assert_allclose(scores[t], expected)
    np.testing.assert_allclose(scores.sum(0), jac.T @ residuals)


def test_a_layout_that_does_not_add_up_is_refused():
    with pytest.raises(ValueError, match="not 3 blocks"):
        sample_scores(np.zeros((10, 2)), np.zeros(10), blocks=3, joints=2)
    with pytest.raises(ValueError, match="do not add up"):
        newey_west_covariance(np.zeros((12, 2)), np.zeros(12), [3, 3], blocks=1, joints=1, bandwidth=2)


def test_a_parameter_the_data_leave_loose_is_named_with_what_would_pin_it_down():
    from sim2real.sysid.fit import FitResult, Parameter

    space = [
        Parameter("joint_friction", 0.0, 0.8, 0.0, "N*m"),
        Parameter("armature", 0.0, 0.2, 0.0, "kg*m^2"),
        Parameter("latency", 0.0, 0.04, 0.0, "s"),
    ]
    rmse = np.zeros(2)
    result = FitResult(
        {"joint_friction": 0.3, "armature": 0.01, "latency": 0.01},
        # armature: +-0.078, 39 % of its range; latency: a 2 ms physics step's quantisation std
        {"joint_friction": 0.002, "armature": 0.04, "latency": 0.002 / np.sqrt(12.0)},
        space,
        rmse,
        rmse,
        rmse,
        rmse,
        evaluations=1,
        iterations=1,
        stop="",
        wall_time=0.0,
    )
    document = result.to_dict(["a", "b"])
    intervals = {name: entry["interval_95"] for name, entry in document["parameters"].items()}
    assert intervals["joint_friction"] == pytest.approx([0.29608, 0.30392])
    assert intervals["armature"] == pytest.approx([0.0, 0.0884], abs=1e-5)  # clipped at the search range
    assert intervals["latency"] == pytest.approx([0.009, 0.011])  # its physics step
    assert list(result.loose()) == ["armature"]
    assert document["not_identified"]["armature"] == (
        "the data leave it loose: 95 % interval +-0.0784 kg*m^2, over 25 % of its search range either side; "
        "record large joint accelerations (higher excitation frequencies)"
    )


def test_a_fit_on_a_stand_says_its_mass_is_the_legs():
    """The file `dr from-sysid` reads says the bags hung on a stand, and why the trunk's mass is unseen."""
    from sim2real.sysid.fit import STAND_MASS, FitResult, Parameter

    space = [Parameter("mass_scale", 0.5, 1.6, 1.0, "")]
    rmse = np.zeros(1)

    def document(suspended: bool) -> dict:
        return FitResult(
            {"mass_scale": 1.07},
            {"mass_scale": 0.01},
            space,
            rmse,
            rmse,
            rmse,
            rmse,
            1,
            1,
            "",
            0.0,
            suspended=suspended,
        ).to_dict(["a"])

    hanging, standing = document(True), document(False)
    assert hanging["suspended"] is True and hanging["not_identified"]["mass_scale of the trunk"] == STAND_MASS
    assert standing["suspended"] is False and "mass_scale of the trunk" not in standing["not_identified"]
