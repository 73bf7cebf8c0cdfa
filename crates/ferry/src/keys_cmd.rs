//! `ferry keys`: the keys the running node knows for other nodes, and what the operator does when
//! a node's messages come signed by another key: a reinstalled node (accept its new key) or an
//! impostor (leave it; its messages are dropped).
//!
//! ```text
//! ferry keys                      list (with a key a node presented that is not its known one)
//! ferry keys accept NODE [KEY]    accept KEY, or the key NODE presented, as its key
//! ferry keys forget NODE          the next signed message naming NODE teaches its key again
//! ```

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::api::dtn_now_ms;
use crate::client::{ApiArgs, Client, encode_component};
use crate::output::{Align, Table, fmt_secs, print_json_pretty, write_stdout};
use daemon::control::{AcceptKey, KeyInfo};

/// `ferry keys`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct KeysArgs {
    #[command(subcommand)]
    action: Option<KeysAction>,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Subcommand, Debug)]
enum KeysAction {
    /// List the keys the node knows (the default).
    List(ApiArgs),
    /// Accept a key for a node, a reinstalled node's new one: KEY (64 hex digits), or else the
    /// key the node presented (`ferry keys` shows it). Only when you know the node was
    /// reinstalled: an impostor presents a key too.
    Accept {
        /// The node: `dtn://bravo/` or `bravo`.
        node: String,
        /// The key; default: the one the node presented.
        key: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Forget the key of a node: the next signed message naming it teaches its key again.
    Forget {
        /// The node: `dtn://bravo/` or `bravo`.
        node: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

pub(crate) fn run(args: KeysArgs) -> Result<()> {
    match args.action {
        None => list(&args.api),
        Some(KeysAction::List(api)) => list(&api),
        Some(KeysAction::Accept { node, key, api }) => accept(&api, &node, key),
        Some(KeysAction::Forget { node, api }) => forget(&api, &node),
    }
}

fn key_path(node: &str) -> String {
    format!("/v1/keys/{}", encode_component(node))
}

fn list(api: &ApiArgs) -> Result<()> {
    let client = Client::new(&api.api);
    if api.json {
        return print_json_pretty(&client.get_value("/v1/keys")?);
    }
    let keys: Vec<KeyInfo> = client.get_json("/v1/keys")?;
    Ok(write_stdout(&keys_table(&keys, dtn_now_ms()))?)
}

fn accept(api: &ApiArgs, node: &str, key: Option<String>) -> Result<()> {
    let client = Client::new(&api.api);
    let answer = client.put_json(&key_path(node), &AcceptKey { key })?;
    if api.json {
        return print_json_pretty(&answer);
    }
    let known: KeyInfo = serde_json::from_value(answer)?;
    Ok(write_stdout(&format!(
        "{} now has the key {}: its messages signed by another key are dropped\n",
        known.node, known.key
    ))?)
}

fn forget(api: &ApiArgs, node: &str) -> Result<()> {
    let client = Client::new(&api.api);
    client.delete(&key_path(node))?;
    if api.json {
        return print_json_pretty(&serde_json::json!({ "forgotten": node }));
    }
    Ok(write_stdout(&format!(
        "forgot the key of {node}: the next signed message naming it teaches its key again\n"
    ))?)
}

/// The keys as a table, then a line for each node that presented another key, with what to do.
fn keys_table(keys: &[KeyInfo], now_ms: u64) -> String {
    if keys.is_empty() {
        return "no keys known yet: a node's key is learnt from its first signed message\n".into();
    }
    let ago = |ms: u64| format!("{} ago", fmt_secs(now_ms.saturating_sub(ms) / 1000));
    let mut t = Table::new(&[
        ("NODE", Align::Left),
        ("KEY", Align::Left),
        ("FROM", Align::Left),
        ("SINCE", Align::Left),
    ]);
    for k in keys {
        t.row(vec![
            k.node.clone(),
            k.key.clone(),
            k.source.clone(),
            k.since_ms.map(ago).unwrap_or_default(),
        ]);
    }
    let mut out = t.render();
    for k in keys {
        if let Some(p) = &k.presented {
            out.push_str(&format!(
                "\n{} presented key {}, known {} ({} dropped, the last {}).\n\
                 If {} was reinstalled: ferry keys accept {}\n",
                k.node,
                p.key,
                k.key,
                plural(p.messages, "message"),
                ago(p.last_seen_ms),
                k.node,
                k.node
            ));
        }
    }
    out
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daemon::control::PresentedKeyInfo;

    #[test]
    fn a_presented_key_is_shown_beside_the_known_one_with_the_command_that_accepts_it() {
        let (k1, k2) = ("a".repeat(64), "b".repeat(64));
        let keys = [
            KeyInfo {
                node: "dtn://bravo/".into(),
                key: k1.clone(),
                source: "hello".into(),
                since_ms: Some(1_000),
                presented: Some(PresentedKeyInfo {
                    key: k2.clone(),
                    first_seen_ms: 50_000,
                    last_seen_ms: 55_000,
                    messages: 3,
                }),
            },
            KeyInfo {
                node: "dtn://charlie/".into(),
                key: k2.clone(),
                source: "accepted".into(),
                since_ms: None,
                presented: None,
            },
        ];
        let text = keys_table(&keys, 61_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!("NODE            KEY{}  FROM      SINCE", " ".repeat(61))
        );
        assert_eq!(
            lines[1],
            format!("dtn://bravo/    {k1}  hello     1m 0s ago")
        );
        assert_eq!(lines[2], format!("dtn://charlie/  {k2}  accepted"));
        assert_eq!(
            lines[4],
            format!(
                "dtn://bravo/ presented key {k2}, known {k1} (3 messages dropped, the last 6s ago)."
            )
        );
        assert_eq!(
            lines[5],
            "If dtn://bravo/ was reinstalled: ferry keys accept dtn://bravo/"
        );
        assert!(keys_table(&[], 0).starts_with("no keys known yet"));
    }
}
