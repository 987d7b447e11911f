"""`sim2real prior signals|check|draft`: reward priors (``r_total = r_env + lambda * r_prior``)."""

from __future__ import annotations

import argparse
import os
import re
import sys

EXAMPLES = (
    "examples:\n"
    "  sim2real prior signals --task go2_walk\n"
    "  sim2real prior check config/priors/go2_gentle.yaml\n"
    '  sim2real prior draft "walk gently, do not stomp" --task go2_walk --endpoint http://localhost:8080/v1 '
    "-o config/priors/my_gentle.yaml\n"
    "then, in a training config:\n"
    "  prior: {spec: config/priors/my_gentle.yaml, lambda: 1.0, lambda_final: 0.0, lambda_final_iteration: 2000}\n"
)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a count of at least 1")
    return value


def cmd_signals(args: argparse.Namespace) -> int:
    from sim2real.train.prior import SHAPES, PriorError, task_signals

    try:
        signals = task_signals(args.task)
    except PriorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"signals of {args.task} (a prior's terms read these):")
    for name, meaning in signals.items():
        print(f"  {name:26s} {meaning}")
    print("shapes:")
    for name, meaning in SHAPES.items():
        print(f"  {name:26s} {meaning}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from sim2real.train.prior import LIMITED, PriorError, load_prior

    try:
        spec = load_prior(args.prior, task=args.task)
    except PriorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{spec.name} ({spec.task}): {spec.description or 'no description'}")
    for term in spec.terms:
        past = f" past {term.limit:g}" if term.shape in LIMITED else ""
        print(f"  {term.name}: {term.weight:g}/s x {term.shape}({term.signal}{past}, scale {term.scale:g})")
    print("ok: train on it with prior.spec in a training config (docs/train.md#reward-priors)")
    return 0


def cmd_draft(args: argparse.Namespace) -> int:
    from sim2real.core.errors import InputError
    from sim2real.train.prior_draft import ENDPOINT_ENV, DraftError, draft, write_draft

    endpoint = args.endpoint or os.environ.get(ENDPOINT_ENV)
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    stem = re.sub(r"[^a-z0-9_]+", "_", os.path.splitext(os.path.basename(args.output))[0].lower()).strip("_")
    name = (stem if stem[:1].isalpha() else f"prior_{stem}")[:40].rstrip("_")
    try:
        result = draft(
            args.text, args.task, endpoint, name, args.model, args.attempts, api_key=api_key, timeout=args.timeout
        )
    except InputError as exc:  # no endpoint, a URL that is not http(s), a bad prior
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DraftError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        path = write_draft(result, args.output, args.text, endpoint, args.model)
    except OSError as exc:
        print(f"error: cannot write {args.output} ({exc.strerror}): choose a writable path", file=sys.stderr)
        return 1
    print(f"wrote {path} ({len(result.spec.terms)} terms, answer {len(result.answers)} of {args.attempts} accepted)")
    print(f"review it before training on it: sim2real prior check {path}")
    return 0


def add_parser(sub, formatter) -> None:
    prior = sub.add_parser(
        "prior",
        formatter_class=formatter,
        help="reward priors: shaping terms from prior knowledge (r_env + lambda * r_prior)",
        description="A prior is a small declarative YAML of reward terms over signals the task's env already\n"
        "computes (a foot's touchdown force, the trunk's tilt, a joint's speed near its limits, ...).\n"
        "A training config names it (prior.spec) and anneals its weight lambda; each term is logged\n"
        "to TensorBoard as Reward/prior/<name> beside the task's own terms. Nothing in a prior runs as\n"
        "code: fields, shapes and signals are checked against a fixed schema.",
        epilog=EXAMPLES,
    )
    actions = prior.add_subparsers(dest="prior_command", required=True, metavar="ACTION")

    signals = actions.add_parser(
        "signals",
        formatter_class=formatter,
        help="the signals and shapes a task's priors may use",
        description="List the signals a task's env computes for priors (name, meaning, unit) and the shapes.",
        epilog=EXAMPLES,
    )
    signals.add_argument("--task", required=True, help="<robot>_<task>, e.g. go2_walk or panda_reach")
    signals.set_defaults(func=cmd_signals)

    check = actions.add_parser(
        "check",
        formatter_class=formatter,
        help="check a prior file against the schema and its task's signals",
        description="Read a prior and check every field, shape and signal; print its terms.",
        epilog=EXAMPLES,
    )
    check.add_argument("prior", metavar="PRIOR", help="a prior YAML, or a name in config/priors/")
    check.add_argument("--task", help="the task it must be for (default: the one it names)")
    check.set_defaults(func=cmd_check)

    draft = actions.add_parser(
        "draft",
        formatter_class=formatter,
        help="ask a local language model to draft a prior from a sentence, for you to review",
        description="Ask an OpenAI-compatible chat API (a llama.cpp llama-server or Ollama on your machine) for a\n"
        "prior that does what TEXT says, told the task's signals; check the answer like any prior\n"
        "file (a refused answer goes back once with the reason, --attempts), and write it to OUTPUT\n"
        "for you to read. The model is asked here only, never during training.",
        epilog=EXAMPLES + "the endpoint may also come from the environment variable SIM2REAL_PRIOR_ENDPOINT\n",
    )
    draft.add_argument("text", metavar="TEXT", help='what the prior should ask, e.g. "walk gently, do not stomp"')
    draft.add_argument("--task", required=True, help="<robot>_<task> whose signals it reads, e.g. go2_walk")
    draft.add_argument("-o", "--output", required=True, help="prior YAML to write")
    draft.add_argument(
        "--endpoint",
        help="base URL of an OpenAI-compatible API, e.g. http://localhost:8080/v1 (llama-server) or "
        "http://localhost:11434/v1 (Ollama)",
    )
    draft.add_argument("--model", default="local", help="model name the server knows (Ollama needs it)")
    draft.add_argument("--attempts", type=_positive, default=2, help="answers to ask for before giving up")
    draft.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each answer")
    draft.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding a bearer token, if the server wants one"
    )
    draft.set_defaults(func=cmd_draft)
