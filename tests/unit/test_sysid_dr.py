"""`dr from-sysid`: ranges centred on identified values, width from uncertainty (friction wide,
mass narrow), loadable as a training randomization; bad identified files refused."""

import pytest
import yaml

from sim2real.cli.main import main
from sim2real.sim.randomization import load_randomization
from sim2real.sysid.identified_file import IdentifiedError, read_identified, write_identified
from sim2real.sysid.recentre import recentred

PARAMETERS = {
    "motor_strength": {"value": 0.9, "std": 0.004, "nominal": 1.0, "unit": "", "search_range": [0.5, 1.5]},
    "mass_scale": {"value": 1.1, "std": 0.005, "nominal": 1.0, "unit": "", "search_range": [0.5, 1.6]},
    "joint_friction": {"value": 0.3, "std": 0.01, "nominal": 0.0, "unit": "N*m", "search_range": [0, 1.2]},
    "joint_damping": {"value": 0.2, "std": 0.01, "nominal": 0.0, "unit": "N*m*s/rad", "search_range": [0, 2]},
    "latency": {"value": 0.01, "std": 0.0006, "nominal": 0.0, "unit": "s", "search_range": [0, 0.04]},
}


@pytest.fixture
def identified(tmp_path):
    return write_identified(tmp_path / "panda.yaml", {"robot": "panda", "simulator": {"parameters": PARAMETERS}})


def test_ranges_are_centred_with_friction_wide_and_mass_narrow(identified):
    data = recentred(identified)
    p = data["parameters"]
    mass_low, mass_high = p["mass_scale"]["uniform"]
    friction_low, friction_high = p["joint_friction"]["uniform"]
    assert (mass_low + mass_high) / 2 == pytest.approx(1.1)
    assert (friction_low + friction_high) / 2 == pytest.approx(0.3)
    assert p["motor_strength"]["normal"]["mean"] == pytest.approx(0.9)
    assert (mass_high - mass_low) / 1.1 < 0.1 < (friction_high - friction_low) / 0.3
    latency = p["latency"]["uniform"]
    assert latency[0] <= 0.01 <= latency[1] and latency[0] >= 0.0
    # Conditions the fit does not identify come from panda_reference unchanged.
    reference = load_randomization("panda_reference")
    assert p["joint_position_noise"] == reference.to_dict()["parameters"]["joint_position_noise"]


def test_cli_writes_a_randomization_training_can_load(identified, tmp_path, capsys):
    out = tmp_path / "panda_identified.yaml"
    assert main(["dr", "from-sysid", str(identified), "-o", str(out)]) == 0
    randomization = load_randomization(out)
    assert randomization.name == "panda_identified"
    low, high = randomization.ranges()["joint_friction"]
    assert low < 0.3 < high
    assert "sim2real train --config" in capsys.readouterr().out


def test_base_none_keeps_only_identified(identified):
    data = recentred(identified, base="none")
    assert set(data["parameters"]) == set(PARAMETERS)


def test_bad_identified_files_are_refused(tmp_path):
    with pytest.raises(IdentifiedError, match="no such file"):
        read_identified(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"robot": "panda", "simulator": {"parameters": {"mass_scale": {"value": -1, "std": 0.1}}}})
    )
    with pytest.raises(IdentifiedError, match="mass_scale"):
        read_identified(bad)
    bad.write_text(yaml.safe_dump({"robot": "panda"}))
    with pytest.raises(IdentifiedError, match="simulator.parameters"):
        read_identified(bad)
    assert main(["dr", "from-sysid", str(bad), "-o", str(tmp_path / "x.yaml")]) == 2


def test_a_fit_on_a_stand_keeps_the_base_mass_range(tmp_path, capsys):
    """On a stand the trunk hangs from it: the fitted mass_scale is the legs', so the base's mass
    range (which covers a payload) is kept, and the command and the file say why."""
    identified = write_identified(
        tmp_path / "go2.yaml", {"robot": "go2", "simulator": {"suspended": True, "parameters": PARAMETERS}}
    )
    reference = load_randomization("go2_reference").to_dict()["parameters"]
    data = recentred(identified)
    assert data["parameters"]["mass_scale"] == reference["mass_scale"]
    assert data["parameters"]["motor_strength"]["normal"]["mean"] == pytest.approx(0.9)  # still centred
    out = tmp_path / "go2_identified.yaml"
    assert main(["dr", "from-sysid", str(identified), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "mass_scale kept from the base randomization: fitted on a stand" in said
    assert "# mass_scale kept from the base: fitted on a stand" in out.read_text()
    assert load_randomization(out).ranges()["mass_scale"] == load_randomization("go2_reference").ranges()["mass_scale"]
    # Standing (not on a stand), the whole robot loads the joints: the mass is centred as before.
    standing = write_identified(
        tmp_path / "standing.yaml", {"robot": "go2", "simulator": {"suspended": False, "parameters": PARAMETERS}}
    )
    low, high = recentred(standing)["parameters"]["mass_scale"]["uniform"]
    assert (low + high) / 2 == pytest.approx(1.1)


def test_a_stand_fit_written_before_the_suspended_flag_is_recognised(tmp_path):
    """Older fits say "suspended" only in ground friction's reason for not being identified."""
    old = write_identified(
        tmp_path / "old.yaml",
        {
            "robot": "go2",
            "simulator": {
                "parameters": PARAMETERS,
                "not_identified": {
                    "ground_friction": "recorded on a stand (suspended): the feet never touched the ground"
                },
            },
        },
    )
    reference = load_randomization("go2_reference").to_dict()["parameters"]
    assert recentred(old)["parameters"]["mass_scale"] == reference["mass_scale"]
