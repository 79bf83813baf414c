//! Nothing: this crate's tests are the point (`tests/`). See its manifest for why it depends
//! on the adapters alone.
