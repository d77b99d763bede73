/*
 * nc_quote(): user text as one line of a message. Its own file, with no
 * dependency on the rest of the core, so that the tools that do not link the
 * core (numacoll-bind) or see it only hidden inside libnumacoll-mpi.so
 * (numacoll-bench) link this one object (library nc_text, src/CMakeLists.txt).
 */
#include "common/nc_common.h"

#include <stdio.h>

const char *nc_quote(char *buf, size_t len, const char *text)
{
    size_t o = 0, i = 0;
    if (len == 0)
        return buf;
    if (!text)
        text = "(null)";
    /* an escape takes at most 4 bytes, "..." and the NUL 4 more */
    for (; text[i] && o < NC_QUOTE_MAX && o + 8 < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(buf + o, len - o, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    snprintf(buf + o, len - o, "%s", text[i] ? "..." : "");
    return buf;
}
