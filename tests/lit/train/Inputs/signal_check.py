"""SIGINT / SIGTERM during `tfmc train`: a checkpoint, then exit 128 + signal.

    signal_check.py INT|TERM -- tfmc train <artifact> [options]
    signal_check.py INT|TERM --runs N -- tfmc train <artifact> [options]
    signal_check.py INT|TERM --twice -- tfmc train <artifact> [options]
    signal_check.py INT|TERM --all -- ...        (every line the command wrote, not the last two)

Starts the command, waits for its first step line on standard output, sends the signal, and
prints the exit status and the last lines the command wrote (for FileCheck).

With --twice: the signal twice, 50 ms apart, as `timeout` delivers it (to its child, then to its
process group): one request, not a second one that quits at once.

With --runs N: N runs, each signalled at a random moment 0-0.3 s after its first step line (so
inside a kernel, mostly); prints "exits" and the distinct exit statuses (one line), and the last
line of any run that exited otherwise than 128 + signal.
"""
import random
import signal
import subprocess
import sys
import time


def storm(sig, cmd, runs):
    rng = random.Random(7)
    statuses = set()
    for _ in range(runs):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("step "):
                time.sleep(rng.uniform(0, 0.3))
                proc.send_signal(sig)
                break
        lines += [l.rstrip("\n") for l in proc.stdout]
        proc.wait()
        statuses.add(proc.returncode)
        if proc.returncode != 128 + sig:
            print(f"run ended with {proc.returncode}: {lines[-1] if lines else ''}")
    print("exits", " ".join(str(s) for s in sorted(statuses)))


def main():
    sig = {"INT": signal.SIGINT, "TERM": signal.SIGTERM}[sys.argv[1]]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    if "--runs" in sys.argv[:sys.argv.index("--")]:
        return storm(sig, cmd, int(sys.argv[sys.argv.index("--runs") + 1]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("step "):
            proc.send_signal(sig)
            if "--twice" in sys.argv[:sys.argv.index("--")]:
                time.sleep(0.05)
                proc.send_signal(sig)
            break
    lines += [l.rstrip("\n") for l in proc.stdout]
    proc.wait()
    print(f"exit {proc.returncode}")
    for line in lines if "--all" in sys.argv[:sys.argv.index("--")] else lines[-2:]:
        print(line)


if __name__ == "__main__":
    main()
