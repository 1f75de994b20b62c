"""Run inside the browser's sandbox: bring the app's TCP port into an empty network namespace.

Usage (with the system python, standard library only):
    python3 -I -S netns_forward.py PORT SOCKET -- BROWSER [ARGS...]

The browser's network namespace holds only a loopback interface. This script listens on
127.0.0.1:PORT there, starts the browser, and carries every connection to the unix socket
SOCKET, which the host bound into the sandbox and which reaches the app and nothing else.
So `http://127.0.0.1:PORT` (the app's origin) works inside, WebSockets included, while every
other address, port and host is simply unreachable. The script exits with the browser's status;
the sandbox's PID namespace then takes the forwarder's threads with it.
"""

import os
import socket
import sys
import threading

CHUNK = 65536


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy bytes one way until EOF, then pass the half-close on."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def carry(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=carry, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: netns_forward.py PORT SOCKET -- BROWSER [ARGS...]\n")
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    # The browser inherits our stdio and the driver's pipe (fds 3 and 4); not the listener.
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) & 0xFF


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
