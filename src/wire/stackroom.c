/* SPDX-License-Identifier: Apache-2.0 */
/* Room on the main thread's stack: stackroom.h. */
#include "stackroom.h"

#include <sys/resource.h>

size_t
stackroom_raise(size_t bytes)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_STACK, &rl) != 0)
		return 0;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < bytes) {
		struct rlimit want = rl;
		want.rlim_cur =
		    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > bytes
		        ? bytes
		        : rl.rlim_max;
		if (setrlimit(RLIMIT_STACK, &want) == 0)
			rl = want;
	}
	return rl.rlim_cur == RLIM_INFINITY ? (size_t)-1 : (size_t)rl.rlim_cur;
}
