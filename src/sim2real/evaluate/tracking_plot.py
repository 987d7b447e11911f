"""Plot commanded vs measured joint positions from a pose_commander series file."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_tracking(series_path: Path, png_path: Path, max_joints: int = 12) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # headless: robot computers and CI have no display
    import matplotlib.pyplot as plt

    data = np.load(series_path)
    t, target, measured, names = data["t"], data["target"], data["measured"], data["joint_names"]
    count = min(len(names), max_joints)
    cols = 3 if count > 4 else 1
    rows = int(np.ceil(count / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 1.9 * rows), sharex=True, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= count:
            ax.set_visible(False)
            continue
        ax.plot(t, target[:, i], label="command", lw=1.2)
        ax.plot(t, measured[:, i], label="measured", lw=1.0, alpha=0.8)
        ax.set_title(str(names[i]), fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.supxlabel("time [s]", fontsize=8)
    fig.supylabel("joint position [rad]", fontsize=8)
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path


def plot_demo(series_path: Path, png_path: Path, kind: str) -> Path:
    """The main job's motion: commanded vs measured body velocity (quadruped) or goal vs
    end-effector position (arm) over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = np.load(series_path)
    t, command, measured = data["t"], data["command"], data["measured"]
    labels = ("vx [m/s]", "vy [m/s]", "yaw rate [rad/s]") if kind == "quadruped" else ("x [m]", "y [m]", "z [m]")
    rows = 4 if kind == "quadruped" else 3
    fig, axes = plt.subplots(rows, 1, figsize=(8, 1.8 * rows), sharex=True)
    for i, label in enumerate(labels):
        axes[i].plot(t, command[:, i], label="command" if kind == "quadruped" else "goal", lw=1.3)
        axes[i].plot(t, measured[:, i], label="measured", lw=0.9, alpha=0.85)
        axes[i].set_ylabel(label, fontsize=8)
        axes[i].tick_params(labelsize=7)
    if kind == "quadruped":
        base = data["base_positions"]
        axes[3].plot(t, base[:, 2], lw=1.0)
        axes[3].set_ylabel("base height [m]", fontsize=8)
        axes[3].tick_params(labelsize=7)
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("time [s]", fontsize=8)
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path
