"""A reward prior drafted by a language model (``sim2real prior draft``), for a person to review.

The model is asked, through an OpenAI-compatible chat-completions API (a local llama.cpp
``llama-server`` or Ollama on the user's machine), for a prior in the declarative schema of
:mod:`sim2real.train.prior`, told the task's signals and their units. Its answer is read as
plain YAML data and checked like any prior file; a refused answer is sent back once more with
the reason (``attempts``), and if it is still refused nothing is written. The model never runs
during training: what it drafts is a file a person reads before naming it in a training config.
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sim2real.core.errors import InputError, Sim2RealError
from sim2real.train.prior import (
    LIMITED,
    SHAPES,
    PriorError,
    PriorSpec,
    parse_prior,
    read_yaml_data,
    task_signals,
    write_prior,
)

ENDPOINT_ENV = "SIM2REAL_PRIOR_ENDPOINT"
LOOPBACK = ("localhost", "127.0.0.1", "::1")
MAX_ANSWER_BYTES = 1_000_000
NO_ENDPOINT = (
    "no language-model endpoint: give --endpoint URL (or set {env}). `prior draft` asks an "
    "OpenAI-compatible chat API; run one on this machine, e.g.\n"
    "  llama.cpp:  llama-server -m MODEL.gguf --port 8080              then --endpoint http://localhost:8080/v1\n"
    "  Ollama:     ollama serve & ollama pull qwen2.5:7b                then --endpoint http://localhost:11434/v1 "
    "--model qwen2.5:7b\n"
    "or write the prior by hand: `sim2real prior signals --task {task}` lists what it may read "
    "(docs/train.md#reward-priors)"
)
_FENCE = re.compile(r"```(?:ya?ml)?\s*\n(.*?)```", re.DOTALL)


class DraftError(Sim2RealError):
    """The endpoint could not be asked, or its answers were refused; says why."""


class NoEndpointError(InputError):
    pass


@dataclass(frozen=True)
class Draft:
    spec: PriorSpec
    answers: list[str]  # every answer the model gave, the accepted one last


def system_prompt(task: str) -> str:
    signals = "\n".join(f"  {name}: {meaning}" for name, meaning in task_signals(task).items())
    shapes = "\n".join(f"  {name}: {meaning}" for name, meaning in SHAPES.items())
    return (
        "You write reward-shaping priors for a robot learning task, as YAML in this exact schema:\n"
        "name: lower_case_name\n"
        f"task: {task}\n"
        "description: one line, what the prior asks of the robot\n"
        "terms:\n"
        "  - name: lower_case_name\n"
        "    signal: one of the signals below\n"
        "    shape: one of the shapes below\n"
        f"    limit: a number in the signal's unit (only for {' and '.join(LIMITED)})\n"
        "    scale: a positive number; the signal (minus the limit) is divided by it, so the term is about 1\n"
        "    weight: a number per second; negative for a penalty (the task's own terms weigh 0.1 to 2)\n"
        "    why: one line\n"
        f"Signals of task {task} (name: meaning, unit):\n{signals}\n"
        f"Shapes (u = value / scale, or (value - limit) / scale for the limited ones):\n{shapes}\n"
        "Use one to four terms. Use only the fields, signals and shapes above; nothing else is read. "
        "Answer with the YAML alone, in one ```yaml block."
    )


def extract_yaml(answer: str) -> str:
    """The first fenced YAML block of an answer, else the whole answer."""
    match = _FENCE.search(answer)
    return match.group(1) if match else answer


def checked_answer(answer: str, task: str, name: str) -> PriorSpec:
    """The prior in a model's answer, checked; PriorError says what is wrong. A missing name or
    task is filled in (the request named them)."""
    data = read_yaml_data(extract_yaml(answer), "the answer")
    if isinstance(data, dict):
        data.setdefault("task", task)
        data.setdefault("name", name)
    return parse_prior(data, "the answer", task=task)


def chat_url(endpoint: str) -> str:
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/chat/completions") else f"{endpoint}/chat/completions"


def _opener(url: str) -> urllib.request.OpenerDirector:
    """http(s) only; a server on this machine is asked directly, never through a proxy the
    environment names (the prompt stays on the machine)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--endpoint {url!r}: give an http:// or https:// URL, e.g. http://localhost:8080/v1")
    if parts.hostname in LOOPBACK:
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def ask(endpoint: str, messages: list[dict], model: str, api_key: str | None, timeout: float) -> str:
    """One chat completion's text."""
    body = json.dumps({"model": model, "messages": messages, "temperature": 0.2, "stream": False}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    url = chat_url(endpoint)
    opener = _opener(url)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = response.read(MAX_ANSWER_BYTES + 1)
        if len(raw) > MAX_ANSWER_BYTES:
            raise DraftError(f"{url} answered more than {MAX_ANSWER_BYTES // 1000} kB: not a prior")
        reply = json.loads(raw.decode())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise DraftError(
            f"{chat_url(endpoint)} answered HTTP {exc.code} ({detail.strip() or exc.reason}); check the "
            "endpoint's path (it ends in /v1 for llama-server and Ollama) and --model"
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DraftError(
            f"cannot reach {url} ({reason}): is the model server running, and is that its address?"
        ) from None
    except http.client.HTTPException as exc:
        raise DraftError(
            f"{url} did not answer HTTP ({type(exc).__name__}): is that the model server's port?"
        ) from None
    except ValueError:  # JSON or UTF-8 that does not decode
        raise DraftError(f"{url} did not answer JSON: is it an OpenAI-compatible API?") from None
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise DraftError(
            f"{chat_url(endpoint)} answered without choices[0].message.content: is it an OpenAI-compatible "
            "chat-completions API?"
        ) from None
    if not isinstance(content, str):
        raise DraftError(f"{chat_url(endpoint)} answered a message whose content is not text")
    return content


def draft(
    text: str,
    task: str,
    endpoint: str | None,
    name: str,
    model: str = "local",
    attempts: int = 2,
    api_key: str | None = None,
    timeout: float = 120.0,
) -> Draft:
    """Ask the model for a prior that does what ``text`` says; a refused answer goes back with its
    reason while attempts last. DraftError when none is accepted (each answer's reason said)."""
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV)
    if not endpoint:
        raise NoEndpointError(NO_ENDPOINT.format(env=ENDPOINT_ENV, task=task))
    messages = [{"role": "system", "content": system_prompt(task)}, {"role": "user", "content": text}]
    answers, reasons = [], []
    for _ in range(max(1, attempts)):
        answer = ask(endpoint, messages, model, api_key, timeout)
        answers.append(answer)
        try:
            return Draft(checked_answer(answer, task, name), answers)
        except PriorError as exc:
            reasons.append(str(exc))
            messages += [
                {"role": "assistant", "content": answer},
                {
                    "role": "user",
                    "content": f"That prior was refused: {exc}\nAnswer again with the corrected YAML alone.",
                },
            ]
    raise DraftError(
        f"the model's {len(answers)} answer(s) were refused, nothing was written:\n"
        + "\n".join(f"  answer {i + 1}: {reason}" for i, reason in enumerate(reasons))
    )


def write_draft(result: Draft, out: str | Path, text: str, endpoint: str, model: str) -> Path:
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    header = (
        f"# Drafted by a language model ({model} at {endpoint}, {when}) from:\n"
        f"#   {json.dumps(text)}\n"
        "# Review every term before training on it: sim2real prior check THIS_FILE, then name it\n"
        "# in a training config's prior.spec (docs/train.md#reward-priors).\n"
    )
    return write_prior(result.spec, out, header)
