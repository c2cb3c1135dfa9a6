/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auto's canary (daemon_hold.c decides what its answer means): does a
 * quorum queue on this broker hold a message given back with
 * x-opt-delivery-time until then?  A queue of its own, named for this
 * attempt alone (P.canary.HOST.PID.RANDOM: a container restarted keeps
 * its host name and PID 1, and a queue an earlier process left must not
 * answer), one message, one return.
 *
 * It runs in a thread of its own, on connections of its own, one at a
 * time (so a user limited to two connections, the daemon's and native
 * waiting's, can run it): the event loop goes on meanwhile (metrics,
 * health, deliveries over the ladder), however long the broker takes to
 * answer or refuse, up to about 40 s.  The answer reaches the loop through
 * the ev_async daemon_hold set (canary_async).
 *
 * Owns: canary (the job while it runs).
 * Calls into: nothing of the daemon's.
 */
#include "daemon_int.h"

#include "amqp_compat.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "broker.h"
#include "duration.h"

/* The canary's wait, and how long each step may take. */
#define CANARY_DELAY_MS 300
#define CANARY_TIMEOUT_MS 10000

struct canary_job {
	pthread_mutex_t lock;
	int orphaned; /* the daemon ended first: the thread frees it */
	int done;     /* rc and why are set */
	struct ev_loop *loop;
	ev_async *async;
	struct config cfg; /* a copy: the thread outlives nothing it reads */
	char url[CONFIG_STR_MAX];
	char queue[TOPOLOGY_NAME_MAX];
	int rc; /* 1 yes, 0 no, -1 could not tell */
	char why[512];
};

/* What the AMQP 1.0 handler sees of the canary message. */
struct canary_seen {
	unsigned got;
	struct amqp1_delivery dv;
	int64_t at; /* wall ms of the last delivery */
};

static void
canary_delivery(void *ctx, unsigned link, struct amqp1_delivery dv,
                const char *bytes, size_t len)
{
	struct canary_seen *c = ctx;

	(void)link;
	(void)bytes;
	(void)len;
	c->got++;
	c->dv = dv;
	c->at = duration_wall_ms();
}

static void
canary_failed(void *ctx, const char *why)
{
	(void)ctx;
	(void)why;
}

static const struct amqp1_handler canary_handler = {canary_delivery,
                                                    canary_failed};

static void
canary_close(amqp_connection_state_t conn)
{
	amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(conn);
}

/* Publish the canary message, confirmed.  0, or -1 with err. */
static int
canary_publish(amqp_connection_state_t conn, const char *queue, char *err,
               size_t errsize)
{
	amqp_basic_properties_t props;
	struct timeval tv = {CANARY_TIMEOUT_MS / 1000, 0};
	amqp_frame_t f;

	amqp_confirm_select(conn, BROKER_CH_PUB);
	if (broker_check(conn, "confirm.select", err, errsize) < 0)
		return -1;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG;
	props.content_type = amqp_cstring_bytes("text/plain");
	if (amqp_basic_publish(conn, BROKER_CH_PUB, amqp_empty_bytes,
	                       amqp_cstring_bytes(queue), 0, 0, &props,
	                       amqp_cstring_bytes("cascade canary")) !=
	    AMQP_STATUS_OK) {
		snprintf(err, errsize, "publish the canary: connection lost");
		return -1;
	}
	for (;;) {
		if (amqp_simple_wait_frame_noblock(conn, &f, &tv) !=
		    AMQP_STATUS_OK) {
			snprintf(err, errsize,
			         "publish the canary: no confirm in %d s",
			         CANARY_TIMEOUT_MS / 1000);
			return -1;
		}
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id == AMQP_BASIC_ACK_METHOD)
			return 0;
		if (f.payload.method.id == AMQP_BASIC_NACK_METHOD ||
		    f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
		    f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
			snprintf(err, errsize,
			         "publish the canary: the broker refused it");
			return -1;
		}
	}
}

/* Its queue, declared and holding the canary message: over 0-9-1, on a
 * connection closed before the AMQP 1.0 one opens.  0, or -1 with err. */
static int
canary_prepare(const struct canary_job *j, char *err, size_t errsize)
{
	amqp_table_entry_t e[2];
	amqp_connection_state_t conn;
	char why[400];
	int rc = -1;

	conn = broker_connect_url(&j->cfg, j->url, why, sizeof(why));
	if (conn == NULL) {
		snprintf(err, errsize, "AMQP 0-9-1 connection: %s", why);
		return -1;
	}
	e[0].key = amqp_cstring_bytes("x-queue-type");
	e[0].value.kind = AMQP_FIELD_KIND_UTF8;
	e[0].value.value.bytes = amqp_cstring_bytes("quorum");
	e[1].key = amqp_cstring_bytes("x-expires");
	e[1].value.kind = AMQP_FIELD_KIND_I64;
	e[1].value.value.i64 = 60000;
	amqp_queue_declare(conn, BROKER_CH_WORK, amqp_cstring_bytes(j->queue),
	                   0, 1, 0, 0, (amqp_table_t){2, e});
	if (broker_check(conn, "declare the canary queue", err, errsize) == 0 &&
	    canary_publish(conn, j->queue, err, errsize) == 0)
		rc = 0;
	canary_close(conn);
	return rc;
}

/* Done with its queue, on a connection of its own again: an error leaves
 * it to its x-expires. */
static void
canary_delete(const struct canary_job *j)
{
	amqp_connection_state_t conn;
	char why[400];

	conn = broker_connect_url(&j->cfg, j->url, why, sizeof(why));
	if (conn == NULL)
		return;
	amqp_queue_delete(conn, BROKER_CH_WORK, amqp_cstring_bytes(j->queue), 0,
	                  0);
	canary_close(conn);
}

/* 1 yes, 0 no (with why in err), -1 could not tell (err). */
static int
canary_try(const struct canary_job *j, char *err, size_t errsize)
{
	const char *queues[1] = {j->queue};
	struct amqp1_params p;
	struct canary_seen c = {0};
	struct amqp1 *a;
	int64_t due;
	int rc = -1;

	if (canary_prepare(j, err, errsize) < 0)
		return -1;
	if (amqp1_params_from_url(&p, &j->cfg, j->url, err, errsize) < 0)
		goto out;
	a = amqp1_open(&p, queues, 1, 1, CANARY_TIMEOUT_MS, &canary_handler, &c,
	               err, errsize);
	if (a == NULL)
		goto out;
	if (amqp1_wait(a, &c.got, 1, CANARY_TIMEOUT_MS, err, errsize) < 0)
		goto close;
	due = duration_wall_ms() + CANARY_DELAY_MS;
	amqp1_delay(a, c.dv, due);
	if (amqp1_wait(a, &c.got, 2, CANARY_TIMEOUT_MS, err, errsize) < 0)
		goto close;
	amqp1_accept(a, c.dv);
	amqp1_flush(a);
	if (c.at < due) {
		snprintf(err, errsize,
		         "a quorum queue gave a message back %" PRId64
		         " ms before its x-opt-delivery-time",
		         due - c.at);
		rc = 0;
	} else {
		rc = 1;
	}
close:
	amqp1_close(a);
out:
	canary_delete(j);
	return rc;
}

static void *
canary_run(void *arg)
{
	struct canary_job *j = arg;
	int rc = canary_try(j, j->why, sizeof(j->why));

	pthread_mutex_lock(&j->lock);
	if (j->orphaned) {
		pthread_mutex_unlock(&j->lock);
		pthread_mutex_destroy(&j->lock);
		free(j);
		return NULL;
	}
	j->rc = rc;
	j->done = 1;
	ev_async_send(j->loop, j->async);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

int
daemon_canary_start(struct daemon *d, const char *url, char *err,
                    size_t errsize)
{
	struct canary_job *j;
	pthread_attr_t attr;
	char host[64];
	uint64_t nonce = 0;
	int rc;

	if (d->canary != NULL) {
		snprintf(err, errsize, "a canary is running");
		return -1;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		snprintf(err, errsize, "out of memory");
		return -1;
	}
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "host");
	host[sizeof(host) - 1] = '\0';
	/* Unique to this attempt: the time when getrandom has nothing. */
	if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
		nonce = (uint64_t)duration_wall_ms() ^ (uint64_t)rand();
	snprintf(j->queue, sizeof(j->queue),
	         "%.160s.canary.%.40s.%ld.%016" PRIx64, d->cfg->topology_prefix,
	         host, (long)getpid(), nonce);
	j->cfg = *d->cfg;
	/* Nobody answers heartbeats while the thread waits: none. */
	j->cfg.broker_heartbeat = 0;
	snprintf(j->url, sizeof(j->url), "%s", url);
	j->loop = d->loop;
	j->async = &d->canary_async;
	pthread_mutex_init(&j->lock, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&(pthread_t){0}, &attr, canary_run, j);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_destroy(&j->lock);
		free(j);
		snprintf(err, errsize, "cannot start a thread: %s",
		         strerror(rc));
		return -1;
	}
	d->canary = j;
	return 0;
}

int
daemon_canary_answer(struct daemon *d, char *why, size_t whysize)
{
	struct canary_job *j = d->canary;
	int rc;

	if (j == NULL)
		return -2;
	pthread_mutex_lock(&j->lock);
	if (!j->done) {
		pthread_mutex_unlock(&j->lock);
		return -2;
	}
	rc = j->rc;
	snprintf(why, whysize, "%s", j->why);
	pthread_mutex_unlock(&j->lock);
	pthread_mutex_destroy(&j->lock);
	free(j);
	d->canary = NULL;
	return rc;
}

void
daemon_canary_orphan(struct daemon *d)
{
	struct canary_job *j = d->canary;
	int done;

	if (j == NULL)
		return;
	d->canary = NULL;
	pthread_mutex_lock(&j->lock);
	done = j->done;
	j->orphaned = 1;
	pthread_mutex_unlock(&j->lock);
	/* Finished already: the thread has let go of it. */
	if (done) {
		pthread_mutex_destroy(&j->lock);
		free(j);
	}
}
