/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The console's login rate limits: rings of failure times, in a table of
 * fixed slots allocated once, found by a chained hash and ordered by a
 * doubly linked least-recently-failed list, all by 32-bit index; and the
 * known (user, address) pairs, RATELIMIT_KNOWN slots scanned in full.
 */
#include "ratelimit.h"

#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

_Static_assert(RATELIMIT_USER_FAILS <= RATELIMIT_ADDR_FAILS,
               "an entry's ring holds the larger of the two counts");
_Static_assert(RATELIMIT_ADDR_FAILS <= UINT8_MAX &&
                   RATELIMIT_USER_MAX <= UINT8_MAX &&
                   RATELIMIT_ADDR_MAX <= UINT8_MAX,
               "an entry keeps counts and lengths in bytes");

struct ratelimit_entry {
	int64_t t[RATELIMIT_ADDR_FAILS]; /* ring of the latest failures */
	uint32_t hash;
	uint32_t chain; /* next in its bucket, or in the free list */
	uint32_t prev;  /* towards the most recently failed */
	uint32_t next;  /* towards the least */
	uint8_t head;   /* the oldest time, when the ring is full */
	uint8_t count;
	uint8_t has_user; /* 0: the address's own counter */
	uint8_t addr_len;
	uint8_t user_len;
	char addr[RATELIMIT_ADDR_MAX];
	char user[RATELIMIT_USER_MAX];
};

/* A known pair: a user's login from an address. */
struct ratelimit_known {
	int64_t at;         /* the latest login; 0: an empty slot */
	uint32_t user_hash; /* user_hash(): the scans' first test */
	uint8_t addr_len;
	uint8_t user_len;
	char addr[RATELIMIT_ADDR_MAX];
	char user[RATELIMIT_USER_MAX];
};

/* A counter's name, bounded: it points into the caller's strings. */
struct key {
	const char *addr;
	const char *user;
	size_t addr_len;
	size_t user_len;
	int has_user;
	uint32_t hash;
};

/* FNV-1a, 32 bits. */
static uint32_t
fnv(uint32_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

static struct key
make_key(const char *addr, const char *user, size_t user_len, int has_user)
{
	struct key k;
	unsigned char head[2];

	k.addr = addr != NULL ? addr : "";
	k.addr_len = strnlen(k.addr, RATELIMIT_ADDR_MAX);
	k.has_user = has_user;
	k.user = has_user && user != NULL ? user : "";
	k.user_len = has_user && user != NULL ? user_len : 0;
	if (k.user_len > RATELIMIT_USER_MAX)
		k.user_len = RATELIMIT_USER_MAX;
	/* The kind and the address's length first, so that no address and
	 * user hash as another split of the same bytes. */
	head[0] = (unsigned char)has_user;
	head[1] = (unsigned char)k.addr_len;
	k.hash = fnv(2166136261u, head, sizeof(head));
	k.hash = fnv(k.hash, k.addr, k.addr_len);
	k.hash = fnv(k.hash, k.user, k.user_len);
	return k;
}

static unsigned
ring_size(const struct ratelimit_entry *e)
{
	return e->has_user ? RATELIMIT_USER_FAILS : RATELIMIT_ADDR_FAILS;
}

static int64_t
ring_window(const struct ratelimit_entry *e)
{
	return e->has_user ? RATELIMIT_USER_WINDOW_MS
	                   : RATELIMIT_ADDR_WINDOW_MS;
}

/*
 * The wait before a ring of size times (count of them, the oldest at head)
 * lets one more failure in: 0 unless it is full and its oldest is inside
 * the window.  A time later than now (a clock set back) is never a wait
 * longer than the window.
 */
static int64_t
ring_wait(const int64_t *t, unsigned size, unsigned head, unsigned count,
          int64_t window, int64_t now)
{
	int64_t age;

	if (count < size)
		return 0;
	age = now - t[head];
	if (age >= window)
		return 0;
	if (age < 0)
		return window;
	return window - age;
}

static void
ring_push(int64_t *t, unsigned size, unsigned *head, unsigned *count,
          int64_t now)
{
	if (*count < size) {
		t[(*head + *count) % size] = now;
		(*count)++;
		return;
	}
	t[*head] = now;
	*head = (*head + 1) % size;
}

/* Forget the newest time of a ring (a refund): when it was full, the
 * oldest it overwrote stays forgotten, which only counts one fewer. */
static void
ring_pop(unsigned *count)
{
	if (*count > 0)
		(*count)--;
}

/* Whether e still counts a failure at now (its newest is in the window). */
static int
is_live(const struct ratelimit_entry *e, int64_t now)
{
	int64_t newest;

	if (e->count == 0)
		return 0;
	newest = e->t[(e->head + e->count - 1u) % ring_size(e)];
	return now - newest < ring_window(e);
}

static uint32_t
find(const struct ratelimit *rl, const struct key *k)
{
	uint32_t i = rl->bucket[k->hash & (rl->nbucket - 1)];

	for (; i != NIL; i = rl->e[i].chain) {
		const struct ratelimit_entry *e = &rl->e[i];
		if (e->hash == k->hash && e->has_user == k->has_user &&
		    e->addr_len == k->addr_len && e->user_len == k->user_len &&
		    memcmp(e->addr, k->addr, k->addr_len) == 0 &&
		    memcmp(e->user, k->user, k->user_len) == 0)
			return i;
	}
	return NIL;
}

static void
lru_unlink(struct ratelimit *rl, uint32_t i)
{
	struct ratelimit_entry *e = &rl->e[i];

	if (e->prev != NIL)
		rl->e[e->prev].next = e->next;
	else
		rl->lru_head = e->next;
	if (e->next != NIL)
		rl->e[e->next].prev = e->prev;
	else
		rl->lru_tail = e->prev;
	e->prev = e->next = NIL;
}

static void
lru_push_front(struct ratelimit *rl, uint32_t i)
{
	struct ratelimit_entry *e = &rl->e[i];

	e->prev = NIL;
	e->next = rl->lru_head;
	if (rl->lru_head != NIL)
		rl->e[rl->lru_head].prev = i;
	else
		rl->lru_tail = i;
	rl->lru_head = i;
}

/* Take entry i out of the table, to the free list. */
static void
drop(struct ratelimit *rl, uint32_t i)
{
	struct ratelimit_entry *e = &rl->e[i];
	uint32_t *p = &rl->bucket[e->hash & (rl->nbucket - 1)];

	while (*p != i)
		p = &rl->e[*p].chain;
	*p = e->chain;
	lru_unlink(rl, i);
	memset(e, 0, sizeof(*e));
	e->chain = rl->free;
	rl->free = i;
	rl->n--;
}

/* The entry named by k, made when there is none (the least recently
 * failed leaving when the table is full), now the most recently failed. */
static uint32_t
take(struct ratelimit *rl, const struct key *k, int64_t now)
{
	uint32_t i = find(rl, k), *bucket;
	struct ratelimit_entry *e;

	if (i != NIL) {
		lru_unlink(rl, i);
		lru_push_front(rl, i);
		return i;
	}
	if (rl->n == rl->max) {
		rl->evicted++;
		if (is_live(&rl->e[rl->lru_tail], now))
			rl->evicted_live++;
		drop(rl, rl->lru_tail);
	}
	if (rl->free != NIL) {
		i = rl->free;
		rl->free = rl->e[i].chain;
	} else {
		/* No slot was ever freed: slots 0 .. n-1 are all in use. */
		i = (uint32_t)rl->n;
	}
	e = &rl->e[i];
	memset(e, 0, sizeof(*e));
	e->hash = k->hash;
	e->has_user = (uint8_t)k->has_user;
	e->addr_len = (uint8_t)k->addr_len;
	e->user_len = (uint8_t)k->user_len;
	memcpy(e->addr, k->addr, k->addr_len);
	memcpy(e->user, k->user, k->user_len);
	bucket = &rl->bucket[k->hash & (rl->nbucket - 1)];
	e->chain = *bucket;
	*bucket = i;
	lru_push_front(rl, i);
	rl->n++;
	return i;
}

static void
entry_push(struct ratelimit_entry *e, int64_t now)
{
	unsigned head = e->head, count = e->count;

	ring_push(e->t, ring_size(e), &head, &count, now);
	e->head = (uint8_t)head;
	e->count = (uint8_t)count;
}

static int64_t
entry_wait(const struct ratelimit_entry *e, int64_t now)
{
	return ring_wait(e->t, ring_size(e), e->head, e->count, ring_window(e),
	                 now);
}

int
ratelimit_init(struct ratelimit *rl, size_t max_entries)
{
	uint32_t nbucket = 1;

	memset(rl, 0, sizeof(*rl));
	rl->free = rl->lru_head = rl->lru_tail = NIL;
	if (max_entries == 0)
		max_entries = RATELIMIT_DEFAULT_ENTRIES;
	if (max_entries < 2 || max_entries > RATELIMIT_MAX_ENTRIES)
		return -1;
	while (nbucket < max_entries)
		nbucket <<= 1;
	/* calloc: slots are touched only as the table fills. */
	rl->e = calloc(max_entries, sizeof(*rl->e));
	rl->bucket = malloc(nbucket * sizeof(*rl->bucket));
	rl->known = calloc(RATELIMIT_KNOWN, sizeof(*rl->known));
	if (rl->e == NULL || rl->bucket == NULL || rl->known == NULL) {
		ratelimit_free(rl);
		return -1;
	}
	memset(rl->bucket, 0xff, nbucket * sizeof(*rl->bucket)); /* NIL */
	rl->nbucket = nbucket;
	rl->max = max_entries;
	return 0;
}

void
ratelimit_free(struct ratelimit *rl)
{
	free(rl->e);
	free(rl->bucket);
	free(rl->known);
	memset(rl, 0, sizeof(*rl));
	rl->free = rl->lru_head = rl->lru_tail = NIL;
}

static uint32_t
user_hash(const struct key *k)
{
	return fnv(2166136261u, k->user, k->user_len);
}

/* Whether slot c holds a pair in its RATELIMIT_KNOWN_MS at now (a time
 * later than now, a clock set back, counts as in them). */
static int
known_live(const struct ratelimit_known *c, int64_t now)
{
	return c->at != 0 && now - c->at < RATELIMIT_KNOWN_MS;
}

static int
known_user_is(const struct ratelimit_known *c, uint32_t hash, const char *user,
              size_t user_len)
{
	return c->user_hash == hash && c->user_len == user_len &&
	       memcmp(c->user, user, user_len) == 0;
}

static int
known_addr_is(const struct ratelimit_known *c, const struct key *k)
{
	return c->addr_len == k->addr_len &&
	       memcmp(c->addr, k->addr, k->addr_len) == 0;
}

/* Whether k (a user's key) is a known pair at now. */
static int
known_at(const struct ratelimit *rl, const struct key *k, int64_t now)
{
	uint32_t h = user_hash(k);

	for (int i = 0; i < RATELIMIT_KNOWN; i++) {
		const struct ratelimit_known *c = &rl->known[i];
		if (known_live(c, now) &&
		    known_user_is(c, h, k->user, k->user_len) &&
		    known_addr_is(c, k))
			return 1;
	}
	return 0;
}

/* The live pairs at now of slot i's user. */
static int
known_held(const struct ratelimit *rl, int i, int64_t now)
{
	const struct ratelimit_known *u = &rl->known[i];
	int n = 0;

	for (int j = 0; j < RATELIMIT_KNOWN; j++)
		if (known_live(&rl->known[j], now) &&
		    known_user_is(&rl->known[j], u->user_hash, u->user,
		                  u->user_len))
			n++;
	return n;
}

/*
 * Every slot is live and the newcomer holds mine pairs (below the per-user
 * cap), own its least recently seen (-1 when none): the slot it takes.
 * The least recently seen pair of the user holding the most, when that is
 * more than mine, else the newcomer's own.  One scan of the slots for
 * each slot: only when all are live.
 */
static int
known_victim(struct ratelimit *rl, int mine, int own, int64_t now)
{
	int best = -1, best_n = 0;

	for (int i = 0; i < RATELIMIT_KNOWN; i++) {
		int n = known_held(rl, i, now);
		if (n > best_n || (n == best_n && best >= 0 &&
		                   rl->known[i].at < rl->known[best].at)) {
			best = i;
			best_n = n;
		}
	}
	if (best_n > mine || own < 0) {
		rl->known_evicted++;
		return best;
	}
	return own;
}

void
ratelimit_known(struct ratelimit *rl, const char *addr, const char *user,
                size_t user_len, int64_t now)
{
	struct key k = make_key(addr, user, user_len, 1);
	uint32_t h = user_hash(&k);
	int at = -1, own = -1, empty = -1, mine = 0;
	struct ratelimit_known *c;

	if (rl->known == NULL)
		return;
	/* Its own slot; else a free one, or one the rules give up. */
	for (int i = 0; i < RATELIMIT_KNOWN && at < 0; i++) {
		c = &rl->known[i];
		if (!known_live(c, now)) {
			if (empty < 0)
				empty = i;
		} else if (known_user_is(c, h, k.user, k.user_len)) {
			if (known_addr_is(c, &k))
				at = i;
			else if (mine++ == 0 || c->at < rl->known[own].at)
				own = i;
		}
	}
	if (at < 0 && mine >= RATELIMIT_KNOWN_USER)
		at = own;
	else if (at < 0 && empty >= 0)
		at = empty;
	else if (at < 0)
		at = known_victim(rl, mine, own, now);
	c = &rl->known[at];
	c->at = now != 0 ? now : 1;
	c->user_hash = h;
	c->addr_len = (uint8_t)k.addr_len;
	c->user_len = (uint8_t)k.user_len;
	memcpy(c->addr, k.addr, k.addr_len);
	memcpy(c->user, k.user, k.user_len);
}

size_t
ratelimit_known_count(const struct ratelimit *rl, int64_t now)
{
	size_t n = 0;

	if (rl->known == NULL)
		return 0;
	for (int i = 0; i < RATELIMIT_KNOWN; i++)
		if (known_live(&rl->known[i], now))
			n++;
	return n;
}

int64_t
ratelimit_check(const struct ratelimit *rl, const char *addr, const char *user,
                size_t user_len, int64_t now)
{
	struct key ka = make_key(addr, NULL, 0, 0);
	struct key ku = make_key(addr, user, user_len, 1);
	int64_t wait, w;
	uint32_t i;

	wait = ring_wait(rl->global, RATELIMIT_GLOBAL_FAILS, rl->global_head,
	                 rl->global_count, RATELIMIT_GLOBAL_WINDOW_MS, now);
	if (rl->max == 0)
		return wait;
	if (wait > 0 && known_at(rl, &ku, now))
		wait = 0;
	i = find(rl, &ka);
	if (i != NIL && (w = entry_wait(&rl->e[i], now)) > wait)
		wait = w;
	if ((i = find(rl, &ku)) != NIL &&
	    (w = entry_wait(&rl->e[i], now)) > wait)
		wait = w;
	return wait;
}

void
ratelimit_fail(struct ratelimit *rl, const char *addr, const char *user,
               size_t user_len, int64_t now)
{
	struct key ka = make_key(addr, NULL, 0, 0);
	struct key ku = make_key(addr, user, user_len, 1);

	ring_push(rl->global, RATELIMIT_GLOBAL_FAILS, &rl->global_head,
	          &rl->global_count, now);
	if (rl->max == 0)
		return;
	/* The address's entry first: it is then the most recent, so making
	 * room for the user's (max >= 2) never takes it. */
	entry_push(&rl->e[take(rl, &ka, now)], now);
	entry_push(&rl->e[take(rl, &ku, now)], now);
}

void
ratelimit_success(struct ratelimit *rl, const char *addr, const char *user,
                  size_t user_len)
{
	struct key ku = make_key(addr, user, user_len, 1);
	uint32_t i;

	if (rl->max == 0)
		return;
	if ((i = find(rl, &ku)) != NIL)
		drop(rl, i);
}

void
ratelimit_refund(struct ratelimit *rl, const char *addr, const char *user,
                 size_t user_len)
{
	struct key ka = make_key(addr, NULL, 0, 0);
	uint32_t i;

	ring_pop(&rl->global_count);
	if (rl->max != 0 && (i = find(rl, &ka)) != NIL) {
		unsigned count = rl->e[i].count;
		ring_pop(&count);
		rl->e[i].count = (uint8_t)count;
	}
	ratelimit_success(rl, addr, user, user_len);
}
