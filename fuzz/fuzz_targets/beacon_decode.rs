//! Decodes arbitrary bytes as a discovery beacon (`wire::Beacon`), the one format a node reads
//! from any host in radio range without a session.
//!
//! Decoding must never panic. When it succeeds, the beacon encodes, and the encoding decodes to
//! the same beacon.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wire::Beacon;

fuzz_target!(|data: &[u8]| {
    let Ok(beacon) = Beacon::decode(&Bytes::copy_from_slice(data)) else {
        return;
    };
    let encoded = beacon.encode();
    match Beacon::decode(&encoded) {
        Ok(again) => assert_eq!(again, beacon),
        Err(e) => panic!("the encoding of {beacon:?} does not decode: {e}"),
    }
});
