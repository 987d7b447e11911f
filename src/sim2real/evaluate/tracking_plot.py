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
