// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: a node's data interfaces as text ("IP:PORT[/LABEL],...",
 * from the configuration, the command line and the admin API); a list
 * that parses formats to one that parses to the same interfaces.
 */
#include <stdint.h>
#include <string.h>

#include "../../src/net/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[512], buf[1024];
	struct net_iface a[8], b[8];
	int n, m;

	if (size >= sizeof(s))
		size = sizeof(s) - 1;
	memcpy(s, data, size);
	s[size] = '\0';
	n = net_ifaces_parse(s, a, 8);
	if (n < 0)
		return 0;
	if (n == 0 || net_ifaces_format(a, (unsigned)n, buf, sizeof(buf)) < 0)
		__builtin_trap();
	m = net_ifaces_parse(buf, b, 8);
	if (m != n)
		__builtin_trap();
	for (int i = 0; i < n; i++)
		if (!env_addr_eq(&a[i].addr, &b[i].addr) || strcmp(a[i].label, b[i].label) != 0 ||
		    strcmp(a[i].transport, b[i].transport) != 0 || strcmp(a[i].dev, b[i].dev) != 0)
			__builtin_trap();
	return 0;
}
