//! `ferry`: the one binary. It offers the bundle tools built on the wire formats (`ferry bundle
//! create`, `ferry bundle inspect`), the network simulator (`ferry sim`; `ferry eval`, the DTN-RPC
//! paper's evaluation with a report), the daemon (`ferry node`) and the commands that talk to a
//! running daemon over its local HTTP API (`status`, `peers`, `routes`, `bundles`, `send`,
//! `recv`, `ping`, `trace`) and the remote procedure calls through it (`call`, `calls`, `result`,
//! `wait`, `cancel`, `procedures`, `keys`), and the address of its web dashboard (`dashboard`).
//!
//! This is the I/O shell: it reads files, the clock and the terminal, and turns errors into
//! messages a person can act on. The sans-IO crates it drives never do.

// The binary is the I/O shell: it may read the clock and files. The clippy.toml bans are for the
// sans-IO core crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod api;
mod api_token;
mod bench_cmd;
mod bundle_cmd;
mod call_cmd;
mod calls_view;
mod client;
mod completions_cmd;
mod dashboard_cmd;
mod demo_cmd;
mod eval_cmd;
mod eval_report;
mod exit;
mod follow;
mod info_cmd;
mod keys_cmd;
mod names;
mod node_cmd;
mod output;
mod ping_cmd;
mod plot;
mod recv_cmd;
mod send_cmd;
mod sim_cmd;
mod stubs;
mod testbed_cmd;
mod trace_cmd;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// A span a command-line flag gives (`90s`, `2h`, `3days`) that must be more than zero: a bundle
/// that lives 0 s, or a call whose deadline is now, would be refused or expire unseen.
pub(crate) fn positive_duration(text: &str) -> Result<Duration, String> {
    let span = humantime::parse_duration(text).map_err(|e| format!("{text:?}: {e}"))?;
    if span.is_zero() {
        return Err(format!("{text:?}: must be more than zero"));
    }
    Ok(span)
}

/// Ferry: remote procedure calls that survive disconnection (a BPv7 DTN node).
#[derive(Parser)]
#[command(name = "ferry", version, about, long_about = None, after_help = exit::HELP)]
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
    /// Run the DTN-RPC paper's evaluation (Hub, Chained, Islands × 0/1/100 MB × ten modes) in the
    /// simulator, or part of it, and write a report with plots.
    Eval(eval_cmd::EvalArgs),
    /// Run the paper's evaluation with real processes: a network namespace and a `ferry node`
    /// per node, links shaped with tc and taken down and up (root), and write the same report.
    Testbed(testbed_cmd::TestbedArgs),
    /// The echo `ferry testbed`'s servers run for each call.
    #[command(hide = true)]
    TestbedEcho(testbed_cmd::EchoArgs),
    /// Run a node: the daemon (TCPCLv4, UDP, discovery, persistent store, local API).
    Node(node_cmd::NodeArgs),
    /// Run a small network of real nodes on loopback and watch calls survive a broken link.
    Demo(demo_cmd::DemoArgs),
    /// Benchmark real nodes beside references measured in the same run (an opportunistic
    /// contact, the API's store, a queue after an outage, RPC) and write a report with plots.
    Bench(bench_cmd::BenchArgs),
    /// Show the running node's id, uptime, store usage and counters.
    Status(client::ApiArgs),
    /// List the running node's neighbours.
    Peers(client::ApiArgs),
    /// List the running node's mesh routes.
    Routes(client::ApiArgs),
    /// List the bundles in the running node's store.
    Bundles(client::ApiArgs),
    /// Send a bundle: text, a file or standard input.
    Send(send_cmd::SendArgs),
    /// Receive bundles waiting at a local endpoint, and acknowledge them once written.
    Recv(recv_cmd::RecvArgs),
    /// Measure round trips to a node's echo service.
    Ping(ping_cmd::PingArgs),
    /// Follow a bundle to its destination by its status reports.
    Trace(trace_cmd::TraceArgs),
    /// Call a procedure on a node, on any node that offers it, or on all of them, and wait for
    /// the result.
    Call(call_cmd::CallArgs),
    /// List the calls the running node made that it keeps in memory: every waiting call and the
    /// latest finished ones (`[rpc] finished_in_memory`); `ferry result ID` finds older ones.
    Calls(client::ApiArgs),
    /// Show a call's result as it stands now (the value, files, or why it failed).
    Result(call_cmd::ResultArgs),
    /// Wait for a call made earlier (`ferry call --detach`) and show its result.
    Wait(call_cmd::WaitArgs),
    /// Cancel a call: its servers are told, a running execution is stopped.
    Cancel(call_cmd::CancelArgs),
    /// List the procedures the running node (or another node) serves, or write typed stubs for
    /// them (`--stubs python`).
    Procedures(call_cmd::ProceduresArgs),
    /// Print the running node's metrics (OpenMetrics text: counters of traffic, calls, drops,
    /// refusals and limits reached; latency histograms; the process).
    Metrics(client::ApiArgs),
    /// Print the address of the running node's web dashboard, with its API token.
    Dashboard(dashboard_cmd::DashboardArgs),
    /// List the keys the running node knows for other nodes; accept a reinstalled node's new
    /// key, or forget one.
    Keys(keys_cmd::KeysArgs),
    /// Print shell completions for bash, zsh or fish.
    Completions(completions_cmd::CompletionsArgs),
    /// Print the man page ferry(1) in roff.
    #[command(hide = true)]
    Manpage(completions_cmd::ManpageArgs),
}

/// `ferry node` alone: what a node's process parses. A node runs for months and keeps the code
/// it ran resident, so it does not build the argument definitions of every other command (the
/// clap code that builds [`Cli`] is some 140 KiB; docs/performance.md, "Footprint"). Its help,
/// usage and errors are those of `ferry node` in [`Cli`]: a test compares the two.
#[derive(Parser)]
#[command(name = "ferry", version, about, long_about = None)]
struct NodeCli {
    #[command(subcommand)]
    command: NodeOnly,
}

#[derive(Subcommand)]
enum NodeOnly {
    /// Run a node: the daemon (TCPCLv4, UDP, discovery, persistent store, local API).
    Node(node_cmd::NodeArgs),
}

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == "node") {
        let NodeCli {
            command: NodeOnly::Node(args),
        } = NodeCli::parse();
        return match node_cmd::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => exit::report(&e, false),
        };
    }
    run_command()
}

/// Every command (`ferry node` too, when it is not the first argument). Never inlined into
/// `main`, so that a node does not keep this dispatch's code resident either.
#[inline(never)]
fn run_command() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let result = match cli.command {
        Command::Bundle(cmd) => bundle_cmd::run(cmd),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Eval(args) => eval_cmd::run(args),
        Command::Testbed(args) => testbed_cmd::run(args),
        Command::TestbedEcho(args) => testbed_cmd::run_echo(args),
        Command::Node(args) => node_cmd::run(args),
        Command::Demo(args) => demo_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Status(args) => info_cmd::run(info_cmd::Info::Status, args),
        Command::Peers(args) => info_cmd::run(info_cmd::Info::Peers, args),
        Command::Routes(args) => info_cmd::run(info_cmd::Info::Routes, args),
        Command::Bundles(args) => info_cmd::run(info_cmd::Info::Bundles, args),
        Command::Send(args) => send_cmd::run(args),
        Command::Recv(args) => recv_cmd::run(args),
        Command::Ping(args) => ping_cmd::run(args),
        Command::Trace(args) => trace_cmd::run(args),
        Command::Call(args) => call_cmd::run_call(args),
        Command::Calls(args) => call_cmd::run_calls(args),
        Command::Result(args) => call_cmd::run_result(args),
        Command::Wait(args) => call_cmd::run_wait(args),
        Command::Cancel(args) => call_cmd::run_cancel(args),
        Command::Procedures(args) => call_cmd::run_procedures(args),
        Command::Metrics(args) => info_cmd::run_metrics(args),
        Command::Keys(args) => keys_cmd::run(args),
        Command::Dashboard(args) => dashboard_cmd::run(args),
        Command::Completions(args) => completions_cmd::run_completions(args),
        Command::Manpage(args) => completions_cmd::run_manpage(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit::report(&e, json_asked()),
    }
}

/// Whether `--json` was given (before a `--`: after it, it is an argument's text). Every command
/// that has the flag takes it anywhere on its line, so this is what clap parsed, known even when
/// clap refused the line.
fn json_asked() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// A command line clap refused (or `--help`, `--version`, which clap reports the same way). With
/// `--json` among the arguments, a real error is a JSON document too.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let informational = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if informational || !json_asked() {
        e.exit();
    }
    let message = e.kind().as_str().map_or_else(
        || e.to_string().trim().to_owned(),
        |kind| {
            let text = e.to_string();
            // clap's text starts with "error: "; keep its first line, which names the argument.
            let first = text.lines().next().unwrap_or(kind);
            first.trim_start_matches("error: ").to_owned()
        },
    );
    let line = exit::json_error(exit::Status::Usage, None, &message, None) + "\n";
    let _ = output::write_stdout(&line);
    ExitCode::from(exit::Status::Usage.code())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::{Cli, NodeCli};

    /// The help `ferry node --help` prints, in the parser given.
    fn node_help(mut cli: clap::Command) -> String {
        cli.build();
        let node = cli.find_subcommand_mut("node").expect("a node subcommand");
        format!("{}\n{}", node.render_long_help(), node.render_usage())
    }

    #[test]
    fn the_node_parser_is_ferry_node() {
        NodeCli::command().debug_assert();
        assert_eq!(node_help(NodeCli::command()), node_help(Cli::command()));
        let only = NodeCli::try_parse_from(["ferry", "node", "--peer", "127.0.0.1:4556", "-vv"]);
        let full = Cli::try_parse_from(["ferry", "node", "--peer", "127.0.0.1:4556", "-vv"]);
        assert!(only.is_ok() && full.is_ok());
        let wrong = ["ferry", "node", "--no-such-flag"];
        let (Err(only), Err(full)) = (NodeCli::try_parse_from(wrong), Cli::try_parse_from(wrong))
        else {
            panic!("an unknown flag was taken");
        };
        assert_eq!(only.to_string(), full.to_string());
    }
}
