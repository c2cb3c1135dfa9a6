/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection set-up: the socket (TCP, or OpenSSL for amqps://), the login
 * with the capabilities cascade needs, the channels; each URL of [broker]
 * url in turn, as cascade or as a console's user.
 */
#include "broker.h"

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
#include <unistd.h>

#include "wirefilter.h"

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
