# >>> torchserve-deploy (appended by `make install`) >>>
# TorchServe 0.12 reads its settings from TS_CONFIG_FILE or --ts-config, never from the current
# folder: point it at this checkout's config.properties. config.properties names model_store and
# metrics.yaml relative to the folder TorchServe starts in, and TorchServe writes key_file.json and
# logs/ there, so `torchserve` runs from the checkout's root, wherever it is typed.
TS_CONFIG_FILE="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/../.." && pwd)/config.properties"
export TS_CONFIG_FILE
torchserve() ( cd "$(dirname "$TS_CONFIG_FILE")" && command torchserve "$@" )
# `deactivate` takes both away again (the venv's own deactivate runs after).
eval "_torchserve_deploy_$(typeset -f deactivate)"
deactivate() { unset TS_CONFIG_FILE; unset -f torchserve; _torchserve_deploy_deactivate "$@"; }
# <<< torchserve-deploy <<<
