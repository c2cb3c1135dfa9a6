/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlx: the broker's dead-letter re-send timeout.  Each hop out of a delay
 * queue is the queue's at-least-once dead-letter worker; a message it
 * could not hand over (a node restarting its quorum queues) is sent again
 * only dead_letter_worker_publisher_confirm_timeout later, an app env key
 * of rabbit that only advanced.config sets.  The management API shows the
 * node's app env at /api/config/effective (RabbitMQ 3.12 and later, to
 * administrators), as Erlang terms, which mgmt.c reads.
 */
#include "amqp_compat.h"
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "httpget.h"
#include "headers.h"
#include "mgmt.h"

#define MGMT_MAX (1024 * 1024) /* the app env of every application */

int
dlx_confirm_timeout(const struct ctl *c, const char *url, int64_t *ms,
                    char *why, size_t whysize)
{
	static struct mgmt m;
	const char *perr;
	const char *version = "";
	char auth[(sizeof(m.user) + sizeof(m.pass) + 2) / 3 * 4 + 8];
	char userpass[sizeof(m.user) + sizeof(m.pass) + 1], reason[128];
	char *text, vbuf[64];
	const amqp_field_value_t *vf;
	amqp_bytes_t vb;
	int status = 0, rc, has_effective = 0, amqp_port = 0;
	size_t n;

	memset(&m, 0, sizeof(m));
	if (url == NULL)
		url = getenv("CASCADE_MANAGEMENT_URL");
	if (url != NULL && url[0] == '\0') {
		snprintf(why, whysize,
		         "not asked: the management URL is empty");
		return -1;
	}
	/* The broker's user and password, unless the URL gives others. */
	{
		struct amqp_connection_info info;
		char copy[CONFIG_STR_MAX];
		snprintf(copy, sizeof(copy), "%s", c->cl.url);
		if (amqp_parse_url(copy, &info) != AMQP_STATUS_OK) {
			snprintf(why, whysize, "bad broker URL");
			return -1;
		}
		if (url == NULL && info.ssl) {
			snprintf(why, whysize,
			         "amqps broker: give its management API with "
			         "--management http://HOST:15672");
			return -1;
		}
		amqp_port = info.port;
		snprintf(m.user, sizeof(m.user), "%s", info.user);
		snprintf(m.pass, sizeof(m.pass), "%s",
		         c->cfg.broker_password_set ? c->cfg.broker_password
		                                    : info.password);
		if (url == NULL) {
			snprintf(m.host, sizeof(m.host), "%s", info.host);
			snprintf(m.port, sizeof(m.port), "%s", MGMT_PORT);
			mgmt_finish(&m, "", 0);
		}
	}
	if (url != NULL && mgmt_parse(url, &m, &perr) < 0) {
		snprintf(why, whysize, "management URL: %s", perr);
		return -1;
	}
	snprintf(userpass, sizeof(userpass), "%s:%s", m.user, m.pass);
	/* Basic authentication: OpenSSL's base64, padded, one line. */
	n = strlen(userpass);
	if ((n + 2) / 3 * 4 + 1 > sizeof(auth)) {
		snprintf(why, whysize, "credentials too long");
		return -1;
	}
	EVP_EncodeBlock((unsigned char *)auth, (const unsigned char *)userpass,
	                (int)n);
	text = httpget_fetch(m.host, m.port, m.path, auth, MGMT_MAX, &status,
	                     why, whysize);
	if (text == NULL) {
		snprintf(reason, sizeof(reason), "%.120s", why);
		snprintf(why, whysize, "no management API at %s: %s", m.shown,
		         reason);
		return -1;
	}
	vf = headers_find(amqp_get_server_properties(c->cl.conn), "version");
	if (vf != NULL && headers_string(vf, &vb) == 0 && vb.len < 32) {
		unsigned major = 0, minor = 0;
		snprintf(vbuf, sizeof(vbuf), "RabbitMQ %.*s", (int)vb.len,
		         (const char *)vb.bytes);
		version = vbuf;
		if (sscanf(vbuf, "RabbitMQ %u.%u", &major, &minor) == 2)
			has_effective =
			    major > 3 || (major == 3 && minor >= 12);
	}
	if (status == 200) {
		rc = mgmt_dlx_timeout(text, ms);
		/* HOST:15672 may be another broker's, one on the standard
		 * ports beside this one: its listeners tell. */
		if (rc >= 0 && url == NULL &&
		    !mgmt_listens_on(text, amqp_port)) {
			free(text);
			snprintf(why, whysize,
			         "%s belongs to another node (none of its "
			         "tcp_listeners is port %d): give --management",
			         m.shown, amqp_port);
			return -1;
		}
		free(text);
		if (rc == 0)
			*ms = MGMT_DLX_DEFAULT_MS;
		if (rc >= 0)
			return 0;
		snprintf(why, whysize, "%s%s: not RabbitMQ's app env", m.shown,
		         m.path);
		return -1;
	}
	mgmt_reason(text, reason, sizeof(reason));
	free(text);
	if (status == 404 && version[0] != '\0' && !has_effective)
		snprintf(why, whysize,
		         "%s: no /api/config/effective in %s, only from 3.12",
		         m.shown, version);
	else if (status == 404 && version[0] != '\0')
		snprintf(why, whysize,
		         "%s: no /api/config/effective, which %s has: another "
		         "path prefix?",
		         m.shown, version);
	else if (status == 404)
		snprintf(
		    why, whysize,
		    "%s: no /api/config/effective (RabbitMQ 3.12 and later)",
		    m.shown);
	else if ((status == 401 || status == 403) &&
	         (strstr(reason, "administrator") != NULL ||
	          strstr(reason, "management user") != NULL))
		snprintf(why, whysize, "%s: user %s is not an administrator",
		         m.shown, m.user);
	else if (status == 401 || status == 403)
		snprintf(why, whysize, "%s refused user %s (HTTP %d%s%s)",
		         m.shown, m.user, status, reason[0] ? ": " : "",
		         reason);
	else
		snprintf(why, whysize, "%s: HTTP %d%s%s", m.shown, status,
		         reason[0] ? " " : "", reason);
	return -1;
}
