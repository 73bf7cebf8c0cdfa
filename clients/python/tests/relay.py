"""A TCP relay standing in for a radio link between two nodes, as daemon::relay::Relay does for
the Rust tests and ``ferry demo``: a node dials the relay instead of its peer; :meth:`cut`
tears down every connection through it and closes new ones at once, until :meth:`restore`.
It never looks at the bytes."""

from __future__ import annotations

import socket
import threading


class Relay:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._up = True
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                up = self._up
            if not up:
                client.close()  # a dial over a dead link fails
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        with self._lock:
            self._up = False
            sockets, self._open = self._open, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def restore(self) -> None:
        with self._lock:
            self._up = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()
