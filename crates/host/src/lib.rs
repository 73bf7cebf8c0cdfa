//! Ferry's host core: the sans-IO part of a node that sits above `node` and `rpc` and below the
//! I/O shells (the tokio daemon, the simulator).
//!
//! Today it holds the **durability pipeline** ([`Pipeline`]): the bookkeeping that decides when
//! the store's open batch is committed, when a sync of the committed batches is due, and which
//! promises (answers to applications, confirmations of received bundles to their senders,
//! executions of procedures, store-carry-forward transmits) may be released because the commit
//! that made them true is durable. It is the one place that states the project's key invariant:
//! **nothing is promised before it is durable**.
//!
//! **What it never does**: read a clock (time comes in as `now`), touch the store, a socket, a
//! file or a thread. The shell commits the store when told, runs the sync wherever it likes (a
//! blocking thread in the daemon, at once in the simulator) and reports its end; the pipeline
//! only says what is due and what may be released. The promises themselves are the shell's type
//! ([`Promises`]): the pipeline never looks inside them beyond asking whether anyone waits.

mod durability;

pub use durability::{Pipeline, PipelineConfig, Promises, Released};
