//! ARCHITECTURE.md's code map names every source file, so it cannot silently fall behind the
//! tree. The rule (stated at the top of the code map): every `.rs` file under `crates/<c>/src`,
//! `crates/<c>/tests` and `crates/<c>/benches` is named in the section of its crate (the one
//! headed ``### `crates/<c>` ``) by its file name, a `mod.rs` by its directory name followed by
//! `/`; a crate root (`lib.rs`, `main.rs`) is the section itself. Every fuzz target
//! (`fuzz/fuzz_targets/<t>.rs`) is named somewhere in the document.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The code map's sections by crate directory name (`wire` for ``### `crates/wire` ``).
fn sections(text: &str) -> BTreeMap<String, String> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if line.starts_with("### ") || line.starts_with("## ") {
            if let Some((name, body)) = current.take() {
                sections.insert(name, body);
            }
            if let Some(rest) = line.strip_prefix("### `crates/") {
                let name: String = rest.chars().take_while(|c| *c != '`').collect();
                current = Some((name, String::new()));
            }
            continue;
        }
        if let Some((_, body)) = &mut current {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((name, body)) = current {
        sections.insert(name, body);
    }
    sections
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_source_file_is_in_the_code_map() {
    let root = repository();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let sections = sections(&text);
    let mut missing = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    assert!(crates.len() >= 10, "found only {crates:?}");
    for dir in crates {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(section) = sections.get(&name) else {
            missing.push(format!("crates/{name}: no section ### `crates/{name}`"));
            continue;
        };
        let mut files = Vec::new();
        for sub in ["src", "tests", "benches"] {
            rust_files(&dir.join(sub), &mut files);
        }
        for file in files {
            let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
            let at_root = file.parent().is_some_and(|p| p == dir.join("src"));
            if at_root && (file_name == "lib.rs" || file_name == "main.rs") {
                continue;
            }
            let named = if file_name == "mod.rs" {
                let parent = file.parent().unwrap().file_name().unwrap();
                format!("{}/", parent.to_string_lossy())
            } else {
                file_name
            };
            if !section.contains(&named) {
                let shown = file
                    .strip_prefix(&root)
                    .unwrap_or(&file)
                    .display()
                    .to_string();
                missing.push(format!("{shown}: `{named}` not in its crate's section"));
            }
        }
    }
    let mut targets = Vec::new();
    rust_files(&root.join("fuzz/fuzz_targets"), &mut targets);
    assert!(!targets.is_empty(), "no fuzz targets found");
    for target in targets {
        let stem = target.file_stem().unwrap().to_string_lossy().into_owned();
        if !text.contains(&stem) {
            missing.push(format!(
                "fuzz/fuzz_targets/{stem}.rs: `{stem}` not in ARCHITECTURE.md"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map misses {} files:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_rule_catches_a_missing_file() {
    let text = "## Code map\n### `crates/wire` (lib)\n- `cbor.rs`: CBOR\n### `crates/node`\n";
    let sections = sections(text);
    assert!(sections["wire"].contains("cbor.rs"));
    assert!(!sections["wire"].contains("eid.rs"));
    assert!(
        !sections["node"].contains("cbor.rs"),
        "a name counts only in its crate's section"
    );
}
