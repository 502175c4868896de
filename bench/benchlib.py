# SPDX-License-Identifier: Apache-2.0
"""What the Python benchmarks share (bench/compare, bench/smallfiles): running commands in
process groups of their own, a teardown stack that undoes what was started (also on Ctrl-C
or a failure), dropping the page cache, a local Shoal cluster and its mounts."""
import os
import signal
import subprocess
import time

NAME = "bench"  # set by the benchmark: its log lines say it
T0 = time.time()
undo = []  # teardown steps (name, fn), run last-in first-out


def say(msg):
    print("[%s %5.0fs] %s" % (NAME, time.time() - T0, msg), flush=True)


def run(cmd, check=True, timeout=600, quiet=False, env=None):
    """Run cmd in a process group of its own: on an interrupt or a timeout the whole group
    (fio forks its jobs) is killed, so nothing keeps a mount busy."""
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        child.wait()
        raise
    p = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:],
                                                  p.stderr[-3000:]))
    if not quiet and p.returncode != 0:
        say("(%s: exit %d: %s)" % (" ".join(cmd[:3]), p.returncode, p.stderr.strip()[-300:]))
    return p


def pgrep(pattern):
    p = run(["pgrep", "-f", pattern], check=False, quiet=True)
    return [int(x) for x in p.stdout.split()]


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def teardown_until(what=None):
    """Tear down the steps from the newest back to (and with) the one named what (None:
    all of them)."""
    while undo:
        name, fn = undo.pop()
        try:
            fn()
        except Exception as e:  # keep tearing the rest down
            say("teardown: %s: %s" % (name, e))
        if name == what:
            return


def on_signal(sig, frame):
    say("interrupted (signal %d): tearing down" % sig)
    raise KeyboardInterrupt


def shoal_mount(shoal, addr, fs, mnt, opts=None):
    """Mount filesystem fs of the cluster at addr on mnt (kept in undo); its remount."""
    def mount():
        run([shoal, "mount", "%s/%s" % (addr, fs), mnt] + (opts or []))

    def umount():
        if run([shoal, "umount", mnt], check=False, quiet=True).returncode != 0:
            run(["umount", "-l", mnt], check=False)
            for pid in pgrep("shoal mount .* %s" % mnt):  # its cluster is gone: so is it
                os.kill(pid, signal.SIGKILL)

    mount()
    undo.append(("shoal mount " + mnt, umount))
    return lambda: (umount(), mount())


def use_token(d):
    """The admin token of the local cluster in d for every command and call after this
    (docs/security.md)."""
    os.environ["SHOAL_TOKEN_FILE"] = os.path.abspath(os.path.join(d, "admin.token"))
    os.environ.pop("SHOAL_TOKEN", None)
    # and the cluster's client key for the mounts and programs (DIR/client.key)
    os.environ["SHOAL_KEY_FILE"] = os.path.abspath(os.path.join(d, "client.key"))
    os.environ.pop("SHOAL_KEY", None)


def auth_headers():
    """The Authorization header the admin API asks for (use_token's cluster)."""
    with open(os.environ["SHOAL_TOKEN_FILE"]) as f:
        return {"Authorization": "Bearer " + f.read().strip()}


def local_cluster(shoal, d, port, nodes, drive_mb, filesystems, name="shoal cluster"):
    """`shoal local up` of nodes nodes (drives of drive_mb MiB) in d, its teardown kept in undo
    under name, and filesystems [(fs, [fs create options]), ...] created and answering; the
    cluster's address."""
    addr = "127.0.0.1:%d" % port
    run([shoal, "local", "up", "--nodes", str(nodes), "--dir", d, "--port", str(port),
         "--drive-size", "%dM" % drive_mb])
    undo.append((name, lambda: run([shoal, "local", "down", "--dir", d, "--wipe"],
                                   check=False)))
    use_token(d)
    for fs, opts in filesystems:
        run([shoal, "--addr", addr, "fs", "create", fs] + opts)
    for fs, _ in filesystems:
        for _ in range(150):
            if run([shoal, "--addr", addr, "ns", fs, "stat", "/"], check=False,
                   quiet=True).returncode == 0:
                break
            time.sleep(0.2)
    return addr
