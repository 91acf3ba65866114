# >>> torchserve-deploy (appended by `make install`) >>>
# deploy/venv-activate.sh says why. The checkout is the venv's parent folder.
setenv TS_CONFIG_FILE "`dirname $VIRTUAL_ENV:q`/config.properties"
alias torchserve '( cd "`dirname $TS_CONFIG_FILE:q`" && "$VIRTUAL_ENV/bin/torchserve" \!* )'
# <<< torchserve-deploy <<<
