/* Repeats: which copy of a series is the live one (series.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "router.h"
#include "series.h"

static amqp_bytes_t
b(const char *s)
{
	return amqp_cstring_bytes(s);
}

Test(series, a_copy_is_stale_below_the_latest_or_with_another_token)
{
	struct series s;

	series_init(&s);
	cr_assert_not(series_stale(&s, b("S"), 1, b("")), "nothing known");
	cr_assert_eq(series_add(&s, b("S"), 2, b("t1"), 1000), 0);
	cr_assert(series_stale(&s, b("S"), 1, b("")), "the delivered one");
	cr_assert_not(series_stale(&s, b("S"), 2, b("t1")));
	/* A crash before the ack: occurrence 1 again, a second copy t2
	 * recorded later; the first copy t1 is now the stale one. */
	series_add(&s, b("S"), 2, b("t2"), 1000);
	cr_assert(series_stale(&s, b("S"), 2, b("t1")));
	cr_assert_not(series_stale(&s, b("S"), 2, b("t2")));
	/* An older record read late changes nothing. */
	series_add(&s, b("S"), 3, b("t3"), 2000);
	series_add(&s, b("S"), 2, b("t2"), 1000);
	cr_assert(series_stale(&s, b("S"), 2, b("t2")));
	cr_assert_not(series_stale(&s, b("S"), 3, b("t3")));
	cr_assert_eq(series_prune(&s, 1999), 1);
	cr_assert_eq(series_prune(&s, 2000), 0);
	series_free(&s);
}

Test(series, occurrences_never_drift_and_end_by_times_or_until)
{
	struct route r = {0};
	int64_t due;

	r.every = 1000;
	r.first = 5000;
	r.occurrence = 1;
	cr_assert(router_next_occurrence(&r, &due));
	cr_assert_eq(due, 6000);
	r.occurrence = 7; /* however late the 7th went out */
	cr_assert(router_next_occurrence(&r, &due));
	cr_assert_eq(due, 12000);
	r.times = 7;
	cr_assert_not(router_next_occurrence(&r, &due), "7 of 7");
	r.times = 0;
	r.until = 11999;
	cr_assert_not(router_next_occurrence(&r, &due), "past until");
	r.every = 0;
	cr_assert_not(router_next_occurrence(&r, &due), "not a repeat");
}

Test(series, a_token_of_any_length_is_held_whole)
{
	struct series s;
	char long_token[300];

	memset(long_token, 't', sizeof(long_token) - 1);
	long_token[sizeof(long_token) - 1] = '\0';
	series_init(&s);
	cr_assert_eq(series_add(&s, b("S"), 2, b(long_token), 1000), 0);
	cr_assert_not(series_stale(&s, b("S"), 2, b(long_token)));
	/* One byte short is another token, not the same one cut. */
	long_token[298] = '\0';
	cr_assert(series_stale(&s, b("S"), 2, b(long_token)));
	/* A shorter token later: the head is sized again. */
	cr_assert_eq(series_add(&s, b("S"), 3, b("t3"), 2000), 0);
	cr_assert_not(series_stale(&s, b("S"), 3, b("t3")));
	cr_assert(series_stale(&s, b("S"), 3, b("t")));
	cr_assert_eq(series_prune(&s, 2000), 0);
	series_free(&s);
}
