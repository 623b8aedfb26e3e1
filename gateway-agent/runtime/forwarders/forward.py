# Runs as PID 1 of a container that has no network (`--network none`): listens on
# 127.0.0.1:PORT (the proxy's port, so the harness's OPENAI_BASE_URL works unchanged) and relays
# each connection to the gateway's proxy socket bind-mounted into the container.
# Standard library only and Python 3.3+ syntax, on purpose: it runs with whatever `python3` the
# image has (SWE-bench images, most dev images).
import os
import signal
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        # Pass the half-close on: an HTTP client that finished sending still reads the answer.
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError as err:
        sys.stderr.write("polar-forward: proxy socket %s: %s\n" % (path, err))
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main():
    path, port = sys.argv[1], int(sys.argv[2])
    # PID 1 ignores SIGTERM unless it installs a handler: exit at once when the container stops.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("127.0.0.1", port))
        server.listen(128)
    except OSError as err:
        sys.stderr.write("polar-forward: cannot listen on 127.0.0.1:%d: %s\n" % (port, err))
        sys.exit(125)
    print("polar-forward: ready python3", flush=True)
    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client, path), daemon=True).start()


main()
