/*
 * numacoll-info: what numacoll sees on this node (or on a described one).
 * One file per section; nc_info_main.c parses the options and calls them.
 */
#ifndef NC_INFO_H
#define NC_INFO_H

#include <hwloc.h>
#include <stddef.h>
#include <stdio.h>

#include "config/nc_config.h"
#include "shm/nc_seg.h"

enum {
    NC_INFO_TOPOLOGY = 1 << 0, /* hwloc tree and the tune-file signature */
    NC_INFO_PLACEMENT = 1 << 1, /* members: binding, NUMA node, leader */
    NC_INFO_LAYOUT = 1 << 2,    /* the segment, the paper's figure 1 */
    NC_INFO_PARAMS = 1 << 3,    /* every tunable with value and source */
    NC_INFO_TUNE = 1 << 4,      /* which tune file, which section */
    NC_INFO_COPY = 1 << 5,      /* CMA and what forbids it */
};

typedef struct nc_info_opts {
    unsigned sections;
    int markdown;        /* --params --markdown: docs/tunables.md */
    const char *topology; /* synthetic description or XML file; NULL = this machine */
    int np;              /* members to show (0: one per core) */
    size_t page;         /* layout page size (0: this machine's) */
    int job;             /* under mpirun */
} nc_info_opts_t;

/* A machine: this one or a described one (then nothing is measured). */
typedef struct nc_info_machine {
    hwloc_topology_t topo;
    int synthetic;       /* not this machine */
    const char *desc;
} nc_info_machine_t;

void nc_info_print_topology(FILE *out, const nc_info_machine_t *m);

/* The configuration a team of p members gets here (environment, tune file). */
int nc_info_config(nc_config_t *cfg, int p);
void nc_info_print_params(FILE *out, const nc_config_t *cfg, int p);
void nc_info_print_markdown(FILE *out);
void nc_info_print_tune(FILE *out, int p);

/* Where members land when bound one per core in order (core i mod cores). */
int nc_info_simulated_numa(const nc_info_machine_t *m, int p, int *numa, char (*cpus)[64]);
/* What the collectives do for members grouped by leaders[]: the reductions' order
 * (one line) and the gather family's transport (one line). */
/* The reductions' order and the allgather's two-level plan for p members
 * with these NUMA leaders; ratio: remote / local NUMA distance, 0 unknown. */
void nc_info_print_coll_plans(FILE *out, int p, const int *leaders, double ratio);

/* One row of figure 1: a block, where it should be and where it is. */
typedef struct nc_info_block {
    char name[48];
    size_t off, bytes;
    int owner, intended;  /* member; NUMA node (-1 unknown) */
    char actual[96];      /* move_pages() summary, "-" when not measured */
} nc_info_block_t;

/* The rows of a layout (actual = "-"), 2 per member + header, sets, barrier. */
/* Rows of the layout table: header, ring, then per member its controls,
 * buffers and the collectives' member areas, then the shared areas. */
#define NC_INFO_LAYOUT_ROWS(p) ((size_t)(p) * 3 + 3)
/* Row of member i's controls (k = 0), buffers (1), collectives' areas (2). */
#define NC_INFO_MEMBER_ROW(i, k) (2 + 3 * (i) + (k))
int nc_info_layout_rows(const nc_layout_t *l, const int *numa, nc_info_block_t *rows);
/* The node budget (NUMACOLL_SHM_LIMIT, /dev/shm) and how many communicators
 * of this layout fit in it: only for this machine's own layouts. */
void nc_info_print_budget(FILE *out, const nc_layout_t *l, const nc_config_t *cfg);
void nc_info_print_layout(FILE *out, const nc_layout_t *l, const nc_config_t *cfg,
                          const nc_info_block_t *rows, int nrows, const char *note);
/* move_pages() over [addr, addr+bytes) summarised as text, e.g. "0" or "0:3 1:5". */
void nc_info_pages_where(const void *addr, size_t bytes, size_t page, char *buf, size_t len);
/* The node view: fork p members bound one per core, build a real team, measure. */
int nc_info_layout_live(FILE *out, const nc_info_machine_t *m, int p);
int nc_info_layout_computed(FILE *out, const nc_info_machine_t *m, int p, size_t page);

/* CMA tried for real, what forbids it, and numacoll's transport choice for
 * teams of up to np members on `cores` CPUs (cfg: the team's configuration). */
void nc_info_print_copy(FILE *out, const nc_config_t *cfg, int np, int cores);

#ifdef NUMACOLL_INFO_MPI
int nc_info_job(const nc_info_opts_t *o, int argc, char **argv);
#endif

#endif
