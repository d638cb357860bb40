"""A file read whole is read no further than its limit, whatever it is (a file, a pipe, a
device with no end)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flaketui.core.reading import IsTerminal, TooLarge, read_at_most, size_text


@given(size=st.integers(0, 300), limit=st.integers(0, 300))
def test_a_stream_is_read_whole_up_to_the_limit_and_refused_past_it(size: int, limit: int) -> None:
    data = bytes(range(256)) * 2
    read, write = os.pipe()
    os.write(write, data[:size])
    os.close(write)
    try:
        if size <= limit:
            assert read_at_most(Path(f"/dev/fd/{read}"), limit) == data[:size]
        else:
            with pytest.raises(TooLarge) as caught:
                read_at_most(Path(f"/dev/fd/{read}"), limit)
            assert caught.value.limit == limit
    finally:
        os.close(read)


def test_a_regular_file_at_its_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_at_most(path, 10) == b"x" * 10
    with pytest.raises(TooLarge, match=r"^larger than 9 bytes$"):
        read_at_most(path, 9)


def test_a_device_with_no_end_is_refused_at_the_limit() -> None:
    with pytest.raises(TooLarge, match=r"^larger than 1 MiB$"):
        read_at_most(Path("/dev/zero"), 1 << 20)


def test_a_missing_file_is_the_open_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_at_most(tmp_path / "nope", 10)


def test_a_terminal_is_refused_before_anything_is_read() -> None:
    primary, secondary = os.openpty()
    try:
        os.write(primary, b"typed\n" + b"\x04" * 4)  # a read gets the line, then the end
        with pytest.raises(IsTerminal, match=r"^is a terminal, not a file$"):
            read_at_most(Path(os.ttyname(secondary)), 10)
        os.set_blocking(secondary, False)
        assert os.read(secondary, 10) == b"typed\n"
    finally:
        os.close(primary)
        os.close(secondary)


def test_dev_null_is_a_file_with_nothing_in_it() -> None:
    assert read_at_most(Path(os.devnull), 10) == b""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_directory_is_the_open_error_and_keeps_no_descriptor(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(IsADirectoryError) as caught:
        read_at_most(tmp_path, 10)
    assert caught.value.filename == str(tmp_path)
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize(
    ("limit", "text"),
    [(0, "0 bytes"), (1000, "1000 bytes"), (1024, "1 KiB"), (1536, "1536 bytes"),
     (3 << 20, "3 MiB"), (256 << 20, "256 MiB"), (1 << 30, "1 GiB"), (3 << 29, "1536 MiB")],
)  # fmt: skip
def test_a_limit_is_named_in_its_largest_whole_unit(limit: int, text: str) -> None:
    assert size_text(limit) == text
