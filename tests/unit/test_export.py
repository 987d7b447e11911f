"""Export: one ONNX file, parity with torch, metadata round trip; load_policy refuses bad files."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch

from sim2real.cli.main import main
from sim2real.core.observation import ObservationSpec
from sim2real.core.policy_file import FORMAT_VERSION, REQUIRED_KEYS, PolicyFileError, load_policy
from sim2real.train import export as export_module
from sim2real.train.checkpoint import load_checkpoint
from sim2real.train.export import ExportError, build_actor, export_policy
from sim2real.train.runner import Trainer
from sim2real.train.train_config import load_train_config
from tests.unit.toy_env import TOY_TRAIN_CONFIG, ToyReach, make_toy_task, write_toy_randomization


@pytest.fixture(scope="module")
def checkpoint_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy_run")
    randomization = write_toy_randomization(folder / "toy_dr.yaml", 0.8, 1.2)
    config_path = folder / "toy_reach.yaml"
    config_path.write_text(TOY_TRAIN_CONFIG + f"randomization: {randomization}\n")
    config = load_train_config("toy", "reach", config_path)
    return Trainer(config, folder / "run", make_env=make_toy_task, progress=False).run().checkpoint


def test_export_writes_one_file_that_matches_torch(checkpoint_path, tmp_path):
    out = tmp_path / "policy.onnx"
    report = export_policy(checkpoint_path, out)
    assert report.max_abs_diff < 1e-5 and report.samples == 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx"]  # no .data sidecar, no leftovers
    model = onnx.load(str(out), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in model.graph.initializer)
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == report.opset >= 17
    (graph_input,) = model.graph.input
    dims = graph_input.type.tensor_type.shape.dim
    assert graph_input.name == "obs" and dims[0].dim_param and dims[1].dim_value == 2
    assert [o.name for o in model.graph.output] == ["actions"]

    actor = build_actor(load_checkpoint(checkpoint_path))
    policy = load_policy(out)
    obs = np.random.default_rng(1).normal(size=(64, 2)).astype(np.float32)
    with torch.no_grad():
        expected = actor(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(policy.act(obs), expected, atol=1e-5)
    np.testing.assert_allclose(policy.act(obs[0]), expected[0], atol=1e-5)


def test_metadata_round_trips_through_load_policy(checkpoint_path, tmp_path):
    out = tmp_path / "policy.onnx"
    export_policy(checkpoint_path, out)
    policy = load_policy(out)
    meta, env = policy.metadata, ToyReach()
    checkpoint = load_checkpoint(checkpoint_path)
    assert (meta.robot, meta.task, meta.format) == ("toy", "reach", FORMAT_VERSION)
    assert meta.joint_names == ("slider",)
    assert meta.observation_spec == env.observation_spec and meta.observation_size == 2
    np.testing.assert_allclose(meta.action_scale, [0.1])
    np.testing.assert_allclose(meta.action_offset, [0.0])
    assert meta.action_clip == 1.0 and meta.control_period == 0.02
    np.testing.assert_allclose(meta.kp, [10.0])
    np.testing.assert_allclose(meta.kd, [1.0])
    np.testing.assert_allclose(meta.default_joint_positions, [0.0])
    assert meta.task_config == env.task_config
    assert meta.training_config == checkpoint["training_config"]
    assert meta.randomization["parameters"]["motor_strength"]["uniform"] == [0.8, 1.2]
    assert meta.source_commit == checkpoint["source"]["commit"] and meta.source_dirty in ("true", "false", "unknown")
    assert "iteration 3" in meta.checkpoint and meta.export_time.endswith("+00:00")
    np.testing.assert_allclose(meta.joint_targets([5.0]), [0.1])  # clip to 1, then scale
    props = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert json.loads(props["sim2real.joint_names"]) == ["slider"]
    assert len(policy.sha256) == 64
    assert meta.mismatches("toy", ["slider"], 0.02) == []
    assert "trained for robot 'toy'" in meta.mismatches("go2", ["slider"], 0.02)[0]


def test_export_refuses_non_finite_weights(checkpoint_path, tmp_path):
    checkpoint = load_checkpoint(checkpoint_path)
    checkpoint["actor_state_dict"]["mlp.2.weight"][0, 0] = float("nan")
    broken = tmp_path / "model_nan.pt"
    torch.save(checkpoint, broken)
    with pytest.raises(ExportError, match=r"non-finite weights.*mlp\.2\.weight \(1 values\).*earlier checkpoint"):
        export_policy(broken, tmp_path / "policy.onnx")
    assert not (tmp_path / "policy.onnx").exists()


class _Drifting(torch.nn.Module):
    """Different output on every call: what tracing freezes, torch keeps changing."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, 0

    def forward(self, x):
        self.calls += 1
        return self.model(x) + 1e-3 * self.calls


def test_export_fails_loudly_when_onnxruntime_disagrees(checkpoint_path, tmp_path, monkeypatch):
    real = export_module.build_actor
    monkeypatch.setattr(export_module, "build_actor", lambda checkpoint: _Drifting(real(checkpoint)))
    with pytest.raises(ExportError, match=r"disagree on 1000 observations.*not written"):
        export_policy(checkpoint_path, tmp_path / "policy.onnx")
    assert list(tmp_path.iterdir()) == []


def _rewrite(source, target, edit):
    model = onnx.load(str(source))
    props = {p.key: p.value for p in model.metadata_props}
    edit(props)
    del model.metadata_props[:]
    for key, value in props.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(target))
    return target


def test_load_policy_refuses_bad_files_with_clear_messages(checkpoint_path, tmp_path):
    good = export_policy(checkpoint_path, tmp_path / "policy.onnx").path
    data = good.read_bytes()

    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(data[:100])  # cut inside the graph, the first large part of the file
    with pytest.raises(PolicyFileError, match=r"corrupt.onnx: not a valid ONNX model .*Fix: .*re-export"):
        load_policy(corrupt)
    # Cut between two metadata entries (the file's last part), it still parses as ONNX.
    for kept in (1, 3, len(REQUIRED_KEYS) - 1):
        cut = _rewrite(good, tmp_path / f"cut{kept}.onnx", lambda p, kept=kept: [p.pop(k) for k in list(p)[kept:]])
        with pytest.raises(
            PolicyFileError, match=r"cut\d+.onnx: missing metadata .*only part of its metadata.*copy it"
        ):
            load_policy(cut)
    with pytest.raises(PolicyFileError, match="cannot read the file"):
        load_policy(tmp_path / "missing.onnx")

    no_kp = _rewrite(good, tmp_path / "no_kp.onnx", lambda p: p.pop("sim2real.kp"))
    with pytest.raises(PolicyFileError, match=r"no_kp.onnx: missing metadata sim2real.kp\b") as edited:
        load_policy(no_kp)
    assert "cut short" not in str(edited.value)  # a key taken out, not a file cut short
    future = _rewrite(good, tmp_path / "future.onnx", lambda p: p.update({"sim2real.format": "sim2real.policy/2"}))
    with pytest.raises(
        PolicyFileError,
        match=r"'sim2real.policy/2' is not supported \(this code reads "
        r"'sim2real.policy/1'\)",
    ):
        load_policy(future)
    plain = _rewrite(good, tmp_path / "plain.onnx", lambda p: p.clear())
    with pytest.raises(PolicyFileError, match="not a sim2real policy file"):
        load_policy(plain)
    wrong_kp = _rewrite(good, tmp_path / "wrong_kp.onnx", lambda p: p.update({"sim2real.kp": "[1, 2]"}))
    with pytest.raises(PolicyFileError, match=r"sim2real.kp must be 1 finite numbers"):
        load_policy(wrong_kp)
    wrong_size = _rewrite(
        good,
        tmp_path / "wrong_size.onnx",
        lambda p: p.update(
            {
                "sim2real.observation_terms": ObservationSpec.from_config(
                    [{"name": "joint_pos"}, {"name": "joint_vel"}, {"name": "last_action"}], 1
                ).to_metadata(),
                "sim2real.observation_size": "3",
            }
        ),
    )
    with pytest.raises(PolicyFileError, match=r"input 'obs' has shape \['batch', 2\], metadata says \[batch, 3\]"):
        load_policy(wrong_size)

    split = tmp_path / "split" / "policy.onnx"
    split.parent.mkdir()
    onnx.save(
        onnx.load(str(good)), str(split), save_as_external_data=True, size_threshold=0, location="policy.onnx.data"
    )
    (split.parent / "policy.onnx.data").unlink()
    with pytest.raises(PolicyFileError, match=r"split/policy.onnx: weights are stored outside the file"):
        load_policy(split)


def test_cli_export(checkpoint_path, tmp_path, capsys):
    out = tmp_path / "cli.onnx"
    assert main(["export", str(checkpoint_path), "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["path"] == str(out) and result["parity_max_abs_diff"] < 1e-5 and result["iteration"] == 3
    assert main(["export", str(checkpoint_path.parent)]) == 0  # a run folder: its latest checkpoint
    assert (checkpoint_path.parent / "policy.onnx").is_file()
    assert main(["export", str(tmp_path / "nothing.pt")]) == 2
    assert "no such file" in capsys.readouterr().err
