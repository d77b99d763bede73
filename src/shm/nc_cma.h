/*
 * CMA: single copies between the members' own memories with
 * process_vm_readv/process_vm_writev (Linux >= 3.2, "cross memory attach").
 *
 * The kernel allows it between two processes when the caller may ptrace the
 * other in PTRACE_MODE_ATTACH_REALCREDS: same uid and classic ptrace rules,
 * or CAP_SYS_PTRACE. Yama's ptrace_scope = 1 restricts that to descendants;
 * a process that calls prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY) lets every
 * process of its uid in again (what Open MPI's vader BTL does), and
 * nc_cma_allow() does it once per process, only under scope 1. Scopes 2 and
 * 3, a seccomp filter or ranks in different user namespaces refuse it; the
 * team then probes, finds out, says why once and copies through the segment.
 *
 * The probe (team creation, core/nc_team.c) is a real transfer: every member
 * reads a 64-bit pattern from each other member and writes it back into the
 * other's sink word, so a filter that allows one direction only is caught.
 */
#ifndef NC_CMA_H
#define NC_CMA_H

#include <stddef.h>
#include <stdint.h>

/* Once per process, under Yama scope 1: prctl(PR_SET_PTRACER_ANY).
 * nc_cma_allow_now(): the same, every time it is called (a forked child). */
void nc_cma_allow(void);
void nc_cma_allow_now(void);

/* This process's probe word: the others read it at this address. */
uint64_t nc_cma_probe_addr(void);

/* Read the probe word of process pid at addr, write it into pid's sink next
 * to it. 0, or the errno of the refusal with `why` saying what refused it
 * and how to allow it. fake: fail with EPERM as a refusal would (test hook,
 * NUMACOLL_TEST_CMA_FAIL). */
int nc_cma_probe(int pid, uint64_t addr, int fake, char *why, size_t whylen);

/* Copy n bytes between local memory and [remote, remote + n) of process pid,
 * in as few system calls as the kernel allows. 0, NUMACOLL_ERR_PEER_DEAD
 * (ESRCH: the process is gone), NUMACOLL_ERR_FAULT (EFAULT: a buffer is not
 * accessible for the whole n bytes, on either side) or NUMACOLL_ERR_NOTSUP
 * (EPERM and the rest, after a probe that passed: logged). */
int nc_cma_read(int pid, void *local, uint64_t remote, size_t n);
int nc_cma_write(int pid, uint64_t remote, const void *local, size_t n);

#endif
