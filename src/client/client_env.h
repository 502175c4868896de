/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libshoal on its caller's env (docs/client.md "On any env"): the same
 * client, with no thread of its own, for the simulator. sh_client_connect
 * makes a real env and a loop thread that runs it, and a public call
 * waits for the loop; a client made here runs on env (a simulated node's)
 * and each call drives the caller's world until what it waits for is
 * done, so a whole cluster, clients included, runs on one thread from
 * one seed. Everything else is the same code: the caches, holds, the
 * write and read pipelines, retries, timeouts (on env's virtual clock).
 *
 * What differs, and why:
 *   - write-behind, read-ahead and sh_io_submit have no threads: stripes
 *     are written when they fill, reads fetch what they need, and
 *     sh_io_submit answers -EOPNOTSUPP;
 *   - holds are renewed and given back from the calls themselves (a
 *     close gives its file back at once; any call renews what is due),
 *     not from a thread: a test that idles past MP_HOLD_MS without calls
 *     lets its holds lapse, as a client that stopped would;
 *   - the first configuration comes from node's management address
 *     (NET_OP_CLUSTER_CONFIG), not the admin API.
 *
 * Calls must come from the thread that runs env's world, never from
 * inside one of its callbacks (a drive inside a drive).
 */
#ifndef SH_CLIENT_CLIENT_ENV_H
#define SH_CLIENT_CLIENT_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "../env/env.h"
#include "shoal/client.h"

struct sh_client_env {
	struct env *env;
	uint64_t node;	  /* a backend's node id, asked for the configuration */
	const char *mgmt; /* its management address ("ip:port") */
	/*
	 * Run env's world until pred(arg) or max_ns of its time have passed:
	 * whether pred holds (sim_run_until's contract).
	 */
	bool (*drive)(void *world, bool (*pred)(void *arg), void *arg, uint64_t max_ns);
	void *world;
};

/* A client on e->env: as sh_client_connect, closed with sh_client_close (env stays). */
int sh_client_connect_env(const struct sh_client_env *e, const struct sh_client_opts *opts,
			  sh_client **out);

#endif /* SH_CLIENT_CLIENT_ENV_H */
