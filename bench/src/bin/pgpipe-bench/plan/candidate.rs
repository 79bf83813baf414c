//! One client configuration ([`Candidate`]): its library and runtime, its options, and the name
//! that spells them (parsed, written canonically, resized).

/// pgpipe's runtime adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Adapter {
    Smol,
    Tokio,
    Glommio,
}

/// The client library of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Pgpipe(Adapter),
    TokioPostgres,
    Deadpool,
    /// PostgreSQL's own `pgbench` running the transactions workload's script (`N` clients):
    /// what the server does with the classic client of each connection.
    Pgbench,
}

/// One client configuration. Its name is its spec: `pgpipe-smol-4`, `pgpipe-tokio-4-w256`
/// (max_in_flight 256), `pgpipe-tokio-4-m4` (max_connections 4: no elasticity),
/// `pgpipe-tokio-4-nofair` (`Config::fair_lanes` off), `pgpipe-tokio-4-nocoalesce`
/// (`Config::sync_coalescing` off), `pgpipe-tokio-4-pipelined` (`pooler=transaction-pipelined`:
/// several Syncs in flight through a transaction pooler, the unsafe opt-in),
/// `tokio-postgres-2`, `deadpool-16`; `-tls` on any of them connects over TLS with the server
/// certificate verified (`pgpipe-tokio-4-tls`, `tokio-postgres-4-tls`, `deadpool-16-tls`);
/// without it a candidate is plaintext (`sslmode=disable`). A `#2` suffix enters the same
/// configuration again as a separate candidate (the A/A control).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// The spec as given (`pgpipe-tokio-4-w256#2`).
    pub name: String,
    /// The library (and runtime).
    pub kind: Kind,
    /// pipeline_size, connections, or pool size.
    pub conns: usize,
    /// pgpipe only (`-wM`): `Config::max_in_flight`; None = the library's default.
    pub max_in_flight: Option<usize>,
    /// pgpipe only (`-mK`): `Config::max_connections`, the upper bound of pipelined connections
    /// the service may open on demand; None = the library's default. At most `conns` disables
    /// elasticity.
    pub max_connections: Option<usize>,
    /// `-tls`: over TLS, verifying the server's certificate chain and name against the root
    /// certificate (pgpipe `sslmode=verify-full`, tokio-postgres and deadpool through
    /// tokio-postgres-rustls). Otherwise plaintext.
    pub tls: bool,
    /// pgpipe only (`-nofair`): `Config::fair_lanes` off (on by default).
    pub no_fair: bool,
    /// pgpipe only (`-nocoalesce`): `Config::sync_coalescing` off (on by default).
    pub no_coalesce: bool,
    /// pgpipe only (`-pipelined`): `Config::pooler` is `TransactionPipelined` (the default,
    /// `Auto`, keeps one Sync at a time behind a pooler).
    pub pipelined: bool,
    /// pgpipe only (`-batch`): the transactions workload runs as an atomic batch on the
    /// shared path (`Client::batch`) instead of an interactive `transaction()`.
    pub batch: bool,
    /// 1, or the copy number of an A/A duplicate.
    pub copy: u32,
}

impl Candidate {
    /// Parses a candidate spec: `pgpipe-{smol,tokio,glommio}-N[-wM][-mK][-nofair]` (options in
    /// any order, each at most once), `tokio-postgres-N` or `deadpool-N`, each optionally
    /// with `-tls` among its options, optionally followed by `#K`.
    pub fn parse(spec: &str) -> Result<Candidate, String> {
        let bad = || {
            format!(
                "bad candidate {spec:?}: expected pgpipe-{{smol,tokio,glommio}}-N[-wM][-mK][-nofair][-nocoalesce][-pipelined][-batch][-tls], \
                 tokio-postgres-N[-tls], deadpool-N[-tls] or pgbench-N, optionally followed by #K"
            )
        };
        let (base, copy) = match spec.split_once('#') {
            Some((b, k)) => (b, k.parse::<u32>().map_err(|_| bad())?),
            None => (spec, 1),
        };
        let (kind, rest) = if let Some(r) = base.strip_prefix("pgpipe-smol-") {
            (Kind::Pgpipe(Adapter::Smol), r)
        } else if let Some(r) = base.strip_prefix("pgpipe-tokio-") {
            (Kind::Pgpipe(Adapter::Tokio), r)
        } else if let Some(r) = base.strip_prefix("pgpipe-glommio-") {
            (Kind::Pgpipe(Adapter::Glommio), r)
        } else if let Some(r) = base.strip_prefix("tokio-postgres-") {
            (Kind::TokioPostgres, r)
        } else if let Some(r) = base.strip_prefix("deadpool-") {
            (Kind::Deadpool, r)
        } else if let Some(r) = base.strip_prefix("pgbench-") {
            (Kind::Pgbench, r)
        } else {
            return Err(bad());
        };
        // `N`, then `-tls` (any kind) and pgpipe's options `-wM` / `-mK`, in any order, each at
        // most once.
        let mut parts = rest.split('-');
        let conns = parts
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(bad)?;
        let (mut window, mut max_conns, mut tls, mut no_fair) = (None, None, false, false);
        let (mut no_coalesce, mut batch, mut pipelined) = (false, false, false);
        for opt in parts {
            if kind == Kind::Pgbench {
                return Err(bad());
            }
            if opt == "tls" {
                if tls {
                    return Err(bad());
                }
                tls = true;
                continue;
            }
            if !matches!(kind, Kind::Pgpipe(_)) {
                return Err(bad());
            }
            if opt == "nofair" {
                if no_fair {
                    return Err(bad());
                }
                no_fair = true;
                continue;
            }
            if opt == "nocoalesce" {
                if no_coalesce {
                    return Err(bad());
                }
                no_coalesce = true;
                continue;
            }
            if opt == "pipelined" {
                if pipelined {
                    return Err(bad());
                }
                pipelined = true;
                continue;
            }
            if opt == "batch" {
                if batch {
                    return Err(bad());
                }
                batch = true;
                continue;
            }
            let slot = match opt.as_bytes().first() {
                Some(b'w') => &mut window,
                Some(b'm') => &mut max_conns,
                _ => return Err(bad()),
            };
            if slot.is_some() {
                return Err(bad());
            }
            *slot = Some(opt[1..].parse::<usize>().map_err(|_| bad())?);
        }
        if conns == 0 || copy == 0 || window == Some(0) || max_conns == Some(0) {
            return Err(bad());
        }
        Ok(Candidate {
            name: spec.to_owned(),
            kind,
            conns,
            max_in_flight: window,
            max_connections: max_conns,
            tls,
            no_fair,
            no_coalesce,
            pipelined,
            batch,
            copy,
        })
    }

    /// The option suffixes in their canonical order: `-wM`, `-mK`, `-nofair`, `-nocoalesce`,
    /// `-pipelined`, `-batch`, `-tls`, then `#K`.
    fn suffix(&self) -> String {
        let mut s = String::new();
        if let Some(w) = self.max_in_flight {
            s.push_str(&format!("-w{w}"));
        }
        if let Some(m) = self.max_connections {
            s.push_str(&format!("-m{m}"));
        }
        if self.no_fair {
            s.push_str("-nofair");
        }
        if self.no_coalesce {
            s.push_str("-nocoalesce");
        }
        if self.pipelined {
            s.push_str("-pipelined");
        }
        if self.batch {
            s.push_str("-batch");
        }
        if self.tls {
            s.push_str("-tls");
        }
        if self.copy > 1 {
            s.push_str(&format!("#{}", self.copy));
        }
        s
    }

    /// The library and runtime without the size, with the options: `pgpipe-smol`,
    /// `pgpipe-tokio-w256-m32`, `tokio-postgres`, `tokio-postgres-tls`, `deadpool`.
    pub fn family(&self) -> String {
        format!("{}{}", self.library(), self.suffix())
    }

    fn library(&self) -> &'static str {
        match self.kind {
            Kind::Pgpipe(Adapter::Smol) => "pgpipe-smol",
            Kind::Pgpipe(Adapter::Tokio) => "pgpipe-tokio",
            Kind::Pgpipe(Adapter::Glommio) => "pgpipe-glommio",
            Kind::TokioPostgres => "tokio-postgres",
            Kind::Deadpool => "deadpool",
            Kind::Pgbench => "pgbench",
        }
    }

    /// The same candidate with another size (for the pool-ceiling sweep); options are kept and
    /// the name is written in the canonical order.
    pub fn sized(&self, conns: usize) -> Candidate {
        Candidate {
            name: format!("{}-{conns}{}", self.library(), self.suffix()),
            conns,
            ..self.clone()
        }
    }

    /// Whether the candidate is a pgpipe client (any adapter).
    pub fn is_pgpipe(&self) -> bool {
        matches!(self.kind, Kind::Pgpipe(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names() {
        let c = Candidate::parse("pgpipe-glommio-4-w256#2").unwrap();
        assert_eq!(c.kind, Kind::Pgpipe(Adapter::Glommio));
        assert_eq!((c.conns, c.max_in_flight, c.copy), (4, Some(256), 2));
        assert_eq!(c.sized(8).name, "pgpipe-glommio-8-w256#2");
        let d = Candidate::parse("deadpool-16").unwrap();
        assert_eq!((d.kind, d.conns), (Kind::Deadpool, 16));
        assert_eq!(
            Candidate::parse("tokio-postgres-2").unwrap().family(),
            "tokio-postgres"
        );
        for bad in [
            "pgpipe-4",
            "deadpool-0",
            "deadpool-8-w4",
            "deadpool-8-m4",
            "tokio-postgres-2-m4",
            "tokio-postgres-x",
            "x#y",
            "pgpipe-tokio-4-m0",
            "pgpipe-tokio-4-w0",
            "pgpipe-tokio-4-m",
            "pgpipe-tokio-4-",
            "pgpipe-tokio-4-x8",
            "pgpipe-tokio-4-m4-m8",
            "pgpipe-tokio-4-w8-w8",
            "pgpipe-tokio-4-m4x",
        ] {
            assert!(Candidate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn max_connections_suffix() {
        let fixed = Candidate::parse("pgpipe-tokio-4-m4").unwrap();
        assert_eq!(
            (fixed.conns, fixed.max_in_flight, fixed.max_connections),
            (4, None, Some(4))
        );
        assert_eq!(fixed.family(), "pgpipe-tokio-m4");
        assert_eq!(fixed.sized(8).name, "pgpipe-tokio-8-m4");
        let plain = Candidate::parse("pgpipe-tokio-4").unwrap();
        assert_eq!(plain.max_connections, None);
        assert_ne!(plain.family(), fixed.family());
        // -w and -m in either order mean the same configuration, written canonically.
        let a = Candidate::parse("pgpipe-tokio-4-w256-m32").unwrap();
        let b = Candidate::parse("pgpipe-tokio-4-m32-w256").unwrap();
        assert_eq!((a.max_in_flight, a.max_connections), (Some(256), Some(32)));
        assert_eq!(
            (b.max_in_flight, b.max_connections),
            (a.max_in_flight, a.max_connections)
        );
        assert_eq!(a.family(), "pgpipe-tokio-w256-m32");
        assert_eq!(b.family(), a.family());
        assert_eq!(b.sized(4).name, "pgpipe-tokio-4-w256-m32");
        let c = Candidate::parse("pgpipe-smol-2-m8#2").unwrap();
        assert_eq!((c.conns, c.max_connections, c.copy), (2, Some(8), 2));
        assert_eq!(c.family(), "pgpipe-smol-m8#2");
        assert_eq!(c.sized(2).name, "pgpipe-smol-2-m8#2");
        assert_eq!(Candidate::parse(&c.sized(16).name).unwrap(), c.sized(16));
    }

    #[test]
    fn tls_suffix() {
        let t = Candidate::parse("pgpipe-tokio-4-tls").unwrap();
        assert!(t.tls && t.is_pgpipe());
        assert_eq!(t.family(), "pgpipe-tokio-tls");
        assert_ne!(
            t.family(),
            Candidate::parse("pgpipe-tokio-4").unwrap().family()
        );
        assert!(!Candidate::parse("pgpipe-tokio-4").unwrap().tls);
        // Any kind; among pgpipe's options in any order, written canonically.
        let a = Candidate::parse("pgpipe-glommio-4-tls-w256#2").unwrap();
        assert_eq!((a.tls, a.max_in_flight, a.copy), (true, Some(256), 2));
        assert_eq!(a.sized(8).name, "pgpipe-glommio-8-w256-tls#2");
        let p = Candidate::parse("tokio-postgres-4-tls").unwrap();
        assert_eq!((p.kind, p.conns, p.tls), (Kind::TokioPostgres, 4, true));
        assert_eq!(p.family(), "tokio-postgres-tls");
        let d = Candidate::parse("deadpool-16-tls").unwrap();
        assert_eq!((d.kind, d.conns, d.tls), (Kind::Deadpool, 16, true));
        assert_eq!(d.sized(8).name, "deadpool-8-tls");
        for bad in [
            "pgpipe-tokio-4-tls-tls",
            "tokio-postgres-tls",
            "deadpool-16-tls-w4",
            "pgpipe-tokio-tls-4",
            "pgpipe-tokio-4-TLS",
        ] {
            assert!(Candidate::parse(bad).is_err(), "{bad}");
        }
    }
}
