# >>> torchserve-deploy (appended by `make install`) >>>
# deploy/venv-activate.sh says why. The checkout is the venv's parent folder.
set -gx TS_CONFIG_FILE (dirname "$VIRTUAL_ENV")/config.properties
function torchserve -d "torchserve, run from the checkout's root"
    pushd (dirname "$TS_CONFIG_FILE"); or return
    command torchserve $argv
    set -l code $status
    popd
    return $code
end
# <<< torchserve-deploy <<<
