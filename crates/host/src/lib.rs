//! Ferry's host core: the sans-IO part of a node that sits above `node` and `rpc` and below the
//! I/O shells (the tokio daemon, the simulator), so that both run the same code.
//!
//! - [`Host`] (`host.rs`) owns a [`node::Node`], its [`rpc::Rpc`] engine and its durable
//!   [`inbox::Inboxes`]; it routes the node's events, holds every promise until the store made it
//!   durable and says what the shell must do as [`Output`]s.
//! - [`Pipeline`] (`durability.rs`) is the bookkeeping behind that: when the store's open batch
//!   is committed, when a sync of the committed batches is due, and which promises a durable
//!   commit releases. It states the project's key invariant: **nothing is promised before it is
//!   durable**.
//! - [`inbox`] keeps bundles delivered to local endpoints in the store until an application
//!   takes them.
//!
//! **What it never does**: read a clock (time comes in as `now`), touch a socket, a file or a
//! thread, or draw randomness. The store is the node's [`store::Store`]; the shell runs its
//! commits and syncs wherever it likes (a blocking thread in the daemon, at once or after a
//! simulated latency in the simulator) and reports their end.

mod durability;
mod host;
pub mod inbox;

pub use durability::{Pipeline, PipelineConfig, Promises, Released};
pub use host::{
    Commit, Handled, Host, HostConfig, HostError, IPN_DISCARD_SERVICE, IPN_ECHO_SERVICE, Output,
};
