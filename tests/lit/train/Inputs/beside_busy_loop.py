"""Runs a command while a busy-looping process holds one core; prints the command's output.

Usage: beside_busy_loop.py -- command args...
"""
import subprocess
import sys
import time

command = sys.argv[sys.argv.index("--") + 1:]
loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
try:
    time.sleep(0.5)  # the loop is running before the command samples the cores
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(done.stdout)
    sys.exit(done.returncode)
finally:
    loop.kill()
    loop.wait()
