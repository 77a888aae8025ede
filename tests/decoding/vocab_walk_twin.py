"""The C vocabulary walk's Python twin (``fimconstrain/engine/_walk.c``'s ``walk``, rule for
rule): the reference the C is tested against, kept with the tests since the library never runs
it (without the C, whole masks feed each token instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fimconstrain.engine.layers.layer_protocol import READS_ESCAPES, READS_NOTHING
from fimconstrain.engine.walk_ends import EndReply

#: the memo's keys for the answers that serve every ASCII text of a context and state, and every
#: one without a backslash (``_walk.c``'s)
ANY_ASCII, ANY_PLAIN = -3, -4


def walk_py(
    tables: tuple[Any, ...],
    roots: list[tuple[int, int, int, tuple[int, ...]]],
    root_lexemes: list[str],
    root_allowed: list[bytes],
    on_end: Callable[[int, int, str], EndReply],
    passing: bytearray,
    undecided: bytearray,
    only: bytes | None = None,
    asked: Any = None,
) -> int:
    """``_walk.walk`` in Python, rule for rule (the reference that the C is tested against)."""
    child_start, edge_cp, edge_cls, edge_to, tok_start, tok_ids, subtree_end, trans, final, live = tables[:10]
    tok_place_start, tok_places, _, C, W = tables[10:]
    child_start, edge_to, tok_start, tok_ids, subtree_end = (
        a.tolist() for a in (child_start, edge_to, tok_start, tok_ids, subtree_end)
    )
    chars, classes, trans, final = (
        [chr(c) for c in edge_cp.tolist()],
        edge_cls.tolist(),
        trans.tolist(),
        final,
    )
    lives = [int.from_bytes(live[q * W : (q + 1) * W].tobytes(), "little") for q in range(len(final))]
    ctx_allowed: dict[int, int] = {k: int.from_bytes(a, "little") for k, a in enumerate(root_allowed)}
    # by (context, state, origin, lexeme), or (context, state, ANY_ASCII) for every ASCII text,
    # or (context, state, ANY_PLAIN) for every ASCII text without a backslash
    memo: dict[tuple[int, int, int, str] | tuple[int, int, int], tuple[int, int]] = {}
    calls = 0
    # the places (token k of tok_ids) of the tokens asked about, and the nodes with one below
    asked_at: list[bool] | None = None
    keep: list[bool] | None = None
    if only is not None:
        asked = [t for t in range(len(only) * 8) if only[t >> 3] >> (t & 7) & 1]
    if asked is not None:
        asked_at = [False] * len(tok_ids)
        for t in asked:
            if 0 <= t < len(tok_place_start) - 1:
                for k in tok_places[tok_place_start[t] : tok_place_start[t + 1]]:
                    asked_at[k] = True
        below = [0]  # asked places among the first k
        for at in asked_at:
            below.append(below[-1] + at)
        keep = [below[tok_start[subtree_end[n]]] > below[tok_start[n]] for n in range(len(subtree_end))]

    # the classes of every character below each node, and those that leave each state where it is
    below_cls = [0] * len(subtree_end)
    for n in range(len(subtree_end) - 1, -1, -1):
        for e in range(child_start[n], child_start[n + 1]):
            below_cls[n] |= below_cls[edge_to[e]] | 1 << classes[e]
    loop_cls = [sum(1 << c for c in range(C) if trans[q * C + c] == q) for q in range(len(final))]

    def mark(out: bytearray, lo: int, hi: int, asked_only: bool = False) -> None:
        for k in range(lo, hi):
            if not asked_only or asked_at is None or asked_at[k]:
                out[tok_ids[k] >> 3] |= 1 << (tok_ids[k] & 7)

    # a branch: (ctx, q, origin, lexeme on the path so far, guards)
    Br = tuple[int, int, int, str, tuple[int, ...]]
    stack: list[tuple[int, list[Br], bool]] = [(0, [(c, q, o, "", g) for c, q, o, g in roots], False)]
    while stack:
        node, branches, unknown_above = stack.pop()
        for e in range(child_start[node], child_start[node + 1]):
            ch, cls, child = chars[e], classes[e], edge_to[e]
            if keep is not None and not keep[child]:
                continue
            out: list[Br] = []
            unknown = unknown_above
            for ctx, q, origin, lexeme, guards in branches:
                kept = []
                dead = False
                for g in guards:
                    g2 = trans[g * C + cls]
                    if g2 == 0:
                        continue
                    if final[g2]:
                        dead = True
                        break
                    kept.append(g2)
                if dead:
                    continue
                nxt = trans[q * C + cls]
                if final[q] and not final[nxt]:
                    text = (root_lexemes[origin] if origin >= 0 else "") + lexeme
                    key: tuple[int, int, int, str] | tuple[int, int, int] = (ctx, q, origin, lexeme)
                    ascii = text.isascii()
                    plain = ascii and "\\" not in text
                    got = memo.get((ctx, q, ANY_ASCII)) if ascii else None
                    if got is None and plain:
                        got = memo.get((ctx, q, ANY_PLAIN))
                    if got is None:
                        got = memo.get(key)
                    if got is None:
                        calls += 1
                        answer, reads = on_end(ctx, q, text)
                        if ascii and reads == READS_NOTHING:
                            key = (ctx, q, ANY_ASCII)
                        elif plain and reads == READS_ESCAPES:
                            key = (ctx, q, ANY_PLAIN)
                        if answer is None:
                            got = (-1, 0)
                        elif isinstance(answer, int):
                            got = (-2, 0)
                        else:
                            ctx_allowed[answer[0]] = int.from_bytes(answer[2], "little")
                            got = (answer[0], answer[1])
                        memo[key] = got
                    ctx2, start = got
                    if ctx2 == -2:
                        unknown = True
                    elif ctx2 >= 0:
                        fresh = trans[start * C + cls]
                        if fresh != 0 and lives[fresh] & ctx_allowed[ctx2]:
                            out.append((ctx2, fresh, -1, ch, (*kept, nxt) if nxt != 0 else tuple(kept)))
                if nxt != 0 and lives[nxt] & ctx_allowed[ctx]:
                    out.append((ctx, nxt, origin, lexeme + ch, tuple(kept)))
            if any(not g and not below_cls[child] & ~loop_cls[q] for _, q, _, _, g in out):
                # stays where it is below: every token passes (every asked one is marked)
                mark(passing, tok_start[child], tok_start[subtree_end[child]], asked_only=True)
            elif out:
                mark(passing, tok_start[child], tok_start[child + 1])
                stack.append((child, out, unknown))
            elif unknown:
                mark(undecided, tok_start[child], tok_start[subtree_end[child]])
    return calls


def prepare_py(tables: tuple[Any, ...]) -> tuple[Any, ...]:
    """``_walk.prepare`` in Python: the twin reads the tables as they are."""
    return tables


class TwinModule:
    """The twin where the C extension's module is expected."""

    prepare = staticmethod(prepare_py)
    walk = staticmethod(walk_py)
