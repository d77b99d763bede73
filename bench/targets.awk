# bench/targets.sh: one numacoll-bench output in, one line per size band out, with the
# issue's target for that band and the run's reference columns (see targets.sh).
function bytes(n, u) { return n * (u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : 1) }
function target(coll, label, b, f) {
    f = split(label, w, " ")
    if (label ~ /^all/) return ""
    if (coll == "bcast") {
        if (label ~ /^x memcpy/) return np == 2 ? 0.75 : ""
        return label ~ /^x / ? "" : 0.5
    }
    if (label ~ /^x /) return ""
    b = bytes(w[1], w[2])
    if (coll == "reduce" || coll == "allreduce") return b <= 65536 ? 0.5 : 0.75
    return 0.6
}
/^# numacoll-bench: / { coll = $3; sub(/,$/, "", coll); team = "-"; flag = "-" }
/^# numacoll: team / {
    team = $0; sub(/.*caches=/, "", team); sub(/ \(.*/, "", team); sub(/ .*/, "", team)
    if ($0 ~ /caches=not shared/) team = "not-shared"
}
/^# flag: / { flag = $(NF - 1) }
/^# summary / { insum = 1; header = 1; next }
insum && header { ncol = NF - 2; for (i = 1; i <= ncol; i++) col[i] = $(i + 2); header = 0; next }
insum && /^#   / {
    label = ""
    for (i = 2; i <= NF - ncol; i++) label = label (label == "" ? "" : " ") $i
    t = target(coll, label)
    if (t == "") next
    nc = 1
    for (i = 1; i <= ncol; i++) if (col[i] == "numacoll") nc = i
    v = $(NF - ncol + nc)
    refs = ""
    for (i = 1; i <= ncol; i++)
        if (i != nc) refs = refs (refs == "" ? "" : " ") col[i] "=" $(NF - ncol + i)
    mark = (v != "-" && v + 0 > t + 0) ? " *" : "  "
    printf "%-8s %2s %3s %7s %-10s %-10s %-18s %7s%s %6.2f  %s\n", mpi, np, run, flag, team, coll, label, v, mark, t, refs
    next
}
insum { insum = 0 }
