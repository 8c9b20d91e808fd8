#!/usr/bin/env python3
"""Token agreement between two `kvtier run --tokens-out` files (a reference and a variant, e.g. bf16
blocks below HBM against quantize-on-offload). Greedy decoding diverges for good once one token
differs, so it reports both the share of positions equal and the share of requests whose output is
identical, and the largest logit difference over the positions before the first divergence.

  token_agreement.py REFERENCE.json VARIANT.json [--json OUT]
"""
import json
import sys


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    ref = json.load(open(argv[1]))
    var = json.load(open(argv[2]))
    same = total = identical = 0
    worst_logit = 0.0
    prefix = 0
    for rid, r in ref.items():
        v = var.get(rid)
        if v is None:
            print(f"request {rid}: missing from {argv[2]}")
            return 1
        a, b = r["tokens"], v["tokens"]
        total += len(a)
        same += sum(1 for x, y in zip(a, b) if x == y)
        identical += a == b
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                break
            prefix += 1
            worst_logit = max(worst_logit, abs(r["logits"][i] - v["logits"][i]))
    out = {
        "requests": len(ref),
        "tokens": total,
        "token_agreement": same / max(total, 1),
        "identical_requests": identical,
        "tokens_before_first_divergence": prefix,
        "max_logit_difference_before_divergence": worst_logit,
    }
    print(json.dumps(out, indent=1))
    if "--json" in argv:
        json.dump(out, open(argv[argv.index("--json") + 1], "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
