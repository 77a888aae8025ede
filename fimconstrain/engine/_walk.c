/* The exact whole-vocabulary walk: the branching lexer (lexer.py ``advance``) run over a
 * character trie of a vocabulary's token texts, so that one call tells, for every token, whether
 * the checker takes its text (docs/optimizations.md, "The native vocabulary walk").
 *
 * Plain C99 on the CPython API and the buffer protocol: no numpy, no build requirement beyond
 * the C compiler mypyc needs already. The tables come from
 * fimconstrain/decoding/masks/vocab_walk.py; its Python twin is tests/decoding/vocab_walk_twin.py.
 *
 * The rules are advance's, character by character, for each branch (parser, layout, lexer state,
 * lexeme, guards); a branch's (parser, layout) is a *context* id that Python gave out, and its
 * allowed terminals are W 64-bit words:
 *   - each guard steps; a guard that dies is dropped; a guard that reaches an accepting state
 *     kills the branch (a longer match exists);
 *   - where the lexeme may end (final[q] and not final[nxt]) Python ends the symbol (layer
 *     end_symbol + lex_start + allowed, memoised here per walk by context, state and text, or
 *     by context and state alone for an ASCII text where Python says the answer is the same
 *     for every ASCII text (a name, a number, an operator in most places), or for every one
 *     without a backslash (a string, whose escapes alone are read)):
 *     the branch that ends it starts a new lexeme with the character, guarded by nxt, if that
 *     lexeme can still become an allowed terminal (live & allowed);
 *   - the branch that goes on lives while live[nxt] & allowed.
 * A token passes when some branch is alive after its last character. A lexeme end whose new
 * lexer state Python has no dense id for makes the tokens below it *undecided* (fed by Python)
 * unless another branch decides them. A subtree with neither is pruned, and so is one without a
 * token asked about, when they are given, whose tokens are then not marked (a token not asked
 * about may be said to fail when it passes, never the other way): as a bitset ``only`` (many
 * tokens) or as ids ``asked`` (a few: a top-k row). Either becomes a bitset over the trie's
 * *places* (token k of ``tok_ids``, in preorder, so that a subtree's tokens are a run of places):
 * a node's next child to read is the one holding the next asked place, found by a word scan and
 * a galloping search over its children's first places, not by reading every edge of a node with
 * thousands (the root, a blank).
 * An unguarded branch whose lexer state every character below a node leaves where it is (the
 * classes below each node and each state's self-loops are worked out by ``prepare``) passes every
 * token below (every asked one, when they are given) without reading the subtree (the tail of a
 * name, a blank run, a comment).
 * The tables are checked once, when ``prepare`` wraps them (a walk reads them unchecked).
 * Keep in step with lexer.py's advance (its twin note) and the twin's walk_py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* bumped whenever the arguments or the tables change meaning (vocab_walk.py checks it) */
#define WALK_ABI 7

typedef struct {
    int32_t ctx;    /* context id: (parser, layout) in Python */
    int32_t q;      /* dense lexer state of the lexeme in progress */
    int32_t origin; /* root branch whose lexeme this lexeme continues, or -1 */
    int32_t begin;  /* depth where the lexeme's characters on the path start */
    int32_t ng;     /* guards: gd[goff .. goff + ng) */
    int32_t goff;
} Branch;

/* a frame's node: its next edge to read (``edge``), its last edge and its subtree's last place */
typedef struct {
    int32_t edge, last, place_end, lo, hi, gmark, unknown, depth;
} Frame;

/* An edge as the walk reads it: its character and class, and what the walk reads of the node
 * it leads to, in one record of 32 bytes (a walk reads a node it has not read before at every
 * step: one cache line, not the five arrays the tables hold it in; a node's edges are adjacent,
 * so its children are read in one stream). */
typedef struct {
    uint32_t cp;
    int32_t cls;
    int32_t edge, edge_end; /* the child's edges */
    int32_t place;          /* the child's first place: its own tokens, then its subtree's */
    int32_t own_end;        /* the place after its own tokens */
    int32_t place_end;      /* the place after its subtree's */
    uint32_t through;       /* bit j: every character below the child is in loop class set j */
} Edge;

/* the most distinct sets of classes that leave a lexer state where it is, each a bit of a
 * child's ``through`` (Python's lexer has 18); a state whose set is not among them is tested
 * against the classes below the child (``below_cls``) */
#define THROUGH_SETS 32

/* an ``only`` with at most one token in SPARSE_SHARE of the trie's places is read as its ids (their
 * places set one by one, most in one read: ``one_place``) rather than place by place (every
 * place's token looked up in ``only``, about four times the cost of an id's) */
#define SPARSE_SHARE 3

/* a memo key's origin for the answer that serves every ASCII text of its context and state,
 * and for the one that serves every ASCII text without a backslash */
#define ANY_ASCII (-3)
#define ANY_PLAIN (-4)

/* what on_end says it read of an ASCII text (layer_protocol.py's READS_*) */
enum { READS_NOTHING, READS_ESCAPES, READS_TEXT };

typedef struct {
    uint64_t hash;
    int32_t ctx, q, origin, len;
    Py_ssize_t off; /* the key's characters in karena */
    int32_t ctx2;   /* >= 0: the context after the symbol; -1: rejected; -2: undecided */
    int32_t start;  /* dense lexer state a new symbol starts from */
    int used;
} Memo;

typedef struct {
    const int32_t *tok_ids;
    const int32_t *trans;
    const uint8_t *final;
    const uint64_t *live;
    Py_ssize_t n_toks, S, C, W;
    uint8_t *pass_out, *und_out;
    Py_ssize_t out_bits;
    uint64_t *ctx_allowed;
    Py_ssize_t ctx_cap;
    Branch *br;
    Py_ssize_t br_n, br_cap;
    int32_t *gd;
    Py_ssize_t gd_n, gd_cap;
    uint32_t *path;
    Memo *memo;
    Py_ssize_t memo_cap, memo_n;
    uint32_t *karena;
    Py_ssize_t k_n, k_cap;
    Py_UCS4 *tbuf;
    Py_ssize_t tbuf_cap;
    PyObject *root_lexemes; /* list of str, by origin */
    PyObject *on_end;
    long calls;
} Walk;

static int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * item);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

static int set_ctx_allowed(Walk *w, Py_ssize_t ctx, PyObject *bytes) {
    if (!PyBytes_Check(bytes) || PyBytes_GET_SIZE(bytes) != w->W * 8) {
        PyErr_SetString(PyExc_ValueError, "allowed terminals must be bytes of W words");
        return -1;
    }
    if (ctx >= w->ctx_cap) {
        Py_ssize_t old = w->ctx_cap, n = old ? old : 16;
        while (n <= ctx) n *= 2;
        uint64_t *q = realloc(w->ctx_allowed, (size_t)(n * w->W) * sizeof(uint64_t));
        if (!q) {
            PyErr_NoMemory();
            return -1;
        }
        memset(q + old * w->W, 0, (size_t)((n - old) * w->W) * sizeof(uint64_t));
        w->ctx_allowed = q;
        w->ctx_cap = n;
    }
    memcpy(w->ctx_allowed + ctx * w->W, PyBytes_AS_STRING(bytes), (size_t)(w->W * 8));
    return 0;
}

static int live_under(const Walk *w, int32_t q, int32_t ctx) {
    const uint64_t *a = w->live + (Py_ssize_t)q * w->W, *b = w->ctx_allowed + (Py_ssize_t)ctx * w->W;
    for (Py_ssize_t k = 0; k < w->W; k++)
        if (a[k] & b[k]) return 1;
    return 0;
}

static uint64_t key_hash(int32_t ctx, int32_t q, int32_t origin, const uint32_t *cps, int32_t len) {
    uint64_t h = 1469598103934665603ULL;
    h = (h ^ (uint32_t)ctx) * 1099511628211ULL;
    h = (h ^ (uint32_t)q) * 1099511628211ULL;
    h = (h ^ (uint32_t)origin) * 1099511628211ULL;
    for (int32_t k = 0; k < len; k++) h = (h ^ cps[k]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

/* the memo's slot for a key: its entry (used) or the empty slot where it goes */
static Memo *memo_slot(const Walk *w, uint64_t h, int32_t ctx, int32_t q, int32_t origin, const uint32_t *cps,
                       int32_t len) {
    Py_ssize_t mask = w->memo_cap - 1, at = (Py_ssize_t)(h & (uint64_t)mask);
    while (w->memo[at].used) {
        Memo *m = &w->memo[at];
        if (m->hash == h && m->ctx == ctx && m->q == q && m->origin == origin && m->len == len &&
            (len == 0 || memcmp(w->karena + m->off, cps, (size_t)len * sizeof(uint32_t)) == 0))
            return m;
        at = (at + 1) & mask;
    }
    return &w->memo[at];
}

/* fill the empty ``slot`` with the key and its answer (the table stays at most half full) */
static int memo_put(Walk *w, Memo *slot, Memo m, const uint32_t *cps) {
    if (grow((void **)&w->karena, &w->k_cap, w->k_n + m.len, sizeof(uint32_t)) < 0) return -1;
    if (m.len) memcpy(w->karena + w->k_n, cps, (size_t)m.len * sizeof(uint32_t));
    m.off = w->k_n;
    m.used = 1;
    w->k_n += m.len;
    *slot = m;
    if (++w->memo_n * 2 <= w->memo_cap) return 0;
    Py_ssize_t n = w->memo_cap * 2;
    Memo *t = calloc((size_t)n, sizeof(Memo));
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < w->memo_cap; k++) {
        if (!w->memo[k].used) continue;
        Py_ssize_t j = (Py_ssize_t)(w->memo[k].hash & (uint64_t)(n - 1));
        while (t[j].used) j = (j + 1) & (n - 1);
        t[j] = w->memo[k];
    }
    free(w->memo);
    w->memo = t;
    w->memo_cap = n;
    return 0;
}

/* on_end's answer, ((context, state, allowed) | None | int, what it read of an ASCII text),
 * read into *ctx2 (-1 rejected, -2 undecided), *start and *reads */
static int read_answer(Walk *w, PyObject *res, int32_t *ctx2, int32_t *start, int *reads) {
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        PyErr_SetString(PyExc_TypeError, "on_end must give (answer, what it read of the text)");
        return -1;
    }
    PyObject *answer = PyTuple_GET_ITEM(res, 0);
    long read = PyLong_AsLong(PyTuple_GET_ITEM(res, 1));
    if (read == -1 && PyErr_Occurred()) return -1;
    if (read < READS_NOTHING || read > READS_TEXT) {
        PyErr_SetString(PyExc_ValueError, "on_end said it read something unknown of the text");
        return -1;
    }
    *reads = (int)read;
    *start = 0;
    if (answer == Py_None) {
        *ctx2 = -1;
        return 0;
    }
    if (PyLong_Check(answer)) {
        *ctx2 = -2;
        return 0;
    }
    if (!PyTuple_Check(answer) || PyTuple_GET_SIZE(answer) != 3) {
        PyErr_SetString(PyExc_TypeError, "on_end's answer must be None, an int or (context, state, allowed)");
        return -1;
    }
    long a = PyLong_AsLong(PyTuple_GET_ITEM(answer, 0)), st = PyLong_AsLong(PyTuple_GET_ITEM(answer, 1));
    if ((a == -1 || st == -1) && PyErr_Occurred()) return -1;
    if (a < 0 || a > INT32_MAX || st < 0 || st >= w->S) {
        PyErr_SetString(PyExc_ValueError, "on_end gave a context or a state out of range");
        return -1;
    }
    if (set_ctx_allowed(w, a, PyTuple_GET_ITEM(answer, 2)) < 0) return -1;
    *ctx2 = (int32_t)a;
    *start = (int32_t)st;
    return 0;
}

/* Python's verdict on the symbol that ends: (ctx2, start) in *out, memoised by its text, or by
 * context and state alone for an ASCII text where Python says no ASCII text changes it (or none
 * without a backslash, which the text lacks) */
static int end_symbol(Walk *w, const Branch *b, int32_t upto, int32_t *ctx2, int32_t *start) {
    int32_t len = upto - b->begin;
    const uint32_t *cps = w->path + b->begin;
    PyObject *head = b->origin >= 0 ? PyList_GET_ITEM(w->root_lexemes, b->origin) : NULL;
    int ascii = !head || PyUnicode_IS_ASCII(head), escapes = 0;
    for (int32_t k = 0; ascii && k < len; k++) {
        ascii = cps[k] < 128;
        escapes |= cps[k] == '\\';
    }
    uint64_t any_h = key_hash(b->ctx, b->q, ANY_ASCII, NULL, 0);
    Memo *any = ascii ? memo_slot(w, any_h, b->ctx, b->q, ANY_ASCII, NULL, 0) : NULL;
    if (any && any->used) {
        *ctx2 = any->ctx2;
        *start = any->start;
        return 0;
    }
    if (ascii && head && !escapes) { /* (the root's lexeme read only past the memo for every text) */
        Py_ssize_t at = PyUnicode_FindChar(head, '\\', 0, PyUnicode_GET_LENGTH(head), 1);
        if (at == -2) return -1;
        escapes = at >= 0;
    }
    uint64_t plain_h = key_hash(b->ctx, b->q, ANY_PLAIN, NULL, 0);
    Memo *plain = ascii && !escapes ? memo_slot(w, plain_h, b->ctx, b->q, ANY_PLAIN, NULL, 0) : NULL;
    if (plain && plain->used) {
        *ctx2 = plain->ctx2;
        *start = plain->start;
        return 0;
    }
    uint64_t h = key_hash(b->ctx, b->q, b->origin, cps, len);
    Memo *m = memo_slot(w, h, b->ctx, b->q, b->origin, cps, len);
    if (m->used) {
        *ctx2 = m->ctx2;
        *start = m->start;
        return 0;
    }
    /* the lexeme's text: the root branch's lexeme, then the path's characters */
    Py_ssize_t hn = head ? PyUnicode_GET_LENGTH(head) : 0;
    if (grow((void **)&w->tbuf, &w->tbuf_cap, hn + len + 1, sizeof(Py_UCS4)) < 0) return -1;
    if (head && !PyUnicode_AsUCS4(head, w->tbuf, hn + 1, 0)) return -1;
    for (int32_t k = 0; k < len; k++) w->tbuf[hn + k] = cps[k];
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, w->tbuf, hn + len);
    if (!text) return -1;
    w->calls++;
    PyObject *ctx = PyLong_FromLong(b->ctx), *q = ctx ? PyLong_FromLong(b->q) : NULL, *res = NULL;
    if (q) {
        PyObject *args[3] = {ctx, q, text};
        res = PyObject_Vectorcall(w->on_end, args, 3, NULL);
    }
    Py_XDECREF(ctx);
    Py_XDECREF(q);
    Py_DECREF(text);
    if (!res) return -1;
    int reads;
    int failed = read_answer(w, res, ctx2, start, &reads);
    Py_DECREF(res);
    if (failed) return -1;
    /* (the slots found before the call: on_end added no entry since) */
    if (ascii && reads == READS_NOTHING) {
        Memo e = {any_h, b->ctx, b->q, ANY_ASCII, 0, 0, *ctx2, *start, 1};
        return memo_put(w, any, e, NULL);
    }
    if (plain && reads == READS_ESCAPES) {
        Memo e = {plain_h, b->ctx, b->q, ANY_PLAIN, 0, 0, *ctx2, *start, 1};
        return memo_put(w, plain, e, NULL);
    }
    Memo e = {h, b->ctx, b->q, b->origin, len, 0, *ctx2, *start, 1};
    return memo_put(w, m, e, cps);
}

static int push_branch(Walk *w, Branch b) {
    if (grow((void **)&w->br, &w->br_cap, w->br_n + 1, sizeof(Branch)) < 0) return -1;
    w->br[w->br_n++] = b;
    return 0;
}

/* branch ``b`` (a copy) reads the character at depth ``i`` of class ``cls``: its successors are
 * appended to the branch arena; *unknown is set where Python cannot tell */
static int step(Walk *w, Branch b, int32_t i, int32_t cls, int *unknown) {
    const Py_ssize_t C = w->C;
    if (grow((void **)&w->gd, &w->gd_cap, w->gd_n + 2 * (Py_ssize_t)b.ng + 2, sizeof(int32_t)) < 0) return -1;
    int32_t gmark = (int32_t)w->gd_n, nk = 0;
    for (int32_t k = 0; k < b.ng; k++) {
        int32_t g2 = w->trans[(Py_ssize_t)w->gd[b.goff + k] * C + cls];
        if (g2 == 0) continue;
        if (w->final[g2]) return 0; /* a guard saw a longer match: this branch is wrong */
        w->gd[gmark + nk++] = g2;
    }
    w->gd_n += nk;
    int32_t nxt = w->trans[(Py_ssize_t)b.q * C + cls];
    if (w->final[b.q] && !w->final[nxt]) {
        int32_t ctx2, start;
        if (end_symbol(w, &b, i, &ctx2, &start) < 0) return -1;
        if (ctx2 == -2) {
            *unknown = 1;
        } else if (ctx2 >= 0) {
            int32_t fresh = w->trans[(Py_ssize_t)start * C + cls];
            if (fresh != 0 && live_under(w, fresh, ctx2)) {
                int32_t goff = (int32_t)w->gd_n;
                for (int32_t k = 0; k < nk; k++) w->gd[goff + k] = w->gd[gmark + k];
                int32_t ng = nk;
                if (nxt != 0) w->gd[goff + ng++] = nxt;
                w->gd_n += ng;
                Branch e = {ctx2, fresh, -1, i, ng, goff};
                if (push_branch(w, e) < 0) return -1;
            }
        }
    }
    if (nxt != 0 && live_under(w, nxt, b.ctx)) {
        Branch c = {b.ctx, nxt, b.origin, b.begin, nk, gmark};
        if (push_branch(w, c) < 0) return -1;
    }
    return 0;
}

/* whether the class set ``have`` holds every class of ``need`` (``words`` words each) */
static int covers(const uint64_t *have, const uint64_t *need, Py_ssize_t words) {
    for (Py_ssize_t k = 0; k < words; k++)
        if (need[k] & ~have[k]) return 0;
    return 1;
}

static void mark(uint8_t *out, const Walk *w, Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t k = lo; k < hi; k++) {
        int32_t t = w->tok_ids[k];
        out[t >> 3] |= (uint8_t)(1u << (t & 7));
    }
}

/* the first place at or after ``from`` and before ``to`` set in ``places``, or -1 */
static Py_ssize_t next_place(const uint64_t *places, Py_ssize_t from, Py_ssize_t to) {
    if (from >= to) return -1;
    Py_ssize_t k = from >> 6;
    uint64_t word = places[k] & (~0ULL << (from & 63));
    while (!word) {
        if (++k << 6 >= to) return -1;
        word = places[k];
    }
    Py_ssize_t at = (k << 6) + __builtin_ctzll(word);
    return at < to ? at : -1;
}

/* the tokens at the places of ``places`` from ``lo`` to ``hi`` into ``out`` */
static void mark_places(uint8_t *out, const Walk *w, const uint64_t *places, Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t k = next_place(places, lo, hi); k >= 0; k = next_place(places, k + 1, hi)) {
        int32_t t = w->tok_ids[k];
        out[t >> 3] |= (uint8_t)(1u << (t & 7));
    }
}

typedef struct {
    Py_buffer v;
    int held;
} Buf;

static int get_buf(PyObject *obj, Buf *b, Py_ssize_t item, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, &b->v, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) return -1;
    b->held = 1;
    if (b->v.len % item) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of items", what, b->v.len);
        return -1;
    }
    return 0;
}

enum { CHILD, CP, CLS, TO, TSTART, TIDS, SUBEND, TRANS, FINAL, LIVE, PSTART, PLACES, NBUF };

/* A walk's tables (vocab_walk.py's fifteen), checked once and held: ``prepare(tables)`` */
typedef struct {
    PyObject_HEAD
    Buf bufs[NBUF];
    Py_ssize_t S, C, W, n_nodes, n_edges, n_toks, n_ids;
    int32_t max_token;  /* the largest token id (-1: none) */
    Edge *edges;
    int32_t *edge_place;    /* by edge: its child's first place (apart, for the searches over a node's edges) */
    int32_t root_place_end; /* the place after the root's subtree */
    int32_t *one_place;     /* by token: its place where it has one, else -1 (read tok_places) */
    Py_ssize_t CW;      /* 64-bit words of a set of character classes */
    int8_t *loop_set;   /* by lexer state: its bit in a node's ``through``, or -1 (test loop_cls) */
    uint64_t *loop_cls; /* by lexer state: the classes that leave it where it is */
    uint64_t *below_cls; /* by edge: the classes of every character below its child (kept only
                          * where some state's set has no ``through`` bit) */
    int busy;          /* a walk reads the tables (and may call Python, which could walk again) */
} Tables;

static void tables_dealloc(Tables *t) {
    for (int k = 0; k < NBUF; k++)
        if (t->bufs[k].held) PyBuffer_Release(&t->bufs[k].v);
    free(t->edges);
    free(t->edge_place);
    free(t->one_place);
    free(t->loop_set);
    free(t->loop_cls);
    free(t->below_cls);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyTypeObject TablesType = {
    PyVarObject_HEAD_INIT(NULL, 0) /* (the macro ends in a comma) */
    .tp_name = "fimconstrain.engine._walk.Tables",
    .tp_basicsize = sizeof(Tables),
    .tp_dealloc = (destructor)tables_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A walk's tables, checked once (made by prepare).",
};

/* every index in the tables within range, so that a walk reads them unchecked */
static int check_tables(Tables *t) {
    const int32_t *child_start = t->bufs[CHILD].v.buf, *edge_cls = t->bufs[CLS].v.buf,
                  *edge_to = t->bufs[TO].v.buf, *tok_start = t->bufs[TSTART].v.buf,
                  *tok_ids = t->bufs[TIDS].v.buf, *subtree_end = t->bufs[SUBEND].v.buf,
                  *trans = t->bufs[TRANS].v.buf, *p_start = t->bufs[PSTART].v.buf,
                  *places = t->bufs[PLACES].v.buf;
    const char *wrong = NULL;
    if (t->n_nodes < 1 || t->S < 1 || t->C < 1 || t->W < 1 || t->bufs[CLS].v.len / 4 != t->n_edges ||
        t->bufs[TO].v.len / 4 != t->n_edges || t->bufs[TSTART].v.len / 4 != t->n_nodes + 1 ||
        t->bufs[SUBEND].v.len / 4 != t->n_nodes || t->bufs[TRANS].v.len / 4 != t->S * t->C ||
        t->bufs[FINAL].v.len != t->S || t->bufs[LIVE].v.len / 8 != t->S * t->W ||
        t->n_ids < 0)
        wrong = "the tables' sizes do not agree";
    for (Py_ssize_t k = 0; !wrong && k <= t->n_ids; k++)
        if (p_start[k] < (k ? p_start[k - 1] : 0) || p_start[k] > t->bufs[PLACES].v.len / 4)
            wrong = "a token's places are out of range";
    for (Py_ssize_t k = 0; !wrong && k < t->bufs[PLACES].v.len / 4; k++)
        if (places[k] < 0 || places[k] >= t->n_toks) wrong = "a token's place is out of range";
    for (Py_ssize_t k = 0; !wrong && k < t->n_toks; k++)
        if (tok_ids[k] < 0) wrong = "a token id is negative";
    for (Py_ssize_t k = 0; !wrong && k < t->n_edges; k++)
        if (edge_to[k] <= 0 || edge_to[k] >= t->n_nodes || edge_cls[k] < 0 || edge_cls[k] >= t->C)
            wrong = "an edge is out of range";
    for (Py_ssize_t n = 0; !wrong && n <= t->n_nodes; n++)
        if (child_start[n] < (n ? child_start[n - 1] : 0) || child_start[n] > t->n_edges ||
            tok_start[n] < (n ? tok_start[n - 1] : 0) || tok_start[n] > t->n_toks ||
            (n < t->n_nodes && (subtree_end[n] <= n || subtree_end[n] > t->n_nodes)))
            wrong = "a node is out of range";
    for (Py_ssize_t k = 0; !wrong && k < t->S * t->C; k++)
        if (trans[k] < 0 || trans[k] >= t->S) wrong = "a transition is out of range";
    t->max_token = -1;
    for (Py_ssize_t k = 0; !wrong && k < t->n_toks; k++)
        if (tok_ids[k] > t->max_token) t->max_token = tok_ids[k];
    if (wrong) PyErr_Format(PyExc_ValueError, "walk: %s", wrong);
    return wrong ? -1 : 0;
}

/* the classes below each node (children come after their parent), into ``below`` (n_nodes * CW words) */
static void classes_below(const Tables *t, uint64_t *below) {
    const int32_t *edge_to = t->bufs[TO].v.buf, *edge_cls = t->bufs[CLS].v.buf,
                  *child_start = t->bufs[CHILD].v.buf;
    for (Py_ssize_t n = t->n_nodes - 1; n >= 0; n--)
        for (int32_t e = child_start[n]; e < child_start[n + 1]; e++) {
            uint64_t *mine = below + n * t->CW, *kid = below + (Py_ssize_t)edge_to[e] * t->CW;
            for (Py_ssize_t k = 0; k < t->CW; k++) mine[k] |= kid[k];
            mine[edge_cls[e] / 64] |= 1ULL << (edge_cls[e] % 64);
        }
}

/* the walk's own layout of the checked tables: the edges as records, each state's loop classes
 * and their set's bit in a child's ``through`` */
static int lay_out(Tables *t) {
    const int32_t *edge_to = t->bufs[TO].v.buf, *edge_cls = t->bufs[CLS].v.buf,
                  *child_start = t->bufs[CHILD].v.buf, *trans = t->bufs[TRANS].v.buf,
                  *tok_start = t->bufs[TSTART].v.buf, *subtree_end = t->bufs[SUBEND].v.buf;
    const uint32_t *edge_cp = t->bufs[CP].v.buf;
    Py_ssize_t CW = t->CW = (t->C + 63) / 64;
    uint64_t *below = calloc((size_t)(t->n_nodes * CW), sizeof(uint64_t));
    t->edges = malloc((size_t)(t->n_edges ? t->n_edges : 1) * sizeof(Edge));
    t->edge_place = malloc((size_t)(t->n_edges ? t->n_edges : 1) * sizeof(int32_t));
    t->one_place = malloc((size_t)(t->n_ids ? t->n_ids : 1) * sizeof(int32_t));
    t->loop_set = malloc((size_t)t->S);
    t->loop_cls = calloc((size_t)(t->S * CW), sizeof(uint64_t));
    if (!below || !t->edges || !t->edge_place || !t->one_place || !t->loop_set || !t->loop_cls) {
        free(below);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t q = 1; q < t->S; q++) /* (not DEAD: no branch lives there) */
        for (Py_ssize_t c = 0; c < t->C; c++)
            if (trans[q * t->C + c] == q) t->loop_cls[q * CW + c / 64] |= 1ULL << (c % 64);
    /* the distinct loop sets, numbered as met */
    Py_ssize_t sets[THROUGH_SETS], n_sets = 0;
    int untold = 0;
    for (Py_ssize_t q = 0; q < t->S; q++) {
        const uint64_t *mine = t->loop_cls + q * CW;
        int j = 0;
        while (j < n_sets && memcmp(t->loop_cls + sets[j] * CW, mine, (size_t)CW * 8)) j++;
        if (j == n_sets && n_sets < THROUGH_SETS) sets[n_sets++] = q;
        t->loop_set[q] = j < n_sets ? (int8_t)j : -1;
        untold |= j == n_sets;
    }
    classes_below(t, below);
    for (Py_ssize_t e = 0; e < t->n_edges; e++) {
        int32_t n = edge_to[e];
        uint32_t through = 0;
        for (int j = 0; j < n_sets; j++)
            if (covers(t->loop_cls + sets[j] * CW, below + (Py_ssize_t)n * CW, CW)) through |= 1u << j;
        t->edges[e] = (Edge){edge_cp[e], edge_cls[e], child_start[n], child_start[n + 1], tok_start[n],
                             tok_start[n + 1], tok_start[subtree_end[n]], through};
        t->edge_place[e] = tok_start[n];
    }
    t->root_place_end = tok_start[subtree_end[0]];
    const int32_t *p_start = t->bufs[PSTART].v.buf, *p = t->bufs[PLACES].v.buf;
    for (Py_ssize_t k = 0; k < t->n_ids; k++)
        t->one_place[k] = p_start[k + 1] - p_start[k] == 1 ? p[p_start[k]] : -1;
    if (untold) { /* (by edge, as the walk reads them) */
        t->below_cls = calloc((size_t)((t->n_edges ? t->n_edges : 1) * CW), sizeof(uint64_t));
        if (!t->below_cls) {
            free(below);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t e = 0; e < t->n_edges; e++)
            memcpy(t->below_cls + e * CW, below + (Py_ssize_t)edge_to[e] * CW, (size_t)CW * 8);
    }
    free(below);
    return 0;
}

static PyObject *prepare(PyObject *self, PyObject *arg) {
    (void)self;
    static const Py_ssize_t items[NBUF] = {4, 4, 4, 4, 4, 4, 4, 4, 1, 8, 4, 4};
    static const char *names[NBUF] = {"child_start", "edge_cp",     "edge_cls", "edge_to", "tok_start",
                                      "tok_ids",     "subtree_end", "trans",    "final",   "live",
                                      "tok_place_start", "tok_places"};
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != NBUF + 3) {
        PyErr_SetString(PyExc_ValueError, "prepare: a tuple of 15 tables expected");
        return NULL;
    }
    Tables *t = PyObject_New(Tables, &TablesType);
    if (!t) return NULL;
    memset(t->bufs, 0, sizeof(t->bufs));
    t->edges = NULL;
    t->edge_place = NULL;
    t->one_place = NULL;
    t->loop_set = NULL;
    t->loop_cls = t->below_cls = NULL;
    t->busy = 0;
    for (int k = 0; k < NBUF; k++)
        if (get_buf(PyTuple_GET_ITEM(arg, k), &t->bufs[k], items[k], 0, names[k]) < 0) goto fail;
    t->S = PyLong_AsSsize_t(PyTuple_GET_ITEM(arg, NBUF));
    t->C = PyLong_AsSsize_t(PyTuple_GET_ITEM(arg, NBUF + 1));
    t->W = PyLong_AsSsize_t(PyTuple_GET_ITEM(arg, NBUF + 2));
    if (PyErr_Occurred()) goto fail;
    t->n_nodes = t->bufs[CHILD].v.len / 4 - 1;
    t->n_edges = t->bufs[CP].v.len / 4;
    t->n_toks = t->bufs[TIDS].v.len / 4;
    t->n_ids = t->bufs[PSTART].v.len / 4 - 1;
    if (check_tables(t) < 0) goto fail;
    if (lay_out(t) < 0) goto fail;
    return (PyObject *)t;
fail:
    Py_DECREF(t);
    return NULL;
}

/* the places of token ``tok`` set in ``places`` (a token without a text has none) */
static void set_places(const Tables *t, uint64_t *places, int32_t tok) {
    if (tok < 0 || tok >= t->n_ids) return;
    int32_t one = t->one_place[tok];
    if (one >= 0) {
        places[one >> 6] |= 1ULL << (one & 63);
        return;
    }
    const int32_t *p_start = t->bufs[PSTART].v.buf, *p = t->bufs[PLACES].v.buf;
    for (int32_t j = p_start[tok]; j < p_start[tok + 1]; j++) places[p[j] >> 6] |= 1ULL << (p[j] & 63);
}

/* the places of the tokens of ``only`` (a bitset by token id) set in ``places``: token by token
 * where they are few (SPARSE_SHARE), else place by place */
static void only_places(const Tables *t, uint64_t *places, const uint8_t *only, Py_ssize_t only_bytes) {
    Py_ssize_t count = 0, most = t->n_toks / SPARSE_SHARE, at = 0;
    for (; at + 8 <= only_bytes && count <= most; at += 8) { /* (counted until there are too many) */
        uint64_t word;
        memcpy(&word, only + at, 8);
        count += __builtin_popcountll(word);
    }
    for (; at < only_bytes && count <= most; at++) count += __builtin_popcount(only[at]);
    if (count <= most) { /* (by 64-bit words: most are empty) */
        for (at = 0; at < only_bytes; at += 8) {
            uint64_t word = 0;
            memcpy(&word, only + at, only_bytes - at < 8 ? (size_t)(only_bytes - at) : 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            word = __builtin_bswap64(word); /* (byte k of the word holds tokens 8k ..) */
#endif
            for (; word; word &= word - 1) set_places(t, places, (int32_t)(at * 8 + __builtin_ctzll(word)));
        }
        return;
    }
    const int32_t *tok_ids = t->bufs[TIDS].v.buf;
    Py_ssize_t only_bits = only_bytes * 8;
    for (Py_ssize_t k = 0; k < t->n_toks; k += 64) {
        uint64_t word = 0;
        Py_ssize_t n = t->n_toks - k < 64 ? t->n_toks - k : 64;
        for (Py_ssize_t j = 0; j < n; j++) {
            int32_t tok = tok_ids[k + j];
            word |= (uint64_t)(tok < only_bits && (only[tok >> 3] >> (tok & 7) & 1)) << j;
        }
        places[k >> 6] = word;
    }
}

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    Tables *t;
    PyObject *roots, *root_lexemes, *root_allowed, *on_end, *pass_obj, *und_obj, *only_obj = Py_None,
                                                                                   *asked_obj = Py_None;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOO|OO", &TablesType, &t, &PyList_Type, &roots, &PyList_Type,
                          &root_lexemes, &PyList_Type, &root_allowed, &on_end, &pass_obj, &und_obj, &only_obj,
                          &asked_obj))
        return NULL;
    if (only_obj != Py_None && asked_obj != Py_None) {
        PyErr_SetString(PyExc_ValueError, "walk: the tokens asked about as a bitset or as ids, not both");
        return NULL;
    }
    if (t->busy) {
        PyErr_SetString(PyExc_RuntimeError, "walk: these tables are being walked already");
        return NULL;
    }
    Buf bufs[4];
    memset(bufs, 0, sizeof(bufs));
    Walk w;
    memset(&w, 0, sizeof(w));
    Frame *frames = NULL;
    uint64_t *places = NULL; /* the places of the tokens asked about (NULL: every token asked) */
    PyObject *result = NULL;
    Py_INCREF(t); /* (the tables outlive a walk whose on_end drops the last other reference) */
    t->busy = 1;
    if (get_buf(pass_obj, &bufs[0], 1, 1, "pass_out") < 0) goto done;
    if (get_buf(und_obj, &bufs[1], 1, 1, "und_out") < 0) goto done;
    if (only_obj != Py_None && get_buf(only_obj, &bufs[2], 1, 0, "only") < 0) goto done;
    w.S = t->S;
    w.C = t->C;
    w.W = t->W;
    w.tok_ids = t->bufs[TIDS].v.buf;
    w.trans = t->bufs[TRANS].v.buf;
    w.final = t->bufs[FINAL].v.buf;
    w.live = t->bufs[LIVE].v.buf;
    w.n_toks = t->n_toks;
    w.pass_out = bufs[0].v.buf;
    w.und_out = bufs[1].v.buf;
    w.out_bits = bufs[0].v.len * 8;
    if (bufs[1].v.len != bufs[0].v.len) {
        PyErr_SetString(PyExc_ValueError, "walk: the output bitsets differ in size");
        goto done;
    }
    if (t->max_token >= w.out_bits) {
        PyErr_SetString(PyExc_ValueError, "walk: a token id is outside the output bitsets");
        goto done;
    }
    if (asked_obj != Py_None && get_buf(asked_obj, &bufs[3], 4, 0, "asked") < 0) goto done;
    if (bufs[2].held || bufs[3].held) {
        if (!(places = calloc((size_t)(w.n_toks / 64 + 1), sizeof(uint64_t)))) {
            PyErr_NoMemory();
            goto done;
        }
        if (bufs[3].held) {
            const int32_t *ids = bufs[3].v.buf;
            for (Py_ssize_t k = 0; k < bufs[3].v.len / 4; k++) set_places(t, places, ids[k]);
        } else {
            only_places(t, places, bufs[2].v.buf, bufs[2].v.len);
        }
    }
    w.root_lexemes = root_lexemes;
    w.on_end = on_end;
    w.memo_cap = 256;
    w.memo = calloc((size_t)w.memo_cap, sizeof(Memo));
    Py_ssize_t frames_cap = 0, path_cap = 0;
    if (grow((void **)&frames, &frames_cap, 64, sizeof(Frame)) < 0 ||
        grow((void **)&w.path, &path_cap, 64, sizeof(uint32_t)) < 0)
        goto done;
    if (!w.memo) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(root_allowed); k++)
        if (set_ctx_allowed(&w, k, PyList_GET_ITEM(root_allowed, k)) < 0) goto done;
    /* the root branches: (ctx, q, origin, guards) */
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(roots); k++) {
        PyObject *r = PyList_GET_ITEM(roots, k);
        PyObject *guards;
        int ctx, q, origin;
        if (!PyArg_ParseTuple(r, "iiiO!", &ctx, &q, &origin, &PyTuple_Type, &guards)) goto done;
        if (ctx < 0 || ctx >= PyList_GET_SIZE(root_allowed) || q < 0 || q >= w.S || origin < -1 ||
            origin >= PyList_GET_SIZE(root_lexemes) ||
            (origin >= 0 && !PyUnicode_Check(PyList_GET_ITEM(root_lexemes, origin)))) {
            PyErr_SetString(PyExc_ValueError, "walk: a root branch is out of range");
            goto done;
        }
        Py_ssize_t ng = PyTuple_GET_SIZE(guards);
        if (grow((void **)&w.gd, &w.gd_cap, w.gd_n + ng, sizeof(int32_t)) < 0) goto done;
        Branch b = {ctx, q, origin, 0, (int32_t)ng, (int32_t)w.gd_n};
        for (Py_ssize_t j = 0; j < ng; j++) {
            long g = PyLong_AsLong(PyTuple_GET_ITEM(guards, j));
            if (g < 0 || g >= w.S) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "walk: a guard is out of range");
                goto done;
            }
            w.gd[w.gd_n++] = (int32_t)g;
        }
        if (push_branch(&w, b) < 0) goto done;
    }
    Py_ssize_t top = 0;
    const Edge *edges = t->edges;
    const int32_t *child_start = t->bufs[CHILD].v.buf, *edge_place = t->edge_place;
    frames[0] =
        (Frame){child_start[0], child_start[1], t->root_place_end, 0, (int32_t)w.br_n, (int32_t)w.gd_n, 0, 0};
    while (top >= 0) {
        Frame *f = &frames[top]; /* (valid until frames grows, below) */
        int32_t e = f->edge, last = f->last;
        Py_ssize_t at = -1;
        if (places && e < last) /* the child holding the next asked place */
            at = next_place(places, edge_place[e], f->place_end);
        if (e >= last || (places && at < 0)) {
            w.br_n = f->lo;
            w.gd_n = f->gmark;
            top--;
            continue;
        }
        if (places) { /* the last edge from e on whose subtree begins at or before ``at`` */
            int32_t step = 1, hi;
            while (e + step < last && edge_place[e + step] <= at) {
                e += step;
                step *= 2;
            }
            hi = e + step < last ? e + step : last;
            while (hi - e > 1) {
                int32_t mid = e + (hi - e) / 2;
                if (edge_place[mid] <= at)
                    e = mid;
                else
                    hi = mid;
            }
        }
        f->edge = e + 1;
        const Edge *child = &edges[e];
        int32_t depth = f->depth;
        if (grow((void **)&w.path, &path_cap, depth + 1, sizeof(uint32_t)) < 0) goto done;
        w.path[depth] = child->cp;
        int32_t lo = (int32_t)w.br_n, gmark = (int32_t)w.gd_n;
        int unknown = f->unknown;
        for (int32_t k = f->lo; k < f->hi; k++)
            if (step(&w, w.br[k], depth, child->cls, &unknown) < 0) goto done;
        int through = 0; /* a branch, unguarded, whose lexeme every character below leaves where it is */
        for (int32_t k = lo; !through && k < (int32_t)w.br_n; k++) {
            if (w.br[k].ng) continue;
            int set = t->loop_set[w.br[k].q];
            through = set >= 0 ? (int)(child->through >> set & 1)
                               : covers(t->loop_cls + (Py_ssize_t)w.br[k].q * t->CW,
                                        t->below_cls + (Py_ssize_t)e * t->CW, t->CW);
        }
        if (through) {
            /* that branch neither ends nor dies below (its state and context stay), so every
             * token below passes, marked without reading the subtree (the tail of a name, a
             * blank run, a comment): every asked one, when they are given */
            if (places)
                mark_places(w.pass_out, &w, places, child->place, child->place_end);
            else
                mark(w.pass_out, &w, child->place, child->place_end);
            w.br_n = lo;
            w.gd_n = gmark;
        } else if (w.br_n > lo) {
            mark(w.pass_out, &w, child->place, child->own_end);
            if (grow((void **)&frames, &frames_cap, top + 2, sizeof(Frame)) < 0) goto done;
            __builtin_prefetch(&edges[child->edge]); /* (its first edge: read next) */
            frames[++top] = (Frame){child->edge, child->edge_end, child->place_end, lo,
                                    (int32_t)w.br_n, gmark, unknown, depth + 1};
        } else {
            if (unknown) /* no branch decides the tokens below: Python feeds them */
                mark(w.und_out, &w, child->place, child->place_end);
            w.br_n = lo;
            w.gd_n = gmark;
        }
    }
    result = PyLong_FromLong(w.calls);
done:
    for (int k = 0; k < 4; k++)
        if (bufs[k].held) PyBuffer_Release(&bufs[k].v);
    t->busy = 0;
    Py_DECREF(t);
    free(frames);
    free(places);
    free(w.ctx_allowed);
    free(w.br);
    free(w.gd);
    free(w.path);
    free(w.memo);
    free(w.karena);
    free(w.tbuf);
    return result;
}

/* A top-k row's verdicts read off the bitsets of a walk asked about it by id: each token of
 * ``tokens`` in order, a token of ``own`` (a dict: the verdicts the state told itself, a stop
 * token, a banned one, a child it has) by its own, any other by its bit in ``pass_bits``. None
 * where a token is outside the bitsets or set in ``und_bits`` (the caller then asks the state
 * of each); else (the passing tokens, how many the walk told). One call, not a Python step per
 * token: a row's verdicts cost about as much as its walk in Python. */
static PyObject *verdicts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *tokens, *own, *pass_obj, *und_obj;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyList_Type, &tokens, &PyDict_Type, &own, &pass_obj, &und_obj))
        return NULL;
    Buf bufs[2];
    memset(bufs, 0, sizeof(bufs));
    PyObject *out = NULL, *result = NULL;
    if (get_buf(pass_obj, &bufs[0], 1, 0, "pass_bits") < 0 || get_buf(und_obj, &bufs[1], 1, 0, "und_bits") < 0)
        goto done;
    const uint8_t *pass = bufs[0].v.buf, *und = bufs[1].v.buf;
    Py_ssize_t bits = (bufs[0].v.len < bufs[1].v.len ? bufs[0].v.len : bufs[1].v.len) * 8, walked = 0;
    if (!(out = PyList_New(0))) goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(tokens); k++) {
        PyObject *token = PyList_GET_ITEM(tokens, k);
        PyObject *verdict = PyDict_GetItemWithError(own, token);
        int ok;
        if (verdict) {
            if ((ok = PyObject_IsTrue(verdict)) < 0) goto done;
        } else {
            if (PyErr_Occurred()) goto done;
            long tok = PyLong_AsLong(token);
            if (tok == -1 && PyErr_Occurred()) goto done;
            if (tok < 0 || tok >= bits || (und[tok >> 3] >> (tok & 7) & 1)) {
                Py_INCREF(Py_None);
                result = Py_None;
                goto done;
            }
            walked++;
            ok = pass[tok >> 3] >> (tok & 7) & 1;
        }
        if (ok && PyList_Append(out, token) < 0) goto done;
    }
    result = Py_BuildValue("On", out, walked);
done:
    for (int k = 0; k < 2; k++)
        if (bufs[k].held) PyBuffer_Release(&bufs[k].v);
    Py_XDECREF(out);
    return result;
}

static PyMethodDef methods[] = {
    {"prepare", prepare, METH_O, "prepare(tables) -> Tables: the fifteen tables of vocab_walk.py, checked once"},
    {"walk", walk, METH_VARARGS,
     "walk(tables, roots, root_lexemes, root_allowed, on_end, pass_out, und_out, only=None, asked=None) -> "
     "lexeme ends asked (tables: prepare's; only: a bitset of tokens, asked: int32 token ids)"},
    {"verdicts", verdicts, METH_VARARGS,
     "verdicts(tokens, own, pass_bits, und_bits) -> (passing tokens, tokens the walk told) | None: a row's "
     "verdicts read off a walk's bitsets (own: {token: the state's own verdict})"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walk",
                                    "The exact whole-vocabulary walk (see vocab_walk.py).", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__walk(void) {
    if (PyType_Ready(&TablesType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", WALK_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
