//! Parses arbitrary text as a requirement (`rpc::Requirement`): a caller writes one, and every
//! server that hears the call parses it.
//!
//! Parsing must never panic. What parses has a canonical form (its `Display`) that parses to the
//! same canonical form, and both give the same verdict (and name the same failing clause) against facts drawn from the input.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use libfuzzer_sys::fuzz_target;
use rpc::require::{Facts, Requirement};

fuzz_target!(|data: &[u8]| {
    // The last 8 bytes, if any, are facts; the rest is the text.
    let (text, facts_bytes) = data.split_at(data.len().saturating_sub(8));
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(requirement) = Requirement::parse(text) else {
        return;
    };
    let canonical = requirement.to_string();
    let again = match Requirement::parse(&canonical) {
        Ok(again) => again,
        Err(e) => panic!("{text:?} parsed, its canonical form {canonical:?} does not: {e}"),
    };
    assert_eq!(again.to_string(), canonical, "the canonical form moved");
    let mut facts = Facts::new();
    let byte = |i: usize| f64::from(facts_bytes.get(i).copied().unwrap_or(0));
    facts
        .set("battery", byte(0) % 101.0)
        .set("free_disk", byte(1) * 1e9)
        .set("free_memory", byte(2) * 1e7)
        .set("load", byte(3) / 16.0)
        .set("running", byte(4) % 8.0)
        .set("hour", byte(5) % 24.0)
        .set_flag("moving", byte(6) as u8 & 1 == 1)
        .set_flag("charging", byte(7) as u8 & 1 == 1);
    facts.add_tag("gps");
    assert_eq!(
        requirement.check(&facts),
        again.check(&facts),
        "{text:?} and its canonical form {canonical:?} disagree"
    );
});
