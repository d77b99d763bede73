/*
 * Data files of numacoll's tools (the plot scripts), found from the tool's own
 * place: next to it (the build tree), then where the install puts them
 * relative to bin/ or lib/numacoll/FLAVOR/bin/ (so an install into any
 * prefix finds them, whatever prefix the tree was configured with), then a
 * fallback (the configured install path).
 */
#ifndef NC_TOOL_DATA_H
#define NC_TOOL_DATA_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef NC_TOOLS_DATA_FROM_BIN
#define NC_TOOLS_DATA_FROM_BIN "../share/numacoll"
#endif
#ifndef NC_TOOLS_DATA_FROM_FLAVOR_BIN
#define NC_TOOLS_DATA_FROM_FLAVOR_BIN "../../../share/numacoll"
#endif

static inline void nc_tool_data_path(const char *name, const char *fallback, char *out,
                                     size_t len)
{
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            const char *const rel[] = {".", NC_TOOLS_DATA_FROM_BIN, NC_TOOLS_DATA_FROM_FLAVOR_BIN};
            for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
                const int k = snprintf(out, len, "%s/%s/%s", exe, rel[i], name);
                if (k > 0 && (size_t)k < len && !access(out, R_OK))
                    return;
            }
        }
    }
    snprintf(out, len, "%s", fallback);
}

#endif /* NC_TOOL_DATA_H */
