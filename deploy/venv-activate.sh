# >>> torchserve-deploy (appended by `make install`) >>>
# TorchServe 0.12 reads its settings from TS_CONFIG_FILE or --ts-config, never from the current
# folder: point it at this checkout's config.properties. config.properties names model_store and
# metrics.yaml relative to the folder TorchServe starts in, and TorchServe writes key_file.json and
# logs/ there, so `torchserve` runs from the checkout's root, wherever it is typed.
# POSIX sh: bash and zsh name the file being sourced (a checkout whose .venv is a link to another
# checkout's venv gets its own config); other shells cannot, and take the venv's own folder.
if [ -n "${BASH_VERSION:-}" ]; then
    eval '_torchserve_deploy_here=${BASH_SOURCE[0]}'
elif [ -n "${ZSH_VERSION:-}" ]; then
    _torchserve_deploy_here=$0
else
    _torchserve_deploy_here=$VIRTUAL_ENV/bin/activate
fi
TS_CONFIG_FILE="$(cd "$(dirname "$_torchserve_deploy_here")/../.." && pwd)/config.properties"
export TS_CONFIG_FILE
unset _torchserve_deploy_here
torchserve() ( cd "$(dirname "$TS_CONFIG_FILE")" && command torchserve "$@" )
# `deactivate` takes both away again: `make install` adds that line to the venv's deactivate.
# <<< torchserve-deploy <<<
