//! The daemon's tests that start real daemons in this process (or run `daemon::exec` with real
//! processes), one binary: each module was a test binary of its own, and each binary linked
//! tokio, axum and the whole daemon again. They run as threads of one process now, so none may
//! rely on anything process-wide being its own: no `set_var`, no `set_current_dir`, ports from
//! `common::free_port` or the kernel, and temporary directories from `common::TempDir` (unique
//! per process and call). `disk_full` (a tmpfs mount) and `interop_dtn7` (an external `dtnd`)
//! stay binaries of their own.
//!
//! `cargo test -p ferry-daemon --test integration` runs them all;
//! `cargo test -p ferry-daemon --test integration rpc::` one module.

// Tests of the I/O shell (and their shared scaffolding) run processes, use sockets and files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "../common/mod.rs"]
mod common;

mod api;
mod bpsec;
mod dashboard;
mod exec;
mod loopback;
mod metrics;
mod plan;
mod providers;
mod rpc;
mod tls;
