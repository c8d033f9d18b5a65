"""currterm and checkpoint files: DLedger's text, durable replace (on a simulated disk too),
clear errors."""

import random
from pathlib import Path

import pytest

from nodes.sim.simfs import LOSS_MODES, SimFileSystem
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


class PowerCut(Exception):
    """The power went out at this step."""


class CutBeforeDirSync(SimFileSystem):
    """A simulated disk whose power goes out, once armed, just before a directory fsync."""

    armed = False

    def fsync_dir(self, path: Path) -> None:
        if self.armed:
            raise PowerCut(path)
        super().fsync_dir(path)


NODE = Path("/node")
OLD, NEW = TermState(3, "n1"), TermState(4, "n2")


def sim_with_old_term() -> CutBeforeDirSync:
    fs = CutBeforeDirSync()
    fs.make_dirs(NODE)
    save_term(NODE, OLD, fs=fs)
    return fs


@pytest.mark.parametrize("mode", LOSS_MODES)
def test_a_saved_term_and_checkpoint_survive_a_power_loss(mode):
    fs = sim_with_old_term()
    save_term(NODE, NEW, fs=fs)
    save_checkpoint(NODE, 9, fs=fs)
    fs.power_loss(random.Random(0), mode)
    assert load_term(NODE, fs=fs) == NEW and load_checkpoint(NODE, fs=fs) == 9


def test_a_power_loss_before_the_directory_fsync_keeps_the_old_term():
    fs = sim_with_old_term()
    fs.armed = True
    with pytest.raises(PowerCut):
        save_term(NODE, NEW, fs=fs)
    assert load_term(NODE, fs=fs) == NEW  # the process saw the rename
    fs.power_loss(random.Random(0), "lose-unsynced")
    assert load_term(NODE, fs=fs) == OLD


def test_a_first_save_cut_before_the_directory_fsync_leaves_no_term():
    fs = CutBeforeDirSync()
    fs.make_dirs(NODE)
    fs.armed = True
    with pytest.raises(PowerCut):
        save_term(NODE, NEW, fs=fs)
    fs.power_loss(random.Random(0), "lose-unsynced")
    assert load_term(NODE, fs=fs) == TermState(0, None)


def test_a_reordered_power_loss_before_the_directory_fsync_keeps_old_or_new_whole():
    seen = set()
    for seed in range(50):
        fs = sim_with_old_term()
        fs.armed = True
        with pytest.raises(PowerCut):
            save_term(NODE, NEW, fs=fs)
        fs.power_loss(random.Random(seed), "reorder-tear")
        seen.add(load_term(NODE, fs=fs))
    assert seen == {OLD, NEW}
