//! Parses arbitrary text as a node's configuration file (`daemon::Config::from_toml`), which
//! an operator writes by hand, often under pressure in the field.
//!
//! Parsing must never panic: every mistake is a `ConfigError` naming the key at fault (checked
//! here as: the message is not empty). The procedures' executables are not looked for, since
//! their paths are made up.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = daemon::Config::from_toml(text, "fuzz-host") {
        assert!(!e.to_string().is_empty());
    }
});
