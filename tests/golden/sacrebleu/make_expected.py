#!/usr/bin/env python3
"""Regenerate expected.json from cases.json with a local sacreBLEU checkout.

sacreBLEU is NOT a dependency of this project: this script was run once and
its output (expected.json) is committed. To rerun it you need a directory that
contains an importable `sacrebleu` package:

    SACREBLEU_PATH=/path/containing/sacrebleu python3 make_expected.py
    # or
    python3 make_expected.py /path/containing/sacrebleu [out.json]

Only the sacreBLEU public API is used (metrics.BLEU, metrics.CHRF and the 13a
tokenizer class); no sacreBLEU code lives in this file.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SACREBLEU_PATH")
    if not path:
        sys.exit("usage: make_expected.py SACREBLEU_PATH [out.json] "
                 "(or set the SACREBLEU_PATH environment variable)")
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "expected.json")
    sys.path.insert(0, path)

    import sacrebleu
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)

    tok = Tokenizer13a()
    out = {
        "sacrebleu_version": sacrebleu.__version__,
        "sacrebleu_source": os.environ.get("SACREBLEU_SOURCE", ""),
        "signatures": {},
        "cases": {},
        # Tokenizer13a()(line) on the raw line.
        "tokenized_13a": {},
        # What BLEU actually tokenizes is Tokenizer13a()(line.rstrip());
        # listed only for lines where the two differ.
        "tokenized_13a_after_rstrip": {},
    }

    sig_bleu = sig_bleu_lc = sig_chrf = None
    for case in cases:
        hyps, refs = case["hyps"], case["refs"]
        assert len(hyps) == len(refs), case["name"]

        bleu = BLEU()
        s = bleu.corpus_score(hyps, [refs])
        bleu_lc = BLEU(lowercase=True)
        s_lc = bleu_lc.corpus_score(hyps, [refs])
        sent = BLEU(effective_order=True).sentence_score(hyps[0], [refs[0]])
        chrf = CHRF()
        c = chrf.corpus_score(hyps, [refs])

        out["cases"][case["name"]] = {
            "bleu": {
                "score": s.score,
                "counts": [int(x) for x in s.counts],
                "totals": [int(x) for x in s.totals],
                "precisions": [float(x) for x in s.precisions],
                "bp": s.bp,
                "sys_len": int(s.sys_len),
                "ref_len": int(s.ref_len),
                "str": str(s),
            },
            "bleu_lowercase": {"score": s_lc.score},
            "sentence_bleu_first": {
                "score": sent.score,
                "counts": [int(x) for x in sent.counts],
                "totals": [int(x) for x in sent.totals],
                "bp": sent.bp,
            },
            "chrf": {"score": c.score},
        }

        sig_bleu = str(bleu.get_signature())
        sig_bleu_lc = str(bleu_lc.get_signature())
        sig_chrf = str(chrf.get_signature())

        for line in hyps + refs:
            out["tokenized_13a"][line] = tok(line)
            after = tok(line.rstrip())
            if after != out["tokenized_13a"][line]:
                out["tokenized_13a_after_rstrip"][line] = after

    out["signatures"] = {
        "bleu": sig_bleu,
        "bleu_lowercase": sig_bleu_lc,
        "chrf": sig_chrf,
    }

    with open(out_path, "w", encoding="utf-8") as f:
        # json.dump writes floats with repr(), i.e. full round-trip precision
        json.dump(out, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"wrote {out_path} ({len(cases)} cases, sacrebleu {sacrebleu.__version__})")


if __name__ == "__main__":
    main()
