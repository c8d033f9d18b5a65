"""SSH control of a node container with paramiko.

`Ssh` is one connection per node (commands are multiplexed as channels over it):
`exec(command, timeout)` returns the exit status and output, `check` raises on failure,
`upload`/`download` copy files over SFTP, `download_tree` copies a folder as a tar stream.
`RemoteProcess` is a long-running process on the node (the DLedger node itself), detached
from any SSH session and tracked by a pid file, so it can be started, signalled (`KILL`,
`TERM`, `STOP`, `CONT`) and watched.
"""

from __future__ import annotations

import io
import select
import shlex
import socket
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import paramiko
import tenacity

from harness.errors import CommandFailed, CommandTimeout, HarnessError, SshRefused
from harness.wait import wait_for


@dataclass(frozen=True)
class Result:
    """What a remote command did: exit status and its output."""

    status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0


class Ssh:
    """One SSH connection to a node, as `user` (root by default), authenticated with `key` or with
    ssh-agent's keys (`agent`).

    `exec` and `check` may be called from several threads at once (each is its own
    channel); the SFTP copies share one session and are for one thread at a time. `wrap`
    rewrites every command before it runs (e.g. through `sudo`); SFTP copies run as `user`.
    Host keys are checked against `known_hosts` when given, else accepted.
    """

    def __init__(self, host: str, port: int, key: paramiko.PKey | None, *, name: str = "", user: str = "root",
                 agent: bool = False, known_hosts: Path | None = None,
                 wrap: Callable[[str], str] | None = None,
                 hint: str = "is the container running sshd? see `docker logs` of it"):
        self.host = host
        self.port = port
        self.name = name or f"{host}:{port}"
        self._key = key
        self._user = user
        self._agent = agent
        self._known_hosts = known_hosts
        self._wrap = wrap
        self._hint = hint
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None

    def connect(self, wait: float = 30.0) -> None:
        """Connect, retrying until sshd answers and accepts the key, for at most `wait` seconds.

        SshRefused at once when the host refuses the login or its host key does not match
        `known_hosts`; HarnessError when it does not answer within `wait`.
        """
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_delay(wait), wait=tenacity.wait_fixed(0.2),
            retry=tenacity.retry_if_exception(_transient), reraise=True)
        try:
            retrying(self._connect_once)
        except paramiko.AuthenticationException as e:
            how = "ssh-agent's keys" if self._agent else "the key"
            raise SshRefused(f"{self.name}: {self._user}@{self.host}:{self.port} refused {how} ({e}); check "
                             "the user and that the public key is in its ~/.ssh/authorized_keys") from e
        except paramiko.BadHostKeyException as e:
            raise SshRefused(f"{self.name}: the host key of {self.host}:{self.port} does not match "
                             f"{self._known_hosts} ({e})") from e
        except (OSError, paramiko.SSHException) as e:
            raise HarnessError(f"cannot SSH to {self.name} at {self.host}:{self.port} within {wait:.0f} s "
                               f"({e or type(e).__name__}); {self._hint}") from e

    def _connect_once(self) -> None:
        # Until sshd runs, docker's port proxy accepts and then drops the connection; wait for
        # the banner first, so paramiko does not log a traceback for each early try.
        with socket.create_connection((self.host, self.port), timeout=5) as probe:
            if not probe.recv(4).startswith(b"SSH-"):
                raise OSError(f"no SSH banner from {self.host}:{self.port} yet")
        client = paramiko.SSHClient()
        if self._known_hosts is not None:
            client.load_host_keys(str(self._known_hosts))
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:  # containers make fresh host keys at start: there is nothing to pin
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(self.host, self.port, username=self._user, pkey=self._key, allow_agent=self._agent,
                           look_for_keys=False, timeout=5, banner_timeout=5, auth_timeout=5)
        except BaseException:
            client.close()
            raise
        self._client = client

    def _transport(self) -> paramiko.Transport:
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            raise HarnessError(f"SSH connection to {self.name} is not open: call connect() first")
        return transport

    def exec(self, command: str, timeout: float = 30.0) -> Result:
        """Run `command` with `sh -c` semantics; raise CommandTimeout if it runs past `timeout` seconds.

        On a timeout the channel is closed; a command that ignores the hang-up may go on running.
        """
        out = io.BytesIO()
        status, err = self._run(command, timeout, out)
        return Result(status, out.getvalue().decode(errors="replace"), err)

    def _run(self, command: str, timeout: float, out: BinaryIO) -> tuple[int, str]:
        """Run `command`, streaming its stdout into `out`; its exit status and stderr."""
        deadline = time.monotonic() + timeout
        chan = self._transport().open_session(timeout=timeout)
        try:
            chan.exec_command(self._wrap(command) if self._wrap else command)
            chan.shutdown_write()
            err = bytearray()
            fd = chan.fileno()
            while True:
                while chan.recv_ready():
                    out.write(chan.recv(65536))
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.eof_received and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CommandTimeout(f"{self.name}: `{command}` did not finish within {timeout} s")
                select.select([fd], [], [], remaining)
            if not chan.status_event.wait(max(0.0, deadline - time.monotonic())):
                raise CommandTimeout(f"{self.name}: `{command}` gave no exit status within {timeout} s")
            return chan.recv_exit_status(), err.decode(errors="replace")
        finally:
            chan.close()

    def check(self, command: str, timeout: float = 30.0) -> str:
        """Run `command`, return its stdout; raise CommandFailed naming the status and stderr if it fails."""
        result = self.exec(command, timeout)
        if not result.ok:
            raise CommandFailed(f"{self.name}: `{command}` exited {result.status}: {result.stderr.strip()}")
        return result.stdout

    def _sftp_client(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._sftp = paramiko.SFTPClient.from_transport(self._transport())
            if self._sftp is None:
                raise HarnessError(f"{self.name}: sshd refused the SFTP subsystem")
        return self._sftp

    def upload(self, local: Path, remote: str) -> None:
        """Copy a local file to `remote` on the node."""
        self._sftp_client().put(str(local), remote)

    def download(self, remote: str, local: Path) -> None:
        """Copy the node's file `remote` to `local` (parent folders are created)."""
        local.parent.mkdir(parents=True, exist_ok=True)
        self._sftp_client().get(remote, str(local))

    def download_tree(self, remote: str, local: Path, timeout: float = 300.0) -> list[Path]:
        """Copy the node's folder `remote` under `local`; return the files copied.

        It travels as one tar stream, compressed fast (`gzip -1`); holes in sparse files (preallocated store
        segments) stay holes. Files that change while they are read (a running node) are
        copied as they were at that moment.
        """
        command = f"tar --sparse --warning=no-file-changed -C {shlex.quote(remote)} -I 'gzip -1' -cf - ."
        with tempfile.TemporaryFile() as archive:
            status, err = self._run(command, timeout, archive)
            if status not in (0, 1):  # GNU tar: 1 means some file changed while it was read
                raise CommandFailed(f"{self.name}: `{command}` exited {status}: {err.strip()}")
            archive.seek(0)
            with tarfile.open(fileobj=archive, mode="r:gz") as tar:
                files = [member.name for member in tar.getmembers() if member.isfile()]
                tar.extractall(local, filter="data")
        return [local / name for name in files]

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None


def _transient(error: BaseException) -> bool:
    """Worth another try: sshd not up yet, a dropped connection; not a refused login or a wrong host key."""
    refused = (paramiko.AuthenticationException, paramiko.BadHostKeyException)
    return isinstance(error, OSError | paramiko.SSHException) and not isinstance(error, refused)


class RemoteProcess:
    """A process on a node that outlives the SSH command that started it, tracked by a pid file."""

    def __init__(self, ssh: Ssh, pidfile: str, logfile: str):
        self.ssh = ssh
        self.pidfile = pidfile
        self.logfile = logfile

    def start(self, command: str) -> int:
        """Start `command` detached (own session, output to the log file); return its pid."""
        if self.running():
            raise HarnessError(f"{self.ssh.name}: the process of {self.pidfile} already runs; stop it first")
        inner = shlex.quote(f"exec {command}")
        pid = self.ssh.check(
            f"setsid sh -c {inner} >> {shlex.quote(self.logfile)} 2>&1 < /dev/null & "
            f"echo $! > {shlex.quote(self.pidfile)}; echo $!")
        return int(pid)

    def pid(self) -> int | None:
        """The pid last started, or None if the process was never started."""
        result = self.ssh.exec(f"cat {shlex.quote(self.pidfile)}")
        return int(result.stdout) if result.ok and result.stdout.strip() else None

    def signal(self, signal_name: str) -> bool:
        """Send a signal (`KILL`, `TERM`, `STOP`, `CONT` ...); False if there was no such process."""
        pid = self.pid()
        return pid is not None and self.ssh.exec(f"kill -s {signal_name} {pid}").ok

    def state(self) -> str | None:
        """The process's `ps` state letter (R, S, D, T stopped, Z zombie), or None if it is gone."""
        pid = self.pid()
        if pid is None:
            return None
        out = self.ssh.exec(f"ps -o stat= -p {pid}").stdout.strip()
        return out[:1] or None

    def running(self) -> bool:
        """True while the process exists (also when stopped by SIGSTOP)."""
        return self.state() not in (None, "Z")

    def wait_exit(self, timeout: float = 10.0) -> None:
        """Wait until the process is gone; HarnessError if it is still there after `timeout` seconds."""
        wait_for(lambda: not self.running(), timeout,
                 f"{self.ssh.name}: the process of {self.pidfile} still runs {timeout} s after the signal",
                 interval=0.05)
