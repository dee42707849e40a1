#!/usr/bin/env bash
# Collect what diagnose reads, on a host where nothing can be installed: only nvidia-smi, dmesg
# (or journalctl) and curl. Analyse the folder anywhere with: diagnose file OUT_DIR
#
#   collectors/snapshot.sh OUT_DIR [SECONDS] [METRICS_URL]
#
# For SECONDS (default 60) it records nvidia-smi's GPU query every second (query-gpu.csv) and
# dmon (dmon.txt), and, with METRICS_URL, a timestamped /metrics scrape every second
# (metrics.prom); once, the default table (nvidia-smi.txt), nvidia-smi -q (nvidia-smi-q.txt),
# the compute processes (compute-apps.csv) and the kernel's Xid lines (xid.log). A missing tool
# is said and the rest collected. Exit 2 for a bad argument or an output folder in use.
set -u

usage="usage: snapshot.sh OUT_DIR [SECONDS] [METRICS_URL]"
out=${1:?$usage}
seconds=${2:-60}
url=${3:-}
case $seconds in
  '' | *[!0-9]*) echo "snapshot.sh: SECONDS must be a whole number of seconds, got '$seconds'" >&2; exit 2 ;;
esac
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "snapshot.sh: $out exists and is not empty; give a new folder" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
say() { echo "snapshot.sh: $*" >&2; }

pids=()
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
  nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
  nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory --format=csv \
    > "$out/compute-apps.csv" 2>&1
  nvidia-smi --query-gpu=timestamp,index,uuid,name,utilization.gpu,memory.used,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -l 1 > "$out/query-gpu.csv" 2>&1 &
  pids+=($!)
  nvidia-smi dmon -o DT -c "$seconds" > "$out/dmon.txt" 2>&1 &
  pids+=($!)
else
  say "no nvidia-smi on this host: no GPU evidence"
fi

{ dmesg -T 2>/dev/null || journalctl -k --no-pager 2>/dev/null; } | grep -i "NVRM: Xid" > "$out/xid.log" \
  || say "no Xid line in the kernel log (or it cannot be read)"

if [ -n "$url" ] && ! command -v curl >/dev/null 2>&1; then
  say "no curl: $url is not scraped"
  url=
fi
end=$(( $(date +%s) + seconds ))
while [ "$(date +%s)" -lt "$end" ]; do
  if [ -n "$url" ]; then
    stamp=$(date +%s%3N)  # each sample gets the scrape's time, which diagnose needs for rates
    curl -fsS --max-time 2 "$url" 2>/dev/null \
      | awk -v ts="$stamp" '/^#/ { print; next } NF { print $0 " " ts }' >> "$out/metrics.prom" \
      || say "cannot scrape $url"
  fi
  sleep 1
done
[ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
wait 2>/dev/null
find "$out" -type f -empty -delete
say "wrote $out; analyse it with: diagnose file $out"
