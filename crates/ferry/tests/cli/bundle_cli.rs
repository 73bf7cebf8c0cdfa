//! The bundle tools end to end: `ferry bundle create` writes a file that `ferry bundle inspect`
//! (and the wire decoder) read back; damaged files get a clear error and a failing exit status.

// Tests of the I/O shell run the binary and read and write files.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .output()
        .expect("run ferry")
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-bundle-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn create_then_inspect() {
    let dir = temp_dir("create");
    let file = dir.join("hello.bundle");
    let out = ferry(&[
        "bundle",
        "create",
        "--to",
        "dtn://drone/camera",
        "--from",
        "ipn:7.0",
        "--payload",
        "take a picture",
        "--lifetime",
        "2h",
        "--hop-limit",
        "16",
        "--crc",
        "crc16",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bytes = bytes::Bytes::from(std::fs::read(&file).unwrap());
    let bundle = wire::Bundle::decode(bytes).unwrap();
    assert_eq!(bundle.primary.destination.to_string(), "dtn://drone/camera");
    assert_eq!(bundle.primary.lifetime_ms, 2 * 3600 * 1000);
    assert_eq!(
        bundle.hop_count(),
        Some(wire::HopCount {
            limit: 16,
            count: 0
        })
    );
    assert_eq!(bundle.primary.crc_type, wire::CrcType::Crc16);
    assert_eq!(&bundle.payload.data[..], b"take a picture");

    let out = ferry(&["bundle", "inspect", file.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("destination dtn://drone/camera"), "{text}");
    assert!(text.contains("hop count 0 of limit 16"), "{text}");
    assert!(text.contains("\"take a picture\""), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn damaged_bundle_is_reported() {
    let dir = temp_dir("damaged");
    let file = dir.join("b.bundle");
    let created = ferry(&[
        "bundle",
        "create",
        "--to",
        "ipn:2.1",
        "--from",
        "ipn:1.0",
        "--payload",
        "abc",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(created.status.success());
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 8] ^= 0x40; // inside the payload
    std::fs::write(&file, &bytes).unwrap();
    let out = ferry(&["bundle", "inspect", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("is not a valid BPv7 bundle") && err.contains("CRC mismatch in block 1"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_arguments_are_explained() {
    let out = ferry(&[
        "bundle",
        "create",
        "--to",
        "mailto:x",
        "--from",
        "ipn:1.0",
        "--payload",
        "x",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scheme"));
    let out = ferry(&["bundle", "create", "--to", "ipn:1.1", "--from", "ipn:1.0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--payload"));
    assert!(!Path::new("missing.bundle").exists());
    let out = ferry(&["bundle", "inspect", "/nonexistent/ferry.bundle"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/ferry.bundle"));
}

/// `ferry ARGS` with stdout on a terminal: util-linux's `script` gives it a pseudo-terminal.
fn ferry_on_a_terminal(args: &[&str]) -> Output {
    let mut line = env!("CARGO_BIN_EXE_ferry").to_owned();
    for a in args {
        line.push_str(" '");
        line.push_str(a);
        line.push('\'');
    }
    Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("run script (util-linux)")
}

#[test]
fn a_bundle_is_not_written_to_a_terminal() {
    let args = [
        "bundle",
        "create",
        "--to",
        "dtn://b/x",
        "--from",
        "dtn://a/",
        "--payload",
        "hi",
    ];
    let out = ferry_on_a_terminal(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("stdout is a terminal: give -o FILE"),
        "{text}"
    );
    // The control: the same command with a file writes the bundle, terminal or not.
    let dir = temp_dir("terminal");
    let file = dir.join("b.bundle");
    let mut with_file = args.to_vec();
    with_file.extend(["-o", file.to_str().unwrap()]);
    let out = ferry_on_a_terminal(&with_file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(std::fs::metadata(&file).unwrap().len() > 0);
}
