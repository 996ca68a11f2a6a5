/* The two passes over the records that split the differencing record's regions by one new
 * population (population.py, Record.split and Record._split_by_outside), in C.
 *
 * A record's region is alias[labels[i]].  Splitting by one population needs, per region, how
 * many of the population's records (or of the records outside it) fall there, and then, for the
 * records of the regions it cuts, their new labels.  numpy did each of these as several
 * whole-array steps (the records' indices, two gathers, a bincount, a lookup, a filter), each
 * allocating an array as long as the population: most of the recorder's time on a population
 * of most records.  Here each is one pass over the mask, with no array of records until the
 * records that move are known.  The Python reference in population.py makes the same split; a
 * property test compares both.
 *
 * The records scanned are those of ``mask`` (``invert``: those outside it) within ``spans``, a
 * flat array of [start, end) pairs; an empty ``spans`` means every record.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GET_BUF(obj, view, itemsize, name)                                                     \
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0) goto fail;                      \
    got_##view = 1;                                                                             \
    if (view.len % (itemsize) != 0) {                                                           \
        PyErr_SetString(PyExc_TypeError, name " has the wrong item size");                     \
        goto fail;                                                                              \
    }

/* Checks shared by both passes: the spans lie within the records, the labels within alias. */
static int check_spans(const int64_t *sp, Py_ssize_t n_spans, Py_ssize_t n) {
    for (Py_ssize_t k = 0; k < n_spans; k++) {
        if (sp[2 * k] < 0 || sp[2 * k + 1] > n || sp[2 * k] > sp[2 * k + 1]) {
            PyErr_SetString(PyExc_ValueError, "a span lies outside the records");
            return -1;
        }
    }
    return 0;
}

/* Every label's region lies within the regions (checked once, not per record). */
static int check_alias(const int64_t *al, Py_ssize_t n_alias, Py_ssize_t n_regions) {
    for (Py_ssize_t l = 0; l < n_alias; l++) {
        if (al[l] < 0 || al[l] >= n_regions) {
            PyErr_SetString(PyExc_ValueError, "a label names no region");
            return -1;
        }
    }
    return 0;
}

#define BAD_LABEL                                                                               \
    PyErr_SetString(PyExc_ValueError, "a record's label is not a label");                     \
    goto fail

static PyObject *py_tally(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_labels, *o_alias, *o_mask, *o_spans, *o_counts;
    int invert;
    if (!PyArg_ParseTuple(args, "OOOOpO", &o_labels, &o_alias, &o_mask, &o_spans, &invert, &o_counts)) return NULL;
    Py_buffer labels, alias, mask, spans, counts;
    int got_labels = 0, got_alias = 0, got_mask = 0, got_spans = 0, got_counts = 0;
    PyObject *ret = NULL;
    GET_BUF(o_labels, labels, 4, "labels");
    GET_BUF(o_alias, alias, 8, "alias");
    GET_BUF(o_mask, mask, 1, "mask");
    GET_BUF(o_spans, spans, 16, "spans");
    if (PyObject_GetBuffer(o_counts, &counts, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto fail;
    got_counts = 1;
    {
        const int32_t *lb = labels.buf;
        const int64_t *al = alias.buf, *sp = spans.buf;
        const uint8_t *mk = mask.buf;
        int64_t *ct = counts.buf;
        Py_ssize_t n = labels.len / 4, n_alias = alias.len / 8, n_regions = counts.len / 8;
        Py_ssize_t n_spans = spans.len / 16, total = 0;
        int64_t whole[2] = {0, (int64_t)n};
        uint8_t want = invert ? 0 : 1;
        if (mask.len != n) { PyErr_SetString(PyExc_ValueError, "mask and labels differ in length"); goto fail; }
        if (check_spans(sp, n_spans, n) < 0) goto fail;
        if (n_spans == 0) { sp = whole; n_spans = 1; }
        if (check_alias(al, n_alias, n_regions) < 0) goto fail;
        for (Py_ssize_t k = 0; k < n_spans; k++) {
            for (int64_t i = sp[2 * k]; i < sp[2 * k + 1]; i++) {
                int32_t l = lb[i];
                if ((uint32_t)l >= (uint32_t)n_alias) { BAD_LABEL; }
                /* no branch on the mask: a filter's records alternate unpredictably */
                int64_t in = (mk[i] != 0) == want;
                ct[al[l]] += in;
                total += in;
            }
        }
        ret = PyLong_FromSsize_t(total);
    }
fail:
    if (got_labels) PyBuffer_Release(&labels);
    if (got_alias) PyBuffer_Release(&alias);
    if (got_mask) PyBuffer_Release(&mask);
    if (got_spans) PyBuffer_Release(&spans);
    if (got_counts) PyBuffer_Release(&counts);
    return ret;
}

static PyObject *py_moves(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_labels, *o_alias, *o_mask, *o_spans, *o_number, *o_records, *o_new;
    int invert;
    long long base;
    if (!PyArg_ParseTuple(args, "OOOOpOLOO", &o_labels, &o_alias, &o_mask, &o_spans, &invert, &o_number, &base,
                          &o_records, &o_new))
        return NULL;
    Py_buffer labels, alias, mask, spans, number, records, fresh;
    int got_labels = 0, got_alias = 0, got_mask = 0, got_spans = 0, got_number = 0, got_records = 0, got_fresh = 0;
    PyObject *ret = NULL;
    GET_BUF(o_labels, labels, 4, "labels");
    GET_BUF(o_alias, alias, 8, "alias");
    GET_BUF(o_mask, mask, 1, "mask");
    GET_BUF(o_spans, spans, 16, "spans");
    GET_BUF(o_number, number, 8, "number");
    if (PyObject_GetBuffer(o_records, &records, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto fail;
    got_records = 1;
    if (PyObject_GetBuffer(o_new, &fresh, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto fail;
    got_fresh = 1;
    {
        const int32_t *lb = labels.buf;
        const int64_t *al = alias.buf, *sp = spans.buf, *nb = number.buf;
        const uint8_t *mk = mask.buf;
        int64_t *rec = records.buf;
        int32_t *nl = fresh.buf;
        Py_ssize_t n = labels.len / 4, n_alias = alias.len / 8, n_regions = number.len / 8;
        Py_ssize_t n_spans = spans.len / 16, cap = records.len / 8, m = 0;
        int64_t whole[2] = {0, (int64_t)n};
        uint8_t want = invert ? 0 : 1;
        if (mask.len != n || fresh.len / 4 != cap) {
            PyErr_SetString(PyExc_ValueError, "mask, labels and outputs differ in length");
            goto fail;
        }
        if (check_spans(sp, n_spans, n) < 0) goto fail;
        if (n_spans == 0) { sp = whole; n_spans = 1; }
        if (check_alias(al, n_alias, n_regions) < 0) goto fail;
        int64_t top = -1; /* the largest number: new labels must fit in 32 bits */
        for (Py_ssize_t r = 0; r < n_regions; r++) top = nb[r] > top ? nb[r] : top;
        if (base + top > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a new label past 32 bits");
            goto fail;
        }
        /* the outputs hold one slot more than the records expected: each record is written at
         * slot m, which advances only when it moves (no branch on the mask) */
        for (Py_ssize_t k = 0; k < n_spans; k++) {
            for (int64_t i = sp[2 * k]; i < sp[2 * k + 1]; i++) {
                int32_t l = lb[i];
                if ((uint32_t)l >= (uint32_t)n_alias) { BAD_LABEL; }
                int64_t to = nb[al[l]];
                rec[m] = i;
                nl[m] = (int32_t)(base + to);
                m += ((mk[i] != 0) == want) & (to >= 0);
                if (m >= cap) {
                    PyErr_SetString(PyExc_ValueError, "more records move than were counted");
                    goto fail;
                }
            }
        }
        ret = PyLong_FromSsize_t(m);
    }
fail:
    if (got_labels) PyBuffer_Release(&labels);
    if (got_alias) PyBuffer_Release(&alias);
    if (got_mask) PyBuffer_Release(&mask);
    if (got_spans) PyBuffer_Release(&spans);
    if (got_number) PyBuffer_Release(&number);
    if (got_records) PyBuffer_Release(&records);
    if (got_fresh) PyBuffer_Release(&fresh);
    return ret;
}


/* ------------------------------------------------------------------------------------------
 * The reduced row-echelon basis modulo PRIME of population.py (class Basis), in C.
 *
 * The same operations as population.py's numpy reference (BasisReference): rows are sparse,
 * their columns ascending; each column keeps the rows with an entry in it (unordered), so that
 * the rows a column copy or a pivot touches are found without a scan.  Entries lie in
 * [0, PRIME); products stay below 2**42.
 */
#define PRIME 2097143LL

typedef struct {
    int32_t *col;
    int64_t *val;
    int32_t n, cap;
} BRow;

typedef struct {
    int32_t *row;
    int32_t n, cap;
} BCol;

typedef struct {
    BRow *rows;
    BCol *cols;
    int32_t *pivots;
    int32_t n_rows, cap_rows, n_cols, cap_cols;
} Basis;

static int64_t modp(int64_t x) {
    x %= PRIME;
    return x < 0 ? x + PRIME : x;
}

static int grow(void **p, int32_t *cap, int32_t need, size_t item) {
    if (need <= *cap) return 0;
    int32_t c = *cap ? *cap : 4;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * item);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int col_add(BCol *c, int32_t r) {
    if (grow((void **)&c->row, &c->cap, c->n + 1, sizeof(int32_t)) < 0) return -1;
    c->row[c->n++] = r;
    return 0;
}

static void col_remove(BCol *c, int32_t r) {
    for (int32_t k = 0; k < c->n; k++)
        if (c->row[k] == r) {
            c->row[k] = c->row[--c->n];
            return;
        }
}

static int row_push(BRow *r, int32_t col, int64_t val) {
    if (r->n >= r->cap) {
        int32_t c = r->cap ? 2 * r->cap : 4;
        int32_t *a = realloc(r->col, (size_t)c * sizeof(int32_t));
        if (!a) return -1;
        r->col = a;
        int64_t *b = realloc(r->val, (size_t)c * sizeof(int64_t));
        if (!b) return -1;
        r->val = b;
        r->cap = c;
    }
    r->col[r->n] = col;
    r->val[r->n] = val;
    r->n++;
    return 0;
}

static int64_t row_at(const BRow *r, int32_t col) {
    int32_t lo = 0, hi = r->n;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (r->col[mid] < col) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->n && r->col[lo] == col ? r->val[lo] : 0;
}

static void basis_free(Basis *b) {
    if (!b) return;
    for (int32_t i = 0; i < b->n_rows; i++) {
        free(b->rows[i].col);
        free(b->rows[i].val);
    }
    for (int32_t j = 0; j < b->n_cols; j++) free(b->cols[j].row);
    free(b->rows);
    free(b->cols);
    free(b->pivots);
    free(b);
}

static void capsule_free(PyObject *cap) { basis_free(PyCapsule_GetPointer(cap, "tabsafe.basis")); }

static Basis *get_basis(PyObject *cap) { return PyCapsule_GetPointer(cap, "tabsafe.basis"); }

static int add_cols(Basis *b, int32_t k) {
    int32_t cap = b->cap_cols;
    if (grow((void **)&b->cols, &b->cap_cols, b->n_cols + k, sizeof(BCol)) < 0) return -1;
    if (b->cap_cols > cap) memset(b->cols + cap, 0, (size_t)(b->cap_cols - cap) * sizeof(BCol));
    return 0;
}

static PyObject *wrap(Basis *b) {
    PyObject *cap = PyCapsule_New(b, "tabsafe.basis", capsule_free);
    if (!cap) basis_free(b);
    return cap;
}

static PyObject *py_basis_new(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0 || n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "columns out of range");
        return NULL;
    }
    Basis *b = calloc(1, sizeof(Basis));
    if (!b || add_cols(b, (int32_t)n) < 0) {
        basis_free(b);
        return PyErr_NoMemory();
    }
    b->n_cols = (int32_t)n;
    return wrap(b);
}

static PyObject *py_basis_copy(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o;
    if (!PyArg_ParseTuple(args, "O", &o)) return NULL;
    Basis *a = get_basis(o);
    if (!a) return NULL;
    Basis *b = calloc(1, sizeof(Basis));
    if (!b) return PyErr_NoMemory();
    b->rows = calloc((size_t)(a->cap_rows ? a->cap_rows : 1), sizeof(BRow));
    b->pivots = malloc((size_t)(a->cap_rows ? a->cap_rows : 1) * sizeof(int32_t));
    b->cap_rows = a->cap_rows;
    if (!b->rows || !b->pivots || add_cols(b, a->n_cols) < 0) goto nomem;
    for (int32_t i = 0; i < a->n_rows; i++) {
        BRow *s = &a->rows[i], *d = &b->rows[i];
        d->col = malloc((size_t)(s->n ? s->n : 1) * sizeof(int32_t));
        d->val = malloc((size_t)(s->n ? s->n : 1) * sizeof(int64_t));
        b->n_rows = i + 1;
        if (!d->col || !d->val) goto nomem;
        if (s->n) {
            memcpy(d->col, s->col, (size_t)s->n * sizeof(int32_t));
            memcpy(d->val, s->val, (size_t)s->n * sizeof(int64_t));
        }
        d->n = s->n;
        d->cap = s->n ? s->n : 1;
        b->pivots[i] = a->pivots[i];
    }
    b->n_cols = a->n_cols;
    for (int32_t j = 0; j < a->n_cols; j++) {
        BCol *s = &a->cols[j], *d = &b->cols[j];
        if (s->n == 0) continue;
        d->row = malloc((size_t)s->n * sizeof(int32_t));
        if (!d->row) goto nomem;
        memcpy(d->row, s->row, (size_t)s->n * sizeof(int32_t));
        d->n = d->cap = s->n;
    }
    return wrap(b);
nomem:
    basis_free(b);
    return PyErr_NoMemory();
}

static int cmp_int32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The rows with an entry in column j, ascending (a copy: the caller may change the column). */
static int32_t *rows_at(const Basis *b, int32_t j, int32_t *n) {
    const BCol *c = &b->cols[j];
    int32_t *out = malloc((size_t)(c->n ? c->n : 1) * sizeof(int32_t));
    if (!out) return NULL;
    if (c->n) memcpy(out, c->row, (size_t)c->n * sizeof(int32_t));
    qsort(out, (size_t)c->n, sizeof(int32_t), cmp_int32);
    *n = c->n;
    return out;
}

static PyObject *py_basis_copy_columns(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o, *o_src;
    if (!PyArg_ParseTuple(args, "OO", &o, &o_src)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    Py_buffer src;
    if (PyObject_GetBuffer(o_src, &src, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const int64_t *sv = src.buf;
    Py_ssize_t k = src.len / 8;
    int32_t n = b->n_cols;
    PyObject *ret = NULL;
    for (Py_ssize_t t = 0; t < k; t++)
        if (sv[t] < 0 || sv[t] >= n) {
            PyErr_SetString(PyExc_ValueError, "a source column out of range");
            goto done;
        }
    if ((int64_t)n + k >= INT32_MAX) { PyErr_SetString(PyExc_ValueError, "too many columns"); goto done; }
    if (add_cols(b, (int32_t)k) < 0) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t t = 0; t < k; t++) {
        int32_t s = (int32_t)sv[t], c = n + (int32_t)t;
        BCol *from = &b->cols[s], *to = &b->cols[c];
        to->n = 0;
        for (int32_t q = 0; q < from->n; q++) {
            int32_t i = from->row[q];
            /* the new column is past every column of the row: appending keeps it ascending */
            if (row_push(&b->rows[i], c, row_at(&b->rows[i], s)) < 0 || col_add(to, i) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }
    b->n_cols = n + (int32_t)k;
    ret = Py_None;
    Py_INCREF(ret);
done:
    PyBuffer_Release(&src);
    return ret;
}

static PyObject *py_basis_reduce(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o, *o_v, *o_src;
    if (!PyArg_ParseTuple(args, "OOO", &o, &o_v, &o_src)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    Py_buffer v, src;
    if (PyObject_GetBuffer(o_v, &v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return NULL;
    if (PyObject_GetBuffer(o_src, &src, PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&v); return NULL; }
    int64_t *x = v.buf;
    const int64_t *sv = src.buf;
    Py_ssize_t k = src.len / 8, n = b->n_cols;
    PyObject *ret = NULL;
    int64_t *part = NULL;
    if (v.len / 8 != n + k) { PyErr_SetString(PyExc_ValueError, "the vector's length is not the columns'"); goto done; }
    for (Py_ssize_t t = 0; t < k; t++)
        if (sv[t] < 0 || sv[t] >= n) { PyErr_SetString(PyExc_ValueError, "a source column out of range"); goto done; }
    for (Py_ssize_t c = 0; c < n + k; c++) x[c] = modp(x[c]);
    part = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    if (!part) { PyErr_NoMemory(); goto done; }
    int any = 0;
    for (int32_t i = 0; i < b->n_rows; i++) {
        int64_t coef = x[b->pivots[i]];
        if (!coef) continue;
        any = 1;
        const BRow *r = &b->rows[i];
        for (int32_t e = 0; e < r->n; e++) part[r->col[e]] = (part[r->col[e]] + coef * r->val[e]) % PRIME;
    }
    if (any) {
        for (Py_ssize_t c = 0; c < n; c++) x[c] = modp(x[c] - part[c]);
        for (Py_ssize_t t = 0; t < k; t++) x[n + t] = modp(x[n + t] - part[sv[t]]);
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    free(part);
    PyBuffer_Release(&v);
    PyBuffer_Release(&src);
    return ret;
}

static PyObject *py_basis_weights_after(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o, *o_v, *o_src, *o_sizes, *o_out;
    long long j;
    if (!PyArg_ParseTuple(args, "OLOOOO", &o, &j, &o_v, &o_src, &o_sizes, &o_out)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    Py_buffer v, src, sizes, out;
    int got_v = 0, got_src = 0, got_sizes = 0, got_out = 0;
    PyObject *ret = NULL;
    int64_t *w = NULL;
    int32_t *rows = NULL, n_hit = 0;
    if (PyObject_GetBuffer(o_v, &v, PyBUF_C_CONTIGUOUS) < 0) goto done;
    got_v = 1;
    if (PyObject_GetBuffer(o_src, &src, PyBUF_C_CONTIGUOUS) < 0) goto done;
    got_src = 1;
    if (PyObject_GetBuffer(o_sizes, &sizes, PyBUF_C_CONTIGUOUS) < 0) goto done;
    got_sizes = 1;
    if (PyObject_GetBuffer(o_out, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done;
    got_out = 1;
    {
        const int64_t *x = v.buf, *sv = src.buf, *sz = sizes.buf;
        int64_t *res = out.buf;
        Py_ssize_t k = src.len / 8, n = b->n_cols, width = n + k;
        if (v.len / 8 != width || sizes.len / 8 != width || j < 0 || j >= width) {
            PyErr_SetString(PyExc_ValueError, "vector, sizes and pivot do not fit the columns");
            goto done;
        }
        for (Py_ssize_t t = 0; t < k; t++)
            if (sv[t] < 0 || sv[t] >= n) { PyErr_SetString(PyExc_ValueError, "a source column out of range"); goto done; }
        int32_t s = (int32_t)(j < n ? j : sv[j - n]);
        rows = rows_at(b, s, &n_hit);
        w = calloc((size_t)width, sizeof(int64_t));
        if (!rows || !w) { PyErr_NoMemory(); goto done; }
        if (out.len / 8 != n_hit + 1) { PyErr_SetString(PyExc_ValueError, "the output's length"); goto done; }
        for (int32_t q = 0; q < n_hit; q++) {
            const BRow *r = &b->rows[rows[q]];
            for (int32_t e = 0; e < r->n; e++) w[r->col[e]] = r->val[e];
            for (Py_ssize_t t = 0; t < k; t++) w[n + t] = w[sv[t]];
            int64_t rj = w[j], total = 0;
            for (Py_ssize_t c = 0; c < width; c++) {
                int64_t a = x[c] ? modp(w[c] - rj * x[c]) : w[c];
                if (a) total += sz[c];
                w[c] = 0;
            }
            res[q] = total;
        }
        int64_t total = 0;
        for (Py_ssize_t c = 0; c < width; c++)
            if (x[c]) total += sz[c];
        res[n_hit] = total;
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    free(w);
    free(rows);
    if (got_v) PyBuffer_Release(&v);
    if (got_src) PyBuffer_Release(&src);
    if (got_sizes) PyBuffer_Release(&sizes);
    if (got_out) PyBuffer_Release(&out);
    return ret;
}

static PyObject *py_basis_rows_at(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o;
    long long j;
    if (!PyArg_ParseTuple(args, "OL", &o, &j)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    if (j < 0 || j >= b->n_cols) { PyErr_SetString(PyExc_ValueError, "a column out of range"); return NULL; }
    int32_t n = 0, *rows = rows_at(b, (int32_t)j, &n);
    if (!rows) return PyErr_NoMemory();
    PyObject *lst = PyList_New(n);
    for (int32_t q = 0; lst && q < n; q++) PyList_SET_ITEM(lst, q, PyLong_FromLong(rows[q]));
    free(rows);
    return lst;
}

static PyObject *py_basis_insert_led(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o, *o_v;
    long long j;
    if (!PyArg_ParseTuple(args, "OLO", &o, &j, &o_v)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(o_v, &v, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const int64_t *x = v.buf;
    int32_t n = b->n_cols, nz = 0, n_hit = 0;
    int32_t *vc = NULL, *hit = NULL, *nc = NULL;
    int64_t *vv = NULL, *nv = NULL;
    PyObject *ret = NULL;
    if (v.len / 8 != n || j < 0 || j >= n || x[j] != 1) {
        PyErr_SetString(PyExc_ValueError, "the vector does not fit the columns, or is not led at its pivot");
        goto done;
    }
    for (int32_t c = 0; c < n; c++) nz += x[c] != 0;
    vc = malloc((size_t)nz * sizeof(int32_t));
    vv = malloc((size_t)nz * sizeof(int64_t));
    hit = rows_at(b, (int32_t)j, &n_hit);
    if (!vc || !vv || !hit) { PyErr_NoMemory(); goto done; }
    for (int32_t c = 0, q = 0; c < n; c++)
        if (x[c]) { vc[q] = c; vv[q] = modp(x[c]); q++; }
    /* every row with an entry at the pivot: row - row[j] * v, merged in column order */
    for (int32_t h = 0; h < n_hit; h++) {
        int32_t i = hit[h];
        BRow *r = &b->rows[i];
        int64_t rj = row_at(r, (int32_t)j);
        int32_t cap = r->n + nz, m = 0, a = 0, q = 0;
        nc = malloc((size_t)cap * sizeof(int32_t));
        nv = malloc((size_t)cap * sizeof(int64_t));
        if (!nc || !nv) { PyErr_NoMemory(); goto done; }
        while (a < r->n || q < nz) {
            int32_t c;
            int64_t val;
            int was = 0;
            if (q >= nz || (a < r->n && r->col[a] < vc[q])) {
                c = r->col[a]; val = r->val[a]; a++;
                nc[m] = c; nv[m] = val; m++;
                continue;
            }
            if (a < r->n && r->col[a] == vc[q]) {
                c = r->col[a]; val = modp(r->val[a] - rj * vv[q]); a++; q++; was = 1;
            } else {
                c = vc[q]; val = modp(-rj * vv[q]); q++;
            }
            if (val) {
                nc[m] = c; nv[m] = val; m++;
                if (!was && col_add(&b->cols[c], i) < 0) { PyErr_NoMemory(); goto done; }
            } else if (was) {
                col_remove(&b->cols[c], i);
            }
        }
        free(r->col);
        free(r->val);
        r->col = nc; r->val = nv; r->n = m; r->cap = cap;
        nc = NULL; nv = NULL;
    }
    /* the new row */
    int32_t i = b->n_rows;
    int32_t cap_rows = b->cap_rows;
    if (grow((void **)&b->rows, &b->cap_rows, i + 1, sizeof(BRow)) < 0) { PyErr_NoMemory(); goto done; }
    if (b->cap_rows > cap_rows) {
        memset(b->rows + cap_rows, 0, (size_t)(b->cap_rows - cap_rows) * sizeof(BRow));
        int32_t *p = realloc(b->pivots, (size_t)b->cap_rows * sizeof(int32_t));
        if (!p) { PyErr_NoMemory(); goto done; }
        b->pivots = p;
    }
    for (int32_t q = 0; q < nz; q++)
        if (col_add(&b->cols[vc[q]], i) < 0) { PyErr_NoMemory(); goto done; }
    b->rows[i].col = vc; b->rows[i].val = vv; b->rows[i].n = nz; b->rows[i].cap = nz;
    vc = NULL; vv = NULL;
    b->pivots[i] = (int32_t)j;
    b->n_rows = i + 1;
    ret = Py_None;
    Py_INCREF(ret);
done:
    free(vc); free(vv); free(hit); free(nc); free(nv);
    PyBuffer_Release(&v);
    return ret;
}

static PyObject *py_basis_fill(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o, *o_sizes, *o_out;
    int dense;
    if (!PyArg_ParseTuple(args, "OpOO", &o, &dense, &o_sizes, &o_out)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    Py_buffer sizes, out;
    if (PyObject_GetBuffer(o_sizes, &sizes, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(o_out, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) { PyBuffer_Release(&sizes); return NULL; }
    int64_t *res = out.buf;
    const int64_t *sz = sizes.buf;
    PyObject *ret = NULL;
    if (dense ? out.len / 8 != (Py_ssize_t)b->n_rows * b->n_cols : (out.len / 8 != b->n_rows || sizes.len / 8 < b->n_cols)) {
        PyErr_SetString(PyExc_ValueError, "the output's length");
        goto done;
    }
    for (int32_t i = 0; i < b->n_rows; i++) {
        const BRow *r = &b->rows[i];
        int64_t total = 0;
        for (int32_t e = 0; e < r->n; e++) {
            if (dense) res[(Py_ssize_t)i * b->n_cols + r->col[e]] = r->val[e];
            else total += sz[r->col[e]];
        }
        if (!dense) res[i] = total;
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&out);
    return ret;
}

static PyObject *py_basis_shape(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o;
    if (!PyArg_ParseTuple(args, "O", &o)) return NULL;
    Basis *b = get_basis(o);
    if (!b) return NULL;
    return Py_BuildValue("ii", b->n_rows, b->n_cols);
}

static PyMethodDef methods[] = {
    {"tally", py_tally, METH_VARARGS,
     "tally(labels, alias, mask, spans, invert, counts)\n"
     "Adds to counts[region] the records of mask (invert: outside it) within spans, per region.\n"
     "Returns how many records were counted."},
    {"moves", py_moves, METH_VARARGS,
     "moves(labels, alias, mask, spans, invert, number, base, records, new_labels)\n"
     "Writes the records of mask (invert: outside it) within spans whose region r has number[r] >= 0,\n"
     "in order, and their new labels base + number[r]; the outputs have one slot more than the\n"
     "records expected. Returns how many were written."},
    {"basis_new", py_basis_new, METH_VARARGS, "basis_new(n_cols): an empty basis (a capsule)."},
    {"basis_copy", py_basis_copy, METH_VARARGS, "basis_copy(b): a copy apart."},
    {"basis_shape", py_basis_shape, METH_VARARGS, "basis_shape(b): (rows, columns)."},
    {"basis_copy_columns", py_basis_copy_columns, METH_VARARGS,
     "basis_copy_columns(b, sources): one new column per source, equal to it."},
    {"basis_reduce", py_basis_reduce, METH_VARARGS,
     "basis_reduce(b, v, sources): v (over the columns after copying sources) less its part in b, in place."},
    {"basis_weights_after", py_basis_weights_after, METH_VARARGS,
     "basis_weights_after(b, j, v, sources, sizes, out): the records of each row with an entry at j's\n"
     "column after adding the led v (ascending rows), then v's own."},
    {"basis_rows_at", py_basis_rows_at, METH_VARARGS, "basis_rows_at(b, j): the rows with an entry in column j."},
    {"basis_insert_led", py_basis_insert_led, METH_VARARGS, "basis_insert_led(b, j, v): add a reduced, led vector."},
    {"basis_fill", py_basis_fill, METH_VARARGS,
     "basis_fill(b, dense, sizes, out): the dense matrix, or each row's records (sizes per column)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record", NULL, -1, methods};

PyMODINIT_FUNC PyInit__record(void) { return PyModule_Create(&module); }
