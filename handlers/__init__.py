"""Code that runs inside TorchServe workers.

The TorchServe classes (`*_handler.py`) only wire the lifecycle; the work lives in plain modules that
do not import TorchServe and are unit-tested on their own. The whole package ships inside each .mar.
"""
