"""Key-value stores for rendezvous: TCPStore (a small socket server), FileStore, HashStore,
PrefixStore, with torch.distributed.Store's methods (set/get/add/wait/compare_set/...).

They bootstrap the engines (ranks, the NCCL unique id); no collective ever runs over them.
"""
from __future__ import annotations

import datetime
import fcntl
import os
import socket
import socketserver
import struct
import threading
import time

__all__ = ["Store", "TCPStore", "FileStore", "HashStore", "PrefixStore"]

DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)


def _secs(timeout) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _b(v) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode()
    raise TypeError(f"Store: values must be str or bytes, got {type(v).__name__}")


def _timeout_error(keys, secs) -> Exception:
    return DistStoreError(f"Timed out after {secs:.1f} s waiting for keys {list(keys)} in the "
                          "store")


class DistStoreError(RuntimeError):
    """A store operation failed or timed out (torch.distributed.DistStoreError)."""


class Store:
    """Base class: a dict-like store shared by all ranks. Subclasses implement `_data` access."""

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        self._timeout = _secs(timeout)

    @property
    def timeout(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=self._timeout)

    def set_timeout(self, timeout) -> None:
        self._timeout = _secs(timeout)

    # subclasses override these six
    def set(self, key: str, value) -> None:
        raise NotImplementedError

    def get(self, key: str) -> bytes:
        raise NotImplementedError

    def add(self, key: str, amount: int) -> int:
        raise NotImplementedError

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        raise NotImplementedError

    def check(self, keys: list[str]) -> bool:
        raise NotImplementedError

    def delete_key(self, key: str) -> bool:
        raise NotImplementedError

    def wait(self, keys: list[str], timeout=None) -> None:
        secs = self._timeout if timeout is None else _secs(timeout)
        deadline = time.monotonic() + secs
        delay = 0.001
        while not self.check(keys):
            if time.monotonic() > deadline:
                raise _timeout_error(keys, secs)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def num_keys(self) -> int:
        raise NotImplementedError

    def multi_set(self, keys, values) -> None:
        for k, v in zip(keys, values):
            self.set(k, v)

    def multi_get(self, keys) -> list[bytes]:
        return [self.get(k) for k in keys]


# ---- in memory ----------------------------------------------------------------------------

class _Table:
    """The dict behind HashStore and the TCPStore server: blocking gets through a condition."""

    def __init__(self):
        self.data: dict[str, bytes] = {}
        self.cv = threading.Condition()

    def set(self, k, v):
        with self.cv:
            self.data[k] = v
            self.cv.notify_all()

    def get(self, k, secs):
        self.wait([k], secs)
        with self.cv:
            return self.data[k]

    def add(self, k, n):
        with self.cv:
            cur = int(self.data.get(k, b"0")) + n
            self.data[k] = str(cur).encode()
            self.cv.notify_all()
            return cur

    def compare_set(self, k, expected, desired):
        with self.cv:
            cur = self.data.get(k)
            if (cur is None and expected == b"") or cur == expected:
                self.data[k] = desired
                self.cv.notify_all()
                return desired
            return expected if cur is None else cur

    def check(self, keys):
        with self.cv:
            return all(k in self.data for k in keys)

    def wait(self, keys, secs):
        with self.cv:
            if not self.cv.wait_for(lambda: all(k in self.data for k in keys), timeout=secs):
                raise _timeout_error(keys, secs)

    def delete(self, k):
        with self.cv:
            return self.data.pop(k, None) is not None


class HashStore(Store):
    """A store in this process's memory (threads only), as torch.distributed.HashStore."""

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self._t = _Table()

    def set(self, key, value):
        self._t.set(key, _b(value))

    def get(self, key):
        return self._t.get(key, self._timeout)

    def add(self, key, amount):
        return self._t.add(key, int(amount))

    def compare_set(self, key, expected_value, desired_value):
        return self._t.compare_set(key, _b(expected_value), _b(desired_value))

    def check(self, keys):
        return self._t.check(list(keys))

    def wait(self, keys, timeout=None):
        self._t.wait(list(keys), self._timeout if timeout is None else _secs(timeout))

    def delete_key(self, key):
        return self._t.delete(key)

    def num_keys(self):
        return len(self._t.data)


# ---- TCP ------------------------------------------------------------------------------------
# A frame is a count then length-prefixed byte strings; the first string names the command.

def _send(sock, parts) -> None:
    out = [struct.pack("!I", len(parts))]
    for p in parts:
        out += [struct.pack("!I", len(p)), p]
    sock.sendall(b"".join(out))


def _recv_exact(sock, n) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("TCPStore: connection closed")
        buf += chunk
    return bytes(buf)


def _recv(sock) -> list[bytes]:
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    parts = []
    for _ in range(n):
        (ln,) = struct.unpack("!I", _recv_exact(sock, 4))
        parts.append(_recv_exact(sock, ln))
    return parts


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        table: _Table = self.server.table
        while True:
            try:
                cmd, *a = _recv(self.request)
            except (ConnectionError, OSError):
                return
            try:
                out = self._run(table, cmd, a)
            except DistStoreError as e:
                out = [b"ERR", str(e).encode()]
            _send(self.request, [b"OK", *out] if out[:1] != [b"ERR"] else out)

    @staticmethod
    def _run(table, cmd, a):
        k = a[0].decode() if a else ""
        if cmd == b"SET":
            table.set(k, a[1])
            return []
        if cmd == b"GET":
            return [table.get(k, float(a[1]))]
        if cmd == b"ADD":
            return [str(table.add(k, int(a[1]))).encode()]
        if cmd == b"CAS":
            return [table.compare_set(k, a[1], a[2])]
        if cmd == b"CHECK":
            return [b"1" if table.check([x.decode() for x in a]) else b"0"]
        if cmd == b"WAIT":
            table.wait([x.decode() for x in a[1:]], float(a[0]))
            return []
        if cmd == b"DEL":
            return [b"1" if table.delete(k) else b"0"]
        if cmd == b"NUM":
            return [str(len(table.data)).encode()]
        return [b"ERR", b"unknown command " + cmd]


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class TCPStore(Store):
    """A store served by a socket server in the master process (a daemon thread).

    >>> s = TCPStore("127.0.0.1", 0, 1, is_master=True)
    >>> s.set("k", "v"); s.get("k")
    b'v'
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout=DEFAULT_TIMEOUT, wait_for_workers: bool = True,
                 multi_tenant: bool = False, master_listen_fd=None, use_libuv=True):
        super().__init__(timeout)
        self.host, self.world_size = host_name, world_size
        self._server = None
        if is_master:
            self._server = _Server((host_name, int(port)), _Handler)
            self._server.table = _Table()
            port = self._server.server_address[1]
            threading.Thread(target=self._server.serve_forever, daemon=True,
                             name="ember-TCPStore").start()
        self.port = int(port)
        self._lock = threading.Lock()
        self._sock = self._connect()
        if world_size is not None and wait_for_workers:
            n = self.add("__ember_store_workers", 1)
            if is_master and world_size > 1 and n < world_size:
                self._wait_count("__ember_store_workers", world_size)

    def _connect(self):
        deadline = time.monotonic() + self._timeout
        delay = 0.01
        while True:
            try:
                s = socket.create_connection((self.host, self.port), timeout=self._timeout)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(None)
                return s
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistStoreError(
                        f"TCPStore: could not connect to {self.host}:{self.port} within "
                        f"{self._timeout:.1f} s ({e})") from e
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _wait_count(self, key, n):
        deadline = time.monotonic() + self._timeout
        while int(self.get(key)) < n:
            if time.monotonic() > deadline:
                raise _timeout_error([key], self._timeout)
            time.sleep(0.01)

    def _call(self, *parts, wait: float | None = None):
        with self._lock:
            self._sock.settimeout(None if wait is None else wait + 5.0)
            try:
                _send(self._sock, [p if isinstance(p, bytes) else str(p).encode() for p in parts])
                status, *out = _recv(self._sock)
            except TimeoutError as e:
                raise DistStoreError(f"TCPStore: no answer from {self.host}:{self.port}") from e
        if status == b"ERR":
            raise DistStoreError(out[0].decode())
        return out

    def set(self, key, value):
        self._call(b"SET", key, _b(value))

    def get(self, key):
        return self._call(b"GET", key, repr(self._timeout), wait=self._timeout)[0]

    def add(self, key, amount):
        return int(self._call(b"ADD", key, str(int(amount)))[0])

    def compare_set(self, key, expected_value, desired_value):
        return self._call(b"CAS", key, _b(expected_value), _b(desired_value))[0]

    def check(self, keys):
        return self._call(b"CHECK", *keys)[0] == b"1"

    def wait(self, keys, timeout=None):
        secs = self._timeout if timeout is None else _secs(timeout)
        self._call(b"WAIT", repr(secs), *keys, wait=secs)

    def delete_key(self, key):
        return self._call(b"DEL", key)[0] == b"1"

    def num_keys(self):
        return int(self._call(b"NUM")[0])

    def close(self) -> None:
        """Close the connection; the master also stops serving."""
        self._sock.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __del__(self):
        # no server.shutdown() here: at interpreter exit it would wait on a frozen thread
        try:
            self._sock.close()
        except Exception:
            pass


# ---- file -----------------------------------------------------------------------------------

class FileStore(Store):
    """A store in one file shared by all ranks (a log of frames under an flock).

    >>> import tempfile; s = FileStore(tempfile.mktemp(), 1)
    >>> s.add("n", 2), s.add("n", 3)
    (2, 5)
    """

    def __init__(self, file_name: str, world_size: int = -1, timeout=DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.path, self.world_size = file_name, world_size
        open(file_name, "ab").close()

    def _locked(self, fn):
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                data = self._parse(f.read())
                res, new = fn(data)
                if new is not None:
                    f.seek(0, os.SEEK_END)
                    k, v = new
                    kb = k.encode()
                    f.write(struct.pack("!II", len(kb), len(v)) + kb + v)
                    f.flush()
                return res
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @staticmethod
    def _parse(raw: bytes) -> dict:
        data, i = {}, 0
        while i + 8 <= len(raw):
            kl, vl = struct.unpack_from("!II", raw, i)
            k = raw[i + 8:i + 8 + kl].decode()
            data[k] = raw[i + 8 + kl:i + 8 + kl + vl]
            i += 8 + kl + vl
        return {k: v for k, v in data.items() if v != b"\xff__deleted__"}

    def set(self, key, value):
        v = _b(value)
        self._locked(lambda d: (None, (key, v)))

    def get(self, key):
        self.wait([key])
        return self._locked(lambda d: (d[key], None))

    def add(self, key, amount):
        def f(d):
            cur = int(d.get(key, b"0")) + int(amount)
            return cur, (key, str(cur).encode())
        return self._locked(f)

    def compare_set(self, key, expected_value, desired_value):
        exp, des = _b(expected_value), _b(desired_value)

        def f(d):
            cur = d.get(key)
            if (cur is None and exp == b"") or cur == exp:
                return des, (key, des)
            return (exp if cur is None else cur), None
        return self._locked(f)

    def check(self, keys):
        return self._locked(lambda d: (all(k in d for k in keys), None))

    def delete_key(self, key):
        return self._locked(lambda d: (key in d, (key, b"\xff__deleted__") if key in d else None))

    def num_keys(self):
        return self._locked(lambda d: (len(d), None))


class PrefixStore(Store):
    """Another store's keys under `prefix/` (one per process group, as PyTorch's)."""

    def __init__(self, prefix: str, store: Store):
        super().__init__(store._timeout)
        self.prefix, self.underlying_store = prefix, store

    def _k(self, key):
        return f"{self.prefix}/{key}"

    def set(self, key, value):
        self.underlying_store.set(self._k(key), value)

    def get(self, key):
        return self.underlying_store.get(self._k(key))

    def add(self, key, amount):
        return self.underlying_store.add(self._k(key), amount)

    def compare_set(self, key, expected_value, desired_value):
        return self.underlying_store.compare_set(self._k(key), expected_value, desired_value)

    def check(self, keys):
        return self.underlying_store.check([self._k(k) for k in keys])

    def wait(self, keys, timeout=None):
        self.underlying_store.wait([self._k(k) for k in keys], timeout)

    def delete_key(self, key):
        return self.underlying_store.delete_key(self._k(key))

    def num_keys(self):
        return self.underlying_store.num_keys()
