"""The type-hint driven codec: round trips and malformed payloads."""

import contextlib
import enum
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.codec import CodecError, MessageCodec
from nodes.store.logstore import Entry


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 404


@dataclass(frozen=True)
class Sample:
    term: int
    name: str
    body: bytes
    ok: bool
    colour: Colour
    leader: str | None
    entries: list[Entry]
    indexes: tuple[int, ...] = ()
    ratio: float = 0.5


def make_codec() -> MessageCodec:
    codec = MessageCodec()
    codec.register(7, Sample)
    return codec


entries = st.builds(Entry, index=st.integers(0, 2**62), term=st.integers(0, 2**62),
                    body=st.binary(max_size=64), magic=st.sampled_from([1, 2]),
                    channel=st.integers(-(2**31), 2**31 - 1))
samples = st.builds(Sample, term=st.integers(-(2**63), 2**63 - 1), name=st.text(max_size=20),
                    body=st.binary(max_size=100), ok=st.booleans(), colour=st.sampled_from(Colour),
                    leader=st.none() | st.text(max_size=5), entries=st.lists(entries, max_size=5),
                    indexes=st.lists(st.integers(0, 10**9), max_size=5).map(tuple),
                    ratio=st.floats(allow_nan=False))


@given(samples)
def test_round_trip(sample):
    codec = make_codec()
    type_id, payload = codec.encode(sample)
    assert type_id == 7
    assert codec.decode(type_id, payload) == sample


@given(samples, st.data())
def test_any_truncation_or_extension_is_a_codec_error(sample, data):
    codec = make_codec()
    _, payload = codec.encode(sample)
    cut = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(CodecError):
        codec.decode(7, payload[:cut])
    with pytest.raises(CodecError, match="trailing"):
        codec.decode(7, payload + b"\x00")


@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_codec_error_only(raw):
    with contextlib.suppress(CodecError):
        assert isinstance(make_codec().decode(7, raw), Sample)


def test_unknown_type_and_bad_enum_are_named():
    codec = make_codec()
    with pytest.raises(CodecError, match="unknown message type 8"):
        codec.decode(8, b"")
    sample = Sample(1, "a", b"", True, Colour.RED, None, [])
    _, payload = codec.encode(sample)
    bad = payload.replace((1).to_bytes(8, "big"), (3).to_bytes(8, "big"), 2)  # term, then colour
    with pytest.raises(CodecError, match="not a valid Colour"):
        codec.decode(7, bad)


def test_out_of_range_int_is_a_codec_error():
    with pytest.raises(CodecError):
        make_codec().encode(Sample(2**64, "a", b"", True, Colour.RED, None, []))


def test_unsupported_field_type_is_refused_at_registration():
    @dataclass
    class Bad:
        values: dict[str, int]

    with pytest.raises(TypeError, match="cannot encode"):
        MessageCodec().register(1, Bad)
