#!/usr/bin/env python3
"""Writes the seed corpus, fuzz/corpus/<target>/*.seed: real server exchanges and samples of
connection strings, password files and SQL, in the input layout each target documents at its
top. Run it from anywhere after changing a layout; the files it writes are committed."""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def msg(tag, body=b""):
    return tag + struct.pack(">I", len(body) + 4) + body


def cstr(s):
    return (s.encode() if isinstance(s, str) else s) + b"\0"


def auth(code, data=b""):
    return msg(b"R", struct.pack(">I", code) + data)


def param(name, value):
    return msg(b"S", cstr(name) + cstr(value))


def key_data(pid=4242, secret=0x1234ABCD):
    return msg(b"K", struct.pack(">ii", pid, secret))


def ready(status=b"I"):
    return msg(b"Z", status)


def error(code, message, severity="ERROR", tag=b"E"):
    fields = b"S" + cstr(severity) + b"V" + cstr(severity) + b"C" + cstr(code)
    fields += b"M" + cstr(message) + b"\0"
    return msg(tag, fields)


def notice(message):
    return error("01000", message, "WARNING", b"N")


def params_ok():
    return (
        param("server_version", "17.2")
        + param("client_encoding", "UTF8")
        + param("standard_conforming_strings", "on")
        + param("TimeZone", "UTC")
        + key_data()
        + ready()
    )


# ---- backend_messages: [b0, b1, unit descriptors..., stream] ------------------------------
# Unit kinds (descriptor bits 0-3): 0 Prepare, 1 Execute(int8, text), 2 Execute(text),
# 3 Execute(no columns), 4 Typed, 5 Simple, 6 Stream(int8, text), 7 CopyOut, 8 CopyIn,
# 9 Batch(int8 text; none), 10 Status. Bit 4 BEGIN before, 5 COMMIT after, 6 joins the
# previous unit's Sync, 7 a consumer with room every other row.
PREPARE, EXEC2, EXEC1, EXEC0, TYPED, SIMPLE, STREAM, COPYOUT, COPYIN, BATCH, STATUS = range(11)
BEFORE, AFTER, JOIN, CHOOSY = 0x10, 0x20, 0x40, 0x80


def header(units, cap=0, chunking=0, b1=0):
    assert 1 <= len(units) <= 8
    return bytes([(len(units) - 1) | (cap << 3) | (chunking << 5), b1] + units)


def field(name, oid):
    return cstr(name) + struct.pack(">IhIhih", 0, 0, oid, -1, -1, 1)


def row_description(cols):
    return msg(b"T", struct.pack(">H", len(cols)) + b"".join(field(n, o) for n, o in cols))


def data_row(values):
    body = struct.pack(">H", len(values))
    for v in values:
        body += struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v
    return msg(b"D", body)


def complete(tag):
    return msg(b"C", cstr(tag))


def int8(n):
    return struct.pack(">q", n)


INT8_TEXT = [("n", 20), ("t", 25)]

backend = {
    # Prepare: ParseComplete, ParameterDescription, RowDescription, ReadyForQuery; then an
    # execution of it: BindComplete, rows, CommandComplete, ReadyForQuery.
    "prepare-execute": header([PREPARE, EXEC2])
    + msg(b"1")
    + msg(b"t", struct.pack(">HII", 2, 20, 25))
    + row_description(INT8_TEXT)
    + ready()
    + msg(b"2")
    + data_row([int8(1), b"one"])
    + data_row([int8(2), None])
    + complete("SELECT 2")
    + ready(),
    # Typed: ParseComplete, BindComplete, RowDescription, DataRow, CommandComplete, Ready;
    # then one that returns no rows (NoData).
    "typed": header([TYPED, TYPED], chunking=2, b1=7)
    + msg(b"1")
    + msg(b"2")
    + row_description([("x", 23)])
    + data_row([struct.pack(">i", 42)])
    + complete("SELECT 1")
    + ready()
    + msg(b"1")
    + msg(b"2")
    + msg(b"n")
    + complete("INSERT 0 3")
    + ready(b"I"),
    # An execution that fails after a row, a notice and a parameter status between units.
    "error-mid-result": header([EXEC2, EXEC2])
    + msg(b"2")
    + data_row([int8(7), b"x"])
    + error("22012", "division by zero")
    + ready()
    + notice("there is no transaction in progress")
    + param("TimeZone", "Europe/Paris")
    + msg(b"2")
    + complete("SELECT 0")
    + ready(),
    # Simple query with text rows (skipped), and a bare Sync.
    "simple-status": header([SIMPLE, STATUS], chunking=1, b1=3)
    + row_description([("?column?", 23)])
    + data_row([b"1"])
    + complete("SELECT 1")
    + ready()
    + ready(b"I"),
    # Streamed rows to a consumer that has room every other row.
    "stream": header([STREAM | CHOOSY])
    + msg(b"2")
    + b"".join(data_row([int8(i), str(i).encode()]) for i in range(5))
    + complete("SELECT 5")
    + ready(),
    # COPY TO STDOUT and COPY FROM STDIN.
    "copy": header([COPYOUT, COPYIN])
    + msg(b"H", b"\0" + struct.pack(">H", 1) + b"\0\0")
    + msg(b"d", b"1\tone\n")
    + msg(b"d", b"2\ttwo\n")
    + msg(b"c")
    + complete("COPY 2")
    + ready()
    + msg(b"G", b"\0" + struct.pack(">H", 1) + b"\0\0")
    + complete("COPY 0")
    + ready(),
    # A batch of two statements, then an execution in a transaction frame: BEGIN, it, COMMIT.
    "batch-framed": header([BATCH, EXEC2 | BEFORE | AFTER], cap=1, b1=10)
    + msg(b"2")
    + data_row([int8(1), b"a"])
    + complete("SELECT 1")
    + msg(b"2")
    + complete("UPDATE 3")
    + ready()
    + complete("BEGIN")
    + msg(b"2")
    + data_row([int8(2), b"b"])
    + complete("SELECT 1")
    + complete("COMMIT")
    + ready(),
    # Two executions sharing one Sync (coalesced): the first completes at its CommandComplete.
    "joined": header([EXEC1, EXEC1 | JOIN, EXEC0])
    + msg(b"2")
    + data_row([b"a"])
    + complete("SELECT 1")
    + msg(b"2")
    + complete("SELECT 0")
    + ready()
    + msg(b"2")
    + complete("SELECT 0")
    + ready(),
    # A coalesced segment whose first unit fails: the second is skipped.
    "joined-failed": header([EXEC1, EXEC1 | JOIN])
    + msg(b"2")
    + error("57014", "canceling statement due to statement timeout")
    + ready(),
    # A FATAL error with nothing in flight after a unit, with a tiny cap.
    "fatal": header([STATUS], cap=2, b1=40)
    + ready()
    + error("57P01", "terminating connection due to administrator command", "FATAL"),
    # A row that claims 2 GiB: refused by its header.
    "huge-header": header([EXEC2], cap=3)
    + msg(b"2")
    + b"D"
    + struct.pack(">I", 0x7FFF_FFFF)
    + b"\0\2",
}

# ---- startup: [flags, chunking, stream] -----------------------------------------------------
# flags: bits 0-1 password (0 none, 1 "secret", 2 non-ASCII, 3 empty), bits 2-3 channel binding
# (0 disable, 1 prefer, 2 require), bit 4 a certificate hash, bit 5 statement_timeout, bit 6
# application_name, bit 7 options.
PW = 1
PREFER = 1 << 2
REQUIRE = 2 << 2
CERT = 0x10


def sasl_mechanisms(*names):
    return auth(10, b"".join(cstr(n) for n in names) + b"\0")


startup = {
    "trust": bytes([0, 0]) + auth(0) + params_ok(),
    "cleartext": bytes([PW | 0x40, 0]) + auth(3) + auth(0) + params_ok(),
    "md5": bytes([PW, 5]) + auth(5, b"\x01\x02\x03\x04") + auth(0) + params_ok(),
    # SASL: the server offers SCRAM; its first message (the harness adds the client nonce
    # after r=), then a final message whose signature cannot match.
    "scram": bytes([PW | PREFER, 0])
    + sasl_mechanisms("SCRAM-SHA-256")
    + auth(11, b"r=3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    + auth(12, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    + auth(0)
    + params_ok(),
    "scram-plus": bytes([PW | PREFER | CERT, 0])
    + sasl_mechanisms("SCRAM-SHA-256-PLUS", "SCRAM-SHA-256")
    + auth(11, b"r=serverpart,s=c2FsdA==,i=16"),
    "scram-require-no-tls": bytes([PW | REQUIRE, 0]) + sasl_mechanisms("SCRAM-SHA-256"),
    "bad-password": bytes([PW, 0])
    + auth(5, b"salt")
    + error("28P01", 'password authentication failed for user "fuzz"', "FATAL"),
    "no-database": bytes([PW | 0x20 | 0x80, 0])
    + auth(0)
    + error("3D000", 'database "app" does not exist', "FATAL"),
    "no-password": bytes([0, 0]) + auth(3),
    "gss": bytes([PW, 0]) + auth(7),
    "notice-then-ok": bytes([PW, 2]) + notice("hello") + auth(0) + params_ok(),
}

# ---- conninfo: [which, text] (0 connection string, 1 URL after postgresql://, 2 pgpass) -----
conninfo = {
    "keywords": b"\0host=db.example port=5433 dbname=app user=alice password='s p\\'w' "
    b"sslmode=require connect_timeout=10 application_name=fuzz",
    "url": b"\0postgres://alice:p%40ss@db.example:5433/app?sslmode=verify-full"
    b"&target_session_attrs=read-write&options=-c%20statement_timeout%3D5s",
    "url-hosts": b"\1u@a.example:5432,b.example:5433,[::1]:6000/db?load_balance_hosts=random",
    "url-socket": b"\1%2Fvar%2Frun%2Fpostgresql/app?user=bob",
    "multi-host": b"\0host=a,b,/tmp hostaddr=10.0.0.1,,127.0.0.1 port=5432,5433,5434 "
    b"target_session_attrs=prefer-standby keepalives=1 keepalives_idle=30",
    "pgpipe-options": b"\0host=localhost pipeline_size=64 max_message_size=1048576 "
    b"channel_binding=prefer",
    "empty": b"\0",
    "pgpass": b"\2db.example:5432:app:alice\n"
    b"# comment: h:1:d:u:nope\n"
    b"db.example:5432:app:alice:pw-exact\n"
    b"*:*:*:bob:pw-bob\n"
    b"weird\\:host:5432:d\\\\b:u\\:x:pw\\:with\\\\escapes\r\n",
    "pgpass-socket": b"\3/var/run/postgresql:5432:*:carol\n"
    b"localhost:5432:*:carol:pw-local\n"
    b"127.0.0.1:*:*:*:by-address\n"
    b"*:*:*:trail:ends-with-backslash\\\n",
    "pgpass-addr": b"\2127.0.0.1:6000:db:dave\n127.0.0.1:6000:*:dave:pw-addr\n",
}

# ---- guard: SQL text ------------------------------------------------------------------------
guard = {
    "select": b"SELECT id, name FROM users WHERE id = $1",
    "cte": b"WITH recent AS (SELECT * FROM orders WHERE created > now() - interval '1 day') "
    b"SELECT count(*) FROM recent",
    "cte-writes": b"WITH moved AS (DELETE FROM queue WHERE id = $1 RETURNING *) "
    b"INSERT INTO done SELECT * FROM moved",
    "quoted-ident": b'SELECT "set_config"(\'x\', \'y\', false), "Weird ""Name""" FROM "T"',
    "dollar-quotes": b"SELECT $fn$ SELECT set_config('a','b',false) $fn$, $$it's$$, $1",
    "comments": b"/* outer /* nested */ still */ SELECT 1 -- trailing; SET x = 1\n",
    "set": b"SET search_path = public",
    "two-statements": b"SELECT 1; SELECT 2",
    "into-temp": b"SELECT * INTO TEMP t FROM users",
    "nextval": b"SELECT nextval('orders_id_seq')",
    "unicode": b'SELECT U&"d\\0061t\\+000061" FROM t UESCAPE \'!\'',
    "update-pg-settings": b"UPDATE ONLY pg_catalog.pg_settings SET setting = '1' "
    b"WHERE name = 'work_mem'",
    "strings": b"SELECT E'it\\'s', 'a''b', B'1010', X'ff' -- done\r\nFROM t",
    "insert-values": b"INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y') ON CONFLICT DO NOTHING",
    "merge": b"MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
    "sql-text-call": b"SELECT query_to_xml('select 1', true, false, '')",
}


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        assert len(data) < 4096, (target, name)
        with open(os.path.join(d, name + ".seed"), "wb") as f:
            f.write(data)


write("backend_messages", backend)
write("startup", startup)
write("conninfo", conninfo)
write("guard", guard)
