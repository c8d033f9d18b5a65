"""currterm and checkpoint files: DLedger's text, durable replace, clear errors."""

import pytest

from nodes.store.termfile import (
    PropertiesFileError,
    TermState,
    load_checkpoint,
    load_term,
    save_checkpoint,
    save_term,
)


def test_missing_files_mean_fresh_state(tmp_path):
    assert load_term(tmp_path) == TermState(0, None)
    assert load_checkpoint(tmp_path) == -1


def test_term_and_vote_round_trip_in_dledger_text(tmp_path):
    save_term(tmp_path, TermState(7, "n2"))
    assert (tmp_path / "currterm").read_text() == "currTerm=7\nvoteLeader=n2\n"
    assert load_term(tmp_path) == TermState(7, "n2")
    save_term(tmp_path, TermState(8, None))
    assert load_term(tmp_path) == TermState(8, None)
    assert not (tmp_path / "currterm.tmp").exists()


def test_reads_java_properties_with_a_comment(tmp_path):
    (tmp_path / "currterm").write_text("#Mon Jan 01 00:00:00 CST 2024\ncurrTerm=3\nvoteLeader=\n")
    assert load_term(tmp_path) == TermState(3, None)


def test_checkpoint_round_trip(tmp_path):
    save_checkpoint(tmp_path, 41)
    assert load_checkpoint(tmp_path) == 41


@pytest.mark.parametrize("text, match", [("currTerm=x\n", "not an integer"), ("garbage\n", "not key=value"),
                                         ("currTerm=-2\n", "negative")])
def test_bad_content_names_the_file_and_the_fix(tmp_path, text, match):
    (tmp_path / "currterm").write_text(text)
    with pytest.raises(PropertiesFileError, match=match) as err:
        load_term(tmp_path)
    assert "currterm" in str(err.value)
