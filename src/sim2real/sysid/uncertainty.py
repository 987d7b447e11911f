"""Standard deviations of a least-squares fit whose residuals are correlated in time.

The residuals of a replayed trajectory are not independent samples: a window replayed with
slightly wrong parameters drifts for its whole length, and the noise in the state a window
starts from shifts every sample after it. The Gauss-Newton covariance ``s^2 (J^T J)^-1``
assumes independent residuals of one common size; with correlated ones it is too narrow (an
interval built from it misses the true value far more often than its level says), and where
blocks of residuals differ in size (a fit's position errors and its much smaller weighted
effort errors) it is too wide for the parameters the small ones pin down.

:func:`newey_west_covariance` is the heteroskedasticity and autocorrelation consistent (HAC)
sandwich ``A^-1 S A^-1`` with ``A = J^T J`` and ``S`` the long-run covariance of the
per-sample scores ``g_t = J_t^T r_t`` (Newey and West, Econometrica 1987), with Bartlett
weights and lags taken within a window only (windows are replayed independently). The
bandwidth is the caller's: a fit's scores are mostly white measurement noise with a small
slow part, where a plug-in rule fitted at lag one (Andrews' AR(1)) picks a few samples and
misses the slow part; ``sysid.fit`` uses a fixed span (``FitOptions.std_bandwidth``).

Residual layout (as ``sysid.fit`` builds it): ``blocks`` blocks (position, velocity, effort
errors), each ``[samples, joints]`` raveled, the samples of the windows one after another.
"""

from __future__ import annotations

import numpy as np

Z95 = 1.959964  # two-sided 95 % normal quantile


def sample_scores(jac: np.ndarray, residuals: np.ndarray, blocks: int, joints: int) -> np.ndarray:
    """``g_t = J_t^T r_t`` per time sample ``[samples, parameters]``: the entries of every block
    and joint measured at one time summed."""
    params = jac.shape[1]
    samples = residuals.size // (blocks * joints)
    if samples * blocks * joints != residuals.size or jac.shape[0] != residuals.size:
        raise ValueError(
            f"{residuals.size} residuals and a {jac.shape} Jacobian are not {blocks} blocks of [samples, {joints}]"
        )
    j = jac.reshape(blocks, samples, joints, params)
    r = residuals.reshape(blocks, samples, joints)
    return np.einsum("bsjp,bsj->sp", j, r)


def newey_west_covariance(
    jac: np.ndarray, residuals: np.ndarray, window_sizes: list[int], blocks: int, joints: int, bandwidth: float
) -> np.ndarray:
    """The HAC covariance of the fitted parameters, with lags up to ``bandwidth`` samples
    (at most a window's length)."""
    scores = sample_scores(jac, residuals, blocks, joints)
    if sum(window_sizes) != scores.shape[0]:
        raise ValueError(f"window sizes {window_sizes} do not add up to {scores.shape[0]} samples")
    per_window = np.split(scores, np.cumsum(window_sizes)[:-1])
    bandwidth = min(bandwidth, max(window_sizes) - 1.0)
    meat = np.zeros((scores.shape[1], scores.shape[1]))
    for g in per_window:
        meat += g.T @ g
        for lag in range(1, min(int(np.ceil(bandwidth)), g.shape[0])):
            weight = 1.0 - lag / bandwidth  # Bartlett: k(x) = 1 - |x| for |x| < 1
            gamma = g[lag:].T @ g[:-lag]
            meat += weight * (gamma + gamma.T)
    n, p = scores.shape[0], jac.shape[1]  # the score samples, as the sum in the meat runs over
    bread = np.linalg.pinv(jac.T @ jac)
    return bread @ meat @ bread * n / max(1, n - p)


def gauss_newton_covariance(jac: np.ndarray, residuals: np.ndarray) -> np.ndarray:
    """``s^2 (J^T J)^-1``: right for independent residuals only."""
    dof = max(1, residuals.size - jac.shape[1])
    return float(residuals @ residuals) / dof * np.linalg.pinv(jac.T @ jac)
