#!/usr/bin/env python3
"""A server whose every answer is a body without end, for the memory benchmark of
`idem-check run` (BENCHMARKS.md, "Endless response bodies").

Each request (any method, any path) gets 201 and then, by FRAMING:
  gib      Content-Length: 1073741824 and that many bytes
  chunked  Transfer-Encoding: chunked, 64 KiB chunks forever
  huge     Content-Length: 1000000000000000 and bytes until the client hangs up

    python3 benches/endless_body.py FRAMING   (prints "listening on http://ADDR")
"""

import socket
import sys
import threading

FRAMING = sys.argv[1] if len(sys.argv) > 1 else "chunked"
CHUNK = b"x" * 65536
HEADS = {
    "gib": b"Content-Length: %d\r\n" % (1 << 30),
    "chunked": b"Transfer-Encoding: chunked\r\n",
    "huge": b"Content-Length: 1000000000000000\r\n",
}


def body():
    """The body's bytes as they go on the wire, in pieces."""
    if FRAMING == "gib":
        for _ in range((1 << 30) // len(CHUNK)):
            yield CHUNK
    elif FRAMING == "chunked":
        while True:
            yield b"10000\r\n" + CHUNK + b"\r\n"
    else:
        while True:
            yield CHUNK


def serve(conn):
    try:
        reader = conn.makefile("rb")
        while reader.readline():
            length = 0
            while True:
                line = reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                         + HEADS[FRAMING] + b"\r\n")
            for piece in body():
                conn.sendall(piece)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    if FRAMING not in HEADS:
        sys.exit(f"unknown framing {FRAMING!r}: use gib, chunked or huge")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(512)
    print("listening on http://127.0.0.1:%d" % listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
