//! Decodes arbitrary bytes as a dtn7-rs discovery beacon (`wire::ipnd::IpndBeacon`), which any
//! host on the link sends to the IPND port; the daemon reads every one.
//!
//! Decoding must never panic. When it succeeds, the beacon encodes, the encoding decodes to the
//! same beacon, and encoding that gives the same bytes (the encoder is deterministic).

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wire::ipnd::IpndBeacon;

fuzz_target!(|data: &[u8]| {
    let Ok(beacon) = IpndBeacon::decode(&Bytes::copy_from_slice(data)) else {
        return;
    };
    let encoded = beacon.encode();
    match IpndBeacon::decode(&encoded) {
        Ok(again) => {
            assert_eq!(again, beacon);
            assert_eq!(again.encode(), encoded);
        }
        Err(e) => panic!("the encoding of {beacon:?} does not decode: {e}"),
    }
});
