"""`sim2real policy keygen | sign | verify | history`: who may put a policy on the robot, and
who did.

    sim2real policy keygen lab-release --dir ~/.sim2real/keys   # lab-release.key (keep it off the robot) + .pub
    sim2real policy sign runs/walk/policy.onnx --key ~/.sim2real/keys/lab-release.key
    sim2real policy verify runs/walk/policy.onnx --trusted-keys /etc/sim2real/trusted_keys
    sim2real policy history                                     # every start and swap on this machine

On the robot, copy the ``.pub`` files into a folder and start with
``trusted_keys:=/that/folder`` (``sim2real up --trusted-keys``): the runtime then runs only
files whose ``.sig`` verifies against one of them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sim2real.core.policy_audit import default_audit_log, format_history, read_history
from sim2real.core.policy_signing import SignatureError, TrustedKeys, generate_key, read_policy_bytes, sign_policy


def cmd_keygen(args: argparse.Namespace) -> int:
    private, public = generate_key(args.name, args.dir)
    print(
        f"wrote {private} (private: sign with it, keep it off the robot) and {public} (copy it into the robot's "
        "trusted_keys folder)"
    )
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    path = sign_policy(args.file, args.key, args.signer)
    print(f"signed {args.file}: {path}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        data = read_policy_bytes(args.file)
        verified = TrustedKeys(args.trusted_keys).verify(args.file, data)
    except SignatureError as exc:
        if args.json:
            print(json.dumps({"file": args.file, "verified": False, "reason": str(exc)}))
        else:
            print(f"NOT verified: {exc}")
        return 1
    if args.json:
        print(json.dumps({"file": args.file, "verified": True, "signer": verified.signer, "key_id": verified.key_id}))
    else:
        print(f"verified: {args.file} is signed by {verified.signer} (key {verified.key_id})")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    path = Path(args.log) if args.log else default_audit_log()
    try:
        history = read_history(path)
    except FileNotFoundError:
        print(
            f"no policy audit log at {path}: no policy_runtime has started on this machine with that log "
            "(its parameter audit_log, or SIM2REAL_STATE_DIR)"
        )
        return 1
    if args.last:
        history.entries = history.entries[-args.last :]
    if args.json:
        print(json.dumps({"log": str(path), "entries": history.entries, "damaged_lines": history.damaged_lines}))
    else:
        print(f"{path}:\n{format_history(history)}")
    return 0


def add_commands(policy_sub, formatter) -> None:
    """The four actions under `sim2real policy`."""
    keygen = policy_sub.add_parser(
        "keygen",
        formatter_class=formatter,
        help="make an ed25519 key pair for signing",
        description="Write NAME.key (the private key: sign with it, keep it off the "
        "robot) and NAME.pub\n(the public key: copy it into the robot's "
        "trusted_keys folder). Refuses to overwrite.",
    )
    keygen.add_argument("name", help="the signer's name, e.g. lab-release (the robot reports this signer)")
    keygen.add_argument("--dir", default=".", help="folder for the two files (default: here)")
    keygen.set_defaults(func=cmd_keygen)
    sign = policy_sub.add_parser(
        "sign",
        formatter_class=formatter,
        help="sign a policy file (writes FILE.sig)",
        description="Sign every byte of an .onnx policy (weights and metadata) with an "
        "ed25519 private key;\nthe signature goes next to it as FILE.sig. "
        "Copy both to the robot.",
    )
    sign.add_argument("file", help="the .onnx policy")
    sign.add_argument("--key", required=True, help="the private key (.key) from `sim2real policy keygen`")
    sign.add_argument("--signer", default="", help="name recorded in the signature (default: the key's file name)")
    sign.set_defaults(func=cmd_sign)
    verify = policy_sub.add_parser(
        "verify",
        formatter_class=formatter,
        help="check a policy's signature against trusted keys",
        description="What the runtime checks at start and at every swap when "
        "trusted_keys is set. Exit status 0: verified, 1: not.",
    )
    verify.add_argument("file", help="the .onnx policy (its signature: FILE.sig)")
    verify.add_argument("--trusted-keys", required=True, help="folder of trusted public keys (*.pub)")
    verify.add_argument("--json", action="store_true", help="print the verdict as JSON")
    verify.set_defaults(func=cmd_verify)
    history = policy_sub.add_parser(
        "history",
        formatter_class=formatter,
        help="every policy start and swap request on this machine",
        description="Print the runtime's append-only audit log: time, accepted or "
        "refused (and why), who asked\n(start, cli, parameter service), "
        "file, sha256 and signer.",
    )
    history.add_argument(
        "--log", help="the audit log (default: policy_audit.jsonl in $SIM2REAL_STATE_DIR or ~/.local/state/sim2real)"
    )
    history.add_argument("--last", type=int, default=0, help="only the last N records")
    history.add_argument("--json", action="store_true", help="print the records as JSON")
    history.set_defaults(func=cmd_history)
