//! What the release archives and the Debian package ship besides the binary: the completions and
//! the man page `ferry` generates from its clap definitions, the example configuration
//! `packaging/node.toml` (which the node must accept), and the unit and package metadata that
//! must name the same paths. `.ci/arm.sh` and `.ci/package.sh` test the built artefacts.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::FERRY;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ferry_stdout(args: &[&str]) -> String {
    let out = Command::new(FERRY)
        .args(args)
        .output()
        .expect("running ferry");
    assert!(
        out.status.success(),
        "ferry {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The visible subcommands, from `ferry --help`.
fn subcommands() -> Vec<String> {
    let help = ferry_stdout(&["--help"]);
    let commands: Vec<String> = help
        .split("Commands:")
        .nth(1)
        .expect("a Commands: section")
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect();
    assert!(
        commands.len() > 15,
        "too few subcommands in --help: {commands:?}"
    );
    commands
}

#[test]
fn completions_name_every_subcommand_in_each_shell() {
    let commands = subcommands();
    assert!(
        !commands.iter().any(|c| c == "manpage"),
        "manpage is hidden"
    );
    for shell in ["bash", "zsh", "fish"] {
        let script = ferry_stdout(&["completions", shell]);
        for command in &commands {
            assert!(
                script.contains(command.as_str()),
                "{shell} completions lack `{command}`"
            );
        }
        // An option of a subcommand, so the scripts go below the top level.
        assert!(
            script.contains("deadline"),
            "{shell} lacks `call --deadline`"
        );
    }
    let bash = ferry_stdout(&["completions", "bash"]);
    assert!(bash.contains("complete -F _ferry"), "not a bash completion");
    let zsh = ferry_stdout(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef ferry"), "not a zsh completion");
    let fish = ferry_stdout(&["completions", "fish"]);
    assert!(fish.contains("complete -c ferry"), "not a fish completion");
    let refused = Command::new(FERRY)
        .args(["completions", "powershell-of-doom"])
        .output()
        .unwrap();
    assert!(!refused.status.success(), "an unknown shell was accepted");
}

#[test]
fn the_man_page_has_a_section_with_the_options_of_every_subcommand() {
    let page = ferry_stdout(&["manpage"]);
    assert!(page.contains(".TH ferry 1"), "no title line");
    for command in subcommands() {
        let heading = format!(".SH \"FERRY {}\"", command.to_uppercase());
        assert!(page.contains(&heading), "no section {heading}");
    }
    // Nested subcommands and options of subcommands are there too.
    assert!(page.contains(".SH \"FERRY BUNDLE CREATE\""));
    assert!(page.contains("\\-\\-config") || page.contains("-config"));
    assert!(page.contains("FERRY_API_TOKEN"));
    assert!(
        !page.contains("FERRY MANPAGE"),
        "the hidden command is not documented"
    );
}

#[test]
fn the_packaged_configuration_is_one_the_node_accepts() {
    let path = repository().join("packaging/node.toml");
    let config = daemon::Config::load(&path, "field-router").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.node_id.to_string(), "dtn://field-router/");
    assert_eq!(
        config.data_dir.as_deref(),
        Some(Path::new("/var/lib/ferry"))
    );
    assert_eq!(
        config.api_listen,
        Some("127.0.0.1:4550".parse().unwrap()),
        "the API stays on loopback"
    );
    assert!(config.discovery.enabled);
    // Every commented-out example in it is valid as well, once uncommented.
    let text = std::fs::read_to_string(&path).unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.starts_with('[') || rest.split_whitespace().nth(1) == Some("=") => {
                rest
            }
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let config = daemon::Config::from_toml(&uncommented, "field-router")
        .unwrap_or_else(|e| panic!("uncommented packaging/node.toml: {e}"));
    assert_eq!(config.node_id.to_string(), "dtn://field-router-7/");
    assert_eq!(config.peers, vec!["192.0.2.10:4556".parse().unwrap()]);
}

#[test]
fn the_unit_and_the_package_name_the_same_paths() {
    let root = repository();
    let unit = std::fs::read_to_string(root.join("packaging/ferry.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart");
    assert_eq!(exec, "/usr/bin/ferry node --config /etc/ferry/node.toml");
    let manifest = std::fs::read_to_string(root.join("crates/ferry/Cargo.toml")).unwrap();
    assert!(manifest.contains(r#"["target/release/ferry", "usr/bin/", "755"]"#));
    assert!(manifest.contains(r#""etc/ferry/node.toml""#));
    assert!(manifest.contains(r#""lib/systemd/system/ferry.service""#));
    // The state directory systemd makes is the data_dir of the packaged configuration.
    assert!(unit.contains("\nStateDirectory=ferry\n"));
    for hardening in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "User=ferry",
    ] {
        assert!(unit.contains(&format!("\n{hardening}\n")), "no {hardening}");
    }
}
