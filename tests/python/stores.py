"""The block stores the adapters' tests run against: the in-process stand-in
(memory_daemon.py), always; and kvtierd itself, started by the test as a
child process on a Unix socket in a temporary folder, where the build has it
(KVTIERD_BIN) and the package has kvtier.Client.

A store is a context manager whose connect(tenant) returns a kvtier.Client.
"""

import os
import pathlib
import signal
import subprocess
import tempfile
import time
import unittest

import kvtier
from kvtier import _kvtier
from memory_daemon import MemoryDaemon

TENANTS = {"engine": "engine-token", "other": "other-token"}
KVTIERD_BIN = os.environ.get("KVTIERD_BIN", "")


class MemoryStore:
    name = "memory"

    def __init__(self, block_bytes, quota_blocks=None):
        self.block_bytes = block_bytes
        self.daemon = MemoryDaemon(block_bytes, quota_blocks)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def connect(self, tenant="engine"):
        return kvtier.Client(None, _raw=self.daemon.connect(tenant))

    def kill(self):
        self.daemon.gone = True


class Kvtierd:
    """kvtierd with DRAM only, two tenants (no quota unless given)."""

    name = "kvtierd"

    def __init__(self, block_bytes, dram_bytes=None, quota_blocks=None):
        self.block_bytes = block_bytes
        self.dram_bytes = dram_bytes or 64 * block_bytes
        self.quota_blocks = quota_blocks or {}
        self.killed = False

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="kvtierd-test-")
        folder = pathlib.Path(self._tmp.name)
        self.socket = str(folder / "kvtierd.sock")
        tenants = "".join(
            f'[[tenant]]\nname = "{name}"\ntoken = "{token}"\nquota_blocks = {self.quota_blocks.get(name, 0)}\n'
            for name, token in TENANTS.items())
        config = folder / "daemon.toml"
        config.write_text(f'[daemon]\nsocket = "{self.socket}"\nmetrics = ""\nblock_bytes = "{self.block_bytes}"\n'
                          f'[dram]\nbytes = "{self.dram_bytes}"\n{tenants}')
        self.log = open(folder / "kvtierd.log", "a+")  # O_APPEND: the daemon writes at the end whatever we read
        self.process = subprocess.Popen([KVTIERD_BIN, str(config)], stdout=self.log, stderr=subprocess.STDOUT)
        # The socket file appears at bind(), before listen() and the signal
        # handlers: the daemon's "listening" line says it is ready for both.
        deadline = time.monotonic() + 30
        while "kvtierd: listening on" not in self._log_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self._stop()
                raise RuntimeError(f"kvtierd did not start:\n{self._log_text()}")
            time.sleep(0.01)
        return self

    def _log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def _stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def __exit__(self, *exc):
        rc = self._stop()
        log = self._log_text()
        self.log.close()
        self._tmp.cleanup()
        if rc != 0 and exc[0] is None and not self.killed:
            raise AssertionError(f"kvtierd exited {rc} after SIGTERM:\n{log}")
        return False

    def kill(self):
        """SIGKILL: the daemon is gone without a word to its clients."""
        self.killed = True
        self.process.kill()
        self.process.wait()

    def connect(self, tenant="engine", token=None):
        return kvtier.Client(self.socket, tenant=tenant, token=TENANTS[tenant] if token is None else token)


def have_kvtierd():
    return bool(KVTIERD_BIN) and hasattr(_kvtier, "Client")


def needs_kvtierd(cls):
    return unittest.skipUnless(have_kvtierd(), "kvtierd or kvtier.Client is not part of this build")(cls)
