//! The runtime-neutral driver: per-connection shared state and the connection task.

pub(crate) mod cancel;
pub(crate) mod conn;
pub(crate) mod health;
pub(crate) mod open;
pub(crate) mod shared;
pub(crate) mod spare;
pub(crate) mod task;
pub(crate) mod transport;
pub(crate) mod types;

pub use shared::Notification;
pub use task::ConnTask;
