# SPDX-License-Identifier: Apache-2.0
"""The Python package's tests: one local cluster (real shoald processes on loopback) for
the whole session, the package imported from the build tree.

    /usr/bin/python3 -m pytest tests/python --build build/release

Ends with the line "N passed, N failed, N skipped" that scripts/run-tests adds up; on a
failure the nodes' log tails are printed."""
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

NODES = 6
FS = "py"


def pytest_addoption(parser):
    parser.addoption("--build", default="build/release", help="the build directory")


def pytest_configure(config):
    build = os.path.abspath(config.getoption("--build"))
    sys.path.insert(0, os.path.join(build, "python"))
    config.shoal_build = build


class Cluster:
    def __init__(self, build):
        self.build = build
        self.bin = os.path.join(build, "bin")
        self.dir = tempfile.mkdtemp(prefix="shoal-python-",
                                    dir=os.environ.get("SH_TEST_TMP") or None)
        self.port = int(os.environ.get("SH_PYTHON_PORT", "29400"))
        self.addr = "127.0.0.1:%d" % self.port

    def shoal(self, *args, check=True, timeout=120):
        p = subprocess.run([os.path.join(self.bin, "shoal"), "--addr", self.addr] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError("shoal %s: exit %d: %s%s" % (" ".join(args), p.returncode,
                                                            p.stdout, p.stderr))
        return p

    def local(self, *args):
        subprocess.run([os.path.join(self.bin, "shoal"), "local"] + list(args) +
                       ["--dir", self.dir], check=True, capture_output=True, timeout=120)

    def up(self):
        self.local("up", "--nodes", str(NODES), "--port", str(self.port), "--drive-size", "1G",
                   "--buckets", "64")
        # the admin API's token for the shoal commands (docs/security.md)
        os.environ["SHOAL_TOKEN_FILE"] = os.path.abspath(os.path.join(self.dir, "admin.token"))
        # and the cluster's client key for the binding's clients (docs/security.md)
        os.environ["SHOAL_KEY_FILE"] = os.path.abspath(os.path.join(self.dir, "client.key"))
        self.mkfs(FS)

    def mkfs(self, name, *extra):
        if os.environ.get("SH_ENCRYPT_ALL") and "--encrypt" not in extra:
            # every file system encrypted (make test-encrypted): one key, given to every client
            key = os.path.abspath(os.path.join(self.dir, "encrypt-all.key"))
            extra += ("--encrypt", key)
            os.environ["SHOAL_FS_KEY_FILE"] = key
        self.shoal("fs", "create", name, "--protection", "4+2", *extra)
        end = time.time() + 20
        while time.time() < end:
            if self.shoal("ns", name, "stat", "/", check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("the root of %s never appeared" % name)

    def pids(self):
        with open(os.path.join(self.dir, "local.json")) as f:
            return json.load(f)["pids"]

    def logs(self):
        out = []
        for n in range(1, NODES + 1):
            p = os.path.join(self.dir, "n%d.log" % n)
            if os.path.exists(p):
                with open(p) as f:
                    out.append("--- node %d log tail\n%s" % (n, "".join(f.readlines()[-12:])))
        return "\n".join(out)

    def down(self):
        subprocess.run([os.path.join(self.bin, "shoal"), "local", "down", "--dir", self.dir,
                        "--wipe"], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def cluster(request):
    c = Cluster(request.config.shoal_build)
    c.up()
    os.environ["SHOAL_ADDR"] = c.addr
    yield c
    if request.session.testsfailed:
        tr = request.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(c.logs())
    c.down()


@pytest.fixture(scope="session")
def fs(cluster):
    import shoal

    f = shoal.connect(FS, cluster.addr)
    yield f
    f.close()


def sample(i):
    """The bytes of sample i of the dataset: 4-128 KiB, from a seed of its own."""
    r = random.Random(i)
    return r.randbytes(r.randint(4, 128) * 1024 - r.randint(0, 1023))


DATASET = "/dataset"
DATASET_N = int(os.environ.get("SH_PY_SAMPLES", "20000"))


@pytest.fixture(scope="session")
def dataset(fs):
    """DATASET_N files of 4-128 KiB in 100 directories, written 16 at a time: (paths,
    their sha256 digests)."""
    paths = ["%s/%02d/%06d.bin" % (DATASET, i % 100, i) for i in range(DATASET_N)]
    fs.makedirs(DATASET, exist_ok=True)
    for d in range(min(100, DATASET_N)):
        fs.mkdir("%s/%02d" % (DATASET, d))
    digests = [None] * DATASET_N

    def put(i):
        data = sample(i)
        fs.write_bytes(paths[i], data)
        digests[i] = hashlib.sha256(data).hexdigest()

    t0 = time.time()
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, range(DATASET_N)))
    print("\n  dataset: %d files in %.1f s" % (DATASET_N, time.time() - t0))
    return paths, digests


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    passed = len(st.get("passed", []))
    failed = len(st.get("failed", [])) + len(st.get("error", []))
    skipped = len(st.get("skipped", []))
    terminalreporter.write_line("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
