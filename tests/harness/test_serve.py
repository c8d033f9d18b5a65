"""`python -m harness serve`: the runs index, static files, archives, refused paths and the command line."""

from __future__ import annotations

import http.client
import io
import json
import signal
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.serving.runindex import scan
from harness.serving.serve import Refused, ResultsServer, inside
from nodes.cliparse import run_subcommands
from tests.support.serving import serve

COMMANDS = {"serve": "harness.serving.serve"}


def make_run(root: Path, rel: str, test: dict | None, results: dict | None = None) -> Path:
    folder = root / rel
    folder.mkdir(parents=True)
    if test is not None:
        (folder / "test.json").write_text(json.dumps(test))
    if results is not None:
        (folder / "results.json").write_text(json.dumps(results))
    (folder / "history.jsonl").write_text("")
    return folder


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    old = make_run(root, "alpha/20260101T100000", {"name": "alpha", "seed": 1, "nemesis": ["kill"]},
                   {"valid": True, "checks": {}, "stats": {"append_ops": 70, "read_ops": 30}})
    (old / "report.html").write_text("<h1>alpha report</h1>")
    (old / "nodes" / "n1").mkdir(parents=True)
    (old / "nodes" / "n1" / "node.log").write_text("node log\n")
    (old / "ssh").mkdir()
    (old / "ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (old / "outside").symlink_to(tmp_path)
    (tmp_path / "secret.txt").write_text("not for the web")
    make_run(root, "beta/20260102T100000", {"name": "beta", "seed": 2, "nemesis": ["partition", "pause"]},
             {"valid": False, "checks": {}, "stats": {"history_lines": 12}})
    make_run(root, "alpha/20260103T100000", {"name": "alpha", "seed": 3, "faults": {"clock": {}}})
    make_run(root, "broken/20260104T100000", None).joinpath("test.json").write_text("{nope")
    (root / "latest").symlink_to("alpha/20260103T100000")
    return root


@pytest.fixture
def server(results: Path) -> Iterator[ResultsServer]:
    srv = ResultsServer(("127.0.0.1", 0), results)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=10)


def get(server: ResultsServer, path: str) -> tuple[int, dict[str, str], bytes]:
    """GET `path` exactly as written (no normalisation by a client library)."""
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_scan_lists_runs_newest_first_and_names_unreadable_folders(results):
    runs, bad = scan(results)
    assert [r.path for r in runs] == [
        "alpha/20260103T100000", "beta/20260102T100000", "alpha/20260101T100000"]
    assert [(r.verdict, r.ops, r.faults, r.seed) for r in runs] == [
        ("not checked", None, ("clock",), 3), ("invalid", 12, ("partition", "pause"), 2),
        ("valid", 100, ("kill",), 1)]
    assert runs[2].files == {"report.html"}
    [broken] = bad
    assert broken.path == "broken/20260104T100000" and "not valid JSON" in broken.reason


def test_index_shows_every_run_and_filters_by_verdict_and_test(server):
    status, headers, body = get(server, "/")
    html = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    rows = [html.index(f'data-path="{p}"') for p in
            ("alpha/20260103T100000", "beta/20260102T100000", "alpha/20260101T100000")]
    assert rows == sorted(rows), "newest first"
    assert 'href="/runs/alpha/20260101T100000/report.html"' in html
    assert 'href="/archive/beta/20260102T100000.tar.gz"' in html
    assert "broken/20260104T100000" in html and "not valid JSON" in html
    invalid = get(server, "/?verdict=invalid")[2].decode()
    assert invalid.count('class="run"') == 1 and 'data-path="beta/20260102T100000"' in invalid
    alpha = get(server, "/?test=alpha&verdict=")[2].decode()
    assert alpha.count('class="run"') == 2 and "beta/2026" not in alpha.split('id="runs"')[1]


def test_files_and_folders_of_runs_are_served(server):
    status, headers, body = get(server, "/runs/alpha/20260101T100000/nodes/n1/node.log")
    assert (status, body) == (200, b"node log\n") and headers["Content-Type"].startswith("text/plain")
    status, headers, _ = get(server, "/runs/alpha/20260101T100000")
    assert status == 301 and headers["Location"] == "/runs/alpha/20260101T100000/"
    status, _, body = get(server, "/runs/alpha/20260101T100000/")
    assert status == 200 and b'href="report.html"' in body and b"ssh" not in body and b"outside" not in body
    assert get(server, "/runs/latest/test.json")[0] == 200, "a symlink inside the results folder is followed"
    assert get(server, "/runs/alpha/20260101T100000/missing.txt")[0] == 404
    assert get(server, "/elsewhere")[0] == 404


@pytest.mark.parametrize("path", [
    "/runs/../secret.txt",
    "/runs/%2e%2e/secret.txt",
    "/runs/alpha/../../secret.txt",
    "/runs/alpha%2f..%2f..%2fsecret.txt",
    "/runs//etc/passwd",
    "/runs/%2fetc/passwd",
    "/runs/alpha/20260101T100000/outside/secret.txt",
    "/runs/alpha/20260101T100000/ssh/id_ed25519",
    "/archive/../results.tar.gz",
])
def test_paths_out_of_the_results_folder_are_refused(server, path):
    status, _, body = get(server, path)
    assert status in (403, 404) and b"not for the web" not in body and b"PRIVATE" not in body


def test_inside_refuses_what_leads_out(results):
    root = results.resolve()
    assert inside(root, "alpha/20260101T100000/report.html").name == "report.html"
    for rel in ("../secret.txt", "/etc/passwd", "alpha/20260101T100000/outside", "a\0b"):
        with pytest.raises(Refused):
            inside(root, rel)
    with pytest.raises(FileNotFoundError):
        inside(root, "alpha/nothing")


def test_a_run_downloads_as_a_tar_gz_without_its_key_or_links_out(server):
    status, headers, body = get(server, "/archive/alpha/20260101T100000.tar.gz")
    assert status == 200 and headers["Content-Type"] == "application/gzip"
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''alpha-20260101T100000.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        assert tar.extractfile("alpha-20260101T100000/nodes/n1/node.log").read() == b"node log\n"
    assert names == ["alpha-20260101T100000/history.jsonl", "alpha-20260101T100000/nodes/n1/node.log",
                     "alpha-20260101T100000/report.html", "alpha-20260101T100000/results.json",
                     "alpha-20260101T100000/test.json"]
    assert get(server, "/archive/alpha.tar.gz")[0] == 404, "only run folders are archives"


def test_a_missing_results_folder_or_a_busy_port_exits_254_saying_what_to_do(tmp_path, results, capsys):
    assert run_subcommands("harness", "", COMMANDS, ["serve", "--results", str(tmp_path / "none")]) == 254
    assert "does not exist" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        argv = ["serve", "--results", str(results), "--port", str(port)]
        assert run_subcommands("harness", "", COMMANDS, argv) == 254
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        run_subcommands("harness", "", COMMANDS, ["serve", "--port", "70000"])
    assert bad.value.code == 254


def test_the_command_serves_on_loopback_and_stops_cleanly_on_ctrl_c(results):
    with serve(results) as served:
        assert served.url.startswith("http://127.0.0.1:")
        host, port = served.url.removeprefix("http://").rstrip("/").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
        conn.close()
        served.proc.send_signal(signal.SIGINT)
        assert served.proc.wait(timeout=30) == 0
        assert "stopped" in served.proc.stderr.read()
