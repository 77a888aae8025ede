/* The Earley closure in C: ``earley.Recognizer._close``'s loop (paper 004, section IV), item for
 * item and in the same order, building the same Python structures (a set's ``waiting`` dict of
 * lists of ``(dot, origin)`` tuples) so that every consumer of a set reads it as before
 * (docs/optimizations.md, "The native Earley closure").
 *
 * What it saves over the compiled Python: the sets of seen items and completed symbols are C
 * hash sets keyed by (origin pointer, id) instead of Python sets of boxed ints, the ints an item
 * needs are made once per grammar (``Closure`` holds them), and a set's buckets are found by
 * symbol in a C array. Chains, predictions and the set itself are still made by the Python
 * recognizer (called back): they are memoised there and met far less often than items.
 *
 * Plain C99 on the CPython API, like _walk.c; ``earley.py`` is the reference and the fallback.
 * Keep in step with ``Recognizer._close`` (its twin note). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* bumped whenever the arguments or their meaning change (native.py checks it) */
#define CLOSURE_ABI 1

/* ---- a set of (origin, id) pairs: open addressing, exact keys ---- */

typedef struct {
    const void *origin; /* NULL: empty slot (origins are never NULL: None is a pointer too) */
    int32_t id;
} Pair;

typedef struct {
    Pair *slots;
    Py_ssize_t cap, n; /* cap: a power of two */
    Pair inline_slots[64];
} PairSet;

static void pairs_init(PairSet *s) {
    s->slots = s->inline_slots;
    s->cap = 64;
    s->n = 0;
    memset(s->inline_slots, 0, sizeof(s->inline_slots));
}

static void pairs_free(PairSet *s) {
    if (s->slots != s->inline_slots) PyMem_Free(s->slots);
}

static inline size_t pair_hash(const void *origin, int32_t id) {
    uint64_t h = (uint64_t)(uintptr_t)origin ^ ((uint64_t)(uint32_t)id * 0x9E3779B97F4A7C15ULL);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return (size_t)h;
}

static int pairs_grow(PairSet *s) {
    Py_ssize_t cap = s->cap * 2;
    Pair *slots = PyMem_Calloc((size_t)cap, sizeof(Pair));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < s->cap; i++) {
        Pair p = s->slots[i];
        if (!p.origin) continue;
        size_t j = pair_hash(p.origin, p.id) & (size_t)(cap - 1);
        while (slots[j].origin) j = (j + 1) & (size_t)(cap - 1);
        slots[j] = p;
    }
    pairs_free(s);
    s->slots = slots;
    s->cap = cap;
    return 0;
}

/* 1 if (origin, id) was added, 0 if it was there, -1 on error */
static int pairs_add(PairSet *s, const void *origin, int32_t id) {
    if ((s->n + 1) * 2 > s->cap && pairs_grow(s) < 0) return -1;
    size_t mask = (size_t)(s->cap - 1);
    size_t j = pair_hash(origin, id) & mask;
    while (s->slots[j].origin) {
        if (s->slots[j].origin == origin && s->slots[j].id == id) return 0;
        j = (j + 1) & mask;
    }
    s->slots[j].origin = origin;
    s->slots[j].id = id;
    s->n++;
    return 1;
}

/* ---- a growable stack of C structs ---- */

typedef struct {
    int32_t dot;      /* the item (dot after the awaited symbol) */
    PyObject *origin; /* borrowed: alive while the closure runs (a seed or an origin's item) */
} Item;

typedef struct {
    PyObject *predictor; /* borrowed: a set alive while the closure runs */
    PyObject *chain;     /* owned */
} ChainRef;

#define DEFINE_STACK(Name, T)                                                   \
    typedef struct {                                                            \
        T *at;                                                                  \
        Py_ssize_t n, cap;                                                      \
    } Name;                                                                     \
    static int Name##_push(Name *s, T v) {                                      \
        if (s->n == s->cap) {                                                   \
            Py_ssize_t cap = s->cap ? s->cap * 2 : 64;                          \
            T *at = PyMem_Realloc(s->at, (size_t)cap * sizeof(T));              \
            if (!at) {                                                          \
                PyErr_NoMemory();                                               \
                return -1;                                                      \
            }                                                                   \
            s->at = at;                                                         \
            s->cap = cap;                                                       \
        }                                                                       \
        s->at[s->n++] = v;                                                      \
        return 0;                                                               \
    }

DEFINE_STACK(ItemStack, Item)
DEFINE_STACK(ChainStack, ChainRef)

/* ---- the grammar's tables, made once ---- */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_items, n_symbols, n_terminals;
    int32_t *next_symbol; /* per item: the symbol after the dot, or -1 */
    int32_t *item_lhs;    /* per item: its rule's left-hand side */
    int32_t *skip_start;  /* per item: skip[d] is skip_items[skip_start[d] .. skip_start[d + 1]) */
    int32_t *skip_items;
    PyObject *ints;       /* tuple: the ints 0 .. max(n_items, n_symbols), made once */
    PyObject *s_waiting, *s_prediction, *s_advanced, *s_items, *s_completed;
} Closure;

static void closure_dealloc(Closure *self) {
    PyMem_Free(self->next_symbol);
    PyMem_Free(self->item_lhs);
    PyMem_Free(self->skip_start);
    PyMem_Free(self->skip_items);
    Py_XDECREF(self->ints);
    Py_XDECREF(self->s_waiting);
    Py_XDECREF(self->s_prediction);
    Py_XDECREF(self->s_advanced);
    Py_XDECREF(self->s_items);
    Py_XDECREF(self->s_completed);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int int_list(PyObject *seq, const char *what, int32_t *out, Py_ssize_t n, long lo, long hi) {
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PyList_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < lo || v >= hi) {
            PyErr_Format(PyExc_ValueError, "%s[%zd] = %ld is out of range", what, i, v);
            return -1;
        }
        out[i] = (int32_t)v;
    }
    return 0;
}

/* Closure(next_symbol, item_lhs, skip, n_symbols, n_terminals): the grammar's lists, checked */
static PyObject *closure_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *next_symbol, *item_lhs, *skip;
    Py_ssize_t n_symbols, n_terminals;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Closure takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!nn", &PyList_Type, &next_symbol, &PyList_Type, &item_lhs,
                          &PyList_Type, &skip, &n_symbols, &n_terminals))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(next_symbol);
    if (PyList_GET_SIZE(item_lhs) != n || PyList_GET_SIZE(skip) != n || n_terminals < 0 ||
        n_terminals > n_symbols || n_symbols >= INT32_MAX || n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the grammar's tables disagree in size");
        return NULL;
    }
    Closure *self = (Closure *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->n_items = n;
    self->n_symbols = n_symbols;
    self->n_terminals = n_terminals;
    self->next_symbol = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    self->item_lhs = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    self->skip_start = PyMem_Malloc((size_t)(n + 1) * sizeof(int32_t));
    if (!self->next_symbol || !self->item_lhs || !self->skip_start) goto nomem;
    if (int_list(next_symbol, "next_symbol", self->next_symbol, n, -1, n_symbols) < 0 ||
        int_list(item_lhs, "item_lhs", self->item_lhs, n, n_terminals, n_symbols) < 0)
        goto fail;
    Py_ssize_t total = 0;
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *row = PyList_GET_ITEM(skip, d);
        if (!PyTuple_Check(row)) {
            PyErr_Format(PyExc_TypeError, "skip[%zd] is not a tuple", d);
            goto fail;
        }
        total += PyTuple_GET_SIZE(row);
    }
    self->skip_items = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    if (!self->skip_items) goto nomem;
    total = 0;
    for (Py_ssize_t d = 0; d < n; d++) {
        PyObject *row = PyList_GET_ITEM(skip, d);
        self->skip_start[d] = (int32_t)total;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(row); k++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(row, k));
            if (v == -1 && PyErr_Occurred()) goto fail;
            if (v < 0 || v >= n) {
                PyErr_Format(PyExc_ValueError, "skip[%zd] holds %ld, not an item", d, v);
                goto fail;
            }
            self->skip_items[total++] = (int32_t)v;
        }
    }
    self->skip_start[n] = (int32_t)total;
    Py_ssize_t n_ints = (n > n_symbols ? n : n_symbols) + 1;
    self->ints = PyTuple_New(n_ints);
    if (!self->ints) goto fail;
    for (Py_ssize_t i = 0; i < n_ints; i++) {
        PyObject *v = PyLong_FromSsize_t(i);
        if (!v) goto fail;
        PyTuple_SET_ITEM(self->ints, i, v);
    }
    self->s_waiting = PyUnicode_InternFromString("waiting");
    self->s_prediction = PyUnicode_InternFromString("prediction");
    self->s_advanced = PyUnicode_InternFromString("advanced");
    self->s_items = PyUnicode_InternFromString("items");
    self->s_completed = PyUnicode_InternFromString("completed");
    if (!self->s_waiting || !self->s_prediction || !self->s_advanced || !self->s_items || !self->s_completed)
        goto fail;
    return (PyObject *)self;
nomem:
    PyErr_NoMemory();
fail:
    Py_DECREF(self);
    return NULL;
}

/* ---- the closure ---- */

typedef struct {
    Closure *c;
    PyObject *chain_fn; /* recognizer.chain(prediction, symbol) -> Chain */
    PyObject **bucket;  /* per symbol: its list in the new set's ``waiting`` (owned), or NULL */
    int32_t *met;       /* symbols in the order their bucket was made */
    Py_ssize_t n_met;
    PairSet seen, done;
    ItemStack stack;
    ChainStack chains;
} Run;

/* (dot + 1, predictor) onto the bucket of ``sym`` */
static int add_waiting(Run *r, int32_t sym, int32_t dot, PyObject *origin) {
    PyObject *bucket = r->bucket[sym];
    if (!bucket) {
        bucket = r->bucket[sym] = PyList_New(0);
        if (!bucket) return -1;
        r->met[r->n_met++] = sym;
    }
    PyObject *item = PyTuple_New(2);
    if (!item) return -1;
    PyObject *d = PyTuple_GET_ITEM(r->c->ints, dot + 1);
    Py_INCREF(d);
    Py_INCREF(origin);
    PyTuple_SET_ITEM(item, 0, d);
    PyTuple_SET_ITEM(item, 1, origin);
    int failed = PyList_Append(bucket, item);
    Py_DECREF(item);
    return failed;
}

/* origin.waiting.get(lhs, ()) pushed (in list order: the last is popped first) */
static int push_waiting(Run *r, PyObject *origin, int32_t lhs) {
    PyObject *waiting = PyObject_GetAttr(origin, r->c->s_waiting);
    if (!waiting) return -1;
    if (!PyDict_Check(waiting)) {
        Py_DECREF(waiting);
        PyErr_SetString(PyExc_TypeError, "a set's waiting is not a dict");
        return -1;
    }
    PyObject *items = PyDict_GetItemWithError(waiting, PyTuple_GET_ITEM(r->c->ints, lhs));
    int failed = 0;
    if (items) {
        if (!PyList_Check(items)) {
            PyErr_SetString(PyExc_TypeError, "a set's waiting items are not a list");
            failed = -1;
        }
        for (Py_ssize_t i = 0; !failed && i < PyList_GET_SIZE(items); i++) {
            PyObject *pair = PyList_GET_ITEM(items, i);
            long dot = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
            if (dot < 0 || dot >= r->c->n_items) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an item out of range");
                failed = -1;
                break;
            }
            /* borrowed: the pair lives in origin's list, which lives as long as origin */
            failed = ItemStack_push(&r->stack, (Item){(int32_t)dot, PyTuple_GET_ITEM(pair, 1)});
        }
    } else if (PyErr_Occurred()) {
        failed = -1;
    }
    Py_DECREF(waiting);
    return failed;
}

/* the chain of ``predictor``'s prediction for ``sym`` pushed (``check``: only if it advances) */
static int push_chain(Run *r, PyObject *predictor, int32_t sym, int check) {
    PyObject *prediction = PyObject_GetAttr(predictor, r->c->s_prediction);
    if (!prediction) return -1;
    PyObject *s = PyTuple_GET_ITEM(r->c->ints, sym);
    if (check) {
        PyObject *advanced = PyObject_CallMethodOneArg(prediction, r->c->s_advanced, s);
        if (!advanced) {
            Py_DECREF(prediction);
            return -1;
        }
        int some = PyObject_IsTrue(advanced);
        Py_DECREF(advanced);
        if (some <= 0) {
            Py_DECREF(prediction);
            return some;
        }
    }
    PyObject *args[2] = {prediction, s};
    PyObject *chain = PyObject_Vectorcall(r->chain_fn, args, 2, NULL);
    Py_DECREF(prediction);
    if (!chain) return -1;
    if (ChainStack_push(&r->chains, (ChainRef){predictor, chain}) < 0) {
        Py_DECREF(chain);
        return -1;
    }
    return 0;
}

/* a chain's items and completions, replayed at ``predictor`` */
static int replay(Run *r, PyObject *predictor, PyObject *chain) {
    Closure *c = r->c;
    PyObject *items = PyObject_GetAttr(chain, c->s_items);
    if (!items) return -1;
    PyObject *completed = PyObject_GetAttr(chain, c->s_completed);
    if (!completed) {
        Py_DECREF(items);
        return -1;
    }
    int failed = 0;
    if (!PyTuple_Check(items) || !PyTuple_Check(completed)) {
        PyErr_SetString(PyExc_TypeError, "a chain's items and completions are not tuples");
        failed = -1;
    }
    for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(items); i++) {
        long d = PyLong_AsLong(PyTuple_GET_ITEM(items, i));
        if (d < 0 || d >= c->n_items || c->next_symbol[d] < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a chain's item is out of range");
            failed = -1;
            break;
        }
        int added = pairs_add(&r->seen, predictor, (int32_t)d);
        if (added < 0) failed = -1;
        else if (added) failed = add_waiting(r, c->next_symbol[d], (int32_t)d, predictor);
    }
    for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(completed); i++) {
        long lhs = PyLong_AsLong(PyTuple_GET_ITEM(completed, i));
        if (lhs < c->n_terminals || lhs >= c->n_symbols) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a chain's symbol is out of range");
            failed = -1;
            break;
        }
        int added = pairs_add(&r->done, predictor, (int32_t)lhs);
        if (added < 0) failed = -1;
        else if (added) failed = push_waiting(r, predictor, (int32_t)lhs);
    }
    Py_DECREF(items);
    Py_DECREF(completed);
    return failed;
}

/* the loop of Recognizer._close; fills r->bucket; returns accepting (0/1) or -1 */
static int close_items(Run *r) {
    Closure *c = r->c;
    int accepting = 0;
    while (r->stack.n || r->chains.n) {
        while (r->chains.n) {
            ChainRef ref = r->chains.at[--r->chains.n];
            int failed = replay(r, ref.predictor, ref.chain);
            Py_DECREF(ref.chain);
            if (failed) return -1;
        }
        if (!r->stack.n) break;
        Item item = r->stack.at[--r->stack.n];
        PyObject *origin = item.origin;
        for (int32_t k = c->skip_start[item.dot]; k < c->skip_start[item.dot + 1]; k++) {
            int32_t d = c->skip_items[k];
            int added = pairs_add(&r->seen, origin, d);
            if (added <= 0) {
                if (added < 0) return -1;
                continue;
            }
            int32_t sym = c->next_symbol[d];
            if (sym >= 0) {
                if (add_waiting(r, sym, d, origin) < 0) return -1;
                continue;
            }
            if (origin == Py_None) { /* the augmented start rule is complete */
                accepting = 1;
                continue;
            }
            int32_t lhs = c->item_lhs[d];
            added = pairs_add(&r->done, origin, lhs);
            if (added <= 0) {
                if (added < 0) return -1;
                continue;
            }
            if (push_waiting(r, origin, lhs) < 0 || push_chain(r, origin, lhs, 1) < 0) return -1;
        }
    }
    return accepting;
}

/* Closure.close(seeds, scanned, predicted, chain) -> (waiting, roots, accepting)
 *   seeds: list of (dot, origin or None); scanned: a set or None; predicted: list of symbols
 *   whose chains at ``scanned`` are replayed; chain: recognizer.chain. ``roots`` is the
 *   frozenset of nonterminals the new set waits for. */
static PyObject *closure_close(Closure *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "close(seeds, scanned, predicted, chain)");
        return NULL;
    }
    PyObject *seeds = args[0], *scanned = args[1], *predicted = args[2];
    if (!PyList_Check(seeds) || !PyList_Check(predicted)) {
        PyErr_SetString(PyExc_TypeError, "seeds and predicted must be lists");
        return NULL;
    }
    Run r = {.c = self, .chain_fn = args[3]};
    pairs_init(&r.seen);
    pairs_init(&r.done);
    PyObject *result = NULL, *waiting = NULL, *roots = NULL, *frozen = NULL;
    r.bucket = PyMem_Calloc((size_t)self->n_symbols, sizeof(PyObject *));
    r.met = PyMem_Malloc((size_t)(self->n_symbols ? self->n_symbols : 1) * sizeof(int32_t));
    if (!r.bucket || !r.met) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seeds); i++) {
        PyObject *pair = PyList_GET_ITEM(seeds, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "a seed is not a (dot, origin) pair");
            goto done;
        }
        long dot = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
        if (dot < 0 || dot >= self->n_items) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a seed's item is out of range");
            goto done;
        }
        if (ItemStack_push(&r.stack, (Item){(int32_t)dot, PyTuple_GET_ITEM(pair, 1)}) < 0) goto done;
    }
    if (scanned != Py_None) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(predicted); i++) {
            long t = PyLong_AsLong(PyList_GET_ITEM(predicted, i));
            if (t < 0 || t >= self->n_symbols) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a symbol out of range");
                goto done;
            }
            if (push_chain(&r, scanned, (int32_t)t, 0) < 0) goto done;
        }
    }
    int accepting = close_items(&r);
    if (accepting < 0) goto done;
    waiting = PyDict_New();
    /* a set grown in the order met, then frozen: its iteration order, which orders the
     * prediction's items, is then the Python loop's */
    roots = PySet_New(NULL);
    if (!waiting || !roots) goto done;
    for (Py_ssize_t i = 0; i < r.n_met; i++) {
        int32_t sym = r.met[i];
        PyObject *s = PyTuple_GET_ITEM(self->ints, sym);
        if (PyDict_SetItem(waiting, s, r.bucket[sym]) < 0) goto done;
        if (sym >= self->n_terminals && PySet_Add(roots, s) < 0) goto done;
    }
    frozen = PyFrozenSet_New(roots);
    if (!frozen) goto done;
    result = Py_BuildValue("(OOO)", waiting, frozen, accepting ? Py_True : Py_False);
done:
    Py_XDECREF(waiting);
    Py_XDECREF(roots);
    Py_XDECREF(frozen);
    while (r.chains.n) Py_DECREF(r.chains.at[--r.chains.n].chain);
    if (r.bucket) {
        for (Py_ssize_t i = 0; i < r.n_met; i++) Py_XDECREF(r.bucket[r.met[i]]);
    }
    PyMem_Free(r.bucket);
    PyMem_Free(r.met);
    PyMem_Free(r.stack.at);
    PyMem_Free(r.chains.at);
    pairs_free(&r.seen);
    pairs_free(&r.done);
    return result;
}

static PyMethodDef closure_methods[] = {
    {"close", (PyCFunction)(void (*)(void))closure_close, METH_FASTCALL,
     "close(seeds, scanned, predicted, chain) -> (waiting, roots, accepting)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ClosureType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fimconstrain.engine._earley.Closure",
    .tp_basicsize = sizeof(Closure),
    .tp_dealloc = (destructor)closure_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Closure(next_symbol, item_lhs, skip, n_symbols, n_terminals): a grammar's closure",
    .tp_methods = closure_methods,
    .tp_new = closure_new,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_earley",
                                    "The Earley closure in C (earley.Recognizer._close's twin).", -1,
                                    NULL};

PyMODINIT_FUNC PyInit__earley(void) {
    if (PyType_Ready(&ClosureType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ClosureType);
    if (PyModule_AddObject(m, "Closure", (PyObject *)&ClosureType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", CLOSURE_ABI) < 0) {
        Py_DECREF(&ClosureType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
