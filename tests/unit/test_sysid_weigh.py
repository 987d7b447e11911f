"""`sysid weigh`: a legged robot's whole mass from bags of it standing, which a fit on a stand
cannot see; what `dr from-sysid` makes of it; bags that cannot tell are refused with the reason."""

import re

import numpy as np
import pytest
import yaml

from sim2real.cli.main import main
from sim2real.core.bags import BagWriter
from sim2real.core.kinematics import Kinematics
from sim2real.core.robot_profile import load_profile
from sim2real.core.stand_effort import standing_efforts
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.randomization import load_randomization
from sim2real.sysid.dataset import JOINT_STATE_TYPE, STATES
from sim2real.sysid.excitation import make_excitation
from sim2real.sysid.fit import STAND_MASS, STAND_MASS_KEY
from sim2real.sysid.identified_file import read_identified, write_identified
from sim2real.sysid.metadata import SUSPENDED
from sim2real.sysid.sim_recording import joint_state_message, record_in_sim
from sim2real.sysid.weigh import WeighError, weigh

GO2 = load_profile("go2")
HIDDEN = PhysicalConditions(mass_scale=1.15, motor_strength=0.95, joint_friction=0.05, joint_velocity_noise=0.05)


@pytest.fixture(scope="module")
def standing_bag(tmp_path_factory):
    """A Go2 standing on the PyBullet ground with the supervisor's stand feed-forward, one leg at a
    time excited (as `sysid record` does without --suspended), heavier than its URDF, on weaker
    motors."""
    excitation = make_excitation(GO2, duration=4.0, amplitude=0.1, legs=1, ramp=1.0)
    out = tmp_path_factory.mktemp("weigh") / "standing"
    return record_in_sim(GO2, excitation, out, HIDDEN, settle=1.5, effort=standing_efforts(GO2))


def test_a_standing_bag_weighs_the_whole_robot_and_weak_motors_do_not_read_light(standing_bag):
    weighing = weigh(GO2, [standing_bag])
    assert weighing.mass_scale == pytest.approx(1.15, rel=0.02)
    assert weighing.model_mass_kg == pytest.approx(15.02, abs=0.05)  # the URDF's
    assert weighing.readings >= 5 and 0 < weighing.mass_scale_std < 0.01
    # Told the legs' mass (a fit on a stand identifies it), the balance uses it: here the same.
    assert weigh(GO2, [standing_bag], leg_mass_scale=1.15).mass_scale == pytest.approx(1.15, rel=0.02)


def test_the_cli_adds_the_weighing_to_a_stand_fit_and_dr_from_sysid_centres_the_mass_on_it(
    standing_bag, tmp_path, capsys
):
    parameters = {
        "motor_strength": {"value": 0.9, "std": 0.005, "nominal": 1.0, "unit": ""},
        "mass_scale": {"value": 1.15, "std": 0.01, "nominal": 1.0, "unit": ""},  # the legs'
    }
    fit = write_identified(
        tmp_path / "go2.yaml",
        {
            "robot": "go2",
            "bags": ["bags/go2_stand"],
            "simulator": {"suspended": True, "parameters": parameters, "not_identified": {STAND_MASS_KEY: STAND_MASS}},
        },
    )
    out = tmp_path / "go2_weighed.yaml"
    assert main(["sysid", "weigh", str(standing_bag), "--robot", "go2", "--fit", str(fit), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert re.search(r"go2 weighs 1[67]\.\d\d \+- 0\.\d\d kg standing", said) and f"wrote {out}" in said
    weighed = read_identified(out)
    simulator = weighed["simulator"]
    assert simulator["parameters"]["mass_scale"]["value"] == pytest.approx(1.15, rel=0.02)
    assert simulator["parameters"]["motor_strength"] == parameters["motor_strength"]  # the fit's, kept
    assert simulator["weighed"]["legs_mass_scale"] == 1.15 and STAND_MASS_KEY not in simulator["not_identified"]
    assert weighed["bags"] == ["bags/go2_stand", str(standing_bag)]

    randomization = tmp_path / "go2_identified.yaml"
    assert main(["dr", "from-sysid", str(out), "-o", str(randomization)]) == 0
    assert "kept from the base" not in capsys.readouterr().out
    low, high = load_randomization(randomization).ranges()["mass_scale"]
    assert low < 1.15 < high and high - low < 0.12  # centred on the weighing, narrow

    alone = tmp_path / "weighed_alone.yaml"
    assert main(["sysid", "weigh", str(standing_bag), "--robot", "go2", "-o", str(alone)]) == 0
    assert set(read_identified(alone)["simulator"]["parameters"]) == {"mass_scale"}
    assert main(["dr", "from-sysid", str(alone), "-o", str(tmp_path / "alone_dr.yaml")]) == 0


def _still_bag(path, positions, efforts=(), suspended=False, seconds=3.0):
    """A Go2 bag of joint states only, holding ``positions`` (what any driver's recording has)."""
    custom = {"robot": "go2", SUSPENDED: "true" if suspended else "false"}
    with BagWriter(path, custom) as bag:
        bag.add_topic(STATES, JOINT_STATE_TYPE)
        for k in range(int(seconds / GO2.sensing_period)):
            stamp = k * 2_000_000
            bag.write(STATES, stamp, joint_state_message(GO2.joint_names, stamp, positions, np.zeros(12), efforts))
    return path


def test_bags_that_cannot_tell_the_weight_are_refused_with_what_to_record(tmp_path):
    stand = [joint.default for joint in GO2.joints]
    with pytest.raises(WeighError, match="carry no efforts"):
        weigh(GO2, [_still_bag(tmp_path / "no_effort", stand)])
    with pytest.raises(WeighError, match="recorded on a stand .suspended.: its feet carried nothing"):
        weigh(GO2, [_still_bag(tmp_path / "hanging", stand, np.ones(12), suspended=True)])
    lying = [0.0, 1.2, -2.7] * 4  # legs folded under the trunk: the trunk rests on the ground
    with pytest.raises(WeighError, match="0 s of standing in 1 bag"):
        weigh(GO2, [_still_bag(tmp_path / "lying", lying, np.ones(12))])
    with pytest.raises(WeighError, match="does not stand on feet"):
        weigh(load_profile("panda"), [tmp_path / "lying"])
    assert main(["sysid", "weigh", str(tmp_path / "lying"), "--robot", "go2", "-o", str(tmp_path / "x.yaml")]) == 2
    assert not (tmp_path / "x.yaml").exists()


def test_a_fit_of_another_robot_is_refused(standing_bag, tmp_path):
    fit = write_identified(tmp_path / "panda.yaml", {"robot": "panda", "simulator": {"parameters": {}}})
    assert (
        main(["sysid", "weigh", str(standing_bag), "--robot", "go2", "--fit", str(fit), "-o", str(tmp_path / "o.yaml")])
        == 2
    )
    assert yaml.safe_load(fit.read_text())["robot"] == "panda"


@pytest.mark.parametrize("mass_scale", [1.0, 1.15])
def test_the_independently_written_go2_in_mujoco_weighs_its_own_mass(mass_scale):
    """The balance uses our URDF's legs, and the example-robot-data Go2 has other inertias, centres
    of mass and rotor bodies: standing on its feet it still weighs within 2 % of its total mass."""
    from sim2real.sim.mujoco_world import MujocoWorld
    from sim2real.sysid.weigh import balanced_mass, foot_forces

    kinematics = Kinematics(GO2)
    stand = np.array([joint.default for joint in GO2.joints])
    world = MujocoWorld(GO2, PhysicalConditions(mass_scale=mass_scale), seed=0, model="example-robot-data:go2")
    try:
        world.reset()
        world.command(stand, np.zeros(12), standing_efforts(GO2))
        positions, efforts = [], []
        for _ in range(100):  # 1 s of standing, after 1 s to settle
            world.step(10)
            state = world.true_joint_state()
            positions.append(state.position)
            efforts.append(state.effort)
        legs, motors = foot_forces(kinematics, np.array(positions[50:]), np.array(efforts[50:]))
        model_mass, _ = kinematics.centre_of_mass(stand)
        mass = balanced_mass(legs.mean(axis=0), motors.mean(axis=0), model_mass, kinematics.gravity)
        assert mass == pytest.approx(world.total_mass(), rel=0.02)
        assert world.total_mass() == pytest.approx(16.08 * mass_scale, rel=0.01)  # not our URDF's 15.02
    finally:
        world.close()


def test_the_balance_takes_the_legs_mass_a_stand_fit_gives():
    """A robot whose legs are as the model's but whose trunk carries a payload: told the legs'
    mass, the balance finds the whole; assuming every link scaled alike it misses by the legs'
    share of the payload's scale."""
    from sim2real.sysid.weigh import balanced_mass

    gravity, model_mass = 9.81, 15.0
    legs = np.array([0.0, 0.0, -13.0])  # the legs' own part of the feet's force, model masses
    true_mass = 18.0  # the payload on the trunk
    motors = 1.0 * legs - np.array([0.0, 0.0, true_mass * gravity])  # legs at the model's mass
    assert balanced_mass(legs, motors, model_mass, gravity, leg_mass_scale=1.0) == pytest.approx(true_mass)
    # Uniformly scaled, the legs would be x1.18 too: s = (1.0 * 13 + 18 g) / (13 + 15 g), 17.76 kg.
    uniform = balanced_mass(legs, motors, model_mass, gravity)
    assert uniform == pytest.approx(model_mass * (13.0 + true_mass * gravity) / (13.0 + model_mass * gravity))
    assert abs(uniform - true_mass) > 0.2


def test_a_recording_standing_is_pointed_to_the_weighing():
    from sim2real.graph.sysid_recording import next_steps

    standing = next_steps("bags/go2_1", "go2", suspended=False)
    assert standing.startswith("next: sim2real sysid weigh bags/go2_1 --robot go2 --fit config/identified/go2.yaml")
    # its fit goes to another file: the stand fit the weighing uses stays
    assert "sim2real sysid fit bags/go2_1 --robot go2 -o config/identified/go2_standing.yaml" in standing
    hanging = next_steps("bags/go2_1", "go2", suspended=True)
    assert hanging == "next: sim2real sysid fit bags/go2_1 --robot go2 -o config/identified/go2.yaml"
    assert "weigh" not in next_steps("bags/arm", "panda", suspended=False)
