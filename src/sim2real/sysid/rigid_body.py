"""Rigid-body identification of a fixed-base arm: torque regressor + physically consistent least squares.

The joint torque is linear in the links' inertial parameters (10 per body: m, m*c,
inertia about the joint frame), in the joints' armature (rotor inertia reflected through
the gearbox, ``Ia_j * ddq_j`` on joint j) and in per-joint friction (Coulomb, viscous)::

    tau = Y(q, dq, ddq) @ pi + diag(ddq) @ Ia + diag(sign(dq)) @ fc + diag(dq) @ fv

``Y`` is pinocchio's ``computeJointTorqueRegressor``. Not every column is identifiable
(some parameters never move a joint, others only in fixed combinations), so the data only
determine the *base* parameters ``beta = P @ [pi; Ia]``: the columns a pivoted QR of the
regressor (armature columns included) stacked over random states keeps, each plus the fixed
combination of the dropped columns it stands for. An armature whose column is a combination
of the others (the first joint's: ``Ia_1 * ddq_1`` is exactly what link 1's inertia about
the joint axis adds) is identified only lumped with that inertia. Accelerations come from
Savitzky-Golay derivatives of the measured positions.

Two fits over the same training rows:

* **OLS** over the base parameters and friction: the warm start, the standard deviations
  (Gauss-Newton, ``s^2 (A^T A)^-1``; residuals are correlated in time, so lower bounds) and
  the reference for held-out RMSE. Its base parameters need not belong to any physical body.
* **Physically consistent** (the reported parameters): every body's pseudo-inertia
  ``J = [[tr(I)/2 - I, m c], [m c^T, m]]`` positive definite (<=> physically realisable; Wensing,
  Kim & Slotine, IEEE RA-L 2018), armature and friction >= 0. It minimises the same torque
  residual as OLS (compressed through the QR of the regressor, so an iteration costs nothing
  per sample) plus a weak pull towards the URDF: ``REGULARIZATION`` times the LogDet (Bregman)
  divergence ``tr(J_urdf^-1 J) - log det(J_urdf^-1 J) - 4`` of every body (Lee, Wensing & Park,
  "Geometric Robot Dynamic Identification: A Convex Programming Approach", IEEE T-RO 2020)
  and a quadratic pull of the armature. Only base parameters are identifiable: the pull picks
  the full parameter set nearest the URDF along the unidentifiable directions, and along the
  identifiable ones it weighs ~1e-2 of one torque sample against thousands. The problem is
  convex (a quadratic, LogDet terms that are infinite on the cone's boundary, a log barrier on
  the bounds), so damped Newton from the URDF's parameters finds its unique minimum and every
  iterate is consistent. (The log-Cholesky parameterization of Rucker & Wensing, IEEE RA-L 2022,
  with ``scipy.optimize.least_squares`` was tried first: when the data push a body to the
  boundary of the cone the optimum sits at a log-coordinate far away and trust-region steps
  had not converged after 3000 evaluations.)

The OLS solution counts as physically consistent when the consistent fit reproduces it to
within ``OLS_CONSISTENCY_TOLERANCE`` standard deviations (Mahalanobis distance of the two
solutions under the OLS covariance): then some physical parameter set has its base parameters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from sim2real.core.robot_profile import RobotProfile

RANK_TOLERANCE = 1e-6  # relative to the largest pivot of the QR
SAVGOL_WINDOW_S = 0.15  # s, derivative filter window: averages encoder noise, short against a 1 Hz excitation
# Weight of the pull towards the URDF (LogDet divergence per body, dimensionless) in units of the
# normalised torque residual's squared sum, which grows by ~1 per training torque sample.
REGULARIZATION = 1e-2
ARMATURE_PRIOR = 1.0  # kg*m^2: scale of the armature's pull (decides only how a lumped armature is split)
OLS_CONSISTENCY_TOLERANCE = 0.1  # std (Mahalanobis): closer than this, the consistent fit reproduces OLS


@lru_cache(maxsize=None)
def _fixed_base_model(urdf: str):
    import pinocchio as pin

    return pin.buildModelFromUrdf(urdf)


class RegressorModel:
    """The torque regressor of a profile's URDF with a fixed base, in profile joint order.

    Full parameters ``p = [pi (10 per body, pinocchio order); Ia (per joint)]``; base parameters
    ``beta = P @ p`` (``base_map``) over the columns ``base_columns`` of the stacked regressor.
    """

    def __init__(self, profile: RobotProfile, seed: int = 0):
        import pinocchio as pin

        self._pin = pin
        self.profile = profile
        self.model = _fixed_base_model(str(profile.urdf))
        self.data = self.model.createData()
        missing = [n for n in profile.joint_names if not self.model.existJointName(n)]
        if missing:
            raise ValueError(f"{profile.urdf}: joints {missing} not in the pinocchio model")
        ids = [self.model.getJointId(n) for n in profile.joint_names]
        self.q_index = np.array([self.model.joints[i].idx_q for i in ids])
        self.v_index = np.array([self.model.joints[i].idx_v for i in ids])
        self.n = profile.num_joints
        if self.model.nq != self.n:
            raise ValueError(
                f"robot {profile.name!r}: the URDF has {self.model.nq} joint coordinates, the profile "
                f"{self.n}; rigid-body identification needs every movable joint in the profile"
            )
        self.bodies = self.model.njoints - 1
        self.body_names = [str(self.model.names[i]) for i in range(1, self.model.njoints)]
        self.nominal = np.concatenate(
            [self.model.inertias[i].toDynamicParameters() for i in range(1, self.model.njoints)]
        )
        self.nominal_armature = np.asarray(self.model.armature, dtype=float)[self.v_index].copy()
        self.base_columns, self.base_map, self.armature_separable = self._base_parameters(seed)

    @property
    def inertial_size(self) -> int:
        return 10 * self.bodies

    def regressor(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """[n, 10*bodies + n] for one state in profile order: link columns, then armature columns."""
        pin = self._pin
        qm, vm, am = np.zeros(self.model.nq), np.zeros(self.model.nv), np.zeros(self.model.nv)
        qm[self.q_index], vm[self.v_index], am[self.v_index] = q, dq, ddq
        Y = pin.computeJointTorqueRegressor(self.model, self.data, qm, vm, am)
        return np.hstack([np.asarray(Y)[self.v_index], np.diag(ddq)])

    def stacked(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        return np.vstack([self.regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])

    def _base_parameters(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from scipy.linalg import qr

        rng = np.random.default_rng(seed)
        lo, hi = self.profile.lower_limits, self.profile.upper_limits
        samples = 30
        q = rng.uniform(lo, hi, (samples, self.n))
        dq = rng.uniform(-1, 1, (samples, self.n)) * self.profile.velocity_limits
        ddq = rng.uniform(-10, 10, (samples, self.n))
        W = self.stacked(q, dq, ddq)
        _, R, pivots = qr(W, mode="economic", pivoting=True)
        diag = np.abs(np.diag(R))
        rank = int(np.sum(diag > RANK_TOLERANCE * diag[0]))
        base = np.sort(pivots[:rank])
        dependent = np.setdiff1d(np.arange(W.shape[1]), base)
        # W[:, dependent] = W[:, base] @ K exactly, so W @ p = W[:, base] @ (p_base + K @ p_dependent).
        K, *_ = np.linalg.lstsq(W[:, base], W[:, dependent], rcond=None)
        K[np.abs(K) < 1e-9 * max(1.0, np.abs(K).max())] = 0.0
        P = np.zeros((rank, W.shape[1]))
        P[:, base] = np.eye(rank)
        P[:, dependent] = K
        # An armature column outside the span of all the others is a base column of its own
        # (beta holds the armature itself); otherwise only a combination is identifiable.
        armature = np.arange(self.inertial_size, W.shape[1])
        separable = np.array([j in base and not np.any(K[list(base).index(j)]) for j in armature])
        return base, P, separable


def pseudo_inertia(p: np.ndarray) -> np.ndarray:
    """Pseudo-inertia [[tr(I)/2 - I, h], [h^T, m]] of one body's 10 parameters (pinocchio order); linear in p."""
    m, h = p[0], p[1:4]
    ixx, ixy, iyy, ixz, iyz, izz = p[4:10]
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    J = np.zeros((4, 4))
    J[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


_BASIS = np.stack([pseudo_inertia(e) for e in np.eye(10)])  # d J / d p_k


@dataclass
class RigidBodyResult:
    base_parameters: np.ndarray  # physically consistent fit
    base_std: np.ndarray  # OLS covariance (the model is linear in the base parameters)
    base_parameters_ols: np.ndarray
    link_parameters: np.ndarray  # [bodies, 10], consistent fit, pinocchio order (URDF prior where unidentifiable)
    body_names: list[str]
    armature: np.ndarray  # kg*m^2 per joint
    armature_std: np.ndarray  # nan where not separable
    armature_separable: np.ndarray
    coulomb: np.ndarray  # N*m per joint
    coulomb_std: np.ndarray
    viscous: np.ndarray  # N*m*s/rad per joint
    viscous_std: np.ndarray
    train_rmse: np.ndarray  # N*m per joint, consistent fit
    heldout_rmse: np.ndarray
    ols_heldout_rmse: np.ndarray
    nominal_heldout_rmse: np.ndarray  # the URDF's parameters, no friction
    inertial_scale: float  # identified rigid-body torque (armature included) / nominal, least squares
    consistent: bool  # every body's pseudo-inertia of the reported parameters positive definite
    ols_consistent: bool
    ols_distance: float  # Mahalanobis distance (OLS std) between the consistent and the OLS solution
    condition_number: float
    iterations: int
    wall_time: float

    def to_dict(self, joint_names: list[str]) -> dict:
        def per_joint(values, digits=6):
            return {
                name: (None if not np.isfinite(v) else round(float(v), digits)) for name, v in zip(joint_names, values)
            }

        lumped = [name for name, ok in zip(joint_names, self.armature_separable) if not ok]
        links = {}
        for name, p in zip(self.body_names, self.link_parameters):
            m = float(p[0])
            links[name] = {
                "mass": round(m, 6),
                "com": [round(float(v / m), 6) for v in p[1:4]],
                "inertia_at_joint_frame": [round(float(v), 7) for v in p[4:10]],
            }
        return {
            "method": "pinocchio computeJointTorqueRegressor + armature + friction; least squares with every "
            "body's pseudo-inertia positive definite, weakly regularised towards the URDF (LogDet "
            "divergence); std from the unconstrained OLS fit",
            "base_parameter_count": int(self.base_parameters.size),
            "regressor_condition_number": round(self.condition_number, 2),
            "inertial_scale": round(self.inertial_scale, 5),
            "armature": per_joint(self.armature),
            "armature_std": per_joint(self.armature_std),
            "armature_lumped_with_link_inertia": lumped,
            "coulomb_friction": per_joint(self.coulomb),
            "coulomb_friction_std": per_joint(self.coulomb_std),
            "viscous_friction": per_joint(self.viscous),
            "viscous_friction_std": per_joint(self.viscous_std),
            "torque_rmse_train": per_joint(self.train_rmse),
            "torque_rmse_heldout": per_joint(self.heldout_rmse),
            "torque_rmse_heldout_ols": per_joint(self.ols_heldout_rmse),
            "torque_rmse_heldout_nominal_urdf": per_joint(self.nominal_heldout_rmse),
            "physically_consistent": self.consistent,
            "ols_physically_consistent": self.ols_consistent,
            "ols_distance_std": round(self.ols_distance, 4),
            "links": links,
            "links_note": "only base-parameter combinations are identified; the rest follows the URDF",
            "optimizer": {"iterations": self.iterations, "wall_time_s": round(self.wall_time, 2)},
        }


def derivatives(t: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed velocity and acceleration of uniformly sampled positions [samples, joints]."""
    from scipy.signal import savgol_filter

    dt = float(np.median(np.diff(t)))
    window = max(5, int(round(SAVGOL_WINDOW_S / dt)) | 1)
    dq = savgol_filter(q, window, 3, deriv=1, delta=dt, axis=0)
    ddq = savgol_filter(q, window, 3, deriv=2, delta=dt, axis=0)
    return dq, ddq


def identify(model: RegressorModel, segments, train_fraction: float = 0.7, stride: int = 5) -> RigidBodyResult:
    """Fit base parameters, armature and friction to the measured joint torques (``effort``)
    of ``segments`` (:class:`sim2real.sysid.dataset.Segment`): the first ``train_fraction``
    of each recording trains, the rest is held out. Every ``stride``-th sample is used."""
    started = time.monotonic()
    n = model.n
    parts = {"train": [], "heldout": []}
    for seg in segments:
        if not np.any(seg.effort):
            raise ValueError(
                f"{seg.source}: /joint_states carry no effort; rigid-body identification needs "
                "measured joint torques (skip it with --no-rigid-body)"
            )
        dq, ddq = derivatives(seg.t, seg.q)
        split = seg.t[0] + train_fraction * seg.duration
        for name, mask in (("train", seg.t < split), ("heldout", seg.t >= split)):
            index = np.flatnonzero(mask)[::stride]
            parts[name].append((seg.q[index], dq[index], ddq[index], seg.effort[index]))

    def rows(name):
        q, dq, ddq, tau = (np.concatenate(a) for a in zip(*parts[name]))
        W = model.stacked(q, dq, ddq)
        friction = np.zeros((len(q) * n, 2 * n))
        for k in range(len(q)):
            friction[k * n : (k + 1) * n, :n] = np.diag(np.sign(dq[k]))
            friction[k * n : (k + 1) * n, n:] = np.diag(dq[k])
        return W, friction, tau.reshape(-1)

    W, F, tau = rows("train")
    A = np.hstack([W[:, model.base_columns], F])
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    As = A / scale
    solution, *_ = np.linalg.lstsq(As, tau, rcond=None)
    solution /= scale
    residual = tau - A @ solution
    dof = max(1, A.shape[0] - A.shape[1])
    sigma2 = float(residual @ residual) / dof
    covariance = sigma2 * np.linalg.pinv(A.T @ A)
    std = np.sqrt(np.clip(np.diag(covariance), 0, None))
    nb = model.base_columns.size

    # The torque residual of any z = [beta; fc; fv] is ||As (scale z) - tau||^2
    # = ||R (scale z) - Q^T tau||^2 + const: least squares iterates on len(z) rows, not on samples.
    Q, R = np.linalg.qr(As)
    target = Q.T @ tau
    sigma = np.sqrt(sigma2)
    v, iterations = _consistent_fit(model, R * scale / sigma, target / sigma, solution)
    consistent_z = _z_of(model, v)
    ols_distance = float(np.linalg.norm(R @ (scale * (consistent_z - solution))) / sigma)

    Wh, Fh, tauh = rows("heldout")
    Ah = np.hstack([Wh[:, model.base_columns], Fh])

    def rmse(error):
        return np.sqrt((error.reshape(-1, n) ** 2).mean(0))

    nominal_p = np.concatenate([model.nominal, model.nominal_armature])
    inertial_p = v[: model.inertial_size + n]
    links = inertial_p[: model.inertial_size].reshape(model.bodies, 10)
    rigid_identified = W @ inertial_p
    rigid_nominal = W @ nominal_p
    inertial_scale = float(rigid_identified @ rigid_nominal / max(rigid_nominal @ rigid_nominal, 1e-12))
    armature = inertial_p[model.inertial_size :]
    armature_std = np.full(n, np.nan)
    for j in np.flatnonzero(model.armature_separable):
        armature_std[j] = std[list(model.base_columns).index(model.inertial_size + j)]
    return RigidBodyResult(
        base_parameters=consistent_z[:nb],
        base_std=std[:nb],
        base_parameters_ols=solution[:nb],
        link_parameters=links,
        body_names=model.body_names,
        armature=armature,
        armature_std=armature_std,
        armature_separable=model.armature_separable.copy(),
        coulomb=consistent_z[nb : nb + n],
        coulomb_std=std[nb : nb + n],
        viscous=consistent_z[nb + n :],
        viscous_std=std[nb + n :],
        train_rmse=rmse(tau - A @ consistent_z),
        heldout_rmse=rmse(tauh - Ah @ consistent_z),
        ols_heldout_rmse=rmse(tauh - Ah @ solution),
        nominal_heldout_rmse=rmse(tauh - Wh @ nominal_p),
        inertial_scale=inertial_scale,
        consistent=all(_realisable(p) for p in links),
        ols_consistent=ols_distance < OLS_CONSISTENCY_TOLERANCE,
        ols_distance=ols_distance,
        condition_number=float(np.linalg.cond(As)),
        iterations=iterations,
        wall_time=time.monotonic() - started,
    )


# -- the consistent fit ---------------------------------------------------------------------------
# Variables v = [pi (10 per body); Ia (n); fc (n); fv (n)]: z = [beta; fc; fv] = T v is linear in v.
def _z_of(model: RegressorModel, v: np.ndarray) -> np.ndarray:
    size = model.inertial_size + model.n
    return np.concatenate([model.base_map @ v[:size], v[size:]])


def _consistent_fit(model: RegressorModel, M: np.ndarray, b: np.ndarray, ols: np.ndarray) -> tuple[np.ndarray, int]:
    """Minimise 1/2 ||M T v - b||^2 + REGULARIZATION * (sum over bodies of the LogDet divergence
    D(J_b, J_b,urdf) + 1/2 ||(Ia - Ia_urdf) / ARMATURE_PRIOR||^2) with Ia, fc, fv >= 0.

    Convex (quadratic + LogDet divergence, Lee, Wensing & Park, IEEE T-RO 2020): damped Newton
    from the URDF's parameters, feasible at every step (D is infinite where a pseudo-inertia
    stops being positive definite); the bounds by a log barrier whose weight shrinks to a
    negligible ``1e-9``. Returns v and the number of Newton steps.
    """
    n, size = model.n, model.inertial_size
    nv = size + 3 * n
    T = np.zeros((M.shape[1], nv))
    T[: model.base_map.shape[0], : size + n] = model.base_map
    T[model.base_map.shape[0] :, size + n :] = np.eye(2 * n)
    G = M @ T
    J0_inv = [np.linalg.inv(pseudo_inertia(_nearest_realisable(model.nominal[k : k + 10]))) for k in range(0, size, 10)]
    prior_curvature = np.zeros(nv)
    prior_curvature[size : size + n] = 1.0 / ARMATURE_PRIOR**2
    positive = np.arange(size, nv)
    lam = REGULARIZATION

    def objective(v, mu):
        pseudo = [np.tensordot(v[k : k + 10], _BASIS, 1) for k in range(0, size, 10)]
        value = 0.0
        for J, J0i in zip(pseudo, J0_inv):
            sign, logdet = np.linalg.slogdet(J)
            if sign <= 0 or not np.all(np.linalg.eigvalsh(J) > 0):
                return np.inf
            value += lam * (np.trace(J0i @ J) - logdet)
        if np.any(v[positive] <= 0):
            return np.inf
        r = G @ v - b
        armature = v[size : size + n] - model.nominal_armature
        return (
            0.5 * r @ r
            + 0.5 * lam * armature @ (prior_curvature[size : size + n] * armature)
            - mu * np.sum(np.log(v[positive]))
        )

    root = np.sqrt(lam)
    diagonal = np.arange(size, nv)

    def newton_step(v, mu):
        """The Newton step as the linear least-squares problem min 1/2 ||[G; C] s + [r; c]||^2 with
        C^T C the Hessian and C^T c the gradient of the prior and barrier terms. Never forming
        the normal equations keeps the condition number at the square root of theirs (strong
        data directions next to weak prior ones, pseudo-inertias close to singular).
        For a body, D = tr(J0^-1 J) - log det J has Hessian tr(J^-1 A_k J^-1 A_l) = C_k . C_l with
        C_k = vec(J^-1/2 A_k J^-1/2), and gradient C^T vec(J^1/2 J0^-1 J^1/2 - 1)."""
        rows, rhs = [G], [G @ v - b]
        for body, k in enumerate(range(0, size, 10)):
            w, V = np.linalg.eigh(np.tensordot(v[k : k + 10], _BASIS, 1))
            half, inverse_half = (V * np.sqrt(w)) @ V.T, (V / np.sqrt(w)) @ V.T
            C = np.zeros((16, nv))
            C[:, k : k + 10] = root * (inverse_half @ _BASIS @ inverse_half).reshape(10, 16).T
            rows.append(C)
            rhs.append(root * (half @ J0_inv[body] @ half - np.eye(4)).reshape(16))
        curvature = lam * prior_curvature[diagonal] + mu / v[diagonal] ** 2
        gradient = (
            lam * prior_curvature[diagonal] * (v[diagonal] - np.concatenate([model.nominal_armature, np.zeros(2 * n)]))
            - mu / v[diagonal]
        )
        D = np.zeros((diagonal.size, nv))
        D[np.arange(diagonal.size), diagonal] = np.sqrt(curvature)
        rows.append(D)
        rhs.append(gradient / np.sqrt(curvature))
        A, c = np.vstack(rows), np.concatenate(rhs)
        norms = np.linalg.norm(A, axis=0)
        step, *_ = np.linalg.lstsq(A / norms, -c, rcond=None)
        return step / norms, A.T @ c

    return _damped_newton(_consistent_start(model, ols), objective, newton_step)


def _consistent_start(model: RegressorModel, ols: np.ndarray) -> np.ndarray:
    """The consistent fit's first point: the URDF's inertias made realisable, the OLS armatures
    where they are separable (the URDF's elsewhere) and the OLS friction, bounds kept off zero."""
    size = model.inertial_size
    armature0 = model.nominal_armature.copy()
    for j in np.flatnonzero(model.armature_separable):
        armature0[j] = ols[list(model.base_columns).index(size + j)]
    nb = model.base_columns.size
    return np.concatenate(
        [
            np.concatenate([_nearest_realisable(model.nominal[k : k + 10]) for k in range(0, size, 10)]),
            np.maximum(armature0, 1e-3),
            np.maximum(ols[nb:], 1e-3),
        ]
    )


def _damped_newton(v: np.ndarray, objective: Callable, newton_step: Callable) -> tuple[np.ndarray, int]:
    """Newton steps with a backtracking line search from ``v``, for each barrier weight in turn;
    returns the last point and the number of steps taken."""
    steps = 0
    for mu in (1e-1, 1e-3, 1e-5, 1e-7, 1e-9):
        for _ in range(100):
            step, g = newton_step(v, mu)
            decrement = -(g @ step)
            if decrement < 1e-10:
                break
            f0, t = objective(v, mu), 1.0
            while objective(v + t * step, mu) > f0 - 0.25 * t * decrement:
                t *= 0.5
                if t < 1e-6:  # the step is no better than rounding (a pseudo-inertia next to singular)
                    break
            else:
                v = v + t * step
                steps += 1
                continue
            break
    return v, steps


def _nearest_realisable(p: np.ndarray, floor: float = 1e-6) -> np.ndarray:
    """``p`` if its pseudo-inertia is positive definite, else the one with eigenvalues raised
    to ``floor`` x the largest (a URDF with an unrealisable link still gives a usable prior)."""
    J = pseudo_inertia(p)
    w, V = np.linalg.eigh(J)
    if w.min() > floor * w.max():
        return p
    J = (V * np.maximum(w, floor * w.max())) @ V.T
    return np.linalg.lstsq(_BASIS.reshape(10, 16).T, J.reshape(16), rcond=None)[0]


def _realisable(p: np.ndarray) -> bool:
    """Pseudo-inertia [[tr(I)/2 - I, h], [h^T, m]] positive definite (pinocchio's parameter order)."""
    J = pseudo_inertia(p)
    return bool(p[0] > 0 and np.linalg.eigvalsh(J).min() > 0)
