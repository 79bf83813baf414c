//! A unit in the mailbox, encoded and not yet taken by the connection's pump: what the pump
//! needs to know of it beside its bytes.

use std::sync::Arc;

use super::{Statement, Token};
use crate::proto::pipeline::Script;
use crate::proto::{Frame, UnitKind};

/// A unit in the mailbox.
pub(crate) struct Queued {
    pub(crate) len: usize,
    pub(crate) token: Token,
    pub(crate) kind: UnitKind,
    /// Statements riding in the unit around its own (a transaction's BEGIN or COMMIT).
    pub(crate) frame: Frame,
    pub(crate) closes: bool,
    /// The estimate this unit added to the connection's pending cost.
    pub(crate) cost: u64,
    /// The statement executed, whose estimate the completion updates.
    pub(crate) stmt: Option<Arc<Statement>>,
    /// The answers its messages call for, where its encoder gave them (executions); other
    /// units' are read from their bytes as they go out.
    pub(crate) script: Option<Script>,
}

impl Queued {
    /// A unit of `kind` for `token`: no frame, no statement closed, no estimate.
    #[inline]
    pub(crate) fn new(token: Token, kind: UnitKind) -> Queued {
        Queued {
            len: 0,
            token,
            kind,
            frame: Frame::NONE,
            closes: false,
            cost: 0,
            stmt: None,
            script: None,
        }
    }

    pub(super) fn closing(mut self, closes: bool) -> Queued {
        self.closes = closes;
        self
    }

    /// With `frame`'s statements around its own.
    #[inline]
    pub(super) fn framed(mut self, frame: Frame) -> Queued {
        self.frame = frame;
        self
    }

    /// An execution of `stmt`, whose estimate counts as pending work on its connection until
    /// it completes (cost-aware routing reads the sum), with the `script` its encoder gave.
    #[inline]
    pub(super) fn executing(mut self, stmt: &Arc<Statement>, script: Script) -> Queued {
        self.cost = stmt.estimate_ns();
        self.stmt = Some(stmt.clone());
        self.script = Some(script);
        self
    }
}
