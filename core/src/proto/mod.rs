//! Protocol state: no I/O, no async, time as a parameter. Everything here is deterministic and
//! tested by feeding byte streams.

pub(crate) mod answer;
pub(crate) mod catalog;
pub(crate) mod coalesce;
pub mod encode;
pub mod frame;
pub mod pipeline;
pub mod role;
pub(crate) mod scram;
pub mod startup;
pub mod statements;
pub(crate) mod timing;

pub use pipeline::{Frame, Handler, Outcome, Part, Pipeline, UnitKind};
pub use startup::{Binding, SessionInfo, Startup, Step};
pub use statements::StatementCache;
