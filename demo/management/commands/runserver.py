"""``runserver`` (what ``make run`` starts): Django's, static files included, with TCP_NODELAY.

Django's development server writes a response's headers and its body as two writes; with
Nagle's algorithm the body then waits for the client's delayed ACK of the headers, up to 40 ms
on Linux. Under ``make run`` every image of a trial arrived that much late (measured with
``benchmarks/bench_raters.py --server runserver``). The demo app is listed before
``django.contrib.staticfiles`` so that this command is the one ``manage.py runserver`` finds.
"""

from __future__ import annotations

import socket
from typing import Any

from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver
from django.core.servers.basehttp import WSGIServer


class NoDelayWSGIServer(WSGIServer):
    """Django's development WSGI server; each accepted connection sends its writes at once."""

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class Command(StaticFilesRunserver):
    server_cls = NoDelayWSGIServer
