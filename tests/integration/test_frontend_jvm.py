"""The Java frontend runs with the JVM options config.properties names (`vmargs`): TorchServe reads
them from the file it is started with, so a server started the way the project starts one must
carry them (C1-only JIT: docs/performance.md, "The Java frontend's JIT")."""

from __future__ import annotations

import psutil

from deploy.ts_files import read_properties
from tests.support.torchserve import ROOT


def frontend_cmdline(server) -> list[str]:
    java = [
        p
        for p in psutil.Process(server.process.pid).children(recursive=True)
        if "org.pytorch.serve.ModelServer" in p.cmdline()
    ]
    assert len(java) == 1, [p.cmdline() for p in java]
    return java[0].cmdline()


def test_the_frontend_jvm_runs_with_the_configured_options(served):
    wanted = read_properties(ROOT / "config.properties")["vmargs"].split()
    assert "-XX:TieredStopAtLevel=1" in wanted
    cmdline = frontend_cmdline(served.server)
    assert all(option in cmdline for option in wanted), cmdline
