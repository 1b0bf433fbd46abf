"""Fixtures for the control-plane server tests: a real `perseus serve` process on loopback.

Run with Debian's /usr/bin/python3 -m pytest; PERSEUS_BIN names the perseus binary."""
import json
import os
import re
import resource
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

PERSEUS = os.environ.get("PERSEUS_BIN", "perseus")


class Server:
    """One `perseus serve` process; kill() and start() again reuse the same store."""

    def __init__(self, workdir, scheduler=None, scheduler_args=None, extra=(), fd_limit=None,
                 tls=None, argv=None, env=None):
        """`argv` (a whole `perseus serve` command line, run in `workdir`) replaces the
        arguments built from the others."""
        self.workdir = workdir
        self.env = None if env is None else {**os.environ, **env}
        self.tls = tls  # an ssl.SSLContext trusting the server's certificate (https servers)
        self.fd_limit = fd_limit
        self.store = str(workdir / "store.sqlite")
        self.args = [PERSEUS, "serve", "--port", "0", "--store", self.store,
                     "--output-dir", str(workdir / "out"), "--data-dir", str(workdir.parent)]
        if argv is not None:
            self.args, scheduler, extra = list(argv), None, ()
        if scheduler:
            self.args += ["--scheduler", scheduler,
                          "--scheduler-args", json.dumps(scheduler_args or {})]
        self.args += list(extra)
        self.proc = None
        self.start()

    def start(self):
        limit = self.fd_limit

        def lower_fd_limit():
            if limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        # stderr (the server's log) goes to a file: a pipe nobody reads would fill and block it.
        self.log = self.workdir / "server.log"
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log, text=True,
                                         cwd=self.workdir, preexec_fn=lower_fd_limit,
                                         env=self.env)
        line = self.proc.stdout.readline()
        match = re.search(r"listening on (https?://[\d.]+:(\d+))", line)
        assert match, f"server did not start: {line!r} {self.log.read_text()}"
        self.url, self.port = match.group(1), int(match.group(2))

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def alive(self):
        return self.proc.poll() is None

    def request(self, method, path, body=None, raw=None, timeout=30):
        """(status, parsed JSON body or text) of one request."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.tls) as resp:
                status, text = resp.status, resp.read().decode()
                ctype = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read().decode()
            ctype = err.headers.get("Content-Type", "")
        return status, (json.loads(text) if "json" in ctype else text)

    def post(self, path, body=None, raw=None):
        return self.request("POST", path, body, raw)

    def get(self, path, timeout=30):
        return self.request("GET", path, timeout=timeout)

    # Zeus client bodies (pydantic .dict() of JobInfo and RankInfo).
    def register_job(self, pp, dp=1, tp=1, metadata=None, **extra):
        body = {"job_id": "", "pp_degree": pp, "dp_degree": dp, "tp_degree": tp,
                "world_size": pp * dp * tp, "job_metadata": metadata, **extra}
        status, job_id = self.post("/register_job", body)
        assert status == 200, job_id
        return job_id

    def register_ranks(self, job_id, pp, dp=1, tp=1, freqs=(1410, 1395, 1380)):
        for rank in range(pp * dp * tp):
            body = rank_info(rank, pp, dp, tp, freqs)
            status, answer = self.post(f"/register_rank/{job_id}", body)
            assert status == 200, answer
        # The last registration starts the job's scheduler off the server's event loop: wait for
        # it to start, as a rank's first schedule request would.
        for _ in range(600):
            status, job = self.get(f"/jobs/{job_id}")
            if status != 200 or job["state"] != "registering":
                return
            time.sleep(0.05)

    def schedules(self, job_id, ranks, round_=None):
        """Every rank asks for its schedule at once (threads); returns {rank: (status, body)}."""
        out = {}

        def ask(rank):
            query = f"?rank={rank}" + ("" if round_ is None else f"&round={round_}")
            out[rank] = self.get(f"/schedule/{job_id}{query}")

        threads = [threading.Thread(target=ask, args=(r,)) for r in ranks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return out


def rank_info(rank, pp, dp=1, tp=1, freqs=(1410, 1395, 1380)):
    # Megatron order: tp fastest, then dp, then pp.
    return {"rank": rank, "dp_rank": (rank // tp) % dp, "pp_rank": rank // (tp * dp),
            "tp_rank": rank % tp, "available_frequencies": list(freqs)}


def result_body(rank, instructions, seconds=0.1, joules=30.0, iterations=2, round_=None):
    """A ProfilingResult as the Zeus client sends it (plus `round` when given)."""
    breakdown_t = {name: [[seconds] * instructions.count(name)] * iterations
                   for name in set(instructions)}
    breakdown_e = {name: [[joules] * instructions.count(name)] * iterations
                   for name in set(instructions)}
    body = {"rank": rank, "iter_time": [seconds * len(instructions) + 0.05] * iterations,
            "iter_energy": [joules * len(instructions) + 5.0] * iterations,
            "time_breakdown": breakdown_t, "energy_breakdown": breakdown_e}
    if round_ is not None:
        body["round"] = round_
    return body


def self_signed_certificate(directory):
    """(cert.pem, key.pem) for 127.0.0.1, made with the openssl command."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                    str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


def served_plans_run(server_factory, tmp_path, microbatches, exports, iterations=None):
    """The README's served-plan loop: a synthetic 4-stage profile, its frontier, the plans that
    `plan export` chooses with each of `exports` (option lists), served by `point-solution` after
    one all-max warm-up round to a simulated job run --until-done (or for `iterations`).
    Returns (server, job status)."""
    def run(*args):
        subprocess.run([PERSEUS, *args], cwd=tmp_path, check=True, capture_output=True, text=True)

    run("profile", "synth", "--gpu", "a100", "--stages", "4", "--out", "p.csv")
    run("plan", "--profile", "p.csv", "--microbatches", str(microbatches), "--blocking-power",
        "83.64", "--out-dir", "F", "--quiet")
    for choice in exports:
        run("plan", "export", "--frontier", "F", *choice, "--out-dir", "plans")
    server = server_factory("point-solution", {"solution_path": str(tmp_path / "plans"),
                                               "warmup_rounds": 1})
    sim = subprocess.run([PERSEUS, "simulate-training", "--server", server.url, "--profile",
                          str(tmp_path / "p.csv"), "--microbatches", str(microbatches),
                          "--blocking-power", "83.64", "--counter", "ideal",
                          *(["--until-done"] if iterations is None else
                            ["--iterations", str(iterations)]),
                          "--quiet", "--out", str(tmp_path / "run.json")],
                         capture_output=True, text=True, timeout=300)
    assert sim.returncode == 0, sim.stderr
    job_id = json.loads((tmp_path / "run.json").read_text())["job_id"]
    status, job = server.get(f"/jobs/{job_id}")
    assert status == 200, job
    return server, job


def measured_windows(server, job_id, out_dir):
    """Each round's (iteration energy of all stages, iterations in its window) as the job's ranks
    reported them, read back through `perseus export-job` (round N's N.prof.json): a stage's
    iteration energy is its ranks' summed, the window as long as its shortest stage's. Also
    what export-job printed."""
    exported = subprocess.run([PERSEUS, "export-job", "--store", server.store, "--job", job_id,
                               "--out-dir", str(out_dir)], check=True, capture_output=True,
                              text=True)
    ranks = json.loads((out_dir / "ranks.json").read_text())
    stage_of = {r["rank"]: r["pp_rank"] for r in ranks}
    windows = []
    for n in range(len(list(out_dir.glob("*.prof.json")))):
        stages = {}
        for result in json.loads((out_dir / f"{n}.prof.json").read_text()):
            energies = stages.setdefault(stage_of[result["rank"]], [])
            energies.append(result["iter_energy"])
        n_iter = min(len(e) for rank_energies in stages.values() for e in rank_energies)
        energy = sum(sum(e[i] for e in rank_energies for i in range(n_iter)) / n_iter
                     for rank_energies in stages.values())
        windows.append((energy, n_iter))
    return windows, exported.stdout


def raw_request(port, text):
    """Sends raw bytes on a fresh connection; returns the socket (not yet read)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(text.encode())
    return sock


@pytest.fixture
def server_factory(tmp_path):
    servers = []

    def make(scheduler=None, scheduler_args=None, name="server", extra=(), fd_limit=None,
             tls=None):
        workdir = tmp_path / name
        workdir.mkdir(exist_ok=True)
        servers.append(Server(workdir, scheduler, scheduler_args, extra, fd_limit, tls))
        return servers[-1]

    yield make
    for s in servers:
        if s.alive():
            s.kill()
