/* SPDX-License-Identifier: Apache-2.0 */
/* Content headers checked on the wire, before rabbitmq-c decodes them. */
#include "wirefilter.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "escape.h"
#include "wirecheck.h"

#define FRAME_HEAD 7 /* type, channel, size */
#define FRAME_END 0xce
#define HEADER_FIXED 12 /* class, weight, body size */
#define MARKER_KEY_LEN (sizeof(WIREFILTER_MARKER) - 1)
#define NONCE_LEN 16
/* The marker's value: the token, a blank, the reason. */
#define REASON_MAX 240
/* A rewritten frame is at most this much longer than the one it replaces. */
#define REWRITE_MORE                                                           \
	(2 + 4 + 1 + MARKER_KEY_LEN + 1 + 4 + NONCE_LEN + 1 + REASON_MAX)

/*
 * This process's token, which begins every marker it writes: from the
 * kernel, once, whichever thread asks first (the console reads with
 * several).
 */
static char wf_nonce[NONCE_LEN + 1];
static pthread_once_t wf_nonce_once = PTHREAD_ONCE_INIT;

static void
wf_nonce_make(void)
{
	unsigned char r[NONCE_LEN / 2];
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);
		/* None from the kernel (Linux 3.17 and later has it):
		 * nothing could be trusted to be ours. */
		if (n <= 0)
			abort();
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(wf_nonce + 2 * i, 3, "%02x", r[i]);
}

static const char *
wf_token(void)
{
	pthread_once(&wf_nonce_once, wf_nonce_make);
	return wf_nonce;
}

static uint32_t
get32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

static void
put32(unsigned char *b, uint32_t v)
{
	b[0] = (unsigned char)(v >> 24);
	b[1] = (unsigned char)(v >> 16);
	b[2] = (unsigned char)(v >> 8);
	b[3] = (unsigned char)v;
}

/*
 * Rewriting a content header
 */

/* Bytes being written: where they go, and how many so far. */
struct wf_out {
	unsigned char *b;
	size_t len;
};

static void
wf_put(struct wf_out *o, const void *p, size_t n)
{
	memcpy(o->b + o->len, p, n);
	o->len += n;
}

/* The marker entry, with reason, at o. */
static void
wf_put_marker(struct wf_out *o, const char *reason)
{
	size_t rlen = strlen(reason);
	unsigned char k[1 + MARKER_KEY_LEN + 1 + 4];

	if (rlen > REASON_MAX)
		rlen = REASON_MAX;
	k[0] = (unsigned char)MARKER_KEY_LEN;
	memcpy(k + 1, WIREFILTER_MARKER, MARKER_KEY_LEN);
	k[1 + MARKER_KEY_LEN] = AMQP_FIELD_KIND_UTF8;
	put32(k + 2 + MARKER_KEY_LEN, (uint32_t)(NONCE_LEN + 1 + rlen));
	wf_put(o, k, sizeof(k));
	wf_put(o, wf_token(), NONCE_LEN);
	wf_put(o, " ", 1);
	wf_put(o, reason, rlen);
}

/*
 * The properties p[0..len) with the headers table's entries that do not
 * decode dropped and the marker added, into out (room for len +
 * REWRITE_MORE): its length, or 0 when the table's entries cannot be told
 * apart (then nothing is kept).  reason gets what was refused.
 */
static size_t
wf_salvage(const unsigned char *p, size_t len, unsigned char *out, char *reason,
           size_t rsize)
{
	const uint16_t before[] = {AMQP_BASIC_CONTENT_TYPE_FLAG,
	                           AMQP_BASIC_CONTENT_ENCODING_FLAG};
	struct wf_out o = {out, 0};
	size_t at = 2, tstart, tend, kept_at;
	unsigned dropped = 0;
	uint16_t flags;
	uint32_t n;
	char key[ESCAPE_MAX_FACTOR * 32 + 4];

	if (len < 2)
		return 0;
	flags = (uint16_t)(p[0] << 8 | p[1]);
	if ((flags & 1) || !(flags & AMQP_BASIC_HEADERS_FLAG))
		return 0;
	for (size_t i = 0; i < 2; i++) {
		if (!(flags & before[i]))
			continue;
		if (at == len || p[at] > len - at - 1)
			return 0;
		at += 1 + (size_t)p[at];
	}
	if (len - at < 4 || (n = get32(p + at)) > len - at - 4)
		return 0;
	tstart = at + 4;
	tend = tstart + n;
	wf_put(&o, p, at); /* the flags and what comes before the table */
	kept_at = o.len;
	o.len += 4; /* the table's size, once known */
	for (at = tstart; at < tend;) {
		size_t entry = at, next;
		const char *why;
		unsigned char kl = p[at++];
		int bad;

		if (kl > tend - at || tend - at - kl < 1)
			return 0;
		at += kl;
		bad = wirecheck_value(p, at + 1, tend, p[at], &next, &why);
		if (bad < 0)
			return 0;
		at = next;
		if (bad == 0) {
			wf_put(&o, p + entry, next - entry);
			continue;
		}
		if (dropped++ == 0) {
			escape_bytes(p + entry + 1, kl, 32, ESCAPE_QUOTED, key,
			             sizeof(key));
			snprintf(reason, rsize, "header '%s': %s", key, why);
		}
	}
	if (dropped == 0)
		return 0; /* the table was not what failed */
	if (dropped > 1) {
		size_t rl = strlen(reason);
		snprintf(reason + rl, rsize - rl, " (and %u more)",
		         dropped - 1);
	}
	wf_put_marker(&o, reason);
	put32(out + kept_at, (uint32_t)(o.len - kept_at - 4));
	wf_put(&o, p + tend, len - tend); /* the properties after it */
	return o.len;
}

/*
 * The held header frame f (whole, f_len bytes, its end octet checked)
 * rewritten into out: its length.  Salvaged when the headers table alone
 * failed and its entries can be told apart; else the frame's properties
 * become the marker alone.
 */
static size_t
wf_rewrite(const unsigned char *f, size_t f_len, const char *why,
           unsigned char *out)
{
	const unsigned char *props = f + FRAME_HEAD + HEADER_FIXED;
	size_t plen = f_len - FRAME_HEAD - HEADER_FIXED - 1, n;
	unsigned char *np = out + FRAME_HEAD + HEADER_FIXED;
	char reason[2 * REASON_MAX]; /* cut to REASON_MAX in the marker */
	size_t used;
	const char *still;

	n = wf_salvage(props, plen, np, reason, sizeof(reason));
	if (n == 0 || wirecheck_props_library(np, n, &used, &still) != 0 ||
	    used != n) {
		struct wf_out o = {np, 0};
		unsigned char flags[2] = {AMQP_BASIC_HEADERS_FLAG >> 8, 0};
		size_t at;

		snprintf(reason, sizeof(reason), "its properties: %s", why);
		wf_put(&o, flags, 2);
		at = o.len;
		o.len += 4;
		wf_put_marker(&o, reason);
		put32(np + at, (uint32_t)(o.len - at - 4));
		n = o.len;
	}
	memcpy(out, f, FRAME_HEAD + HEADER_FIXED); /* channel, class, size */
	put32(out + 3, (uint32_t)(HEADER_FIXED + n));
	out[FRAME_HEAD + HEADER_FIXED + n] = FRAME_END;
	return FRAME_HEAD + HEADER_FIXED + n + 1;
}

/*
 * The stream
 */

void
wirestream_init(struct wirestream *s)
{
	memset(s, 0, sizeof(*s));
}

void
wirestream_free(struct wirestream *s)
{
	free(s->hold);
	free(s->spill);
	wirestream_init(s);
}

size_t
wirestream_pending(const struct wirestream *s)
{
	return s->spill_len;
}

size_t
wirestream_take(struct wirestream *s, void *buf, size_t len)
{
	size_t n = len < s->spill_len ? len : s->spill_len;

	if (n == 0)
		return 0;
	memcpy(buf, s->spill + s->spill_at, n);
	s->spill_at += n;
	s->spill_len -= n;
	if (s->spill_len == 0)
		s->spill_at = 0;
	return n;
}

/* Output of one filtering: in place at buf[0..w) while it fits, then
 * spilled, in order. */
struct wf_emit {
	unsigned char *buf;
	size_t w, r; /* written, read */
	int spilling;
};

static int
wf_emit(struct wirestream *s, struct wf_emit *e, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (!e->spilling && n <= e->r - e->w) {
		if (e->buf + e->w != p)
			memmove(e->buf + e->w, p, n);
		e->w += n;
		return 0;
	}
	e->spilling = 1;
	if (s->spill_at + s->spill_len + n > s->spill_cap) {
		size_t cap = s->spill_len + n, want = 4096;
		unsigned char *b;

		if (s->spill_at > 0) {
			memmove(s->spill, s->spill + s->spill_at, s->spill_len);
			s->spill_at = 0;
		}
		while (want < cap)
			want *= 2;
		if (want > s->spill_cap) {
			if ((b = realloc(s->spill, want)) == NULL)
				return -1;
			s->spill = b;
			s->spill_cap = want;
		}
	}
	memcpy(s->spill + s->spill_at + s->spill_len, p, n);
	s->spill_len += n;
	return 0;
}

/* The held frame is whole: checked, and let go as it is or rewritten. */
static int
wf_release(struct wirestream *s, struct wf_emit *e)
{
	const unsigned char *f = s->hold;
	size_t len = s->hold_need, used;
	const char *why;
	unsigned char *out;
	int rc;

	s->hold_need = s->hold_have = 0;
	if (f[len - 1] != FRAME_END ||
	    (f[FRAME_HEAD] << 8 | f[FRAME_HEAD + 1]) != AMQP_BASIC_CLASS ||
	    wirecheck_props_library(f + FRAME_HEAD + HEADER_FIXED,
	                            len - FRAME_HEAD - HEADER_FIXED - 1, &used,
	                            &why) == 0)
		return wf_emit(s, e, f, len); /* the library's to judge */
	if ((out = malloc(len + REWRITE_MORE)) == NULL)
		return -1;
	s->refused++;
	rc = wf_emit(s, e, out, wf_rewrite(f, len, why, out));
	free(out);
	return rc;
}

ssize_t
wirestream_filter(struct wirestream *s, unsigned char *buf, size_t n)
{
	struct wf_emit e = {buf, 0, 0, 0};

	while (e.r < n) {
		size_t k, left = n - e.r;

		if (s->pass > 0) {
			k = s->pass < left ? (size_t)s->pass : left;
			e.r += k;
			if (wf_emit(s, &e, buf + e.r - k, k) < 0)
				return -1;
			s->pass -= k;
			continue;
		}
		if (s->hold_need > 0) {
			k = s->hold_need - s->hold_have;
			k = k < left ? k : left;
			memcpy(s->hold + s->hold_have, buf + e.r, k);
			s->hold_have += k;
			e.r += k;
			if (s->hold_have == s->hold_need &&
			    wf_release(s, &e) < 0)
				return -1;
			continue;
		}
		k = FRAME_HEAD - s->head_have;
		k = k < left ? k : left;
		memcpy(s->head + s->head_have, buf + e.r, k);
		s->head_have += k;
		e.r += k;
		if (s->head_have < FRAME_HEAD)
			continue;
		s->head_have = 0;
		uint32_t size = get32(s->head + 3);
		if (s->head[0] == AMQP_FRAME_HEADER && size >= HEADER_FIXED &&
		    size <= WIREFILTER_HOLD_MAX) {
			size_t need = FRAME_HEAD + (size_t)size + 1;
			if (need > s->hold_cap) {
				unsigned char *h = realloc(s->hold, need);
				if (h == NULL)
					return -1;
				s->hold = h;
				s->hold_cap = need;
			}
			memcpy(s->hold, s->head, FRAME_HEAD);
			s->hold_have = FRAME_HEAD;
			s->hold_need = need;
			continue;
		}
		if (wf_emit(s, &e, s->head, FRAME_HEAD) < 0)
			return -1;
		s->pass = (uint64_t)size + 1;
	}
	return (ssize_t)e.w;
}

/*
 * The socket
 */

/*
 * rabbitmq-c's socket class and socket, as amqp_socket.h (not installed)
 * declares them in 0.11 to 0.18: a socket begins with a pointer to its
 * class.  amqp.h declares struct amqp_socket_t_ without its members.
 */
struct wf_class {
	ssize_t (*send)(void *, const void *, size_t, int);
	ssize_t (*recv)(void *, void *, size_t, int);
	int (*open)(void *, const char *, int, const struct timeval *);
	int (*close)(void *, int);
	int (*get_sockfd)(void *);
	void (*delete)(void *);
};

struct amqp_socket_t_ {
	const struct wf_class *klass;
};

/* A filtered socket's class: its own, first, then the one it replaced. */
struct wirefilter {
	struct wf_class klass;
	const struct wf_class *orig;
	struct wirestream s;
};

/* rabbitmq-c's "read again when the descriptor is readable" (private). */
#define WF_NEEDREAD (-0x1301)

static struct wirefilter *
wf_of(void *sock)
{
	return (struct wirefilter *)(((amqp_socket_t *)sock)->klass);
}

static ssize_t
wf_recv(void *sock, void *buf, size_t len, int flags)
{
	struct wirefilter *f = wf_of(sock);
	ssize_t r, w;

	if (len == 0)
		return f->orig->recv(sock, buf, len, flags);
	for (;;) {
		if (wirestream_pending(&f->s) > 0)
			return (ssize_t)wirestream_take(&f->s, buf, len);
		r = f->orig->recv(sock, buf, len, flags);
		if (r <= 0)
			return r; /* closed, an error, or read again later */
		w = wirestream_filter(&f->s, buf, (size_t)r);
		if (w < 0)
			return AMQP_STATUS_NO_MEMORY;
		if (w > 0)
			return w;
		/* All of it held back: the socket (or TLS) may have more. */
	}
}

static void
wf_delete(void *sock)
{
	struct wirefilter *f = wf_of(sock);

	f->orig->delete (sock);
	wirestream_free(&f->s);
	free(f);
}

/* The filter of conn's socket, or NULL. */
static struct wirefilter *
wf_conn(amqp_connection_state_t conn)
{
	amqp_socket_t *sock = conn != NULL ? amqp_get_socket(conn) : NULL;

	if (sock == NULL || sock->klass == NULL || sock->klass->recv != wf_recv)
		return NULL;
	return wf_of(sock);
}

int
wirefilter_install(amqp_connection_state_t conn)
{
	amqp_socket_t *sock = amqp_get_socket(conn);
	struct wirefilter *f;

	if (sock == NULL || wf_conn(conn) != NULL)
		return 0;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return -1;
	(void)wf_token(); /* not first in a reading thread */
	f->orig = sock->klass;
	f->klass = *f->orig;
	f->klass.recv = wf_recv;
	f->klass.delete = wf_delete;
	wirestream_init(&f->s);
	sock->klass = &f->klass;
	return 0;
}

size_t
wirefilter_pending(amqp_connection_state_t conn)
{
	struct wirefilter *f = wf_conn(conn);

	return f != NULL ? wirestream_pending(&f->s) : 0;
}

int
wirefilter_refused(const amqp_basic_properties_t *p, amqp_bytes_t *why)
{
	const amqp_table_t *h;

	if (p == NULL || !(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return 0;
	h = &p->headers;
	/* The filter writes it last. */
	for (int i = h->num_entries - 1; i >= 0; i--) {
		const amqp_table_entry_t *e = &h->entries[i];
		const amqp_bytes_t v = e->value.value.bytes;

		if (e->key.len != MARKER_KEY_LEN ||
		    memcmp(e->key.bytes, WIREFILTER_MARKER, MARKER_KEY_LEN) !=
		        0)
			continue;
		if (e->value.kind != AMQP_FIELD_KIND_UTF8 ||
		    v.len < NONCE_LEN + 1 ||
		    memcmp(v.bytes, wf_token(), NONCE_LEN) != 0)
			return 0;
		why->bytes = (char *)v.bytes + NONCE_LEN + 1;
		why->len = v.len - NONCE_LEN - 1;
		return 1;
	}
	return 0;
}
