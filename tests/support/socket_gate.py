"""A gate between a Chromium page and the console's socket (Playwright's ``route_web_socket``): the tests
that drop the connection, or keep it from connecting while something changes on the server, use it.

Every connection goes to the real daphne while the gate is open; nothing is mocked but the moment.
"""

import re

CONSOLE_SOCKET = re.compile(r"/ws/console/$")


class ConsoleSocketGate:
    """Passes each of the page's console sockets through to the server while open.

    ``shut()`` closes the connected ones and refuses every new one (the page keeps trying
    to reconnect, as it would with the server unreachable) until ``open()``.
    Install it before the page's first ``goto``.
    """

    def __init__(self, page):
        self.is_shut = False
        self.connected = []
        page.route_web_socket(CONSOLE_SOCKET, self._route)

    def _route(self, ws):
        if self.is_shut:
            ws.close()
            return
        self.connected.append(ws.connect_to_server())

    def shut(self):
        self.is_shut = True
        for server in self.connected:
            server.close()
        self.connected.clear()

    def open(self):
        self.is_shut = False
