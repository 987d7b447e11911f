"""The simulator fit, ROS-free: a bag written by the rosbags-based recorder from a SimWorld with
known non-default parameters (plus sensor noise) is fitted back within the issue's targets;
a fit that cannot converge says so and writes no YAML."""

import os

import numpy as np
import pytest
import yaml

from sim2real.cli.main import main
from sim2real.core.robot_profile import load_profile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sysid.dataset import read_bags
from sim2real.sysid.excitation import make_excitation
from sim2real.sysid.fit import FitError, FitOptions, _Pool, fit_conditions, walk_latency_profile
from sim2real.sysid.sim_recording import record_in_sim

HIDDEN = {
    "motor_strength": 0.9,
    "mass_scale": 1.1,
    "joint_friction": 0.3,
    "joint_damping": 0.2,
    "latency": 0.01,
    "armature": 0.02,
}
NOISE = {"joint_position_noise": 0.0005, "joint_velocity_noise": 0.01}


@pytest.fixture(scope="module")
def panda():
    return load_profile("panda")


@pytest.mark.slow
def test_fit_recovers_hidden_parameters_through_the_cli(tmp_path, panda):
    excitation = make_excitation(panda, "multisine", duration=40.0)
    bag = record_in_sim(panda, excitation, tmp_path / "bag", PhysicalConditions(**HIDDEN, **NOISE), seed=1)
    out = tmp_path / "identified" / "panda.yaml"
    assert main(["sysid", "fit", str(bag), "--robot", "panda", "-o", str(out), "--train-seconds", "8"]) == 0
    document = yaml.safe_load(out.read_text())
    fitted = document["simulator"]["parameters"]
    for name in ("motor_strength", "mass_scale", "joint_friction"):
        assert abs(fitted[name]["value"] - HIDDEN[name]) / HIDDEN[name] <= 0.05, (name, fitted[name])
        assert fitted[name]["std"] > 0
    assert document["simulator"]["optimizer"]["std"].startswith("Newey-West")  # residuals correlated in time
    assert abs(fitted["latency"]["value"] - HIDDEN["latency"]) <= 0.002
    # No target in the issue; benchmarks/sysid_accuracy.py sees 0.2-8 % over random sets.
    assert fitted["armature"]["value"] == pytest.approx(HIDDEN["armature"], rel=0.15), fitted["armature"]
    rmse = document["simulator"]["position_rmse_rad"]
    before = np.array(list(rmse["heldout_before"].values()))
    after = np.array(list(rmse["heldout_after"].values()))
    assert np.all(after < before) and after.max() < 0.005  # held-out: about the noise level after the fit
    # The arm's rigid-body model, from the efforts: its inertia scale is the hidden mass scale.
    assert document["rigid_body"]["inertial_scale"] == pytest.approx(HIDDEN["mass_scale"], rel=0.05)
    assert out.with_suffix(".png").is_file()
    # And it re-centres a randomization.
    randomization = tmp_path / "panda_identified.yaml"
    assert main(["dr", "from-sysid", str(out), "-o", str(randomization)]) == 0


@pytest.mark.slow
def test_a_quadruped_recorded_on_a_stand_is_fitted_back(tmp_path):
    """The Go2 hangs on a stand (sysid record --suspended; here the sim's gantry): the replay
    holds its base too, so the fit needs no base state and recovers the hidden parameters
    (0.1 % and the exact latency here); ground friction, which a hanging robot cannot show, is
    not fitted."""
    go2 = load_profile("go2")
    excitation = make_excitation(go2, "multisine", duration=40.0)
    bag = record_in_sim(
        go2, excitation, tmp_path / "bag", PhysicalConditions(**HIDDEN, **NOISE), seed=1, suspended=True
    )
    out = tmp_path / "go2.yaml"
    assert main(["sysid", "fit", str(bag), "--robot", "go2", "-o", str(out), "--train-seconds", "8", "--no-plots"]) == 0
    document = yaml.safe_load(out.read_text())
    assert "warnings" not in document  # no "recorded standing: approximate" warning
    fitted = document["simulator"]["parameters"]
    assert "ground_friction" not in fitted
    for name in ("motor_strength", "mass_scale", "joint_friction", "joint_damping", "armature"):
        assert fitted[name]["value"] == pytest.approx(HIDDEN[name], rel=0.02), (name, fitted[name])
    assert abs(fitted["latency"]["value"] - HIDDEN["latency"]) <= 0.5 * go2.physics_period  # on the grid: exact


def test_a_quadruped_recorded_standing_is_warned_approximate(tmp_path, capsys):
    """No base state in the bag: a standing quadruped's replay starts each window at rest at
    its spawn pose, so the fit says it is approximate (before it runs; here it then stops on
    a train fraction that cannot work)."""
    go2 = load_profile("go2")
    bag = record_in_sim(go2, make_excitation(go2, "chirp", duration=3.0, ramp=1.0), tmp_path / "bag")
    assert (
        main(
            [
                "sysid",
                "fit",
                str(bag),
                "--robot",
                "go2",
                "-o",
                str(tmp_path / "go2.yaml"),
                "--train-fraction",
                "1.0",
                "--no-plots",
            ]
        )
        != 0
    )
    assert "floating base recorded standing" in capsys.readouterr().out
    assert not (tmp_path / "go2.yaml").exists()


def test_the_latency_walk_goes_downhill_past_two_steps_and_stays_in_range():
    """A made-up profile: the walk from step 2 reaches the minimum at 8 (comparing the first
    two neighbours only stopped at 4), evaluates each step once, each from the best fit so
    far, and never leaves [0, top]."""
    calls = []

    def evaluate(k, x):
        calls.append((k, x))
        return (k - 8) ** 2, f"x{k}"

    assert walk_latency_profile(2, 36.0, "x2", 20, evaluate) == (8, 0, "x8")
    steps = [k for k, _ in calls]
    assert len(steps) == len(set(steps)) and 2 not in steps and 0 <= min(steps) and max(steps) <= 10
    assert all(abs(int(x[1:]) - k) <= 2 for k, x in calls)  # started from a neighbour's fit
    assert walk_latency_profile(18, 1.0, "x", 20, lambda k, x: (-k, x))[0] == 20  # stops at the top
    assert walk_latency_profile(1, 1.0, "x", 20, lambda k, x: (k, x))[0] == 0
    assert walk_latency_profile(5, 0.0, "x", 20, lambda k, x: (1.0, x))[0] == 5  # nothing better: stays


def test_fit_that_does_not_converge_says_so_and_writes_nothing(tmp_path, panda, capsys):
    excitation = make_excitation(panda, "chirp", duration=10.0, ramp=1.0)
    bag = record_in_sim(panda, excitation, tmp_path / "bag", PhysicalConditions(**HIDDEN, **NOISE))
    with pytest.raises(FitError, match="did not converge"):
        fit_conditions(
            panda,
            read_bags([bag], panda),
            FitOptions(workers=1, train_seconds=2, heldout_seconds=2, popsize=4, cma_iterations=1, max_iterations=1),
        )
    out = tmp_path / "panda.yaml"
    code = main(
        [
            "sysid",
            "fit",
            str(bag),
            "--robot",
            "panda",
            "-o",
            str(out),
            "--workers",
            "1",
            "--train-seconds",
            "2",
            "--cma-iterations",
            "1",
            "--max-iterations",
            "1",
            "--no-plots",
        ]
    )
    assert code == 1 and not out.exists()
    assert "no identified parameters were written" in capsys.readouterr().err


def test_too_short_a_recording_is_refused(tmp_path, panda):
    excitation = make_excitation(panda, "chirp", duration=2.5, ramp=1.0)
    bag = record_in_sim(panda, excitation, tmp_path / "bag", seed=0, settle=0.0)
    with pytest.raises(FitError, match="too short"):
        fit_conditions(panda, read_bags([bag], panda), FitOptions(workers=1, window=2.0))
    # Options that cannot work are named before any replay (a traceback after the whole CMA-ES
    # run, or "record at least 20 s" for a train fraction of 1).
    for options, words in (
        (FitOptions(workers=1, train_fraction=1.0), "train fraction 1.0 must lie strictly"),
        (FitOptions(workers=1, max_iterations=0), "max-iterations must be a whole number"),
    ):
        with pytest.raises(FitError, match=words):
            fit_conditions(panda, read_bags([bag], panda), options)


@pytest.mark.timeout(120)
def test_a_worker_that_cannot_start_raises_instead_of_hanging_the_pool(tmp_path, panda):
    """A recording the replay cannot be built for (an arm's bag claiming a stand, past
    read_bags' own check) raises with the reason, rather than restarting the pool's workers for ever."""
    bag = record_in_sim(panda, make_excitation(panda, "chirp", duration=3.0, ramp=1.0), tmp_path / "bag")
    dataset = read_bags([bag], panda)
    dataset.segments[0].metadata["suspended"] = True
    with pytest.raises(ValueError, match="has a fixed base"):
        _Pool(2, (panda, dataset, {}, 1))


def test_fit_workers_are_not_forks_of_the_calling_process(tmp_path, panda):
    # A fork of a process with threads (a ROS graph's probe, torch) can inherit a lock held by
    # another thread and wait on it for ever. Workers come from a fork server started clean.
    excitation = make_excitation(panda, "chirp", duration=2.0, ramp=0.5)
    bag = record_in_sim(panda, excitation, tmp_path / "bag", PhysicalConditions())
    pool = _Pool(2, (panda, read_bags([bag], panda), {"train": [], "heldout": []}, 1))
    try:
        parents = {pool.pool.apply(os.getppid) for _ in range(4)}
    finally:
        pool.close()
    assert os.getpid() not in parents


def test_the_command_line_fits_with_the_library_defaults():
    """`sim2real sysid fit` without options fits as FitOptions() does (the CLI keeps its own
    literals so that `--help` does not import scipy)."""
    from sim2real.cli.main import build_parser

    args = build_parser().parse_args(["sysid", "fit", "bag", "--robot", "panda", "-o", "out.yaml"])
    defaults = FitOptions()
    for name in ("max_iterations", "cma_iterations", "train_seconds", "train_fraction", "seed"):
        assert getattr(args, name) == getattr(defaults, name), name
