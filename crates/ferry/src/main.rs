//! `ferry`: the one binary. Today it offers the bundle tools built on the wire formats
//! (`ferry bundle create`, `ferry bundle inspect`) and the network simulator (`ferry sim`); the
//! daemon and the RPC client join it as their issues land.
//!
//! This is the I/O shell: it reads files, the clock and the terminal, and turns errors into
//! messages a person can act on. The sans-IO crates it drives never do.

// The binary is the I/O shell: it may read the clock and files. The clippy.toml bans are for the
// sans-IO core crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod bundle_cmd;
mod node_cmd;
mod sim_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Ferry: remote procedure calls that survive disconnection (a BPv7 DTN node).
#[derive(Parser)]
#[command(name = "ferry", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create and inspect BPv7 bundles (RFC 9171) as files.
    #[command(subcommand)]
    Bundle(bundle_cmd::BundleCommand),
    /// Run a simulated network (virtual time, many nodes in one process) and print a summary.
    Sim(sim_cmd::SimArgs),
    /// Run a node: the daemon (TCPCLv4, UDP, discovery, persistent store, local API).
    Node(node_cmd::NodeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bundle(cmd) => bundle_cmd::run(cmd),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Node(args) => node_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry: {e:#}");
            ExitCode::FAILURE
        }
    }
}
