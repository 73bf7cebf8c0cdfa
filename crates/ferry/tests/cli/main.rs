//! The light CLI tests, one binary: each module was a test binary of its own, and each binary
//! linked tokio, axum and the whole daemon again. They run as threads of one process now, so
//! none may rely on anything process-wide being its own: no `set_var`, no `set_current_dir`,
//! ports from `common::free_port` or the kernel, and temporary paths of their own (the module's
//! name in them, or `TestDir`). The heavy and timing-sensitive tests (`demo`, `exec_crash`,
//! `hostile`, `netns`, `soak`) stay binaries of their own.
//!
//! `cargo test -p ferry --test cli` runs them all; `cargo test -p ferry --test cli call_cli::`
//! one module.

// Tests of the I/O shell (and their shared scaffolding) run processes, use sockets and files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "../common/mod.rs"]
mod common;

mod bundle_cli;
mod call_cli;
mod cli_offline;
mod code_map;
mod dashboard_cli;
mod dist_cli;
mod eval_cli;
mod readme_call;
mod sim_cli;
mod sim_rpc_cli;
mod two_nodes;
