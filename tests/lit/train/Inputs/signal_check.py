"""SIGINT / SIGTERM during `tfmc train`: a checkpoint, then exit 128 + signal.

    signal_check.py INT|TERM -- tfmc train <artifact> [options]

Starts the command, waits for its first step line on standard output, sends the signal, and
prints the exit status and the last lines the command wrote (for FileCheck).
"""
import signal
import subprocess
import sys


def main():
    sig = {"INT": signal.SIGINT, "TERM": signal.SIGTERM}[sys.argv[1]]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("step "):
            proc.send_signal(sig)
            break
    lines += [l.rstrip("\n") for l in proc.stdout]
    proc.wait()
    print(f"exit {proc.returncode}")
    for line in lines[-2:]:
        print(line)


if __name__ == "__main__":
    main()
