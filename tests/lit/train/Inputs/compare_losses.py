"""Compares the per-step losses of two `tfmc train --log-every 1` logs.

    compare_losses.py A.txt B.txt TOLERANCE [FIRST LAST]

Reads "step N  loss L  grad norm G" lines, checks both logs have the same steps (FIRST..LAST if
given) and every |L_a - L_b| <= TOLERANCE * |L_a| (relative). Prints the count and the largest
relative difference; exits 1 on any mismatch.
"""
import re
import sys


def losses(path):
    out = {}
    for line in open(path):
        m = re.match(r"step\s+(\d+)\s+loss (\S+)\s+grad norm (\S+)", line)
        if m:
            out[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return out


def main():
    a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if len(sys.argv) > 5:
        wanted = range(int(sys.argv[4]), int(sys.argv[5]) + 1)
        a = {k: v for k, v in a.items() if k in wanted}
        b = {k: v for k, v in b.items() if k in wanted}
    if not a or sorted(a) != sorted(b):
        print("steps differ:", sorted(a), sorted(b))
        return 1
    worst = max(abs(a[k][0] - b[k][0]) / abs(a[k][0]) for k in a)
    worst_norm = max(abs(a[k][1] - b[k][1]) / abs(a[k][1]) for k in a)
    print("%d steps compared, max relative loss difference %.2e, grad norm %.2e (tolerance %g)"
          % (len(a), worst, worst_norm, tol))
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
