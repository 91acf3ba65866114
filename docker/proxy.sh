#!/bin/sh
# The pod proxy's entrypoint: HAProxy (docker/haproxy.cfg) in front of TorchServe on loopback.
#
# HAProxy reads its settings from the environment; this script adds the two it cannot derive:
# - MAX_REQUEST_SIZE, from TorchServe's own config (one source: its 413 and ours agree);
# - the client tokens' sha256 hashes, from the mounted Secret (one token a line). A Secret update
#   reaches the volume without a restart, so the file is re-hashed every PROXY_TOKEN_POLL seconds
#   and HAProxy reloads on a change (master-worker: old connections finish on the old tokens).
# SIGTERM (after preStop) becomes HAProxy's soft stop: stop listening, finish in-flight requests.
#
# RUNTIME=oip (the pod's switch, set on both containers) fronts the Open Inference Protocol server
# instead: PROXY_OIP selects the cfg's OIP allow-lists and backends (docs/oip.md).
#
# With PROXY_TORCHSERVE_AUTH set (`make serve`, deploy/local_door.py) TorchServe checks its own
# tokens: the door reads no Secret, checks no token and passes the client's on.
set -eu

case "${RUNTIME:-torchserve}" in
    torchserve) ;;
    oip) export PROXY_OIP=1 ;;
    *)
        echo "proxy: RUNTIME=$RUNTIME: torchserve (the default) or oip" >&2
        exit 78
        ;;
esac
TOKENS="${PROXY_TOKENS:-/var/run/secrets/inference/tokens}"
CFG="${PROXY_CONFIG:-$(dirname "$0")/haproxy.cfg}"
RUN="${PROXY_RUN_DIR:-${TMPDIR:-/tmp}/proxy}"
POLL="${PROXY_TOKEN_POLL:-10}"
mkdir -p "$RUN"
export PROXY_TOKEN_HASHES="$RUN/token-hashes"

# max_request_size: the ConfigMap volume (one file per key) in a pod, else a config.properties.
if [ -z "${MAX_REQUEST_SIZE:-}" ]; then
    if [ -n "${TS_CONFIG_DIR:-}" ] && [ -f "$TS_CONFIG_DIR/max_request_size" ]; then
        MAX_REQUEST_SIZE=$(cat "$TS_CONFIG_DIR/max_request_size")
    else
        MAX_REQUEST_SIZE=$(sed -n 's/^max_request_size=//p' "${TS_CONFIG_FILE:-/opt/torchserve/app/config.properties}")
    fi
fi
export MAX_REQUEST_SIZE="${MAX_REQUEST_SIZE:-6553500}" # TorchServe's own default
# Sockets: as many as the file limit allows (two descriptors each), up to 50,000; each frontend half.
if [ -z "${PROXY_MAXCONN:-}" ]; then
    files=$(ulimit -Hn)
    [ "$files" = unlimited ] && files=100000
    PROXY_MAXCONN=$(( files / 2 - 64 ))
    [ "$PROXY_MAXCONN" -gt 50000 ] && PROXY_MAXCONN=50000
fi
export PROXY_MAXCONN PROXY_FRONTEND_MAXCONN="${PROXY_FRONTEND_MAXCONN:-$((PROXY_MAXCONN / 2))}"
# HAProxy holds a whole body before it goes upstream: its buffer fits the largest one plus headers.
export PROXY_BUFSIZE="${PROXY_BUFSIZE:-$((MAX_REQUEST_SIZE + 65536))}"
# The gRPC backend's health check asks TorchServe's REST /ping.
TS_INFERENCE="${TS_INFERENCE:-127.0.0.1:8080}"
export TS_INFERENCE TS_INFERENCE_PORT="${TS_INFERENCE##*:}"

# One lower-case sha256 per non-empty line; whitespace around a token is not part of it.
hash_tokens() {
    tr -d ' \t\r' < "$TOKENS" | while IFS= read -r token || [ -n "$token" ]; do
        [ -n "$token" ] && printf '%s' "$token" | sha256sum | cut -d' ' -f1
    done
}

write_hashes() {
    hash_tokens > "$PROXY_TOKEN_HASHES.new"
    if [ ! -s "$PROXY_TOKEN_HASHES.new" ]; then
        echo "proxy: no client token in $TOKENS" >&2
        return 1
    fi
    mv "$PROXY_TOKEN_HASHES.new" "$PROXY_TOKEN_HASHES"
}

if [ -n "${PROXY_TORCHSERVE_AUTH:-}" ]; then
    : > "$PROXY_TOKEN_HASHES"
else
    write_hashes || exit 1
fi
haproxy -c -q -f "$CFG"
haproxy -W -db -f "$CFG" &
master=$!

stopping=
stop() {
    stopping=1
    kill -USR1 "$master" 2>/dev/null || true # soft stop: close listeners, drain, exit
}
trap stop TERM INT

last=$(cat "$PROXY_TOKEN_HASHES")
while [ -z "$stopping" ] && kill -0 "$master" 2>/dev/null; do
    if [ -n "${PROXY_TORCHSERVE_AUTH:-}" ]; then # no tokens to follow: wait for the end
        sleep "$POLL" &
        wait $! || true
        continue
    fi
    sleep "$POLL" &
    wait $! || true
    [ -z "$stopping" ] || break
    if ! write_hashes; then
        continue # a half-written or emptied Secret: keep serving the last good tokens
    fi
    now=$(cat "$PROXY_TOKEN_HASHES")
    if [ "$now" != "$last" ]; then
        echo "proxy: client tokens changed, reloading" >&2
        kill -USR2 "$master"
        last=$now
    fi
done

status=0
wait "$master" || status=$?
exit "$status"
