#!/bin/sh
# Container entrypoint (run under tini): write TorchServe's config, start it, and make SIGTERM
# reach the Java server. SIGTERM to the `torchserve --foreground` Python wrapper leaves Java
# running, so the trap runs `torchserve --stop`, which terminates Java and waits for it.
set -eu

WORK="${TS_WORKDIR:-/home/model-server/work}"
APP="${TS_APP_DIR:-/opt/torchserve/app}"
mkdir -p "$WORK" "${TMPDIR:-/tmp}"
cd "$WORK"

# In Kubernetes the settings come from a ConfigMap generated from the repository's
# config.properties, mounted as one file per key (TS_CONFIG_DIR); elsewhere the baked-in copy.
if [ -n "${TS_CONFIG_DIR:-}" ]; then
    : > config.properties
    for f in "$TS_CONFIG_DIR"/*; do
        [ -f "$f" ] || continue
        printf '%s=%s\n' "$(basename "$f")" "$(cat "$f")" >> config.properties
    done
else
    cp "$APP/config.properties" config.properties
fi
# Token authorization may be off only behind the pod proxy, i.e. with TorchServe's inference and
# management APIs on loopback (docs/kubernetes.md, threat model): refuse any other combination.
if grep -qix 'disable_token_authorization=true' config.properties; then
    for key in inference_address management_address grpc_inference_address grpc_management_address; do
        value=$(sed -n "s/^$key=//p" config.properties)
        case "$value" in
            "" | http://127.0.0.1:* | https://127.0.0.1:* | 127.0.0.1) ;;
            *)
                echo "entrypoint: $key=$value with disable_token_authorization=true; TorchServe without tokens listens on 127.0.0.1 only" >&2
                exit 78
                ;;
        esac
    done
fi
# The key that signs state models hand their clients (the Secret torchserve-stream-state-key,
# docs/kubernetes.md):
# without a usable one every worker would fail to load the model, one by one, until the startup
# probe gives up; say why once, before TorchServe starts.
if [ -n "${STREAM_STATE_HMAC_FILE:-}" ]; then
    if ! [ -r "$STREAM_STATE_HMAC_FILE" ] || [ "$(tr -d '[:space:]' < "$STREAM_STATE_HMAC_FILE" | wc -c)" -lt 16 ]; then
        echo "entrypoint: STREAM_STATE_HMAC_FILE=$STREAM_STATE_HMAC_FILE is missing, unreadable or under 16 bytes: create the Secret torchserve-stream-state-key (docs/kubernetes.md)" >&2
        exit 78
    fi
fi
# config.properties names metrics.yaml and model_store relative to the working directory.
cp "$APP/metrics.yaml" metrics.yaml
mkdir -p model_store

# RUNTIME picks the server (docs/oip.md): torchserve (the default) or oip, the Open Inference
# Protocol server (`python -m oip`, KServe's model server, from the image's venv-oip) over the same
# archives in model_store/, with the same request-size limit (max_request_size). Its REST and gRPC
# listen on OIP_HTTP_PORT and OIP_GRPC_PORT (8080 and 7070: where the pod's door finds TorchServe)
# on OIP_HOST: loopback, behind the door (docker/proxy.sh with RUNTIME=oip), which checks the
# client tokens; any other address needs OIP_TOKEN_FILE (the client tokens, one a line), as
# TorchServe without tokens stays on loopback. The handlers' Prometheus metrics listen on
# OIP_METRICS_PORT (8082: TorchServe's metrics port, where the door's metrics port finds it).
RUNTIME="${RUNTIME:-torchserve}"
case "$RUNTIME" in
    torchserve) ;;
    oip)
        if ! [ -x "${OIP_PYTHON:-/opt/venv-oip/bin/python}" ]; then
            echo "entrypoint: RUNTIME=oip: no ${OIP_PYTHON:-/opt/venv-oip/bin/python} in this image (the serving images carry the OIP server)" >&2
            exit 78
        fi
        host="${OIP_HOST:-127.0.0.1}"
        max=$(sed -n 's/^max_request_size=//p' config.properties)
        # number_of_gpu (the GPU overlay's 1): each model's workers spread over that many GPUs.
        gpus=$(sed -n 's/^number_of_gpu=//p' config.properties)
        if [ -n "${OIP_TOKEN_FILE:-}" ]; then
            auth="--token-file=$OIP_TOKEN_FILE"
        elif [ "$host" = 127.0.0.1 ]; then
            auth="--no-auth"
        else
            echo "entrypoint: RUNTIME=oip with OIP_HOST=$host and no OIP_TOKEN_FILE; the OIP server without tokens listens on 127.0.0.1 only" >&2
            exit 78
        fi
        set -- "$auth" --host "$host" --http-port "${OIP_HTTP_PORT:-8080}" \
            --grpc-port "${OIP_GRPC_PORT:-7070}" --metrics-port "${OIP_METRICS_PORT:-8082}" --work-dir "${TMPDIR:-/tmp}/oip-models" \
            ${max:+--max-request-bytes "$max"} --gpus "${gpus:-0}" "$@"
        found=
        for mar in model_store/*.mar; do
            [ -f "$mar" ] || continue
            set -- "$@" "$mar"
            found=1
        done
        if [ -z "$found" ]; then
            echo "entrypoint: RUNTIME=oip and no archive in $WORK/model_store" >&2
            exit 78
        fi
        # exec: SIGTERM (from tini) reaches the server itself, which stops serving and exits.
        exec "${OIP_PYTHON:-/opt/venv-oip/bin/python}" -m oip "$@"
        ;;
    *)
        echo "entrypoint: RUNTIME=$RUNTIME: torchserve (the default) or oip" >&2
        exit 78
        ;;
esac

# TorchServe 0.12 prefers TS_CONFIG_FILE to --ts-config: an inherited one (an activated venv sets it
# to the checkout's config.properties) would replace this pod's settings, ports included.
export TS_CONFIG_FILE="$WORK/config.properties"
# The image puts $APP (with a copy of handlers/, for `python -m deploy` and probe.py) on PYTHONPATH.
# TorchServe 0.12 puts a worker's PYTHONPATH before the unpacked archive, so that copy would shadow
# the archive's code (a release mixing modules of two versions): the server starts without it, and
# each worker runs only the code its .mar carries (tests/integration/test_archive_contents.py).
env -u PYTHONPATH torchserve --start --foreground --ncs --ts-config "$TS_CONFIG_FILE" "$@" &
server=$!

stopping=
stop() {
    trap - TERM INT
    stopping=1
    torchserve --stop --foreground || true
}
trap stop TERM INT

# The first wait returns when a trapped signal arrives, with 128 + its number whatever the server
# does; after a stop the second collects the server's own status (a drained server exits 0, and so
# does the container: `make image-test` saw 143 from the image before).
status=0
wait "$server" || status=$?
if [ -n "$stopping" ]; then
    status=0
    wait "$server" || status=$?
fi
exit "$status"
