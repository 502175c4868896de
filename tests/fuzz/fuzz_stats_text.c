// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: `shoal stats` reading a node's /metrics page (the
 * Prometheus text a node, or anything answering on its port, sends): every
 * line taken, then the rates and quantiles of the result against a copy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/tools/shoal/stats.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What stats.c uses of the rest of the command line, never reached here. */
json_t *
api_get(const struct cli *c, const char *path)
{
	(void)c;
	(void)path;
	abort();
}

void
usage_error(const char *fmt, ...)
{
	(void)fmt;
	abort();
}

double
now_s(void)
{
	return 0;
}

void
fail(const char *fmt, ...)
{
	(void)fmt;
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct node_sample a, b;
	char *text = malloc(size + 1), *line, *save = NULL;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&b, 0, sizeof(b));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (line[0] != '#')
			take_line(&b, line);
	memset(&a, 0, sizeof(a));
	for (int k = 0; k < STATS_OPS; k++) {
		struct op_rates r = op_rates(&a.ops[k], &b.ops[k], 1.0);

		(void)r;
		op_add(&a.ops[k], &b.ops[k]);
		(void)quantile(&b.ops[k], &a.ops[k], 0.99);
	}
	free(text);
	return 0;
}
