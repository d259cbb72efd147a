"""Checks --word-scores output against the scores printed beside it.

  nbest FILE ALPHA   'index ||| ids ||| score ||| w1 ... wn' lines (--output-format ids): n is the
                     number of ids, plus one when the output ended in </s>; sum(w) under the GNMT
                     penalty ((5 + L) / 6) ** ALPHA, L = ids + 1, equals the score.
  score FILE         'logprob ||| w1 ... wn' lines (--score-reference): sum(w) equals logprob.
Prints counts for FileCheck: lines, how many agree, how many ended in </s>.
"""
import sys

mode, path = sys.argv[1], sys.argv[2]
lines = agree = ended = 0
for line in open(path, encoding="utf-8"):
    fields = [f.strip() for f in line.rstrip("\n").split("|||")]
    if mode == "nbest":
        _, ids, score, words = fields
        n_ids = len(ids.split())
        w = [float(x) for x in words.split()]
        ended += len(w) == n_ids + 1
        ok = len(w) in (n_ids, n_ids + 1) and all(x <= 0 for x in w)
        penalty = ((5 + n_ids + 1) / 6) ** float(sys.argv[3])
        ok = ok and abs(sum(w) / penalty - float(score)) <= 1e-4 * (len(w) + 1)
    else:
        if fields[0] == "nan":  # a reference too long to score: no word scores either
            continue
        score, words = fields
        w = [float(x) for x in words.split()]
        ended += 1
        ok = abs(sum(w) - float(score)) <= 1e-4 * (len(w) + 1)
    lines += 1
    agree += ok
print("lines %d agree %d ended %d" % (lines, agree, ended))
