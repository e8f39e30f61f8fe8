"""``manage.py runserver`` (``make run``) is Django's with TCP_NODELAY on every connection."""

from __future__ import annotations

import socket

from django.core.management import get_commands, load_command_class

from demo.management.commands.runserver import NoDelayWSGIServer


def test_runserver_is_ours_and_keeps_static_files() -> None:
    from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver

    command = load_command_class(get_commands()["runserver"], "runserver")
    assert isinstance(command, StaticFilesRunserver)  # --nostatic / --insecure still there
    assert command.server_cls is NoDelayWSGIServer


def test_each_accepted_connection_has_nagle_off() -> None:
    server = NoDelayWSGIServer(("127.0.0.1", 0), None)  # type: ignore[arg-type]
    try:
        with socket.create_connection(server.server_address[:2]) as client:
            accepted, _ = server.get_request()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
                assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # the default it changes
    finally:
        server.server_close()
