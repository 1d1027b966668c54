"""Raw access to a ROS1 bag: through its index with rosbags, or by scanning its chunks.

A bag whose writer was killed has no index, and a damaged one has an index that cannot be
trusted; both are read by scanning the chunks in order and taking the connection records from
them, as ``rosbag reindex`` does. Damaged records are skipped; a file that holds no bag at all
is refused with its name.
"""

from __future__ import annotations

import bz2
import struct
import warnings
from pathlib import Path
from typing import NamedTuple

from cableload_sim.errors import FileContentError
from cableload_sim.io.runlog.topics import denormalize_msgtype


class BagConnection(NamedTuple):
    """A topic's connection record: ROS1 type ``pkg/Type``, MD5 sum and definition text."""

    topic: str
    msgtype: str
    md5sum: str
    msgdef: str


class RawMessage(NamedTuple):
    connection: BagConnection
    time_ns: int
    data: bytes


_U32 = struct.Struct("<L")
_TIME = struct.Struct("<LL")
BAG_MAGIC = b"#ROSBAG V2.0\n"
_OP_MSGDATA, _OP_BAGHEADER, _OP_CHUNK, _OP_CONNECTION = 2, 3, 5, 7


def check_bag_file(path: Path) -> None:
    """Refuse a path that is not a regular file (a folder, a device such as /dev/zero)."""
    if path.is_dir():
        raise FileContentError(f"{str(path)!r} is a folder, not a ROS1 bag")
    if not path.is_file():
        raise FileContentError(f"{str(path)!r} is not a regular file (expected a ROS1 bag)")


def read_raw_messages(path) -> tuple[list[RawMessage], bool]:
    """Every message of a ROS1 bag in time order, and whether the bag had a usable index.

    An indexed bag is read with rosbags; one without an index (a writer killed before
    closing it) or with a damaged one is scanned chunk by chunk.
    """
    from rosbags.rosbag1 import Reader

    path = Path(path)
    check_bag_file(path)
    with path.open("rb") as file:
        if file.read(len(BAG_MAGIC)) != BAG_MAGIC:
            raise FileContentError(
                f"{str(path)!r} is not a ROS1 bag (version 2.0): it does not start with {BAG_MAGIC!r}"
            )
    try:
        with Reader(path) as reader:
            messages = [
                RawMessage(
                    BagConnection(c.topic, denormalize_msgtype(c.msgtype), c.digest, c.msgdef.data),
                    t,
                    bytes(raw),
                )
                for c, t, raw in reader.messages()
            ]
        return messages, True
    except Exception:  # noqa: BLE001 - any failure of the index: rosbags raises many kinds
        return scan_bag(path), False


def scan_bag(path) -> list[RawMessage]:
    """Messages of a ROS1 bag read sequentially, without its index (like ``rosbag reindex``).

    Connection records are taken from the chunks (and from the index section if present).
    Reading stops at the first incomplete record; an uncompressed chunk cut short still gives
    its complete messages; a damaged record is skipped. Messages are returned in time order.
    """
    path = Path(path)
    check_bag_file(path)
    data = path.read_bytes()
    if not data.startswith(BAG_MAGIC):
        raise FileContentError(
            f"{str(path)!r} is not a ROS1 bag (version 2.0): it does not start with {BAG_MAGIC!r}"
        )
    connections: dict[int, BagConnection] = {}
    messages: list[RawMessage] = []
    pos = len(BAG_MAGIC)
    while True:
        record = _read_record(data, pos)
        if record is None:
            break
        fields, body, pos, complete = record
        if "op" not in fields or (not complete and fields.get("compression") != b"none"):
            break
        op = fields["op"][:1]
        if op == bytes([_OP_CHUNK]):
            chunk = _decompress(fields.get("compression"), body)
            if chunk is not None:
                _scan_chunk(chunk, connections, messages)
        elif op == bytes([_OP_CONNECTION]):
            _add_connection(fields, body, connections)
        if not complete:
            break
    messages.sort(key=lambda m: m.time_ns)
    return messages


def _read_record(data: bytes, pos: int):
    """(header fields, data, next position, complete) or None at the end or a cut header."""
    if pos + 4 > len(data):
        return None
    (header_len,) = _U32.unpack_from(data, pos)
    start = pos + 4
    if start + header_len + 4 > len(data):
        return None
    fields = _parse_fields(data[start : start + header_len])
    if fields is None:
        return None
    (data_len,) = _U32.unpack_from(data, start + header_len)
    body_start = start + header_len + 4
    body_end = body_start + data_len
    complete = body_end <= len(data)
    return fields, data[body_start : min(body_end, len(data))], body_end, complete


def _parse_fields(block: bytes) -> dict[str, bytes] | None:
    fields = {}
    pos = 0
    while pos < len(block):
        if pos + 4 > len(block):
            return None
        (size,) = _U32.unpack_from(block, pos)
        item = block[pos + 4 : pos + 4 + size]
        if len(item) != size or b"=" not in item:
            return None
        key, value = item.split(b"=", 1)
        fields[key.decode("latin-1")] = value
        pos += 4 + size
    return fields


def _decompress(compression: bytes | None, body: bytes) -> bytes | None:
    """The chunk's records, or None when its compression is unknown or its data damaged."""
    try:
        if compression == b"none":
            return body
        if compression == b"bz2":
            return bz2.decompress(body)
        if compression == b"lz4":
            import lz4.frame

            return lz4.frame.decompress(body)
    except ImportError:
        warnings.warn("a chunk is compressed with lz4, which needs the lz4 package; skipped", stacklevel=4)
    except (OSError, ValueError, RuntimeError):
        pass  # damaged data: the chunk is skipped
    else:
        warnings.warn(
            f"chunk compression {compression!r} is not supported (expected none, bz2 or lz4); skipped",
            stacklevel=4,
        )
    return None


def _scan_chunk(chunk: bytes, connections: dict, messages: list) -> None:
    pos = 0
    while True:
        record = _read_record(chunk, pos)
        if record is None or not record[3]:
            return
        fields, body, pos, _ = record
        op = fields.get("op", b"\0")[:1]
        if op == bytes([_OP_CONNECTION]):
            _add_connection(fields, body, connections)
        elif op == bytes([_OP_MSGDATA]):
            try:
                conn = connections.get(_U32.unpack(fields["conn"])[0])
                sec, nsec = _TIME.unpack(fields["time"])
            except (KeyError, struct.error):
                continue  # a damaged record header: skip this message
            if conn is not None:
                messages.append(RawMessage(conn, sec * 10**9 + nsec, body))


def _add_connection(fields: dict, body: bytes, connections: dict) -> None:
    info = _parse_fields(body) or {}
    try:
        conn_id = _U32.unpack(fields["conn"])[0]
        topic = fields["topic"].decode()
        msgtype = info.get("type", b"").decode()
        md5sum = info.get("md5sum", b"").decode()
        msgdef = info.get("message_definition", b"").decode()
    except (KeyError, struct.error, UnicodeDecodeError):
        return  # a damaged connection record: its messages are skipped
    topic = "/" * topic.startswith("/") + "/".join(x for x in topic.split("/") if x)
    connections[conn_id] = BagConnection(topic, msgtype, md5sum, msgdef)
