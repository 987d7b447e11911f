"""Rigid-body identification of a fixed-base arm: torque regressor + least squares.

The joint torque is linear in the links' inertial parameters (10 per body: m, m*c,
inertia about the joint frame) and in per-joint friction (Coulomb, viscous)::

    tau = Y(q, dq, ddq) @ pi + diag(sign(dq)) @ fc + diag(dq) @ fv

``Y`` is pinocchio's ``computeJointTorqueRegressor``. Not every column is identifiable
(some parameters never move a joint, others only in fixed combinations), so the fit is
over the *base* parameters: the columns a pivoted QR of the regressor stacked over random
states keeps. Accelerations come from Savitzky-Golay derivatives of the measured
positions.

Physical consistency: base parameters alone cannot be checked body by body, so the
check builds the full parameter set closest to the nominal URDF values that reproduces
the identified base parameters, and tests every body's pseudo-inertia matrix for positive
definiteness (mass > 0 and a realisable inertia; Wensing, Kim & Slotine, IEEE RA-L 2018).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sim2real.core.robot_profile import RobotProfile

RANK_TOLERANCE = 1e-6  # relative to the largest pivot of the QR
SAVGOL_WINDOW_S = 0.15  # s, derivative filter window: averages encoder noise, short against a 1 Hz excitation


@lru_cache(maxsize=None)
def _fixed_base_model(urdf: str):
    import pinocchio as pin

    return pin.buildModelFromUrdf(urdf)


class RegressorModel:
    """The torque regressor of a profile's URDF with a fixed base, in profile joint order."""

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
            raise ValueError(f"robot {profile.name!r}: the URDF has {self.model.nq} joint coordinates, the profile "
                             f"{self.n}; rigid-body identification needs every movable joint in the profile")
        self.bodies = self.model.njoints - 1
        self.nominal = np.concatenate([self.model.inertias[i].toDynamicParameters()
                                       for i in range(1, self.model.njoints)])
        self.base_columns = self._base_columns(seed)

    def regressor(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """[n, 10*bodies] for one state in profile order (rows in profile joint order)."""
        pin = self._pin
        qm, vm, am = np.zeros(self.model.nq), np.zeros(self.model.nv), np.zeros(self.model.nv)
        qm[self.q_index], vm[self.v_index], am[self.v_index] = q, dq, ddq
        Y = pin.computeJointTorqueRegressor(self.model, self.data, qm, vm, am)
        return np.asarray(Y)[self.v_index]

    def stacked(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        return np.vstack([self.regressor(a, b, c) for a, b, c in zip(q, dq, ddq)])

    def _base_columns(self, seed: int) -> np.ndarray:
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
        return np.sort(pivots[:rank])


@dataclass
class RigidBodyResult:
    base_parameters: np.ndarray
    base_std: np.ndarray
    coulomb: np.ndarray  # N*m per joint
    coulomb_std: np.ndarray
    viscous: np.ndarray  # N*m*s/rad per joint
    viscous_std: np.ndarray
    train_rmse: np.ndarray  # N*m per joint
    heldout_rmse: np.ndarray
    nominal_heldout_rmse: np.ndarray  # the URDF's parameters, no friction
    inertial_scale: float  # identified rigid-body torque / nominal, least squares
    consistent: bool
    inconsistent_bodies: list[str]
    condition_number: float

    def to_dict(self, joint_names: list[str]) -> dict:
        def per_joint(values):
            return {name: round(float(v), 6) for name, v in zip(joint_names, values)}
        return {
            "method": "pinocchio computeJointTorqueRegressor, least squares over base parameters + friction",
            "base_parameter_count": int(self.base_parameters.size),
            "regressor_condition_number": round(self.condition_number, 2),
            "inertial_scale": round(self.inertial_scale, 5),
            "coulomb_friction": per_joint(self.coulomb), "coulomb_friction_std": per_joint(self.coulomb_std),
            "viscous_friction": per_joint(self.viscous), "viscous_friction_std": per_joint(self.viscous_std),
            "torque_rmse_train": per_joint(self.train_rmse),
            "torque_rmse_heldout": per_joint(self.heldout_rmse),
            "torque_rmse_heldout_nominal_urdf": per_joint(self.nominal_heldout_rmse),
            "physically_consistent": self.consistent,
            "inconsistent_bodies": self.inconsistent_bodies,
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
    """Fit base parameters and friction to the measured joint torques (``effort``) of
    ``segments`` (:class:`sim2real.sysid.dataset.Segment`): the first ``train_fraction``
    of each recording trains, the rest is held out. Every ``stride``-th sample is used."""
    n = model.n
    parts = {"train": [], "heldout": []}
    for seg in segments:
        if not np.any(seg.effort):
            raise ValueError(f"{seg.source}: /joint_states carry no effort; rigid-body identification needs "
                             "measured joint torques (skip it with --no-rigid-body)")
        dq, ddq = derivatives(seg.t, seg.q)
        split = seg.t[0] + train_fraction * seg.duration
        for name, mask in (("train", seg.t < split), ("heldout", seg.t >= split)):
            index = np.flatnonzero(mask)[::stride]
            parts[name].append((seg.q[index], dq[index], ddq[index], seg.effort[index]))

    def rows(name):
        q, dq, ddq, tau = (np.concatenate(a) for a in zip(*parts[name]))
        Y = model.stacked(q, dq, ddq)
        friction = np.zeros((len(q) * n, 2 * n))
        for k in range(len(q)):
            friction[k * n:(k + 1) * n, :n] = np.diag(np.sign(dq[k]))
            friction[k * n:(k + 1) * n, n:] = np.diag(dq[k])
        return Y, friction, tau.reshape(-1)

    Y, F, tau = rows("train")
    A = np.hstack([Y[:, model.base_columns], F])
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    solution, *_ = np.linalg.lstsq(A / scale, tau, rcond=None)
    solution /= scale
    residual = tau - A @ solution
    dof = max(1, A.shape[0] - A.shape[1])
    sigma2 = float(residual @ residual) / dof
    covariance = sigma2 * np.linalg.pinv(A.T @ A)
    std = np.sqrt(np.clip(np.diag(covariance), 0, None))
    nb = model.base_columns.size
    beta = solution[:nb]

    Yh, Fh, tauh = rows("heldout")
    predicted = np.hstack([Yh[:, model.base_columns], Fh]) @ solution
    heldout_rmse = np.sqrt(((tauh - predicted).reshape(-1, n) ** 2).mean(0))
    nominal_rmse = np.sqrt(((tauh - Yh @ model.nominal).reshape(-1, n) ** 2).mean(0))
    train_rmse = np.sqrt((residual.reshape(-1, n) ** 2).mean(0))

    rigid_identified = Y[:, model.base_columns] @ beta
    rigid_nominal = Y @ model.nominal
    inertial_scale = float(rigid_identified @ rigid_nominal / max(rigid_nominal @ rigid_nominal, 1e-12))

    full = _closest_full_parameters(model, Y, beta)
    bad = [model.model.names[i + 1] for i in range(model.bodies) if not _realisable(full[10 * i:10 * i + 10])]
    return RigidBodyResult(
        base_parameters=beta, base_std=std[:nb], coulomb=solution[nb:nb + n], coulomb_std=std[nb:nb + n],
        viscous=solution[nb + n:], viscous_std=std[nb + n:], train_rmse=train_rmse, heldout_rmse=heldout_rmse,
        nominal_heldout_rmse=nominal_rmse, inertial_scale=inertial_scale, consistent=not bad,
        inconsistent_bodies=bad, condition_number=float(np.linalg.cond(A / scale)))


def _closest_full_parameters(model: RegressorModel, Y: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Full parameters nearest the nominal ones, *relatively* (each parameter's change measured
    against its own nominal size, so a 1 g change of a small inertia is not "cheaper" than a
    1 kg change of a mass), whose torques equal the identified model's."""
    target = Y[:, model.base_columns] @ beta
    size = np.abs(model.nominal) + 1e-3 * np.abs(model.nominal).max()
    relative, *_ = np.linalg.lstsq(Y * size, target - Y @ model.nominal, rcond=None)
    return model.nominal + size * relative


def _realisable(p: np.ndarray) -> bool:
    """Pseudo-inertia [[tr(I)/2 - I, h], [h^T, m]] positive definite (pinocchio's parameter order)."""
    m, h = p[0], p[1:4]
    ixx, ixy, iyy, ixz, iyz, izz = p[4:10]
    inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    pseudo = np.zeros((4, 4))
    pseudo[:3, :3] = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    pseudo[:3, 3] = pseudo[3, :3] = h
    pseudo[3, 3] = m
    return bool(m > 0 and np.linalg.eigvalsh(pseudo).min() > -1e-9)
