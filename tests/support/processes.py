"""Which processes run, read from /proc: for tests that check nothing outlives what started it."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2:].split()


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, exited and waiting for its parent's wait, does not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The running processes whose parent is `pid`."""
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) and fields[1] == str(pid):
            found.append(int(entry.name))
    return [child for child in found if running(child)]


def with_argument(text: str) -> list[int]:
    """The running processes with `text` in their command line."""
    found = []
    for entry in PROC.iterdir():
        try:
            argv = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if text.encode() in argv and running(int(entry.name)):
            found.append(int(entry.name))
    return found


def command(pid: int) -> str:
    """`pid`'s command line, spaces between the arguments ('' when it is gone)."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    return argv.replace(b"\0", b" ").decode(errors="replace").strip()


def java_children(pid: int) -> list[int]:
    """`pid`'s running java children: a checker's Spark JVM (spark-submit execs java)."""
    return [child for child in children(pid) if Path(command(child).split(" ")[0]).name == "java"]
