"""README.md and docs/*.md, executed: every runnable code block, in order, as a reader types it.

Each document gets a fresh checkout with tiny trained models (tests/support/checkout.py) and one
bash session in its own network namespace, so the documented addresses and this repository's
config.properties are used as written. What the reader is assumed to have is set up first,
visibly, in SETUP: an S3 endpoint in their AWS chain (moto on 127.0.0.1:9000, the usual MinIO
port), and for the pages after the README an activated venv. Blocks marked `no-test: <why>` are
not run (tests/support/docblocks.py); tests/unit/test_docs_blocks.py checks that every other
block is labelled.
"""

from __future__ import annotations

import pytest

from tests.support.checkout import Shell
from tests.support.docblocks import DOCS, PENDING, blocks, parse, rel

pytestmark = pytest.mark.integration

S3_ENV = {
    # The reader's AWS chain: dummy credentials, and an S3-compatible endpoint (moto).
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
}
START_S3 = """
.venv/bin/moto_server -H 127.0.0.1 -p 9000 >"$TMPDIR/moto.log" 2>&1 &
for i in $(seq 150); do curl -s -o /dev/null http://127.0.0.1:9000/moto-api/ && break; sleep 0.2; done
"""
ACTIVATE = "source .venv/bin/activate\n"
SETUP = {
    "README.md": START_S3,  # the README itself says to activate the venv
    "docs/s3.md": ACTIVATE + START_S3,
    "docs/clients.md": ACTIVATE + "make serve\n",  # its CLI examples talk to a running server
}
"""What a reader has before a page's first block; every other page: ACTIVATE."""


RUNNABLE = [d for d in DOCS if rel(d) not in PENDING and any(b.runs for b in blocks(d))]


@pytest.mark.parametrize("doc", RUNNABLE, ids=rel)
def test_documented_commands_work_as_written(doc, checkout):
    with Shell(checkout, env=S3_ENV) as shell:
        shell.run(SETUP.get(rel(doc), ACTIVATE), f"setup of {rel(doc)}", 300)
        for example in parse(doc):  # the checkout holds the same file
            block = example.parsed
            if not block.runs:
                continue
            if block.language == "python":
                script = shell.scratch / f"block-{block.line}.py"
                script.write_text(block.source)
                shell.run(f"python - <{script}", block.where, 300)  # as pasted: cwd on sys.path
            else:
                shell.run(block.source, block.where, 300)
