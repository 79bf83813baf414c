//! The guard against two corpora kept in `guard_corpus/` (its `schema.sql` says how they were
//! made and checked):
//! - `redteam.jsonl`: statements that change session state on PostgreSQL 15, each with a probe
//!   that shows the change in the same session. Every one must be refused, by `Guard` alone and
//!   by a connected client (which also knows the database's extension functions).
//! - `ordinary.jsonl`: application SQL as ORMs, query builders and people write it, every
//!   statement session-neutral. At most 1% may be refused; the refused ones are listed.
//!
//! A test on the server keeps the corpora honest: each red-team case, run in a fresh session,
//! makes its probe answer true, and each ordinary statement is valid SQL on this schema.

use std::collections::BTreeMap;

use pgpipe::guard::{Guard, Mode, Reason};
use pgpipe::{Config, Error};

/// A red-team case.
struct Case {
    id: String,
    class: String,
    mode: Mode,
    sql: String,
    probe: String,
}

/// An ordinary statement, with values for its parameters (SQL literals) and, where the server
/// cannot infer them, their types.
struct Ordinary {
    id: String,
    source: String,
    sql: String,
    params: Vec<String>,
    types: Vec<String>,
}

fn lines(name: &str) -> Vec<serde_json::Value> {
    let path = format!("{}/tests/guard_corpus/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

fn field(v: &serde_json::Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .to_owned()
}

fn red_team() -> Vec<Case> {
    lines("redteam.jsonl")
        .iter()
        .map(|v| Case {
            id: field(v, "id"),
            class: field(v, "class"),
            mode: match field(v, "mode").as_str() {
                "default" => Mode::Default,
                "strict" => Mode::Strict,
                other => panic!("mode {other}"),
            },
            sql: field(v, "sql"),
            probe: field(v, "probe"),
        })
        .collect()
}

fn ordinary() -> Vec<Ordinary> {
    lines("ordinary.jsonl")
        .iter()
        .map(|v| {
            let list = |key: &str| -> Vec<String> {
                v[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            Ordinary {
                id: field(v, "id"),
                source: field(v, "source"),
                sql: field(v, "sql"),
                params: list("params"),
                types: list("types"),
            }
        })
        .collect()
}

fn verdict(mode: Mode, sql: &str) -> Option<Reason> {
    Guard::with_cache_capacity(mode, 0)
        .check(sql)
        .err()
        .map(|r| r.reason)
}

/// The modes a case must be refused in: strict refuses all that default does.
fn modes(case: &Case) -> &'static [Mode] {
    match case.mode {
        Mode::Default => &[Mode::Default, Mode::Strict],
        Mode::Strict => &[Mode::Strict],
    }
}

#[test]
fn every_red_team_case_is_refused_by_the_guard() {
    let cases = red_team();
    assert!(cases.len() >= 500, "{} cases", cases.len());
    let mut by_class: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut admitted = Vec::new();
    for case in &cases {
        let entry = by_class.entry(case.class.as_str()).or_default();
        entry.0 += 1;
        for &mode in modes(case) {
            if verdict(mode, &case.sql).is_none() {
                entry.1 += 1;
                admitted.push(format!("{} {mode:?}: {}", case.id, case.sql));
            }
        }
    }
    eprintln!("red team by class (cases, admitted): {by_class:?}");
    assert!(
        admitted.is_empty(),
        "{} admitted:\n{}",
        admitted.len(),
        admitted.join("\n")
    );
}

#[test]
fn ordinary_sql_is_admitted() {
    let statements = ordinary();
    assert!(statements.len() >= 300, "{} statements", statements.len());
    let sources: std::collections::BTreeSet<&str> =
        statements.iter().map(|s| s.source.as_str()).collect();
    assert!(sources.len() >= 8, "{sources:?}");
    let mut refused = Vec::new();
    let mut checked = 0;
    for s in &statements {
        for mode in [Mode::Default, Mode::Strict] {
            if mode == Mode::Strict && s.id.ends_with("-default-only") {
                continue;
            }
            checked += 1;
            if let Some(r) = verdict(mode, &s.sql) {
                refused.push(format!("{} {mode:?}: {r:?}: {}", s.id, s.sql));
            }
        }
    }
    let rate = refused.len() as f64 / checked as f64;
    eprintln!(
        "ordinary SQL: {} of {checked} checks refused ({:.2}%)",
        refused.len(),
        rate * 100.0
    );
    for r in &refused {
        eprintln!("  refused: {r}");
    }
    assert!(rate <= 0.01, "false refusals:\n{}", refused.join("\n"));
}

/// A database of its own with the corpora's schema.
fn corpus_database(name: &str) -> String {
    let shared = pgpipe_tests::shared();
    shared
        .psql(&format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE);\nCREATE DATABASE {name};"
        ))
        .expect("create the database");
    let schema = std::fs::read_to_string(format!(
        "{}/tests/guard_corpus/schema.sql",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("schema.sql");
    shared
        .psql(&format!("\\connect {name}\n{schema}"))
        .expect("schema.sql");
    name.to_owned()
}

/// Runs the red-team cases, each in a session of its own, and returns the ids whose probe did
/// not answer `t`.
fn cases_without_effect(database: &str, cases: &[Case]) -> Vec<String> {
    let mut script = String::from("\\set ON_ERROR_STOP 0\n");
    for case in cases {
        // A session of its own for each case.
        script.push_str(&format!("\\connect {database}\n"));
        script.push_str(&format!("\\echo @@{}\n", case.id));
        script.push_str(&case.sql);
        script.push_str(";\n");
        script.push_str(&case.probe);
        script.push_str(";\n");
    }
    let out = pgpipe_tests::shared().psql(&script).expect("psql");
    let mut answers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut current = None;
    for line in out.lines() {
        if let Some(id) = line.strip_prefix("@@") {
            current = Some(id);
            answers.entry(id).or_default();
        } else if let Some(id) = current {
            answers.entry(id).or_default().push(line.trim());
        }
    }
    cases
        .iter()
        .filter(|c| answers.get(c.id.as_str()).and_then(|a| a.last()) != Some(&"t"))
        .map(|c| c.id.clone())
        .collect()
}

#[test]
fn on_a_real_server_the_red_team_leaks_and_the_ordinary_sql_runs() {
    let name = corpus_database("guard_corpus_truth");
    let cases = red_team();
    let mut failed = cases_without_effect(&name, &cases);
    // A session's locks go with its backend, which exits a moment after psql moved to the next
    // session: a `pg_try_advisory_lock` of the same key can meet it. Such a case runs again,
    // alone, once the earlier backends are gone.
    if !failed.is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let again: Vec<Case> = cases
            .iter()
            .filter(|c| failed.contains(&c.id))
            .map(|c| Case {
                id: c.id.clone(),
                class: c.class.clone(),
                mode: c.mode,
                sql: c.sql.clone(),
                probe: c.probe.clone(),
            })
            .collect();
        failed = again
            .iter()
            .filter(|c| !cases_without_effect(&name, std::slice::from_ref(*c)).is_empty())
            .map(|c| c.id.clone())
            .collect();
    }
    assert!(
        failed.is_empty(),
        "{} red-team cases left nothing behind on this server: {failed:?}",
        failed.len()
    );
    // Every ordinary statement runs here, rolled back, with its parameters' values.
    // The first error stops the script, and the test with psql's message.
    let mut script = format!("\\connect {name}\n");
    for s in ordinary() {
        script.push_str(&format!("\\echo @@{}\nBEGIN;\n", s.id));
        if s.params.is_empty() {
            script.push_str(&format!("{};\n", s.sql));
        } else {
            let types = match s.types.is_empty() {
                true => String::new(),
                false => format!("({})", s.types.join(", ")),
            };
            script.push_str(&format!(
                "PREPARE p{types} AS {};\nEXECUTE p({});\nDEALLOCATE p;\n",
                s.sql,
                s.params.join(", ")
            ));
        }
        script.push_str("ROLLBACK;\n");
    }
    if let Err(e) = pgpipe_tests::shared().psql(&script) {
        panic!("an ordinary statement does not run: {e}");
    }
    drop_database(&name);
}

/// Through a connected client: the guard with the catalog's extension functions refuses every
/// red-team case, and nothing of them reaches the server (the probes, run afterwards in one
/// session of the test, see no effect of any case it refused).
#[test]
fn a_connected_client_refuses_every_red_team_case() {
    let name = corpus_database("guard_corpus_client");
    let cases = red_team();
    let mut admitted = Vec::new();
    smol::block_on(async {
        for mode in [Mode::Default, Mode::Strict] {
            let mut config = Config::parse(&pgpipe_tests::shared().url()).expect("test URL");
            config.dbname = name.clone();
            config.guard = mode;
            let db = pgpipe_smol::connect_with(config).await.expect("connect");
            for case in cases.iter().filter(|c| modes(c).contains(&mode)) {
                match db.query(case.sql.as_str(), &[]).await {
                    Err(Error::Refused(_)) => {}
                    other => admitted.push(format!(
                        "{} {mode:?}: {} -> {:?}",
                        case.id,
                        case.sql,
                        other.map(|rows| rows.len())
                    )),
                }
            }
            db.close().await;
        }
    });
    assert!(
        admitted.is_empty(),
        "{} admitted:\n{}",
        admitted.len(),
        admitted.join("\n")
    );
    drop_database(&name);
}

fn drop_database(name: &str) {
    let _ = pgpipe_tests::shared().psql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
}
