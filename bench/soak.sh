#!/usr/bin/env bash
# Soak: starts a fresh phasor-server on free 127.0.0.1 ports, drives it with
# bench/phasor_soak (mixed calls from several connections, a share of bad
# requests, /proc samples of the server every 30 s), then SIGTERMs the server
# and checks that it exits 0, timing the exit.
#
#   bash bench/soak.sh [SECONDS] [phasor_soak flags...]   (default 600 s)
#
# Builds nothing: build phasor-server and phasor_soak (Release) first, e.g.
#   cmake -S . -B build && cmake --build build --target phasor-server phasor_soak
#
# Environment (all optional):
#   BUILD_DIR        build directory, absolute or relative to the repository
#                    (default: build)
#   SOAK_RESULTS     where the server log, soak table and JSON go
#                    (default: a new directory under /tmp)
#   SOAK_SERVER_ARGS extra phasor-server flags, e.g. "--threads=1"
#
# Exit status: 0 when the soak saw no unexpected outcome and the server
# exited 0 after SIGTERM.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
shift || true
build=${BUILD_DIR:-build}
[[ $build == /* ]] || build=$root/$build
server=$build/server/phasor-server
soak=$build/bench/phasor_soak
for program in "$server" "$soak"; do
  if [[ ! -x $program ]]; then
    echo "soak.sh: $program is missing; build it first:" >&2
    echo "  cmake --build $build --target phasor-server phasor_soak" >&2
    exit 2
  fi
done
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [[ $build_type != Release ]]; then
  echo "soak.sh: warning: $build is a '${build_type:-?}' build, not Release" >&2
fi

results=${SOAK_RESULTS:-$(mktemp -d /tmp/phasor-soak.XXXXXX)}
mkdir -p "$results"
log=$results/server.log

# A profile for phasor_soak --profile: a temporal spec with a holiday
# calendar, so named-profile lookups are part of the mix.
cat > "$results/profiles.textproto" <<'EOF'
profile {
  name: "soak-vitals"
  description: "phasor_soak: hourly vitals, New York wall clock"
  spec {
    temporal {
      content {}
      time { dim: 16 }
      gaps { transform: LOG1P unit_seconds: 60 include_mask: true }
      calendar {
        time_zone: "America/New_York"
        fields: [HOUR_OF_DAY, DAY_OF_WEEK, DAY_OF_MONTH, MONTH_OF_YEAR]
        holidays { calendar: "soak-us-2026" kernel: SQUARED_EXPONENTIAL alpha: 0.1 }
      }
    }
  }
  holiday_calendars {
    name: "soak-us-2026"
    dates: ["2026-01-01", "2026-01-19", "2026-02-16", "2026-05-25", "2026-07-03"]
  }
}
EOF

# Port 0: the kernel picks free ports; the server prints the gRPC one.
# shellcheck disable=SC2086  # SOAK_SERVER_ARGS is a list of flags.
"$server" --grpc_address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
  --profiles="$results/profiles.textproto" ${SOAK_SERVER_ARGS:-} 2>"$log" &
pid=$!
# shellcheck disable=SC2317  # Called by the trap.
stop_server() { kill -TERM "$pid" 2>/dev/null || true; }
trap stop_server EXIT

port=
for _ in $(seq 300); do
  port=$(sed -n 's/.* event=serving grpc_port=\([0-9]*\).*/\1/p' "$log" | head -n 1)
  [[ -n $port ]] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "soak.sh: phasor-server exited during startup:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z $port ]]; then
  echo "soak.sh: no port line from phasor-server after 30 s:" >&2
  cat "$log" >&2
  exit 1
fi

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
built=$(date -u -r "$server" +%Y-%m-%dT%H:%M:%SZ)
echo "soak.sh: $server (pid $pid, $build_type, built $built; tree now at $commit)" \
  "on 127.0.0.1:$port for $seconds s; results in $results" >&2
soak_status=0
"$soak" --target="127.0.0.1:$port" --duration_seconds="$seconds" --server_pid="$pid" \
  --profile=soak-vitals --json_out="$results/soak.json" "$@" | tee "$results/soak.txt" ||
  soak_status=$?

# The server's own count of what it answered, by method and code (from
# /metrics, when ss and curl are there), to set beside the client's table.
metrics_port=$(ss -ltnpH 2>/dev/null | grep "pid=$pid," | awk '{print $4}' |
  sed 's/.*://' | grep -vx "$port" | head -n 1 || true)
if [[ -n $metrics_port ]] && command -v curl >/dev/null &&
  curl -fsS "http://127.0.0.1:$metrics_port/metrics" > "$results/metrics.txt"; then
  echo
  echo "server /metrics (127.0.0.1:$metrics_port), grpc_server_handled_total > 0:"
  sed -n 's/^grpc_server_handled_total{\(.*\)} \([0-9.e+]*\)$/\1 \2/p' "$results/metrics.txt" |
    awk '$2 != 0 {
      match($1, /grpc_method="[^"]*"/); m = substr($1, RSTART + 13, RLENGTH - 14)
      match($1, /grpc_code="[^"]*"/); c = substr($1, RSTART + 11, RLENGTH - 12)
      printf "  %-28s %-18s %s\n", m, c, $2 }' | sort
  grep -E '^process_resident_memory_bytes|^process_open_fds' "$results/metrics.txt" |
    sed 's/^/  /' || true
fi

# Shutdown: health goes NOT_SERVING, in-flight calls drain; an idle server
# should be gone well within the grace period (10 s by default).
trap - EXIT
if ! kill -0 "$pid" 2>/dev/null; then
  echo "soak.sh: phasor-server died during the soak:" >&2
  cat "$log" >&2
  wait "$pid" || true
  exit 1
fi
sent=$(date +%s.%N)
kill -TERM "$pid"
server_status=0
wait "$pid" || server_status=$?
done_at=$(date +%s.%N)
exit_seconds=$(awk -v a="$sent" -v b="$done_at" 'BEGIN { printf "%.3f", b - a }')
echo
echo "server: exit status $server_status, $exit_seconds s after SIGTERM"
echo "server log ($log):"
sed 's/^/  /' "$log"
printf '{"server_exit_status":%d,"server_exit_seconds":%s}\n' "$server_status" \
  "$exit_seconds" > "$results/shutdown.json"

if ((server_status != 0)); then
  echo "soak.sh: phasor-server exited $server_status after SIGTERM" >&2
  exit 1
fi
exit "$soak_status"
