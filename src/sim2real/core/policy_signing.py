"""Signed policies: ed25519 signatures over the whole ONNX file, checked against trusted keys.

A signature is a small JSON file next to the policy, ``<policy>.onnx.sig``::

    {"format": "sim2real.signature/1", "signer": "lab-release", "key_id": "3f2a...",
     "sha256": "<the policy file's sha256>", "signature": "<base64 ed25519 signature>"}

The signature covers every byte of the ONNX file (the weights and the ``sim2real.*``
metadata inside it): change one byte and it no longer verifies. Keys are PEM files made by
``sim2real policy keygen``: a private key (PKCS#8) kept off the robot, and its public key
(SubjectPublicKeyInfo) copied into the robot's ``trusted_keys`` directory, where the file
name (less ``.pub``) names the signer. With ``trusted_keys`` set, the policy runtime runs
only files whose signature verifies against one of those keys, at start and at every swap.

ed25519 comes from ``cryptography`` (the pyca library): nothing cryptographic is written here.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sim2real.core.errors import InputError

SIGNATURE_FORMAT = "sim2real.signature/1"
SIGNATURE_SUFFIX = ".sig"
PUBLIC_SUFFIX = ".pub"
MAX_SIGNATURE_BYTES = 4096  # a signature file is ~300 bytes; anything larger is not one


class SignatureError(InputError):
    """A policy that is not signed by a trusted key, or a key that cannot be used; the message
    says what is wrong and what to do."""


@dataclass(frozen=True)
class Verified:
    signer: str  # the trusted key's name (its file name less .pub)
    key_id: str  # first 16 hex digits of the sha256 of the raw public key


def read_policy_bytes(policy: str | Path) -> bytes:
    try:
        return Path(policy).read_bytes()
    except OSError as exc:
        raise SignatureError(f"cannot read {policy} ({exc.strerror or exc}); check the path") from None


def signature_path(policy: str | Path) -> Path:
    policy = Path(policy)
    return policy.with_name(policy.name + SIGNATURE_SUFFIX)


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def generate_key(name: str, directory: str | Path) -> tuple[Path, Path]:
    """Write ``<directory>/<name>.key`` (private, mode 600) and ``<name>.pub``; refuses to
    overwrite either."""
    if not name or "/" in name or name.startswith("."):
        raise SignatureError(f"key name {name!r} must be a plain file name (e.g. lab-release)")
    directory = Path(directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    private_path, public_path = directory / f"{name}.key", directory / f"{name}{PUBLIC_SUFFIX}"
    for path in (private_path, public_path):
        if path.exists():
            raise SignatureError(f"{path} exists; choose another name or remove it first")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    private_path.touch(mode=0o600)
    private_path.write_bytes(pem)
    public_path.write_bytes(
        private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private_path, public_path


def _load_private(path: str | Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(Path(path).expanduser().read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(
            f"{path}: not a readable unencrypted PEM private key ({exc}); make one with `sim2real policy keygen NAME`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path}: not an ed25519 key; make one with `sim2real policy keygen NAME`")
    return key


def _load_public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise SignatureError(
            f"{path}: not a PEM public key ({exc}); copy the .pub file `sim2real policy keygen` wrote"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path}: not an ed25519 public key")
    return key


def sign_policy(policy: str | Path, private_key: str | Path, signer: str = "") -> Path:
    """Sign every byte of ``policy``; writes and returns its ``.sig`` file. ``signer``: the
    name recorded in the signature (default: the key file's name less its suffix). The
    signer a robot reports is always its own name for the trusted key that verifies."""
    data = read_policy_bytes(policy)
    key = _load_private(private_key)
    record = {
        "format": SIGNATURE_FORMAT,
        "signer": signer or Path(private_key).stem,
        "key_id": key_id(key.public_key()),
        "sha256": hashlib.sha256(data).hexdigest(),
        "signature": base64.b64encode(key.sign(data)).decode(),
    }
    path = signature_path(policy)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


class TrustedKeys:
    """The public keys of a ``trusted_keys`` directory (``*.pub``), read once."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory).expanduser()
        if not self.directory.is_dir():
            raise SignatureError(
                f"trusted_keys {self.directory} is not a directory; create it and copy the signers' .pub files into it"
            )
        self.keys = {
            path.name[: -len(PUBLIC_SUFFIX)]: _load_public(path)
            for path in sorted(self.directory.glob(f"*{PUBLIC_SUFFIX}"))
        }
        if not self.keys:
            raise SignatureError(
                f"trusted_keys {self.directory} holds no .pub key: with no key nothing could "
                "run; copy the signers' .pub files into it (or leave trusted_keys empty)"
            )

    def verify(self, policy: str | Path, data: bytes) -> Verified:
        """Check the signature of ``data`` (the bytes of ``policy`` that will run, read once by
        the caller) against every trusted key; SignatureError with the reason otherwise."""
        sig_path = signature_path(policy)
        try:
            if sig_path.stat().st_size > MAX_SIGNATURE_BYTES:
                raise SignatureError(f"{sig_path} is larger than any signature; sign the policy again")
            record = json.loads(sig_path.read_text())
        except FileNotFoundError:
            raise SignatureError(
                f"{policy} is not signed (no {sig_path.name}) and trusted_keys is set; sign it "
                "with `sim2real policy sign FILE --key KEY`"
            ) from None
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise SignatureError(f"{sig_path} is not a signature file ({exc}); sign the policy again") from None
        if not isinstance(record, dict) or record.get("format") != SIGNATURE_FORMAT:
            raise SignatureError(f"{sig_path} is not a {SIGNATURE_FORMAT} signature; sign the policy again")
        try:
            signature = base64.b64decode(str(record.get("signature", "")), validate=True)
        except ValueError:
            raise SignatureError(f"{sig_path}: the signature is not base64; sign the policy again") from None
        digest = hashlib.sha256(data).hexdigest()
        for name, public in self.keys.items():
            try:
                public.verify(signature, data)
            except InvalidSignature:
                continue
            return Verified(name, key_id(public))
        if record.get("sha256") != digest:
            raise SignatureError(
                f"{policy} was changed after it was signed (sha256 {digest[:16]}, signed "
                f"{str(record.get('sha256'))[:16]}): do not run it; sign the intended file again"
            )
        raise SignatureError(
            f"{policy} is signed by key {record.get('key_id')} ({record.get('signer')!r}), which is "
            f"not among the trusted keys {sorted(self.keys)} in {self.directory}"
        )
