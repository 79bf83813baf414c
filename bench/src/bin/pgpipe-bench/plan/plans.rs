//! The plans: the curated default set (and `--quick`'s), the cross product of explicit
//! selections, and the candidate lists they are made of (the A/A control, the pool-ceiling
//! sweep, each kind of scenario's candidates).

use std::time::Duration;

use super::{Candidate, Delay, Load, Scenario, Settings, Via, Workload};

fn cands(names: &[&str]) -> Vec<Candidate> {
    names
        .iter()
        .map(|n| Candidate::parse(n).expect("built-in candidate names parse"))
        .collect()
}

/// The A/A control: the configuration entered twice.
pub const AA: [&str; 2] = ["pgpipe-tokio-4", "pgpipe-tokio-4#2"];

/// Every candidate kind at its usual sizes, plus the A/A duplicate.
pub fn all_candidates() -> Vec<Candidate> {
    cands(&[
        "pgpipe-smol-1",
        "pgpipe-smol-2",
        "pgpipe-smol-4",
        "pgpipe-tokio-1",
        "pgpipe-tokio-2",
        AA[0],
        "pgpipe-glommio-1",
        "pgpipe-glommio-2",
        "pgpipe-glommio-4",
        "tokio-postgres-1",
        "tokio-postgres-2",
        "tokio-postgres-4",
        "deadpool-8",
        "deadpool-16",
        "deadpool-32",
        AA[1],
    ])
}

/// Families of the pool-ceiling sweep and its sizes (`--quick` adds tokio-postgres, trims sizes).
pub const CEILING_FAMILIES: [&str; 2] = ["pgpipe-tokio-1", "deadpool-1"];
pub const CEILING_SIZES: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// Each family at each size. pgpipe's sizes are fixed (`-mN`): the ceiling compares N
/// pipelined connections with a pool of N, so none may be opened on demand.
fn ceiling_candidates(families: &[Candidate], sizes: &[usize]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for f in families {
        for &n in sizes {
            let mut c = f.clone();
            if c.is_pgpipe() {
                c.max_connections = Some(n);
            }
            out.push(c.sized(n));
        }
    }
    out
}

/// The candidates of the default hol scenarios: tokio-postgres and deadpool at their usual
/// sizes, pgpipe elastic (defaults), pgpipe fixed at 4 connections (`-m4`: what elasticity
/// changes), another runtime, and the A/A duplicate.
pub const HOL_CANDIDATES: [&str; 9] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-m4",
    "pgpipe-smol-4",
    "tokio-postgres-1",
    "tokio-postgres-2",
    "tokio-postgres-4",
    "deadpool-16",
    "deadpool-32",
    "pgpipe-tokio-4#2",
];

/// The candidates of the default `tls` scenario (point selects, closed loop, direct): pgpipe
/// plaintext and over TLS on the same configuration, another runtime over TLS, tokio-postgres
/// over TLS on 1 and 4 connections and plaintext on 4 (its own TLS cost), and the A/A
/// duplicate of pgpipe over TLS.
pub const TLS_CANDIDATES: [&str; 7] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-tls",
    "pgpipe-glommio-4-tls",
    "tokio-postgres-1-tls",
    "tokio-postgres-4-tls",
    "tokio-postgres-4",
    "pgpipe-tokio-4-tls#2",
];

/// `--quick`'s `tls` scenario: a TLS candidate of every kind and runtime, the plaintext twin of
/// pgpipe's and an A/A duplicate, so that every ratio of the report is computed.
pub const TLS_QUICK_CANDIDATES: [&str; 7] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-tls",
    "pgpipe-smol-2-tls",
    "pgpipe-glommio-2-tls",
    "tokio-postgres-1-tls",
    "deadpool-8-tls",
    "pgpipe-tokio-2-tls#2",
];

/// The candidates of the bulk scenarios (COPY in and out, streaming): pgpipe on each runtime
/// (the bulk work runs on a session, an exclusive connection; `-1` keeps the shared path to one
/// idle connection), tokio-postgres on one connection, and the A/A duplicate.
pub const COPY_CANDIDATES: [&str; 5] = [
    "pgpipe-smol-1",
    "pgpipe-tokio-1",
    "pgpipe-glommio-1",
    "tokio-postgres-1",
    "pgpipe-tokio-1#2",
];

/// The candidates of the `pgbouncer` scenario (point selects through PgBouncer in transaction
/// mode, pool of 16): pgpipe on 4 connections (elastic as by default, and fixed at 4 with
/// `-m4`; one Sync at a time each), pgpipe with the unsafe opt-in of several Syncs in flight
/// (`-pipelined`), tokio-postgres and deadpool with one client connection per server
/// connection of PgBouncer's pool, deadpool with more clients than the pool (they queue inside
/// PgBouncer), and the A/A duplicate.
pub const PGBOUNCER_CANDIDATES: [&str; 7] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-m4",
    "pgpipe-tokio-4-pipelined",
    "tokio-postgres-16",
    "deadpool-16",
    "deadpool-64",
    "pgpipe-tokio-4#2",
];

/// The read/write mix through PgBouncer: pgpipe (one Sync at a time: the updates go one per
/// round trip on each connection), tokio-postgres and deadpool at the pool's size, the A/A
/// duplicate.
pub const PGBOUNCER_RW_CANDIDATES: [&str; 4] = [
    "pgpipe-tokio-4",
    "tokio-postgres-16",
    "deadpool-16",
    "pgpipe-tokio-4#2",
];

/// Transactions through PgBouncer: pgpipe's interactive transactions and its atomic batch,
/// deadpool at the pool's size, the A/A duplicate.
pub const PGBOUNCER_TX_CANDIDATES: [&str; 4] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-batch",
    "deadpool-16",
    "pgpipe-tokio-4#2",
];

/// `--quick`'s `pgbouncer` scenario: each kind once.
pub const PGBOUNCER_QUICK_CANDIDATES: [&str; 3] =
    ["pgpipe-tokio-2", "tokio-postgres-4", "deadpool-8"];

/// The candidates of the 8-process scenario straight to the server (each per process):
/// pgpipe on 2 pipelined connections (elastic as by default, and fixed with `-m2`), deadpool
/// with a pool of 16, the A/A duplicate.
pub const PROCS_CANDIDATES: [&str; 4] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-m2",
    "deadpool-16",
    "pgpipe-tokio-2#2",
];

/// The same through PgBouncer, plus pgpipe fixed at its 2 connections (`-m2`, no elastic
/// ones) and deadpool with as many client connections as that.
pub const PROCS_PGBOUNCER_CANDIDATES: [&str; 5] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-m2",
    "deadpool-2",
    "deadpool-16",
    "pgpipe-tokio-2#2",
];

/// `--quick`'s many-process scenario (2 processes through PgBouncer).
pub const PROCS_QUICK_CANDIDATES: [&str; 2] = ["pgpipe-tokio-2", "deadpool-8"];

/// The candidates of the transaction scenarios (1,000 tasks, a transaction per op): pgpipe's
/// interactive transactions and its atomic batch on 4 pipelined connections (elastic as by
/// default), deadpool at 16 and 32, pgbench with the same script (the server's own rate with
/// a classic client per connection), and the A/A duplicate.
pub const TX_CANDIDATES: [&str; 6] = [
    "pgpipe-tokio-4",
    "pgpipe-tokio-4-batch",
    "deadpool-16",
    "deadpool-32",
    "pgbench-16",
    "pgpipe-tokio-4#2",
];

/// `--quick`'s transaction scenario: each kind once.
pub const TX_QUICK_CANDIDATES: [&str; 4] = [
    "pgpipe-tokio-2",
    "pgpipe-tokio-2-batch",
    "deadpool-8",
    "pgbench-4",
];

/// The bulk scenarios: COPY in, COPY out, streamed read, direct, `copy_rows` rows each.
fn copy_scenarios(s: &Settings) -> Vec<Scenario> {
    [Workload::CopyIn, Workload::CopyOut, Workload::Stream]
        .into_iter()
        .map(|workload| Scenario {
            tag: None,
            workload,
            load: Load::Rows { rows: s.copy_rows },
            delay: Delay::Direct,
            via: Via::Server,
            procs: 1,
            candidates: cands(&COPY_CANDIDATES),
        })
        .collect()
}

/// The curated default plan (or `--quick`'s). Sized to finish in about five minutes on a
/// 2-core machine: every candidate kind on the headline scenario (point select, direct), each
/// family's usual best elsewhere.
pub fn default_plan(s: &Settings, quick: bool) -> Vec<Scenario> {
    let closed = Load::Closed { tasks: s.tasks };
    let ms = |n: u64| Delay::Proxy(Duration::from_millis(n));
    let sc = |workload, load, delay, candidates| Scenario {
        tag: None,
        workload,
        load,
        delay,
        via: Via::Server,
        procs: 1,
        candidates,
    };
    // Through PgBouncer (transaction mode, pool of PGBOUNCER_POOL), and many processes.
    let pooled = |tag, via, procs, names: &[&str]| Scenario {
        tag: Some(tag),
        via,
        procs,
        ..sc(Workload::PointId, closed, Delay::Direct, cands(names))
    };
    // Other workloads through PgBouncer.
    let bounced = |workload, names: &[&str]| Scenario {
        tag: Some("pgbouncer"),
        via: Via::PgBouncer,
        ..sc(workload, closed, Delay::Direct, cands(names))
    };
    // TLS side by side: the headline's workload, load and delay, plaintext and TLS interleaved.
    let tls = |names: &[&str]| Scenario {
        tag: Some("tls"),
        ..sc(Workload::Point, closed, Delay::Direct, cands(names))
    };
    let ceiling = |families: &[&str], sizes: &[usize]| {
        sc(
            Workload::Sleep,
            Load::Ceiling {
                queries: s.ceiling_queries,
            },
            Delay::Direct,
            ceiling_candidates(&cands(families), sizes),
        )
    };
    if quick {
        let few = cands(&["pgpipe-smol-2", "tokio-postgres-1", "deadpool-8"]);
        let mut plan = vec![
            sc(Workload::Point, closed, Delay::Direct, all_candidates()),
            tls(&TLS_QUICK_CANDIDATES),
            sc(Workload::Point, closed, ms(1), few.clone()),
            sc(Workload::Select1, closed, Delay::Direct, few.clone()),
            sc(Workload::ReadWrite, closed, Delay::Direct, few.clone()),
            sc(Workload::Point, Load::Open { rate: s.rate }, ms(0), few),
            sc(
                Workload::Hol,
                Load::Open { rate: s.rate },
                Delay::Direct,
                cands(&["pgpipe-tokio-4", "tokio-postgres-4", "deadpool-16"]),
            ),
            ceiling(
                &["pgpipe-tokio-1", "tokio-postgres-1", "deadpool-1"],
                &[1, 4],
            ),
            pooled("pgbouncer", Via::PgBouncer, 1, &PGBOUNCER_QUICK_CANDIDATES),
            bounced(Workload::ReadWrite, &["pgpipe-tokio-2", "deadpool-8"]),
            bounced(Workload::Tx, &["pgpipe-tokio-2", "deadpool-8"]),
            pooled(
                "pgbouncer-procs2",
                Via::PgBouncer,
                2,
                &PROCS_QUICK_CANDIDATES,
            ),
            sc(
                Workload::Tx,
                closed,
                Delay::Direct,
                cands(&TX_QUICK_CANDIDATES),
            ),
        ];
        plan.extend(copy_scenarios(s));
        return plan;
    }
    let best_of_each = cands(&[
        "pgpipe-smol-4",
        "pgpipe-tokio-4",
        "pgpipe-glommio-4",
        "tokio-postgres-4",
        "deadpool-16",
    ]);
    // At 5 ms the default max_in_flight (64 per connection) caps a connection at 64 units per
    // round trip; the -w256 candidates show what a wider window does.
    let delayed = cands(&[
        "pgpipe-smol-1",
        "pgpipe-smol-2",
        "pgpipe-smol-4",
        "pgpipe-tokio-4",
        "pgpipe-tokio-4-w256",
        "pgpipe-glommio-4-w256",
        "tokio-postgres-1",
        "tokio-postgres-4",
        "deadpool-8",
        "deadpool-16",
        "deadpool-32",
    ]);
    let latency = cands(&[
        "pgpipe-smol-4",
        "pgpipe-tokio-4",
        "pgpipe-glommio-4",
        "tokio-postgres-1",
        "tokio-postgres-4",
        "deadpool-16",
        "deadpool-32",
    ]);
    let mut plan = vec![
        sc(Workload::Point, closed, Delay::Direct, all_candidates()),
        tls(&TLS_CANDIDATES),
        sc(
            Workload::Point,
            closed,
            ms(1),
            cands(&[
                "pgpipe-smol-4",
                "pgpipe-tokio-4",
                "pgpipe-glommio-4",
                "tokio-postgres-4",
                "deadpool-16",
                "deadpool-32",
            ]),
        ),
        sc(Workload::Point, closed, ms(5), delayed),
        sc(
            Workload::Select1,
            closed,
            Delay::Direct,
            best_of_each.clone(),
        ),
        sc(Workload::ReadWrite, closed, Delay::Direct, best_of_each),
        sc(
            Workload::Point,
            Load::Open { rate: s.rate },
            Delay::Direct,
            latency,
        ),
        sc(
            Workload::Hol,
            Load::Open { rate: s.rate },
            Delay::Direct,
            cands(&HOL_CANDIDATES),
        ),
        sc(Workload::Hol, closed, Delay::Direct, cands(&HOL_CANDIDATES)),
        ceiling(&CEILING_FAMILIES, &CEILING_SIZES),
        sc(Workload::Tx, closed, Delay::Direct, cands(&TX_CANDIDATES)),
        sc(Workload::Tx, closed, ms(5), cands(&TX_CANDIDATES)),
    ];
    plan.extend(copy_scenarios(s));
    plan.extend([
        pooled("pgbouncer", Via::PgBouncer, 1, &PGBOUNCER_CANDIDATES),
        bounced(Workload::ReadWrite, &PGBOUNCER_RW_CANDIDATES),
        bounced(Workload::Tx, &PGBOUNCER_TX_CANDIDATES),
        pooled("procs8", Via::Server, 8, &PROCS_CANDIDATES),
        pooled(
            "pgbouncer-procs8",
            Via::PgBouncer,
            8,
            &PROCS_PGBOUNCER_CANDIDATES,
        ),
    ]);
    plan
}

/// The plan of explicit selections: every workload × load × delay asked for, each with
/// `candidates` (the ceiling workload sweeps the candidates' families over `CEILING_SIZES`; the
/// bulk workloads move `copy_rows` rows at each delay, whatever the loads, deadpool left out).
pub fn custom_plan(
    s: &Settings,
    workloads: &[Workload],
    loads: &[Load],
    delays: &[Delay],
    candidates: &[Candidate],
) -> Vec<Scenario> {
    let mut out = Vec::new();
    for &w in workloads {
        if w == Workload::Sleep {
            let mut fams: Vec<Candidate> = Vec::new();
            for c in candidates {
                if !fams.iter().any(|f| f.family() == c.family()) {
                    fams.push(c.sized(1));
                }
            }
            for &delay in delays {
                out.push(Scenario {
                    tag: None,
                    workload: w,
                    load: Load::Ceiling {
                        queries: s.ceiling_queries,
                    },
                    delay,
                    via: Via::Server,
                    procs: 1,
                    candidates: ceiling_candidates(&fams, &CEILING_SIZES),
                });
            }
            continue;
        }
        if w.is_bulk() {
            let candidates: Vec<Candidate> =
                candidates.iter().filter(|c| w.runs(c)).cloned().collect();
            for &delay in delays {
                out.push(Scenario {
                    tag: None,
                    workload: w,
                    load: Load::Rows { rows: s.copy_rows },
                    delay,
                    via: Via::Server,
                    procs: 1,
                    candidates: candidates.clone(),
                });
            }
            continue;
        }
        for &load in loads {
            for &delay in delays {
                out.push(Scenario {
                    tag: None,
                    workload: w,
                    load,
                    delay,
                    via: Via::Server,
                    procs: 1,
                    candidates: candidates.iter().filter(|c| w.runs(c)).cloned().collect(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Adapter, Kind};

    #[test]
    fn tls_scenario() {
        let s = Settings::tiny();
        for quick in [false, true] {
            let plan = default_plan(&s, quick);
            let tls: Vec<&Scenario> = plan.iter().filter(|s| s.tag == Some("tls")).collect();
            assert_eq!(tls.len(), 1);
            let t = tls[0];
            assert_eq!(t.id(), "tls-point-closed-1000-direct");
            assert!(t.selected_by("tls") && t.selected_by("tls-point-closed-1000-direct"));
            assert_eq!((t.workload, t.delay), (Workload::Point, Delay::Direct));
            // Plaintext pgpipe next to its TLS twin, TLS of every kind (--quick: every
            // runtime too), and an A/A duplicate over TLS.
            let has = |f: &dyn Fn(&Candidate) -> bool| t.candidates.iter().any(f);
            assert!(has(&|c| c.is_pgpipe() && !c.tls));
            assert!(has(&|c| c.kind == Kind::TokioPostgres && c.tls));
            assert!(has(&|c| c.tls && c.copy == 2));
            if quick {
                for k in [
                    Kind::Pgpipe(Adapter::Smol),
                    Kind::Pgpipe(Adapter::Tokio),
                    Kind::Pgpipe(Adapter::Glommio),
                    Kind::TokioPostgres,
                    Kind::Deadpool,
                ] {
                    assert!(has(&|c| c.kind == k && c.tls), "{k:?}");
                }
            }
            // No other scenario has TLS candidates; the headline's id stays as it was.
            assert!(plan
                .iter()
                .filter(|s| s.tag.is_none())
                .all(|s| s.candidates.iter().all(|c| !c.tls)));
            assert!(plan.iter().any(|s| s.id() == "point-closed-1000-direct"));
        }
    }

    #[test]
    fn pgbouncer_scenarios() {
        let s = Settings::tiny();
        assert_eq!(Workload::parse("point-id").unwrap(), Workload::PointId);
        for quick in [false, true] {
            let plan = default_plan(&s, quick);
            let picked: Vec<&Scenario> =
                plan.iter().filter(|s| s.selected_by("pgbouncer")).collect();
            let ids: Vec<String> = picked.iter().map(|s| s.id()).collect();
            if quick {
                assert_eq!(
                    ids,
                    [
                        "pgbouncer-point-id-closed-1000-direct",
                        "pgbouncer-rw-closed-1000-direct",
                        "pgbouncer-tx-closed-1000-direct",
                        "pgbouncer-procs2-point-id-closed-1000-direct"
                    ]
                );
            } else {
                assert_eq!(
                    ids,
                    [
                        "pgbouncer-point-id-closed-1000-direct",
                        "pgbouncer-rw-closed-1000-direct",
                        "pgbouncer-tx-closed-1000-direct",
                        "procs8-point-id-closed-1000-direct",
                        "pgbouncer-procs8-point-id-closed-1000-direct"
                    ]
                );
                assert!(picked[0].candidates.iter().any(|c| c.copy == 2));
                assert_eq!(picked[3].procs, 8);
                assert_eq!(picked[3].via, Via::Server);
                assert!(picked[3].selected_by("procs"));
            }
            // Point selects, the read/write mix and transactions through PgBouncer.
            let workloads: Vec<Workload> = picked.iter().map(|s| s.workload).collect();
            for w in [Workload::PointId, Workload::ReadWrite, Workload::Tx] {
                assert!(workloads.contains(&w), "{w:?}");
            }
            // Nothing else goes through PgBouncer or runs in several processes.
            assert!(plan
                .iter()
                .filter(|s| !s.selected_by("pgbouncer"))
                .all(|s| s.via == Via::Server && s.procs == 1));
        }
    }

    #[test]
    fn plans_cover_every_kind() {
        let s = Settings {
            tasks: 10,
            ..Settings::tiny()
        };
        let quick_hol: Vec<_> = default_plan(&s, true)
            .into_iter()
            .filter(|s| s.workload == Workload::Hol)
            .collect();
        assert_eq!(quick_hol.len(), 1, "one small hol scenario in --quick");
        assert!(matches!(quick_hol[0].load, Load::Open { .. }));
        let hol: Vec<_> = default_plan(&s, false)
            .into_iter()
            .filter(|s| s.workload == Workload::Hol)
            .collect();
        assert!(hol.iter().any(|s| matches!(s.load, Load::Open { .. })));
        assert!(hol.iter().any(|s| matches!(s.load, Load::Closed { .. })));
        for quick in [true, false] {
            let p = default_plan(&s, quick);
            let all: Vec<&Candidate> = p.iter().flat_map(|s| &s.candidates).collect();
            for fam in [
                "pgpipe-smol",
                "pgpipe-tokio",
                "pgpipe-glommio",
                "tokio-postgres",
                "deadpool",
            ] {
                assert!(all.iter().any(|c| c.family() == fam), "{fam}");
            }
            assert!(p.iter().any(|s| s.delay != Delay::Direct), "a proxy run");
            assert!(p.iter().any(|s| matches!(s.load, Load::Open { .. })));
            assert!(p.iter().any(|s| matches!(s.load, Load::Ceiling { .. })));
            assert!(all.iter().any(|c| c.copy == 2), "A/A control");
        }
    }
}
