"""A small Idempotency-Key server whose flaws are switched on by flags, for idem-check's tests
of its own verdicts: each flag is a way a real API (or a broken setup) has misled the checker.

Without flags it keeps a record per (tenant, key): the first request executes (201 with a new
id), a retry with the same payload replays it, another payload gets 422, no key gets 400.
Keys are accepted quoted ("...") or bare (a bare key starts with a letter); letters, digits,
'.', '_' and '-' only. Tenants: `Bearer ta`, `Bearer tb` (others: tenant
"anon"). GET /count is the effect counter.

Flags (any combination):
  --acceptor            every POST executes and answers 202 {"status":"accepted"}: no records
  --fingerprint-dedupe  a new key whose payload an earlier key already used gets 409
  --unscoped            records are shared by every tenant (tenant B replays tenant A)
  --conflict-on-replay  a retry of a completed key gets 409 "Fingerprint conflict"
  --echo-key            refusals echo the raw key in an X-Echo-Key header, control bytes too
  --counter-backwards   after 3 executions the counter reads one less every time it is read
  --counter-jump        the counter reads 2^64-1 once 3 executions happened
  --stall-once          the first retry of a completed key stalls (never answers)
  --stall-marked        a request carrying Idempotency-Replayed stalls (never answers)
  --die-after N         after N POSTs every request stalls: the server stops answering
  --auth                every request without `Bearer ta` or `Bearer tb` gets 401
  --bare-only           a quoted key gets 400
  --memory-counter      POST /restart is a restart that keeps the records (a database) but
                        zeroes the counter (kept in memory); GET /ready fails twice after it
  --racy-ms N           check-then-act without a lock: a new key is looked up, then N ms later
                        executed and recorded, so every duplicate inside that gap executes too

Usage: python3 hostile.py [FLAGS]   (prints "listening on http://ADDR" once it accepts)
"""
import json, re, sys, threading, time, uuid
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

FLAGS = set(a for a in sys.argv[1:] if a.startswith("--"))
DIE_AFTER = int(sys.argv[sys.argv.index("--die-after") + 1]) if "--die-after" in FLAGS else None
RACY_MS = int(sys.argv[sys.argv.index("--racy-ms") + 1]) if "--racy-ms" in FLAGS else None
LOCK = threading.Lock()
RECORDS, PAYLOADS = {}, {}
STATE = {"executions": 0, "reads": 0, "posts": 0, "stalled": False, "down": 0}

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body are two writes: no delayed-ACK stall
    def log_message(self, *a): pass

    def reply(self, status, body, extra=()):
        data = json.dumps(body).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra:
            self._headers_buffer.append(name + b": " + value + b"\r\n")
        self.end_headers()
        self.wfile.write(data)

    def tenant(self):
        auth = self.headers.get("Authorization", "")
        return {"Bearer ta": "a", "Bearer tb": "b"}.get(auth)

    def stall_if_dead(self):
        if DIE_AFTER is not None and STATE["posts"] > DIE_AFTER:
            time.sleep(60)

    def do_GET(self):
        self.stall_if_dead()
        if "--auth" in FLAGS and self.tenant() is None:
            return self.reply(401, {"error": "unauthorized"})
        if self.path == "/ready" and "--memory-counter" in FLAGS:
            with LOCK:
                down = STATE["down"] > 0
                STATE["down"] = max(0, STATE["down"] - 1)
            return self.reply(503 if down else 200, {"ready": not down})
        if self.path != "/count":
            return self.reply(404, {"error": "not found"})
        with LOCK:
            STATE["reads"] += 1
            n = STATE["executions"]
            if "--counter-backwards" in FLAGS and n >= 3:
                n = 1000 - STATE["reads"]
            if "--counter-jump" in FLAGS and n >= 3:
                n = 2**64 - 1
        self.reply(200, {"count": n})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        payload = self.rfile.read(length)
        if self.path == "/restart" and "--memory-counter" in FLAGS:
            with LOCK:
                STATE["executions"], STATE["down"] = 0, 2
            return self.reply(200, {"restarted": True})
        with LOCK:
            STATE["posts"] += 1
        self.stall_if_dead()
        if "--stall-marked" in FLAGS and self.headers.get("Idempotency-Replayed"):
            time.sleep(60)
            return
        tenant = self.tenant()
        if "--auth" in FLAGS and tenant is None:
            return self.reply(401, {"error": "unauthorized"})
        raw = [v.encode("latin-1") for v in self.headers.get_all("Idempotency-Key") or []]
        if "--acceptor" in FLAGS:
            with LOCK:
                STATE["executions"] += 1
            return self.reply(202, {"status": "accepted"})
        if len(raw) != 1:
            return self.reply(400, {"error": "one Idempotency-Key required"})
        key = raw[0].decode("latin-1")
        quoted = len(key) >= 2 and key[0] == '"' and key[-1] == '"'
        echo = [(b"X-Echo-Key", raw[0])] if "--echo-key" in FLAGS else []
        if quoted and "--bare-only" in FLAGS:
            return self.reply(400, {"error": "keys are bare tokens"}, echo)
        if quoted:
            key = key[1:-1]
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}" if quoted else r"[A-Za-z][A-Za-z0-9._-]{0,254}", key):
            return self.reply(400, {"error": "invalid key"}, echo)
        scope = key if "--unscoped" in FLAGS else (tenant, key)
        if RACY_MS is not None:
            with LOCK:
                seen = RECORDS.get(scope)
            if seen is None:
                time.sleep(RACY_MS / 1000)
                with LOCK:
                    STATE["executions"] += 1
                    body = {"id": "p-" + uuid.uuid4().hex, "tenant": tenant}
                    RECORDS[scope] = {"payload": payload, "status": 201, "body": body}
                return self.reply(201, body)
        with LOCK:
            rec = RECORDS.get(scope)
            if rec is not None:
                if rec["payload"] != payload:
                    return self.reply(422, {"error": "key reused with another payload"})
                if "--stall-once" in FLAGS and not STATE["stalled"]:
                    STATE["stalled"] = True
                    LOCK.release()
                    try:
                        time.sleep(30)
                    finally:
                        LOCK.acquire()
                    return
                if "--conflict-on-replay" in FLAGS:
                    return self.reply(409, {"error": "Fingerprint conflict"})
                return self.reply(rec["status"], rec["body"])
            if "--fingerprint-dedupe" in FLAGS and (tenant, payload) in PAYLOADS:
                return self.reply(409, {"error": "duplicate payload"})
            STATE["executions"] += 1
            body = {"id": "p-" + uuid.uuid4().hex, "tenant": tenant}
            RECORDS[scope] = {"payload": payload, "status": 201, "body": body}
            PAYLOADS[(tenant, payload)] = scope
        self.reply(201, body)

SERVER = ThreadingHTTPServer(("127.0.0.1", 0), H)
SERVER.daemon_threads = True
print("listening on http://%s:%d" % SERVER.server_address, flush=True)
SERVER.serve_forever()
