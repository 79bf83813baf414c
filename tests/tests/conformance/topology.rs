//! Beyond one server: host lists, `load_balance_hosts`, `target_session_attrs` against a real
//! primary and its streaming standby (`pg_basebackup -R`), and failover when the primary stops
//! and the standby is promoted.
//!
//! These run on smol, tokio and glommio (the `connecting` suite).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pgpipe::{Config, Error, ErrorKind};
use pgpipe_tests::Cluster;

use crate::{off_thread, Db, Harness};

/// A primary and its standby, shared by the tests that do not change them.
fn pair() -> &'static (Cluster, Cluster) {
    static PAIR: OnceLock<(Cluster, Cluster)> = OnceLock::new();
    PAIR.get_or_init(|| {
        let primary = Cluster::start().expect("primary");
        let standby = primary.standby().expect("standby");
        (primary, standby)
    })
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A configuration for the servers on `ports` (in that order), one connection of each kind.
fn hosts(ports: &[u16], attrs: &str) -> Config {
    let list: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let url = format!(
        "postgres://postgres@{}/postgres?target_session_attrs={attrs}&connect_timeout=2",
        list.join(",")
    );
    let mut cfg = Config::parse_with_env(&url, |_| None).expect("host list URL");
    cfg.pipeline_size = 1;
    cfg.max_connections = 1;
    cfg.pinned_size = 1;
    cfg
}

/// The port of the server that answers (`inet_server_port()`).
async fn served_by<H: Harness>(db: &Db<H>) -> u16 {
    let row = db
        .query_one("SELECT inet_server_port()", &[])
        .await
        .expect("server port");
    row.get::<_, i32>(0) as u16
}

pub async fn host_lists_are_tried_in_order_past_servers_that_are_down<H: Harness>() {
    let (primary, standby) = pair();
    let (p, s, dead) = (primary.port(), standby.port(), dead_port());
    for (order, want) in [([dead, p, s], p), ([dead, s, p], s), ([p, dead, s], p)] {
        let db = H::connect(hosts(&order, "any")).await.expect("connect");
        assert_eq!(served_by::<H>(&db).await, want, "{order:?}");
        // Sessions come from the same list.
        let session = db.session().await.expect("session");
        let row = session.query_one("SELECT inet_server_port()", &[]).await;
        assert_eq!(row.expect("port").get::<_, i32>(0) as u16, want);
        drop(session);
        db.close().await;
    }
    // The keyword form, with one port per host.
    let conninfo = format!(
        "host=127.0.0.1,127.0.0.1 port={dead},{s} user=postgres dbname=postgres connect_timeout=2"
    );
    let db = H::connect(Config::parse_with_env(&conninfo, |_| None).expect("keyword list"))
        .await
        .expect("connect");
    assert_eq!(served_by::<H>(&db).await, s);
    db.close().await;
}

pub async fn load_balance_random_spreads_connections<H: Harness>() {
    let (primary, standby) = pair();
    let mut cfg = hosts(&[primary.port(), standby.port()], "any");
    cfg.load_balance_hosts = pgpipe::LoadBalanceHosts::Random;
    cfg.pipeline_size = 16;
    cfg.max_connections = 16;
    let db = H::connect(cfg).await.expect("connect");
    // Each base connection's backend once: distinct pids tell the connections apart.
    let mut seen: HashMap<i32, u16> = HashMap::new();
    for _ in 0..400 {
        let row = db
            .query_one("SELECT pg_backend_pid(), inet_server_port()", &[])
            .await
            .expect("query");
        seen.insert(row.get(0), row.get::<_, i32>(1) as u16);
    }
    let ports: BTreeSet<u16> = seen.values().copied().collect();
    // 16 connections all on one of two servers by chance: 2 in 65,536.
    assert_eq!(ports.len(), 2, "connections by server: {seen:?}");
    db.close().await;
}

pub async fn every_target_session_attrs_value_picks_the_right_server<H: Harness>() {
    let (primary, standby) = pair();
    let (p, s) = (primary.port(), standby.port());
    // (value, server chosen from [p, s], from [s, p], from [p] alone, from [s] alone)
    type Row = (
        &'static str,
        Option<u16>,
        Option<u16>,
        Option<u16>,
        Option<u16>,
    );
    let table: [Row; 6] = [
        ("any", Some(p), Some(s), Some(p), Some(s)),
        ("read-write", Some(p), Some(p), Some(p), None),
        ("read-only", Some(s), Some(s), None, Some(s)),
        ("primary", Some(p), Some(p), Some(p), None),
        ("standby", Some(s), Some(s), None, Some(s)),
        ("prefer-standby", Some(s), Some(s), Some(p), Some(s)),
    ];
    for (attrs, ps, sp, p_only, s_only) in table {
        let cases: [(&[u16], Option<u16>); 4] =
            [(&[p, s], ps), (&[s, p], sp), (&[p], p_only), (&[s], s_only)];
        for (order, want) in cases {
            let got = H::connect(hosts(order, attrs)).await;
            match (want, got) {
                (Some(want), Ok(db)) => {
                    assert_eq!(served_by::<H>(&db).await, want, "{attrs} over {order:?}");
                    let s = db.session().await.expect("session");
                    let row = s.query_one("SELECT inet_server_port()", &[]).await;
                    assert_eq!(row.expect("port").get::<_, i32>(0) as u16, want, "{attrs}");
                    drop(s);
                    db.close().await;
                }
                (None, Err(e)) => {
                    assert!(
                        matches!(e, Error::WrongRole { .. }),
                        "{attrs} over {order:?}: {e:?}"
                    );
                    assert!(e.to_string().contains("target_session_attrs"), "{e}");
                }
                (want, got) => panic!(
                    "{attrs} over {order:?}: wanted {want:?}, got {:?}",
                    got.map(|_| "a connection")
                ),
            }
        }
    }
}

pub async fn when_no_server_will_do_the_error_names_each_and_why<H: Harness>() {
    let (_, standby) = pair();
    let (d1, d2, s) = (dead_port(), dead_port(), standby.port());
    let e = match H::connect(hosts(&[d1, s, d2], "primary")).await {
        Ok(_) => panic!("a standby and two dead ports cannot serve a primary"),
        Err(e) => e,
    };
    let Error::NoServer { attempts } = &e else {
        panic!("expected NoServer, got {e:?}");
    };
    let tried: Vec<&str> = attempts.iter().map(|(server, _)| server.as_str()).collect();
    assert_eq!(
        tried,
        [
            format!("127.0.0.1:{d1}"),
            format!("127.0.0.1:{s}"),
            format!("127.0.0.1:{d2}")
        ]
    );
    assert!(matches!(attempts[1].1, Error::WrongRole { .. }), "{e}");
    assert!(matches!(attempts[0].1, Error::Io(_)), "{e}");
    assert_eq!(e.kind(), ErrorKind::Connection);
    let text = e.to_string();
    assert!(text.contains("a standby, not a primary"), "{text}");
    assert!(text.contains("refused"), "{text}");
}

/// What became of one insert of the failover test.
struct Outcome {
    id: i32,
    submitted: Instant,
    result: Result<(), Error>,
}

pub async fn failover_follows_the_promoted_standby<H: Harness>() {
    let (mut primary, standby) = off_thread::<H, _>(|| {
        let primary = Cluster::start().expect("primary");
        primary
            .psql("CREATE TABLE failover (id int PRIMARY KEY)")
            .expect("table");
        let standby = primary.standby().expect("standby");
        (primary, standby)
    })
    .await;
    let mut cfg = hosts(&[primary.port(), standby.port()], "read-write");
    cfg.pipeline_size = 2;
    cfg.max_connections = 4;
    cfg.query_timeout = Some(Duration::from_secs(5));
    let db = H::connect(cfg).await.expect("connect");
    assert_eq!(served_by::<H>(&db).await, primary.port());

    // Writers insert distinct ids until told to stop, each remembering every outcome.
    let outcomes = Rc::new(RefCell::new(Vec::<Outcome>::new()));
    let stop = Rc::new(RefCell::new(false));
    let mut writers = Vec::new();
    for w in 0..8 {
        let (db, outcomes, stop) = (db.clone(), outcomes.clone(), stop.clone());
        writers.push(H::spawn(async move {
            let mut id = w;
            while !*stop.borrow() {
                let submitted = Instant::now();
                let result = db
                    .execute("INSERT INTO failover VALUES ($1)", &[&id])
                    .await
                    .map(drop);
                let failed = result.is_err();
                outcomes.borrow_mut().push(Outcome {
                    id,
                    submitted,
                    result,
                });
                id += 8;
                if failed {
                    // No server takes writes for a while: do not spin.
                    H::sleep(Duration::from_millis(10)).await;
                }
            }
        }));
    }
    H::sleep(Duration::from_millis(300)).await;
    let (primary_back, promoted_at) = off_thread::<H, _>(move || {
        primary.halt();
        std::thread::sleep(Duration::from_millis(300));
        standby.promote().expect("promote");
        let at = Instant::now();
        (primary, (standby, at))
    })
    .await;
    let (standby, promoted_at) = promoted_at;
    H::sleep(Duration::from_secs(7)).await;
    *stop.borrow_mut() = true;
    for w in writers {
        w.await;
    }

    // The client serves from the new primary, sessions included.
    assert_eq!(served_by::<H>(&db).await, standby.port());
    let tx = db.transaction().await.expect("transaction after failover");
    tx.execute("INSERT INTO failover VALUES (-1)", &[])
        .await
        .expect("write in a transaction");
    tx.commit().await.expect("commit");

    // Every outcome checked against the new primary's table (the old primary's fast
    // shutdown sent the standby all of its WAL first).
    let stored: BTreeSet<i32> = db
        .query("SELECT id FROM failover", &[])
        .await
        .expect("read back")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let outcomes = outcomes.take();
    let (mut late, mut late_ok) = (0, 0);
    for o in outcomes.iter() {
        match &o.result {
            Ok(()) => assert!(
                stored.contains(&o.id),
                "{} reported inserted, not stored",
                o.id
            ),
            // Never sent: it must not have run.
            Err(
                Error::NotDispatched { .. } | Error::NoConnection { .. } | Error::NoServer { .. },
            )
            | Err(Error::WrongRole { .. }) => {
                assert!(
                    !stored.contains(&o.id),
                    "{} reported never sent, but stored",
                    o.id
                )
            }
            Err(Error::Indeterminate { .. } | Error::Timeout) => {}
            Err(e) => panic!("insert {} failed with {e:?}", o.id),
        }
        if o.submitted >= promoted_at + Duration::from_secs(5) {
            late += 1;
            late_ok += usize::from(o.result.is_ok());
        }
    }
    let first_ok = outcomes
        .iter()
        .filter(|o| o.submitted >= promoted_at && o.result.is_ok())
        .map(|o| o.submitted - promoted_at)
        .min();
    eprintln!(
        "{}: first insert that succeeded after the promotion was submitted {first_ok:?} after \
         it; {late_ok} of {late} submitted from 5 s on succeeded",
        H::name()
    );
    assert!(late > 0, "no inserts submitted 5 s after the promotion");
    assert!(
        late_ok * 100 >= late * 99,
        "{late_ok} of {late} inserts submitted 5 s after promotion succeeded"
    );
    let stats = db.stats();
    assert!(stats.total.reconnects > 0, "{stats:?}");
    db.close().await;
    drop(primary_back);
}

pub async fn a_promoted_standby_stops_serving_read_only_clients<H: Harness>() {
    let (primary, standby) = off_thread::<H, _>(|| {
        let primary = Cluster::start().expect("primary");
        let standby = primary.standby().expect("standby");
        (primary, standby)
    })
    .await;
    let mut cfg = hosts(&[primary.port(), standby.port()], "standby");
    // Units wait this long for a standby to appear (a failover could bring one) before
    // failing; the test looks at the failure.
    cfg.dispatch_timeout = Duration::from_millis(300);
    let db = H::connect(cfg).await.expect("connect");
    assert_eq!(served_by::<H>(&db).await, standby.port());
    let standby = off_thread::<H, _>(move || {
        standby.promote().expect("promote");
        standby
    })
    .await;
    // The server reports the change with the next answer; after it the connection stops
    // sending and looks for a standby, and there is none.
    let mut answered_by_primary = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    let e = loop {
        assert!(
            Instant::now() < deadline,
            "still served 10 s after the promotion"
        );
        match db
            .query_one("SELECT pg_catalog.pg_is_in_recovery()", &[])
            .await
        {
            Ok(row) if row.get::<_, bool>(0) => {}
            Ok(_) => answered_by_primary += 1,
            Err(e) => break e,
        }
        H::sleep(Duration::from_millis(20)).await;
    };
    assert!(e.to_string().contains("target_session_attrs"), "{e}");
    // The unit behind the change was never sent (the first error), then no server will do.
    assert!(
        matches!(e.kind(), ErrorKind::NotDispatched | ErrorKind::Connection),
        "{e:?}"
    );
    for _ in 0..20 {
        match db
            .query_one("SELECT pg_catalog.pg_is_in_recovery()", &[])
            .await
        {
            Ok(row) if row.get::<_, bool>(0) => panic!("a standby appeared"),
            Ok(_) => answered_by_primary += 1,
            Err(e) => assert!(e.to_string().contains("target_session_attrs"), "{e}"),
        }
        H::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        answered_by_primary <= 1,
        "{answered_by_primary} answers from a primary"
    );
    db.close().await;
    drop((primary, standby));
}

pub async fn reads_go_to_the_standby_and_wait_for_their_writes<H: Harness>() {
    let (primary, standby) = pair();
    let table = format!("replica_reads_{}", H::name());
    let (p, s) = (primary.port(), standby.port());
    // The pattern of docs/TOPOLOGY.md: one client for writes, one for reads.
    let writes = H::connect(hosts(&[p, s], "read-write"))
        .await
        .expect("writer");
    let reads = H::connect(hosts(&[s, p], "prefer-standby"))
        .await
        .expect("reader");
    assert_eq!(served_by::<H>(&writes).await, p);
    assert_eq!(served_by::<H>(&reads).await, s);
    let session = writes.session().await.expect("ddl");
    session
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, v text)"
        ))
        .await
        .expect("table");
    drop(session);
    for id in 0..20i32 {
        writes
            .execute(
                &format!("INSERT INTO {table} VALUES ($1, $2)"),
                &[&id, &format!("row {id}")],
            )
            .await
            .expect("insert");
        // Read-your-writes: a WAL position past the commit (the insert position: with
        // synchronous_commit off the commit may not be written out yet), then wait until the
        // standby has replayed it.
        let lsn: String = writes
            .query_one("SELECT pg_catalog.pg_current_wal_insert_lsn()::text", &[])
            .await
            .expect("lsn")
            .get(0);
        loop {
            let caught_up: bool = reads
                .query_one(
                    "SELECT pg_catalog.pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                    &[&lsn],
                )
                .await
                .expect("replay position")
                .get(0);
            if caught_up {
                break;
            }
            H::sleep(Duration::from_millis(5)).await;
        }
        let row = reads
            .query_one(&format!("SELECT v FROM {table} WHERE id = $1"), &[&id])
            .await
            .expect("the write, read from the standby");
        assert_eq!(row.get::<_, String>(0), format!("row {id}"));
    }
    // A write sent to the reader fails on the standby, with the server's own error.
    let e = reads
        .execute(&format!("INSERT INTO {table} VALUES (-1, 'x')"), &[])
        .await
        .expect_err("a standby refuses writes");
    assert_eq!(e.code().map(|c| c.as_str()), Some("25006"), "{e}");
    writes.close().await;
    reads.close().await;
}
