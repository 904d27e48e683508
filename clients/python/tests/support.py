"""What the tests share: the real sidecar binary, started as a process, and
small local peers (a counting proxy, a broken server) that stand between
the client and it or in for something that is not a sidecar."""

from __future__ import annotations

import atexit
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "config" / "samples"

_bin: Optional[str] = None
_bundle: Optional[str] = None
_tmp = tempfile.mkdtemp(prefix="tgpy-")
atexit.register(shutil.rmtree, _tmp, True)


def toolgate_bin() -> str:
    """TOOLGATE_BIN, else cmd/toolgate built once into a temporary dir."""
    global _bin
    if _bin is None:
        env = os.environ.get("TOOLGATE_BIN")
        if env:
            if not os.access(env, os.X_OK):
                raise RuntimeError("TOOLGATE_BIN=%s is not an executable" % env)
            _bin = env
        else:
            out = os.path.join(_tmp, "toolgate")
            subprocess.run(["go", "build", "-o", out, "./cmd/toolgate"], cwd=REPO, check=True)
            _bin = out
    return _bin


def sample_bundle() -> str:
    """The bundle of every sample Policy and the FrozenAgent, as
    `toolgate bundle -f config/samples` prints it."""
    global _bundle
    if _bundle is None:
        path = os.path.join(_tmp, "samples-bundle.json")
        with open(path, "wb") as f:
            subprocess.run([toolgate_bin(), "bundle", "-f", str(SAMPLES)], stdout=f, check=True)
        _bundle = path
    return _bundle


def policy_bundle(manifests: str) -> str:
    """The bundle of Policy manifests (YAML text), written into a bundle
    dir of their own and built as `toolgate bundle -f DIR` builds it."""
    d = tempfile.mkdtemp(prefix="policies-", dir=_tmp)
    with open(os.path.join(d, "policies.yaml"), "w") as f:
        f.write(manifests)
    path = os.path.join(d, "bundle.json")
    with open(path, "wb") as f:
        subprocess.run([toolgate_bin(), "bundle", "-f", os.path.join(d, "policies.yaml")], stdout=f, check=True)
    return path


#: The ask rule the clients' tests share (clients/testdata/pay-ask.yaml):
#: pay over 1000 asks for a person.
ASK_POLICY = REPO / "clients" / "testdata" / "pay-ask.yaml"


def ask_bundle() -> str:
    """The bundle of ASK_POLICY."""
    return policy_bundle(ASK_POLICY.read_text())


#: The result rules the clients' tests share (clients/testdata/results.yaml):
#: an AWS key in a result is redacted, CONFIDENTIAL withheld, a structured
#: count over 100 withheld.
RESULT_POLICY = REPO / "clients" / "testdata" / "results.yaml"


def results_bundle() -> str:
    """The bundle of RESULT_POLICY."""
    return policy_bundle(RESULT_POLICY.read_text())


def sample_request(name: str) -> dict:
    with open(SAMPLES / "requests" / name) as f:
        return json.load(f)


class Sidecar:
    """A real `toolgate sidecar` process serving on a loopback port and a
    Unix socket. tcp and unix are client URLs."""

    def __init__(self, bundle_file: Optional[str] = None, *, decision_log: str = "none", args: List[str] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="tgpy", dir="/tmp")  # a socket path must stay < 108 bytes
        self.sock = os.path.join(self.dir, "s.sock")
        self.bundle_file = bundle_file if bundle_file is not None else os.path.join(self.dir, "absent.json")
        self.stdout_path = os.path.join(self.dir, "stdout")
        self.stderr_path = os.path.join(self.dir, "stderr")
        cmd = [
            toolgate_bin(), "sidecar",
            "--bundle-file", self.bundle_file,
            "--listen", "127.0.0.1:0",
            "--listen", "unix:" + self.sock,
            "--decision-log", decision_log,
            "--poll-interval", "100ms",
        ] + list(args)
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            self._wait_listening()
            if os.path.exists(self.bundle_file):
                self._wait_ready()
        except BaseException:
            self.kill()
            raise

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            addrs = []
            with open(self.stderr_path) as f:
                for line in f:
                    if 'msg="serving decisions"' in line:
                        addrs.append(line.split(" addr=", 1)[1].split(" ", 1)[0])
            if len(addrs) == 2:
                for a in addrs:
                    if a.startswith("/"):
                        self.unix = "unix://" + a
                    else:
                        self.tcp = "http://" + a
                        self.tcp_addr = a
                return
            if self.proc.poll() is not None:
                raise RuntimeError("the sidecar exited (%s): %s" % (self.proc.returncode, self.stderr()))
            time.sleep(0.01)
        raise RuntimeError("the sidecar did not start listening: " + self.stderr())

    def _wait_ready(self) -> None:
        host, port = self.tcp_addr.rsplit(":", 1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection(host, int(port), timeout=2)
                c.request("GET", "/readyz")
                status = c.getresponse().status
                c.close()
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("the sidecar did not load its bundle: " + self.stderr())

    def stderr(self) -> str:
        with open(self.stderr_path) as f:
            return f.read()

    def decision_log(self) -> List[dict]:
        with open(self.stdout_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def wait_decision_log(self, pred, count: int, timeout: float = 5.0) -> List[dict]:
        """The decision log lines matching pred once there are count of them:
        the sidecar writes its log in batches, a few milliseconds after the
        decisions."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [d for d in self.decision_log() if pred(d)]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.01)

    def metric(self, name: str) -> float:
        """A metric's value from GET /metrics (the sum over its label sets)."""
        host, port = self.tcp_addr.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        total, found = 0.0, False
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        if not found:
            raise KeyError(name)
        return total

    def stop(self) -> None:
        """SIGTERM: the sidecar drains and flushes its decision log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: gone mid-run, without closing anything itself."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_sidecar(test: unittest.TestCase, bundle_file: Optional[str] = None, **kw) -> Sidecar:
    sc = Sidecar(bundle_file, **kw)
    test.addCleanup(sc.close)
    return sc


def start_class_sidecar(cls: type, bundle_file: Optional[str] = None, **kw) -> Sidecar:
    sc = Sidecar(bundle_file, **kw)
    cls.addClassCleanup(sc.close)
    return sc


class _Listener:
    """A listening socket, TCP on loopback or Unix, with its client URL."""

    def __init__(self, unix: bool, tls: Optional[ssl.SSLContext] = None) -> None:
        self.tls = tls
        if unix:
            self.dir = tempfile.mkdtemp(prefix="tgpy", dir="/tmp")
            path = os.path.join(self.dir, "p.sock")
            self.ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.ln.bind(path)
            self.url = "unix://" + path
        else:
            self.dir = None
            self.ln = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.ln.bind(("127.0.0.1", 0))
            self.url = "http://127.0.0.1:%d" % self.ln.getsockname()[1]
        self.ln.listen(64)
        self.conns: List[socket.socket] = []
        self.lock = threading.Lock()
        self.accepts = 0
        self.closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self.ln.accept()
            except OSError:
                return
            with self.lock:
                if self.closed:
                    conn.close()
                    return
                self.accepts += 1
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                conn.close()
                return
            with self.lock:
                self.conns.append(conn)
        self.serve(conn)

    def serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        with self.lock:
            self.closed = True
            conns, self.conns = self.conns, []
        try:
            self.ln.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.ln.close()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class CountingProxy(_Listener):
    """Forwards every connection to upstream (a sidecar client URL) and
    counts the connections clients open: how keep-alive is checked. sent
    holds every byte the clients sent, as the sidecar read them."""

    def __init__(self, upstream: str, unix: bool = False) -> None:
        if upstream.startswith("unix://"):
            self.up = (socket.AF_UNIX, upstream[len("unix://"):])
        else:
            host, port = upstream[len("http://"):].rsplit(":", 1)
            self.up = (socket.AF_INET, (host, int(port)))
        self.sent = bytearray()
        super().__init__(unix)

    def serve(self, conn: socket.socket) -> None:
        up = socket.socket(self.up[0], socket.SOCK_STREAM)
        try:
            up.connect(self.up[1])
        except OSError:
            conn.close()
            return
        if self.up[0] == socket.AF_INET:
            up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.conns.append(up)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    if src is conn:
                        with self.lock:
                            self.sent += data
                    dst.sendall(data)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pump, args=(up, conn), daemon=True).start()
        pump(conn, up)


class BrokenPeer(_Listener):
    """Plays whatever wrongly answers on the sidecar's address: reads each
    request and writes answer (raw bytes) back, or never answers when
    answer is None; close_after closes the connection after answering.
    later, when given, answers every request after the first instead
    (b"": close the connection without an answer); trickle sends the
    answer a byte every that many seconds; delay holds each answer that
    many seconds first, silent (a sidecar holding a call for a person)."""

    def __init__(self, answer: Optional[bytes], *, close_after: bool = False, unix: bool = False,
                 later: Optional[bytes] = None, trickle: float = 0, tls: Optional[ssl.SSLContext] = None,
                 delay: float = 0) -> None:
        self.answer = answer
        self.trickle = trickle
        self.delay = delay
        self.later = later
        self.close_after = close_after
        self.requests: List[bytes] = []
        super().__init__(unix, tls)

    def serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    more = conn.recv(65536)
                    if not more:
                        return
                    buf += more
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                while len(buf) < length:
                    more = conn.recv(65536)
                    if not more:
                        return
                    buf += more
                with self.lock:
                    self.requests.append(head + b"\r\n\r\n" + buf[:length])
                    answer = self.answer if len(self.requests) == 1 or self.later is None else self.later
                buf = buf[length:]
                if answer == b"":
                    conn.close()
                    return
                if answer is None:
                    # Hung: hold the connection, never answer.
                    while conn.recv(65536):
                        pass
                    return
                if self.delay:
                    time.sleep(self.delay)
                if self.trickle:
                    # A byte at a time: never silent for long, never done.
                    for i in range(len(answer)):
                        conn.sendall(answer[i:i + 1])
                        time.sleep(self.trickle)
                else:
                    conn.sendall(answer)
                if self.close_after:
                    conn.close()
                    return
        except OSError:
            return


def http_answer(status: int, body: bytes, headers: Optional[Dict[str, str]] = None) -> bytes:
    h = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    h.update(headers or {})
    head = "HTTP/1.1 %d X\r\n" % status + "".join("%s: %s\r\n" % kv for kv in h.items() if kv[1] is not None)
    return head.encode() + b"\r\n" + body


#: A self-signed certificate (and its key) for 127.0.0.1 and localhost,
#: valid until 2126: the TLS peer's, and the only CA the HTTPS test trusts.
TEST_PEER_PEM = str(Path(__file__).with_name("testpeer.pem"))


def tls_server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(TEST_PEER_PEM)
    return ctx


ALLOW = b'{"decision":"allow","effect":"allow","matchedPolicyId":null,"matchedPolicyVersion":null,"matchedRuleId":null,"reason":"ok","latencyMs":0.01}'


def sockets_to(url: str) -> int:
    """How many of this process's open TCP sockets are connected to the
    loopback listener at url (http(s)://127.0.0.1:PORT): the clients'
    connections to it, not the listener's own ends. Read from /proc."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:  # the listing's own fd, closed since
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == port and fields[9] in ours:
                    n += 1
    return n
