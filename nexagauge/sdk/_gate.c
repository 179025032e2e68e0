/*
 * nexagauge.sdk._gate: the secret gate's common case in one pass over each text (optional).
 *
 * What Scrubber.gate (nexagauge/sdk/scrubbing.py) computes in Python with several C-level passes
 * over the texts joined by "\n" and encoded to UTF-8 (a bytes.translate to character classes, an
 * rfind for a 16-character token run, memchr per separator, the plan's trigger literals, the key
 * windows before "=" / ":"), computed here in one pass of 64 bytes at a time (SSE2 on x86-64
 * with GCC or Clang; a portable byte loop elsewhere) plus a SIMD literal search. The result is the same by
 * construction, and checked against the Python gate by tests/sdk/test_native_gate.py on random
 * and adversarial texts:
 *
 *   lean(texts, plans, keyed, windows) -> int
 *     texts:   list of str (the texts the Python gate would join with "\n")
 *     plans:   the scrubber's 16 lean plans (None, or (literals, slash_or_plus, digits))
 *     keyed:   bit i set when shape i has rules with a key gate
 *     windows: the frozenset of 3-byte windows that may precede a separator after a key
 *   returns 3 (CLEAN | PLAIN) or 1 (CLEAN) when no rule can match, 0 when a text cannot be
 *   encoded to UTF-8 (a lone surrogate: the Python gate says 0 too), and -1 when the Python gate
 *   must decide (a long token, a trigger literal, a key before a separator...: every gate of the
 *   rules runs there, as without this module).
 *
 * The module is optional: setup.py builds it when a C compiler is present and the Python path is
 * used otherwise (nexagauge.sdk.scrub_gates.lean_native is None then). Its only purpose is speed
 * on text never seen before (issue 33: new passages on every call).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* NG_NO_SIMD: the portable loop on x86-64 too (tests/sdk/test_native_gate.py builds it so) */
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__)) && !defined(NG_NO_SIMD)
#include <emmintrin.h>
#define NG_SSE2 1
#endif

/* facts about a text, accumulated over every text of one call */
#define F_EQ 1        /* "=" */
#define F_COLON 2     /* ":" */
#define F_AT 4        /* "@" */
#define F_ESC 8       /* a byte JSON escapes other than '"' and newline: backslash, control */
#define F_SLASHPLUS 16 /* "/" or "+" */
#define F_TOKEN 32    /* (per byte, the portable loop) [A-Za-z0-9_-] */
#define F_DIGIT 64    /* (per byte, the portable loop) [0-9] */

#define LONG_RUN 16    /* a token run this long sends the text to the Python gate */
#define MAX_KEY_SEPARATORS 64

typedef struct {
    unsigned flags;
    Py_ssize_t digits;
    int long_run;
} Facts;

static unsigned char CLASS[256];

static void
init_classes(void)
{
    for (int c = 0; c < 256; c++) {
        unsigned t = 0;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-')
            t |= F_TOKEN;
        if (c >= '0' && c <= '9')
            t |= F_DIGIT;
        if (c == '=')
            t |= F_EQ;
        if (c == ':')
            t |= F_COLON;
        if (c == '@')
            t |= F_AT;
        if (c == '/' || c == '+')
            t |= F_SLASHPLUS;
        if (c == '\\' || (c < 0x20 && c != '\n'))
            t |= F_ESC;
        CLASS[c] = (unsigned char)t;
    }
}

#ifdef NG_SSE2
/* per byte: lo <= v <= lo + span - 1 (unsigned), by one add and one signed compare */
static inline __m128i
in_range(__m128i v, unsigned char lo, unsigned char span)
{
    __m128i shifted = _mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - lo)));
    return _mm_cmplt_epi8(shifted, _mm_set1_epi8((char)(0x80 + span)));
}

static inline int
popcount64(unsigned long long x)
{
    return __builtin_popcountll(x);
}

/* 1 when a run of LONG_RUN ones lies in ``m`` (bit i: byte i), taking ``*run`` ones before bit 0
 * into account; ``*run`` becomes the ones at the top of ``m`` (carried to the next block) */
static inline int
run_in_block(unsigned long long m, size_t *run)
{
    if (m == ~0ULL) {
        *run += 64;
        return *run >= LONG_RUN;
    }
    unsigned long long inv = ~m;
    size_t low = (size_t)__builtin_ctzll(inv); /* ones at the bottom: continue the carried run */
    if (*run + low >= LONG_RUN)
        return 1;
    unsigned long long x = m & (m >> 1);
    x &= x >> 2;
    x &= x >> 4;
    x &= x >> 8; /* bit i: bits i..i+15 of m all set */
    if (x)
        return 1;
    *run = (size_t)__builtin_clzll(inv); /* ones at the top */
    return 0;
}

static void
scan(const unsigned char *s, Py_ssize_t n, Facts *f)
{
    const __m128i k20 = _mm_set1_epi8(0x20), us = _mm_set1_epi8('_'), dash = _mm_set1_epi8('-');
    const __m128i eq = _mm_set1_epi8('='), colon = _mm_set1_epi8(':'), at = _mm_set1_epi8('@');
    const __m128i slash = _mm_set1_epi8('/'), plus = _mm_set1_epi8('+');
    const __m128i bs = _mm_set1_epi8('\\'), nl = _mm_set1_epi8('\n');
    __m128i acc_eq = _mm_setzero_si128(), acc_colon = acc_eq, acc_at = acc_eq, acc_sp = acc_eq;
    __m128i acc_esc = acc_eq;
    size_t run = 0;
    Py_ssize_t digits = 0;
    /* the last partial block is scanned from a copy padded with blanks (no class, no flag) */
    unsigned char tail[64];
    Py_ssize_t whole = n - n % 64;
    for (Py_ssize_t i = 0; i < n; i += 64) {
        const unsigned char *block = s + i;
        if (i == whole) {
            memset(tail, ' ', sizeof tail);
            memcpy(tail, s + i, (size_t)(n - i));
            block = tail;
        }
        unsigned long long tokens = 0, digit_bits = 0;
        for (int k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(block + 16 * k));
            __m128i letter = in_range(_mm_or_si128(v, k20), 'a', 26);
            __m128i digit = in_range(v, '0', 10);
            __m128i tok = _mm_or_si128(_mm_or_si128(letter, digit),
                                       _mm_or_si128(_mm_cmpeq_epi8(v, us), _mm_cmpeq_epi8(v, dash)));
            tokens |= (unsigned long long)(unsigned)_mm_movemask_epi8(tok) << (16 * k);
            digit_bits |= (unsigned long long)(unsigned)_mm_movemask_epi8(digit) << (16 * k);
            acc_eq = _mm_or_si128(acc_eq, _mm_cmpeq_epi8(v, eq));
            acc_colon = _mm_or_si128(acc_colon, _mm_cmpeq_epi8(v, colon));
            acc_at = _mm_or_si128(acc_at, _mm_cmpeq_epi8(v, at));
            acc_sp = _mm_or_si128(acc_sp, _mm_or_si128(_mm_cmpeq_epi8(v, slash),
                                                       _mm_cmpeq_epi8(v, plus)));
            /* backslash, or a control byte (< 0x20) other than newline */
            __m128i ctl = _mm_andnot_si128(_mm_cmpeq_epi8(v, nl), in_range(v, 0, 0x20));
            acc_esc = _mm_or_si128(acc_esc, _mm_or_si128(ctl, _mm_cmpeq_epi8(v, bs)));
        }
        digits += popcount64(digit_bits);
        if (run_in_block(tokens, &run)) {
            f->long_run = 1;
            return; /* the Python gate decides: the other facts do not matter */
        }
    }
    unsigned flags = 0;
    flags |= _mm_movemask_epi8(acc_eq) ? F_EQ : 0;
    flags |= _mm_movemask_epi8(acc_colon) ? F_COLON : 0;
    flags |= _mm_movemask_epi8(acc_at) ? F_AT : 0;
    flags |= _mm_movemask_epi8(acc_sp) ? F_SLASHPLUS : 0;
    flags |= _mm_movemask_epi8(acc_esc) ? F_ESC : 0;
    f->flags |= flags;
    f->digits += digits;
}
#else
/* the portable loop (no SSE2) */
static void
scan(const unsigned char *s, Py_ssize_t n, Facts *f)
{
    size_t run = 0;
    unsigned flags = 0;
    size_t digits = 0, long_run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned t = CLASS[s[i]];
        flags |= t;
        run = (run + 1) & (0 - (size_t)((t & F_TOKEN) != 0));
        long_run |= run >= LONG_RUN;
        digits += (t & F_DIGIT) != 0;
    }
    f->flags |= flags & (F_EQ | F_COLON | F_AT | F_ESC | F_SLASHPLUS);
    f->digits += (Py_ssize_t)digits;
    f->long_run |= long_run != 0;
}

#endif

/* Trigger literals, searched in groups: literals of one length whose first and last bytes are
 * equal but for letter case (``assword`` / ``ASSWORD``) share one pass that compares each
 * position's first and last byte with 0x20 set; candidates are compared with every literal of
 * the group exactly. (A byte equal to the literal's is equal with 0x20 set too: nothing found by
 * an exact search is missed.) */
#define MAX_GROUPS 16
#define MAX_IN_GROUP 8

typedef struct {
    unsigned char first, last; /* with 0x20 set */
    Py_ssize_t size;
    int count;
    const unsigned char *lits[MAX_IN_GROUP];
} Group;

static int
candidate_matches(const unsigned char *p, const Group *g)
{
    for (int k = 0; k < g->count; k++)
        if (memcmp(p, g->lits[k], (size_t)g->size) == 0)
            return 1;
    return 0;
}

/* whether a literal of ``g`` occurs in s[0:n] */
static int
contains(const unsigned char *s, Py_ssize_t n, const Group *g)
{
    Py_ssize_t m = g->size, i = 0;
    if (m > n)
        return 0;
#ifdef NG_SSE2
    const __m128i k20 = _mm_set1_epi8(0x20);
    const __m128i first = _mm_set1_epi8((char)g->first), last = _mm_set1_epi8((char)g->last);
    for (; i + m - 1 + 16 <= n; i += 16) {
        __m128i a = _mm_or_si128(_mm_loadu_si128((const __m128i *)(s + i)), k20);
        __m128i b = _mm_or_si128(_mm_loadu_si128((const __m128i *)(s + i + m - 1)), k20);
        unsigned mask = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last)));
        while (mask) {
            if (candidate_matches(s + i + __builtin_ctz(mask), g))
                return 1;
            mask &= mask - 1;
        }
    }
#endif
    for (; i + m <= n; i++)
        if ((s[i] | 0x20) == g->first && (s[i + m - 1] | 0x20) == g->last &&
            candidate_matches(s + i, g))
            return 1;
    return 0;
}

/* the groups of ``literals`` (a tuple of non-empty bytes without a newline); -1 when they do
 * not fit or one is not such bytes (the Python gate decides then) */
static int
group_literals(PyObject *literals, Group *groups)
{
    int n = 0;
    if (!PyTuple_Check(literals))
        return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(literals); k++) {
        PyObject *lit = PyTuple_GET_ITEM(literals, k);
        if (!PyBytes_Check(lit) || PyBytes_GET_SIZE(lit) == 0)
            return -1;
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(lit);
        Py_ssize_t m = PyBytes_GET_SIZE(lit);
        if (memchr(b, '\n', (size_t)m) != NULL)
            return -1; /* a literal across two joined texts: only the Python gate sees it */
        unsigned char first = b[0] | 0x20, last = b[m - 1] | 0x20;
        int g = 0;
        while (g < n && !(groups[g].first == first && groups[g].last == last &&
                          groups[g].size == m && groups[g].count < MAX_IN_GROUP))
            g++;
        if (g == n) {
            if (n == MAX_GROUPS)
                return -1;
            groups[n].first = first;
            groups[n].last = last;
            groups[n].size = m;
            groups[n].count = 0;
            n++;
        }
        groups[g].lits[groups[g].count++] = b;
    }
    return n;
}

/* -1: a key window precedes a separator of ``mask`` in s (or too many separators); else 0 */
static int
key_before_separator(const unsigned char *s, Py_ssize_t n, int mask, PyObject *windows,
                     int *budget)
{
    static const unsigned char seps[2] = {'=', ':'};
    for (int k = 0; k < 2; k++) {
        if (!(mask & (1 << k)))
            continue;
        const unsigned char *p = s, *end = s + n;
        while (p < end && (p = memchr(p, seps[k], (size_t)(end - p))) != NULL) {
            Py_ssize_t i = p - s;
            p++;
            if (--*budget < 0)
                return -1;
            /* a window is 3 bytes of a key's end and the quotes / blanks after it: one reaching
             * back over the newline that joins two texts never matches, as in the Python gate */
            if (i < 3)
                continue;
            PyObject *w = PyBytes_FromStringAndSize((const char *)s + i - 3, 3);
            if (w == NULL)
                return -2;
            int hit = PySet_Contains(windows, w);
            Py_DECREF(w);
            if (hit != 0)
                return hit < 0 ? -2 : -1;
        }
    }
    return 0;
}

typedef struct {
    const unsigned char *data;
    Py_ssize_t size;
    PyObject *owner; /* a UTF-8 copy for a non-ASCII text (NULL: the str's own ASCII data) */
} Text;

static void
release(Text *texts, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(texts[i].owner);
}

static PyObject *
lean(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "lean(texts, plans, keyed, windows)");
        return NULL;
    }
    PyObject *seq = args[0], *plans = args[1], *windows = args[3];
    long keyed = PyLong_AsLong(args[2]);
    if (keyed == -1 && PyErr_Occurred())
        return NULL;
    if (!PyList_Check(seq) || !PyTuple_Check(plans) || PyTuple_GET_SIZE(plans) != 16 ||
        !PyFrozenSet_Check(windows)) {
        PyErr_SetString(PyExc_TypeError, "lean: a list, 16 plans, an int and a frozenset");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(seq);
    Text local[8];
    Text *texts = count <= 8 ? local : PyMem_Malloc(sizeof(Text) * (size_t)count);
    if (texts == NULL)
        return PyErr_NoMemory();
    Py_ssize_t ready = 0;
    long verdict = -1;
    Facts f = {0, 0, 0};
    for (; ready < count; ready++) {
        PyObject *text = PyList_GET_ITEM(seq, ready);
        Text *t = &texts[ready];
        t->owner = NULL;
        if (!PyUnicode_Check(text))
            goto done; /* not a str: the Python gate decides */
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(text) < 0) { /* a legacy string (deprecated C API): never in practice */
            PyErr_Clear();
            goto done;
        }
#endif
        if (PyUnicode_IS_ASCII(text)) {
            t->data = (const unsigned char *)PyUnicode_DATA(text);
            t->size = PyUnicode_GET_LENGTH(text);
        } else {
            /* a copy, not PyUnicode_AsUTF8 (that would keep one inside the app's string) */
            t->owner = PyUnicode_AsUTF8String(text);
            if (t->owner == NULL) {
                PyErr_Clear(); /* a lone surrogate: the Python gate's encode fails the same way */
                verdict = 0;
                goto done;
            }
            t->data = (const unsigned char *)PyBytes_AS_STRING(t->owner);
            t->size = PyBytes_GET_SIZE(t->owner);
        }
        scan(t->data, t->size, &f);
        if (f.long_run) {
            ready++;
            goto done;
        }
    }
    {
        int mask = (f.flags & F_EQ ? 1 : 0) | (f.flags & F_COLON ? 2 : 0) | (f.flags & F_AT ? 4 : 0);
        int shape = mask << 1;
        PyObject *plan = PyTuple_GET_ITEM(plans, shape);
        if (plan == Py_None || !PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != 3)
            goto done;
        if (((keyed >> shape) & 1) && (mask & 3)) {
            int budget = MAX_KEY_SEPARATORS;
            for (Py_ssize_t i = 0; i < count; i++) {
                int r = key_before_separator(texts[i].data, texts[i].size, mask, windows, &budget);
                if (r == -2) {
                    release(texts, ready);
                    if (texts != local)
                        PyMem_Free(texts);
                    return NULL;
                }
                if (r < 0)
                    goto done;
            }
        }
        Group groups[MAX_GROUPS];
        int ngroups = group_literals(PyTuple_GET_ITEM(plan, 0), groups);
        if (ngroups < 0)
            goto done;
        for (int g = 0; g < ngroups; g++)
            for (Py_ssize_t i = 0; i < count; i++)
                if (contains(texts[i].data, texts[i].size, &groups[g]))
                    goto done;
        if (PyTuple_GET_ITEM(plan, 1) == Py_True && (f.flags & F_SLASHPLUS))
            goto done;
        long need = PyLong_AsLong(PyTuple_GET_ITEM(plan, 2));
        if (need == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
        if (need > 0 && f.digits >= need)
            goto done;
        verdict = (f.flags & F_ESC) ? 1 : 3;
    }
done:
    release(texts, ready);
    if (texts != local)
        PyMem_Free(texts);
    return PyLong_FromLong(verdict);
}

static PyMethodDef methods[] = {
    {"lean", (PyCFunction)(void (*)(void))lean, METH_FASTCALL,
     "lean(texts, plans, keyed, windows) -> 3 / 1 (clean), 0 (not UTF-8), -1 (the Python gate "
     "decides)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_gate",
    "The secret gate's common case in one pass (optional speed-up of nexagauge.sdk.scrubbing).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__gate(void)
{
    init_classes();
    return PyModule_Create(&module);
}
