/* SPDX-License-Identifier: Apache-2.0 */
/* ctlwire: the console's answers to cascade-ctl, as lines (ctlwire.h). */
#include "ctlwire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Fields of a row line, its name first. */
#define ROW_FIELDS 16
#define LIST_FIELDS (5 + CTLWIRE_WINDOWS)
#define COUNT_FIELDS 4

/* A byte a field cannot hold as it is. */
static int
ctlwire_special(unsigned char ch)
{
	return ch < 0x20 || ch == 0x7f || ch == '\\';
}

void
ctlwire_field(struct hbuf *b, const void *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = s;
	size_t i = 0, run;

	while (i < n) {
		for (run = i; run < n && !ctlwire_special(p[run]); run++)
			;
		if (run > i)
			hbuf_raw(b, p + i, run - i);
		if ((i = run) == n)
			break;
		if (p[i] == '\t')
			hbuf_lit(b, "\\t");
		else if (p[i] == '\n')
			hbuf_lit(b, "\\n");
		else if (p[i] == '\\')
			hbuf_lit(b, "\\\\");
		else {
			char e[4] = {'\\', 'x', hex[p[i] >> 4], hex[p[i] & 15]};
			hbuf_raw(b, e, sizeof(e));
		}
		i++;
	}
}

static int
ctlwire_hex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int
ctlwire_unescape(char *s, size_t *n)
{
	size_t i = 0, o = 0;
	int hi, lo;

	while (i < *n) {
		unsigned char ch = (unsigned char)s[i];
		if (ch != '\\') {
			if (ctlwire_special(ch))
				return -1;
			s[o++] = s[i++];
			continue;
		}
		if (i + 1 >= *n)
			return -1;
		switch (s[i + 1]) {
		case 't':
			s[o++] = '\t';
			i += 2;
			break;
		case 'n':
			s[o++] = '\n';
			i += 2;
			break;
		case '\\':
			s[o++] = '\\';
			i += 2;
			break;
		case 'x':
			if (i + 3 >= *n || (hi = ctlwire_hex(s[i + 2])) < 0 ||
			    (lo = ctlwire_hex(s[i + 3])) < 0)
				return -1;
			/* Only what ctlwire_field writes as \xHH. */
			ch = (unsigned char)(hi << 4 | lo);
			if (!ctlwire_special(ch) || ch == '\t' || ch == '\n' ||
			    ch == '\\')
				return -1;
			s[o++] = (char)ch;
			i += 4;
			break;
		default:
			return -1;
		}
	}
	*n = o;
	return 0;
}

void
ctlwire_list_head(struct hbuf *b, const struct ctlwire_head *h)
{
	hbuf_printf(b, "list\t%d\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64,
	            CTLWIRE_VERSION, h->matching, h->total, h->shown);
	for (int k = 0; k < CTLWIRE_WINDOWS; k++)
		hbuf_printf(b, "\t%" PRIu64, h->counts[k]);
	hbuf_lit(b, "\n");
}

/* A field, then the tab before the next. */
static void
ctlwire_field_tab(struct hbuf *b, amqp_bytes_t s)
{
	ctlwire_field(b, s.bytes, s.len);
	hbuf_lit(b, "\t");
}

void
ctlwire_list_row(struct hbuf *b, const struct waiting *w)
{
	hbuf_lit(b, "row\t");
	ctlwire_field_tab(b, w->id);
	ctlwire_field_tab(b, w->message_id);
	ctlwire_field_tab(b, w->exchange);
	ctlwire_field_tab(b, w->routing_key);
	hbuf_printf(b,
	            "%" PRId64 "\t%" PRId64 "\t%" PRId64
	            "\t%d\t%d\t%d\t%" PRId64 "\t",
	            w->due, w->seen, w->size, w->cancel_pending != 0,
	            w->rescheduled != 0, w->repeat != 0, w->every);
	ctlwire_field_tab(b, w->cron);
	ctlwire_field_tab(b, w->tz);
	hbuf_printf(b, "%" PRId64 "\t%d\n", w->occurrence, w->paused != 0);
}

void
ctlwire_count(struct hbuf *b, uint64_t n, int64_t last_due)
{
	hbuf_printf(b, "count\t%d\t%" PRIu64 "\t%" PRId64 "\n", CTLWIRE_VERSION,
	            n, last_due);
}

void
ctlwire_end(struct hbuf *b)
{
	hbuf_lit(b, "end\n");
}

/* Reading. */

/* The next line of text[*off..len) (its newline made a NUL) in *line;
 * 0 at the end, -1 for a last line without its newline. */
static int
ctlwire_line(char *text, size_t len, size_t *off, char **line, size_t *n)
{
	char *nl;

	if (*off >= len)
		return 0;
	if ((nl = memchr(text + *off, '\n', len - *off)) == NULL)
		return -1;
	*line = text + *off;
	*n = (size_t)(nl - *line);
	*nl = '\0';
	*off += *n + 1;
	return 1;
}

/* line[0..n) split at its tabs into exactly want fields (NUL-ended,
 * lengths in lens).  -1 for another count. */
static int
ctlwire_split(char *line, size_t n, char **f, size_t *lens, size_t want)
{
	size_t k = 0;
	char *p = line, *end = line + n, *tab;

	for (;;) {
		if (k == want)
			return -1;
		tab = memchr(p, '\t', (size_t)(end - p));
		f[k] = p;
		lens[k] = (size_t)((tab != NULL ? tab : end) - p);
		k++;
		if (tab == NULL)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	return k == want ? 0 : -1;
}

/* A decimal integer, the whole field: [-]digits, no sign for unsigned. */
static int
ctlwire_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!((s[0] >= '0' && s[0] <= '9') ||
	      (s[0] == '-' && s[1] >= '0' && s[1] <= '9')))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int
ctlwire_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!(s[0] >= '0' && s[0] <= '9'))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int
ctlwire_flag(const char *s, int *out)
{
	if ((s[0] != '0' && s[0] != '1') || s[1] != '\0')
		return -1;
	*out = s[0] == '1';
	return 0;
}

/* A field from a record, unescaped in place. */
static int
ctlwire_bytes(char *s, size_t n, amqp_bytes_t *out)
{
	if (ctlwire_unescape(s, &n) < 0)
		return -1;
	out->bytes = s;
	out->len = n;
	return 0;
}

/* A first line's name and version. */
static int
ctlwire_version(char **f, const char *name)
{
	uint64_t v;

	return strcmp(f[0], name) == 0 && ctlwire_u64(f[1], &v) == 0 &&
	               v == CTLWIRE_VERSION
	           ? 0
	           : -1;
}

static int
ctlwire_row(char *line, size_t n, struct waiting *w)
{
	char *f[ROW_FIELDS];
	size_t lens[ROW_FIELDS];
	int64_t due, seen, size, every, occurrence;

	memset(w, 0, sizeof(*w));
	if (ctlwire_split(line, n, f, lens, ROW_FIELDS) < 0 ||
	    strcmp(f[0], "row") != 0 || lens[1] == 0 ||
	    ctlwire_bytes(f[1], lens[1], &w->id) < 0 ||
	    ctlwire_bytes(f[2], lens[2], &w->message_id) < 0 ||
	    ctlwire_bytes(f[3], lens[3], &w->exchange) < 0 ||
	    ctlwire_bytes(f[4], lens[4], &w->routing_key) < 0 ||
	    ctlwire_i64(f[5], &due) < 0 || ctlwire_i64(f[6], &seen) < 0 ||
	    ctlwire_i64(f[7], &size) < 0 ||
	    ctlwire_flag(f[8], &w->cancel_pending) < 0 ||
	    ctlwire_flag(f[9], &w->rescheduled) < 0 ||
	    ctlwire_flag(f[10], &w->repeat) < 0 ||
	    ctlwire_i64(f[11], &every) < 0 ||
	    ctlwire_bytes(f[12], lens[12], &w->cron) < 0 ||
	    ctlwire_bytes(f[13], lens[13], &w->tz) < 0 ||
	    ctlwire_i64(f[14], &occurrence) < 0 ||
	    ctlwire_flag(f[15], &w->paused) < 0)
		return -1;
	w->due = w->recorded_due = due;
	w->seen = seen;
	w->size = size;
	w->every = every;
	w->occurrence = occurrence;
	return 0;
}

void
ctlwire_list_free(struct ctlwire_list *l)
{
	if (l->rows != NULL)
		for (uint64_t i = 0; i < l->head.shown; i++)
			free(l->rows[i]);
	free(l->rows);
	memset(l, 0, sizeof(*l));
}

int
ctlwire_parse_list(char *text, size_t len, struct ctlwire_list *l,
                   const char **why)
{
	char *line, *f[LIST_FIELDS];
	size_t off = 0, n, lens[LIST_FIELDS];
	uint64_t sum = 0, i;
	struct ctlwire_head *h = &l->head;

	memset(l, 0, sizeof(*l));
	*why = "a NUL byte";
	if (memchr(text, '\0', len) != NULL)
		return -1;
	*why = "no list line";
	if (ctlwire_line(text, len, &off, &line, &n) != 1 ||
	    ctlwire_split(line, n, f, lens, LIST_FIELDS) < 0 ||
	    ctlwire_version(f, "list") < 0)
		return -1;
	*why = "a malformed list line";
	if (ctlwire_u64(f[2], &h->matching) < 0 ||
	    ctlwire_u64(f[3], &h->total) < 0 ||
	    ctlwire_u64(f[4], &h->shown) < 0)
		return -1;
	for (int k = 0; k < CTLWIRE_WINDOWS; k++) {
		if (ctlwire_u64(f[5 + k], &h->counts[k]) < 0 ||
		    h->counts[k] > UINT64_MAX - sum)
			return -1;
		sum += h->counts[k];
	}
	*why = "counts that do not add up";
	if (sum != h->matching || h->matching > h->total ||
	    h->shown > h->matching)
		return -1;
	/* Every row takes some 32 bytes at the least. */
	*why = "more rows than the answer holds";
	if (h->shown > len / 16)
		return -1;
	*why = "out of memory";
	if ((l->rows = calloc((size_t)h->shown + 1, sizeof(*l->rows))) == NULL)
		return -1;
	for (i = 0; i < h->shown; i++) {
		*why = "a row missing";
		if (ctlwire_line(text, len, &off, &line, &n) != 1)
			goto fail;
		*why = "out of memory";
		if ((l->rows[i] = malloc(sizeof(*l->rows[i]))) == NULL)
			goto fail;
		*why = "a malformed row";
		if (ctlwire_row(line, n, l->rows[i]) < 0)
			goto fail;
	}
	*why = "no end line";
	if (ctlwire_line(text, len, &off, &line, &n) != 1 ||
	    strcmp(line, "end") != 0 || off != len)
		goto fail;
	return 0;
fail:
	ctlwire_list_free(l);
	return -1;
}

int
ctlwire_parse_count(char *text, size_t len, uint64_t *count, int64_t *last_due,
                    const char **why)
{
	char *line, *f[COUNT_FIELDS];
	size_t off = 0, n, lens[COUNT_FIELDS];

	*why = "a NUL byte";
	if (memchr(text, '\0', len) != NULL)
		return -1;
	*why = "no count line";
	if (ctlwire_line(text, len, &off, &line, &n) != 1 ||
	    ctlwire_split(line, n, f, lens, COUNT_FIELDS) < 0 ||
	    ctlwire_version(f, "count") < 0)
		return -1;
	*why = "a malformed count line";
	if (ctlwire_u64(f[2], count) < 0 || ctlwire_i64(f[3], last_due) < 0)
		return -1;
	*why = "no end line";
	if (ctlwire_line(text, len, &off, &line, &n) != 1 ||
	    strcmp(line, "end") != 0 || off != len)
		return -1;
	return 0;
}
