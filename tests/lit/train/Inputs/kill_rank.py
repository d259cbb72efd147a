"""A data-parallel job loses a rank: the job must stop (not hang) and the checkpoint stay intact.

    kill_rank.py RANK STEP TIMEOUT -- mpirun ... tfmc train ...

Starts the command, waits for rank 0's "step STEP" log line, SIGKILLs the tfmc process of rank
RANK (found by OMPI_COMM_WORLD_RANK in its environment), and waits up to TIMEOUT seconds for the
launcher to end. Prints what FileCheck reads: whether the job ended, its exit status (non-zero
expected) and the error lines it printed.
"""
import os
import signal
import subprocess
import sys
import time


def rank_pids(rank, root):
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
            exe = os.readlink("/proc/%s/exe" % pid)
        except OSError:
            continue
        if os.path.basename(exe) == "tfmc" and b"OMPI_COMM_WORLD_RANK=%d" % rank in env and \
                any(root.encode() in a for a in open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")):
            pids.append(int(pid))
    return pids


def main():
    rank, step, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    marker = cmd[-1]  # a path unique to this test, to find only our processes
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("step") and int(line.split()[1]) >= step and "loss" in line:
            break
    victims = rank_pids(rank, marker)
    print("killing rank %d: %d process(es)" % (rank, len(victims)))
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    try:
        _, err = proc.communicate(timeout=timeout)
        print("job ended after %s, exit status %s" % ("the kill", "non-zero" if proc.returncode else "zero"))
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        print("job HUNG for %.0f s after the kill" % (time.monotonic() - start))
    for line in err.splitlines():
        if "exited on signal" in line or "error" in line.lower():
            print("stderr: " + line.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
