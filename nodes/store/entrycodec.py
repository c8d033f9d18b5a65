"""DLedger's on-disk records: the 48-byte entry header, the 32-byte index entry, CRCs.

Data entry (big-endian): magic int32, size int32 (header + body), index int64, term int64,
pos int64 (absolute offset of the entry), channel int32, chainCrc uint32, bodyCrc uint32,
bodyLen int32, then the body. A blank record (magic -1, int32 length) fills the rest of a
data file that the next entry does not fit in.

Index entry (big-endian), at byte `index * 32`: magic int32, pos int64, size int32,
index int64, term int64.

Beyond DLedger: bodyCrc is CRC32 of the body and chainCrc is CRC32 of this entry's header
(its chainCrc field zeroed) seeded with the previous entry's chainCrc, so a torn or altered
entry, or one that does not follow its predecessor, is detected.
"""

from __future__ import annotations

import struct
import zlib

HEADER = struct.Struct(">iiqqqiIIi")
HEADER_SIZE = HEADER.size  # 48
INDEX = struct.Struct(">iqiqq")
INDEX_SIZE = INDEX.size  # 32
BLANK = struct.Struct(">ii")
BLANK_SIZE = BLANK.size  # 8
MAGIC_BLANK = -1
CHAIN_OFFSET = 36  # where chainCrc sits inside the header
CHAIN = struct.Struct(">I")
ZERO_CHAIN = b"\x00\x00\x00\x00"

body_crc = zlib.crc32


def chain_crc(header: bytes | memoryview, prev_chain: int) -> int:
    """chainCrc of an entry from its 48 header bytes (their chainCrc field is ignored)."""
    crc = zlib.crc32(header[:CHAIN_OFFSET], prev_chain)
    crc = zlib.crc32(ZERO_CHAIN, crc)
    return zlib.crc32(header[CHAIN_OFFSET + 4:HEADER_SIZE], crc)
