"""Which policies may run: signatures against trusted keys, the file size limit, the policy
directories, the action guard, the trained command ranges and the audit log."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sim2real.cli.main import main
from sim2real.core.observation import RobotSignals
from sim2real.core.paths import share_dir
from sim2real.core.policy_audit import AuditLog, read_history
from sim2real.core.policy_file import load_policy
from sim2real.core.policy_signing import SignatureError, TrustedKeys, generate_key, sign_policy, signature_path
from sim2real.core.policy_slot import PolicyRefused, PolicySlot, RunningPolicy
from tests.policy_models import write_target_policy
from tests.unit.test_policy_slot import GO2, running_slot

SHIPPED_GO2 = share_dir() / "policies" / "go2_walk.onnx"


@pytest.fixture
def keys(tmp_path):
    """A release key the robot trusts and a stranger's key it does not."""
    trusted, other = tmp_path / "trusted_keys", tmp_path / "elsewhere"
    release_key, _ = generate_key("lab-release", trusted)
    stranger_key, _ = generate_key("stranger", other)
    release_key.rename(tmp_path / "lab-release.key")  # the private key never sits on the robot
    return {"trusted": trusted, "release": tmp_path / "lab-release.key", "stranger": stranger_key}


@pytest.fixture
def policy_dir(tmp_path):
    root = tmp_path / "policies"
    d = GO2.default_positions
    write_target_policy(root / "stand.onnx", GO2, d)
    write_target_policy(root / "lean.onnx", GO2, d + 0.2)
    return root


# -- signatures ------------------------------------------------------------------------------------
def test_a_signed_policy_verifies_and_names_its_signer(keys, policy_dir, capsys):
    policy = policy_dir / "stand.onnx"
    assert main(["policy", "sign", str(policy), "--key", str(keys["release"])]) == 0
    assert signature_path(policy).is_file()
    assert main(["policy", "verify", str(policy), "--trusted-keys", str(keys["trusted"]), "--json"]) == 0
    verdict = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert verdict["verified"] and verdict["signer"] == "lab-release"


def test_one_changed_byte_breaks_the_signature(keys, policy_dir):
    policy = policy_dir / "stand.onnx"
    sign_policy(policy, keys["release"])
    data = bytearray(policy.read_bytes())
    data[len(data) // 2] ^= 0x01
    policy.write_bytes(bytes(data))
    with pytest.raises(SignatureError, match="changed after it was signed"):
        TrustedKeys(keys["trusted"]).verify(policy, policy.read_bytes())
    assert main(["policy", "verify", str(policy), "--trusted-keys", str(keys["trusted"])]) == 1


def test_a_signature_by_an_untrusted_key_is_refused(keys, policy_dir):
    policy = policy_dir / "stand.onnx"
    sign_policy(policy, keys["stranger"])
    with pytest.raises(SignatureError, match="not among the trusted keys \\['lab-release'\\]"):
        TrustedKeys(keys["trusted"]).verify(policy, policy.read_bytes())


def test_an_unsigned_policy_runs_without_trusted_keys_and_is_refused_with_them(keys, policy_dir):
    policy = policy_dir / "stand.onnx"
    assert PolicySlot(GO2, [policy_dir]).start(policy).signer is None
    with pytest.raises(PolicyRefused, match="is not signed.*sim2real policy sign"):
        PolicySlot(GO2, [policy_dir], trusted_keys=TrustedKeys(keys["trusted"])).start(policy)


def test_a_tampered_swap_is_refused_and_the_signed_policy_runs_on(keys, policy_dir):
    for name in ("stand", "lean"):
        sign_policy(policy_dir / f"{name}.onnx", keys["release"])
    slot, inputs, runtime = running_slot(
        policy_dir, policy_dir / "stand.onnx", trusted_keys=TrustedKeys(keys["trusted"])
    )
    assert slot.active.policy.signer.signer == "lab-release"
    lean = policy_dir / "lean.onnx"
    data = bytearray(lean.read_bytes())
    data[-10] ^= 0xFF
    lean.write_bytes(bytes(data))
    event = slot.propose(lean)
    assert not event.accepted and "changed after it was signed" in event.reason
    assert slot.active.policy.path.name == "stand.onnx"
    write_target_policy(lean, GO2, GO2.default_positions + 0.2)  # the intended file, signed: accepted
    sign_policy(lean, keys["release"])
    event = slot.propose(lean)
    assert event.accepted and event.signer == "lab-release", event.reason


def test_a_corrupt_metadata_byte_is_a_clear_refusal(policy_dir):
    """onnxruntime raises UnicodeDecodeError reading the metadata of such a file: uncaught, it
    would end the swap's loader instead of refusing the file."""
    lean = policy_dir / "lean.onnx"
    data = bytearray(lean.read_bytes())
    data[-10] ^= 0xFF
    lean.write_bytes(bytes(data))
    slot, _, _ = running_slot(policy_dir, policy_dir / "stand.onnx")
    event = slot.propose(lean)
    assert not event.accepted and "re-export" in event.reason, event.reason


def test_trusted_keys_must_hold_a_key(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SignatureError, match="holds no .pub key"):
        TrustedKeys(tmp_path / "empty")


# -- case 16: size; case 17: only the configured directories -----------------------------------
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(policy_dir):
    huge = policy_dir / "huge.onnx"
    with open(huge, "wb") as out:
        out.truncate(500_000_000)  # sparse: 500 MB on paper, nothing on disk
    slot, _, _ = running_slot(policy_dir, policy_dir / "stand.onnx", max_bytes=50_000_000)
    event = slot.propose(huge)
    # The size in the reason comes from the file's stat, before any read (a bounded read that
    # stops past the limit cannot know the size).
    assert not event.accepted and "500.0 MB is larger than the 50.0 MB allowed" in event.reason


def test_the_starting_file_is_allowed_but_not_its_folder(tmp_path, policy_dir):
    shared = tmp_path / "shared_tmp"
    start = write_target_policy(shared / "start.onnx", GO2, GO2.default_positions)
    write_target_policy(shared / "planted.onnx", GO2, GO2.default_positions + 0.1)
    slot, _, _ = running_slot(policy_dir, start)
    event = slot.propose(shared / "planted.onnx")
    assert not event.accepted and "outside the policy directories" in event.reason
    assert slot.propose(start).accepted  # the operator's own file, swapped back onto itself


# -- case 15: the action guard ---------------------------------------------------------------------
def test_targets_past_the_joint_limits_are_withheld_and_a_candidate_doing_so_is_refused(policy_dir):
    beyond = GO2.default_positions.copy()
    beyond[2] = GO2.lower_limits[2] - 1.0  # a calf target a full radian past its limit
    write_target_policy(policy_dir / "thrown.onnx", GO2, beyond)
    slot, inputs, runtime = running_slot(policy_dir, policy_dir / "stand.onnx")
    event = slot.propose(policy_dir / "thrown.onnx")
    assert not event.accepted and "past its limit" in event.reason and "FL_calf_joint" in event.reason

    slot, inputs, runtime = running_slot(policy_dir, policy_dir / "thrown.onnx", ticks=0)
    from tests.unit.test_policy_slot import feed

    stamp = feed(inputs, 0)
    tick = runtime.tick(stamp * 1e-9, stamp)
    assert np.all(np.isnan(tick.targets)), "the supervisor must see a fault and hold"
    assert slot.guard_trips == 1 and "FL_calf_joint" in slot.guard_reason and "1.00 rad past" in slot.guard_reason


# -- case 7: commands clamped to the policy's trained ranges ----------------------------------------
def test_a_command_beyond_the_trained_ranges_is_clamped_for_the_policy():
    running = RunningPolicy(load_policy(SHIPPED_GO2))
    signals = RobotSignals(velocity_command=np.array([100.0, -5.0, 0.2]))
    clamped, note = running.ranges.clamp(signals)
    np.testing.assert_allclose(clamped.velocity_command, [1.0, -0.3, 0.2])
    assert "vx 100 -> 1 (trained [-0.5, 1])" in note and "vy -5 -> -0.3" in note
    inside = RobotSignals(velocity_command=np.array([0.5, 0.0, 0.0]))
    assert running.ranges.clamp(inside) == (inside, "")


def test_the_running_policy_sees_the_clamped_command(policy_dir, tmp_path):
    slot, inputs, runtime = running_slot(SHIPPED_GO2.parent, SHIPPED_GO2, ticks=0)
    from tests.unit.test_policy_slot import feed

    for tick in range(3):
        stamp = feed(inputs, tick)
        inputs.set_velocity_command(100.0, 0.0, 0.0, now=stamp * 1e-9)
        assert np.all(np.isfinite(runtime.tick(stamp * 1e-9, stamp).targets))
    assert slot.commands_clamped == 3 and "vx 100 -> 1" in slot.last_clamp


# -- the audit log -------------------------------------------------------------------------------
def test_the_audit_log_keeps_every_record_and_names_a_damaged_line(tmp_path, capsys):
    log = AuditLog(tmp_path / "state" / "policy_audit.jsonl")
    log.record(
        robot="go2", file="a.onnx", sha256="ab" * 32, signer="lab-release", origin="start", accepted=True, reason=""
    )
    with open(log.path, "a") as out:
        out.write('{"time": "2026-12-02T08:00:00", "file": "cut sh')  # a crash mid-line
    log.record(
        robot="go2",
        file="b.onnx",
        sha256="",
        signer=None,
        origin="cli (op@robot, pid 7)",
        accepted=False,
        reason="b.onnx is not signed",
    )
    history = read_history(log.path)
    assert len(log.path.read_text().splitlines()) == 3, "one line per record, the cut one alone"
    assert [e["file"] for e in history.entries] == ["a.onnx", "b.onnx"] and history.damaged_lines == [2]
    assert main(["policy", "history", "--log", str(log.path)]) == 0
    out = capsys.readouterr().out
    assert "accepted  start  a.onnx" in out and "REFUSED   cli (op@robot, pid 7)  b.onnx" in out
    assert "is not signed" in out and "lines [2] are not records" in out
    assert main(["policy", "history", "--log", str(tmp_path / "none.jsonl")]) == 1


def test_sign_names_a_missing_file_and_a_bad_key(tmp_path, keys, capsys):
    assert main(["policy", "sign", str(tmp_path / "missing.onnx"), "--key", str(keys["release"])]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "bad.key").write_text("not a key")
    write_target_policy(tmp_path / "p.onnx", GO2, GO2.default_positions)
    assert main(["policy", "sign", str(tmp_path / "p.onnx"), "--key", str(tmp_path / "bad.key")]) == 2
    assert "sim2real policy keygen" in capsys.readouterr().err


def test_keygen_never_overwrites_a_key(tmp_path):
    generate_key("k", tmp_path)
    with pytest.raises(SignatureError, match="exists"):
        generate_key("k", tmp_path)
    assert math.isclose((tmp_path / "k.key").stat().st_mode & 0o777, 0o600)


def test_a_withheld_tick_is_not_fed_back_as_last_action(policy_dir):
    beyond = GO2.default_positions.copy()
    beyond[2] = GO2.lower_limits[2] - 1.0
    write_target_policy(policy_dir / "thrown.onnx", GO2, beyond)
    slot, inputs, runtime = running_slot(policy_dir, policy_dir / "thrown.onnx", ticks=0)
    from tests.unit.test_policy_slot import feed

    before = slot.active.last_action.copy()
    stamp = feed(inputs, 0)
    assert np.all(np.isnan(runtime.tick(stamp * 1e-9, stamp).targets))
    np.testing.assert_array_equal(slot.active.last_action, before)


def test_a_swap_that_cannot_be_recorded_is_refused(policy_dir):
    slot, _, _ = running_slot(policy_dir, policy_dir / "stand.onnx")
    blocked = policy_dir.parent / "a_file"
    blocked.write_text("a file where the audit log's folder should be")
    log = AuditLog(blocked / "state" / "policy_audit.jsonl")

    def record(event):
        log.record(
            robot="go2",
            file=str(event.path),
            sha256=event.sha256_new,
            signer=event.signer,
            origin="test",
            accepted=True,
            reason="",
        )

    event = slot.propose(policy_dir / "lean.onnx", record)
    assert not event.accepted and "could not be recorded" in event.reason
    assert slot.active.policy.path.name == "stand.onnx"
