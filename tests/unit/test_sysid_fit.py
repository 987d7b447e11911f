"""The simulator fit, ROS-free: a bag written by the rosbags-based recorder from a SimWorld with
known non-default parameters (plus sensor noise) is fitted back within the issue's targets;
a fit that cannot converge says so and writes no YAML."""
import numpy as np
import pytest
import yaml

from sim2real.cli import main
from sim2real.core.robot_profile import load_profile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sysid.dataset import read_bags
from sim2real.sysid.excitation import make_excitation
from sim2real.sysid.fit import FitError, FitOptions, fit_conditions
from sim2real.sysid.sim_recording import record_in_sim

HIDDEN = {"motor_strength": 0.9, "mass_scale": 1.1, "joint_friction": 0.3, "joint_damping": 0.2, "latency": 0.01,
          "armature": 0.02}
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


def test_fit_that_does_not_converge_says_so_and_writes_nothing(tmp_path, panda, capsys):
    excitation = make_excitation(panda, "chirp", duration=10.0, ramp=1.0)
    bag = record_in_sim(panda, excitation, tmp_path / "bag", PhysicalConditions(**HIDDEN, **NOISE))
    with pytest.raises(FitError, match="did not converge"):
        fit_conditions(panda, read_bags([bag], panda),
                       FitOptions(workers=1, train_seconds=2, heldout_seconds=2, popsize=4, cma_iterations=1,
                                  max_iterations=1))
    out = tmp_path / "panda.yaml"
    code = main(["sysid", "fit", str(bag), "--robot", "panda", "-o", str(out), "--workers", "1",
                 "--train-seconds", "2", "--cma-iterations", "1", "--max-iterations", "1", "--no-plots"])
    assert code == 1 and not out.exists()
    assert "no identified parameters were written" in capsys.readouterr().err


def test_too_short_a_recording_is_refused(tmp_path, panda):
    excitation = make_excitation(panda, "chirp", duration=2.5, ramp=1.0)
    bag = record_in_sim(panda, excitation, tmp_path / "bag", seed=0, settle=0.0)
    with pytest.raises(FitError, match="too short"):
        fit_conditions(panda, read_bags([bag], panda), FitOptions(workers=1, window=2.0))
