/* The fast mode's elimination (elimination.py's Elimination and gauss) in C.
 *
 * The same mathematics as the Python reference in elimination.py: a sparse basis of the
 * additive tables that are 0 on every published cell; rows are cells, columns basis tables.
 * Publishing cell c keeps the combinations that are 0 at c (one pivot on the sparsest column
 * of c's row); c reveals a guarded cell p when their rows are proportional.  Only the storage
 * differs, which is where the Python version spent its time and memory (about 250 bytes and
 * a microsecond per entry):
 *
 *   - a column is a sorted array of (row, value): 12 bytes an entry; a pivot merges two sorted
 *     columns in one pass;
 *   - a row is an unsorted list of column ids, 4 bytes an entry, kept lazily: a cancellation
 *     leaves a stale id behind, and a row is cleaned (stale ids and repeats dropped, by a
 *     binary search in each column) when it is read or has doubled since it was last cleaned.
 *
 * The decisions are those of the reference: the rank rule's depend on the space the basis
 * spans, not on the basis, and the sign test's on the tags, which both pivot alike (the sparsest
 * real column, the lowest id among equals); tests/properties compare both on random tables.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-9

typedef struct {
    int32_t *row;
    double *val;
    int32_t n, cap;
} Col;

typedef struct {
    int32_t *col;
    int32_t n, cap, clean; /* clean: length after the last cleaning */
} Row;

typedef struct {
    int32_t n_rows, n_cols;
    int32_t n_real;     /* columns from n_real on are tags: never pivots, never make a row undetermined */
    Col *cols;
    Row *rows;
    int64_t entries;    /* live entries of the columns */
    int64_t peak;       /* most live entries so far */
    int64_t row_slots;  /* allocated row ids (stale ones included) */
    int32_t *mark;      /* per column: scratch, -1 when unused */
    int32_t *mark2;     /* per column: a second scratch (reveals: the row compared), -1 when unused */
    double *scratch_v;  /* per column: scratch values */
    int32_t *buf_c;     /* scratch: a row's columns */
    double *buf_v;      /* scratch: a row's values */
    int32_t *buf2_c;
    double *buf2_v;
    int32_t *tmp_row;   /* merge output */
    double *tmp_val;
    int32_t tmp_cap;
    int bad;            /* an allocation failed while building */
} Elim;

static int grow_col(Col *c, int32_t need) {
    if (need <= c->cap) return 0;
    int32_t cap = c->cap ? c->cap : 4;
    while (cap < need) cap = cap + cap / 2 + 4;
    int32_t *r = realloc(c->row, sizeof(int32_t) * (size_t)cap);
    if (!r) return -1;
    c->row = r;
    double *v = realloc(c->val, sizeof(double) * (size_t)cap);
    if (!v) return -1;
    c->val = v;
    c->cap = cap;
    return 0;
}

static int row_push(Elim *e, int32_t r, int32_t m) {
    Row *w = &e->rows[r];
    if (w->n == w->cap) {
        int32_t cap = w->cap ? w->cap * 2 : 4;
        int32_t *p = realloc(w->col, sizeof(int32_t) * (size_t)cap);
        if (!p) return -1;
        e->row_slots += cap - w->cap;
        w->col = p;
        w->cap = cap;
    }
    w->col[w->n++] = m;
    return 0;
}

/* position of row r in column m, or -1 */
static int32_t find(const Col *c, int32_t r) {
    int32_t lo = 0, hi = c->n;
    while (lo < hi) {
        int32_t mid = (lo + hi) >> 1;
        if (c->row[mid] < r) lo = mid + 1; else hi = mid;
    }
    return (lo < c->n && c->row[lo] == r) ? lo : -1;
}

/* Clean row r: keep each live column once; its values into out_v (if not NULL). */
static int32_t clean_row(Elim *e, int32_t r, double *out_v) {
    Row *w = &e->rows[r];
    int32_t k = 0;
    for (int32_t i = 0; i < w->n; i++) {
        int32_t m = w->col[i];
        if (e->mark[m] == r) continue; /* a repeat */
        Col *c = &e->cols[m];
        if (c->n == 0) continue;
        int32_t at = find(c, r);
        if (at < 0) continue; /* stale: cancelled since */
        e->mark[m] = r;
        w->col[k] = m;
        if (out_v) out_v[k] = c->val[at];
        k++;
    }
    for (int32_t i = 0; i < k; i++) e->mark[w->col[i]] = -1;
    w->n = k;
    w->clean = k;
    return k;
}

/* The basis of n_real columns (CSC), restricted to the tracked rows, then one tag column per
 * tagged row that has an entry: 1 in that row (elimination.py, Elimination's tags). */
static Elim *elim_new(int32_t n_rows, int32_t n_real, const int64_t *indptr, const int32_t *indices,
                      const double *data, const uint8_t *tracked, const int64_t *tagged, int32_t n_tagged) {
    Elim *e = calloc(1, sizeof(Elim));
    if (!e) return NULL;
    int32_t n_cols = n_real + n_tagged;
    e->n_rows = n_rows;
    e->n_cols = n_cols;
    e->n_real = n_real;
    e->cols = calloc((size_t)n_cols + 1, sizeof(Col));
    e->rows = calloc((size_t)n_rows + 1, sizeof(Row));
    e->mark = malloc(sizeof(int32_t) * ((size_t)n_cols + 1));
    e->mark2 = malloc(sizeof(int32_t) * ((size_t)n_cols + 1));
    e->scratch_v = malloc(sizeof(double) * ((size_t)n_cols + 1));
    e->buf_c = malloc(sizeof(int32_t) * ((size_t)n_cols + 1));
    e->buf_v = malloc(sizeof(double) * ((size_t)n_cols + 1));
    e->buf2_c = malloc(sizeof(int32_t) * ((size_t)n_cols + 1));
    e->buf2_v = malloc(sizeof(double) * ((size_t)n_cols + 1));
    if (!e->cols || !e->rows || !e->mark || !e->mark2 || !e->scratch_v || !e->buf_c || !e->buf_v || !e->buf2_c || !e->buf2_v)
        return e; /* the caller checks and frees */
    for (int32_t m = 0; m < n_cols; m++) e->mark[m] = e->mark2[m] = -1;
    for (int32_t m = 0; m < n_real; m++) {
        Col *c = &e->cols[m];
        int32_t len = 0;
        for (int64_t i = indptr[m]; i < indptr[m + 1]; i++)
            if (tracked[indices[i]] && data[i] != 0.0) len++;
        if (!len) continue;
        if (grow_col(c, len) < 0) { e->bad = 1; return e; }
        for (int64_t i = indptr[m]; i < indptr[m + 1]; i++) {
            int32_t r = indices[i];
            if (!tracked[r] || data[i] == 0.0) continue;
            c->row[c->n] = r;
            c->val[c->n] = data[i];
            c->n++;
            if (row_push(e, r, m) < 0) { e->bad = 1; return e; }
        }
        e->entries += c->n;
    }
    for (int32_t i = 0; i < n_tagged; i++) {
        int32_t r = (int32_t)tagged[i], m = n_real + i;
        if (e->rows[r].n == 0) continue; /* an untracked row, or one in no basis table */
        Col *c = &e->cols[m];
        if (grow_col(c, 1) < 0) { e->bad = 1; return e; }
        c->row[0] = r;
        c->val[0] = 1.0;
        c->n = 1;
        e->entries++;
        if (row_push(e, r, m) < 0) { e->bad = 1; return e; }
    }
    for (int32_t r = 0; r < n_rows; r++) e->rows[r].clean = e->rows[r].n;
    e->peak = e->entries;
    return e;
}

static void elim_free(Elim *e) {
    if (!e) return;
    if (e->cols) for (int32_t m = 0; m < e->n_cols; m++) { free(e->cols[m].row); free(e->cols[m].val); }
    if (e->rows) for (int32_t r = 0; r < e->n_rows; r++) free(e->rows[r].col);
    free(e->cols); free(e->rows); free(e->mark); free(e->mark2); free(e->scratch_v);
    free(e->buf_c); free(e->buf_v); free(e->buf2_c); free(e->buf2_v);
    free(e->tmp_row); free(e->tmp_val);
    free(e);
}

static int elim_ok(const Elim *e) {
    return e && !e->bad && e->cols && e->rows && e->mark && e->mark2 && e->scratch_v && e->buf_c && e->buf_v && e->buf2_c && e->buf2_v;
}

static int determined(Elim *e, int32_t c) {
    Row *w = &e->rows[c];
    if (w->n == 0) return 1;
    int32_t k = clean_row(e, c, NULL);
    for (int32_t i = 0; i < k; i++)
        if (w->col[i] < e->n_real) return 0;
    return 1;
}

/* The sign test of a cell whose real row is empty (elimination.py, gauss_reference): publish it
 * when its tags have both signs and none is in `used`, which then gets them. */
static int sign_test_publishes(Elim *e, int32_t c, uint8_t *used) {
    int32_t k = clean_row(e, c, e->buf_v);
    const int32_t *cols = e->rows[c].col;
    int pos = 0, neg = 0;
    for (int32_t i = 0; i < k; i++) {
        if (cols[i] < e->n_real) continue;
        if (used[cols[i] - e->n_real]) return 0;
        if (e->buf_v[i] > 0) pos = 1; else neg = 1;
    }
    if (!(pos && neg)) return 0;
    for (int32_t i = 0; i < k; i++)
        if (cols[i] >= e->n_real) used[cols[i] - e->n_real] = 1;
    return 1;
}

/* Forget cell c; its row (columns, values) into buf_c/buf_v; returns its length. */
static int32_t drop(Elim *e, int32_t c) {
    int32_t k = clean_row(e, c, e->buf_v);
    Row *w = &e->rows[c];
    memcpy(e->buf_c, w->col, sizeof(int32_t) * (size_t)k);
    for (int32_t i = 0; i < k; i++) {
        Col *col = &e->cols[w->col[i]];
        int32_t at = find(col, c);
        memmove(col->row + at, col->row + at + 1, sizeof(int32_t) * (size_t)(col->n - at - 1));
        memmove(col->val + at, col->val + at + 1, sizeof(double) * (size_t)(col->n - at - 1));
        col->n--;
        e->entries--;
    }
    free(w->col);
    e->row_slots -= w->cap;
    w->col = NULL;
    w->n = w->cap = w->clean = 0;
    return k;
}

static int ensure_tmp(Elim *e, int32_t need) {
    if (need <= e->tmp_cap) return 0;
    int32_t cap = need + need / 2 + 16;
    int32_t *r = realloc(e->tmp_row, sizeof(int32_t) * (size_t)cap);
    if (!r) return -1;
    e->tmp_row = r;
    double *v = realloc(e->tmp_val, sizeof(double) * (size_t)cap);
    if (!v) return -1;
    e->tmp_val = v;
    e->tmp_cap = cap;
    return 0;
}

/* Keep the combinations sum a_m col_m with sum a_m rc[m] = 0 (rc: k entries in cs/vs):
 * pivot on the sparsest column and subtract multiples of it from the others. */
static int restrict_(Elim *e, const int32_t *cs, const double *vs, int32_t k) {
    /* the sparsest real column, the lowest id among equals: the same pivots as the reference
     * whatever the order of the row's ids (the tags depend on the pivots) */
    int32_t piv = -1;
    for (int32_t i = 0; i < k; i++) {
        if (cs[i] >= e->n_real) continue;
        if (piv < 0 || e->cols[cs[i]].n < e->cols[cs[piv]].n
            || (e->cols[cs[i]].n == e->cols[cs[piv]].n && cs[i] < cs[piv])) piv = i;
    }
    if (piv < 0) return 0; /* tags only: a row already determined */
    int32_t kc = cs[piv];
    double a = vs[piv];
    Col ck = e->cols[kc]; /* taken out of the basis */
    e->cols[kc].row = NULL; e->cols[kc].val = NULL; e->cols[kc].n = e->cols[kc].cap = 0;
    e->entries -= ck.n;
    for (int32_t i = 0; i < k; i++) {
        if (i == piv) continue;
        int32_t m = cs[i];
        double f = vs[i] / a;
        Col *cm = &e->cols[m];
        if (ensure_tmp(e, cm->n + ck.n) < 0) return -1;
        int32_t p = 0, q = 0, o = 0;
        while (p < cm->n || q < ck.n) {
            int32_t r;
            double val;
            if (q >= ck.n || (p < cm->n && cm->row[p] < ck.row[q])) {
                r = cm->row[p]; val = cm->val[p]; p++;
            } else if (p >= cm->n || ck.row[q] < cm->row[p]) {
                r = ck.row[q]; val = -f * ck.val[q]; q++;
                if (fabs(val) <= TOL) continue;
                if (row_push(e, r, m) < 0) return -1; /* a new entry of row r */
            } else {
                r = cm->row[p]; val = cm->val[p] - f * ck.val[q]; p++; q++;
                if (fabs(val) <= TOL) continue; /* cancelled: row r's id of m goes stale */
            }
            e->tmp_row[o] = r; e->tmp_val[o] = val; o++;
        }
        e->entries += o - cm->n;
        if (grow_col(cm, o) < 0) return -1;
        memcpy(cm->row, e->tmp_row, sizeof(int32_t) * (size_t)o);
        memcpy(cm->val, e->tmp_val, sizeof(double) * (size_t)o);
        cm->n = o;
    }
    /* rows that grew much since they were cleaned: clean them now (stale ids would pile up) */
    for (int32_t q = 0; q < ck.n; q++) {
        Row *w = &e->rows[ck.row[q]];
        if (w->n > 2 * w->clean + 16) clean_row(e, ck.row[q], NULL);
    }
    free(ck.row);
    free(ck.val);
    if (e->entries > e->peak) e->peak = e->entries;
    return 0;
}

static int publish(Elim *e, int32_t c) {
    if (e->rows[c].n == 0) return 0;
    int32_t k = drop(e, c);
    if (!k) return 0;
    /* drop() wrote into buf_c/buf_v, which restrict_ may not reuse: copy */
    memcpy(e->buf2_c, e->buf_c, sizeof(int32_t) * (size_t)k);
    memcpy(e->buf2_v, e->buf_v, sizeof(double) * (size_t)k);
    return restrict_(e, e->buf2_c, e->buf2_v, k);
}

static int reveals(Elim *e, int32_t c, const uint8_t *guarded) {
    if (e->rows[c].n == 0) return 0;
    int32_t k = clean_row(e, c, e->buf_v);
    if (!k) return 0;
    Row *wc = &e->rows[c];
    int32_t piv = 0;
    for (int32_t i = 1; i < k; i++)
        if (e->cols[wc->col[i]].n < e->cols[wc->col[piv]].n) piv = i;
    for (int32_t i = 0; i < k; i++) { e->mark[wc->col[i]] = i; e->scratch_v[wc->col[i]] = e->buf_v[i]; }
    int result = 0;
    int32_t kc = wc->col[piv];
    double vck = e->buf_v[piv];
    Col *ck = &e->cols[kc];
    for (int32_t j = 0; j < ck->n && !result; j++) {
        int32_t p = ck->row[j];
        if (p == c || !guarded[p]) continue;
        Row *wp = &e->rows[p];
        if (wp->n < k) continue; /* a row only shrinks when cleaned: fewer ids, fewer columns */
        /* clean p's row without disturbing the marks of c's row: by hand */
        int32_t len = 0, ok = 1;
        double fac = ck->val[j] / vck;
        int32_t w = 0;
        for (int32_t i = 0; i < wp->n; i++) {
            int32_t m = wp->col[i];
            Col *cm = &e->cols[m];
            if (cm->n == 0) continue;
            int32_t at = find(cm, p);
            if (at < 0) continue;
            if (e->mark2[m] == p) continue; /* a repeat of an id already kept */
            e->mark2[m] = p;
            wp->col[w++] = m;
            len++;
            if (ok) {
                if (e->mark[m] < 0) ok = 0;
                else {
                    double vp = cm->val[at];
                    if (fabs(vp - fac * e->scratch_v[m]) > TOL * fmax(1.0, fabs(vp))) ok = 0;
                }
            }
        }
        for (int32_t i = 0; i < w; i++) e->mark2[wp->col[i]] = -1;
        wp->n = w;
        wp->clean = w;
        if (ok && len == k) result = 1;
    }
    for (int32_t i = 0; i < k; i++) e->mark[wc->col[i]] = -1;
    return result;
}

/* ------------------------------------------------------------------ Python binding */

static int tick(PyObject *cb, Py_ssize_t i, Py_ssize_t total, Py_ssize_t secondary, Elim *main, Elim *second) {
    if (cb == Py_None) return 0;
    long long entries = main->entries + (second ? second->entries : 0);
    long long peak = main->peak + (second ? second->peak : 0);
    PyObject *r = PyObject_CallFunction(cb, "nnnLL", i, total, secondary, entries, peak);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

#define GET_BUF(obj, view, fmt_size, name)                                                    \
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto fail;       \
    got_##view = 1;                                                                             \
    if (view.itemsize != fmt_size) {                                                            \
        PyErr_SetString(PyExc_TypeError, name " has the wrong item size");                     \
        goto fail;                                                                              \
    }

static PyObject *py_gauss(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n_rows, n_cols;
    PyObject *o_indptr, *o_indices, *o_data, *o_tracked, *o_primary, *o_atb, *o_forced, *o_order, *o_out, *cb;
    if (!PyArg_ParseTuple(args, "nnOOOOOOOOOO", &n_rows, &n_cols, &o_indptr, &o_indices, &o_data, &o_tracked,
                          &o_primary, &o_atb, &o_forced, &o_order, &o_out, &cb))
        return NULL;
    Py_buffer indptr, indices, data, tracked, primary, atb, forced, order, out;
    int got_indptr = 0, got_indices = 0, got_data = 0, got_tracked = 0, got_primary = 0, got_atb = 0,
        got_forced = 0, got_order = 0, got_out = 0;
    Elim *main = NULL, *second = NULL;
    uint8_t *used = NULL; /* per tag: in a combination the sign test let through */
    PyObject *ret = NULL;
    int err = 0;
    if (n_rows >= INT32_MAX || n_cols >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many cells or basis tables for 32-bit ids");
        return NULL;
    }
    GET_BUF(o_indptr, indptr, 8, "indptr");
    GET_BUF(o_indices, indices, 4, "indices");
    GET_BUF(o_data, data, 8, "data");
    GET_BUF(o_tracked, tracked, 1, "tracked");
    GET_BUF(o_primary, primary, 1, "primary");
    GET_BUF(o_forced, forced, 8, "forced");
    GET_BUF(o_order, order, 8, "order");
    if (PyObject_GetBuffer(o_out, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto fail;
    got_out = 1;
    int has_atb = o_atb != Py_None;
    if (has_atb) { GET_BUF(o_atb, atb, 8, "at_bound"); }
    {
        const int64_t *ip = indptr.buf;
        const int32_t *ix = indices.buf;
        const double *dv = data.buf;
        const uint8_t *tr = tracked.buf;
        const uint8_t *pr = primary.buf;
        uint8_t *sec = out.buf;
        Py_ssize_t n_forced = forced.len / 8, n_order = order.len / 8;
        const int64_t *fo = forced.buf, *od = order.buf;
        main = elim_new((int32_t)n_rows, (int32_t)n_cols, ip, ix, dv, tr, NULL, 0);
        if (!elim_ok(main)) { PyErr_NoMemory(); goto fail; }
        if (has_atb) {
            second = elim_new((int32_t)n_rows, (int32_t)n_cols, ip, ix, dv, tr, atb.buf, (int32_t)(atb.len / 8));
            used = calloc((size_t)(atb.len / 8) + 1, 1);
            if (!elim_ok(second) || !used) { PyErr_NoMemory(); goto fail; }
            const int64_t *ab = atb.buf;
            for (Py_ssize_t i = 0; i < atb.len / 8; i++) {
                if (i % 64 == 0 && tick(cb, -1, n_order, 0, main, second) < 0) goto fail;
                if (publish(second, (int32_t)ab[i]) < 0) { PyErr_NoMemory(); goto fail; }
            }
        }
        for (Py_ssize_t i = 0; i < n_forced; i++) {
            if (i % 64 == 0 && tick(cb, -1, n_order, 0, main, second) < 0) goto fail;
            int32_t c = (int32_t)fo[i];
            if (publish(main, c) < 0) err = 1;
            if (second && publish(second, c) < 0) err = 1;
            if (err) { PyErr_NoMemory(); goto fail; }
        }
        Py_ssize_t n_sec = 0;
        for (Py_ssize_t i = 0; i < n_order; i++) {
            if (i % 64 == 0 && tick(cb, i, n_order, n_sec, main, second) < 0) goto fail;
            int32_t c = (int32_t)od[i];
            int hide = reveals(main, c, pr);
            /* a cell fixed by the published ones and the primary cells at their bound, and not by
             * the published ones alone: the sign test (elimination.py, gauss_reference) */
            if (!hide && second && determined(second, c) && !determined(main, c))
                hide = !sign_test_publishes(second, c, used);
            if (hide) {
                sec[c] = 1;
                n_sec++;
                drop(main, c);
                if (second) drop(second, c);
            } else {
                if (publish(main, c) < 0) err = 1;
                if (second && publish(second, c) < 0) err = 1;
                if (err) { PyErr_NoMemory(); goto fail; }
            }
        }
        if (tick(cb, n_order, n_order, n_sec, main, second) < 0) goto fail;
        ret = Py_BuildValue("LL", (long long)(main->peak + (second ? second->peak : 0)),
                            (long long)(main->row_slots + (second ? second->row_slots : 0)));
    }
fail:
    elim_free(main);
    elim_free(second);
    free(used);
    if (got_indptr) PyBuffer_Release(&indptr);
    if (got_indices) PyBuffer_Release(&indices);
    if (got_data) PyBuffer_Release(&data);
    if (got_tracked) PyBuffer_Release(&tracked);
    if (got_primary) PyBuffer_Release(&primary);
    if (got_atb) PyBuffer_Release(&atb);
    if (got_forced) PyBuffer_Release(&forced);
    if (got_order) PyBuffer_Release(&order);
    if (got_out) PyBuffer_Release(&out);
    return ret;
}

static PyMethodDef methods[] = {
    {"gauss", py_gauss, METH_VARARGS,
     "gauss(n_rows, n_cols, indptr, indices, data, tracked, primary, at_bound, forced, order, out, tick)\n"
     "The greedy elimination of elimination.gauss over a CSC basis; marks hidden candidates in out.\n"
     "Returns (peak basis entries, row slots at the end)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gauss", NULL, -1, methods};

PyMODINIT_FUNC PyInit__gauss(void) { return PyModule_Create(&module); }
