//! Decodes arbitrary bytes as a BPv7 bundle.
//!
//! Decoding must never panic. When it succeeds: encoding the bundle and decoding that must give
//! the same bundle, re-encoding must be byte-stable, and the encoded parts must agree with each
//! other. When the bundle carries an administrative record, the record must round-trip too.
//!
//! Random mutations almost always break a block's CRC, which would stop the fuzzer at the first
//! CRC check. So when decoding fails with a CRC mismatch, the carried CRC is replaced by the one
//! the decoder computed (found after the block's start as the CRC byte string) and the input is
//! decoded again, block after block: the checks then run on bundles with any CRC types too.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files (RUST_LIBFUZZER_DEBUG_PATH).
#![allow(clippy::disallowed_methods)]

use bytes::{Buf, Bytes};
use libfuzzer_sys::fuzz_target;
use wire::{AdminRecord, Bundle, DecodeErrorKind};

/// Decodes `data`, fixing up to 16 carried CRCs that do not match what the decoder computes.
fn decode_repairing_crcs(data: &[u8]) -> Option<Bundle> {
    let mut buf = data.to_vec();
    for _ in 0..16 {
        let err = match Bundle::decode(Bytes::from(buf.clone())) {
            Ok(b) => return Some(b),
            Err(e) => e,
        };
        let DecodeErrorKind::CrcMismatch {
            carried, computed, ..
        } = err.kind
        else {
            return None;
        };
        // The CRC field is a byte string of 4 (CRC-32C) or 2 (CRC-16) bytes after the block's
        // start. Try each place it could be until the same block no longer mismatches.
        let mut fixed = false;
        let patterns = [
            (
                0x44,
                carried.to_be_bytes().to_vec(),
                computed.to_be_bytes().to_vec(),
            ),
            (
                0x42,
                (carried as u16).to_be_bytes().to_vec(),
                (computed as u16).to_be_bytes().to_vec(),
            ),
        ];
        'search: for (head, old, new) in &patterns {
            let n = old.len();
            for at in err.offset..buf.len().saturating_sub(n) {
                if buf[at] == *head && buf[at + 1..at + 1 + n] == old[..] {
                    let mut attempt = buf.clone();
                    attempt[at + 1..at + 1 + n].copy_from_slice(new);
                    let still = matches!(
                        Bundle::decode(Bytes::from(attempt.clone())),
                        Err(e) if e.offset == err.offset
                            && matches!(e.kind, DecodeErrorKind::CrcMismatch { .. })
                    );
                    if !still {
                        buf = attempt;
                        fixed = true;
                        break 'search;
                    }
                }
            }
        }
        if !fixed {
            return None;
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    // The reactive-fragmentation reader sees the same bytes as a cut transfer: it must not panic,
    // and whatever it keeps is a valid bundle.
    if let Ok(Some(kept)) = wire::decode_cut_transfer(Bytes::copy_from_slice(data)) {
        let again = Bundle::decode(kept.encode().to_bytes()).expect("a kept fragment re-decodes");
        assert_eq!(again, kept);
    }

    let first = match Bundle::decode(Bytes::copy_from_slice(data)) {
        Ok(b) => b,
        Err(e) if matches!(e.kind, DecodeErrorKind::CrcMismatch { .. }) => {
            match decode_repairing_crcs(data) {
                Some(b) => b,
                None => return,
            }
        }
        Err(_) => return,
    };

    let encoded = first.encode();
    let wire = encoded.to_bytes();
    assert_eq!(wire.len(), encoded.len(), "to_bytes and len disagree");
    assert_eq!(
        encoded.parts()[1],
        &first.payload.data,
        "the payload part is not the payload"
    );
    // Consuming the encoding as a `Buf` gives the same bytes as `to_bytes`.
    let mut as_buf = encoded.clone();
    let mut collected = Vec::with_capacity(wire.len());
    while as_buf.has_remaining() {
        let chunk = as_buf.chunk();
        assert!(!chunk.is_empty(), "empty chunk with bytes remaining");
        collected.extend_from_slice(chunk);
        let n = chunk.len();
        as_buf.advance(n);
    }
    assert_eq!(collected, wire, "the Buf view and to_bytes disagree");

    let second = match Bundle::decode(wire.clone()) {
        Ok(b) => b,
        Err(e) => panic!("re-encoded bundle does not decode: {e}\nbundle: {first:?}"),
    };
    assert_eq!(second, first, "encode → decode changed the bundle");
    assert_eq!(
        second.encode().to_bytes(),
        wire,
        "re-encoding is not byte-stable"
    );

    if first.primary.is_admin_record()
        && let Ok(record) = AdminRecord::decode(&first.payload.data)
    {
        let bytes = record.encode();
        let back = match AdminRecord::decode(&bytes) {
            Ok(r) => r,
            Err(e) => panic!("re-encoded admin record does not decode: {e}\nrecord: {record:?}"),
        };
        assert_eq!(back, record, "encode → decode changed the admin record");
        assert_eq!(
            back.encode(),
            bytes,
            "admin record re-encoding is not byte-stable"
        );
    }
});
