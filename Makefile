# numacoll: the commands users type. Each installs what it needs first.
#   make            build against Open MPI (build/) and MPICH (build-mpich/)
#   make test       every test suite: core, Open MPI, MPICH, ASan+UBSan
#   make bench      the main job: numacoll vs the native MPI (bench/README.md)
#   make install PREFIX=/opt/numacoll

PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CMAKE    ?= cmake
CTEST    ?= ctest
CTESTFLAGS ?= --output-on-failure --timeout 600 -j $(JOBS)
CMAKE_FLAGS ?=

.PHONY: all deps build build-mpich build-asan test test-core test-openmpi test-mpich \
        test-asan bench install clean

all: build build-mpich

deps:
	@scripts/install-deps.sh build

# One configure+build rule per tree; a tree is reconfigured only when missing.
define cmake_tree
	@test -f $(1)/CMakeCache.txt || $(CMAKE) -S . -B $(1) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(2) $(CMAKE_FLAGS)
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
	cd build && $(CTEST) $(CTESTFLAGS) -LE mpi

# MPI tests run one at a time: they oversubscribe the node already.
test-openmpi: build
	cd build && $(CTEST) $(CTESTFLAGS) -j 1 -L mpi

test-mpich: build-mpich
	cd build-mpich && $(CTEST) $(CTESTFLAGS) -j 1 -L mpi

test-asan: build-asan
	cd build-asan && $(CTEST) $(CTESTFLAGS) -LE 'mpi|guest|slow'

test: test-core test-openmpi test-mpich test-asan
	@echo "numacoll: all test suites passed (core, Open MPI, MPICH, ASan+UBSan)"

bench: build build-mpich
	@scripts/install-deps.sh bench
	@bench/run.sh

install: build
	$(CMAKE) --install build --prefix $(PREFIX)

clean:
	rm -rf build build-mpich build-asan
