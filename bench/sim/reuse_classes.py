#!/usr/bin/env python3
"""Where Belady's extra hits come from, by block class, on a Mooncake-format trace.

For each capacity (blocks of the trace's own size, one pool): block-level LRU and
Belady over the accesses the tier replay makes (every block of a request, last
block first); for each class of the access that stored or last touched a block,
its share of the accesses, its share of Belady's hits beyond LRU's, P(reused
ever) and P(reused within T), where T is LRU's characteristic time at that
capacity (capacity / LRU miss ratio, in accesses).

Classes: tail (a request's last, partial block), shared (seen before or new),
prefix depth, the conversation's turn, and requests since its previous turn
(the conversation a request continues is the last request that used its
deepest earlier-seen block beyond the first, which all requests share).

usage: bench/sim/reuse_classes.py [TRACE.jsonl] [CAPACITY ...]   (from the source root)
"""
import collections
import heapq
import json
import math
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "sim/traces/mooncake_conversation_trace.jsonl"
capacities = [int(c) for c in sys.argv[2:]] or [1000, 4000, 20000]
chains = [json.loads(line)["hash_ids"] for line in open(path)]

last, previous = {}, []
for i, chain in enumerate(chains):
    p = None
    for d, k in enumerate(chain):
        if k not in last:
            break
        if d >= 1:
            p = last[k]
    previous.append(p)
    for k in chain:
        last[k] = i
turn, gap = [0] * len(chains), [0] * len(chains)
for i, p in enumerate(previous):
    if p is not None:
        turn[i], gap[i] = turn[p] + 1, i - p

accesses, uses = [], collections.Counter()
for i, chain in enumerate(chains):
    for d in range(len(chain) - 1, -1, -1):
        accesses.append((chain[d], i, d, len(chain), uses[chain[d]]))
    for k in chain:
        uses[k] += 1
N, NEVER = len(accesses), 1 << 60
next_use, seen = [NEVER] * N, {}
for t in range(N - 1, -1, -1):
    next_use[t] = seen.get(accesses[t][0], NEVER)
    seen[accesses[t][0]] = t

features = {
    "tail": lambda i, d, n, u: "tail" if d == n - 1 else "not tail",
    "shared": lambda i, d, n, u: "block 0" if d == 0 else ("seen before" if u > 0 else "new"),
    "depth": lambda i, d, n, u: "depth < 2^%d" % (min(int(math.log2(d + 1)), 7) + 1),
    "turn": lambda i, d, n, u: "turn %s" % (turn[i] if turn[i] < 3 else "3+"),
    "since previous turn": lambda i, d, n, u: "new conversation" if turn[i] == 0
    else "< 2^%02d requests" % (min(int(math.log2(gap[i])), 11) + 1),
}


def followed_by_hit(capacity, belady):
    """hit[t]: the block accessed at t was still cached at its next use."""
    hit, where, cache, heap, lru = [False] * N, {}, {}, [], collections.OrderedDict()
    for t, (k, *_) in enumerate(accesses):
        if belady:
            if k in cache:
                hit[where[k]] = True
            elif len(cache) >= capacity:
                while True:
                    nu, victim = heapq.heappop(heap)
                    if cache.get(victim) == -nu:
                        break
                del cache[victim]
            cache[k] = next_use[t]
            heapq.heappush(heap, (-next_use[t], k))
        else:
            if k in lru:
                hit[where[k]] = True
                lru.move_to_end(k)
            else:
                if len(lru) >= capacity:
                    lru.popitem(last=False)
                lru[k] = True
        where[k] = t
    return hit


out = []
for capacity in capacities:
    hb, hl = followed_by_hit(capacity, True), followed_by_hit(capacity, False)
    T = capacity / (1 - sum(hl) / N)
    extra = sum(hb) - sum(hl)
    print("%d blocks: LRU %.4f, Belady %.4f block hits; LRU keeps a block ~%d accesses (T)"
          % (capacity, sum(hl) / N, sum(hb) / N, T))
    print("  %-20s %-18s %9s %9s %9s %9s" % ("feature", "class", "accesses", "of extra", "P(ever)", "P(<=T)"))
    rows_json = []
    for name, f in features.items():
        rows = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
        for t, (k, i, d, n, u) in enumerate(accesses):
            r = rows[f(i, d, n, u)]
            r[0] += 1
            r[1] += hb[t]
            r[2] += hl[t]
            r[3] += next_use[t] - t <= T
            r[4] += next_use[t] < NEVER
        for c in sorted(rows):
            a, b, l, w, e = rows[c]
            print("  %-20s %-18s %8.1f%% %8.1f%% %9.3f %9.3f" % (name, c, 100 * a / N, 100 * (b - l) / extra, e / a, w / a))
            rows_json.append({"feature": name, "class": c, "accesses": a, "belady_extra_hits": b - l,
                              "p_reuse_ever": e / a, "p_reuse_within_t": w / a})
    out.append({"capacity": capacity, "lru": sum(hl) / N, "belady": sum(hb) / N, "t_accesses": T, "classes": rows_json})
print(json.dumps(out))
