"""Streaming translation: runs `tfmc translate ... --input -`, writes the first lines of a file to
its standard input, and requires their translations to arrive while standard input is still
open (so they cannot have waited for the end of input); then writes the rest, closes, and checks
that every line was answered, in input order, identically to a file-based run.

  stream_check.py <first N> <source file> <expected output file> -- tfmc translate ... --input -
"""
import select
import subprocess
import sys
import time

first = int(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
expected = open(sys.argv[3], encoding="utf-8").read().splitlines()
cmd = sys.argv[sys.argv.index("--") + 1:]
proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
proc.stdin.write(("\n".join(lines[:first]) + "\n").encode())
proc.stdin.flush()
got = b""
deadline = time.time() + 60
while got.count(b"\n") < first and time.time() < deadline:
    ready, _, _ = select.select([proc.stdout], [], [], 1.0)
    if ready:
        chunk = proc.stdout.read1(65536)
        if not chunk:
            break
        got += chunk
early = got.count(b"\n")
print(f"answered before end of input: {early} of {first}")
proc.stdin.write(("\n".join(lines[first:]) + "\n").encode())
proc.stdin.close()
rest = proc.stdout.read()
proc.wait()
out = (got + rest).decode().splitlines()
print(f"lines: {len(out)} of {len(lines)}, exit {proc.returncode}")
print("same as the file run" if out == expected[:len(lines)] else "DIFFERENT from the file run")
