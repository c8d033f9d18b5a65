"""The simulator compiled with mypyc: the same source, about 1.6 times the seeds per second.

`python -m nodes build-sim` (`make sim-build`) copies the `nodes` package to
`build/sim/<digest>/` and compiles there, with mypyc and the C compiler, every module the
simulator imports but those in INTERPRETED. The digest covers each source file of `nodes`,
the interpreter's ABI and mypy's version, so an edited source never runs stale code: its
digest has no build until the next `build-sim`.

`simulate-many` runs its seeds in workers started on the build (`worker_context`), when one
matches the sources; the parent only deals seeds and adds up. The tests patch the
interpreted modules (tests/sim/test_guards.py) and never load the build;
tests/sim/test_compiled.py holds both to the same results, seed by seed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.context import BaseContext
from pathlib import Path

from nodes.cliparse import EXIT_INTERNAL, EXIT_VALID, UsageError

SUMMARIES = {"build-sim": "compile the simulator with mypyc (once per change of the sources)"}
PACKAGE = Path(__file__).resolve().parents[1]  # the `nodes` directory
ROOT_MODULE = "nodes.sim.cluster"  # the simulator: what it imports is compiled
# what the simulator imports and runs interpreted, and why
INTERPRETED = {
    "nodes": "a package's __init__",
    "nodes.sim": "a package's __init__",
    "nodes.store": "a package's __init__",
    "nodes.ha": "a package's __init__",
    "nodes.sim.config": "simulate-many pickles SimConfig to its workers; mypyc's frozen classes "
                        "do not unpickle",
    "nodes.sim.simmap": "its classes extend bytearray and OSError; mypyc compiles no such class",
    "nodes.logic": "a protocol checked at run time, which mypyc does not compile; and SimConfig holds "
                   "its Durability, which simulate-many pickles",
    "nodes.ha.node": "HaNode's handler table names its methods in the class body, which mypyc's "
                     "native classes do not allow",
}
ENGINES = ("auto", "compiled", "interpreted")
COMPLETE = "COMPLETE"  # written last into a build: the digest, then the compiled modules


def build_root() -> Path:
    """Where builds live: $DLEDGER_CHAOS_SIM_BUILD, else `build/sim` beside the package."""
    return Path(os.environ.get("DLEDGER_CHAOS_SIM_BUILD") or PACKAGE.parent / "build" / "sim")


def source_digest(package: Path = PACKAGE) -> str:
    """A digest of every `.py` under `package`, the interpreter's ABI and mypy's version."""
    h = hashlib.sha256(f"{sys.implementation.cache_tag} mypy {_mypy_version()}\n".encode())
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            h.update(f"{path.relative_to(package).as_posix()}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:20]


def _mypy_version() -> str:
    try:
        return importlib.metadata.version("mypy")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def fresh_build(root: Path | None = None, digest: str | None = None) -> Path | None:
    """The complete build for the current sources (the directory to put on sys.path), or None."""
    path = (root or build_root()) / (digest or source_digest())
    marker = path / COMPLETE
    if marker.is_file() and marker.read_text().split("\n", 1)[0] == path.name:
        return path
    return None


def choose(engine: str) -> Path | None:
    """The build `engine` asks for: None runs interpreted. UsageError if `compiled` has none."""
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine == "interpreted":
        return None
    build = fresh_build()
    if build is None and engine == "compiled":
        raise UsageError("--engine compiled: no compiled simulator for these sources; "
                         "build it with `make sim-build` (or `python -m nodes build-sim`)")
    if build is None:
        print("simulate-many: no compiled simulator for these sources (`make sim-build` builds it, "
              "about a minute): running interpreted, about 1.6 times slower", file=sys.stderr, flush=True)
    return build


@contextmanager
def worker_context(build: Path | None) -> Iterator[BaseContext]:
    """A multiprocessing context whose workers run on `build` (None: forks of this process).

    The workers are spawned with `build` first on sys.path, so they import the compiled
    `nodes`; this process keeps its own (`nodes` is imported already, and its submodules are
    found through the package's own path)."""
    if build is None:
        yield multiprocessing.get_context("fork")
        return
    sys.path.insert(0, str(build))
    try:
        yield multiprocessing.get_context("spawn")
    finally:
        sys.path.remove(str(build))


def engine_here() -> str:
    """'compiled' if this process runs the compiled simulator, else 'interpreted' (raises if the
    simulator does not import: a worker would otherwise die on its first seed, and its seed be lost)."""
    module = importlib.import_module(ROOT_MODULE)
    suffix = Path(module.__file__ or "").name
    compiled = any(suffix.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)
    return "compiled" if compiled else "interpreted"


def modules_to_compile(package: Path) -> list[str]:
    """The modules `ROOT_MODULE` imports from the `nodes` under `package`'s parent, but INTERPRETED."""
    code = (f"import sys, {ROOT_MODULE}; "
            "print('\\n'.join(sorted(m for m in sys.modules if m == 'nodes' or m.startswith('nodes.'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=package.parent, check=True, text=True,
                         capture_output=True, env={**os.environ, "PYTHONPATH": str(package.parent)}).stdout
    return [m for m in out.split() if m not in INTERPRETED]


_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
paths = sys.argv[1:]
sys.argv[1:] = ["build_ext", "--inplace", "--parallel", str({jobs})]
setup(name="nodes-sim-compiled", py_modules=[],
      ext_modules=mypycify(["--python-version", "3.11", *paths], opt_level="3", multi_file=True))
"""


def build(root: Path | None = None, log: Callable[[str], None] = print) -> Path:
    """Compile the simulator for the current sources, unless that build exists; return it."""
    root = root or build_root()
    digest = source_digest()
    done = fresh_build(root, digest)
    if done is not None:
        log(f"build-sim: the compiled simulator is up to date ({done})")
        return done
    if _mypy_version() == "absent":
        raise RuntimeError("mypyc is missing: install the development extras (pip install -e '.[dev]')")
    started = time.monotonic()
    work = root / f".work-{digest}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        shutil.copytree(PACKAGE, work / "nodes", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        modules = modules_to_compile(work / "nodes")
        log(f"build-sim: compiling {len(modules)} modules of the simulator with mypyc into {root / digest}")
        _compile(work, [m.replace(".", "/") + ".py" for m in modules], log)
        shutil.rmtree(work / "build")
        (work / COMPLETE).write_text(f"{digest}\n" + "\n".join(modules) + "\n")
        target = root / digest
        try:
            work.rename(target)
        except OSError:  # a build for the same sources finished first (another process)
            if fresh_build(root, digest) is None:
                raise
        for old in root.iterdir():
            if old.name != digest and not old.name.startswith(".work-"):
                shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"build-sim: done in {time.monotonic() - started:.0f} s")
    return target


def _compile(work: Path, paths: list[str], log: Callable[[str], None]) -> None:
    """mypyc to C, then the C compiler, in `work`; each C file compiled is one line of progress."""
    setup = _SETUP.format(jobs=os.cpu_count() or 1)
    proc = subprocess.Popen([sys.executable, "-c", setup, *paths], cwd=work, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line.rstrip())
        words = line.split()
        if words and words[0].endswith(("gcc", "cc", "clang")) and "-c" in words:
            source = words[words.index("-c") + 1]
            log(f"build-sim:   cc {Path(source).name}")
    if proc.wait() != 0:
        tail = "\n".join(line for line in lines if "error" in line.lower())[-4000:] or "\n".join(lines[-40:])
        raise RuntimeError(f"compiling the simulator failed (exit {proc.returncode}; it needs a C "
                           "compiler and the Python headers; `simulate-many --engine interpreted` runs "
                           f"without):\n{tail}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--where", action="store_true",
                        help="print the build's directory for the current sources and exit (1 if none)")


def run(args: argparse.Namespace) -> int:
    if args.where:
        found = fresh_build()
        print(found or f"no compiled simulator for these sources under {build_root()}")
        return EXIT_VALID if found else 1
    try:
        build(log=lambda text: print(text, flush=True))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"build-sim: error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    return EXIT_VALID
