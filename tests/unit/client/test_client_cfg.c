// SPDX-License-Identifier: Apache-2.0
/* Which node a client asks for the configuration (client_cfg_node): spread, only nodes up. */
#include "../../../src/client/client_int.h"
#include "../../lib/test.h"

TEST(client_cfg_node_spreads_clients_over_the_nodes_up)
{
	struct cfg *c = cfg_new();
	unsigned asked[40] = { 0 }, least = ~0u, most = 0;

	SH_ASSERT(c != NULL);
	SH_ASSERT_EQ(client_cfg_node(c, 1), 0u); /* no nodes */
	c->nnodes = 40;
	for (unsigned i = 0; i < 40; i++)
		c->nodes[i] =
		    (struct cfg_node){ .id = 100 + i, .state = i % 10 == 9 ? CFG_DOWN : CFG_UP };
	for (uint64_t key = 0; key < 36000; key++) {
		uint64_t id = client_cfg_node(c, key * 0x10001 + 7);

		SH_ASSERT(id >= 100 && id < 140);
		SH_ASSERT_NE(id % 10, 9u);				 /* never a node down */
		SH_ASSERT_EQ(client_cfg_node(c, key * 0x10001 + 7), id); /* the same each time */
		asked[id - 100]++;
	}
	for (unsigned i = 0; i < 40; i++) {
		if (i % 10 == 9)
			continue;
		least = asked[i] < least ? asked[i] : least;
		most = asked[i] > most ? asked[i] : most;
	}
	/* 1,000 each on average: none far from it */
	SH_ASSERT_MSG(least > 850 && most < 1150, "asked %u to %u times", least, most);
	for (unsigned i = 0; i < 40; i++)
		c->nodes[i].state = CFG_DOWN;
	SH_ASSERT_EQ(client_cfg_node(c, 5), 0u);
	cfg_free(c);
}
