"""Before/after plots: measured joint positions vs the simulator replay with nominal and with
identified conditions, on held-out windows (matplotlib, PNG, no display needed)."""

from __future__ import annotations

from pathlib import Path

from sim2real.core.robot_profile import RobotProfile
from sim2real.sysid.dataset import Dataset
from sim2real.sysid.replay import Replayer, Window


def plot_before_after(
    profile: RobotProfile,
    dataset: Dataset,
    windows: list[Window],
    nominal: dict[str, float],
    identified: dict[str, float],
    out: str | Path,
    max_windows: int = 3,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    chosen = windows[:max_windows]
    replayer = Replayer(profile, dataset)
    try:
        runs = [(w, replayer.run(w, nominal)[0], replayer.run(w, identified)[0]) for w in chosen]
    finally:
        replayer.close()
    n = profile.num_joints
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.6 * n + 1), sharex=True, squeeze=False)
    for j, ax in enumerate(axes[:, 0]):
        for k, (w, before, after) in enumerate(runs):
            seg = dataset.segments[w.segment]
            t = seg.t[w.start + 1 : w.stop]
            label = k == 0
            ax.plot(t, seg.q[w.start + 1 : w.stop, j], color="black", lw=1.0, label="measured" if label else None)
            ax.plot(t, before[:, j], color="tab:red", lw=0.8, ls="--", label="sim, nominal" if label else None)
            ax.plot(t, after[:, j], color="tab:blue", lw=0.8, label="sim, identified" if label else None)
        ax.set_ylabel(f"{profile.joint_names[j]}\n[rad]", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[0, 0].legend(loc="upper right", fontsize=7, ncol=3)
    axes[-1, 0].set_xlabel("time in recording [s] (held-out windows, each replayed from its measured start)")
    fig.suptitle(f"{profile.name}: joint positions, measured vs simulated before/after identification", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
