/* SPDX-License-Identifier: Apache-2.0 */
/* Umbrella header of the Shoal public API. */
#ifndef SHOAL_H
#define SHOAL_H

#include <shoal/sh_version.h>
#include <shoal/sh_errno.h>

#endif /* SHOAL_H */
