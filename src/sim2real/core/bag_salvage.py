"""Read what is still readable from a truncated or damaged MCAP bag, and count what is lost.

A recorder killed mid-write (power cut, full disk, ``kill -9``) leaves an MCAP file with no
summary and no footer, which the indexed readers (rosbags, ``ros2 bag``) refuse; ``ros2 bag
reindex`` needs a ROS install that a pip user may not have. The records before the damage are
intact, though: an MCAP file is a magic, then length-prefixed records (schemas, channels,
messages, or chunks that hold them), so this scanner walks them in order and keeps every
message it can read whole: all complete chunks, and the complete records at the start of a
last uncompressed chunk cut short.

Record layouts are from the MCAP specification (mcap.dev/spec): an opcode byte and a uint64
length frame each record; strings are a uint32 length and UTF-8 bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

MAGIC = b"\x89MCAP0\r\n"
OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK = 0x02, 0x03, 0x04, 0x05, 0x06
_FRAME = struct.Struct("<BQ")


@dataclass
class Salvage:
    """What a damaged bag still holds: raw messages in time order and what was lost."""

    path: Path
    messages: list[tuple[str, str, int, bytes]] = field(default_factory=list)  # topic, type, log time ns, CDR
    expected: dict[str, int] | None = None  # per topic, from metadata.yaml (None: no metadata to compare)
    damage: str = ""  # where and why reading stopped ('' if every record read)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, _, _, _ in self.messages:
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    def summary(self) -> str:
        """One line for people: how much was read and how much was lost."""
        read = self.counts()
        total = sum(read.values())
        if self.expected is None:
            lost = "the bag's metadata.yaml gives no count to compare with, so the loss is unknown"
        else:
            missing = {t: n - read.get(t, 0) for t, n in self.expected.items() if n > read.get(t, 0)}
            lost = (
                (
                    f"{sum(missing.values())} of {sum(self.expected.values())} messages lost ("
                    + ", ".join(f"{t} {n}" for t, n in sorted(missing.items()))
                    + ")"
                )
                if missing
                else "nothing lost"
            )
        state = f"damaged ({self.damage})" if self.damage else "not indexed (no damage found in its records)"
        return f"{self.path}: {state}; read {total} messages whole, {lost}"


def salvage_bag(path: str | Path, topics: Iterable[str] | None = None) -> Salvage:
    """Every whole message of the bag at ``path`` (a rosbag2 directory or an .mcap file),
    narrowed to ``topics``; ValueError if it holds no MCAP data at all."""
    path = Path(path)
    files = sorted(path.glob("*.mcap")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"{path} holds no .mcap file")
    salvage = Salvage(path, expected=_expected_counts(path))
    wanted = None if topics is None else set(topics)
    damages = []
    for file in files:
        damage = _scan(file.read_bytes(), salvage.messages, wanted)
        if damage:
            damages.append(f"{file.name}: {damage}")
    salvage.damage = "; ".join(damages)
    if wanted is not None and salvage.expected is not None:
        salvage.expected = {t: n for t, n in salvage.expected.items() if t in wanted}
    salvage.messages.sort(key=lambda m: m[2])
    return salvage


def _expected_counts(path: Path) -> dict[str, int] | None:
    from sim2real.core.bags import bag_information

    try:
        return {
            entry["topic_metadata"]["name"]: int(entry["message_count"])
            for entry in bag_information(path)["topics_with_message_count"]
        }
    except (KeyError, TypeError, ValueError):
        return None


def _string(data: bytes | memoryview, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<I", data, pos)
    end = pos + 4 + length
    if end > len(data):
        raise struct.error("string past the end of its record")
    return bytes(data[pos + 4 : end]).decode(), end


class _Scanner:
    def __init__(self, out: list, wanted: set[str] | None):
        self.out = out
        self.wanted = wanted
        self.schemas: dict[int, str] = {}
        self.channels: dict[int, tuple[str, str]] = {}  # id -> (topic, message type)

    def records(self, data: memoryview, pos: int, partial_ok: bool) -> tuple[int, str]:
        """Walk the records from ``pos``; returns where reading stopped and why ('' = clean)."""
        end = len(data)
        while pos < end:
            if end - pos < _FRAME.size:
                return pos, f"a record header cut short at byte {pos}"
            opcode, length = _FRAME.unpack_from(data, pos)
            if opcode == OP_FOOTER:
                return pos, ""  # the file is whole up to its end
            body = pos + _FRAME.size
            if body + length > end:
                if opcode == OP_CHUNK and partial_ok:
                    try:
                        stopped = self.chunk(data[body:end], truncated=True)
                    except Exception as exc:  # a cut inside the chunk's own header
                        stopped = f"its header is unreadable: {type(exc).__name__}: {exc}"
                    return end, f"a chunk cut short at byte {pos} ({stopped or 'its whole records read'})"
                return pos, f"a record (opcode 0x{opcode:02x}) cut short at byte {pos}"
            record = data[body : body + length]
            try:
                stopped = self.record(opcode, record)
            except Exception as exc:  # struct.error, bad UTF-8, a corrupt compressed chunk: damage, not a crash
                return pos, f"an unreadable record (opcode 0x{opcode:02x}) at byte {pos}: {type(exc).__name__}: {exc}"
            if stopped:
                return pos, f"a damaged chunk at byte {pos} ({stopped})"
            pos = body + length
        return pos, ""

    def record(self, opcode: int, record: memoryview) -> str:
        """Take one whole record; '' when read, else why a chunk stopped (other records raise)."""
        if opcode == OP_SCHEMA:
            (schema_id,) = struct.unpack_from("<H", record, 0)
            self.schemas[schema_id] = _string(record, 2)[0]
        elif opcode == OP_CHANNEL:
            channel_id, schema_id = struct.unpack_from("<HH", record, 0)
            topic, _ = _string(record, 4)
            self.channels[channel_id] = (topic, self.schemas.get(schema_id, ""))
        elif opcode == OP_MESSAGE:
            self.message(record)
        elif opcode == OP_CHUNK:
            return self.chunk(record, truncated=False)
        return ""

    def message(self, record: memoryview) -> None:
        channel_id, _, log_time = struct.unpack_from("<HIQ", record, 0)
        channel = self.channels.get(channel_id)
        if channel is None or (self.wanted is not None and channel[0] not in self.wanted):
            return
        self.out.append((channel[0], channel[1], log_time, bytes(record[22:])))

    def chunk(self, record: memoryview, truncated: bool) -> str:
        """Read a chunk's records; '' if all were read, else why it stopped."""
        header = struct.calcsize("<QQQI")
        compression, pos = _string(record, header)
        (records_length,) = struct.unpack_from("<Q", record, pos)
        records = record[pos + 8 : pos + 8 + records_length]
        if compression:
            if truncated or len(records) < records_length:
                return f"{compression}-compressed and incomplete: its messages cannot be read"
            records = memoryview(_decompress(compression, bytes(records)))
        _, why = self.records(records, 0, partial_ok=False)
        return why


def _decompress(compression: str, data: bytes) -> bytes:
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if compression == "lz4":
        import lz4.frame

        return lz4.frame.decompress(data)
    raise ValueError(f"unknown chunk compression {compression!r}")


def _scan(data: bytes, out: list, wanted: set[str] | None) -> str:
    if not data.startswith(MAGIC):
        return "not an MCAP file (no magic at its start)"
    _, why = _Scanner(out, wanted).records(memoryview(data), len(MAGIC), partial_ok=True)
    return why
