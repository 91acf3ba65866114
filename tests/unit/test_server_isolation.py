"""Servers started side by side on one host keep apart: `free_port` never hands out a port twice
(the servers it is for, a pod's TorchServe, its HAProxy, moto, MLflow, bind their ports seconds
after asking, and the kernel may offer a port that is free again to the next caller in between),
and each rehearsal pod's TorchServe keeps its worker sockets in a folder of its own."""

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


def test_pods_on_one_host_give_torchserve_java_tmp_dirs_of_their_own(tmp_path):
    """The frontend names worker sockets `<java.io.tmpdir>/.ts.sock.<port>`, from TEMP."""
    deep = tmp_path.joinpath(*["a-rather-long-checkout-folder"] * 6)  # a socket path's 107 bytes
    pods = [pod.Pod(root, archives={}, tokens=[], config={}) for root in (tmp_path / "a", deep)]
    temps = [p._env()["TEMP"] for p in pods]
    assert len(set(temps)) == 2 and "/tmp" not in temps
    assert all(len(f"{t}/.ts.sock.65535".encode()) <= 107 for t in temps)
