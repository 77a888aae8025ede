/* The branching incremental lexer in C: lexer.py's ``advance`` (paper 004, section V-A), branch
 * for branch and in the same order (docs/optimizations.md, "The branching lexer in C").
 *
 * A ``Lexer`` serves one layer. It keeps a mirror of the layer's lazy lexer automaton as C arrays
 * (each state's ASCII row, whether it accepts, the terminals it may still become as 64-bit words),
 * filled as states are met and rows refreshed where the automaton has not stepped yet, so that a
 * character inside a symbol costs an array read and, where the state changes, a word test: no
 * boxed int, no big-int AND, no tuple. Where a symbol ends the layer answers in one call
 * (``end_and_next``: ``end_symbol``, ``lex_start`` and ``allowed``; bound once), except where
 * its first answers can be told here: nothing the parser takes (the symbol's terminals, the
 * layer's ``token_mask`` per state, against the allowed ones), or a terminal the parser ignores
 * (a space, a comment) in a layout the layer says such a symbol leaves as it is
 * (``ignore_unchanged``, kept by value with the layout's ``lex_start``), or a symbol whose end
 * the layer says is the parser's step alone there, followed by a layout it gave (``plain_ends``:
 * a name, a number, an operator, a bracket outside f-strings; a line break inside brackets, which
 * changes nothing; in JSON every symbol), scanned here with one call of the recognizer and no
 * text. The terminals a (parser, layout) allows are kept by identity in a small cache that holds
 * both, since a piece of text usually starts where the last one stopped.
 *
 * Plain C99 on the CPython API, like _walk.c and _earley.c; lexer.py's ``advance`` is the
 * reference and the fallback. Keep in step with it (its twin note) and with _walk.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* bumped whenever the arguments or their meaning change (native.py checks it) */
#define LEXER_ABI 4

#define DEAD 0
#define UNMIRRORED 2 /* ``fin`` of a state not read from the automaton yet */
#define ALLOWED_SLOTS 256
#define LAYOUT_SLOTS 64
#define LAYOUT_IDS 256 /* the identity index of the layout slots */
#define PLAIN_GROUPS 8  /* the most groups of plain ends a layout may have */
#define SPARE_MAX 4096 /* items a kept buffer may hold */

typedef struct {
    PyObject *parser, *layout; /* strong references (NULL: empty slot) */
    Py_ssize_t off;            /* its words in ``words`` */
} AllowedSlot;

typedef struct {
    PyObject *layout; /* a strong reference (NULL: empty slot) */
    Py_hash_t hash;   /* its hash */
    int unchanged;    /* the layer's ignore_unchanged(layout) */
    int32_t start;    /* its lex_start(layout) */
    /* the layer's plain_ends(layout), ``groups`` of them: each whether it scans (else the parser
     * and layout stay as they are), the layout after (a strong reference), where the next symbol
     * starts, and (in ``plain_words`` from ``off``, 2 W words a group) the group's terminals and
     * what is allowed beside the parser's after them */
    int groups;
    int scans[PLAIN_GROUPS];
    PyObject *after[PLAIN_GROUPS];
    int32_t after_start[PLAIN_GROUPS];
    Py_ssize_t off;
} LayoutSlot;

typedef struct {
    PyObject_HEAD
    PyObject *allowed_fn, *end_fn, *step_fn; /* the layer's and the automaton's, bound */
    PyObject *token_mask_fn, *unchanged_fn, *start_fn;
    PyObject *plain_fn, *scan_fn; /* the layer's plain_ends, its recognizer's scan_expecting */
    PyObject *trans, *ascii_trans, *final, *live;       /* the automaton's lists */
    Py_ssize_t W;                                       /* 64-bit words of a terminal mask */
    Py_ssize_t cap;                                     /* states the mirror has room for */
    int32_t *rows;                                      /* [cap][128]: next state, -1 not known */
    uint8_t *fin;                                       /* [cap]: accepts (0/1), or UNMIRRORED */
    uint64_t *lv;                                       /* [cap][W]: terminals still reachable */
    uint64_t *tm;                                       /* [cap][W]: what a lexeme ended there may be */
    uint8_t *tm_known;                                  /* [cap]: whether ``tm`` has it yet */
    uint64_t *ignore;                                   /* [W]: the terminals the parser ignores */
    LayoutSlot layouts[LAYOUT_SLOTS];
    uint8_t layout_ids[LAYOUT_IDS]; /* a layout's address -> its slot, if the slot still holds it */
    uint64_t *plain_words;          /* [LAYOUT_SLOTS][PLAIN_GROUPS][2 W]: the groups' terminals, extras */
    AllowedSlot slots[ALLOWED_SLOTS];
    uint64_t *slot_words; /* [ALLOWED_SLOTS][W] */
    struct Work *spare;   /* a call's buffers, kept for the next call (NULL while a call holds them) */
} Lexer;

/* ---- a Python int as W little-endian 64-bit words (a mask wider than W words is an error) ---- */

static int long_words(PyObject *v, uint64_t *out, Py_ssize_t W) {
    unsigned char buf[64];
    unsigned char *bytes = W * 8 <= (Py_ssize_t)sizeof(buf) ? buf : PyMem_Malloc((size_t)(W * 8));
    if (!bytes) {
        PyErr_NoMemory();
        return -1;
    }
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "a terminal mask must be an int");
        goto fail;
    }
#if PY_VERSION_HEX >= 0x030D0000
    Py_ssize_t need = PyLong_AsNativeBytes(
        v, bytes, W * 8,
        Py_ASNATIVEBYTES_LITTLE_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
    if (need < 0) goto fail;
    if (need > W * 8) {
        PyErr_SetString(PyExc_OverflowError, "a terminal mask is wider than the grammar's terminals");
        goto fail;
    }
#else
    if (_PyLong_AsByteArray((PyLongObject *)v, bytes, (size_t)(W * 8), 1, 0) < 0) goto fail;
#endif
    for (Py_ssize_t k = 0; k < W; k++) {
        uint64_t word = 0;
        for (int b = 7; b >= 0; b--) word = word << 8 | bytes[k * 8 + b];
        out[k] = word;
    }
    if (bytes != buf) PyMem_Free(bytes);
    return 0;
fail:
    if (bytes != buf) PyMem_Free(bytes);
    return -1;
}

/* ---- the automaton's mirror ---- */

/* make room for state ``s`` and read it from the automaton if the mirror has not yet */
static int mirror(Lexer *x, Py_ssize_t s) {
    if (s < 0 || s >= PyList_GET_SIZE(x->final)) {
        PyErr_SetString(PyExc_ValueError, "lexer: a state outside the automaton");
        return -1;
    }
    if (s >= x->cap) {
        Py_ssize_t n = x->cap ? x->cap : 256;
        while (n <= s) n *= 2;
        int32_t *rows = PyMem_Realloc(x->rows, (size_t)n * 128 * sizeof(int32_t));
        if (rows) x->rows = rows;
        uint8_t *fin = PyMem_Realloc(x->fin, (size_t)n);
        if (fin) x->fin = fin;
        uint64_t *lv = PyMem_Realloc(x->lv, (size_t)(n * x->W) * sizeof(uint64_t));
        if (lv) x->lv = lv;
        uint64_t *tm = PyMem_Realloc(x->tm, (size_t)(n * x->W) * sizeof(uint64_t));
        if (tm) x->tm = tm;
        uint8_t *tm_known = PyMem_Realloc(x->tm_known, (size_t)n);
        if (tm_known) x->tm_known = tm_known;
        if (!rows || !fin || !lv || !tm || !tm_known) {
            PyErr_NoMemory();
            return -1;
        }
        memset(x->fin + x->cap, UNMIRRORED, (size_t)(n - x->cap));
        memset(x->tm_known + x->cap, 0, (size_t)(n - x->cap));
        x->cap = n;
    }
    if (x->fin[s] != UNMIRRORED) return 0;
    PyObject *row = PyList_GET_ITEM(x->ascii_trans, s);
    if (!PyList_Check(row) || PyList_GET_SIZE(row) != 128) {
        PyErr_SetString(PyExc_TypeError, "lexer: an automaton's ASCII row must be a list of 128 ints");
        return -1;
    }
    for (int c = 0; c < 128; c++) {
        long t = PyLong_AsLong(PyList_GET_ITEM(row, c));
        if (t == -1 && PyErr_Occurred()) return -1;
        x->rows[s * 128 + c] = (int32_t)t;
    }
    if (long_words(PyList_GET_ITEM(x->live, s), x->lv + s * x->W, x->W) < 0) return -1;
    int accepts = PyObject_IsTrue(PyList_GET_ITEM(x->final, s));
    if (accepts < 0) return -1;
    x->fin[s] = (uint8_t)accepts;
    return 0;
}

/* the automaton's step from ``s`` over ``code`` where the mirror does not know it: the
 * automaton's own row (it may have stepped since), else its ``step`` */
static int32_t step_slow(Lexer *x, int32_t s, Py_UCS4 code) {
    long t = -1;
    PyObject *ch = NULL, *found = NULL;
    if (code < 128) {
        t = PyLong_AsLong(PyList_GET_ITEM(PyList_GET_ITEM(x->ascii_trans, s), code));
        if (t == -1 && PyErr_Occurred()) return -1;
    }
    if (t < 0) {
        ch = PyUnicode_FromOrdinal((int)code);
        if (!ch) return -1;
        if (code >= 128) found = PyDict_GetItemWithError(PyList_GET_ITEM(x->trans, s), ch); /* borrowed */
        if (found) {
            t = PyLong_AsLong(found);
        } else if (!PyErr_Occurred()) {
            PyObject *sobj = PyLong_FromLong(s);
            if (sobj) {
                PyObject *args[2] = {sobj, ch};
                PyObject *res = PyObject_Vectorcall(x->step_fn, args, 2, NULL);
                Py_DECREF(sobj);
                if (res) {
                    t = PyLong_AsLong(res);
                    Py_DECREF(res);
                }
            }
        }
        Py_DECREF(ch);
    }
    if (t < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "lexer: the automaton stepped to no state");
        return -1;
    }
    if (code < 128) x->rows[(Py_ssize_t)s * 128 + code] = (int32_t)t;
    return (int32_t)t;
}

/* the state after ``s`` (mirrored) reads character ``code``, mirrored too; -1 on an error */
static inline int32_t step(Lexer *x, int32_t s, Py_UCS4 code) {
    int32_t t = code < 128 ? x->rows[(Py_ssize_t)s * 128 + code] : -1;
    if (t < 0 && (t = step_slow(x, s, code)) < 0) return -1;
    if ((t >= x->cap || x->fin[t] == UNMIRRORED) && mirror(x, t) < 0) return -1;
    return t;
}

static int live_under(const Lexer *x, int32_t s, const uint64_t *allowed) {
    const uint64_t *a = x->lv + (Py_ssize_t)s * x->W;
    for (Py_ssize_t k = 0; k < x->W; k++)
        if (a[k] & allowed[k]) return 1;
    return 0;
}

/* the cache's slot for (parser, layout), by identity */
static AllowedSlot *allowed_slot(Lexer *x, PyObject *parser, PyObject *layout) {
    uint64_t h = (uint64_t)(uintptr_t)parser * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)layout;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    return &x->slots[(h >> 40) % ALLOWED_SLOTS];
}

/* the slot now holds (parser, layout), its words to be written by the caller */
static void allowed_take(AllowedSlot *slot, PyObject *parser, PyObject *layout) {
    Py_INCREF(parser);
    Py_INCREF(layout);
    Py_XSETREF(slot->parser, parser);
    Py_XSETREF(slot->layout, layout);
}

/* the terminals allowed after (parser, layout), as words (kept in the cache: valid until the next
 * call) */
static const uint64_t *allowed(Lexer *x, PyObject *parser, PyObject *layout) {
    AllowedSlot *slot = allowed_slot(x, parser, layout);
    if (slot->parser == parser && slot->layout == layout) return x->slot_words + slot->off;
    PyObject *args[2] = {parser, layout};
    PyObject *mask = PyObject_Vectorcall(x->allowed_fn, args, 2, NULL);
    if (!mask) return NULL;
    int failed = long_words(mask, x->slot_words + slot->off, x->W);
    Py_DECREF(mask);
    if (failed) {
        Py_CLEAR(slot->parser);
        Py_CLEAR(slot->layout);
        return NULL;
    }
    allowed_take(slot, parser, layout);
    return x->slot_words + slot->off;
}

/* what the layer said is allowed after (parser, layout) where a symbol ended, kept in the cache
 * when the branch it started outlives the text: the next call (the next piece of text) reads
 * it on from there */
static void remember_allowed(Lexer *x, PyObject *parser, PyObject *layout, const uint64_t *words) {
    AllowedSlot *slot = allowed_slot(x, parser, layout);
    memcpy(x->slot_words + slot->off, words, (size_t)x->W * sizeof(uint64_t));
    allowed_take(slot, parser, layout);
}

/* the terminals a lexeme ended in state ``s`` (mirrored) may be: the layer's token_mask */
static const uint64_t *token_mask(Lexer *x, int32_t s) {
    uint64_t *words = x->tm + (Py_ssize_t)s * x->W;
    if (x->tm_known[s]) return words;
    PyObject *sobj = PyLong_FromLong(s);
    if (!sobj) return NULL;
    PyObject *mask = PyObject_Vectorcall(x->token_mask_fn, &sobj, 1, NULL);
    Py_DECREF(sobj);
    if (!mask) return NULL;
    int failed = long_words(mask, x->tm + (Py_ssize_t)s * x->W, x->W); /* (the mirror may have moved) */
    Py_DECREF(mask);
    if (failed) return NULL;
    x->tm_known[s] = 1;
    return x->tm + (Py_ssize_t)s * x->W;
}

/* what the layer says of ``layout``: whether an ignored symbol leaves it unchanged, and where a
 * new symbol starts in it (kept by value, in a small cache that holds the layout: a layer may
 * build equal layouts anew at every symbol's end) */
static const LayoutSlot *layout_of(Lexer *x, PyObject *layout) {
    /* (by address first: a layout passed on unchanged, or made here for a plain symbol, is met
     * again as the same object, and a tuple's hash is not kept) */
    uint8_t *id = &x->layout_ids[((uint64_t)(uintptr_t)layout * 0x9E3779B97F4A7C15ULL >> 40) % LAYOUT_IDS];
    if (x->layouts[*id].layout == layout) return &x->layouts[*id];
    Py_hash_t hash = PyObject_Hash(layout);
    if (hash == -1) return NULL;
    Py_ssize_t at = (Py_ssize_t)(((uint64_t)hash * 0x9E3779B97F4A7C15ULL >> 40) % LAYOUT_SLOTS);
    LayoutSlot *slot = &x->layouts[at];
    if (slot->layout == layout) {
        *id = (uint8_t)at;
        return slot;
    }
    if (slot->layout && slot->hash == hash) {
        int same = PyObject_RichCompareBool(slot->layout, layout, Py_EQ);
        if (same < 0) return NULL;
        if (same) {
            *id = (uint8_t)at;
            return slot;
        }
    }
    PyObject *unchanged = PyObject_Vectorcall(x->unchanged_fn, &layout, 1, NULL);
    if (!unchanged) return NULL;
    int is = PyObject_IsTrue(unchanged);
    Py_DECREF(unchanged);
    if (is < 0) return NULL;
    PyObject *start_obj = PyObject_Vectorcall(x->start_fn, &layout, 1, NULL);
    if (!start_obj) return NULL;
    long start = PyLong_AsLong(start_obj);
    Py_DECREF(start_obj);
    if ((start == -1 && PyErr_Occurred()) || mirror(x, start) < 0) return NULL;
    PyObject *plain = PyObject_Vectorcall(x->plain_fn, &layout, 1, NULL);
    if (!plain) return NULL;
    /* (the slot is emptied first: a group half read leaves it holding nothing) */
    for (int g = 0; g < slot->groups; g++) Py_CLEAR(slot->after[g]);
    slot->groups = 0;
    Py_CLEAR(slot->layout);
    if (!PyTuple_Check(plain) || PyTuple_GET_SIZE(plain) > PLAIN_GROUPS) {
        PyErr_SetString(PyExc_TypeError, "plain_ends must give a tuple of at most 8 groups");
        goto fail;
    }
    for (Py_ssize_t g = 0; g < PyTuple_GET_SIZE(plain); g++) {
        PyObject *group = PyTuple_GET_ITEM(plain, g);
        if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) != 5) {
            PyErr_SetString(PyExc_TypeError, "a plain_ends group must be (terminals, scans, layout, start, extra)");
            goto fail;
        }
        uint64_t *words = x->plain_words + slot->off + 2 * x->W * g;
        int scans = PyObject_IsTrue(PyTuple_GET_ITEM(group, 1));
        long after_start = scans < 0 ? -1 : PyLong_AsLong(PyTuple_GET_ITEM(group, 3));
        if (scans < 0 || (after_start == -1 && PyErr_Occurred()) || mirror(x, after_start) < 0 ||
            long_words(PyTuple_GET_ITEM(group, 0), words, x->W) < 0 ||
            long_words(PyTuple_GET_ITEM(group, 4), words + x->W, x->W) < 0)
            goto fail;
        slot->scans[g] = scans;
        slot->after[g] = PyTuple_GET_ITEM(group, 2);
        Py_INCREF(slot->after[g]);
        slot->after_start[g] = (int32_t)after_start;
        slot->groups = (int)g + 1;
    }
    Py_DECREF(plain);
    Py_INCREF(layout);
    slot->layout = layout;
    slot->hash = hash;
    slot->unchanged = is;
    slot->start = (int32_t)start;
    *id = (uint8_t)at;
    return slot;
fail:
    Py_DECREF(plain);
    for (int g = 0; g < slot->groups; g++) Py_CLEAR(slot->after[g]);
    slot->groups = 0;
    return NULL;
}

/* ---- advance ---- */

/* a branch still to read: it owns its references; its guards and allowed words are blocks of the
 * arenas, pushed in the order the branches are (so the branch popped owns the top blocks) */
typedef struct {
    PyObject *parser, *layout, *lexeme;
    int32_t state;
    Py_ssize_t i;    /* offset in the text of its next character, where its lexeme's text starts */
    Py_ssize_t goff; /* guards: gd[goff .. goff + ng) */
    int32_t ng;
    Py_ssize_t aoff; /* its allowed words: aw[aoff .. aoff + W), or -1: not worked out yet */
} Pending;

typedef struct Work {
    Pending *p;
    Py_ssize_t n, cap;
    int32_t *gd; /* the pending branches' guards */
    Py_ssize_t gd_n, gd_cap;
    uint64_t *aw; /* the pending branches' allowed words */
    Py_ssize_t aw_n, aw_cap;
    int32_t *cur; /* the guards of the branch being read */
    Py_ssize_t cur_cap;
    uint64_t *here; /* the allowed words of the branch being read, then (W more) those of a
                     * symbol it ends that the parser takes (end_symbol) */
    Py_ssize_t here_cap;
} Work;

static int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = PyMem_Realloc(*p, (size_t)n * item);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

/* a call's buffers: the ones the last call left (their capacity kept, nothing in them), or
 * empty ones where another call holds those (a layer's Python, called back, may read text too) */
static Work *work_take(Lexer *x, Work *own) {
    Work *w = x->spare;
    if (w) {
        x->spare = NULL;
        return w;
    }
    memset(own, 0, sizeof(*own));
    return own;
}

static void work_release(Work *w) {
    while (w->n > 0) {
        Pending *b = &w->p[--w->n];
        Py_CLEAR(b->parser);
        Py_CLEAR(b->layout);
        Py_CLEAR(b->lexeme);
    }
    w->gd_n = w->aw_n = 0;
}

static void work_free(Work *w) {
    work_release(w);
    PyMem_Free(w->p);
    PyMem_Free(w->gd);
    PyMem_Free(w->aw);
    PyMem_Free(w->cur);
    PyMem_Free(w->here);
}

/* the call is done with ``w``: kept for the next call where none is kept (buffers grown past
 * SPARE_MAX items are handed back: a rare large read keeps no memory) */
static void work_give_back(Lexer *x, Work *w, Work *own) {
    work_release(w); /* (first: what it frees may run code, and another call keep its buffers) */
    if (x->spare || w->cap > SPARE_MAX || w->gd_cap > SPARE_MAX || w->aw_cap > SPARE_MAX ||
        w->cur_cap > SPARE_MAX) {
        work_free(w);
        if (w != own) PyMem_Free(w);
        return;
    }
    if (w == own) {
        Work *kept = PyMem_Malloc(sizeof(Work));
        if (!kept) {
            work_free(w);
            return;
        }
        *kept = *w;
        w = kept;
    }
    x->spare = w;
}

/* the lexeme read so far: ``lexeme + text[begin:end]`` (a new reference) */
static PyObject *lexeme_upto(PyObject *lexeme, PyObject *text, Py_ssize_t begin, Py_ssize_t end) {
    if (begin == end) {
        Py_INCREF(lexeme);
        return lexeme;
    }
    Py_ssize_t had = PyUnicode_GET_LENGTH(lexeme);
    if (had && PyUnicode_IS_ASCII(lexeme) && PyUnicode_IS_ASCII(text)) { /* (one new string, not two) */
        PyObject *whole = PyUnicode_New(had + end - begin, 127);
        if (!whole) return NULL;
        memcpy(PyUnicode_1BYTE_DATA(whole), PyUnicode_1BYTE_DATA(lexeme), (size_t)had);
        memcpy(PyUnicode_1BYTE_DATA(whole) + had, PyUnicode_1BYTE_DATA(text) + begin, (size_t)(end - begin));
        return whole;
    }
    PyObject *piece = PyUnicode_Substring(text, begin, end);
    if (!piece) return NULL;
    PyObject *whole = PyUnicode_Concat(lexeme, piece);
    Py_DECREF(piece);
    return whole;
}

static PyObject *guards_tuple(const int32_t *gd, int32_t ng) {
    PyObject *t = PyTuple_New(ng);
    if (!t) return NULL;
    for (int32_t k = 0; k < ng; k++) {
        PyObject *v = PyLong_FromLong(gd[k]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    return t;
}

/* (``after`` may be the top of ``w->aw`` itself, grown for it already: the grow below moves
 * nothing then) push the branch that starts a new symbol with character ``code`` at ``i`` after a symbol ended
 * into (``parser``, ``layout``), where symbols start in lexer state ``start`` and ``after`` are
 * the terminals allowed, if that symbol can still become one of them; its guards are the reading
 * branch's ``ng`` (in ``w->cur``) and ``nxt``, where the ended symbol would have gone on */
static int push_ended(Lexer *x, Work *w, PyObject *parser, PyObject *layout, int32_t start,
                      const uint64_t *after, Py_ssize_t i, Py_UCS4 code, int32_t nxt, int32_t ng) {
    int32_t fresh = step(x, start, code);
    if (fresh < 0) return -1;
    if (fresh == DEAD || !live_under(x, fresh, after)) return 0;
    if (grow((void **)&w->aw, &w->aw_cap, w->aw_n + x->W, sizeof(uint64_t)) < 0 ||
        grow((void **)&w->gd, &w->gd_cap, w->gd_n + ng + 1, sizeof(int32_t)) < 0 ||
        grow((void **)&w->p, &w->cap, w->n + 1, sizeof(Pending)) < 0)
        return -1;
    PyObject *first = PyUnicode_FromOrdinal((int)code);
    if (!first) return -1;
    memmove(w->aw + w->aw_n, after, (size_t)x->W * sizeof(uint64_t));
    Py_ssize_t goff = w->gd_n;
    memcpy(w->gd + goff, w->cur, (size_t)ng * sizeof(int32_t));
    int32_t ng2 = ng;
    if (nxt != DEAD) w->gd[goff + ng2++] = nxt;
    w->gd_n += ng2;
    Py_INCREF(parser);
    Py_INCREF(layout);
    w->p[w->n++] = (Pending){parser, layout, first, fresh, i + 1, goff, ng2, w->aw_n};
    w->aw_n += x->W;
    return 0;
}

/* whether ``text[begin:end]`` is ASCII */
static int ascii_between(PyObject *text, Py_ssize_t begin, Py_ssize_t end) {
    if (PyUnicode_IS_ASCII(text)) return 1;
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t k = begin; k < end; k++)
        if (PyUnicode_READ(kind, data, k) >= 128) return 0;
    return 1;
}

/* the group of ``slot``'s plain ends that holds every terminal of ``m`` (an ASCII symbol's
 * terminals, as allowed), or -1 */
static int plain_group(const Lexer *x, const LayoutSlot *slot, const uint64_t *m) {
    for (int g = 0; g < slot->groups; g++) {
        const uint64_t *terminals = x->plain_words + slot->off + 2 * x->W * g;
        int inside = 1;
        for (Py_ssize_t k = 0; k < x->W && inside; k++) inside = !(m[k] & ~terminals[k]);
        if (inside) return g;
    }
    return -1;
}

/* the end of an ASCII symbol that may be the terminals ``m``, all in group ``g`` of ``slot``'s
 * plain ends, which scans: the parser's step alone (the recognizer's ``scan_expecting``) and the
 * branch that starts a new symbol with ``code`` pushed as ``push_ended`` does */
static int plain_end(Lexer *x, Work *w, PyObject *parser, const LayoutSlot *slot, int g, const uint64_t *m,
                     Py_ssize_t i, Py_UCS4 code, int32_t nxt, int32_t ng) {
    const uint64_t *extra = x->plain_words + slot->off + 2 * x->W * g + x->W;
    Py_ssize_t count = 0;
    for (Py_ssize_t k = 0; k < x->W; k++) count += __builtin_popcountll(m[k]);
    PyObject *ids = PyTuple_New(count);
    if (!ids) return -1;
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < x->W; k++)
        for (uint64_t bits = m[k]; bits; bits &= bits - 1) {
            PyObject *t = PyLong_FromSsize_t(k * 64 + __builtin_ctzll(bits));
            if (!t) {
                Py_DECREF(ids);
                return -1;
            }
            PyTuple_SET_ITEM(ids, n++, t);
        }
    /* (the slot as it is now: the recognizer's Python may lex text too, and fill the slot anew) */
    if (grow((void **)&w->aw, &w->aw_cap, w->aw_n + 2 * x->W, sizeof(uint64_t)) < 0) {
        Py_DECREF(ids);
        return -1;
    }
    memcpy(w->aw + w->aw_n, extra, (size_t)x->W * sizeof(uint64_t));
    PyObject *layout = slot->after[g];
    int32_t start = slot->after_start[g];
    Py_INCREF(layout);
    PyObject *args[2] = {parser, ids};
    PyObject *scanned = PyObject_Vectorcall(x->scan_fn, args, 2, NULL);
    Py_DECREF(ids);
    if (!scanned || scanned == Py_None) {
        Py_XDECREF(scanned);
        Py_DECREF(layout);
        return scanned ? 0 : -1;
    }
    int rc = -1;
    if (!PyTuple_Check(scanned) || PyTuple_GET_SIZE(scanned) != 2) {
        PyErr_SetString(PyExc_TypeError, "scan_expecting must give None or (parser, expected)");
        goto done;
    }
    uint64_t *after = w->aw + w->aw_n, *expected = after + x->W; /* (grown for both, above) */
    if (long_words(PyTuple_GET_ITEM(scanned, 1), expected, x->W) == 0) {
        for (Py_ssize_t k = 0; k < x->W; k++) after[k] |= expected[k];
        /* (push_ended copies the words onto themselves) */
        rc = push_ended(x, w, PyTuple_GET_ITEM(scanned, 0), layout, start, after, i, code, nxt, ng);
    }
done:
    Py_DECREF(scanned);
    Py_DECREF(layout);
    return rc;
}

/* branch ``b``'s symbol, ``lexeme + text[begin:i]`` in ``state``, ends before character ``code``
 * at ``i``: push the branch that starts a new symbol with it, if the layer takes the one that
 * ended and the new one can still become an allowed terminal; its guards are the reading
 * branch's ``ng`` (in ``w->cur``) and ``nxt``, where the ended symbol would have gone on */
static int end_symbol(Lexer *x, Work *w, const Pending *b, int32_t state, PyObject *text, Py_ssize_t begin,
                      Py_ssize_t i, Py_UCS4 code, int32_t nxt, int32_t ng) {
    /* what the layer's end_symbol answers first, told here: nothing the parser takes (rejected),
     * or a terminal it ignores where the layer leaves the parser and layout as they are */
    const uint64_t *tm = token_mask(x, state);
    if (!tm) return -1;
    uint64_t *m = w->here + x->W;
    int takes = 0, ignored = 0;
    for (Py_ssize_t k = 0; k < x->W; k++) {
        m[k] = tm[k] & w->here[k];
        takes |= m[k] != 0;
        ignored |= (m[k] & x->ignore[k]) != 0;
    }
    int rc = 1; /* (1: the layer is asked) */
    if (!takes) {
        rc = 0;
    } else if (ignored || (PyUnicode_IS_ASCII(b->lexeme) && ascii_between(text, begin, i))) {
        const LayoutSlot *slot = layout_of(x, b->layout);
        int g = !slot || ignored ? -1 : plain_group(x, slot, m);
        if (!slot)
            rc = -1;
        else if (ignored ? slot->unchanged : g >= 0 && !slot->scans[g])
            rc = push_ended(x, w, b->parser, slot->layout, slot->start, w->here, i, code, nxt, ng);
        else if (g >= 0)
            rc = plain_end(x, w, b->parser, slot, g, m, i, code, nxt, ng);
    }
    if (rc != 1) return rc;
    PyObject *lexeme = lexeme_upto(b->lexeme, text, begin, i);
    PyObject *sobj = lexeme ? PyLong_FromLong(state) : NULL;
    PyObject *ended = NULL;
    if (sobj) {
        PyObject *args[4] = {b->parser, b->layout, sobj, lexeme};
        ended = PyObject_Vectorcall(x->end_fn, args, 4, NULL);
    }
    Py_XDECREF(sobj);
    Py_XDECREF(lexeme);
    if (!ended) return -1;
    if (ended == Py_None) {
        Py_DECREF(ended);
        return 0;
    }
    rc = -1;
    if (!PyTuple_Check(ended) || PyTuple_GET_SIZE(ended) != 4) {
        PyErr_SetString(PyExc_TypeError, "end_and_next must give None or (parser, layout, start, allowed)");
        goto done;
    }
    PyObject *parser2 = PyTuple_GET_ITEM(ended, 0);
    long start = PyLong_AsLong(PyTuple_GET_ITEM(ended, 2));
    if ((start == -1 && PyErr_Occurred()) || mirror(x, start) < 0) goto done;
    /* (the layout as the slots hold it: the layer builds equal layouts anew, and a branch that
     * carries the slot's own is found by address at its next end) */
    const LayoutSlot *slot = layout_of(x, PyTuple_GET_ITEM(ended, 1));
    if (!slot) goto done;
    PyObject *layout2 = slot->layout;
    if (grow((void **)&w->aw, &w->aw_cap, w->aw_n + x->W, sizeof(uint64_t)) < 0) goto done;
    if (long_words(PyTuple_GET_ITEM(ended, 3), w->aw + w->aw_n, x->W) < 0) goto done;
    /* (push_ended copies the words onto themselves) */
    rc = push_ended(x, w, parser2, layout2, (int32_t)start, w->aw + w->aw_n, i, code, nxt, ng);
done:
    Py_DECREF(ended);
    return rc;
}

/* read ``text`` from branch ``b`` (popped: its blocks are the arenas' top, taken here, and its
 * references are the caller's to drop); the survivor, if it lives, appended to ``out`` */
static int read_branch(Lexer *x, Work *w, const Pending *b, PyObject *text, PyObject *out) {
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int32_t ng = b->ng;
    if (grow((void **)&w->cur, &w->cur_cap, ng + 1, sizeof(int32_t)) < 0 ||
        grow((void **)&w->here, &w->here_cap, 2 * x->W, sizeof(uint64_t)) < 0)
        return -1;
    memcpy(w->cur, w->gd + b->goff, (size_t)ng * sizeof(int32_t));
    w->gd_n = b->goff;
    if (b->aoff >= 0) {
        memcpy(w->here, w->aw + b->aoff, (size_t)x->W * sizeof(uint64_t));
        w->aw_n = b->aoff;
    } else { /* (copied: the cache may change while this branch reads) */
        const uint64_t *a = allowed(x, b->parser, b->layout);
        if (!a) return -1;
        memcpy(w->here, a, (size_t)x->W * sizeof(uint64_t));
    }
    Py_ssize_t i = b->i, begin = b->i;
    int32_t state = b->state, tested = -1;
    while (i < n) {
        Py_UCS4 code = PyUnicode_READ(kind, data, i);
        if (ng) {
            int32_t nk = 0;
            for (int32_t k = 0; k < ng; k++) {
                int32_t g2 = step(x, w->cur[k], code);
                if (g2 < 0) return -1;
                if (g2 == DEAD) continue;
                if (x->fin[g2]) return 0; /* a guard saw a longer match: this branch is wrong */
                w->cur[nk++] = g2;
            }
            ng = nk;
        }
        int32_t nxt = step(x, state, code);
        if (nxt < 0) return -1;
        /* the symbol in progress ended before the character, which starts a new one (unless
         * the lexeme and the character are themselves a lexeme: longest match goes on) */
        if (x->fin[state] && !x->fin[nxt] && end_symbol(x, w, b, state, text, begin, i, code, nxt, ng) < 0)
            return -1;
        /* the symbol in progress goes on with the character (a state met again skips the test) */
        if (nxt != tested) {
            if (nxt == DEAD || !live_under(x, nxt, w->here)) return 0;
            tested = nxt;
        }
        state = nxt;
        i++;
    }
    if (b->aoff >= 0) remember_allowed(x, b->parser, b->layout, w->here); /* (the layer's, where it began) */
    PyObject *lexeme = lexeme_upto(b->lexeme, text, begin, n);
    PyObject *sobj = lexeme ? PyLong_FromLong(state) : NULL;
    PyObject *guards = sobj ? guards_tuple(w->cur, ng) : NULL;
    PyObject *survivor = guards ? PyTuple_Pack(5, b->parser, b->layout, sobj, lexeme, guards) : NULL;
    Py_XDECREF(lexeme);
    Py_XDECREF(sobj);
    Py_XDECREF(guards);
    if (!survivor) return -1;
    int failed = PyList_Append(out, survivor);
    Py_DECREF(survivor);
    return failed;
}

static PyObject *lexer_advance(Lexer *x, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "advance(branches: list, text: str)");
        return NULL;
    }
    PyObject *branches = args[0], *text = args[1];
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    Work own, *w = work_take(x, &own);
    Py_ssize_t count = PyList_GET_SIZE(branches);
    if (grow((void **)&w->p, &w->cap, count, sizeof(Pending)) < 0) goto fail;
    for (Py_ssize_t k = count - 1; k >= 0; k--) { /* (reversed: the first is read first) */
        PyObject *br = PyList_GET_ITEM(branches, k), *guards;
        if (!PyTuple_Check(br) || PyTuple_GET_SIZE(br) != 5 || !PyUnicode_Check(PyTuple_GET_ITEM(br, 3)) ||
            !PyTuple_Check(guards = PyTuple_GET_ITEM(br, 4))) {
            PyErr_SetString(PyExc_TypeError, "a branch must be (parser, layout, state, lexeme: str, guards: tuple)");
            goto fail;
        }
        long state = PyLong_AsLong(PyTuple_GET_ITEM(br, 2));
        if ((state == -1 && PyErr_Occurred()) || mirror(x, state) < 0) goto fail;
        Py_ssize_t ng = PyTuple_GET_SIZE(guards);
        if (grow((void **)&w->gd, &w->gd_cap, w->gd_n + ng, sizeof(int32_t)) < 0) goto fail;
        for (Py_ssize_t j = 0; j < ng; j++) {
            long g = PyLong_AsLong(PyTuple_GET_ITEM(guards, j));
            if ((g == -1 && PyErr_Occurred()) || mirror(x, g) < 0) goto fail;
            w->gd[w->gd_n + j] = (int32_t)g;
        }
        Pending p = {PyTuple_GET_ITEM(br, 0), PyTuple_GET_ITEM(br, 1), PyTuple_GET_ITEM(br, 3),
                     (int32_t)state, 0, w->gd_n, (int32_t)ng, -1};
        Py_INCREF(p.parser);
        Py_INCREF(p.layout);
        Py_INCREF(p.lexeme);
        w->p[w->n++] = p;
        w->gd_n += ng;
    }
    while (w->n > 0) {
        Pending b = w->p[--w->n];
        int failed = read_branch(x, w, &b, text, out);
        Py_DECREF(b.parser);
        Py_DECREF(b.layout);
        Py_DECREF(b.lexeme);
        if (failed) goto fail;
    }
    work_give_back(x, w, &own);
    return out;
fail:
    work_give_back(x, w, &own);
    Py_DECREF(out);
    return NULL;
}

/* ---- the type ---- */

static int lexer_init(Lexer *x, PyObject *args, PyObject *kwds) {
    PyObject *layer;
    Py_ssize_t W;
    static char *names[] = {"layer", "words", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "On", names, &layer, &W)) return -1;
    if (W < 1) {
        PyErr_SetString(PyExc_ValueError, "Lexer: words must be at least 1");
        return -1;
    }
    if (x->cap) {
        PyErr_SetString(PyExc_RuntimeError, "Lexer: initialised once");
        return -1;
    }
    x->W = W;
    PyObject *dfa = PyObject_GetAttrString(layer, "dfa");
    if (!dfa) return -1;
    x->allowed_fn = PyObject_GetAttrString(layer, "allowed");
    x->end_fn = PyObject_GetAttrString(layer, "end_and_next");
    x->token_mask_fn = PyObject_GetAttrString(layer, "token_mask");
    x->unchanged_fn = PyObject_GetAttrString(layer, "ignore_unchanged");
    x->start_fn = PyObject_GetAttrString(layer, "lex_start");
    x->plain_fn = PyObject_GetAttrString(layer, "plain_ends");
    PyObject *recognizer = PyObject_GetAttrString(layer, "recognizer");
    x->scan_fn = recognizer ? PyObject_GetAttrString(recognizer, "scan_expecting") : NULL;
    Py_XDECREF(recognizer);
    PyObject *ignore = PyObject_GetAttrString(layer, "ignore_mask");
    x->step_fn = PyObject_GetAttrString(dfa, "step");
    x->trans = PyObject_GetAttrString(dfa, "trans");
    x->ascii_trans = PyObject_GetAttrString(dfa, "ascii_trans");
    x->final = PyObject_GetAttrString(dfa, "final");
    x->live = PyObject_GetAttrString(dfa, "live");
    Py_DECREF(dfa);
    if (!x->allowed_fn || !x->end_fn || !x->token_mask_fn || !x->unchanged_fn || !x->start_fn || !x->plain_fn ||
        !x->scan_fn || !ignore ||
        !x->step_fn || !x->trans || !x->ascii_trans || !x->final || !x->live) {
        Py_XDECREF(ignore);
        return -1;
    }
    if (!PyList_Check(x->trans) || !PyList_Check(x->ascii_trans) || !PyList_Check(x->final) ||
        !PyList_Check(x->live)) {
        PyErr_SetString(PyExc_TypeError, "Lexer: the automaton's tables must be lists");
        Py_DECREF(ignore);
        return -1;
    }
    x->slot_words = PyMem_Calloc((size_t)(ALLOWED_SLOTS * W), sizeof(uint64_t));
    x->ignore = PyMem_Calloc((size_t)W, sizeof(uint64_t));
    x->plain_words = PyMem_Calloc((size_t)(LAYOUT_SLOTS * PLAIN_GROUPS * 2 * W), sizeof(uint64_t));
    if (!x->slot_words || !x->ignore || !x->plain_words) {
        Py_DECREF(ignore);
        PyErr_NoMemory();
        return -1;
    }
    int failed = long_words(ignore, x->ignore, W);
    Py_DECREF(ignore);
    if (failed) return -1;
    for (Py_ssize_t k = 0; k < ALLOWED_SLOTS; k++) x->slots[k].off = k * W;
    for (Py_ssize_t k = 0; k < LAYOUT_SLOTS; k++) x->layouts[k].off = k * PLAIN_GROUPS * 2 * W;
    return mirror(x, DEAD);
}

static int lexer_traverse(Lexer *x, visitproc visit, void *arg) {
    Py_VISIT(x->allowed_fn);
    Py_VISIT(x->end_fn);
    Py_VISIT(x->token_mask_fn);
    Py_VISIT(x->unchanged_fn);
    Py_VISIT(x->start_fn);
    Py_VISIT(x->plain_fn);
    Py_VISIT(x->scan_fn);
    Py_VISIT(x->step_fn);
    Py_VISIT(x->trans);
    Py_VISIT(x->ascii_trans);
    Py_VISIT(x->final);
    Py_VISIT(x->live);
    for (Py_ssize_t k = 0; k < ALLOWED_SLOTS; k++) {
        Py_VISIT(x->slots[k].parser);
        Py_VISIT(x->slots[k].layout);
    }
    for (Py_ssize_t k = 0; k < LAYOUT_SLOTS; k++) {
        Py_VISIT(x->layouts[k].layout);
        for (int g = 0; g < x->layouts[k].groups; g++) Py_VISIT(x->layouts[k].after[g]);
    }
    return 0;
}

static int lexer_clear(Lexer *x) {
    Py_CLEAR(x->allowed_fn);
    Py_CLEAR(x->end_fn);
    Py_CLEAR(x->token_mask_fn);
    Py_CLEAR(x->unchanged_fn);
    Py_CLEAR(x->start_fn);
    Py_CLEAR(x->plain_fn);
    Py_CLEAR(x->scan_fn);
    Py_CLEAR(x->step_fn);
    Py_CLEAR(x->trans);
    Py_CLEAR(x->ascii_trans);
    Py_CLEAR(x->final);
    Py_CLEAR(x->live);
    for (Py_ssize_t k = 0; k < ALLOWED_SLOTS; k++) {
        Py_CLEAR(x->slots[k].parser);
        Py_CLEAR(x->slots[k].layout);
    }
    for (Py_ssize_t k = 0; k < LAYOUT_SLOTS; k++) {
        Py_CLEAR(x->layouts[k].layout);
        for (int g = 0; g < x->layouts[k].groups; g++) Py_CLEAR(x->layouts[k].after[g]);
        x->layouts[k].groups = 0;
    }
    return 0;
}

static void lexer_dealloc(Lexer *x) {
    PyObject_GC_UnTrack(x);
    lexer_clear(x);
    PyMem_Free(x->rows);
    PyMem_Free(x->fin);
    PyMem_Free(x->lv);
    PyMem_Free(x->tm);
    PyMem_Free(x->tm_known);
    PyMem_Free(x->ignore);
    PyMem_Free(x->slot_words);
    PyMem_Free(x->plain_words);
    if (x->spare) {
        work_free(x->spare);
        PyMem_Free(x->spare);
    }
    Py_TYPE(x)->tp_free((PyObject *)x);
}

static PyMethodDef lexer_methods[] = {
    {"advance", (PyCFunction)(void (*)(void))lexer_advance, METH_FASTCALL,
     "advance(branches, text) -> the surviving branches (lexer.py's advance for this layer)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LexerType = {
    PyVarObject_HEAD_INIT(NULL, 0) /* (the macro ends in a comma) */
    .tp_name = "fimconstrain.engine._lexer.Lexer",
    .tp_basicsize = sizeof(Lexer),
    .tp_dealloc = (destructor)lexer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Lexer(layer, words): the branching lexer over one layer (lexer.py's advance).",
    .tp_traverse = (traverseproc)lexer_traverse,
    .tp_clear = (inquiry)lexer_clear,
    .tp_methods = lexer_methods,
    .tp_init = (initproc)lexer_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lexer",
                                    "The branching incremental lexer in C (see lexer.py).", -1, NULL,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__lexer(void) {
    if (PyType_Ready(&LexerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&LexerType);
    if (PyModule_AddObject(m, "Lexer", (PyObject *)&LexerType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", LEXER_ABI) < 0) {
        Py_DECREF(&LexerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
