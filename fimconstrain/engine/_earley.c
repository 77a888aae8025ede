/* The Earley closure in C: ``earley.Recognizer._close``'s loop (paper 004, section IV), item for
 * item and in the same order, its forgetful twin (``refutation.ForgetfulRecognizer``, section
 * V-B's refutation of a suffix), and the kernel items of the sets they build
 * (docs/optimizations.md, "The closure in C, and a set's items as one array").
 *
 * A set's kernel items are an ``Items`` object: the items as (dot, origin) pairs in one C array,
 * grouped by the symbol they wait for, groups in the order the closure met them. It reads as the
 * ``waiting`` dict the Python loop builds (``get``, ``values``, ``items``, iteration; the pairs as
 * tuples, made when asked and kept), so every reader of a set reads it as before, while the
 * closure reads it as arrays: no tuple, list or dict per item, and no boxed int. The seen items
 * and completed symbols are C hash sets keyed by (origin pointer, id). Chains and predictions are
 * still made by the Python recognizer (called back: they are memoised there), and the chains met
 * are then kept here by (prediction, symbol). A set's ``signature`` key is its sorted pairs as
 * bytes, made once.
 *
 * Plain C99 on the CPython API, like _walk.c; ``earley.py`` is the reference and the fallback.
 * Keep in step with ``Recognizer._close`` and ``ForgetfulRecognizer._close_forgetting`` (their
 * twin notes). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* bumped whenever the arguments or their meaning change (native.py checks it) */
#define CLOSURE_ABI 4

/* ---- a set of (origin, id) pairs, or a map from them: open addressing, exact keys ---- */

/* items a kept buffer may hold (larger ones are handed back after their run) */
#define SPARE_MAX 4096

typedef struct {
    const void *origin; /* NULL: empty slot (origins are never NULL: None is a pointer too) */
    int32_t id;
    int32_t value; /* what the pair maps to, where the set is a map (the chains met) */
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

/* the slot of (origin, id), or the empty one where it would go */
static Pair *pairs_slot(const PairSet *s, const void *origin, int32_t id) {
    size_t mask = (size_t)(s->cap - 1);
    size_t j = pair_hash(origin, id) & mask;
    while (s->slots[j].origin && (s->slots[j].origin != origin || s->slots[j].id != id)) j = (j + 1) & mask;
    return &s->slots[j];
}

/* 1 if (origin, id) was added (mapped to value), 0 if it was there, -1 on error */
static int pairs_put(PairSet *s, const void *origin, int32_t id, int32_t value) {
    if ((s->n + 1) * 2 > s->cap && pairs_grow(s) < 0) return -1;
    Pair *slot = pairs_slot(s, origin, id);
    if (slot->origin) return 0;
    *slot = (Pair){origin, id, value};
    s->n++;
    return 1;
}

static int pairs_add(PairSet *s, const void *origin, int32_t id) {
    return pairs_put(s, origin, id, 0);
}

/* ---- a growable stack of C structs ---- */

typedef struct {
    int32_t dot;      /* the item (dot after the awaited symbol) */
    PyObject *origin; /* borrowed: alive while the closure runs (a seed or an origin's item) */
} Item;

typedef struct {
    PyObject *predictor; /* borrowed: a set alive while the closure runs */
    Py_ssize_t off;      /* its chain in the run's arena: items, then completed symbols */
    int32_t n_items, n_completed;
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
DEFINE_STACK(IntList, int32_t)

/* ---- the chains met, by (prediction, symbol) ----
 * Recognizer.chain's answers copied into C, so that a completion replays its chain without
 * calling Python (prediction.advanced, recognizer.chain) and reading the chain's attributes.
 * An entry holds its prediction alive (its address is the key); past CHAIN_CACHE_LIMIT entries
 * the cache starts afresh. Entries are read and written only while no Python code runs, and a
 * run copies what it reads (another thread may clear the cache while Python code runs). */

#define CHAIN_CACHE_LIMIT (1 << 16)

typedef struct {
    PyObject *prediction; /* owned */
    int32_t n_items;      /* -1: the prediction advances nothing over the symbol */
    int32_t n_completed;
    int32_t *data; /* n_items items, then n_completed symbols */
} ChainEntry;

typedef struct {
    PairSet index; /* (prediction, symbol) -> its entry */
    ChainEntry *entries;
    Py_ssize_t n, cap;
} ChainCache;

static void chain_cache_clear(ChainCache *cache) {
    for (Py_ssize_t i = 0; i < cache->n; i++) {
        Py_CLEAR(cache->entries[i].prediction);
        PyMem_Free(cache->entries[i].data);
    }
    cache->n = 0;
    pairs_free(&cache->index);
    pairs_init(&cache->index);
}

static const ChainEntry *chain_cache_find(const ChainCache *cache, PyObject *prediction, int32_t sym) {
    const Pair *slot = pairs_slot(&cache->index, prediction, sym);
    return slot->origin ? &cache->entries[slot->value] : NULL;
}

/* a copy of the chain (``data``: n_items items then n_completed symbols; n_items -1: none) */
static int chain_cache_add(ChainCache *cache, PyObject *prediction, int32_t sym, int32_t n_items,
                           int32_t n_completed, const int32_t *data) {
    if (cache->n >= CHAIN_CACHE_LIMIT) chain_cache_clear(cache);
    if (cache->n == cache->cap) {
        Py_ssize_t cap = cache->cap ? cache->cap * 2 : 256;
        ChainEntry *entries = PyMem_Realloc(cache->entries, (size_t)cap * sizeof(ChainEntry));
        if (!entries) {
            PyErr_NoMemory();
            return -1;
        }
        cache->entries = entries;
        cache->cap = cap;
    }
    int32_t size = n_items < 0 ? 0 : n_items + n_completed;
    int32_t *copy = NULL;
    if (size) {
        copy = PyMem_Malloc((size_t)size * sizeof(int32_t));
        if (!copy) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(copy, data, (size_t)size * sizeof(int32_t));
    }
    int added = pairs_put(&cache->index, prediction, sym, (int32_t)cache->n);
    if (added <= 0) { /* (never there: it was looked for first) */
        PyMem_Free(copy);
        return added;
    }
    Py_INCREF(prediction);
    cache->entries[cache->n++] = (ChainEntry){prediction, n_items, n_completed, copy};
    return 0;
}

/* ---- a set's predicted nonterminals, one frozenset per sequence met ----
 * A new set hands Python the nonterminals it predicts as a frozenset, which the recognizer looks
 * up its shared prediction by. The same nonterminals in the same order (most sets repeat an
 * earlier one) are the same object again, built once: no set is built, hashed and compared
 * per closed set. Keyed by the sequence in the order met, so that its iteration order, which
 * orders the prediction's items, is the one the set would have been built with. Past
 * ROOTS_LIMIT sequences the table starts afresh. */

#define ROOTS_SLOTS 8192 /* a power of two */
#define ROOTS_LIMIT (ROOTS_SLOTS / 2)

typedef struct {
    uint64_t hash;
    Py_ssize_t off; /* the sequence in the table's ``syms`` */
    int32_t n;
    PyObject *set; /* NULL: an empty slot */
} RootsEntry;

typedef struct {
    RootsEntry *slots; /* [ROOTS_SLOTS], allocated at the first use */
    Py_ssize_t n;
    IntList syms;
} RootsTable;

static void roots_clear(RootsTable *t) {
    if (t->slots) {
        for (Py_ssize_t i = 0; i < ROOTS_SLOTS; i++) Py_CLEAR(t->slots[i].set);
    }
    t->n = 0;
    t->syms.n = 0;
}

static void roots_free(RootsTable *t) {
    roots_clear(t);
    PyMem_Free(t->slots);
    PyMem_Free(t->syms.at);
}

/* the slot of the sequence ``syms[0 .. n)`` hashed ``h``, or the empty one where it would go */
static RootsEntry *roots_slot(RootsTable *t, uint64_t h, const int32_t *syms, int32_t n) {
    size_t mask = ROOTS_SLOTS - 1, j = (size_t)(h ^ h >> 29) & mask;
    for (; t->slots[j].set; j = (j + 1) & mask) {
        const RootsEntry *e = &t->slots[j];
        if (e->hash == h && e->n == n && !memcmp(t->syms.at + e->off, syms, (size_t)n * sizeof(int32_t))) break;
    }
    return &t->slots[j];
}

/* the frozenset of ``syms[0 .. n)`` (a new reference), made once per sequence */
static PyObject *roots_frozenset(RootsTable *t, PyObject *ints, const int32_t *syms, int32_t n) {
    uint64_t h = 0xCBF29CE484222325ULL ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)syms[i]) * 0x100000001B3ULL;
    if (!t->slots) {
        t->slots = PyMem_Calloc(ROOTS_SLOTS, sizeof(RootsEntry));
        if (!t->slots) return PyErr_NoMemory();
    }
    RootsEntry *slot = roots_slot(t, h, syms, n);
    if (slot->set) {
        Py_INCREF(slot->set);
        return slot->set;
    }
    /* a set grown in this order, then frozen, as Recognizer._close grows and freezes it */
    PyObject *grown = PySet_New(NULL);
    if (!grown) return NULL;
    for (int32_t i = 0; i < n; i++) {
        if (PySet_Add(grown, PyTuple_GET_ITEM(ints, syms[i])) < 0) {
            Py_DECREF(grown);
            return NULL;
        }
    }
    PyObject *set = PyFrozenSet_New(grown);
    Py_DECREF(grown);
    if (!set) return NULL;
    if (t->n >= ROOTS_LIMIT) roots_clear(t);
    /* (found again: making the set may have run code that changed the table) */
    slot = roots_slot(t, h, syms, n);
    if (slot->set) return set; /* (an equal one came meanwhile: this one serves as well) */
    Py_ssize_t off = t->syms.n;
    for (int32_t i = 0; i < n; i++) {
        if (IntList_push(&t->syms, syms[i]) < 0) {
            Py_DECREF(set);
            return NULL;
        }
    }
    Py_INCREF(set);
    *slot = (RootsEntry){h, off, n, set};
    t->n++;
    return set;
}

/* ---- the grammar's tables, made once ---- */

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_items, n_symbols, n_terminals;
    int32_t *next_symbol; /* per item: the symbol after the dot, or -1 */
    int32_t *item_lhs;    /* per item: its rule's left-hand side */
    int32_t *skip_start;  /* per item: skip[d] is skip_items[skip_start[d] .. skip_start[d + 1]) */
    int32_t *skip_items;
    PyObject *ints;       /* tuple: the ints 0 .. max(n_items, n_symbols), made once */
    ChainCache chains;    /* (prediction, symbol) -> its chain, read without calling Python */
    PyObject *s_waiting, *s_prediction, *s_advanced, *s_items, *s_completed;
    struct Run *spare; /* a run's buffers, kept for the next run (NULL while a run holds them) */
    RootsTable roots;  /* the predicted nonterminals' frozensets, by sequence */
} Closure;

static void run_free(struct Run *r);

static void closure_dealloc(Closure *self) {
    if (self->spare) run_free(self->spare);
    roots_free(&self->roots);
    chain_cache_clear(&self->chains); /* (leaves the index in its inline slots) */
    PyMem_Free(self->chains.entries);
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
    pairs_init(&self->chains.index);
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

/* ---- a set's kernel items ---- */

typedef struct {
    int32_t dot;      /* the item, its dot after the awaited symbol */
    PyObject *origin; /* owned: the set the item began in, or None */
} KernelItem;

typedef struct {
    int32_t sym, start, count; /* items[start .. start + count) wait for sym */
} Group;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n_items, n_groups;
    KernelItem *items; /* grouped by symbol, groups in the order met */
    Group *groups;     /* in the order met (the dict's order) */
    int32_t *by_sym;   /* group indices by symbol, ascending: lookups bisect */
    PyObject **made;   /* per group: its pairs as a tuple of (dot, origin) tuples, once asked */
    PyObject *key;     /* the signature key, once asked */
} Items;

static PyTypeObject ItemsType;

static int items_traverse(Items *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < self->n_items; i++) Py_VISIT(self->items[i].origin);
    if (self->made) {
        for (Py_ssize_t g = 0; g < self->n_groups; g++) Py_VISIT(self->made[g]);
    }
    return 0;
}

static int items_clear(Items *self) {
    for (Py_ssize_t i = 0; i < self->n_items; i++) {
        PyObject *origin = self->items[i].origin;
        Py_INCREF(Py_None);
        self->items[i].origin = Py_None;
        Py_XDECREF(origin);
    }
    if (self->made) {
        for (Py_ssize_t g = 0; g < self->n_groups; g++) Py_CLEAR(self->made[g]);
    }
    Py_CLEAR(self->key);
    return 0;
}

static void items_dealloc(Items *self) {
    PyObject_GC_UnTrack(self);
    /* a chain of sets, each the origin of the next, is freed without recursing deeply */
    Py_TRASHCAN_BEGIN(self, items_dealloc)
    items_clear(self);
    for (Py_ssize_t i = 0; i < self->n_items; i++) Py_XDECREF(self->items[i].origin);
    PyMem_Free(self->items);
    PyMem_Free(self->groups);
    PyMem_Free(self->by_sym);
    PyMem_Free(self->made);
    Py_TYPE(self)->tp_free((PyObject *)self);
    Py_TRASHCAN_END
}

/* a new Items with room for n items in g groups (origins None, groups unset) */
static Items *items_alloc(Py_ssize_t n, Py_ssize_t g) {
    Items *self = PyObject_GC_New(Items, &ItemsType);
    if (!self) return NULL;
    self->n_items = 0;
    self->n_groups = g;
    self->made = NULL;
    self->key = NULL;
    self->items = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(KernelItem));
    self->groups = PyMem_Malloc((size_t)(g ? g : 1) * sizeof(Group));
    self->by_sym = PyMem_Malloc((size_t)(g ? g : 1) * sizeof(int32_t));
    if (!self->items || !self->groups || !self->by_sym) {
        Py_DECREF(self);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(Py_None);
        self->items[i] = (KernelItem){0, Py_None};
    }
    self->n_items = n;
    return self;
}

static const Items *items_of(PyObject *o) {
    return Py_IS_TYPE(o, &ItemsType) ? (const Items *)o : NULL;
}

static void items_index(Items *self) {
    /* insertion sort: a set waits for a few dozen symbols at most */
    for (Py_ssize_t i = 0; i < self->n_groups; i++) {
        int32_t g = (int32_t)i, sym = self->groups[i].sym;
        Py_ssize_t j = i;
        while (j > 0 && self->groups[self->by_sym[j - 1]].sym > sym) {
            self->by_sym[j] = self->by_sym[j - 1];
            j--;
        }
        self->by_sym[j] = g;
    }
    PyObject_GC_Track(self);
}

/* the group waiting for sym, or NULL */
static const Group *items_find(const Items *self, long sym) {
    Py_ssize_t lo = 0, hi = self->n_groups;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        const Group *g = &self->groups[self->by_sym[mid]];
        if (g->sym == sym) return g;
        if (g->sym < sym) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* the group's pairs as a tuple of (dot, origin) tuples (borrowed; made once) */
static PyObject *items_pairs(Items *self, const Group *g) {
    Py_ssize_t at = g - self->groups;
    if (!self->made) {
        self->made = PyMem_Calloc((size_t)self->n_groups, sizeof(PyObject *));
        if (!self->made) return PyErr_NoMemory();
    }
    if (self->made[at]) return self->made[at];
    PyObject *tuple = PyTuple_New(g->count);
    if (!tuple) return NULL;
    for (int32_t k = 0; k < g->count; k++) {
        const KernelItem *item = &self->items[g->start + k];
        PyObject *pair = Py_BuildValue("(iO)", item->dot, item->origin);
        if (!pair) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, k, pair);
    }
    if (self->made[at]) { /* made meanwhile by another thread (making tuples may run Python code) */
        Py_DECREF(tuple);
        return self->made[at];
    }
    self->made[at] = tuple;
    return tuple;
}

static long sym_arg(PyObject *key) {
    if (!PyLong_Check(key)) return -2;
    long sym = PyLong_AsLong(key);
    if (sym == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -2;
    }
    return sym;
}

static PyObject *items_get(Items *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(symbol, default=None)");
        return NULL;
    }
    const Group *g = items_find(self, sym_arg(args[0]));
    if (!g) {
        PyObject *fallback = nargs == 2 ? args[1] : Py_None;
        Py_INCREF(fallback);
        return fallback;
    }
    PyObject *pairs = items_pairs(self, g);
    Py_XINCREF(pairs);
    return pairs;
}

static PyObject *items_subscript(Items *self, PyObject *key) {
    const Group *g = items_find(self, sym_arg(key));
    if (!g) {
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    PyObject *pairs = items_pairs(self, g);
    Py_XINCREF(pairs);
    return pairs;
}

static int items_contains(Items *self, PyObject *key) {
    return items_find(self, sym_arg(key)) != NULL;
}

static Py_ssize_t items_length(Items *self) {
    return self->n_groups;
}

/* which: 0 the symbols, 1 the pairs, 2 (symbol, pairs) */
static PyObject *items_list(Items *self, int which) {
    PyObject *out = PyList_New(self->n_groups);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < self->n_groups; i++) {
        const Group *g = &self->groups[i];
        PyObject *v = NULL;
        if (which == 0) {
            v = PyLong_FromLong(g->sym);
        } else {
            PyObject *pairs = items_pairs(self, g);
            if (pairs) v = which == 1 ? (Py_INCREF(pairs), pairs) : Py_BuildValue("(iO)", g->sym, pairs);
        }
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *items_keys(Items *self, PyObject *unused) {
    return items_list(self, 0);
}

static PyObject *items_values(Items *self, PyObject *unused) {
    return items_list(self, 1);
}

static PyObject *items_items(Items *self, PyObject *unused) {
    return items_list(self, 2);
}

static PyObject *items_iter(Items *self) {
    PyObject *keys = items_list(self, 0);
    if (!keys) return NULL;
    PyObject *it = PyObject_GetIter(keys);
    Py_DECREF(keys);
    return it;
}

typedef struct {
    int64_t dot;
    uint64_t origin;
} KeyPair;

static int key_pair_cmp(const void *a, const void *b) {
    const KeyPair *x = a, *y = b;
    if (x->dot != y->dot) return x->dot < y->dot ? -1 : 1;
    return x->origin < y->origin ? -1 : x->origin > y->origin;
}

/* the kernel's pairs (dot, origin by identity), sorted, as bytes: equal for equal kernels
 * (EarleySet.signature; origins are compared by identity, as there) */
static PyObject *items_signature_key(Items *self, PyObject *unused) {
    if (self->key) {
        Py_INCREF(self->key);
        return self->key;
    }
    KeyPair *pairs = PyMem_Malloc((size_t)(self->n_items ? self->n_items : 1) * sizeof(KeyPair));
    if (!pairs) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < self->n_items; i++)
        pairs[i] = (KeyPair){self->items[i].dot, (uint64_t)(uintptr_t)self->items[i].origin};
    qsort(pairs, (size_t)self->n_items, sizeof(KeyPair), key_pair_cmp); /* (no pair is there twice) */
    self->key = PyBytes_FromStringAndSize((const char *)pairs, self->n_items * (Py_ssize_t)sizeof(KeyPair));
    PyMem_Free(pairs);
    Py_XINCREF(self->key);
    return self->key;
}

/* the symbols below ``n`` (the terminals) the kernel waits for, as an int's bits: what a set's
 * kernel adds to its prediction's terminals (Recognizer.expected_terminals), without a list of
 * its symbols made and read one by one */
static PyObject *items_terminal_mask(Items *self, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "terminal_mask: n must not be negative");
        return NULL;
    }
    size_t size = ((size_t)n + 63) / 64 * 8; /* little-endian bytes, whole words */
    unsigned char small[64], *bytes = size <= sizeof(small) ? small : PyMem_Calloc(size ? size : 1, 1);
    if (!bytes) return PyErr_NoMemory();
    if (bytes == small) memset(small, 0, sizeof(small));
    for (Py_ssize_t i = 0; i < self->n_groups; i++) {
        int32_t sym = self->groups[i].sym;
        if (sym < n) bytes[sym / 8] |= (unsigned char)(1u << (sym % 8));
    }
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *mask = PyLong_FromUnsignedNativeBytes(bytes, size, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
#else
    PyObject *mask = _PyLong_FromByteArray(bytes, size, 1, 0);
#endif
    if (bytes != small) PyMem_Free(bytes);
    return mask;
}

static PyMethodDef items_methods[] = {
    {"get", (PyCFunction)(void (*)(void))items_get, METH_FASTCALL, "get(symbol, default=None): its items"},
    {"keys", (PyCFunction)items_keys, METH_NOARGS, "the symbols waited for, in the order met"},
    {"values", (PyCFunction)items_values, METH_NOARGS, "each symbol's items"},
    {"items", (PyCFunction)items_items, METH_NOARGS, "(symbol, its items) pairs"},
    {"signature_key", (PyCFunction)items_signature_key, METH_NOARGS,
     "the sorted (dot, origin identity) pairs as bytes: equal for equal kernels"},
    {"terminal_mask", (PyCFunction)items_terminal_mask, METH_O,
     "terminal_mask(n) -> int: the bits of the symbols below n waited for"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods items_as_mapping = {
    .mp_length = (lenfunc)items_length,
    .mp_subscript = (binaryfunc)items_subscript,
};

static PySequenceMethods items_as_sequence = {
    .sq_contains = (objobjproc)items_contains,
};

static PyTypeObject ItemsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fimconstrain.engine._earley.Items",
    .tp_basicsize = sizeof(Items),
    .tp_dealloc = (destructor)items_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A set's kernel items, read as its waiting dict {symbol: ((dot, origin), ...)}",
    .tp_traverse = (traverseproc)items_traverse,
    .tp_clear = (inquiry)items_clear,
    .tp_iter = (getiterfunc)items_iter,
    .tp_methods = items_methods,
    .tp_as_mapping = &items_as_mapping,
    .tp_as_sequence = &items_as_sequence,
};

/* ---- the closure ---- */

typedef struct {
    int32_t sym, dot;
    PyObject *origin; /* borrowed while the closure runs */
} Met;

DEFINE_STACK(MetList, Met)

typedef struct Run {
    Closure *c;
    PyObject *chain_fn; /* recognizer.chain(prediction, symbol) -> Chain */
    int32_t *count;     /* per symbol: its items so far in the new set (0: none yet) */
    int32_t *met;       /* symbols in the order their first item came */
    Py_ssize_t n_met;
    MetList found;      /* the new set's items in the order they came */
    PairSet seen, done;
    ItemStack stack;
    ChainStack chains;
    IntList arena; /* the pushed chains' items and completions (ChainRef.off) */
} Run;

/* (dot + 1, origin) into the new set, waiting for ``sym`` */
static int add_waiting(Run *r, int32_t sym, int32_t dot, PyObject *origin) {
    if (!r->count[sym]++) r->met[r->n_met++] = sym;
    return MetList_push(&r->found, (Met){sym, dot + 1, origin});
}

/* a sequence of (dot, origin) pairs pushed, in order (borrowed: the sequence, a seed list or a
 * dict set's list, outlives the closure) */
static int push_pairs(Run *r, PyObject *pairs) {
    PyObject *seq = PySequence_Fast(pairs, "a set's items are not a sequence");
    if (!seq) return -1;
    int failed = 0;
    for (Py_ssize_t i = 0; !failed && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "an item is not a (dot, origin) pair");
            failed = -1;
            break;
        }
        long dot = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
        if (dot < 0 || dot >= r->c->n_items) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an item out of range");
            failed = -1;
            break;
        }
        failed = ItemStack_push(&r->stack, (Item){(int32_t)dot, PyTuple_GET_ITEM(pair, 1)});
    }
    Py_DECREF(seq);
    return failed;
}

/* the items of ``waiting`` (an Items or a dict) waiting for ``sym`` pushed, in order */
static int push_items_of(Run *r, PyObject *waiting, int32_t sym) {
    const Items *kernel = items_of(waiting);
    if (kernel) {
        const Group *g = items_find(kernel, sym);
        for (int32_t k = 0; g && k < g->count; k++) {
            const KernelItem *item = &kernel->items[g->start + k];
            /* borrowed: the kernel owns the origin and outlives the closure */
            if (ItemStack_push(&r->stack, (Item){item->dot, item->origin}) < 0) return -1;
        }
        return 0;
    }
    if (!PyDict_Check(waiting)) {
        PyErr_SetString(PyExc_TypeError, "a set's waiting is neither Items nor a dict");
        return -1;
    }
    PyObject *pairs = PyDict_GetItemWithError(waiting, PyTuple_GET_ITEM(r->c->ints, sym));
    if (!pairs) return PyErr_Occurred() ? -1 : 0;
    return push_pairs(r, pairs);
}

/* origin.waiting.get(lhs, ()) pushed (in order: the last is popped first) */
static int push_waiting(Run *r, PyObject *origin, int32_t lhs) {
    PyObject *waiting = PyObject_GetAttr(origin, r->c->s_waiting);
    if (!waiting) return -1;
    int failed = push_items_of(r, waiting, lhs);
    Py_DECREF(waiting);
    return failed;
}

/* the ints of a tuple appended to the arena, each checked to lie in [lo, hi) */
static int arena_ints(Run *r, PyObject *tuple, long lo, long hi) {
    if (!PyTuple_Check(tuple)) {
        PyErr_SetString(PyExc_TypeError, "a chain's items and completions are not tuples");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(tuple, i));
        if (v < lo || v >= hi) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a chain's id is out of range");
            return -1;
        }
        if (IntList_push(&r->arena, (int32_t)v) < 0) return -1;
    }
    return 0;
}

/* the chain of ``predictor``'s prediction for ``sym`` into the arena (Recognizer.chain, asked
 * only where prediction.advanced(sym) is not empty); n_items -1: nothing advances */
static int chain_of(Run *r, PyObject *prediction, int32_t sym, int32_t *n_items, int32_t *n_completed) {
    Closure *c = r->c;
    const ChainEntry *known = chain_cache_find(&c->chains, prediction, sym);
    if (known) { /* copied now: Python code that runs later may clear the cache */
        *n_items = known->n_items;
        *n_completed = known->n_completed;
        for (int32_t k = 0; k < (known->n_items < 0 ? 0 : known->n_items + known->n_completed); k++)
            if (IntList_push(&r->arena, known->data[k]) < 0) return -1;
        return 0;
    }
    PyObject *s = PyTuple_GET_ITEM(c->ints, sym);
    PyObject *advanced = PyObject_CallMethodOneArg(prediction, c->s_advanced, s);
    if (!advanced) return -1;
    int some = PyObject_IsTrue(advanced);
    Py_DECREF(advanced);
    if (some < 0) return -1;
    Py_ssize_t off = r->arena.n;
    *n_items = -1;
    *n_completed = 0;
    if (some) {
        PyObject *args[2] = {prediction, s};
        PyObject *chain = PyObject_Vectorcall(r->chain_fn, args, 2, NULL);
        if (!chain) return -1;
        PyObject *items = PyObject_GetAttr(chain, c->s_items);
        PyObject *completed = items ? PyObject_GetAttr(chain, c->s_completed) : NULL;
        Py_DECREF(chain);
        int failed = !completed || arena_ints(r, items, 0, c->n_items) < 0;
        Py_ssize_t middle = r->arena.n;
        failed = failed || arena_ints(r, completed, c->n_terminals, c->n_symbols) < 0;
        Py_XDECREF(items);
        Py_XDECREF(completed);
        if (failed) return -1;
        for (Py_ssize_t k = off; k < middle; k++) {
            if (c->next_symbol[r->arena.at[k]] < 0) {
                PyErr_SetString(PyExc_ValueError, "a chain's item waits for nothing");
                return -1;
            }
        }
        *n_items = (int32_t)(middle - off);
        *n_completed = (int32_t)(r->arena.n - middle);
    }
    return chain_cache_add(&c->chains, prediction, sym, *n_items, *n_completed, r->arena.at + off);
}

/* the chain of ``predictor``'s prediction for ``sym`` pushed, if it advances anything */
static int push_chain(Run *r, PyObject *predictor, int32_t sym) {
    PyObject *prediction = PyObject_GetAttr(predictor, r->c->s_prediction);
    if (!prediction) return -1;
    Py_ssize_t off = r->arena.n;
    int32_t n_items, n_completed;
    int failed = chain_of(r, prediction, sym, &n_items, &n_completed);
    Py_DECREF(prediction);
    if (failed || n_items < 0) return failed;
    return ChainStack_push(&r->chains, (ChainRef){predictor, off, n_items, n_completed});
}

/* a chain's items and completions, replayed at its predictor */
static int replay(Run *r, ChainRef ref) {
    Closure *c = r->c;
    PyObject *predictor = ref.predictor;
    for (int32_t k = 0; k < ref.n_items; k++) {
        int32_t d = r->arena.at[ref.off + k];
        int added = pairs_add(&r->seen, predictor, d);
        if (added < 0) return -1;
        if (added && add_waiting(r, c->next_symbol[d], d, predictor) < 0) return -1;
    }
    for (int32_t k = 0; k < ref.n_completed; k++) {
        int32_t lhs = r->arena.at[ref.off + ref.n_items + k];
        int added = pairs_add(&r->done, predictor, lhs);
        if (added < 0) return -1;
        if (added && push_waiting(r, predictor, lhs) < 0) return -1;
    }
    return 0;
}

/* the loop of Recognizer._close; fills r->found; returns accepting (0/1) or -1 */
static int close_items(Run *r) {
    Closure *c = r->c;
    int accepting = 0;
    while (r->stack.n || r->chains.n) {
        while (r->chains.n) {
            ChainRef ref = r->chains.at[--r->chains.n];
            if (replay(r, ref) < 0) return -1;
            r->arena.n = ref.off; /* (chains are replayed last in, first out) */
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
            if (push_waiting(r, origin, lhs) < 0 || push_chain(r, origin, lhs) < 0) return -1;
        }
    }
    return accepting;
}

static void run_free(Run *r) {
    PyMem_Free(r->count);
    PyMem_Free(r->met);
    PyMem_Free(r->found.at);
    PyMem_Free(r->stack.at);
    PyMem_Free(r->chains.at);
    PyMem_Free(r->arena.at);
    pairs_free(&r->seen);
    pairs_free(&r->done);
    PyMem_Free(r);
}

/* a run's buffers: the closure's spare ones (emptied by run_end, their room kept), or new ones
 * where a run holds those (a chain or a completion asked of Python may close another set);
 * NULL on an error */
static Run *run_start(Closure *c, PyObject *chain_fn) {
    Run *r = c->spare;
    if (r) {
        c->spare = NULL;
    } else {
        Py_ssize_t n = c->n_symbols ? c->n_symbols : 1;
        r = PyMem_Calloc(1, sizeof(Run));
        if (!r) return (Run *)PyErr_NoMemory();
        pairs_init(&r->seen);
        pairs_init(&r->done);
        r->count = PyMem_Calloc((size_t)n, sizeof(int32_t));
        r->met = PyMem_Malloc((size_t)n * sizeof(int32_t));
        if (!r->count || !r->met) {
            run_free(r);
            return (Run *)PyErr_NoMemory();
        }
    }
    r->c = c;
    r->chain_fn = chain_fn;
    return r;
}

/* the run is over (``r`` may be NULL): its buffers emptied, every symbol's count back to 0, and
 * kept as the closure's spare where none is kept and they are not large */
static void run_end(Run *r) {
    if (!r) return;
    Closure *c = r->c;
    for (Py_ssize_t g = 0; g < r->n_met; g++) r->count[r->met[g]] = 0;
    r->n_met = r->found.n = r->stack.n = r->chains.n = r->arena.n = 0;
    pairs_free(&r->seen); /* (a grown table goes; the inline one is cleared) */
    pairs_free(&r->done);
    pairs_init(&r->seen);
    pairs_init(&r->done);
    if (c->spare || r->found.cap > SPARE_MAX || r->stack.cap > SPARE_MAX || r->chains.cap > SPARE_MAX ||
        r->arena.cap > SPARE_MAX) {
        run_free(r);
        return;
    }
    c->spare = r;
}

/* close what was pushed; (items, roots, accepting), roots the frozenset of the nonterminals
 * the new set waits for */
/* the new set's kernel from what the run found: groups in the order met; within one, the items
 * in the order they came (after it, each met symbol's count holds its group) */
static Items *run_items(Run *r) {
    Items *items = items_alloc(r->found.n, r->n_met);
    if (!items) return NULL;
    int32_t at = 0;
    for (Py_ssize_t g = 0; g < r->n_met; g++) {
        int32_t sym = r->met[g];
        items->groups[g] = (Group){sym, at, 0};
        at += r->count[sym];
        r->count[sym] = (int32_t)g; /* from here on: the symbol's group */
    }
    for (Py_ssize_t i = 0; i < r->found.n; i++) {
        Met m = r->found.at[i];
        Group *g = &items->groups[r->count[m.sym]];
        KernelItem *item = &items->items[g->start + g->count++];
        item->dot = m.dot;
        Py_INCREF(m.origin);
        Py_SETREF(item->origin, m.origin);
    }
    items_index(items);
    return items;
}

static PyObject *run_close(Run *r) {
    Closure *c = r->c;
    int accepting = close_items(r);
    if (accepting < 0) return NULL;
    Items *items = run_items(r);
    if (!items) return NULL;
    /* the nonterminals in the order met (written over ``met``, which is read no more but to zero
     * the counts: the nonterminals' counts are zeroed there, the terminals' here), frozen as a
     * set grown in that order (roots_frozenset): its iteration order, which orders the
     * prediction's items, is then the Python loop's */
    int32_t n_roots = 0;
    for (Py_ssize_t g = 0; g < r->n_met; g++) {
        int32_t sym = r->met[g];
        if (sym >= c->n_terminals) r->met[n_roots++] = sym;
        else r->count[sym] = 0;
    }
    r->n_met = n_roots;
    PyObject *frozen = roots_frozenset(&c->roots, c->ints, r->met, n_roots), *result = NULL;
    if (frozen) result = Py_BuildValue("(OOO)", items, frozen, accepting ? Py_True : Py_False);
    Py_DECREF(items);
    Py_XDECREF(frozen);
    return result;
}

/* Closure.close(seeds, chain) -> (items, roots, accepting): the closure of ``seeds`` (a list of
 * (dot, origin or None)) into a new set's kernel; chain: recognizer.chain */
static PyObject *closure_close(Closure *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "close(seeds: list, chain)");
        return NULL;
    }
    PyObject *seeds = args[0], *result = NULL;
    Run *r = run_start(self, args[1]);
    if (r && push_pairs(r, seeds) == 0) result = run_close(r);
    run_end(r);
    return result;
}

/* Closure.scan(state, terminals, chain) -> (items, roots, accepting) or None: Recognizer.scan,
 * the state's items waiting for each terminal and its predicted items advanced over each */
static PyObject *closure_scan(Closure *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "scan(state, terminals: tuple, chain)");
        return NULL;
    }
    PyObject *state = args[0], *terminals = args[1], *result = NULL;
    PyObject *waiting = NULL;
    Run *r = run_start(self, args[2]);
    if (!r) goto done;
    waiting = PyObject_GetAttr(state, self->s_waiting);
    if (!waiting) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(terminals);
    for (Py_ssize_t i = 0; i < n; i++) {
        long t = PyLong_AsLong(PyTuple_GET_ITEM(terminals, i));
        if (t < 0 || t >= self->n_symbols) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a terminal out of range");
            goto done;
        }
        if (push_items_of(r, waiting, (int32_t)t) < 0) goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long t = PyLong_AsLong(PyTuple_GET_ITEM(terminals, i));
        if (push_chain(r, state, (int32_t)t) < 0) goto done;
    }
    if (!r->stack.n && !r->chains.n) {
        result = Py_None;
        Py_INCREF(result);
    } else {
        result = run_close(r);
    }
done:
    Py_XDECREF(waiting);
    run_end(r);
    return result;
}

/* ---- the forgetful closure (refutation.ForgetfulRecognizer) ---- */

/* any non-NULL pointer: the "origin" of the forgotten items' keys in a PairSet */
#define FORGOTTEN ((const void *)&ItemsType)

typedef struct {
    PyObject *universal;    /* borrowed: the set every forgotten origin becomes */
    PyObject *at_universal; /* ForgetfulRecognizer._completed_at_universal */
    PairSet kept_set;       /* the forgotten items' keys met */
    IntList kept;           /* ... in the order met */
    int accepting;
} Forgetting;

static int keep(Forgetting *f, int32_t key) {
    int added = pairs_add(&f->kept_set, FORGOTTEN, key);
    return added <= 0 ? added : IntList_push(&f->kept, key);
}

/* what completing ``lhs`` at the universal set adds (a dict of keys, and whether it accepts) */
static int keep_at_universal(Run *r, Forgetting *f, int32_t lhs) {
    PyObject *args[1] = {PyTuple_GET_ITEM(r->c->ints, lhs)};
    PyObject *found = PyObject_Vectorcall(f->at_universal, args, 1, NULL);
    if (!found) return -1;
    int failed = 0;
    if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2 || !PyDict_Check(PyTuple_GET_ITEM(found, 0))) {
        PyErr_SetString(PyExc_TypeError, "_completed_at_universal must give (dict, bool)");
        failed = -1;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (!failed && PyDict_Next(PyTuple_GET_ITEM(found, 0), &pos, &key, &value)) {
        long k = PyLong_AsLong(key);
        if (k < 0 || k > 2 * (long)r->c->n_items + 1) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a forgotten item out of range");
            failed = -1;
        } else {
            failed = keep(f, (int32_t)k);
        }
    }
    if (!failed) {
        int accepts = PyObject_IsTrue(PyTuple_GET_ITEM(found, 1));
        if (accepts < 0) failed = -1;
        f->accepting |= accepts > 0;
    }
    Py_DECREF(found);
    return failed;
}

/* (d, origin) pushed for each item of origin.prediction.advanced(sym) */
static int push_advanced(Run *r, PyObject *origin, int32_t sym) {
    PyObject *prediction = PyObject_GetAttr(origin, r->c->s_prediction);
    if (!prediction) return -1;
    PyObject *advanced = PyObject_CallMethodOneArg(prediction, r->c->s_advanced, PyTuple_GET_ITEM(r->c->ints, sym));
    Py_DECREF(prediction);
    if (!advanced) return -1;
    int failed = 0;
    if (!PyTuple_Check(advanced)) {
        PyErr_SetString(PyExc_TypeError, "a prediction's advanced items are not a tuple");
        failed = -1;
    }
    for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(advanced); i++) {
        long d = PyLong_AsLong(PyTuple_GET_ITEM(advanced, i));
        if (d < 0 || d >= r->c->n_items) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an advanced item out of range");
            failed = -1;
        } else {
            failed = ItemStack_push(&r->stack, (Item){(int32_t)d, origin});
        }
    }
    Py_DECREF(advanced);
    return failed;
}

/* the loop of ForgetfulRecognizer._close_forgetting over what was pushed */
static int forget_items(Run *r, Forgetting *f) {
    Closure *c = r->c;
    while (r->stack.n) {
        Item item = r->stack.at[--r->stack.n];
        PyObject *origin = item.origin;
        for (int32_t k = c->skip_start[item.dot]; k < c->skip_start[item.dot + 1]; k++) {
            int32_t d = c->skip_items[k];
            int added = pairs_add(&r->seen, origin, d);
            if (added <= 0) {
                if (added < 0) return -1;
                continue;
            }
            if (c->next_symbol[d] >= 0) {
                if (keep(f, (d + 1) << 1 | (origin == Py_None)) < 0) return -1;
                continue;
            }
            if (origin == Py_None) { /* the augmented start rule is complete */
                f->accepting = 1;
                continue;
            }
            int32_t lhs = c->item_lhs[d];
            added = pairs_add(&r->done, origin, lhs);
            if (added <= 0) {
                if (added < 0) return -1;
                continue;
            }
            if (origin == f->universal) {
                if (keep_at_universal(r, f, lhs) < 0) return -1;
                continue;
            }
            if (push_waiting(r, origin, lhs) < 0 || push_advanced(r, origin, lhs) < 0) return -1;
        }
    }
    return 0;
}

static int key_int_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Closure.scan_forgetting(state, terminals, universal, at_universal) -> (accepting, key, kept),
 * or None: ForgetfulRecognizer.scan's seeds closed as _close_forgetting closes them. ``kept``:
 * the new set's items, origins forgotten (dot << 1 | origin is None), in the order met, as
 * bytes (int32 each: what Closure.forgotten reads); ``key``: them sorted, as bytes (with
 * ``accepting``, the set's identity for interning) */
static PyObject *closure_scan_forgetting(Closure *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "scan_forgetting(state, terminals: tuple, universal, at_universal)");
        return NULL;
    }
    PyObject *state = args[0], *terminals = args[1], *result = NULL, *waiting = NULL;
    Forgetting f = {.universal = args[2], .at_universal = args[3]};
    pairs_init(&f.kept_set);
    Run *r = run_start(self, Py_None);
    if (!r) goto done;
    waiting = PyObject_GetAttr(state, self->s_waiting);
    if (!waiting) goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(terminals); i++) {
        long t = PyLong_AsLong(PyTuple_GET_ITEM(terminals, i));
        if (t < 0 || t >= self->n_symbols) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a terminal out of range");
            goto done;
        }
        if (push_items_of(r, waiting, (int32_t)t) < 0 || push_advanced(r, state, (int32_t)t) < 0) goto done;
    }
    if (!r->stack.n) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (forget_items(r, &f) < 0) goto done;
    PyObject *kept = PyBytes_FromStringAndSize((const char *)f.kept.at, f.kept.n * (Py_ssize_t)sizeof(int32_t));
    if (!kept) goto done;
    qsort(f.kept.at, (size_t)f.kept.n, sizeof(int32_t), key_int_cmp);
    PyObject *key = PyBytes_FromStringAndSize((const char *)f.kept.at, f.kept.n * (Py_ssize_t)sizeof(int32_t));
    if (key) result = Py_BuildValue("(ONN)", f.accepting ? Py_True : Py_False, key, kept);
    else Py_DECREF(kept);
done:
    Py_XDECREF(waiting);
    run_end(r);
    pairs_free(&f.kept_set);
    PyMem_Free(f.kept.at);
    return result;
}

/* Closure.forgotten(kept, universal) -> (items, roots): the kernel of a set of forgotten items
 * (ForgetfulRecognizer._intern): ``kept``, their keys as scan_forgetting gives them, as Items
 * grouped by the symbol each waits for, groups and items in the order met, each origin None
 * or ``universal``; ``roots``, the frozenset of the nonterminals waited for, grown in the
 * order met (as the Python loop grows it) */
static PyObject *closure_forgotten(Closure *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) % (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_TypeError, "forgotten(kept: bytes of int32 keys, universal)");
        return NULL;
    }
    const int32_t *kept = (const int32_t *)(const void *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]) / (Py_ssize_t)sizeof(int32_t);
    PyObject *result = NULL, *nonterminals = NULL, *roots = NULL;
    Items *items = NULL;
    Run *r = run_start(self, Py_None);
    if (!r) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t dot = kept[i] >> 1;
        int32_t sym = dot >= 1 && dot <= self->n_items ? self->next_symbol[dot - 1] : -1;
        if (sym < 0) {
            PyErr_SetString(PyExc_ValueError, "forgotten: a key is no item after a symbol");
            goto done;
        }
        if (add_waiting(r, sym, dot - 1, kept[i] & 1 ? Py_None : args[1]) < 0) goto done;
    }
    items = run_items(r);
    if (!items) goto done;
    nonterminals = PyList_New(0); /* (grown in the order met, as ForgetfulRecognizer._intern grows it) */
    if (!nonterminals) goto done;
    for (Py_ssize_t g = 0; g < r->n_met; g++) {
        int32_t sym = r->met[g];
        if (sym >= self->n_terminals && PyList_Append(nonterminals, PyTuple_GET_ITEM(self->ints, sym)) < 0) goto done;
    }
    roots = PyFrozenSet_New(nonterminals);
    if (roots) result = PyTuple_Pack(2, (PyObject *)items, roots);
done:
    run_end(r);
    Py_XDECREF(items);
    Py_XDECREF(nonterminals);
    Py_XDECREF(roots);
    return result;
}

static PyMethodDef closure_methods[] = {
    {"close", (PyCFunction)(void (*)(void))closure_close, METH_FASTCALL,
     "close(seeds, chain) -> (items, roots, accepting)"},
    {"scan", (PyCFunction)(void (*)(void))closure_scan, METH_FASTCALL,
     "scan(state, terminals, chain) -> (items, roots, accepting), or None"},
    {"scan_forgetting", (PyCFunction)(void (*)(void))closure_scan_forgetting, METH_FASTCALL,
     "scan_forgetting(state, terminals, universal, at_universal) -> (accepting, key, kept), or None"},
    {"forgotten", (PyCFunction)(void (*)(void))closure_forgotten, METH_FASTCALL,
     "forgotten(kept, universal) -> (items, roots): a set of forgotten items' kernel"},
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
                                    "The Earley closure in C (earley.Recognizer._close's twin, and its forgetful one).", -1,
                                    NULL};

PyMODINIT_FUNC PyInit__earley(void) {
    if (PyType_Ready(&ClosureType) < 0 || PyType_Ready(&ItemsType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ClosureType);
    Py_INCREF(&ItemsType);
    if (PyModule_AddObject(m, "Closure", (PyObject *)&ClosureType) < 0 ||
        PyModule_AddObject(m, "Items", (PyObject *)&ItemsType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", CLOSURE_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
