/* SPDX-License-Identifier: Apache-2.0 */
/* The base module's headers in one include, for the modules above it. */
#ifndef SH_BASE_BASE_H
#define SH_BASE_BASE_H

#include <shoal/sh_errno.h>

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "codec.h"
#include "compiler.h"
#include "crc32c.h"
#include "fault.h"
#include "hash.h"
#include "heap.h"
#include "htable.h"
#include "list.h"
#include "log.h"
#include "rand.h"

#endif /* SH_BASE_BASE_H */
