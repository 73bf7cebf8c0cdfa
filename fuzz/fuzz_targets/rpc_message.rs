//! Decodes arbitrary bytes as an RPC message (`wire::rpc::Message`).
//!
//! Decoding must never panic. When it succeeds:
//!
//! - the message encodes: the decoder refuses what the encoder would (an input over
//!   `MAX_CONTROL_LEN`, a stderr tail over `MAX_STDERR_TAIL`), so not even `TooLarge` is allowed;
//! - the encoding is the input, byte for byte: the format is canonical (deterministic CBOR,
//!   definite lengths, float64 only), so anything else the decoder accepted is a second encoding;
//! - decoding the encoding gives the same message (floats compared by their bits, so a NaN equals
//!   itself and 0.0 differs from -0.0);
//! - `Bytes` fields are slices of the input, not copies.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files (RUST_LIBFUZZER_DEBUG_PATH).
#![allow(clippy::disallowed_methods)]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wire::rpc::{Call, Message, Value};

/// Equality with floats compared by their bits.
fn same(a: &Message, b: &Message) -> bool {
    match (a, b) {
        (Message::Call(x), Message::Call(y)) => {
            let same_value = |p: &Value, q: &Value| match (p, q) {
                (Value::Float(p), Value::Float(q)) => p.to_bits() == q.to_bits(),
                _ => p == q,
            };
            x.params.len() == y.params.len()
                && x.params
                    .iter()
                    .zip(&y.params)
                    .all(|(p, q)| same_value(p, q))
                && Call {
                    params: Vec::new(),
                    ..x.clone()
                } == Call {
                    params: Vec::new(),
                    ..y.clone()
                }
        }
        _ => a == b,
    }
}

/// The `Bytes` fields of a message.
fn bytes_fields(m: &Message) -> Vec<&Bytes> {
    match m {
        Message::Call(c) => c
            .params
            .iter()
            .filter_map(|p| match p {
                Value::Bytes(b) => Some(b),
                _ => None,
            })
            .collect(),
        Message::Result(r) => vec![&r.value],
        Message::Reject(r) => vec![&r.stderr_tail],
        _ => Vec::new(),
    }
}

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let Ok(message) = Message::decode(&input) else {
        return;
    };

    let within = input.as_ptr_range();
    for field in bytes_fields(&message) {
        assert!(
            field.is_empty() || within.contains(&field.as_ptr()),
            "a bytes field of a {} was copied",
            message.kind_name()
        );
    }

    let encoded = match message.encode() {
        Ok(encoded) => encoded,
        Err(e) => panic!("a decoded {} does not encode: {e}", message.kind_name()),
    };
    assert_eq!(
        encoded,
        data,
        "a {} re-encodes differently: the input was not canonical",
        message.kind_name()
    );

    let again = match Message::decode(&Bytes::from(encoded)) {
        Ok(again) => again,
        Err(e) => panic!(
            "the encoding of a {} does not decode: {e}",
            message.kind_name()
        ),
    };
    assert!(same(&again, &message), "{again:?} != {message:?}");
});
