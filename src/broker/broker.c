/* SPDX-License-Identifier: Apache-2.0 */
/* Connection set-up (socket, login, channels); the tools' confirms. */
#include "broker.h"

#include "duration.h"
#include "headers.h"

#ifdef CASCADE_RABBITMQ_C_NEW_HEADERS
#include <rabbitmq-c/ssl_socket.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "version.h"
#include "wirefilter.h"

void
broker_close_reason(const amqp_method_t *m, char *err, size_t size)
{
	if (m->id == AMQP_CHANNEL_CLOSE_METHOD) {
		const amqp_channel_close_t *cl = m->decoded;
		snprintf(err, size, "channel closed by the broker: %u %.*s",
		         cl->reply_code, (int)cl->reply_text.len,
		         (const char *)cl->reply_text.bytes);
	} else {
		const amqp_connection_close_t *cl = m->decoded;
		snprintf(err, size, "connection closed by the broker: %u %.*s",
		         cl->reply_code, (int)cl->reply_text.len,
		         (const char *)cl->reply_text.bytes);
	}
}

void
broker_reply_string(amqp_rpc_reply_t r, const char *what, char *buf,
                    size_t size)
{
	switch (r.reply_type) {
	case AMQP_RESPONSE_NORMAL:
		snprintf(buf, size, "%s: ok", what);
		return;
	case AMQP_RESPONSE_NONE:
		snprintf(buf, size, "%s: no reply", what);
		return;
	case AMQP_RESPONSE_LIBRARY_EXCEPTION:
		snprintf(buf, size, "%s: %s", what,
		         amqp_error_string2(r.library_error));
		return;
	case AMQP_RESPONSE_SERVER_EXCEPTION:
		if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
			amqp_connection_close_t *c = r.reply.decoded;
			snprintf(buf, size, "%s: connection closed: %u %.*s",
			         what, c->reply_code, (int)c->reply_text.len,
			         (const char *)c->reply_text.bytes);
		} else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
			amqp_channel_close_t *c = r.reply.decoded;
			snprintf(buf, size, "%s: channel closed: %u %.*s", what,
			         c->reply_code, (int)c->reply_text.len,
			         (const char *)c->reply_text.bytes);
		} else {
			snprintf(buf, size, "%s: unexpected method 0x%08x",
			         what, r.reply.id);
		}
		return;
	}
	snprintf(buf, size, "%s: unknown reply", what);
}

int
broker_reply_code(amqp_connection_state_t conn)
{
	amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);

	if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION)
		return 0;
	if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD)
		return ((amqp_channel_close_t *)r.reply.decoded)->reply_code;
	if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)
		return ((amqp_connection_close_t *)r.reply.decoded)->reply_code;
	return 0;
}

int
broker_version(amqp_connection_state_t conn)
{
	const amqp_table_t *p = amqp_get_server_properties(conn);
	const amqp_field_value_t *v = headers_find(p, "version");
	amqp_bytes_t b;
	int part[2] = {0, 0}, k = 0;

	if (v == NULL || headers_string(v, &b) < 0)
		return 0;
	for (size_t i = 0; i < b.len && i < 12 && k < 2; i++) {
		char c = ((const char *)b.bytes)[i];
		if (c == '.') {
			k++;
			continue;
		}
		if (c < '0' || c > '9' || part[k] > 99)
			break;
		part[k] = part[k] * 10 + (c - '0');
	}
	return part[0] * 1000 + part[1];
}

int
broker_major_version(amqp_connection_state_t conn)
{
	return broker_version(conn) / 1000;
}

int
broker_check(amqp_connection_state_t conn, const char *what, char *err,
             size_t errsize)
{
	amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);

	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return 0;
	broker_reply_string(r, what, err, errsize);
	return -1;
}

/*
 * rabbitmq-c reports any TLS failure as "a SSL error occurred"; OpenSSL's
 * error queue says which (a refused client certificate, an unknown CA), so
 * append its last entry to err and empty the queue.
 */
static void
broker_tls_detail(char *err, size_t errsize)
{
	unsigned long e = ERR_peek_last_error();
	size_t len = strlen(err);

	if (e != 0 && len + 4 < errsize) {
		const char *reason = ERR_reason_error_string(e);
		if (reason != NULL)
			snprintf(err + len, errsize - len, " (%s)", reason);
	}
	ERR_clear_error();
}

/*
 * An OpenSSL socket for amqps://.  Without tls_ca_file the system's CA store
 * is used; tls_verify = no turns off both the chain and the host-name check.
 */
static amqp_socket_t *
broker_tls_socket(amqp_connection_state_t conn, const struct config *cfg,
                  const struct amqp_connection_info *info, char *err,
                  size_t errsize)
{
	amqp_socket_t *sock = amqp_ssl_socket_new(conn);
	int verify = cfg->broker_tls_verify == TLS_VERIFY_YES;

	if (sock == NULL) {
		snprintf(err, errsize, "cannot create TLS socket");
		return NULL;
	}
	amqp_ssl_socket_set_verify_peer(sock, verify);
	amqp_ssl_socket_set_verify_hostname(sock, verify);
	/*
	 * rabbitmq-c's own host-name check reads only DNS names (SAN dNSName
	 * and CN), so a URL with an IP address never matches a certificate's
	 * IP address SAN.  For an IP address, OpenSSL checks it during chain
	 * verification instead; a mismatch then reads "SSL peer cert
	 * verification failed".
	 */
	if (verify) {
		unsigned char addr[sizeof(struct in6_addr)];

		if (inet_pton(AF_INET, info->host, addr) == 1 ||
		    inet_pton(AF_INET6, info->host, addr) == 1) {
			SSL_CTX *ctx = amqp_ssl_socket_get_context(sock);
			if (ctx == NULL ||
			    X509_VERIFY_PARAM_set1_ip_asc(
			        SSL_CTX_get0_param(ctx), info->host) != 1) {
				snprintf(err, errsize,
				         "cannot set up the check of IP "
				         "address %s",
				         info->host);
				return NULL;
			}
			amqp_ssl_socket_set_verify_hostname(sock, 0);
		}
	}
	if (cfg->broker_tls_ca_file[0] != '\0') {
		if (amqp_ssl_socket_set_cacert(sock, cfg->broker_tls_ca_file) !=
		    AMQP_STATUS_OK) {
			snprintf(err, errsize,
			         "broker.tls_ca_file %s: cannot read PEM "
			         "certificates",
			         cfg->broker_tls_ca_file);
			return NULL;
		}
	} else if (verify) {
		SSL_CTX *ctx = amqp_ssl_socket_get_context(sock);
		if (ctx == NULL || SSL_CTX_set_default_verify_paths(ctx) != 1) {
			snprintf(err, errsize,
			         "cannot load the system's CA "
			         "certificates");
			return NULL;
		}
	}
	if (cfg->broker_tls_cert_file[0] != '\0' &&
	    amqp_ssl_socket_set_key(sock, cfg->broker_tls_cert_file,
	                            cfg->broker_tls_key_file) !=
	        AMQP_STATUS_OK) {
		snprintf(err, errsize,
		         "broker.tls_cert_file %s / tls_key_file %s: cannot "
		         "read a certificate and its key",
		         cfg->broker_tls_cert_file, cfg->broker_tls_key_file);
		return NULL;
	}
	return sock;
}

amqp_connection_state_t
broker_connect(const struct config *cfg, char *err, size_t errsize)
{
	char url[CONFIG_STR_MAX];

	return broker_connect_which(cfg, url, sizeof(url), err, errsize);
}

amqp_connection_state_t
broker_connect_which(const struct config *cfg, char *url, size_t urlsize,
                     char *err, size_t errsize)
{
	amqp_connection_state_t conn = NULL;
	char masked[CONFIG_STR_MAX], why[512];
	size_t len = 0;

	if (errsize > 0)
		err[0] = '\0';
	/* Each URL in turn; the error names every one that failed. */
	for (unsigned i = 0;
	     conn == NULL && config_broker_url(cfg, i, url, urlsize) == 0;
	     i++) {
		conn = broker_connect_url(cfg, url, why, sizeof(why));
		if (conn == NULL && len < errsize) {
			config_mask_url(url, masked, sizeof(masked));
			len += (size_t)snprintf(err + len, errsize - len,
			                        "%s%s: %s", i ? "; " : "",
			                        masked, why);
		}
	}
	return conn;
}

/*
 * Connect to the broker info names, logging in as user with password (the
 * URL's own, or a console login's: broker_connect_user), asking for a
 * heartbeat of heartbeat_s.  *refused is set when the broker answered the
 * login with a close (bad credentials, no access to the vhost): another
 * node of the same cluster would answer the same.
 */
static amqp_connection_state_t
broker_connect_as(const struct config *cfg,
                  const struct amqp_connection_info *info, const char *user,
                  const char *password, int heartbeat_s, int *refused,
                  char *err, size_t errsize)
{
	struct timeval tv = {BROKER_SETUP_TIMEOUT, 0};
	amqp_connection_state_t conn;
	amqp_socket_t *sock;
	amqp_rpc_reply_t r;
	char name[128], host[64];
	amqp_table_entry_t caps[5], props[2];
	amqp_table_t caps_t = {5, caps}, props_t = {2, props};
	int status;

	*refused = 0;
	conn = amqp_new_connection();
	if (conn == NULL) {
		snprintf(err, errsize, "out of memory");
		return NULL;
	}
	if (info->ssl)
		ERR_clear_error();
	sock = info->ssl ? broker_tls_socket(conn, cfg, info, err, errsize)
	                 : amqp_tcp_socket_new(conn);
	if (sock == NULL) {
		if (!info->ssl)
			snprintf(err, errsize, "cannot create socket");
		goto fail;
	}
	status = amqp_socket_open_noblock(sock, info->host, info->port, &tv);
	if (status != AMQP_STATUS_OK) {
		snprintf(err, errsize, "connect to %s:%d: %s", info->host,
		         info->port, amqp_error_string2(status));
		if (info->ssl)
			broker_tls_detail(err, errsize);
		goto fail;
	}
	/* Every frame from here on through the filter (wirefilter.h). */
	if (wirefilter_install(conn) < 0) {
		snprintf(err, errsize, "out of memory");
		goto fail;
	}
	amqp_set_handshake_timeout(conn, &tv);
	amqp_set_rpc_timeout(conn, &tv);

	/* Without these capabilities the broker sends neither
	 * connection.blocked nor basic.nack. */
	const char *const cap_names[] = {
	    "publisher_confirms", "basic.nack", "connection.blocked",
	    "consumer_cancel_notify", "authentication_failure_close"};
	for (int i = 0; i < 5; i++) {
		caps[i].key = amqp_cstring_bytes(cap_names[i]);
		caps[i].value.kind = AMQP_FIELD_KIND_BOOLEAN;
		caps[i].value.value.boolean = 1;
	}
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(name, sizeof(name), "cascade %s pid %ld", host,
	         (long)getpid());
	props[0].key = amqp_cstring_bytes("capabilities");
	props[0].value.kind = AMQP_FIELD_KIND_TABLE;
	props[0].value.value.table = caps_t;
	props[1].key = amqp_cstring_bytes("connection_name");
	props[1].value.kind = AMQP_FIELD_KIND_UTF8;
	props[1].value.value.bytes = amqp_cstring_bytes(name);

	r = amqp_login_with_properties(conn, info->vhost, 0, 131072,
	                               heartbeat_s, &props_t,
	                               AMQP_SASL_METHOD_PLAIN, user, password);
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		*refused = r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION;
		broker_reply_string(r, "login", err, errsize);
		if (info->ssl)
			broker_tls_detail(err, errsize);
		goto fail;
	}
	/* Receive the larger frames RabbitMQ sends (see broker.h). */
	if (amqp_tune_connection(conn, amqp_get_channel_max(conn),
	                         amqp_get_frame_max(conn) *
	                             BROKER_FRAME_READ_FACTOR,
	                         amqp_get_heartbeat(conn)) != AMQP_STATUS_OK) {
		snprintf(err, errsize, "out of memory");
		goto fail;
	}
	amqp_channel_open(conn, BROKER_CH_WORK);
	if (broker_check(conn, "channel.open", err, errsize) < 0)
		goto fail;
	amqp_channel_open(conn, BROKER_CH_CHECK);
	if (broker_check(conn, "channel.open", err, errsize) < 0)
		goto fail;
	amqp_channel_open(conn, BROKER_CH_PUB);
	if (broker_check(conn, "channel.open", err, errsize) < 0)
		goto fail;
	amqp_channel_open(conn, BROKER_CH_EVENTS);
	if (broker_check(conn, "channel.open", err, errsize) < 0)
		goto fail;
	return conn;
fail:
	amqp_destroy_connection(conn);
	return NULL;
}

amqp_connection_state_t
broker_connect_url(const struct config *cfg, const char *broker_url, char *err,
                   size_t errsize)
{
	struct amqp_connection_info info;
	char url[CONFIG_STR_MAX];
	int refused;

	snprintf(url, sizeof(url), "%s", broker_url);
	if (amqp_parse_url(url, &info) != AMQP_STATUS_OK) {
		snprintf(err, errsize, "bad broker URL");
		return NULL;
	}
	return broker_connect_as(
	    cfg, &info, info.user,
	    cfg->broker_password_set ? cfg->broker_password : info.password,
	    (int)(cfg->broker_heartbeat / 1000), &refused, err, errsize);
}

/* A login's name or password: 0 when it may be sent, else -1 with err. */
static int
broker_credential_ok(amqp_bytes_t b, const char *what, int empty_ok, char *err,
                     size_t errsize)
{
	if (b.len > BROKER_CREDENTIAL_MAX) {
		snprintf(err, errsize, "%s: longer than %d bytes", what,
		         BROKER_CREDENTIAL_MAX);
		return -1;
	}
	if (b.len == 0 && !empty_ok) {
		snprintf(err, errsize, "%s: empty", what);
		return -1;
	}
	if (b.len > 0 && memchr(b.bytes, '\0', b.len) != NULL) {
		snprintf(err, errsize, "%s: holds a NUL byte", what);
		return -1;
	}
	return 0;
}

amqp_connection_state_t
broker_connect_user(const struct config *cfg, amqp_bytes_t user,
                    amqp_bytes_t password, int heartbeat_s, char *url,
                    size_t urlsize, char *err, size_t errsize)
{
	struct amqp_connection_info info;
	amqp_connection_state_t conn = NULL;
	char parsed[CONFIG_STR_MAX], name[BROKER_CREDENTIAL_MAX + 1],
	    pass[BROKER_CREDENTIAL_MAX + 1], why[512];
	size_t len = 0;
	int refused = 0, one = 1;

	if (errsize > 0)
		err[0] = '\0';
	/* PLAIN carries both NUL-separated, and rabbitmq-c takes C strings:
	 * a NUL inside would send another name than the one asked for. */
	if (broker_credential_ok(user, "user name", 0, err, errsize) < 0 ||
	    broker_credential_ok(password, "password", 1, err, errsize) < 0)
		return NULL;
	memcpy(name, user.bytes, user.len);
	name[user.len] = '\0';
	if (password.len > 0)
		memcpy(pass, password.bytes, password.len);
	pass[password.len] = '\0';
	/*
	 * Each URL in turn, for its host, port, vhost and TLS; never its user
	 * or password, nor [broker] password_file.  A refusal ends the
	 * attempts: every node of a cluster judges a login alike, and each try
	 * is one more failure in the broker's log.  The error names hosts,
	 * not URLs, which hold cascade's own user.
	 */
	for (unsigned i = 0; conn == NULL && !refused &&
	                     config_broker_url(cfg, i, url, urlsize) == 0;
	     i++) {
		snprintf(parsed, sizeof(parsed), "%s", url);
		/* config_load checked that each parses. */
		if (amqp_parse_url(parsed, &info) != AMQP_STATUS_OK)
			continue;
		conn = broker_connect_as(cfg, &info, name, pass, heartbeat_s,
		                         &refused, why, sizeof(why));
		if (conn == NULL && len < errsize)
			len += (size_t)snprintf(err + len, errsize - len,
			                        "%s%s:%d: %s", len ? "; " : "",
			                        info.host, info.port, why);
	}
	explicit_bzero(pass, sizeof(pass));
	if (conn == NULL && len == 0)
		snprintf(err, errsize, "no broker URL to connect to");
	/* With heartbeat 0 (a console session's), TCP keepalive is what
	 * finds a peer gone. */
	if (conn != NULL && setsockopt(amqp_get_sockfd(conn), SOL_SOCKET,
	                               SO_KEEPALIVE, &one, sizeof(one)) != 0) {
		snprintf(err, errsize, "SO_KEEPALIVE: %s", strerror(errno));
		amqp_destroy_connection(conn);
		return NULL;
	}
	return conn;
}

int
broker_frame_max(amqp_connection_state_t conn)
{
	return amqp_get_frame_max(conn) / BROKER_FRAME_READ_FACTOR;
}

int
broker_publish(amqp_connection_state_t conn, amqp_channel_t ch, int frame_max,
               amqp_bytes_t exchange, amqp_bytes_t routing_key, int mandatory,
               const amqp_basic_properties_t *props, amqp_bytes_t body)
{
	/* 7 bytes of frame header and the frame-end octet. */
	size_t room = (size_t)frame_max - 8, off = 0;
	amqp_basic_publish_t m;
	amqp_frame_t f;
	int st;

	memset(&m, 0, sizeof(m));
	m.exchange = exchange;
	m.routing_key = routing_key;
	m.mandatory = (amqp_boolean_t)mandatory;
	st = amqp_send_method(conn, ch, AMQP_BASIC_PUBLISH_METHOD, &m);
	if (st != AMQP_STATUS_OK)
		return st;
	memset(&f, 0, sizeof(f));
	f.frame_type = AMQP_FRAME_HEADER;
	f.channel = ch;
	f.payload.properties.class_id = AMQP_BASIC_CLASS;
	f.payload.properties.body_size = body.len;
	f.payload.properties.decoded = (void *)props;
	st = amqp_send_frame(conn, &f);
	while (st == AMQP_STATUS_OK && off < body.len) {
		size_t n = body.len - off < room ? body.len - off : room;
		f.frame_type = AMQP_FRAME_BODY;
		f.payload.body_fragment.bytes = (char *)body.bytes + off;
		f.payload.body_fragment.len = n;
		off += n;
		st = amqp_send_frame(conn, &f);
	}
	return st;
}

int
broker_channel_reopen(amqp_connection_state_t conn, amqp_channel_t ch,
                      char *err, size_t errsize)
{
	amqp_channel_close_ok_t ok = {0};
	int st;

	st = amqp_send_method(conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
	if (st != AMQP_STATUS_OK) {
		snprintf(err, errsize, "channel.close-ok: %s",
		         amqp_error_string2(st));
		return -1;
	}
	amqp_channel_open(conn, ch);
	return broker_check(conn, "channel.open", err, errsize);
}

/*
 * Publisher confirms
 */

int
broker_confirm_select(amqp_connection_state_t conn, amqp_channel_t ch,
                      struct broker_confirms *c, char *err, size_t errsize)
{
	memset(c, 0, sizeof(*c));
	c->ch = ch;
	amqp_confirm_select(conn, ch);
	return broker_check(conn, "confirm.select", err, errsize);
}

int
broker_confirm_publish(amqp_connection_state_t conn, struct broker_confirms *c,
                       amqp_bytes_t exchange, amqp_bytes_t routing_key,
                       int mandatory, const amqp_basic_properties_t *props,
                       amqp_bytes_t body)
{
	int st;

	if (c->seq - c->low >= BROKER_CONFIRM_WINDOW)
		return AMQP_STATUS_NO_MEMORY;
	st = broker_publish(conn, c->ch, broker_frame_max(conn), exchange,
	                    routing_key, mandatory, props, body);
	/* Numbered even when the send failed: the broker may have it. */
	c->seq++;
	c->open[c->seq % BROKER_CONFIRM_WINDOW] = 1;
	return st;
}

uint64_t
broker_confirm_pending(const struct broker_confirms *c)
{
	return c->seq - c->acked - c->nacked;
}

static void
broker_confirm_settle_one(struct broker_confirms *c, uint64_t seq, int acked)
{
	unsigned char *open = &c->open[seq % BROKER_CONFIRM_WINDOW];

	if (!*open)
		return;
	*open = 0;
	if (acked)
		c->acked++;
	else
		c->nacked++;
	if (c->on_settle != NULL)
		c->on_settle(c->arg, seq, acked);
}

/* basic.ack or basic.nack with tag and multiple. */
static void
broker_confirm_settle(struct broker_confirms *c, uint64_t tag, int multiple,
                      int acked)
{
	/* Settled already, or never published: nothing to do. */
	if (tag <= c->low || tag > c->seq)
		return;
	if (multiple)
		for (uint64_t seq = c->low + 1; seq <= tag; seq++)
			broker_confirm_settle_one(c, seq, acked);
	else
		broker_confirm_settle_one(c, tag, acked);
	while (c->low < c->seq &&
	       !c->open[(c->low + 1) % BROKER_CONFIRM_WINDOW])
		c->low++;
}

/* A returned message's content header and body frames. */
static int
broker_confirm_content(struct broker_confirms *c, const amqp_frame_t *f)
{
	if (c->in_return == 1 && f->frame_type == AMQP_FRAME_HEADER) {
		c->body_left = f->payload.properties.body_size;
		c->in_return = c->body_left > 0 ? 2 : 0;
		return 1;
	}
	if (c->in_return == 2 && f->frame_type == AMQP_FRAME_BODY) {
		size_t n = f->payload.body_fragment.len;
		c->body_left -= n < c->body_left ? n : c->body_left;
		if (c->body_left == 0)
			c->in_return = 0;
		return 1;
	}
	return 0;
}

int
broker_confirm_frame(struct broker_confirms *c, const amqp_frame_t *f,
                     char *err, size_t errsize)
{
	const amqp_method_t *m = &f->payload.method;

	if (f->frame_type == AMQP_FRAME_METHOD &&
	    m->id == AMQP_CONNECTION_CLOSE_METHOD) {
		broker_close_reason(m, err, errsize);
		return -1;
	}
	if (f->channel != c->ch)
		return 0;
	if (f->frame_type != AMQP_FRAME_METHOD)
		return broker_confirm_content(c, f);
	switch (m->id) {
	case AMQP_BASIC_ACK_METHOD: {
		const amqp_basic_ack_t *a = m->decoded;
		broker_confirm_settle(c, a->delivery_tag, a->multiple, 1);
		return 1;
	}
	case AMQP_BASIC_NACK_METHOD: {
		const amqp_basic_nack_t *n = m->decoded;
		broker_confirm_settle(c, n->delivery_tag, n->multiple, 0);
		return 1;
	}
	case AMQP_BASIC_RETURN_METHOD:
		c->returned++;
		c->in_return = 1;
		if (c->on_return != NULL)
			c->on_return(c->arg, m->decoded);
		return 1;
	case AMQP_CHANNEL_CLOSE_METHOD:
		broker_close_reason(m, err, errsize);
		return -1;
	default:
		return 0;
	}
}

int
broker_confirm_wait(amqp_connection_state_t conn, struct broker_confirms *c,
                    uint64_t pending, int timeout_ms, char *err, size_t errsize)
{
	int64_t deadline = duration_mono_ms() + timeout_ms, left;
	struct timeval tv;
	amqp_frame_t f;
	int st;

	while (broker_confirm_pending(c) > pending) {
		if (timeout_ms >= 0) {
			left = deadline - duration_mono_ms();
			if (left <= 0) {
				if (timeout_ms % 1000 == 0)
					snprintf(err, errsize,
					         "no confirm from the broker "
					         "after %ds",
					         timeout_ms / 1000);
				else
					snprintf(err, errsize,
					         "no confirm from the broker "
					         "after %dms",
					         timeout_ms);
				return -1;
			}
			tv.tv_sec = (time_t)(left / 1000);
			tv.tv_usec = (suseconds_t)(left % 1000 * 1000);
		}
		st = amqp_simple_wait_frame_noblock(
		    conn, &f, timeout_ms >= 0 ? &tv : NULL);
		if (st == AMQP_STATUS_TIMEOUT)
			continue;
		if (st != AMQP_STATUS_OK) {
			snprintf(err, errsize, "connection lost: %s",
			         amqp_error_string2(st));
			return -1;
		}
		if (broker_confirm_frame(c, &f, err, errsize) < 0)
			return -1;
		amqp_maybe_release_buffers_on_channel(conn, c->ch);
	}
	return 0;
}
