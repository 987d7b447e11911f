"""The CRC a Go2 checks on every LowCmd (and sends on every LowState).

CRC-32 with polynomial 0x04C11DB7, initial value 0xFFFFFFFF, no reflection and no final xor
(the catalogue's CRC-32/MPEG-2), fed the frame's little-endian uint32 words, each most
significant bit first, all but the last word (the crc itself).

zlib computes the reflected CRC-32 in C; feeding it bit-reversed bytes and reversing the
register gives the unreflected one at C speed (a Python bit loop costs ~1 ms a frame, and a
Go2 sends 500 frames a second).
"""

from __future__ import annotations

import zlib

_BIT_REVERSED = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


def crc32_mpeg2(data: bytes | bytearray) -> int:
    """CRC-32/MPEG-2 of ``data`` (check value: b"123456789" -> 0x0376E6E7)."""
    reflected = zlib.crc32(bytes(data).translate(_BIT_REVERSED)) ^ 0xFFFFFFFF  # undo zlib's final xor
    return int(f"{reflected:032b}"[::-1], 2)


def frame_crc(frame: bytes) -> int:
    """The crc word of a packed frame (:mod:`.frames`): over its uint32 words but the last."""
    if len(frame) % 4:
        raise ValueError(f"a frame is whole uint32 words; got {len(frame)} bytes")
    words = memoryview(bytes(frame))[:-4]
    big_endian = bytearray(len(words))
    for byte in range(4):  # each little-endian word, most significant byte first
        big_endian[byte::4] = words[3 - byte :: 4]
    return crc32_mpeg2(big_endian)
