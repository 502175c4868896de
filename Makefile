# SPDX-License-Identifier: Apache-2.0
# Shoal: one non-recursive GNU Makefile.
#
#   make [all]        build everything (libraries, tools, test runners)
#   make test         install deps, build, run the default test tier
#   make run          install deps, build, show Shoal working on this machine
#   make lint         layering check and clang-format check
#   make fuzz         run every libFuzzer target for FUZZ_TIME seconds each
#   make bench        run the benchmarks (each ends with a BENCH line)
#   make bench-meta   metadata operations on a 6-node local cluster (bench/meta.c)
#   make bench-data   file data on a 6-node local cluster against fio (bench/data.c)
#   make bench-fuse   the mount against the library (bench/fuse.c)
#   make bench-reduction  compression (and dedup) on against off (bench/reduction.c)
#   make bench-rebuild  a node lost on a 7-node local cluster: rebuild time (bench/rebuild.c)
#   make bench-smallfiles  a small-file dataset written and read through the mount (bench/smallfiles)
#   make bench-snapshot  snapshots: creation against the file count, writes after one, freeing
#                     (bench/snapshot)
#   make bench-crypto  authenticated datagrams against plain ones: RPC rate, stream, MAC cost;
#                     an encrypted file system against a plain one (bench/crypto.c)
#   make bench-idle   what an idle 6-node cluster costs: CPU, wake-ups, datagrams (bench/idle;
#                     IDLE_BASE=other/build/release compares against another build in the same run)
#   make bench-failover  link cuts under a stream, two links against one (bench/failover; root)
#   make bench-python  PyTorch loaders and checkpoints: the Python package against the mount (bench/python)
#   make bench-gpu    file bytes into GPU memory: sh_pread_device against a staged copy (bench/gpu.c)
#   make bench-scale  placement, balance, rebuild and the configuration's fanout at 1,000 backends (bench/scale.c)
#   make bench-dpdk   RPC over the DPDK transport (net_memif) against kernel UDP: latency, stream,
#                     CPU per GiB (bench/dpdk.c; root)
#   make compare      Shoal against GlusterFS 4+2 and the raw disk, same fio jobs (bench/compare)
#   make bench-preload  fio and a loader through the mount with and without libshoal_preload.so (bench/preload)
#   make fio-engine   the fio engine, libshoal_fio.so (also part of `all` but in SAN builds)
#   make soak         simulator tests over SOAK_SEEDS random seeds
#   make chaos        kill -9 of up to P nodes under writers, CHAOS_SECONDS per seed, CHAOS_SEEDS seeds
#   make stress       stress-ng's file system stressors with --verify on a mount, STRESS_SECONDS
#                     each (tests/cluster/test_stress.py, about 7 minutes)
#   make test-encrypted  the data path, reduction, dedup, cleaning, mount, fio, integrity and
#                     Python tests again with every file system encrypted (SH_ENCRYPT_ALL)
#
# Switches: SAN=1 (ASan+UBSan, no recovery), DEBUG=1 (-O0, extra checks).
# Each switch builds into its own directory, so they never mix objects.

.DEFAULT_GOAL := all

SAN ?= 0
DEBUG ?= 0
V ?= 0
FUZZ_TIME ?= 20
SOAK_SEEDS ?= 50
CHAOS_SECONDS ?= 300
CHAOS_SEEDS ?= 6
STRESS_SECONDS ?= 6

ifeq ($(V),1)
Q :=
else
Q := @
endif

ifeq ($(origin CC),default)
CC := gcc
endif
FUZZ_CC := clang

BUILD := build/release
OPT := -O2
ifeq ($(DEBUG),1)
BUILD := build/debug
OPT := -O0 -g3 -DSH_DEBUG
endif
ifeq ($(SAN),1)
BUILD := build/san
OPT := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_LDFLAGS := -fsanitize=address,undefined
endif

WARN := -Wall -Wextra -Werror -Wno-missing-field-initializers -Wformat=2 -Wvla \
	-Wstrict-prototypes -Wmissing-prototypes
CFLAGS_COMMON := -std=gnu11 -g -fvisibility=hidden -fPIC -Iinclude $(WARN)
CFLAGS ?=
CFLAGS += $(CFLAGS_COMMON) $(OPT) -MMD -MP
LDFLAGS += $(SAN_LDFLAGS)
LIBS := -luring -lisal -llz4 -lzstd -lssl -lcrypto -lraft -llmdb -ljansson -lmicrohttpd -lfuse3 -lpthread -lm

# DPDK (src/dpdk, docs/dpdk.md): Debian's libdpdk-dev, from scripts/deps. Its headers are
# taken as system headers (our warnings are not theirs); its libraries come last, linked
# only into programs that use the transport (--as-needed).
DPDK_OK := $(shell pkg-config --exists libdpdk 2>/dev/null && echo 1)
ifeq ($(DPDK_OK),1)
DPDK_CFLAGS := -DSH_HAVE_DPDK $(patsubst -I%,-isystem %,$(shell pkg-config --cflags libdpdk))
LIBS += $(shell pkg-config --libs libdpdk)
endif

# ---- modules, bottom up (DESIGN.md §2); a module links only those before it ----
MODULES := base env net dpdk cluster store data meta client fuse admin
base_SRCS := $(wildcard src/base/*.c)
env_SRCS := $(wildcard src/env/*.c)
net_SRCS := $(wildcard src/net/*.c)
dpdk_SRCS := $(wildcard src/dpdk/*.c)
cluster_SRCS := $(wildcard src/cluster/*.c)
store_SRCS := $(wildcard src/store/*.c)
data_SRCS := $(wildcard src/data/*.c)
meta_SRCS := $(wildcard src/meta/*.c)
client_SRCS := $(wildcard src/client/*.c)
fuse_SRCS := $(wildcard src/fuse/*.c)
admin_SRCS := $(wildcard src/admin/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_base := $(BUILD)/lib/libsh_base.a
LIB_env := $(BUILD)/lib/libsh_env.a
LIB_net := $(BUILD)/lib/libsh_net.a
LIB_dpdk := $(BUILD)/lib/libsh_dpdk.a
LIB_cluster := $(BUILD)/lib/libsh_cluster.a
LIB_store := $(BUILD)/lib/libsh_store.a
LIB_data := $(BUILD)/lib/libsh_data.a
LIB_meta := $(BUILD)/lib/libsh_meta.a
LIB_client := $(BUILD)/lib/libsh_client.a
LIB_fuse := $(BUILD)/lib/libsh_fuse.a
LIB_admin := $(BUILD)/lib/libsh_admin.a
ALL_LIBS := $(LIB_admin) $(LIB_fuse) $(LIB_client) $(LIB_meta) $(LIB_data) $(LIB_store) $(LIB_cluster) $(LIB_dpdk) $(LIB_net) $(LIB_env) $(LIB_base)

$(LIB_base): $(call obj,$(base_SRCS))
$(LIB_env): $(call obj,$(env_SRCS))
$(LIB_net): $(call obj,$(net_SRCS))
$(LIB_dpdk): $(call obj,$(dpdk_SRCS))
$(call obj,$(dpdk_SRCS)): CFLAGS += $(DPDK_CFLAGS)
$(LIB_cluster): $(call obj,$(cluster_SRCS))
$(LIB_store): $(call obj,$(store_SRCS))
$(LIB_data): $(call obj,$(data_SRCS))
$(LIB_meta): $(call obj,$(meta_SRCS))
$(LIB_client): $(call obj,$(client_SRCS))
$(LIB_fuse): $(call obj,$(fuse_SRCS))
$(LIB_admin): $(call obj,$(admin_SRCS))

$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# ---- test runners: one per module and tier ----
TEST_LIB := $(call obj,tests/lib/test.c)
UNIT_MODULES := base env net dpdk cluster store data meta client admin
SIM_MODULES := env net cluster store meta
RUNNERS := $(foreach m,$(UNIT_MODULES),$(BUILD)/tests/unit_$(m)) $(foreach m,$(SIM_MODULES),$(BUILD)/tests/sim_$(m))

define unit_runner
$(BUILD)/tests/unit_$(1): $(call obj,$(wildcard tests/unit/$(1)/*.c)) $(TEST_LIB) $(ALL_LIBS)
	@mkdir -p $$(dir $$@)
	@echo "  LD $$@"
	$(Q)$(CC) $(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(ALL_LIBS) $(LIBS)
endef
$(foreach m,$(UNIT_MODULES),$(eval $(call unit_runner,$(m))))

define sim_runner
$(BUILD)/tests/sim_$(1): $(call obj,$(wildcard tests/sim/$(1)/*.c)) $(TEST_LIB) $(ALL_LIBS)
	@mkdir -p $$(dir $$@)
	@echo "  LD $$@"
	$(Q)$(CC) $(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(ALL_LIBS) $(LIBS)
endef
$(foreach m,$(SIM_MODULES),$(eval $(call sim_runner,$(m))))

# ---- fuzz targets: replayed over their corpus by `make test`, run by `make fuzz` ----
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(foreach f,$(FUZZ_TARGETS),$(BUILD)/fuzz/replay_$(f))
REPLAY_MAIN := $(call obj,tests/fuzz/replay_main.c)

$(BUILD)/fuzz/replay_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(REPLAY_MAIN) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LIBS) $(LIBS)

FUZZ_BUILD := build/fuzz
FUZZ_CFLAGS := $(CFLAGS_COMMON) -O1 -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=all -Wno-unknown-warning-option -MMD -MP
FUZZ_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(base_SRCS) $(env_SRCS) $(net_SRCS) $(cluster_SRCS) $(store_SRCS) $(data_SRCS) $(meta_SRCS))

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC(fuzz) $<"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_OBJS)
	@echo "  LD(fuzz) $@"
	$(Q)$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(LIBS)

# ---- benchmarks and tools ----
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LIBS)

TOOLS := $(BUILD)/bin/shoal-envcheck $(BUILD)/bin/shoald $(BUILD)/bin/shoal
$(BUILD)/bin/shoald: $(call obj,$(wildcard src/shoald/*.c)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LIBS) $(LIBS)
$(BUILD)/bin/shoal: $(call obj,$(wildcard src/tools/shoal/*.c)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LIBS) $(LIBS)
$(BUILD)/bin/shoal-envcheck: $(call obj,src/tools/envcheck/envcheck.c) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LIBS)

# ---- the fio engine: against the headers of the installed fio (scripts/fio-src) ----
# Not in SAN builds: fio (not instrumented) cannot load an ASan-built engine.
FIO_ENGINE := $(BUILD)/lib/libshoal_fio.so
$(FIO_ENGINE): src/tools/fio/engine.c $(ALL_LIBS) scripts/fio-src
	@mkdir -p $(dir $@)
	@echo "  CC+LD $@"
	$(Q)tree=$$(scripts/fio-src build/fio-src) && \
	ver=$$(sed -n 's/^FIO_VERSION = //p' $$tree/FIO-VERSION-FILE) && \
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -isystem $$tree -include $$tree/config-host.h \
		-D_GNU_SOURCE -D_LARGEFILE_SOURCE -D_FILE_OFFSET_BITS=64 \
		-DSHF_FIO_VERSION="\"$$ver\"" -shared -o $@ $< \
		$(ALL_LIBS) $(LIBS)
ifneq ($(SAN),1)
TOOLS += $(FIO_ENGINE)
endif

# ---- the Python package (python/shoal, docs/python.md) into $(BUILD)/python ----
# Built against Debian's interpreter (python3-dev, where python3-torch lives);
# not in SAN builds, as an uninstrumented interpreter cannot load an ASan build.
PYTHON ?= /usr/bin/python3
PY_INC := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>/dev/null)
PY_EXT_SUFFIX := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null)
PY_C := $(wildcard python/shoal/*.c)
PY_EXT := $(BUILD)/python/shoal/_shoal$(PY_EXT_SUFFIX)
PY_FILES := $(patsubst python/%,$(BUILD)/python/%,$(wildcard python/shoal/*.py))
$(call obj,$(PY_C)): CFLAGS += -isystem $(PY_INC)
$(PY_EXT): $(call obj,$(PY_C)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,--exclude-libs,ALL -o $@ $(filter %.o,$^) $(ALL_LIBS) $(LIBS)
$(BUILD)/python/%.py: python/%.py
	@mkdir -p $(dir $@)
	$(Q)cp $< $@
ifneq ($(SAN),1)
TOOLS += $(PY_EXT) $(PY_FILES)
endif

# ---- the FUSE bypass for data (src/preload, docs/preload.md): libshoal_preload.so ----
# libshoal inside, hidden; not in SAN builds (an uninstrumented program cannot preload ASan).
PRELOAD := $(BUILD)/lib/libshoal_preload.so
PRELOAD_SRCS := $(wildcard src/preload/*.c)
$(PRELOAD): $(call obj,$(PRELOAD_SRCS)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,--exclude-libs,ALL -Wl,--as-needed -o $@ \
		$(filter %.o,$^) $(ALL_LIBS) $(LIBS)
# the transcript checker tests/cluster/test_preload.py runs with and without it
PRELOAD_CHECK := $(BUILD)/tests/preload_check
$(PRELOAD_CHECK): $(call obj,tests/preload/check.c)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lpthread
ifneq ($(SAN),1)
TOOLS += $(PRELOAD) $(PRELOAD_CHECK)
endif

# ---- top-level targets ----
.PHONY: all deps test test-long test-encrypted run lint fuzz fio-engine compare bench bench-rpc bench-store bench-meta bench-data bench-fuse bench-reduction bench-rebuild bench-smallfiles bench-idle bench-snapshot bench-crypto bench-failover bench-python bench-preload bench-gpu bench-scale soak chaos stress clean format

all: $(ALL_LIBS) $(RUNNERS) $(FUZZ_REPLAY) $(BENCHES) $(TOOLS)

deps:
	$(Q)scripts/deps

test: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/run-tests $(BUILD)

# the cluster tests of the long tier (kills and floods; scripts/run-tests --long)
test-long: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/run-tests --long $(BUILD)

run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/run-demo $(BUILD)

lint:
	$(Q)scripts/check-layers
	$(Q)clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	@echo "lint: ok"

format:
	$(Q)clang-format -i $$(git ls-files '*.c' '*.h')

fuzz: deps $(foreach f,$(FUZZ_TARGETS),$(FUZZ_BUILD)/fuzz_$(f))
	$(Q)set -e; for f in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$f; \
		echo "fuzz $$f for $(FUZZ_TIME)s"; \
		$(FUZZ_BUILD)/fuzz_$$f -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
			$(FUZZ_BUILD)/corpus/$$f tests/fuzz/corpus/$$f 2>&1 | tail -n 12; \
	done

fio-engine: deps $(FIO_ENGINE)

# Shoal against GlusterFS and the raw disk (bench/compare; root, about 15 minutes)
compare: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bench/compare $(BUILD)

bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)set -e; for b in $(BENCHES); do echo "== $$b"; $$b; done

bench-rpc: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/rpc
	$(Q)$(BUILD)/bench/rpc

bench-crypto: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/crypto

bench-store: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/store
	$(Q)$(BUILD)/bench/store

bench-meta: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/meta

bench-data: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/data

bench-reduction: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/reduction

bench-fuse: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/fuse

bench-rebuild: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/rebuild

bench-failover: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/bench/failover_stream
	$(Q)bench/failover $(BUILD)

bench-smallfiles: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bench/smallfiles $(BUILD)

bench-idle: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bench/idle $(BUILD) $(IDLE_BASE)

bench-snapshot: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) bench/snapshot $(BUILD)

bench-python: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) bench/python $(BUILD)

bench-preload: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bench/preload $(BUILD)

bench-gpu: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BUILD)/bench/gpu

bench-dpdk: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/dpdk
	$(Q)$(BUILD)/bench/dpdk

bench-scale: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/bench/scale
	$(Q)$(BUILD)/bench/scale

chaos: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)for i in $$(seq $(CHAOS_SEEDS)); do \
		python3 tests/cluster/test_integrity.py $(BUILD)/bin --chaos $(CHAOS_SECONDS) \
			--seed $$(od -An -N4 -tu4 /dev/urandom | tr -d ' ') || exit 1; \
	done

stress: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)STRESS_SECONDS=$(STRESS_SECONDS) python3 tests/cluster/test_stress.py $(BUILD)/bin

ENCRYPTED_TESTS := data_write_read_degraded,data_reduction_compresses_and_reads_exactly,data_dedup_stores_once_and_survives_kills,data_cleaning_gives_dead_space_back,data_quota_refuses_writes_past_it,data_orphans_of_a_killed_client_are_released,fuse_mount_with_ordinary_tools,fio_engine_runs_the_example_and_verifies,metadata_namespace_operations
test-encrypted: deps
	$(Q)$(MAKE) --no-print-directory all fio-engine
	$(Q)SH_ENCRYPT_ALL=1 python3 tests/cluster/test_cluster.py $(BUILD)/bin --only $(ENCRYPTED_TESTS)
	$(Q)SH_ENCRYPT_ALL=1 python3 tests/cluster/test_integrity.py $(BUILD)/bin
	$(Q)SH_ENCRYPT_ALL=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python --build $(BUILD)

soak: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)SH_SOAK_SEEDS=$(SOAK_SEEDS) scripts/run-tests --soak $(BUILD)

clean:
	rm -rf build

.SECONDARY:

-include $(shell find build -name '*.d' 2>/dev/null)
