"""``tf2tosa zoo --cluster``: the zoo on a Dask distributed cluster.  A ``LocalCluster`` of two worker processes
runs a subset, and its report equals the serial (``--jobs 1``) one model for model; an unreachable scheduler is one
line naming it within the connect time-out; without the ``[cluster]`` extra ``--jobs`` still works and
``--cluster`` says which extra to install."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import requires_litert, requires_tf

from tf2tosa import zoo as tz
from tf2tosa.cli import main

ROOT = Path(__file__).resolve().parent.parent
HAVE_DISTRIBUTED = importlib.util.find_spec("distributed") is not None
requires_distributed = pytest.mark.skipif(not HAVE_DISTRIBUTED, reason="distributed (the [cluster] extra) is not "
                                          "installed")
#: the record fields that measure time or say where a job ran; everything else must be equal
VOLATILE = {"build_s", "convert_s", "run_s", "cached"}
SUBSET = "lenet5/float32,lenet5/int8,resnet8/float32,resnet8/int8"
SUBSET_SLOW = "classification,audio,detection"  # 64 variants: float32, int8, int16x8, fp16


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _records(path: Path) -> dict[str, dict[str, Any]]:
    results = json.loads(path.read_text())["results"]
    return {f"{r['model']}/{r['variant']}": {k: v for k, v in r.items() if k not in VOLATILE} for r in results}


@requires_distributed
def test_unreachable_scheduler_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import distributed.comm

    made: list[Any] = []
    real = distributed.comm.connect

    async def spy(addr: str, timeout: Any = None, **kwargs: Any) -> Any:
        made.append(timeout)
        return await real(addr, timeout=timeout, **kwargs)

    monkeypatch.setattr(distributed.comm, "connect", spy)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as exc:
        main(["zoo", "--cluster", address, "--filter", "lenet5/int8", "--report", str(tmp_path / "zoo")])
    assert exc.value.code != 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and address in lines[0], err
    # a refused port is known at once: no Dask connection is tried (Dask retried it for its 10 s time-out)
    assert "connection refused" in lines[0] and time.monotonic() - t0 < 5, (lines, time.monotonic() - t0)
    assert not made, made
    assert not (tmp_path / "zoo").exists() or not list((tmp_path / "zoo").iterdir())


class _FakeServer:
    """A local TCP server that is not a Dask scheduler: ``http`` answers every connection the way an HTTP proxy that
    intercepts outbound connections does (a 400 response, then close); ``silent`` accepts and never says a word."""

    def __init__(self, mode: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.mode = mode
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "http":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


@requires_distributed
@pytest.mark.parametrize("mode", ["http", "silent"])
def test_not_a_scheduler_is_one_line(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Something listens at the address but is no Dask scheduler: one line naming the address, exit 1, no traceback,
    and nothing left waiting (the CLI in a subprocess, so the exit itself is measured: a half-made ``Client`` used to
    print ``Exception ignored in Client.__del__`` and stall the exit 20 s)."""
    server = _FakeServer(mode)
    try:
        code = ("import sys; import tf2tosa.zoo as z; z.CLUSTER_TIMEOUT = 3.0\n"
                "from tf2tosa.cli import main\n"
                "main(sys.argv[1:])\n")
        proc = subprocess.run([sys.executable, "-c", code, "zoo", "--cluster", server.address, "--filter",
                               "lenet5/int8", "--report", str(tmp_path / "zoo")], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        server.close()
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and server.address in lines[0], proc.stderr
    want = "does not speak Dask's protocol" if mode == "http" else "within 3 s"
    assert want in lines[0], lines[0]
    assert not (tmp_path / "zoo").exists() or not list((tmp_path / "zoo").iterdir())


@requires_distributed
@pytest.mark.parametrize(("address", "why"), [("nonsense://x", "unknown address scheme"), ("tcp://", "no host"),
                                           ("localhost", "missing port"), ("tcp://127.0.0.1:99999", "1-65535"),
                                           ("tcp://127.0.0.1:0", "1-65535")])
def test_malformed_address(address: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before any connection, at once, in one line that names the address and what is wrong with it."""
    t0 = time.monotonic()
    with pytest.raises(SystemExit):
        main(["zoo", "--cluster", address, "--filter", "lenet5/int8"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and address in lines[0] and why in lines[0], lines
    assert "not a Dask scheduler address" in lines[0] and time.monotonic() - t0 < 5


@requires_distributed
def test_tls_address_without_tls_settings(capsys: pytest.CaptureFixture[str]) -> None:
    """A tls:// address takes its certificates from Dask's configuration (as a Client would); without them the
    line says so, rather than that the server does not speak Dask's protocol."""
    import dask
    import distributed  # noqa: F401 - its defaults in dask's config first: set() below, restoring on exit, would
    # otherwise drop the whole "distributed" section it did not find, and later tests in this process fail on it

    with dask.config.set({"distributed.comm.tls.client.cert": None, "distributed.comm.tls.ca-file": None}):
        with pytest.raises(SystemExit):
            main(["zoo", "--cluster", "tls://127.0.0.1:8786", "--filter", "lenet5/int8"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "tls://127.0.0.1:8786" in lines[0] and "TLS client settings" in lines[0], lines


def test_without_the_extra() -> None:
    """With ``distributed`` unimportable, ``--list``/``--jobs`` never touch it and ``--cluster`` names the extra."""
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from tf2tosa.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "except SystemExit as e:\n"
            "    sys.exit(e.code)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-c", code, "zoo", "--list", "--filter", "lenet5", "--jobs", "2"], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "lenet5/int8" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, "-c", code, "zoo", "--cluster", "tcp://127.0.0.1:1", "--filter", "lenet5"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "tf2tosa[cluster]" in lines[0], bad.stderr


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[str]:
    """A LocalCluster of two single-threaded worker processes; yields its scheduler address.

    Dask starts workers with ``OPENBLAS_NUM_THREADS=1`` (``distributed.nanny.pre-spawn-environ``); the serial run
    here uses this process's BLAS threads, and a different thread count changes the last bits of fp64 sums (the
    executor-vs-reference-model error of densenet_mini/float32 is 5.7e-15 with two threads, 4.1e-15 with one).
    The workers therefore keep this process's environment, so that both runs compute under the same conditions."""
    if not HAVE_DISTRIBUTED:
        pytest.skip("distributed (the [cluster] extra) is not installed")
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.nanny.pre-spawn-environ": {}}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                         silence_logs=50) as cluster:
        yield cluster.scheduler_address


def _same_as_serial(address: str, subset: str, tmp_path: Path, all_pass: bool = True) -> None:
    serial = tz.run_zoo(subset, jobs=1, report_dir=tmp_path / "serial", progress=False)
    dist = tz.run_zoo(subset, report_dir=tmp_path / "cluster", progress=False, cluster=address)
    assert dist.meta["cluster"] == address and dist.meta["jobs"] == 2
    a, b = _records(serial.paths["json"]), _records(dist.paths["json"])
    assert list(a) == list(b) == [f"{m.name}/{v}" for m, vs in tz.select(subset) for v in vs]  # all, in order
    for key in a:
        assert a[key] == b[key], key
    if all_pass:
        assert all(r["status"] == "PASS" for r in a.values()), {k: r["reason"] for k, r in a.items()}


@requires_litert
@requires_tf
@pytest.mark.slow
def test_local_cluster_report_equals_serial(local_cluster: str, tmp_path: Path) -> None:
    _same_as_serial(local_cluster, SUBSET, tmp_path)


@pytest.mark.slow
@requires_litert
@requires_tf
def test_local_cluster_report_equals_serial_more(local_cluster: str, tmp_path: Path) -> None:
    _same_as_serial(local_cluster, SUBSET_SLOW, tmp_path, all_pass=False)


@requires_distributed
def test_unresolvable_host_is_one_line_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """A host name that does not resolve (``.invalid`` never does, RFC 2606) is reported as such at once, where
    Dask would retry it until the time-out."""
    try:
        socket.getaddrinfo("no-such-host.invalid", None)
        pytest.skip("this machine's resolver answers for .invalid names")
    except socket.gaierror:
        pass
    t0 = time.monotonic()
    with pytest.raises(SystemExit):
        main(["zoo", "--cluster", "tcp://no-such-host.invalid:8786", "--filter", "lenet5/int8"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no-such-host.invalid" in lines[0] and "does not resolve" in lines[0], lines
    assert time.monotonic() - t0 < 5
