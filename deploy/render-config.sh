#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# render-config: copies colod's config file SRC to DST with daemon.metrics_listen bound to
# $COLOD_METRICS_IP, keeping SRC's port. Installed in the image as /usr/lib/colod/render-config.
#
# Why: colod's metrics server (/metrics, /healthz, /readyz) listens on 127.0.0.1:9477 by default,
# which the kubelet's probes and Prometheus cannot reach from outside the pod. colod has no
# environment expansion in its config, so the DaemonSet passes the pod's IP (downward API
# status.podIP) in COLOD_METRICS_IP and this script writes it into the file colod reads.
#
#   render-config SRC DST                 render once (the initContainer: colod starts on DST)
#   render-config --watch SECONDS SRC DST render, then again every SECONDS (the sidecar: a
#                                         changed ConfigMap reaches DST by a rename, which colod's
#                                         inotify watch on DST's directory turns into a reload)
#
# DST is replaced atomically (rename) and only when its content changes, so an unchanged
# ConfigMap never triggers a reload. The value must be one "  metrics_listen: host:port" line
# under daemon: (as deploy/gen-config.sh writes it). Exit codes: 0 ok, 1 cannot render, 2 usage.
# POSIX sh with sed, grep, cmp, mktemp, mv (Essential packages, present in bookworm-slim).
set -u

usage() {
  echo "usage: render-config [--watch SECONDS] SRC DST  (env COLOD_METRICS_IP: the IP to bind)" >&2
  exit 2
}

log() { echo "render-config: $*" >&2; }

watch=""
if [ "${1:-}" = "--watch" ]; then
  [ $# -ge 2 ] || usage
  watch=$2
  shift 2
  case $watch in '' | *[!0-9]*) usage ;; esac
  [ "$watch" -gt 0 ] || usage
fi
[ $# -eq 2 ] || usage
src=$1
dst=$2

# Prints the new metrics_listen value, or explains on stderr and returns 1.
listen_value() {
  ip=${COLOD_METRICS_IP:-}
  case $ip in
    '') log "COLOD_METRICS_IP is empty: set it from the downward API (status.podIP)"; return 1 ;;
    *[!0-9A-Fa-f:.]*) log "COLOD_METRICS_IP '$ip' is not an IP address"; return 1 ;;
  esac
  n=$(grep -c '^  metrics_listen:' "$src")
  if [ "$n" != 1 ]; then
    log "$src: expected one '  metrics_listen: host:port' line under daemon:, found $n"
    return 1
  fi
  # The current value without a trailing comment, blanks or quotes; its port is kept.
  cur=$(sed -n -e '/^  metrics_listen:/{s/^  metrics_listen:[[:space:]]*//' \
    -e 's/[[:space:]]*#.*$//' -e 's/["'\'']//g' -e 'p' -e '}' "$src")
  port=${cur##*:}
  case $cur in *:*) ;; *) port="" ;; esac
  case $port in
    '' | *[!0-9]*)
      log "$src: metrics_listen '$cur' has no port (an empty value turns the server and the probes off)"
      return 1
      ;;
  esac
  case $ip in
    *:*) echo "[$ip]:$port" ;;
    *) echo "$ip:$port" ;;
  esac
}

render() {
  if [ ! -r "$src" ]; then
    log "cannot read $src"
    return 1
  fi
  value=$(listen_value) || return 1
  tmp=$(mktemp "$(dirname "$dst")/.render-config.XXXXXX") || return 1
  if ! sed -e "s|^  metrics_listen:.*|  metrics_listen: \"$value\"  # render-config: COLOD_METRICS_IP|" \
    "$src" >"$tmp" || ! chmod 0644 "$tmp"; then
    rm -f "$tmp"
    log "cannot write $tmp"
    return 1
  fi
  if [ -f "$dst" ] && cmp -s "$tmp" "$dst"; then
    rm -f "$tmp"
    return 0
  fi
  if ! mv -f "$tmp" "$dst"; then
    rm -f "$tmp"
    log "cannot replace $dst"
    return 1
  fi
  log "wrote $dst (metrics_listen $value)"
}

if [ -z "$watch" ]; then
  render
  exit $?
fi

# The sidecar: PID 1 of its container ignores SIGTERM without a handler; exit at once instead of
# waiting out the grace period.
sleeper=""
trap '[ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null; exit 0' TERM INT
while :; do
  render || log "keeping the previous $dst"
  sleep "$watch" &
  sleeper=$!
  wait "$sleeper"
done
