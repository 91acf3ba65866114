"""`free_port` never hands out a port twice: the servers it is for (a pod's TorchServe, its
HAProxy, moto, MLflow) bind their ports seconds after asking, and the kernel may offer a port
that is free again to the next caller in between."""

from __future__ import annotations

import socket

from rehearsal import pod


class _Kernel:
    """A socket whose bind to port 0 is given the next port of `offers`, as the kernel may."""

    def __init__(self, offers: list[int]):
        self.offers = offers

    def __call__(self, *args, **kwargs):
        kernel = self

        class _Socket:
            port = 0

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def bind(self, address):
                self.port = kernel.offers.pop(0)

            def getsockname(self):
                return ("127.0.0.1", self.port)

        return _Socket()


def test_a_port_the_kernel_offers_again_is_not_handed_out_twice(monkeypatch):
    # Below the ephemeral range, so no real call in this process can have handed them out.
    monkeypatch.setattr(socket, "socket", _Kernel([1021, 1021, 1021, 1022]))
    assert [pod.free_port(), pod.free_port()] == [1021, 1022]


def test_ports_handed_out_are_distinct_and_free_now():
    ports = [pod.free_port() for _ in range(64)]
    assert len(set(ports)) == 64
    for port in ports[:8]:  # nothing listens there: a server may bind it
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
