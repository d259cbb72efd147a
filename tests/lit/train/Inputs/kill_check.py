"""Crash safety of `tfmc train`: SIGKILL at random moments, resume, repeat.

    kill_check.py KILLS WORKDIR STEPS -- tfmc train <artifact> [options]

Runs the command once uninterrupted (STEPS steps, --checkpoint WORKDIR/ref). Then trains the
same STEPS with --checkpoint-every 1 into WORKDIR/ck, killing the process with SIGKILL after a
random delay KILLS times (a fixed seed; every fourth kill waits instead until a checkpoint write
has put bytes into WORKDIR/ck.tmp, so some kills land mid-write on any machine, however fast its
disk); each restart resumes from WORKDIR/ck, which must load
(a corrupt or missing-but-expected checkpoint fails the resume). Finally the run completes and
its checkpoint must equal the uninterrupted one byte for byte. Prints the counts FileCheck reads.
"""
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time


def checkpoint_step(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return int(header["__metadata__"]["step"])


def tmp_state(path):
    """(inode, mtime, size) of the writer's temporary file, or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def wait_for_write(proc, tmp, before, timeout):
    """Busy-waits until a checkpoint write (not the start-up probe, which leaves the file empty)
    has begun since `before`; False if the process ended or the timeout passed first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        now = tmp_state(tmp)
        if now is not None and now != before and now[2] > 0:
            return True
    return False


def main():
    split = sys.argv.index("--")
    kills, work, steps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    cmd = sys.argv[split + 1:]
    ref, ck = os.path.join(work, "ref"), os.path.join(work, "ck")
    subprocess.run(cmd + ["--steps", str(steps), "--checkpoint", ref], check=True, stdout=subprocess.DEVNULL)

    # Start-up (loading, kernel preparation) takes 0.1-0.5 s depending on the build (the
    # sanitizer build is slowest): kills are spread over start-up plus up to 0.3 s of training, so
    # they land in start-up, between steps and inside checkpoint writes whatever the build. The
    # training part is capped at the time of steps / (2 x kills) steps (timed with a checkpoint
    # after each, as below), so the run cannot finish before all kills are done however fast its
    # steps and writes are (a faster checksum once ended a run after 54 of 60 kills).
    t0 = time.monotonic()
    subprocess.run(cmd + ["--steps", "1"], check=True, stdout=subprocess.DEVNULL)
    startup = time.monotonic() - t0
    t0 = time.monotonic()
    subprocess.run(cmd + ["--steps", "200", "--checkpoint", os.path.join(work, "timing"), "--checkpoint-every", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    # (A step too fast to measure gives a window of start-up alone, not the largest one.)
    per_step = max(0.0, time.monotonic() - t0 - startup) / 200
    window = startup + min(0.3, per_step * steps / (2 * kills))

    rng = random.Random(1)
    done = killed = during_write = restarts = 0
    start = time.monotonic()
    while True:
        args = cmd + ["--checkpoint", ck, "--checkpoint-every", "1"]
        remaining = steps
        if os.path.exists(ck):
            done = checkpoint_step(ck)  # a torn file would raise here or fail the resume below
            remaining = steps - done
            args += ["--resume", ck]
        if remaining == 0:
            break
        args += ["--steps", str(remaining)]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        restarts += 1
        if killed < kills:
            tmp = ck + ".tmp"
            before = tmp_state(tmp)
            if killed % 4 == 3:
                hit = wait_for_write(proc, tmp, before, timeout=60.0)
            else:
                delay = rng.uniform(0.0, window)
                try:
                    proc.wait(timeout=delay)
                    hit = False
                except subprocess.TimeoutExpired:
                    hit = True
            if hit:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed += 1
                after = tmp_state(tmp)
                during_write += after is not None and after != before and after[2] > 0
                continue
        err = proc.communicate()[1]
        if proc.returncode != 0:
            print(f"restart {restarts} failed (exit {proc.returncode}): {err.decode(errors='replace')}")
            sys.exit(1)
    same = open(ck, "rb").read() == open(ref, "rb").read()
    print(f"kills: {killed} (during a checkpoint write: {during_write}), restarts: {restarts}, "
          f"{time.monotonic() - start:.1f} s")
    print(f"final step {checkpoint_step(ck)} of {steps}; same checkpoint as the uninterrupted run: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
