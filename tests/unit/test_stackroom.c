/* SPDX-License-Identifier: Apache-2.0 */
/* Room on the stack for recursive decoders (stackroom.h). */
#include <criterion/criterion.h>
#include <sys/resource.h>

#include "stackroom.h"

/* Criterion runs each test in a process of its own: the limits set here
 * stay here. */
Test(stackroom, raises_a_low_soft_limit_up_to_the_hard_one)
{
	struct rlimit rl;
	size_t got;

	cr_assert_eq(getrlimit(RLIMIT_STACK, &rl), 0);
	rl.rlim_cur = 2 << 20;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
		rl.rlim_cur = rl.rlim_max;
	cr_assert_eq(setrlimit(RLIMIT_STACK, &rl), 0);
	got = stackroom_raise(STACKROOM_BYTES);
	cr_assert_eq(getrlimit(RLIMIT_STACK, &rl), 0);
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= STACKROOM_BYTES)
		cr_assert_eq(rl.rlim_cur, STACKROOM_BYTES);
	else
		cr_assert_eq(rl.rlim_cur, rl.rlim_max);
	cr_assert_eq(got, (size_t)rl.rlim_cur);
}

Test(stackroom, never_lowers_a_higher_limit)
{
	struct rlimit rl;

	cr_assert_eq(getrlimit(RLIMIT_STACK, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * STACKROOM_BYTES)
		cr_skip_test("the hard limit is below 128 MiB");
	rl.rlim_cur = 2 * STACKROOM_BYTES;
	cr_assert_eq(setrlimit(RLIMIT_STACK, &rl), 0);
	cr_assert_eq(stackroom_raise(STACKROOM_BYTES), 2 * STACKROOM_BYTES);
}
