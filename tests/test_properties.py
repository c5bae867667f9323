"""Property tests: any owner string and any lock-file bytes are handled."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

OWNERISH = st.text(alphabet=st.sampled_from("ab:Z9-_ \t\n\x00é€:"), max_size=30) | st.text()


@given(owner=OWNERISH)
def test_owner_is_refused_or_splits_into_parts_that_join_back(skf: ModuleType, owner: str) -> None:
    try:
        parts = skf._split_owner(owner)
    except ValueError:
        return
    workflow, skill, _ = parts
    assert workflow and skill and ":" not in workflow + skill
    assert ":".join(p for p in parts if p is not None) == owner
    assert len(owner) <= 200


# Printable, no whitespace, no colon: what a workflow or skill may be made of.
PART = st.text(
    alphabet=st.characters(blacklist_categories=("Z", "C"), blacklist_characters=":"),
    min_size=1,
    max_size=40,
)


@given(
    workflow=PART,
    skill=PART,
    run_id=st.none() | st.text(alphabet=st.sampled_from("a1:Z-"), max_size=30),
)
def test_every_owner_within_the_rules_splits_into_its_parts(
    skf: ModuleType, workflow: str, skill: str, run_id: str | None
) -> None:
    owner = ":".join(p for p in (workflow, skill, run_id) if p is not None)
    if len(owner) > 200:
        with pytest.raises(ValueError, match="at most 200"):
            skf._split_owner(owner)
    else:
        assert skf._split_owner(owner) == (workflow, skill, run_id)


CONTENT = st.binary(max_size=300) | st.builds(
    lambda a, b: a + b"\n" + b,
    st.binary(max_size=20),
    st.sampled_from([b"2026-09-30T10:15:00Z", b"9999-12-31T23:59:59Z", b"x"]),
)


@given(data=CONTENT)
def test_any_bytes_give_an_owner_or_none_and_a_time(skf: ModuleType, data: bytes) -> None:
    record = skf._parse_record(data, 1234)
    assert record.owner is None or (isinstance(record.owner, str) and record.owner)
    assert isinstance(record.since, int)
    assert skf._parse_time(skf._format_time(record.since)) == max(record.since, -62135596800)


@settings(max_examples=60, deadline=None)
@given(data=CONTENT)
def test_any_lock_file_is_read_without_error(skf: ModuleType, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "prop.lock"
        path.write_bytes(data)
        record = skf._read_record(str(path))
        assert record is not None and isinstance(record.since, int)
        result = skf.status(path, 60.0)
        assert result["state"] in ("held", "stale") and isinstance(result["age_seconds"], int)


# A line file's text lines: places as this tool writes them, and anything else.
PLACE_LINE = st.builds(
    lambda ticket, owner, beat: (
        f'{{"ticket": "{ticket}", "owner": "{owner}", "since": "2026-09-30T10:15:00Z",'
        f' "stale_after_seconds": 60.0, "beat": {beat}}}'
    ).encode(),
    st.text(alphabet="0123456789abcdef", min_size=8, max_size=8),
    st.sampled_from(["wf:a:1", "wf:b:2", "x:y:z"]),
    st.sampled_from([0.0, 1764000000.125, 1764000001.5]),
)
LINE_FILE = st.lists(PLACE_LINE | st.binary(max_size=40), max_size=8).map(b"\n".join)


@given(data=LINE_FILE, beat=st.sampled_from([2.5, 1764000002.25]))
def test_a_line_file_reads_the_same_every_time_and_is_written_back_as_read(
    skf: ModuleType, data: bytes, beat: float
) -> None:
    """Each process keeps what each text line of a line file gave, and the text each
    place is kept as: read again, the places are the same; written back unchanged,
    each valid line is the text it was read from; a place whose beat changed is
    written anew, and reads back changed."""
    fields = ("ticket", "owner", "since", "stale_after", "beat")
    first = skf._parse_line(data)
    again = skf._parse_line(data)
    assert [[getattr(p, f) for f in fields] for p in again] == [
        [getattr(p, f) for f in fields] for p in first
    ]
    valid = [text + b"\n" for text in data.split(b"\n") if skf._place_fields(text)]
    assert skf._line_bytes(again) == b"".join(valid)
    if again:
        again[0].beat = beat
        changed = skf._parse_line(skf._line_bytes(again))
        assert [p.beat for p in changed] == [beat] + [p.beat for p in first[1:]]


def test_a_memo_keeps_no_text_longer_than_a_place(skf: ModuleType) -> None:
    """Whatever a line file holds, each process's memo of its lines stays small: a
    text line longer than any place's is parsed each time, never kept."""
    junk = b'{"ticket": "' + b"x" * 5000 + b'"}'
    place = (
        b'{"ticket": "0123abcd", "owner": "wf:' + b"a" * 3000 + b':1", "since":'
        b' "2026-09-30T10:15:00Z", "stale_after_seconds": 60.0, "beat": 1.5}'
    )
    assert skf._parse_line(junk + b"\n" + junk) == []
    (parsed,) = skf._parse_line(place)
    assert parsed.owner == "wf:" + "a" * 3000 + ":1"
    assert skf._line_bytes([parsed]) == place + b"\n"
    assert junk not in skf._PARSED and place not in skf._PARSED
    assert all(len(text) <= 1024 for text in skf._WRITTEN.values())


TIMEISH = st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", fullmatch=True)


@given(text=TIMEISH | st.text(alphabet=st.sampled_from("0123456789-T:Z "), max_size=24))
def test_a_time_read_again_gives_what_it_gave_and_only_times_are_kept(
    skf: ModuleType, text: str
) -> None:
    """Holders' and places' times are remembered once read: a time read again (a real
    date, February 30, or no time at all) gives what it gave the first time, and the
    memo keeps no text but one of a time's length."""
    first = skf._time_of(text)
    assert first == skf._parse_time(text)
    assert skf._time_of(text) == first
    assert all(len(kept) == 20 for kept in skf._TIMES_READ)
    assert (text in skf._TIMES_READ) == (len(text) == 20)
