/*
 * cascade-bench: drive a running cascade daemon (or, for comparison, a plain
 * forwarder or a chain of dead-lettering queues) and measure it.
 *
 *   cascade-bench run [options]      publish, consume the target, report
 *   cascade-bench forward [options]  the plain forwarder (mode forward)
 *
 * Each message carries its id and due time in its body, so lateness is
 * measured on arrival.  CPU seconds come from /proc/PID/stat of the process
 * moving the messages (--mover-pid) and of the broker (beam.smp).
 */
#include "amqp_compat.h"
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "config.h"
#include "duration.h"

#define CH_PUB 1
#define CH_SUB 2
/* Unconfirmed publishes; at most BROKER_CONFIRM_WINDOW. */
#define WINDOW 2000

enum mode {
	MODE_CASCADE, /* publish to the cascade exchange */
	MODE_FORWARD, /* publish to fwd.in; `forward` moves the messages */
	MODE_DLX,     /* publish into a chain of TTL queues, no consumer */
};

struct opts {
	enum mode mode;
	const char *prefix;
	const char *target;
	const char *json;
	const char *plot;
	uint64_t count;
	double rate; /* messages/s; 0: as fast as confirms allow */
	int64_t delay_lo, delay_hi;
	int dist;      /* DIST_FIXED_OR_RANGE, DIST_UNIFORM, DIST_LOGUNIFORM */
	uint64_t seed; /* --dist's generator */
	unsigned hops; /* hops per message, for hops/s */
	unsigned size;
	int64_t unit; /* TTL of the shortest queue of the chains, ms */
	long mover_pid, broker_pid;
	int64_t idle_ms; /* give up when nothing arrives for this long */
	struct config cfg;
};

enum { DIST_FIXED_OR_RANGE, DIST_UNIFORM, DIST_LOGUNIFORM };

/* splitmix64: a small seeded generator, the same sequence everywhere. */
static uint64_t
next_u64(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A uniform double in [0, 1). */
static double
next_unit(uint64_t *state)
{
	return (double)(next_u64(state) >> 11) / 9007199254740992.0;
}

/* One message's delay in ms, by -d or --dist. */
static int64_t
draw_delay(const struct opts *o, uint64_t *state)
{
	double u, d;

	switch (o->dist) {
	case DIST_UNIFORM:
		u = next_unit(state);
		d = (double)o->delay_lo +
		    u * (double)(o->delay_hi - o->delay_lo);
		return (int64_t)d;
	case DIST_LOGUNIFORM:
		u = next_unit(state);
		d = (double)o->delay_lo *
		    exp(u * log((double)o->delay_hi / (double)o->delay_lo));
		return (int64_t)d;
	default:
		if (o->delay_hi > o->delay_lo)
			return o->delay_lo +
			       (int64_t)((double)(o->delay_hi - o->delay_lo +
			                          1) *
			                 ((double)rand() /
			                  ((double)RAND_MAX + 1.0)));
		return o->delay_lo;
	}
}

/* --dist KIND:MIN:MAX; 0, or -1 with a message. */
static int
parse_dist(struct opts *o, const char *arg)
{
	const char *c1 = strchr(arg, ':'), *c2, *why = "";

	if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
		goto bad;
	if ((size_t)(c1 - arg) == 7 && strncmp(arg, "uniform", 7) == 0)
		o->dist = DIST_UNIFORM;
	else if ((size_t)(c1 - arg) == 10 &&
	         strncmp(arg, "loguniform", 10) == 0)
		o->dist = DIST_LOGUNIFORM;
	else
		goto bad;
	if (duration_parse(c1 + 1, (size_t)(c2 - c1 - 1), DURATION_BARE_MS,
	                   &o->delay_lo, &why) < 0 ||
	    duration_parse(c2 + 1, strlen(c2 + 1), DURATION_BARE_MS,
	                   &o->delay_hi, &why) < 0)
		goto bad;
	if (o->delay_hi <= o->delay_lo ||
	    (o->dist == DIST_LOGUNIFORM && o->delay_lo <= 0)) {
		why = "MAX must be above MIN, and MIN above 0 for loguniform";
		goto bad;
	}
	return 0;
bad:
	fprintf(stderr,
	        "cascade-bench: --dist uniform:MIN:MAX or "
	        "loguniform:MIN:MAX %s\n",
	        why);
	return -1;
}

struct payload {
	uint64_t id;
	int64_t due_us;
};

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* utime + stime of a process, in seconds; -1 if it cannot be read. */
static double
proc_cpu(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *fp;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fp = fopen(path, "r");
	if (fp == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), fp) == NULL) {
		fclose(fp);
		return -1;
	}
	fclose(fp);
	p = strrchr(buf, ')'); /* the command may hold spaces */
	if (p == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	           &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long
proc_rss_kib(long pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	fp = fopen(path, "r");
	if (fp == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(fp);
	return kib;
}

/* The only beam.smp on the machine, or 0 when there is none or several. */
static long
find_beam(void)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	long found = 0;
	int n = 0;

	if (dir == NULL)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		char path[300], comm[64] = "";
		FILE *fp;
		long pid = strtol(e->d_name, NULL, 10);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		fp = fopen(path, "r");
		if (fp == NULL)
			continue;
		if (fgets(comm, sizeof(comm), fp) != NULL &&
		    strncmp(comm, "beam.smp", 8) == 0) {
			found = pid;
			n++;
		}
		fclose(fp);
	}
	closedir(dir);
	return n == 1 ? found : 0;
}

static int
die_reply(amqp_connection_state_t conn, const char *what)
{
	char err[512];

	if (broker_check(conn, what, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "cascade-bench: %s\n", err);
	exit(1);
}

/* A plain durable queue, quorum unless --target-type says otherwise. */
static const char *target_type = "quorum";

static void
declare(amqp_connection_state_t conn, const char *name)
{
	amqp_table_entry_t e = {
	    amqp_cstring_bytes("x-queue-type"),
	    {AMQP_FIELD_KIND_UTF8, {.bytes = amqp_cstring_bytes(target_type)}}};
	amqp_table_t args = {1, &e};

	amqp_queue_declare(conn, CH_PUB, amqp_cstring_bytes(name), 0, 1, 0, 0,
	                   args);
	die_reply(conn, name);
}

/*
 * TTL queues base.0 .. base.(hops-1) with TTLs 2^(hops-1) .. 1 ms, as a
 * cascade ladder walks them for a delay of 2^hops - 1 ms.  With chain set
 * each dead-letters into the next and the last into target (the broker
 * alone moves the message); without, each dead-letters into target (a
 * consumer moves it on).
 */
static void
declare_chain(amqp_connection_state_t conn, const char *base, unsigned hops,
              int64_t unit, const char *target, int chain)
{
	char name[128], next[128];

	for (unsigned k = 0; k < hops; k++) {
		amqp_table_entry_t e[6];
		amqp_table_t args = {6, e};
		snprintf(name, sizeof(name), "%s.%u", base, k);
		if (chain && k + 1 < hops)
			snprintf(next, sizeof(next), "%s.%u", base, k + 1);
		else
			snprintf(next, sizeof(next), "%s", target);
		e[0].key = amqp_cstring_bytes("x-queue-type");
		e[0].value.kind = AMQP_FIELD_KIND_UTF8;
		e[0].value.value.bytes = amqp_cstring_bytes("quorum");
		e[1].key = amqp_cstring_bytes("x-message-ttl");
		e[1].value.kind = AMQP_FIELD_KIND_I64;
		e[1].value.value.i64 = unit << (hops - 1 - k);
		e[2].key = amqp_cstring_bytes("x-dead-letter-exchange");
		e[2].value.kind = AMQP_FIELD_KIND_UTF8;
		e[2].value.value.bytes = amqp_cstring_bytes("");
		e[3].key = amqp_cstring_bytes("x-dead-letter-routing-key");
		e[3].value.kind = AMQP_FIELD_KIND_UTF8;
		e[3].value.value.bytes = amqp_cstring_bytes(next);
		e[4].key = amqp_cstring_bytes("x-dead-letter-strategy");
		e[4].value.kind = AMQP_FIELD_KIND_UTF8;
		e[4].value.value.bytes = amqp_cstring_bytes("at-least-once");
		e[5].key = amqp_cstring_bytes("x-overflow");
		e[5].value.kind = AMQP_FIELD_KIND_UTF8;
		e[5].value.value.bytes = amqp_cstring_bytes("reject-publish");
		amqp_queue_declare(conn, CH_PUB, amqp_cstring_bytes(name), 0, 1,
		                   0, 0, args);
		die_reply(conn, name);
	}
}

/* The forwarder's deliveries, by the number of the publish that moves them. */
struct forwarder {
	amqp_connection_state_t conn;
	uint64_t src[BROKER_CONFIRM_WINDOW]; /* delivery tag, by seq % size */
};

/* Its publish confirmed: the delivery may go; refused: it comes again. */
static void
fwd_settled(void *arg, uint64_t seq, int acked)
{
	struct forwarder *fw = arg;
	uint64_t tag = fw->src[seq % BROKER_CONFIRM_WINDOW];

	if (acked)
		amqp_basic_ack(fw->conn, CH_PUB, tag, 0);
	else
		amqp_basic_nack(fw->conn, CH_PUB, tag, 0, 1);
}

/*
 * The plain forwarder: what any consumer-based design must do at least.
 * Consumes fwd.in and fwd.return, publishes each message (confirmed) to the
 * next TTL queue by its x-hops count, or to its target after the last, and
 * acks the source after the confirm.  No other logic.
 */
static int
run_forwarder(struct opts *o)
{
	static struct broker_confirms c;
	static struct forwarder fw;
	amqp_connection_state_t conn;
	char err[512], q[128];
	amqp_frame_t f;
	uint64_t tag = 0;
	int64_t hops = 0;
	amqp_basic_properties_t props;
	amqp_bytes_t body = {0, NULL};
	size_t got = 0;
	int stage = 0, st;

	conn = broker_connect(&o->cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	fw.conn = conn;
	declare(conn, "fwd.in");
	declare(conn, "fwd.return");
	declare_chain(conn, "fwd.delay", o->hops, o->unit, "fwd.return", 0);
	amqp_basic_qos(conn, CH_PUB, 0, 1000, 0);
	die_reply(conn, "qos");
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	c.on_settle = fwd_settled;
	c.arg = &fw;
	amqp_basic_consume(conn, CH_PUB, amqp_cstring_bytes("fwd.in"),
	                   amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
	die_reply(conn, "consume");
	amqp_basic_consume(conn, CH_PUB, amqp_cstring_bytes("fwd.return"),
	                   amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
	die_reply(conn, "consume");
	fprintf(stderr, "cascade-bench: forwarder ready pid=%ld\n",
	        (long)getpid());
	for (;;) {
		if (amqp_simple_wait_frame(conn, &f) != AMQP_STATUS_OK)
			return 1;
		switch (broker_confirm_frame(&c, &f, err, sizeof(err))) {
		case -1:
			fprintf(stderr, "cascade-bench: %s\n", err);
			return 1;
		case 1:
			continue;
		}
		if (f.frame_type == AMQP_FRAME_METHOD) {
			if (f.payload.method.id == AMQP_BASIC_DELIVER_METHOD) {
				tag = ((amqp_basic_deliver_t *)
				           f.payload.method.decoded)
				          ->delivery_tag;
				stage = 1;
			}
		} else if (f.frame_type == AMQP_FRAME_HEADER && stage == 1) {
			const amqp_field_value_t *v = NULL;
			props = *(amqp_basic_properties_t *)
			             f.payload.properties.decoded;
			hops = 0;
			for (int i = 0; i < props.headers.num_entries; i++)
				if (props.headers.entries[i].key.len == 6 &&
				    memcmp(props.headers.entries[i].key.bytes,
				           "x-hops", 6) == 0)
					v = &props.headers.entries[i].value;
			if (v != NULL)
				hops = v->value.i64;
			body.len = f.payload.properties.body_size;
			body.bytes = malloc(body.len ? body.len : 1);
			got = 0;
			stage = 2;
		} else if (f.frame_type == AMQP_FRAME_BODY && stage == 2) {
			memcpy((char *)body.bytes + got,
			       f.payload.body_fragment.bytes,
			       f.payload.body_fragment.len);
			got += f.payload.body_fragment.len;
		}
		if (stage == 2 && got == body.len) {
			amqp_table_entry_t h = {
			    amqp_cstring_bytes("x-hops"),
			    {AMQP_FIELD_KIND_I64, {.i64 = hops + 1}}};
			amqp_basic_properties_t out = {0};
			out._flags = AMQP_BASIC_HEADERS_FLAG;
			out.headers.num_entries = 1;
			out.headers.entries = &h;
			if ((unsigned)hops < o->hops)
				snprintf(q, sizeof(q), "fwd.delay.%u",
				         (unsigned)hops);
			else
				snprintf(q, sizeof(q), "%s", o->target);
			/* At most the prefetch of both queues is open. */
			st = broker_confirm_publish(conn, &c, amqp_empty_bytes,
			                            amqp_cstring_bytes(q), 0,
			                            &out, body);
			if (st != AMQP_STATUS_OK) {
				fprintf(stderr, "cascade-bench: publish: %s\n",
				        amqp_error_string2(st));
				return 1;
			}
			fw.src[c.seq % BROKER_CONFIRM_WINDOW] = tag;
			free(body.bytes);
			body.bytes = NULL;
			stage = 0;
			amqp_maybe_release_buffers(conn);
		}
	}
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static double
pct(const int64_t *v, uint64_t n, double p)
{
	uint64_t i;

	if (n == 0)
		return NAN;
	i = (uint64_t)ceil(p * (double)n) - (p > 0);
	if (i >= n)
		i = n - 1;
	return (double)v[i] / 1000.0;
}

static void
plot(const struct opts *o, const int64_t *v, uint64_t n)
{
	char data[] = "/tmp/cascade-bench-XXXXXX";
	int fd = mkstemp(data);
	FILE *fp, *gp;

	if (fd < 0)
		return;
	fp = fdopen(fd, "w");
	for (uint64_t i = 0; i < n; i++)
		fprintf(fp, "%.3f %.6f\n", (double)v[i] / 1000.0,
		        (double)(i + 1) / (double)n);
	fclose(fp);
	gp = popen("gnuplot", "w");
	if (gp == NULL) {
		fprintf(stderr, "cascade-bench: no gnuplot: no plot\n");
		unlink(data);
		return;
	}
	fprintf(gp,
	        "set terminal pngcairo size 900,500\nset output '%s'\n"
	        "set title 'cascade lateness, %" PRIu64 " messages'\n"
	        "set xlabel 'lateness (ms)'\nset ylabel 'fraction delivered'\n"
	        "set logscale x\nset grid\nset key bottom right\n"
	        "plot '%s' using ($1 > 0.01 ? $1 : 0.01):2 with lines lw 2 "
	        "title 'cumulative'\n",
	        o->plot, n, data);
	pclose(gp);
	unlink(data);
}

static void
bench_settled(void *arg, uint64_t seq, int acked)
{
	(void)arg;
	(void)seq;
	if (!acked)
		fprintf(stderr, "cascade-bench: nack\n");
}

static void
usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: cascade-bench run [options]\n"
	    "       cascade-bench forward [-c FILE] [--hops N] "
	    "[--queue TARGET]\n"
	    "\n"
	    "  -m, --mode MODE       cascade (default) | forward | dlx\n"
	    "  -n, --count N         messages (default 10000)\n"
	    "  -r, --rate R          messages per second (default: as fast "
	    "as confirms allow)\n"
	    "  -d, --delay D|LO-HI   fixed or uniform delay (default 0)\n"
	    "      --dist uniform:MIN:MAX | loguniform:MIN:MAX\n"
	    "                        each message draws its own delay "
	    "(e.g. loguniform:100ms:30s)\n"
	    "      --seed N          --dist's generator (default 1)\n"
	    "  -q, --queue NAME      target queue (default bench.target)\n"
	    "      --target-type T   its type: quorum (default) or "
	    "classic\n"
	    "  -p, --prefix P        cascade's exchange (default: config's)\n"
	    "      --hops N          hops per message, for hops/s "
	    "(default 4)\n"
	    "      --size BYTES      body size (default 16)\n"
	    "      --mover-pid PID   the daemon or forwarder, for CPU/RSS\n"
	    "      --broker-pid PID  beam.smp (default: the only one)\n"
	    "      --idle D          stop when nothing arrives for D "
	    "(default 10s)\n"
	    "      --unit D          forward/dlx: TTL of the shortest of "
	    "the hop queues\n"
	    "                        (TTLs unit*2^(hops-1) .. unit; "
	    "default 1ms)\n"
	    "      --json FILE       write the results as JSON\n"
	    "      --plot FILE.png   plot the lateness distribution\n"
	    "  -c, --config FILE     broker URL from cascade's config\n");
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"count", required_argument, NULL, 'n'},
	    {"rate", required_argument, NULL, 'r'},
	    {"delay", required_argument, NULL, 'd'},
	    {"queue", required_argument, NULL, 'q'},
	    {"prefix", required_argument, NULL, 'p'},
	    {"config", required_argument, NULL, 'c'},
	    {"hops", required_argument, NULL, 'H'},
	    {"size", required_argument, NULL, 'S'},
	    {"mover-pid", required_argument, NULL, 'M'},
	    {"broker-pid", required_argument, NULL, 'B'},
	    {"idle", required_argument, NULL, 'I'},
	    {"unit", required_argument, NULL, 'U'},
	    {"json", required_argument, NULL, 'J'},
	    {"plot", required_argument, NULL, 'P'},
	    {"target-type", required_argument, NULL, 'T'},
	    {"dist", required_argument, NULL, 'D'},
	    {"seed", required_argument, NULL, 'E'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	static struct opts o;
	static struct broker_confirms c;
	static char err[8192];
	const char *cmd, *why;
	amqp_connection_state_t conn;
	uint64_t published = 0, received = 0, dups = 0;
	uint64_t early = 0, nlat = 0;
	uint8_t *seen;
	int64_t *lat, start, last_arrival = 0, last_progress, idle_since;
	double mcpu0, bcpu0, mcpu1, bcpu1, secs;
	long rss_max = 0;
	char *buf;
	int ch, stage = 0;
	uint64_t rng;
	double delay_sum = 0;
	struct payload pl;
	size_t got = 0;

	if (argc < 2 ||
	    (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "forward") != 0)) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	argv++;
	argc--;
	config_defaults(&o.cfg);
	o.count = 10000;
	o.target = "bench.target";
	o.hops = 4;
	o.size = sizeof(struct payload);
	o.idle_ms = 10000;
	o.unit = 1;
	o.seed = 1;
	while ((ch = getopt_long(argc, argv, "m:n:r:d:q:p:c:h", longopts,
	                         NULL)) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "cascade") == 0)
				o.mode = MODE_CASCADE;
			else if (strcmp(optarg, "forward") == 0)
				o.mode = MODE_FORWARD;
			else if (strcmp(optarg, "dlx") == 0)
				o.mode = MODE_DLX;
			else {
				fprintf(stderr, "cascade-bench: bad mode\n");
				return 2;
			}
			break;
		case 'n':
			o.count = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			o.rate = strtod(optarg, NULL);
			break;
		case 'd': {
			const char *dash = strchr(optarg + 1, '-');
			size_t len =
			    dash ? (size_t)(dash - optarg) : strlen(optarg);
			if (duration_parse(optarg, len, DURATION_BARE_MS,
			                   &o.delay_lo, &why) < 0 ||
			    (dash && duration_parse(dash + 1, strlen(dash + 1),
			                            DURATION_BARE_MS,
			                            &o.delay_hi, &why) < 0)) {
				fprintf(stderr, "cascade-bench: --delay: %s\n",
				        why);
				return 2;
			}
			if (!dash)
				o.delay_hi = o.delay_lo;
			o.dist = DIST_FIXED_OR_RANGE;
			break;
		}
		case 'D':
			if (parse_dist(&o, optarg) < 0)
				return 2;
			break;
		case 'E':
			o.seed = strtoull(optarg, NULL, 10);
			break;
		case 'q':
			o.target = optarg;
			break;
		case 'p':
			o.prefix = optarg;
			break;
		case 'c':
			if (config_load(&o.cfg, optarg, err, sizeof(err)) < 0) {
				fputs(err, stderr);
				return 2;
			}
			break;
		case 'H':
			o.hops = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'S':
			o.size = (unsigned)strtoul(optarg, NULL, 10);
			if (o.size < sizeof(struct payload))
				o.size = sizeof(struct payload);
			break;
		case 'M':
			o.mover_pid = strtol(optarg, NULL, 10);
			break;
		case 'B':
			o.broker_pid = strtol(optarg, NULL, 10);
			break;
		case 'I':
			duration_parse(optarg, strlen(optarg), DURATION_BARE_MS,
			               &o.idle_ms, &why);
			break;
		case 'J':
			o.json = optarg;
			break;
		case 'U':
			if (duration_parse(optarg, strlen(optarg),
			                   DURATION_BARE_MS, &o.unit,
			                   &why) < 0 ||
			    o.unit < 1) {
				fprintf(stderr, "cascade-bench: --unit: bad\n");
				return 2;
			}
			break;
		case 'P':
			o.plot = optarg;
			break;
		case 'T':
			if (strcmp(optarg, "quorum") != 0 &&
			    strcmp(optarg, "classic") != 0) {
				fprintf(stderr, "cascade-bench: --target-type: "
				                "quorum or classic\n");
				return 2;
			}
			target_type = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (getenv("CASCADE_BROKER_URL") != NULL)
		snprintf(o.cfg.broker_url, sizeof(o.cfg.broker_url), "%s",
		         getenv("CASCADE_BROKER_URL"));
	if (o.prefix == NULL)
		o.prefix = o.cfg.topology_prefix;
	if (o.hops < 1 || o.hops > 20) {
		fprintf(stderr, "cascade-bench: --hops from 1 to 20\n");
		return 2;
	}
	if (strcmp(cmd, "forward") == 0)
		return run_forwarder(&o);
	if (o.broker_pid == 0)
		o.broker_pid = find_beam();

	conn = broker_connect(&o.cfg, err, sizeof(err));
	if (conn == NULL) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	declare(conn, o.target);
	amqp_queue_purge(conn, CH_PUB, amqp_cstring_bytes(o.target));
	die_reply(conn, "purge");
	if (o.mode == MODE_DLX)
		declare_chain(conn, "dlx.delay", o.hops, o.unit, o.target, 1);
	if (broker_confirm_select(conn, CH_PUB, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "cascade-bench: %s\n", err);
		return 1;
	}
	c.on_settle = bench_settled;
	amqp_basic_consume(conn, CH_SUB, amqp_cstring_bytes(o.target),
	                   amqp_empty_bytes, 0, 1, 0, amqp_empty_table);
	die_reply(conn, "consume");

	seen = calloc(o.count + 1, 1);
	lat = calloc(o.count + 1, sizeof(*lat));
	buf = calloc(1, o.size);
	if (seen == NULL || lat == NULL || buf == NULL)
		return 1;
	srand(1);
	rng = o.seed;
	mcpu0 = proc_cpu(o.mover_pid);
	bcpu0 = proc_cpu(o.broker_pid);
	start = now_us();
	last_progress = idle_since = start;

	while (received < o.count) {
		int64_t now = now_us();
		struct timeval tv = {0, 20000};
		amqp_frame_t f;
		int st;

		/* Publish what the rate and the confirm window allow. */
		while (
		    published < o.count &&
		    broker_confirm_pending(&c) < WINDOW &&
		    (o.rate <= 0 || (double)published <
		                        o.rate * (double)(now - start) / 1e6)) {
			amqp_table_entry_t h[2];
			amqp_basic_properties_t props = {0};
			int64_t d = draw_delay(&o, &rng);
			const char *ex, *rk;
			delay_sum += (double)d;
			pl.id = published + 1;
			pl.due_us = now_us() + d * 1000;
			memcpy(buf, &pl, sizeof(pl));
			props._flags = AMQP_BASIC_HEADERS_FLAG;
			props.headers.entries = h;
			props.headers.num_entries = 0;
			if (o.mode == MODE_CASCADE) {
				h[0].key =
				    amqp_cstring_bytes("x-remaining-delay");
				h[0].value.kind = AMQP_FIELD_KIND_I64;
				h[0].value.value.i64 = d;
				props.headers.num_entries = 1;
				ex = o.prefix;
				rk = o.target;
			} else if (o.mode == MODE_FORWARD) {
				h[0].key = amqp_cstring_bytes("x-hops");
				h[0].value.kind = AMQP_FIELD_KIND_I64;
				h[0].value.value.i64 = 0;
				props.headers.num_entries = 1;
				ex = "";
				rk = "fwd.in";
			} else {
				ex = "";
				rk = "dlx.delay.0";
			}
			if (broker_confirm_publish(
			        conn, &c, amqp_cstring_bytes(ex),
			        amqp_cstring_bytes(rk), 0, &props,
			        (amqp_bytes_t){o.size, buf}) !=
			    AMQP_STATUS_OK) {
				fprintf(stderr, "cascade-bench: publish "
				                "failed\n");
				return 1;
			}
			published++;
			now = now_us();
		}
		/*
		 * Wait for a frame until the next publish is due (at most 1 ms
		 * while publishing, 20 ms after): polling every 1 ms for the
		 * whole run cost the benchmark most of a core, taken from the
		 * broker and the daemon it measures.
		 */
		if (published < o.count && broker_confirm_pending(&c) < WINDOW)
			tv.tv_usec = 1000;
		st = amqp_simple_wait_frame_noblock(conn, &f, &tv);
		now = now_us();
		if (st == AMQP_STATUS_OK) {
			int mine =
			    broker_confirm_frame(&c, &f, err, sizeof(err));
			if (mine < 0) {
				fprintf(stderr, "cascade-bench: %s\n", err);
				return 1;
			}
			if (mine) {
				/* a confirm, counted */
			} else if (f.frame_type == AMQP_FRAME_METHOD) {
				if (f.payload.method.id ==
				    AMQP_BASIC_DELIVER_METHOD) {
					stage = 1;
					got = 0;
				}
			} else if (f.frame_type == AMQP_FRAME_BODY &&
			           stage == 1) {
				amqp_bytes_t b = f.payload.body_fragment;
				if (got < sizeof(pl)) {
					size_t n = sizeof(pl) - got;
					if (n > b.len)
						n = b.len;
					memcpy((char *)&pl + got, b.bytes, n);
				}
				got += b.len;
				if (got >= o.size) {
					stage = 0;
					if (pl.id == 0 || pl.id > o.count) {
						/* not ours */
					} else if (seen[pl.id]) {
						dups++;
					} else {
						seen[pl.id] = 1;
						received++;
						lat[nlat++] = now - pl.due_us;
						if (now < pl.due_us)
							early++;
					}
					last_arrival = now;
					idle_since = now;
				}
			}
			if (!amqp_frames_enqueued(conn) &&
			    !amqp_data_in_buffer(conn))
				amqp_maybe_release_buffers(conn);
		} else if (st != AMQP_STATUS_TIMEOUT) {
			fprintf(stderr, "cascade-bench: connection: %s\n",
			        amqp_error_string2(st));
			return 1;
		}
		if (o.mover_pid > 0 && now - last_progress >= 1000000) {
			long rss = proc_rss_kib(o.mover_pid);
			if (rss > rss_max)
				rss_max = rss;
		}
		if (now - last_progress >= 1000000) {
			fprintf(stderr,
			        "\r%6.1fs published %" PRIu64
			        " received %" PRIu64 " early %" PRIu64
			        " dup %" PRIu64 "   ",
			        (double)(now - start) / 1e6, published,
			        received, early, dups);
			last_progress = now;
		}
		if (published == o.count && now - idle_since > o.idle_ms * 1000)
			break;
		if (published < o.count)
			idle_since = now;
	}
	fprintf(stderr, "\n");
	mcpu1 = proc_cpu(o.mover_pid);
	bcpu1 = proc_cpu(o.broker_pid);
	if (o.mover_pid > 0) {
		long rss = proc_rss_kib(o.mover_pid);
		if (rss > rss_max)
			rss_max = rss;
	}
	secs = (double)((last_arrival ? last_arrival : now_us()) - start) / 1e6;
	qsort(lat, nlat, sizeof(*lat), cmp_i64);

	{
		double msgs = (double)received / secs;
		double hops = msgs * o.hops;
		double mcpu = o.mover_pid > 0 ? mcpu1 - mcpu0 : NAN;
		double bcpu = o.broker_pid > 0 ? bcpu1 - bcpu0 : NAN;
		const char *mode = o.mode == MODE_CASCADE   ? "cascade"
		                   : o.mode == MODE_FORWARD ? "forward"
		                                            : "dlx";
		char json[2048], v[12][32];
		double nums[12] = {pct(lat, nlat, 0),
		                   pct(lat, nlat, 0.5),
		                   pct(lat, nlat, 0.9),
		                   pct(lat, nlat, 0.99),
		                   pct(lat, nlat, 0.999),
		                   pct(lat, nlat, 1),
		                   mcpu,
		                   bcpu,
		                   mcpu * 1e6 / ((double)received * o.hops),
		                   bcpu * 1e6 / ((double)received * o.hops),
		                   msgs,
		                   hops};
		for (int i = 0; i < 12; i++) {
			if (isnan(nums[i]) || isinf(nums[i]))
				snprintf(v[i], sizeof(v[i]), "null");
			else
				snprintf(v[i], sizeof(v[i]), "%.3f", nums[i]);
		}
		snprintf(json, sizeof(json),
		         "{\"mode\": \"%s\", \"messages\": %" PRIu64
		         ", \"received\": %" PRIu64 ", \"lost\": %" PRIu64
		         ", \"early\": %" PRIu64 ", \"duplicates\": %" PRIu64
		         ", \"seconds\": %.3f, \"msgs_per_s\": %s, "
		         "\"hops_per_s\": %s, \"lateness_ms\": {\"min\": %s, "
		         "\"p50\": %s, \"p90\": %s, \"p99\": %s, "
		         "\"p999\": %s, \"max\": %s}, \"mover_cpu_s\": %s, "
		         "\"broker_cpu_s\": %s, \"mover_cpu_per_hop_us\": %s, "
		         "\"broker_cpu_per_hop_us\": %s, "
		         "\"mover_rss_max_kib\": %ld, \"delay_mean_ms\": %.1f}",
		         mode, o.count, received, o.count - received, early,
		         dups, secs, v[10], v[11], v[0], v[1], v[2], v[3], v[4],
		         v[5], v[6], v[7], v[8], v[9], rss_max,
		         published ? delay_sum / (double)published : 0.0);
		printf("%s\n", json);
		if (o.json != NULL) {
			FILE *fp = fopen(o.json, "w");
			if (fp != NULL) {
				fprintf(fp, "%s\n", json);
				fclose(fp);
			}
		}
	}
	if (o.plot != NULL)
		plot(&o, lat, nlat);
	amqp_destroy_connection(conn);
	return received == o.count && early == 0 ? 0 : 1;
}
