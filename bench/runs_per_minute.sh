#!/usr/bin/env bash
# Throughput of a worker host: whole `observe` runs per minute over a corpus of skills, at 1, 2
# and 4 parallel jobs (each job one `observe` process, as a hosted worker runs them).
#
#   N=40 JOBS="1 2 4" TIMEOUT=60 bench/runs_per_minute.sh
#
# The corpus is harness/corpus/*/skill in name order, the first N (cycled when N exceeds it).
# Runs are `observe SKILL --no-baseline --timeout $TIMEOUT --report FILE` with the release
# binary (OBSERVE_BIN overrides it). Prints, per job count: wall seconds, runs per minute, and
# how the runs ended (verdict counts; "error" = exit 1 or 2, which should be 0), and per run the
# median and maximum peak RSS and the mean CPU seconds. Needs GNU time (apt-get install time).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-40}
JOBS=${JOBS:-"1 2 4"}
TIMEOUT=${TIMEOUT:-60}
if [ -z "${OBSERVE_BIN:-}" ]; then
  cargo build -q --release -p skill-observer --bins
  OBSERVE_BIN=./target/release/observe
fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/so-rpm-XXXXXX")
trap 'rm -rf "$OUT"' EXIT

corpus=(harness/corpus/*/skill)
[ ${#corpus[@]} -gt 0 ] || { echo "no corpus under harness/corpus" >&2; exit 2; }
skills=()
for ((i = 0; i < N; i++)); do skills+=("${corpus[i % ${#corpus[@]}]}"); done

one() { # index skill
  local rc=0
  # GNU time: peak RSS (KiB, the largest process of the run) and CPU s (user+sys of every
  # process of the run, jail included: all are waited for).
  /usr/bin/time -f '%M %U %S' -o "$OUT/m$1" \
    "$OBSERVE_BIN" "$2" --no-baseline --timeout "$TIMEOUT" --report "$OUT/r$1.json" \
    >/dev/null 2>"$OUT/e$1.txt" || rc=$?
  echo "$rc" >"$OUT/rc$1"
}
export -f one
export OBSERVE_BIN TIMEOUT OUT

echo "observe: $OBSERVE_BIN; $N runs over ${#corpus[@]} corpus skills; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %9s %9s %13s %13s %11s  %s\n' jobs "wall s" "runs/min" "RSS med MiB" "RSS max MiB" "CPU s/run" "outcomes"
for j in $JOBS; do
  rm -f "$OUT"/rc* "$OUT"/r*.json "$OUT"/m*
  start=$(date +%s.%N)
  for i in "${!skills[@]}"; do printf '%s\0%s\0' "$i" "${skills[$i]}"; done |
    xargs -0 -n 2 -P "$j" bash -c 'one "$0" "$1"'
  end=$(date +%s.%N)
  outcomes=$(cat "$OUT"/rc* | sort -n | uniq -c | awk '
    { n[$2] = $1 }
    END {
      split("0 10 20 30", codes, " "); split("clean suspicious malicious incomplete", names, " ")
      for (k = 1; k <= 4; k++) printf "%s %d  ", names[k], n[codes[k]] + 0
      printf "error %d", n[1] + n[2]
    }')
  python3 - "$start" "$end" "$N" "$j" "$outcomes" "$OUT" <<'EOF'
import glob, statistics, sys
start, end, n, j, outcomes, out = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
wall = end - start
rss, cpu = [], []
for f in glob.glob(f"{out}/m*"):
    # GNU time writes "Command exited with non-zero status N" first when the exit is not 0
    last = open(f).read().strip().splitlines()[-1].split()
    rss.append(int(last[0]) / 1024)
    cpu.append(float(last[1]) + float(last[2]))
print(f"{j:<5} {wall:9.1f} {n * 60 / wall:9.1f} {statistics.median(rss):13.0f} {max(rss):13.0f} "
      f"{statistics.mean(cpu):11.2f}  {outcomes}")
EOF
done
