"""Reward priors: the declarative schema and what it refuses, the shapes, the env's prior terms,
the annealed lambda in a training run, and `prior draft` against a local server speaking the
OpenAI chat-completions API (the one double here: there is no language model)."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import yaml

from sim2real.cli.main import main
from sim2real.train.prior import PriorError, PriorSchedule, PriorTerm, load_prior, parse_prior, task_signals

GENTLE = {
    "name": "gentle",
    "task": "go2_walk",
    "description": "walk gently",
    "terms": [
        {
            "name": "soft_touchdown",
            "signal": "touchdown_force",
            "shape": "above",
            "limit": 40.0,
            "scale": 20.0,
            "weight": -0.5,
        },
        {"name": "level_trunk", "signal": "trunk_tilt", "shape": "square", "scale": 0.1, "weight": -0.2},
    ],
}


def _with(**changes) -> dict:
    spec = json.loads(json.dumps(GENTLE))
    for key, value in changes.items():
        if key.startswith("term_"):
            spec["terms"][0][key[5:]] = value
        else:
            spec[key] = value
    return spec


def test_a_prior_parses_and_the_shipped_one_checks():
    spec = parse_prior(GENTLE)
    assert spec.signals == ("touchdown_force", "trunk_tilt") and spec.terms[0].limit == 40.0
    assert parse_prior(spec.to_dict()) == spec  # what `prior draft` writes reads back the same
    assert load_prior("go2_gentle", task="go2_walk").task == "go2_walk"
    assert set(task_signals("panda_reach")) >= {"ee_speed", "ee_reach", "joint_speed_near_limits"}


@pytest.mark.parametrize(
    "spec, field, problem",
    [
        (_with(term_signal="ground_truth_mass"), "terms[0].signal", "'ground_truth_mass' is not a signal of this task"),
        (_with(term_signal="__import__('os').system('rm -rf ~')"), "terms[0].signal", "is not a signal"),
        (_with(term_expression="__import__('os').system('ls')"), "terms[0].expression", "not a field of a term"),
        (_with(code="import os"), "code", "not a field of a prior"),
        (_with(term_weight="a lot"), "terms[0].weight", "expected a finite number, got 'a lot'"),
        (_with(term_weight=True), "terms[0].weight", "expected a finite number, got True"),
        (_with(term_weight=float("nan")), "terms[0].weight", "expected a finite number"),
        (_with(term_weight=0), "terms[0].weight", "0 adds nothing"),
        (_with(term_scale=-1.0), "terms[0].scale", "is not > 0"),
        (_with(term_shape="cubic"), "terms[0].shape", "'cubic' is not a shape"),
        (_with(term_name="Soft Touchdown"), "terms[0].name", "is not a name"),
        (_with(terms=[]), "terms", "at least one term"),
        (_with(task="spot_walk"), "task", "'spot_walk' is not a task"),
        (
            {**GENTLE, "terms": [{k: v for k, v in GENTLE["terms"][0].items() if k != "limit"}]},
            "terms[0].limit",
            "needs a limit",
        ),
        ({**GENTLE, "terms": [GENTLE["terms"][1], GENTLE["terms"][1]]}, "terms", "appear more than once"),
    ],
)
def test_the_schema_refuses_unknown_signals_bad_types_and_code(spec, field, problem):
    with pytest.raises(PriorError, match="Fix: ") as raised:
        parse_prior(spec)
    assert raised.value.field == field and problem in str(raised.value)


def test_a_file_that_would_build_an_object_is_refused(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("!!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(PriorError, match="not plain YAML data"):
        load_prior(path)
    path.write_text(yaml.safe_dump(GENTLE))
    with pytest.raises(PriorError, match="the prior is for 'go2_walk', the run trains 'panda_reach'"):
        load_prior(path, task="panda_reach")


def test_shapes():
    def term(shape, **kw):
        return PriorTerm("t", "trunk_tilt", shape, -1.0, **kw)

    assert term("value", scale=2.0)(3.0) == 1.5 and term("abs")(-2.0) == 2.0 and term("square")(-3.0) == 9.0
    assert term("gaussian", scale=2.0)(2.0) == pytest.approx(math.exp(-1.0))
    above, below = term("above", limit=40.0, scale=20.0), term("below", limit=0.2, scale=0.1)
    assert above(30.0) == 0.0 and above(80.0) == pytest.approx(4.0)
    assert below(0.3) == 0.0 and below(0.0) == pytest.approx(4.0)


def test_lambda_anneals_from_the_end_of_the_warm_up_and_holds():
    schedule = PriorSchedule(1.0, 0.0, 150, first_iteration=50)
    assert [schedule.at(i) for i in (0, 50, 100, 150, 400)] == [1.0, 1.0, 0.5, 0.0, 0.0]
    assert PriorSchedule(0.3).at(10_000) == 0.3


def test_the_env_adds_lambda_times_each_term_and_reports_it_beside_its_own_terms():
    from sim2real.train.tasks import make_env

    env = make_env("go2", "walk", seed=1)
    spec = parse_prior(GENTLE)
    env.set_prior(spec, 0.5)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    seen_prior = False
    for _ in range(60):
        _, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, 12))
        if terminated or truncated:
            env.reset()
        signals = env.prior_signals()
        terms = info["reward_terms"]
        for term in spec.terms:
            expected = 0.5 * term.weight * env.policy_period * term(signals[term.signal])
            assert terms[f"prior/{term.name}"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert reward == pytest.approx(math.fsum(terms.values()), abs=1e-9)
        seen_prior |= terms["prior/soft_touchdown"] < 0.0
    assert seen_prior  # random actions stomp
    env.set_prior_scale(0.0)  # the terms stay in the report, at 0: every episode has the same keys
    _, _, _, _, info = env.step(np.zeros(12))
    assert {k: v for k, v in info["reward_terms"].items() if k.startswith("prior/")} == {
        "prior/soft_touchdown": 0.0,
        "prior/level_trunk": 0.0,
    }
    env.close()


def test_the_arm_computes_its_signals():
    from sim2real.train.tasks import make_env

    env = make_env("panda", "reach", seed=0)
    env.reset(seed=0)
    env.step(np.full(7, 0.5))
    signals = env.prior_signals()
    assert set(signals) == set(task_signals("panda_reach"))
    assert signals["ee_speed"] > 0.0 and 0.0 < signals["ee_reach"] < 1.0 and signals["goal_distance"] > 0.0
    env.close()


def test_a_training_run_anneals_lambda_and_logs_each_prior_term(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from sim2real.train.checkpoint import load_checkpoint
    from sim2real.train.runner import Trainer
    from sim2real.train.train_config import load_train_config, override_config

    prior = tmp_path / "gentle.yaml"
    prior.write_text(yaml.safe_dump(GENTLE))
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        "iterations: 3\nnum_envs: 2\nnum_steps_per_env: 8\nsave_interval: 3\nworkers: 1\n"
        "task_config: {episode_length: 0.1}\n"
        "policy: {actor_hidden_dims: [16], critic_hidden_dims: [16]}\n"
        f"prior: {{spec: {prior}, lambda: 1.0, lambda_final: 0.0, lambda_final_iteration: 2}}\n"
    )
    result = Trainer(load_train_config("go2", "walk", config_file), tmp_path / "run", progress=False).run()
    # The run keeps the prior's terms inline: a resume or retrain elsewhere needs no file.
    prior.unlink()
    saved = load_checkpoint(result.checkpoint)["training_config"]
    assert saved["prior"]["spec"] == parse_prior(GENTLE).to_dict()
    assert override_config(saved, {"iterations": 4})["prior"]["spec"]["name"] == "gentle"  # a resume's config
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0}).Reload()
    assert [e.value for e in events.Scalars("Prior/lambda")] == [1.0, 0.5, 0.0]
    tags = events.Tags()["scalars"]
    assert {"Reward/prior/soft_touchdown", "Reward/prior/level_trunk", "Reward/tracking_lin_vel"} <= set(tags)
    level = [e.value for e in events.Scalars("Reward/prior/level_trunk")]
    # lambda 0 in the last iteration: only the steps its episodes took before it carry a prior
    assert level[0] < 0.0 and abs(level[-1]) < abs(level[0]) / 5


def test_a_lambda_line_that_ends_before_it_starts_is_refused(tmp_path):
    """A run with a critic warm-up whose lambda line ends inside it would start at lambda's final
    value, warm-up included; a line that ended before the run began (a retrain of an annealed
    run) holds its final value instead."""
    from sim2real.train.runner import Trainer, TrainingError
    from sim2real.train.train_config import load_train_config

    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        "iterations: 2\nnum_envs: 2\nnum_steps_per_env: 8\ncritic_warmup: {iterations: 1}\n"
        "policy: {actor_hidden_dims: [16], critic_hidden_dims: [16]}\n"
        "prior: {spec: go2_gentle, lambda: 1.0, lambda_final: 0.0, lambda_final_iteration: 1}\n"
    )
    with pytest.raises(
        TrainingError, match="prior.lambda_final_iteration is 1, but the prior's lambda line starts at iteration 1"
    ):
        Trainer(load_train_config("go2", "walk", config_file), tmp_path / "run", progress=False).run()
    assert PriorSchedule(1.0, 0.0, 2250, first_iteration=2300).at(2300) == 0.0  # a retrain from 2250: held


def test_a_training_config_with_a_bad_prior_is_refused_before_the_run(tmp_path):
    from sim2real.train.train_config import TrainConfigError, load_train_config

    config_file = tmp_path / "config.yaml"
    config_file.write_text("prior: {spec: go2_gentle, lambda: 1.0}\n")
    with pytest.raises(
        TrainConfigError, match="prior.spec: .*the prior is for 'go2_walk', the run trains 'panda_reach'"
    ):
        load_train_config("panda", "reach", config_file)
    config_file.write_text("prior: {spec: go2_gentle, lambda_final: 0.0}\n")
    with pytest.raises(TrainConfigError, match="lambda_final and lambda_final_iteration go together"):
        load_train_config("go2", "walk", config_file)
    assert load_train_config("go2", "walk")["prior"]["spec"] is None


# -- prior draft against a local OpenAI-compatible server --------------------------------------


class _ChatServer:
    """Answers POST /v1/chat/completions with canned assistant messages, in order, as an
    OpenAI-compatible server does; records each request's body."""

    def __init__(self, answers: list[str]):
        self.answers, self.requests = list(answers), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                if self.path != "/v1/chat/completions":
                    self.send_error(404, "no such route")
                    return
                reply = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": 1764900000,
                    "model": body.get("model", "local"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": outer.answers.pop(0)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _fenced(spec: dict) -> str:
    return "Here is a prior:\n```yaml\n" + yaml.safe_dump(spec, sort_keys=False) + "```\nReview it."


def test_draft_writes_a_valid_prior_from_the_models_answer(tmp_path, capsys):
    answer = {k: v for k, v in GENTLE.items() if k not in ("name", "task")}  # the model left them out
    out = tmp_path / "my_gentle.yaml"
    with _ChatServer([_fenced(answer)]) as server:
        code = main(
            [
                "prior",
                "draft",
                "walk gently, do not stomp",
                "--task",
                "go2_walk",
                "--endpoint",
                server.endpoint,
                "-o",
                str(out),
            ]
        )
    assert code == 0
    spec = load_prior(out, task="go2_walk")
    assert spec.name == "my_gentle" and [t.name for t in spec.terms] == ["soft_touchdown", "level_trunk"]
    assert "Drafted by a language model" in out.read_text() and "sim2real prior check" in capsys.readouterr().out
    request = server.requests[0]["body"]
    system, user = request["messages"]
    assert user == {"role": "user", "content": "walk gently, do not stomp"}
    assert "touchdown_force" in system["content"] and "task: go2_walk" in system["content"]


def test_draft_refuses_an_invalid_answer_with_the_reason_and_writes_nothing(tmp_path, capsys):
    bad = _fenced(_with(term_signal="stomp_meter"))
    out = tmp_path / "p.yaml"
    with _ChatServer([bad]) as server:
        code = main(
            [
                "prior",
                "draft",
                "no stomping",
                "--task",
                "go2_walk",
                "--endpoint",
                server.endpoint,
                "--attempts",
                "1",
                "-o",
                str(out),
            ]
        )
    assert code == 1 and not out.exists()
    assert "'stomp_meter' is not a signal of this task" in capsys.readouterr().err


def test_draft_sends_a_refused_answer_back_with_the_reason(tmp_path):
    out = tmp_path / "p.yaml"
    with _ChatServer(["import os; os.system('ls')", _fenced(GENTLE)]) as server:
        assert (
            main(["prior", "draft", "gentle", "--task", "go2_walk", "--endpoint", server.endpoint, "-o", str(out)]) == 0
        )
    retry = server.requests[1]["body"]["messages"]
    assert retry[2] == {"role": "assistant", "content": "import os; os.system('ls')"}
    assert retry[3]["content"].startswith("That prior was refused: the answer: (file): expected a mapping")
    assert load_prior(out).name == "gentle"


def test_draft_without_an_endpoint_explains_how_to_run_one(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SIM2REAL_PRIOR_ENDPOINT", raising=False)
    assert main(["prior", "draft", "gentle", "--task", "go2_walk", "-o", str(tmp_path / "p.yaml")]) == 2
    err = capsys.readouterr().err
    assert (
        "llama-server -m MODEL.gguf" in err
        and "ollama serve" in err
        and "sim2real prior signals --task go2_walk" in err
    )
    with _ChatServer([]) as server:
        dead = server.endpoint
    assert (
        main(["prior", "draft", "gentle", "--task", "go2_walk", "--endpoint", dead, "-o", str(tmp_path / "p.yaml")])
        == 1
    )
    assert "cannot reach" in capsys.readouterr().err


def test_draft_refuses_an_endpoint_that_is_not_http_and_names_the_prior_after_its_file(tmp_path, capsys):
    assert (
        main(
            [
                "prior",
                "draft",
                "x",
                "--task",
                "go2_walk",
                "--endpoint",
                "file:///etc/passwd",
                "-o",
                str(tmp_path / "p.yaml"),
            ]
        )
        == 2
    )
    assert "give an http:// or https:// URL" in capsys.readouterr().err
    out = tmp_path / "2026-Gentle walk.yaml"
    with _ChatServer([_fenced({k: v for k, v in GENTLE.items() if k != "name"})]) as server:
        assert main(["prior", "draft", "x", "--task", "go2_walk", "--endpoint", server.endpoint, "-o", str(out)]) == 0
    assert load_prior(out).name == "prior_2026_gentle_walk"


def test_check_and_signals_commands(capsys):
    assert main(["prior", "check", "go2_gentle"]) == 0
    assert "soft_touchdown: -0.5/s x above(touchdown_force past 40, scale 20)" in capsys.readouterr().out
    assert main(["prior", "signals", "--task", "panda_reach"]) == 0
    assert "ee_reach" in capsys.readouterr().out
    assert main(["prior", "check", "go2_gentle", "--task", "panda_reach"]) == 2
