//! A server's role (standby or not, read-only by default or not) and whether
//! `target_session_attrs` accepts it.
//!
//! PostgreSQL 14 and later report both facts at startup and whenever they change
//! (`in_hot_standby`, `default_transaction_read_only`); for an older server, or a proxy that
//! does not pass them on, [`QUERY`] asks, and [`Role::from_answer`] reads its one row.

use bytes::BytesMut;

use crate::config::TargetSessionAttrs;
use crate::proto::SessionInfo;
use crate::Error;

/// Asked when the server did not report its role: one row, (in recovery, read only).
pub const QUERY: &str =
    "SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('transaction_read_only')";

/// What a server is, as far as `target_session_attrs` cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    /// In hot standby (recovery).
    pub standby: bool,
    /// New transactions are read-only by default (always so on a standby).
    pub read_only: bool,
}

impl Role {
    /// The role from the parameters the server reported, when it reported both.
    pub fn reported(info: &SessionInfo) -> Option<Role> {
        let standby = on(info.parameter("in_hot_standby")?);
        let read_only = on(info.parameter("default_transaction_read_only")?);
        Some(Role {
            standby,
            read_only: read_only || standby,
        })
    }

    /// Reads the answer to [`QUERY`] (a simple query) from `buf`. `Ok(None)` until its
    /// ReadyForQuery has arrived; the bytes it used are taken from `buf`.
    pub fn from_answer(buf: &mut BytesMut) -> Result<Option<Role>, Error> {
        let bad = |what: &str| Error::Protocol(format!("reading the server's role: {what}"));
        // The answer's rows are a few short values: no message of it may be long.
        let Some(answer) =
            super::answer::read(buf, super::frame::SHORT_MESSAGE_MAX).map_err(|e| bad(&e))?
        else {
            return Ok(None);
        };
        if let Some(e) = answer.error {
            return Err(Error::UnsupportedServer(format!(
                "asking the server for its role failed: {}",
                e.message()
            )));
        }
        match answer.rows.last().map(Vec::as_slice) {
            Some([Some(recovery), Some(read_only)]) => {
                let standby = recovery.as_slice() == b"t";
                Ok(Some(Role {
                    standby,
                    read_only: standby || on_bytes(read_only),
                }))
            }
            _ => Err(bad("no row of two values")),
        }
    }

    /// Why `attrs` refuses this role (`None`: it accepts it). `fallback` is the second pass
    /// of `prefer-standby`, which takes any server.
    pub fn refused_by(self, attrs: TargetSessionAttrs, fallback: bool) -> Option<&'static str> {
        use TargetSessionAttrs as T;
        match attrs {
            T::Any => None,
            T::ReadWrite if self.standby => Some("a standby, not read-write"),
            T::ReadWrite if self.read_only => Some("read-only by default, not read-write"),
            T::ReadOnly if !self.read_only => Some("read-write, not read-only"),
            T::Primary if self.standby => Some("a standby, not a primary"),
            T::Standby if !self.standby => Some("a primary, not a standby"),
            T::PreferStandby if !self.standby && !fallback => Some("a primary, standbys first"),
            _ => None,
        }
    }
}

/// Whether [`Role`] matters for `attrs` (for `any` nothing needs to be known).
pub fn needed(attrs: TargetSessionAttrs) -> bool {
    attrs != TargetSessionAttrs::Any
}

/// Encodes [`QUERY`] into `buf`.
pub fn ask(buf: &mut BytesMut) -> Result<(), Error> {
    super::encode::simple(QUERY, buf)
}

fn on(v: &str) -> bool {
    v == "on"
}

fn on_bytes(v: &[u8]) -> bool {
    v == b"on"
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use TargetSessionAttrs as T;

    fn info(standby: &str, ro: &str) -> SessionInfo {
        SessionInfo {
            parameters: vec![
                ("in_hot_standby".into(), standby.into()),
                ("default_transaction_read_only".into(), ro.into()),
            ],
            backend_key: None,
        }
    }

    const PRIMARY: Role = Role {
        standby: false,
        read_only: false,
    };
    const STANDBY: Role = Role {
        standby: true,
        read_only: true,
    };
    const READ_ONLY_PRIMARY: Role = Role {
        standby: false,
        read_only: true,
    };

    #[test]
    fn reported_parameters_give_the_role() {
        assert_eq!(Role::reported(&info("off", "off")), Some(PRIMARY));
        assert_eq!(Role::reported(&info("on", "off")), Some(STANDBY));
        assert_eq!(Role::reported(&info("off", "on")), Some(READ_ONLY_PRIMARY));
        assert_eq!(Role::reported(&SessionInfo::default()), None);
    }

    #[test]
    fn libpq_meaning_of_every_value() {
        let accepts = |attrs, role: Role, fallback| role.refused_by(attrs, fallback).is_none();
        let table = [
            (T::Any, [true, true, true]),
            (T::ReadWrite, [true, false, false]),
            (T::ReadOnly, [false, true, true]),
            (T::Primary, [true, false, true]),
            (T::Standby, [false, true, false]),
            (T::PreferStandby, [false, true, false]),
        ];
        for (attrs, want) in table {
            let got = [PRIMARY, STANDBY, READ_ONLY_PRIMARY].map(|r| accepts(attrs, r, false));
            assert_eq!(got, want, "{attrs:?}");
        }
        assert!(accepts(T::PreferStandby, PRIMARY, true));
        assert!(
            !accepts(T::Standby, PRIMARY, true),
            "only prefer-standby falls back"
        );
    }

    fn msg(tag: u8, body: &[u8], out: &mut BytesMut) {
        out.put_u8(tag);
        out.put_i32(body.len() as i32 + 4);
        out.put_slice(body);
    }

    fn data_row(values: &[&[u8]], out: &mut BytesMut) {
        let mut body = Vec::new();
        body.extend_from_slice(&(values.len() as i16).to_be_bytes());
        for v in values {
            body.extend_from_slice(&(v.len() as i32).to_be_bytes());
            body.extend_from_slice(v);
        }
        msg(b'D', &body, out);
    }

    #[test]
    fn the_query_answer_gives_the_role_once_complete() {
        let mut full = BytesMut::new();
        msg(b'T', &[0, 0], &mut full); // a description's content is not read
        data_row(&[b"t", b"on"], &mut full);
        msg(b'C', b"SELECT 1\0", &mut full);
        msg(b'Z', b"I", &mut full);
        full.extend_from_slice(b"next");
        for cut in 0..full.len() - 4 {
            let mut part = BytesMut::from(&full[..cut]);
            assert_eq!(
                Role::from_answer(&mut part).expect("partial"),
                None,
                "{cut}"
            );
            assert_eq!(part.len(), cut, "a partial answer is left whole");
        }
        let mut buf = full.clone();
        assert_eq!(
            Role::from_answer(&mut buf).expect("complete"),
            Some(STANDBY)
        );
        assert_eq!(&buf[..], b"next", "what follows the answer stays");

        let mut primary = BytesMut::new();
        data_row(&[b"f", b"off"], &mut primary);
        msg(b'Z', b"I", &mut primary);
        assert_eq!(Role::from_answer(&mut primary).expect("ok"), Some(PRIMARY));
    }

    #[test]
    fn a_failed_or_empty_answer_is_an_error() {
        let mut failed = BytesMut::new();
        msg(b'E', b"SERROR\0C42883\0Mno such function\0\0", &mut failed);
        msg(b'Z', b"I", &mut failed);
        let e = Role::from_answer(&mut failed).expect_err("error");
        assert!(e.to_string().contains("no such function"), "{e}");

        let mut empty = BytesMut::new();
        msg(b'Z', b"I", &mut empty);
        assert!(Role::from_answer(&mut empty).is_err());
    }
}
