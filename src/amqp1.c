/* An AMQP 1.0 consumer on Qpid Proton-C's connection driver: see amqp1.h. */
#include "amqp1.h"

#include "amqp_compat.h"
#include <errno.h>
#include <ev.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/ssl.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include "config.h"

/* The default CA store, when [broker] tls_ca_file is empty. */
#define AMQP1_SYSTEM_CAS "/etc/ssl/certs/ca-certificates.crt"

/* A receiving link, and the delivery being read on it, frame by frame. */
struct amqp1_link {
	pn_link_t *pn;
	char *buf;
	size_t len, cap;
	unsigned unsettled; /* its deliveries handed on, not settled */
	int64_t opened;     /* mono ms */
	char address[600];
};

struct amqp1 {
	pn_connection_driver_t drv;
	pn_ssl_domain_t *ssl;
	int fd;
	uint64_t gen;
	struct amqp1_link links[AMQP1_MAX_LINKS];
	unsigned nlinks;
	unsigned attached;
	unsigned unsettled;
	pn_session_t *session;
	unsigned credit;  /* each link's, once granted */
	unsigned relinks; /* links replaced so far (names stay unique) */
	/* Links detached by us, until the broker's detach: what comes on
	 * them meanwhile is dropped (the broker takes it back). */
	pn_link_t *retiring[AMQP1_MAX_LINKS];
	unsigned nretiring;
	int detaching; /* amqp1_shutdown: links closed, awaiting the broker */
	unsigned detached;
	const struct amqp1_handler *h;
	void *ctx;
	struct ev_loop *loop;
	ev_io rio, wio;
	ev_timer tick;
	ev_prepare flush; /* sends what settles queued, before the loop waits */
	int failed;
	char why[512];
};

/* Every connection gets the next: a settle names the one it is for. */
static uint64_t amqp1_generations;

static int64_t
amqp1_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
amqp1_params_from_url(struct amqp1_params *p, const struct config *cfg,
                      const char *url, char *err, size_t errsize)
{
	struct amqp_connection_info info;
	char copy[CONFIG_STR_MAX];

	memset(p, 0, sizeof(*p));
	snprintf(copy, sizeof(copy), "%s", url);
	if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK) {
		snprintf(err, errsize, "bad broker URL");
		return -1;
	}
	snprintf(p->host, sizeof(p->host), "%s", info.host);
	p->port = info.port;
	snprintf(p->user, sizeof(p->user), "%s", info.user);
	snprintf(p->password, sizeof(p->password), "%s",
	         cfg->broker_password_set ? cfg->broker_password
	                                  : info.password);
	snprintf(p->vhost, sizeof(p->vhost), "%s", info.vhost);
	p->tls = info.ssl;
	p->cfg = cfg;
	return 0;
}

/* Take the connection's watchers off the loop. */
static void
amqp1_unwatch(struct amqp1 *c)
{
	ev_io_stop(c->loop, &c->rio);
	ev_io_stop(c->loop, &c->wio);
	ev_timer_stop(c->loop, &c->tick);
	ev_prepare_stop(c->loop, &c->flush);
}

/* Note the first failure; the caller's handler hears of it once. */
static void amqp1_fail(struct amqp1 *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
amqp1_fail(struct amqp1 *c, const char *fmt, ...)
{
	va_list ap;

	if (c->failed)
		return;
	c->failed = 1;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	if (c->loop != NULL)
		amqp1_unwatch(c);
	if (c->loop != NULL && c->h->failed != NULL)
		c->h->failed(c->ctx, c->why);
}

/* "amqp:not-found: no queue 'x' in vhost '/'" from an error condition. */
static void
amqp1_fail_condition(struct amqp1 *c, const char *what, pn_condition_t *cond)
{
	if (cond != NULL && pn_condition_is_set(cond))
		amqp1_fail(c, "%s: %s: %s", what, pn_condition_get_name(cond),
		           pn_condition_get_description(cond)
		               ? pn_condition_get_description(cond)
		               : "");
	else
		amqp1_fail(c, "%s", what);
}

static struct amqp1_link *
amqp1_link_of(struct amqp1 *c, const pn_link_t *l, unsigned *index)
{
	for (unsigned i = 0; i < c->nlinks; i++)
		if (c->links[i].pn == l) {
			*index = i;
			return &c->links[i];
		}
	return NULL;
}

static int
amqp1_retiring(struct amqp1 *c, const pn_link_t *l, int forget)
{
	for (unsigned i = 0; i < c->nretiring; i++)
		if (c->retiring[i] == l) {
			if (forget)
				c->retiring[i] = c->retiring[--c->nretiring];
			return 1;
		}
	return 0;
}

/*
 * A delivery on a link we detached: dropped, the broker returns it.  Not
 * settled: a settle with no outcome is a disposition without a state,
 * which RabbitMQ 4.3 answers by ending the session ("Unrecognised state:
 * undefined"); the delivery goes with the link when the broker's detach
 * comes.
 */
static void
amqp1_drop_delivery(pn_delivery_t *d)
{
	pn_link_t *l = pn_delivery_link(d);
	char scratch[4096];

	while (pn_link_recv(l, scratch, sizeof(scratch)) > 0)
		;
	if (!pn_delivery_partial(d))
		pn_link_advance(l);
}

/* Read what arrived of the current delivery; hand it on once whole. */
static void
amqp1_read_delivery(struct amqp1 *c, pn_delivery_t *d)
{
	pn_link_t *l = pn_delivery_link(d);
	struct amqp1_link *lk;
	struct amqp1_delivery dv;
	unsigned index;
	size_t len;

	lk = amqp1_link_of(c, l, &index);
	if (lk == NULL && pn_delivery_readable(d) && amqp1_retiring(c, l, 0)) {
		amqp1_drop_delivery(d);
		return;
	}
	if (lk == NULL || !pn_delivery_readable(d))
		return;
	for (;;) {
		size_t pending = pn_delivery_pending(d);
		if (pending == 0)
			break;
		if (lk->len + pending > lk->cap) {
			size_t cap = lk->cap ? lk->cap : 4096;
			char *nb;
			while (cap < lk->len + pending)
				cap *= 2;
			nb = realloc(lk->buf, cap);
			if (nb == NULL) {
				amqp1_fail(c, "out of memory");
				return;
			}
			lk->buf = nb;
			lk->cap = cap;
		}
		ssize_t n = pn_link_recv(l, lk->buf + lk->len, pending);
		if (n <= 0)
			break;
		lk->len += (size_t)n;
	}
	if (pn_delivery_partial(d))
		return;
	pn_link_advance(l);
	if (pn_delivery_settled(d)) {
		/* Sent settled: nothing of ours to settle. */
		pn_delivery_settle(d);
		lk->len = 0;
		return;
	}
	c->unsettled++;
	lk->unsettled++;
	dv.pn = d;
	dv.gen = c->gen;
	len = lk->len;
	lk->len = 0;
	c->h->delivery(c->ctx, index, dv, lk->buf, len);
}

/* The events the driver has: what the broker did, what we did. */
static void
amqp1_events(struct amqp1 *c)
{
	pn_event_t *e;
	pn_link_t *l;

	while (!c->failed &&
	       (e = pn_connection_driver_next_event(&c->drv)) != NULL) {
		switch (pn_event_type(e)) {
		case PN_LINK_REMOTE_OPEN:
			l = pn_event_link(e);
			/* A refused attach comes back without a source, and
			 * its detach says why. */
			if (pn_terminus_get_type(pn_link_remote_source(l)) !=
			    PN_UNSPECIFIED)
				c->attached++;
			break;
		case PN_DELIVERY:
			amqp1_read_delivery(c, pn_event_delivery(e));
			break;
		case PN_LINK_REMOTE_CLOSE:
		case PN_LINK_REMOTE_DETACH:
			l = pn_event_link(e);
			/* The broker's answer to a detach of ours. */
			if (amqp1_retiring(c, l, 1)) {
				pn_link_free(l);
				break;
			}
			if (c->detaching) {
				c->detached++;
				break;
			}
			amqp1_fail_condition(c,
			                     "AMQP 1.0 link closed by the "
			                     "broker",
			                     pn_link_remote_condition(l));
			break;
		case PN_SESSION_REMOTE_CLOSE:
			amqp1_fail_condition(
			    c, "AMQP 1.0 session closed by the broker",
			    pn_session_remote_condition(pn_event_session(e)));
			break;
		case PN_CONNECTION_REMOTE_CLOSE:
			amqp1_fail_condition(
			    c, "AMQP 1.0 connection closed by the broker",
			    pn_connection_remote_condition(
			        pn_event_connection(e)));
			break;
		case PN_TRANSPORT_ERROR:
			amqp1_fail_condition(
			    c, "AMQP 1.0 connection failed",
			    pn_transport_condition(pn_event_transport(e)));
			break;
		case PN_TRANSPORT_CLOSED:
			amqp1_fail(c, "AMQP 1.0 connection closed");
			break;
		default:
			break;
		}
	}
}

/* Write what the driver has, as far as the socket takes it.  0, or -1. */
static int
amqp1_write(struct amqp1 *c)
{
	for (;;) {
		pn_bytes_t out = pn_connection_driver_write_buffer(&c->drv);
		ssize_t n;

		if (out.size == 0)
			return 0;
		n = send(c->fd, out.start, out.size, MSG_NOSIGNAL);
		if (n > 0) {
			pn_connection_driver_write_done(&c->drv, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		amqp1_fail(c, "AMQP 1.0 connection: send: %s", strerror(errno));
		return -1;
	}
}

/* Read what the socket has.  0, or -1 once it failed or closed. */
static int
amqp1_read(struct amqp1 *c)
{
	for (;;) {
		pn_rwbytes_t in = pn_connection_driver_read_buffer(&c->drv);
		ssize_t n;

		if (in.size == 0)
			return 0;
		n = recv(c->fd, in.start, in.size, 0);
		if (n > 0) {
			pn_connection_driver_read_done(&c->drv, (size_t)n);
			amqp1_events(c);
			if (c->failed)
				return -1;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			amqp1_fail(c, "AMQP 1.0 connection closed by the "
			              "broker");
		else
			amqp1_fail(c, "AMQP 1.0 connection: recv: %s",
			           strerror(errno));
		return -1;
	}
}

/* Idle-timeout keepalives and checks: when the driver next needs a tick. */
static int64_t
amqp1_tick(struct amqp1 *c)
{
	return pn_transport_tick(c->drv.transport, amqp1_now_ms());
}

/* After reading or settling: events, writes, and the write watcher. */
static void
amqp1_pump(struct amqp1 *c)
{
	amqp1_events(c);
	if (c->failed || amqp1_write(c) < 0)
		return;
	amqp1_events(c);
	if (c->failed || c->loop == NULL)
		return;
	if (pn_connection_driver_write_buffer(&c->drv).size > 0)
		ev_io_start(c->loop, &c->wio);
	else
		ev_io_stop(c->loop, &c->wio);
}

static void
on_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct amqp1 *c = w->data;

	(void)loop;
	(void)revents;
	if (amqp1_read(c) == 0)
		amqp1_pump(c);
}

static void
on_write(struct ev_loop *loop, ev_io *w, int revents)
{
	struct amqp1 *c = w->data;

	(void)loop;
	(void)revents;
	amqp1_pump(c);
}

static void
on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct amqp1 *c = w->data;
	int64_t next;

	(void)revents;
	next = amqp1_tick(c);
	amqp1_pump(c);
	if (c->failed)
		return;
	if (next > 0) {
		int64_t in = next - amqp1_now_ms();
		ev_timer_set(w, in > 0 ? (double)in / 1000.0 : 0.001, 0.);
		ev_timer_start(loop, w);
	}
}

static void
on_flush(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct amqp1 *c = w->data;

	(void)loop;
	(void)revents;
	if (!c->failed)
		amqp1_pump(c);
}

void
amqp1_flush(struct amqp1 *c)
{
	if (c != NULL && !c->failed)
		amqp1_pump(c);
}

/* A TCP connection to host:port within the deadline.  The fd, or -1. */
static int
amqp1_connect_socket(const char *host, int port, int64_t deadline, char *err,
                     size_t errsize)
{
	struct addrinfo hints, *res = NULL, *ai;
	char service[16];
	int fd = -1, rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(host, service, &hints, &res);
	if (rc != 0) {
		snprintf(err, errsize, "AMQP 1.0: resolve %s: %s", host,
		         gai_strerror(rc));
		return -1;
	}
	snprintf(err, errsize, "AMQP 1.0: connect to %s:%d: no address", host,
	         port);
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		struct pollfd pfd;
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		int64_t left;

		fd = socket(ai->ai_family,
		            ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		            ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 &&
		    errno != EINPROGRESS) {
			snprintf(err, errsize, "AMQP 1.0: connect to %s:%d: %s",
			         host, port, strerror(errno));
			close(fd);
			fd = -1;
			continue;
		}
		pfd.fd = fd;
		pfd.events = POLLOUT;
		left = deadline - amqp1_now_ms();
		if (left <= 0 || poll(&pfd, 1, (int)left) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
		    soerr != 0) {
			snprintf(err, errsize, "AMQP 1.0: connect to %s:%d: %s",
			         host, port,
			         soerr ? strerror(soerr) : "timed out");
			close(fd);
			fd = -1;
			continue;
		}
		break;
	}
	freeaddrinfo(res);
	return fd;
}

/* TLS as the 0-9-1 connection has it ([broker] tls_*).  0, or -1. */
static int
amqp1_tls(struct amqp1 *c, const struct amqp1_params *p, char *err,
          size_t errsize)
{
	const struct config *cfg = p->cfg;
	int verify = cfg->broker_tls_verify == TLS_VERIFY_YES;
	unsigned char addr[sizeof(struct in6_addr)];
	/*
	 * Proton matches the certificate against DNS names only, so a URL
	 * with an IP address would never verify: for one, the chain is
	 * checked and the name is not.  The 0-9-1 connection to the same
	 * host and port, made first, has checked the IP address already
	 * (broker.c).
	 */
	int ip = inet_pton(AF_INET, p->host, addr) == 1 ||
	         inet_pton(AF_INET6, p->host, addr) == 1;
	pn_ssl_verify_mode_t mode = !verify ? PN_SSL_ANONYMOUS_PEER
	                            : ip    ? PN_SSL_VERIFY_PEER
	                                    : PN_SSL_VERIFY_PEER_NAME;
	const char *cas = cfg->broker_tls_ca_file[0] ? cfg->broker_tls_ca_file
	                                             : AMQP1_SYSTEM_CAS;
	pn_ssl_t *ssl;

	c->ssl = pn_ssl_domain(PN_SSL_MODE_CLIENT);
	if (c->ssl == NULL) {
		snprintf(err, errsize, "AMQP 1.0: no TLS in Qpid Proton");
		return -1;
	}
	if (verify && pn_ssl_domain_set_trusted_ca_db(c->ssl, cas) != 0) {
		snprintf(err, errsize, "AMQP 1.0: cannot read CA file %s", cas);
		return -1;
	}
	if (pn_ssl_domain_set_peer_authentication(c->ssl, mode, NULL) != 0) {
		snprintf(err, errsize, "AMQP 1.0: cannot set TLS verification");
		return -1;
	}
	if (cfg->broker_tls_cert_file[0] != '\0' &&
	    pn_ssl_domain_set_credentials(c->ssl, cfg->broker_tls_cert_file,
	                                  cfg->broker_tls_key_file,
	                                  NULL) != 0) {
		snprintf(err, errsize,
		         "AMQP 1.0: broker.tls_cert_file %s / tls_key_file %s: "
		         "cannot read a certificate and its key",
		         cfg->broker_tls_cert_file, cfg->broker_tls_key_file);
		return -1;
	}
	ssl = pn_ssl(c->drv.transport);
	if (ssl == NULL || pn_ssl_init(ssl, c->ssl, NULL) != 0) {
		snprintf(err, errsize, "AMQP 1.0: cannot start TLS");
		return -1;
	}
	pn_ssl_set_peer_hostname(ssl, p->host);
	return 0;
}

/* "/queues/NAME" with NAME percent-encoded (RabbitMQ's v2 addresses). */
static void
amqp1_address(const char *queue, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = (size_t)snprintf(out, size, "/queues/");

	for (const unsigned char *q = (const unsigned char *)queue;
	     *q != '\0' && o + 4 < size; q++) {
		if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
		    (*q >= '0' && *q <= '9') || *q == '-' || *q == '.' ||
		    *q == '_' || *q == '~') {
			out[o++] = (char)*q;
		} else {
			out[o++] = '%';
			out[o++] = hex[*q >> 4];
			out[o++] = hex[*q & 15];
		}
	}
	out[o] = '\0';
}

/* amqp1_block's conditions. */
static int
amqp1_reached(const struct amqp1 *c, const unsigned *count, unsigned want)
{
	(void)c;
	return *count >= want;
}

static int
amqp1_closed(const struct amqp1 *c, const unsigned *count, unsigned want)
{
	(void)count;
	(void)want;
	return (pn_connection_state(c->drv.connection) & PN_REMOTE_CLOSED) != 0;
}

/*
 * The connection run by hand, blocking in poll, until done (*count reaches
 * want, say), the connection fails, or the deadline (mono ms) passes,
 * which fails it with `what`.
 */
static void
amqp1_block(struct amqp1 *c,
            int (*done)(const struct amqp1 *, const unsigned *, unsigned),
            const unsigned *count, unsigned want, int64_t deadline,
            const char *what)
{
	while (!c->failed && !done(c, count, want)) {
		struct pollfd pfd;
		int64_t left = deadline - amqp1_now_ms();

		amqp1_pump(c);
		if (c->failed || done(c, count, want))
			break;
		if (left <= 0) {
			amqp1_fail(c, "AMQP 1.0: timed out %s", what);
			break;
		}
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		if (pn_connection_driver_write_buffer(&c->drv).size > 0)
			pfd.events |= POLLOUT;
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
			amqp1_fail(c, "AMQP 1.0: poll: %s", strerror(errno));
			break;
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
			amqp1_read(c);
	}
}

int
amqp1_wait(struct amqp1 *c, const unsigned *count, unsigned want,
           int64_t timeout_ms, char *err, size_t errsize)
{
	amqp1_block(c, amqp1_reached, count, want, amqp1_now_ms() + timeout_ms,
	            "waiting for a delivery");
	if (!c->failed)
		return 0;
	snprintf(err, errsize, "%s", c->why);
	return -1;
}

/* Link i, attached afresh to its queue, with the credit granted. */
static void
amqp1_link_open(struct amqp1 *c, unsigned i)
{
	struct amqp1_link *lk = &c->links[i];
	char name[64];
	pn_link_t *l;

	snprintf(name, sizeof(name), "cascade-hold-%u-%u", i, c->relinks);
	l = pn_receiver(c->session, name);
	pn_terminus_set_address(pn_link_source(l), lk->address);
	/* At least once: the broker sends unsettled, we settle. */
	pn_link_set_snd_settle_mode(l, PN_SND_UNSETTLED);
	pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
	pn_link_open(l);
	if (c->credit > 0)
		pn_link_flow(l, (int)c->credit);
	lk->pn = l;
	lk->len = 0;
	lk->unsettled = 0;
	lk->opened = amqp1_now_ms();
}

unsigned
amqp1_relink_idle(struct amqp1 *c, int64_t age_ms)
{
	int64_t now = amqp1_now_ms();
	unsigned n = 0;

	if (c == NULL || c->failed || c->detaching)
		return 0;
	for (unsigned i = 0; i < c->nlinks; i++) {
		struct amqp1_link *lk = &c->links[i];

		if (lk->unsettled > 0 || lk->len > 0 ||
		    now - lk->opened < age_ms ||
		    c->nretiring >= AMQP1_MAX_LINKS)
			continue;
		pn_link_close(lk->pn);
		c->retiring[c->nretiring++] = lk->pn;
		c->relinks++;
		amqp1_link_open(c, i);
		n++;
	}
	if (n > 0)
		amqp1_flush(c);
	return n;
}

static int
amqp1_all_detached(const struct amqp1 *c, const unsigned *count, unsigned want)
{
	(void)count;
	(void)want;
	return c->detached >= c->nlinks && c->nretiring == 0;
}

struct amqp1 *
amqp1_open(const struct amqp1_params *p, const char *const *queues, unsigned n,
           unsigned credit, int64_t timeout_ms, const struct amqp1_handler *h,
           void *ctx, char *err, size_t errsize)
{
	int64_t deadline = amqp1_now_ms() + timeout_ms;
	struct amqp1 *c;
	pn_session_t *s;
	char name[64], vhost[300];

	if (n > AMQP1_MAX_LINKS) {
		snprintf(err, errsize, "AMQP 1.0: too many queues");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL || pn_connection_driver_init(&c->drv, NULL, NULL) != 0) {
		snprintf(err, errsize, "out of memory");
		free(c);
		return NULL;
	}
	c->fd = -1;
	c->h = h;
	c->ctx = ctx;
	c->gen = ++amqp1_generations;
	snprintf(name, sizeof(name), "cascade-%ld-%llu", (long)getpid(),
	         (unsigned long long)c->gen);
	pn_connection_set_container(c->drv.connection, name);
	/* RabbitMQ 4.x picks the virtual host by the open's hostname. */
	snprintf(vhost, sizeof(vhost), "vhost:%s", p->vhost);
	pn_connection_set_hostname(c->drv.connection, vhost);
	pn_connection_set_user(c->drv.connection, p->user);
	pn_connection_set_password(c->drv.connection, p->password);
	/* Debian's Proton has no Cyrus SASL: its own PLAIN, which it offers
	 * in the clear only when told to (as the 0-9-1 login does). */
	pn_sasl_set_allow_insecure_mechs(pn_sasl(c->drv.transport), true);
	pn_sasl_allowed_mechs(pn_sasl(c->drv.transport), "PLAIN");
	if (p->cfg->broker_heartbeat > 0)
		pn_transport_set_idle_timeout(
		    c->drv.transport,
		    (pn_millis_t)(p->cfg->broker_heartbeat * 2));
	if (p->tls && amqp1_tls(c, p, err, errsize) < 0)
		goto fail;
	pn_connection_open(c->drv.connection);
	s = pn_session(c->drv.connection);
	pn_session_open(s);
	c->session = s;
	c->credit = credit;
	for (unsigned i = 0; i < n; i++) {
		amqp1_address(queues[i], c->links[i].address,
		              sizeof(c->links[i].address));
		amqp1_link_open(c, i);
	}
	c->nlinks = n;
	c->fd = amqp1_connect_socket(p->host, p->port, deadline, err, errsize);
	if (c->fd < 0)
		goto fail;
	/* Until every link is attached. */
	amqp1_block(c, amqp1_reached, &c->attached, n, deadline,
	            "opening the links");
	if (c->failed) {
		snprintf(err, errsize, "%s", c->why);
		goto fail;
	}
	return c;
fail:
	amqp1_close(c);
	return NULL;
}

void
amqp1_grant(struct amqp1 *c, unsigned credit)
{
	if (c == NULL || c->failed || credit == 0)
		return;
	c->credit += credit;
	for (unsigned i = 0; i < c->nlinks; i++)
		pn_link_flow(c->links[i].pn, (int)credit);
	amqp1_flush(c);
}

void
amqp1_start(struct amqp1 *c, struct ev_loop *loop)
{
	c->loop = loop;
	ev_io_init(&c->rio, on_read, c->fd, EV_READ);
	ev_io_init(&c->wio, on_write, c->fd, EV_WRITE);
	ev_init(&c->tick, on_tick);
	ev_prepare_init(&c->flush, on_flush);
	c->rio.data = c->wio.data = c->tick.data = c->flush.data = c;
	ev_io_start(loop, &c->rio);
	ev_prepare_start(loop, &c->flush);
	ev_timer_set(&c->tick, 0.001, 0.);
	ev_timer_start(loop, &c->tick);
	/* What arrived while opening. */
	amqp1_read(c);
	amqp1_pump(c);
}

void
amqp1_shutdown(struct amqp1 *c, int64_t timeout_ms)
{
	if (c == NULL)
		return;
	if (c->loop != NULL) {
		amqp1_unwatch(c);
		c->loop = NULL; /* from here on, no handler runs */
	}
	if (!c->failed) {
		int64_t deadline = amqp1_now_ms() + timeout_ms;

		/* Detach each link first and wait for the broker's detach:
		 * RabbitMQ sends the settles it still holds back for a
		 * consumer when the link goes, not when the session ends, and
		 * returns the rest without counting a failed delivery. */
		c->detaching = 1;
		for (unsigned i = 0; i < c->nlinks; i++)
			pn_link_close(c->links[i].pn);
		amqp1_block(c, amqp1_all_detached, NULL, 0, deadline,
		            "detaching");
		if (!c->failed) {
			pn_connection_close(c->drv.connection);
			amqp1_block(c, amqp1_closed, NULL, 0, deadline,
			            "closing");
		}
	}
	amqp1_close(c);
}

void
amqp1_close(struct amqp1 *c)
{
	if (c == NULL)
		return;
	if (c->loop != NULL)
		amqp1_unwatch(c);
	if (c->fd >= 0)
		close(c->fd);
	pn_connection_driver_destroy(&c->drv);
	if (c->ssl != NULL)
		pn_ssl_domain_free(c->ssl);
	for (unsigned i = 0; i < c->nlinks; i++)
		free(c->links[i].buf);
	free(c);
}

/* The delivery dv names, when it is of this connection and still open. */
static pn_delivery_t *
amqp1_live(struct amqp1 *c, struct amqp1_delivery dv)
{
	if (c == NULL || c->failed || dv.gen != c->gen || dv.pn == NULL)
		return NULL;
	return dv.pn;
}

static void
amqp1_settle(struct amqp1 *c, pn_delivery_t *d, uint64_t outcome)
{
	pn_link_t *l = pn_delivery_link(d);
	struct amqp1_link *lk;
	unsigned index;

	pn_delivery_update(d, outcome);
	pn_delivery_settle(d);
	c->unsettled--;
	if ((lk = amqp1_link_of(c, l, &index)) != NULL && lk->unsettled > 0)
		lk->unsettled--;
	pn_link_flow(l, 1);
}

void
amqp1_accept(struct amqp1 *c, struct amqp1_delivery dv)
{
	pn_delivery_t *d = amqp1_live(c, dv);

	if (d != NULL)
		amqp1_settle(c, d, PN_ACCEPTED);
}

void
amqp1_release(struct amqp1 *c, struct amqp1_delivery dv)
{
	pn_delivery_t *d = amqp1_live(c, dv);

	if (d != NULL)
		amqp1_settle(c, d, PN_RELEASED);
}

void
amqp1_delay(struct amqp1 *c, struct amqp1_delivery dv, int64_t due_ms)
{
	pn_delivery_t *d = amqp1_live(c, dv);
	pn_disposition_t *disp;
	pn_data_t *ann;

	if (d == NULL)
		return;
	disp = pn_delivery_local(d);
	/* Not failed: the delivery count stays, so the delivery limit never
	 * drops a message that only waits. */
	pn_disposition_set_failed(disp, false);
	pn_disposition_set_undeliverable(disp, false);
	ann = pn_disposition_annotations(disp);
	pn_data_clear(ann);
	pn_data_put_map(ann);
	pn_data_enter(ann);
	pn_data_put_symbol(
	    ann, pn_bytes(strlen(AMQP1_DELIVERY_TIME), AMQP1_DELIVERY_TIME));
	pn_data_put_timestamp(ann, due_ms);
	pn_data_exit(ann);
	amqp1_settle(c, d, PN_MODIFIED);
}

unsigned
amqp1_unsettled(const struct amqp1 *c)
{
	return c ? c->unsettled : 0;
}

/* AMQP 1.0 section descriptors (the spec's part 3.2). */
#define SECTION_HEADER 0x70
#define SECTION_MESSAGE_ANNOTATIONS 0x72
#define SECTION_PROPERTIES 0x73
#define SECTION_DATA 0x75
#define SECTION_SEQUENCE 0x76
#define SECTION_VALUE 0x77

/* The header's delivery-count: its fifth field, when present. */
static uint32_t
amqp1_header_count(pn_data_t *d)
{
	uint32_t count = 0;

	if (pn_data_type(d) != PN_LIST)
		return 0;
	pn_data_enter(d);
	for (int i = 0; i < 5 && pn_data_next(d); i++)
		if (i == 4 && pn_data_type(d) == PN_UINT)
			count = pn_data_get_uint(d);
	pn_data_exit(d);
	return count;
}

/* The properties' user-id (their second field), into msg. */
static void
amqp1_properties_user(pn_data_t *d, struct amqp1_message *msg)
{
	if (pn_data_type(d) != PN_LIST)
		return;
	pn_data_enter(d);
	if (pn_data_next(d) && pn_data_next(d) &&
	    pn_data_type(d) == PN_BINARY) {
		pn_bytes_t b = pn_data_get_binary(d);
		if (b.size > 0 && b.size < sizeof(msg->user_id)) {
			memcpy(msg->user_id, b.start, b.size);
			msg->user_id_len = b.size;
		}
	}
	pn_data_exit(d);
}

/* The integer value of key x-opt-delivery-time in an annotations map. */
static int64_t
amqp1_annotation_time(pn_data_t *d)
{
	int64_t t = 0;

	if (pn_data_type(d) != PN_MAP)
		return 0;
	pn_data_enter(d);
	while (pn_data_next(d)) {
		int match = 0;
		if (pn_data_type(d) == PN_SYMBOL) {
			pn_bytes_t k = pn_data_get_symbol(d);
			match =
			    k.size == strlen(AMQP1_DELIVERY_TIME) &&
			    memcmp(k.start, AMQP1_DELIVERY_TIME, k.size) == 0;
		}
		if (!pn_data_next(d))
			break;
		if (!match)
			continue;
		switch (pn_data_type(d)) {
		case PN_TIMESTAMP:
			t = pn_data_get_timestamp(d);
			break;
		case PN_LONG:
			t = pn_data_get_long(d);
			break;
		case PN_ULONG:
			t = (int64_t)pn_data_get_ulong(d);
			break;
		default:
			break;
		}
	}
	pn_data_exit(d);
	return t;
}

int
amqp1_parse(const char *bytes, size_t len, struct amqp1_message *msg,
            const char **why)
{
	pn_data_t *d = pn_data(16);
	size_t off = 0;
	int bodies = 0, rc = -1;

	memset(msg, 0, sizeof(*msg));
	*why = "out of memory";
	if (d == NULL)
		return -1;
	while (off < len) {
		ssize_t n;
		uint64_t code;

		pn_data_clear(d);
		n = pn_data_decode(d, bytes + off, len - off);
		if (n <= 0) {
			*why = "the AMQP 1.0 message does not decode";
			goto out;
		}
		pn_data_rewind(d);
		if (!pn_data_next(d) || pn_data_type(d) != PN_DESCRIBED) {
			*why = "an AMQP 1.0 section is not a described type";
			goto out;
		}
		pn_data_enter(d);
		pn_data_next(d);
		if (pn_data_type(d) != PN_ULONG) {
			*why = "an AMQP 1.0 section has a symbolic descriptor";
			goto out;
		}
		code = pn_data_get_ulong(d);
		pn_data_next(d);
		if (code == SECTION_HEADER) {
			msg->delivery_count = amqp1_header_count(d);
		} else if (code == SECTION_MESSAGE_ANNOTATIONS) {
			msg->delivery_time = amqp1_annotation_time(d);
		} else if (code == SECTION_PROPERTIES) {
			amqp1_properties_user(d, msg);
		} else if (code == SECTION_DATA) {
			pn_bytes_t b;
			if (pn_data_type(d) != PN_BINARY) {
				*why = "an AMQP 1.0 data section is not binary";
				goto out;
			}
			b = pn_data_get_binary(d);
			/* The binary is the section's last bytes: point into
			 * the caller's copy, not the codec's. */
			msg->body = bytes + off + (size_t)n - b.size;
			msg->body_len = b.size;
			bodies++;
		} else if (code == SECTION_SEQUENCE || code == SECTION_VALUE) {
			*why = "the AMQP 1.0 body is not a data section";
			goto out;
		}
		off += (size_t)n;
	}
	if (bodies != 1) {
		*why = bodies ? "the AMQP 1.0 body has several data sections"
		              : "the AMQP 1.0 message has no body";
		goto out;
	}
	rc = 0;
	*why = NULL;
out:
	pn_data_free(d);
	return rc;
}
