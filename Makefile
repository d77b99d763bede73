# numacoll: the commands users type. Each installs what it needs first.
#   make            build against Open MPI (build/) and MPICH (build-mpich/)
#   make test       every test suite: core, Open MPI, MPICH, ASan+UBSan
#   make bench      the main job: numacoll vs the native MPI (bench/README.md)
#   make bench-targets  every size band against the performance issues' targets
#   make soak       long random-sequence soak runs (tests/soak), both MPI libraries
#   make fuzz       millions of random inputs to every parser, under ASan+UBSan
#   make install PREFIX=/opt/numacoll

PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CMAKE    ?= cmake
CTEST    ?= ctest
CTESTFLAGS ?= --output-on-failure --timeout 600 -j $(JOBS)
CMAKE_FLAGS ?=

.PHONY: all deps build build-mpich build-asan test test-core test-openmpi test-mpich \
        test-asan bench bench-targets soak fuzz install clean

all: build build-mpich

deps:
	@scripts/install-deps.sh build

# One configure+build rule per tree; a tree is reconfigured only when missing.
define cmake_tree
	@test -f $(1)/CMakeCache.txt || $(CMAKE) -S . -B $(1) -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DNUMACOLL_WERROR=ON $(2) $(CMAKE_FLAGS)
	@$(CMAKE) --build $(1) -j $(JOBS)
endef

build: deps
	$(call cmake_tree,build,-DMPI_C_COMPILER=/usr/bin/mpicc.openmpi -DMPIEXEC_EXECUTABLE=/usr/bin/mpirun.openmpi)

build-mpich: deps
	$(call cmake_tree,build-mpich,-DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich)

build-asan: deps
	$(call cmake_tree,build-asan,-DNUMACOLL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DMPI_C_COMPILER=/usr/bin/mpicc.openmpi -DMPIEXEC_EXECUTABLE=/usr/bin/mpirun.openmpi)

# Core and tool tests run once (they do not depend on the MPI library); the MPI
# tests run against both libraries; the sanitizer build runs everything that is
# not MPI (Open MPI's own leaks would drown the report).
test-core: build
	@scripts/install-deps.sh test guest
	cd build && $(CTEST) $(CTESTFLAGS) -LE 'mpi|soak'

# MPI tests run one at a time: they oversubscribe the node already.
test-openmpi: build
	@scripts/install-deps.sh test
	cd build && $(CTEST) $(CTESTFLAGS) -j 1 -L mpi

test-mpich: build-mpich
	@scripts/install-deps.sh test
	cd build-mpich && $(CTEST) $(CTESTFLAGS) -j 1 -L mpi

test-asan: build-asan
	cd build-asan && $(CTEST) $(CTESTFLAGS) -LE 'mpi|guest|slow|soak'

test: test-core test-openmpi test-mpich test-asan
	@echo "numacoll: all test suites passed (core, Open MPI, MPICH, ASan+UBSan)"

# Long soak runs (label soak, left out of make test): 10^5 random calls at
# p = 2, 3, 4, 8 (and p = 4 on a tight budget) for each MPI library, one run at
# a time; nothing may be left in /dev/shm afterwards.
soak: build build-mpich
	cd build && $(CTEST) $(CTESTFLAGS) -j 1 -L soak
	cd build-mpich && $(CTEST) $(CTESTFLAGS) -j 1 -L soak
	@left=$$(ls /dev/shm | grep '^numacoll-'); \
	if [ -n "$$left" ]; then echo "soak: left in /dev/shm: $$left"; exit 1; fi
	@echo "numacoll: soak passed (Open MPI, MPICH)"

# Every parser of hostile input (tests/fuzz: tunables, tree specs, tune files,
# CPU lists, numacoll-bind and numacoll-bench options) under ASan+UBSan, the
# targets $(JOBS) at a time. FUZZ_SCALE times each target's ctest count (make
# test runs scale 1): 150 is 34.8 million inputs, about 10 minutes on 2 idle
# cores (cpulist, the slowest at ~7600 inputs per CPU second under ASan, starts
# first and has one core to itself; the other six share the second one).
# Seed: NUMACOLL_FUZZ_SEED (a failure prints the command that replays it).
FUZZ_SCALE   ?= 150
FUZZ_TARGETS ?= cpulist tunefile bind_opts bench_opts config_set tunable tree
FUZZ_BIN     ?= build-asan/bin/nc_fuzz
FUZZ_LOGS    ?= build-asan/fuzz
fuzz: build-asan
	@mkdir -p $(FUZZ_LOGS)
	@echo "numacoll: fuzzing $(FUZZ_TARGETS) at scale $(FUZZ_SCALE), $(JOBS) at a time (logs: $(FUZZ_LOGS)/)"
	@start=$$(date +%s); \
	printf '%s\n' $(FUZZ_TARGETS) | NUMACOLL_TUNE_FILE=none xargs -P $(JOBS) -I{} sh -c \
	  '$(FUZZ_BIN) --scale $(FUZZ_SCALE) {} >$(FUZZ_LOGS)/{}.log 2>&1 || { cat $(FUZZ_LOGS)/{}.log; exit 1; }'; \
	rc=$$?; \
	logs="$(foreach t,$(FUZZ_TARGETS),$(FUZZ_LOGS)/$(t).log)"; \
	cat $$logs | grep -E '^nc_fuzz: [a-z_]+ +[0-9]+ inputs'; \
	total=$$(cat $$logs | awk '/^nc_fuzz: [a-z_]+ +[0-9]+ inputs/ { n += $$3 } END { print n + 0 }'); \
	echo "numacoll: fuzz: $$total inputs in $$(( $$(date +%s) - start )) s: $$( [ $$rc = 0 ] && echo 'all invariants held' || echo FAILED)"; \
	exit $$rc

bench: build build-mpich
	@scripts/install-deps.sh bench
	@bench/run.sh

bench-targets: build build-mpich
	@scripts/install-deps.sh bench
	@bench/targets.sh

# Both MPI layers: lib/numacoll/openmpi/ and lib/numacoll/mpich/, each with its
# pkg-config file; everything else (core, tools, headers) from the Open MPI tree.
install: build build-mpich
	$(CMAKE) --install build --prefix $(PREFIX)
	$(CMAKE) --install build-mpich --prefix $(PREFIX) --component mpi

clean:
	rm -rf build build-mpich build-asan
