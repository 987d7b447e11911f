"""The standing check plays a sysid plan on the simulated Go2 and refuses one that tips it over."""

from sim2real.core.robot_profile import load_profile
from sim2real.sysid.excitation import excitation_defaults, make_excitation
from sim2real.sysid.standing_check import MAX_TILT_DEG, check_standing

GO2 = load_profile("go2")


def test_every_joint_at_once_at_the_arm_amplitude_tips_a_standing_go2_over():
    check = check_standing(GO2, make_excitation(GO2, "multisine", duration=20.0, amplitude=0.6))
    assert not check.ok and check.max_tilt_deg > MAX_TILT_DEG
    assert "would not keep the standing go2 up" in check.reason
    # Both ways a recording starts: `sysid record` flags and the launch file's arguments.
    for words in (
        "--legs 1",
        "legs:=1",
        "--suspended",
        "suspended:=true",
        "--amplitude",
        "amplitude:=",
        "now 0.60 rad",
    ):
        assert words in check.reason, words


def test_the_default_plan_for_a_standing_go2_keeps_it_up():
    amplitude, legs = excitation_defaults(GO2, suspended=False)
    for kind in ("multisine", "chirp"):
        check = check_standing(GO2, make_excitation(GO2, kind, duration=20.0, amplitude=amplitude, legs=legs))
        assert check.ok, check.summary()
        assert check.max_tilt_deg < MAX_TILT_DEG and check.min_height > 0.75 * check.stand_height


def test_sysid_simulate_refuses_a_plan_that_tips_the_standing_robot(tmp_path, capsys):
    from sim2real.cli.main import main

    assert (
        main(
            [
                "sysid",
                "simulate",
                "--robot",
                "go2",
                "-o",
                str(tmp_path / "bag"),
                "--kind",
                "multisine",
                "--duration",
                "10",
                "--amplitude",
                "0.6",
                "--legs",
                "0",
            ]
        )
        == 2
    )
    assert "would not keep the standing go2 up" in capsys.readouterr().err
    assert not (tmp_path / "bag").exists()
