"""Framing: split and joined frames, bounds, versions."""

import pytest

from nodes.wire import MAX_FRAME, FrameError, FrameParser, encode_frame


def test_frames_survive_any_split_of_the_stream():
    stream = b"".join(encode_frame(t, 1000 + t, bytes([t]) * t) for t in range(1, 30))
    for chunk in (1, 3, 7, 64, len(stream)):
        parser = FrameParser()
        frames = []
        for i in range(0, len(stream), chunk):
            frames += parser.feed(stream[i:i + chunk])
        assert [(f.msg_type, f.request_id, f.payload) for f in frames] == [
            (t, 1000 + t, bytes([t]) * t) for t in range(1, 30)]
        assert parser.buffered == 0


def test_oversized_length_is_refused_before_buffering():
    parser = FrameParser(max_frame=1024)
    header = (2000).to_bytes(4, "big") + bytes([1]) + (5).to_bytes(2, "big") + (1).to_bytes(4, "big")
    with pytest.raises(FrameError, match="length 2000"):
        parser.feed(header)


def test_length_shorter_than_the_header_is_refused():
    with pytest.raises(FrameError, match="length 3"):
        FrameParser().feed((3).to_bytes(4, "big") + b"\x01" * 7)


def test_unknown_version_is_refused():
    frame = bytearray(encode_frame(5, 1, b"abc"))
    frame[4] = 9
    with pytest.raises(FrameError, match="version 9"):
        FrameParser().feed(bytes(frame))


def test_encoder_refuses_a_frame_over_the_limit():
    with pytest.raises(ValueError, match="exceeds"):
        encode_frame(1, 1, b"x" * MAX_FRAME)
