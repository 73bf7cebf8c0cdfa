//! Opens arbitrary bytes as sealed RPC envelopes (`seal`): signed, encrypted and pairwise, as
//! any node on any path may send them.
//!
//! Opening must never panic, and a forgery must never open: the input is also taken as a body
//! that a known sender seals, and one byte of the envelope (chosen by the input) is changed;
//! the changed envelope must not open, not as a signed envelope, not pairwise.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use libfuzzer_sys::fuzz_target;
use seal::Identity;

fuzz_target!(|data: &[u8]| {
    let alice = Identity::from_secret([1; 32]);
    let bob = Identity::from_secret([2; 32]);
    let pair = bob.pair_key(&alice.public()).expect("a pair key");
    let back = alice.pair_key(&bob.public()).expect("a pair key");

    // Whatever arrives: no panic, and what opens names a sender the envelope verifies for.
    if let Ok(opened) = alice.open(data)
        && let Ok(signed) = seal::verify(data)
    {
        assert_eq!(signed.sender, opened.sender);
    }
    let _ = back.open(data);

    // A changed byte never opens.
    let Some((&at, body)) = data.split_first() else {
        return;
    };
    let flip = data.last().copied().unwrap_or(1).max(1);
    for sealed in [
        bob.seal(body, Some(&alice.public()), [7; 32])
            .expect("seals"),
        bob.seal(body, None, [7; 32]).expect("seals"),
        pair.seal(body, [7; 32]),
    ] {
        assert!(alice.open(&sealed).is_ok() || back.open(&sealed).is_ok());
        let mut forged = sealed.clone();
        let i = usize::from(at) * 7 % forged.len();
        forged[i] ^= flip;
        assert!(alice.open(&forged).is_err(), "a changed byte {i} opened");
        assert!(
            back.open(&forged).is_err(),
            "a changed byte {i} opened pairwise"
        );
    }
});
