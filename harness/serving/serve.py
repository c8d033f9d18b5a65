"""`python -m harness serve`: browse the results folder over HTTP (index, reports, timelines, downloads).

Routes: `/` the runs, newest first (`?verdict=` and `?test=` filter them); `/runs/<path>` a
file or folder inside the results folder; `/archive/<test>/<timestamp>.tar.gz` a run folder
as a streamed archive. Nothing outside the results folder is served: `..`, absolute paths
and symlinks that lead out are refused, and so is a run's `ssh/` folder (its private key).
"""

from __future__ import annotations

import argparse
import errno
import mimetypes
import os
import shutil
import socket
import sys
import tarfile
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from jinja2 import Environment, PackageLoader

from harness.serving import runindex
from nodes.cliparse import EXIT_BAD_ARGS

PRIVATE = frozenset({"ssh"})  # run-level folders never served nor archived
TEXT = {".jsonl": "text/plain; charset=utf-8", ".log": "text/plain; charset=utf-8",
        ".js": "text/javascript; charset=utf-8"}
_ENV = Environment(loader=PackageLoader("checkers"), autoescape=True)


class Refused(Exception):
    """A path that names something outside the results folder, or private (403)."""


def inside(root: Path, rel: str) -> Path:
    """What `rel` (percent-decoded, relative to the resolved `root`) names.

    Refused when it leads out of `root` or into a private folder; FileNotFoundError when
    nothing is there.
    """
    if "\0" in rel or rel.startswith("/"):
        raise Refused(rel)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts or (len(parts) > 2 and parts[2] in PRIVATE):
        raise Refused(rel)
    path = root.joinpath(*parts)
    if not path.resolve().is_relative_to(root):
        raise Refused(rel)
    if not path.exists():
        raise FileNotFoundError(rel)
    return path


def _archive_files(run: Path) -> list[tuple[Path, str]]:
    """(file, name in the archive) for every regular file of a run folder.

    Symlinks and the private folders are left out.
    """
    prefix = f"{run.parent.name}-{run.name}"
    found = []
    for folder, dirs, files in os.walk(run):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs
                         if not (here / d).is_symlink() and not (here == run and d in PRIVATE))
        for name in sorted(files):
            path = here / name
            if path.is_file() and not path.is_symlink():
                found.append((path, f"{prefix}/{path.relative_to(run).as_posix()}"))
    return found


class Handler(BaseHTTPRequestHandler):
    """GET only; `server.root` is the resolved results folder."""

    server: ResultsServer

    def do_GET(self) -> None:
        target, _, query = self.path.partition("?")
        route = unquote(target)
        try:
            if route == "/":
                self._index(parse_qs(query))
            elif route.startswith("/runs/"):
                self._static(route.removeprefix("/runs/"), target)
            elif route == "/favicon.ico":  # pages without an icon link ask for one: none, and no error
                self.send_response(HTTPStatus.NO_CONTENT)
                self.end_headers()
            elif route.startswith("/archive/") and route.endswith(".tar.gz"):
                self._archive(route.removeprefix("/archive/").removesuffix(".tar.gz"))
            else:
                self.send_error(HTTPStatus.NOT_FOUND, "no such page: see / for the runs")
        except Refused:
            self.send_error(HTTPStatus.FORBIDDEN, "outside the results folder")
        except PermissionError:
            self.send_error(HTTPStatus.FORBIDDEN, "not readable by the server")
        except FileNotFoundError:
            self.send_error(HTTPStatus.NOT_FOUND, "not in the results folder")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(body)

    def _page(self, template: str, **context: Any) -> None:
        self._send(_ENV.get_template(template).render(**context).encode(), "text/html; charset=utf-8")

    def _index(self, query: dict[str, list[str]]) -> None:
        runs, unreadable = runindex.scan(self.server.root)
        verdict = query.get("verdict", [""])[0]
        test = query.get("test", [""])[0]
        self._page("runindex.html.j2", runs=runindex.select(runs, verdict, test), total=len(runs),
                   tests=sorted({r.test for r in runs}), verdicts=runindex.VERDICTS, verdict=verdict,
                   test=test, unreadable=unreadable, root=str(self.server.root), quote=quote)

    def _static(self, rel: str, target: str) -> None:
        path = inside(self.server.root, rel)
        if path.is_dir():
            if not target.endswith("/"):
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", target + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._listing(path, rel)
            return
        content_type = (TEXT.get(path.suffix) or mimetypes.guess_type(path.name)[0]
                        or "application/octet-stream")
        with path.open("rb") as f:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            shutil.copyfileobj(f, self.wfile)

    def _listing(self, folder: Path, rel: str) -> None:
        root = self.server.root
        parts = [p for p in rel.split("/") if p]
        entries = []
        for p in sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name)):
            private = len(parts) == 2 and p.name in PRIVATE
            if private or not p.exists() or not p.resolve().is_relative_to(root):
                continue
            entries.append({"name": p.name + ("/" if p.is_dir() else ""),
                            "size": None if p.is_dir() else p.stat().st_size})
        self._page("runfolder.html.j2", rel="/".join(parts), entries=entries,
                   run="/".join(parts) if len(parts) == 2 else None, quote=quote)

    def _archive(self, rel: str) -> None:
        run = inside(self.server.root, rel)
        if not run.is_dir() or len(run.relative_to(self.server.root).parts) != 2:
            raise FileNotFoundError(rel)
        name = f"{run.parent.name}-{run.name}.tar.gz"
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/gzip")
        self.send_header("Content-Disposition", f"attachment; filename*=UTF-8''{quote(name)}")
        self.end_headers()
        self.close_connection = True  # no length: the end of the stream ends the archive
        with tarfile.open(fileobj=self.wfile, mode="w|gz") as tar:
            for path, arcname in _archive_files(run):
                tar.add(path, arcname=arcname, recursive=False)


class ResultsServer(ThreadingHTTPServer):
    """A threading HTTP server over one results folder."""

    daemon_threads = True
    server_address: tuple[str, int]  # an AF_INET socket's name once bound (typeshed allows bytes hosts)

    def __init__(self, address: tuple[str, int], root: Path) -> None:
        self.root = root.resolve()
        super().__init__(address, Handler)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=port, default=8080, help="TCP port (0: any free one; default 8080)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--results", type=Path, default=Path("results"),
                        help="the results folder to serve (default: results)")


def port(text: str) -> int:
    """An argparse type: a TCP port number, 0 for any free one."""
    number = int(text)
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (0-65535)")
    return number


def run(args: argparse.Namespace) -> int:
    root: Path = args.results
    if not root.is_dir():
        print(f"error: results folder {root} does not exist: run a test first (make chaos) "
              "or pass --results <folder holding results/<test>/<timestamp>/>", file=sys.stderr)
        return EXIT_BAD_ARGS
    try:
        server = ResultsServer((args.host, args.port), root)
    except socket.gaierror as e:
        print(f"error: cannot resolve --host {args.host} ({e.strerror}); pass an IPv4 address",
              file=sys.stderr)
        return EXIT_BAD_ARGS
    except OSError as e:
        if e.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise
        print(f"error: cannot listen on {args.host}:{args.port} ({e.strerror}): "
              "pass another --port (--port 0 picks a free one) or --host", file=sys.stderr)
        return EXIT_BAD_ARGS
    host, bound = server.server_address[:2]
    if not str(host).startswith("127."):
        print(f"warning: listening on {host}: other machines can read these results", file=sys.stderr)
    print(f"serving {server.root} at http://{host}:{bound}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
    with server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
    return 0
