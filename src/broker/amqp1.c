/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An AMQP 1.0 consumer on Qpid Proton-C's connection driver (amqp1.h): the
 * connection.  A TCP socket of our own, TLS as the 0-9-1 connection has
 * it, the driver pumped by hand (bytes read and written, the idle-timeout
 * tick, the events dispatched), by libev watchers once started and by a
 * blocking poll while opening and shutting down.  The links and their
 * deliveries are amqp1_link.c's, the message inside amqp1_message.c's
 * (amqp1_int.h).
 */
#include "amqp1_int.h"

#include "amqp_compat.h"
#include <errno.h>
#include <ev.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/ssl.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include "config.h"
#include "duration.h"

/* The default CA store, when [broker] tls_ca_file is empty. */
#define AMQP1_SYSTEM_CAS "/etc/ssl/certs/ca-certificates.crt"

/* Every connection gets the next: a settle names the one it is for.
 * Atomic: the daemon's canary opens one from a thread of its own. */
static _Atomic uint64_t amqp1_generations;

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
			if (amqp1_read_delivery(c, pn_event_delivery(e)) < 0)
				amqp1_fail(c, "out of memory");
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
	return pn_transport_tick(c->drv.transport, duration_mono_ms());
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
		int64_t in = next - duration_mono_ms();
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
		left = deadline - duration_mono_ms();
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
	 * (broker_connect.c).
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
		int64_t left = deadline - duration_mono_ms();

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
	amqp1_block(c, amqp1_reached, count, want,
	            duration_mono_ms() + timeout_ms, "waiting for a delivery");
	if (!c->failed)
		return 0;
	snprintf(err, errsize, "%s", c->why);
	return -1;
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
	int64_t deadline = duration_mono_ms() + timeout_ms;
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
	c->gen = atomic_fetch_add(&amqp1_generations, 1) + 1;
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
	amqp1_links_flow(c, credit);
	amqp1_flush(c);
}

unsigned
amqp1_relink_idle(struct amqp1 *c, int64_t age_ms)
{
	unsigned n = amqp1_links_relink(c, age_ms);

	if (n > 0)
		amqp1_flush(c);
	return n;
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
		int64_t deadline = duration_mono_ms() + timeout_ms;

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
