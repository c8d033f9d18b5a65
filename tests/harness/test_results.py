"""Results folder layout and the latest link."""

import json

from harness.chaos.results import create_run_dir, point_latest, write_json


def test_run_dirs_are_fresh_and_latest_follows(tmp_path):
    first = create_run_dir(tmp_path, "chaos")
    second = create_run_dir(tmp_path, "chaos")
    assert first != second and first.parent == second.parent == tmp_path / "chaos"
    assert (first / "final").is_dir() and (first / "nodes").is_dir()
    point_latest(tmp_path, first)
    point_latest(tmp_path, second)
    assert (tmp_path / "latest").resolve() == second.resolve()
    assert not (tmp_path / "latest").readlink().is_absolute()


def test_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "test.json"
    write_json(path, {"seed": 1})
    write_json(path, {"seed": 2, "nodes": 5})
    assert json.loads(path.read_text()) == {"nodes": 5, "seed": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["test.json"]
