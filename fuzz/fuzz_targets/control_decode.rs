//! Decodes arbitrary bytes as a node control message (`wire::Control`: link-state adverts,
//! summary vectors, stream segments and acknowledgements), which any neighbour sends.
//!
//! Decoding must never panic, and `decode_in` with a list room kept from earlier messages must
//! give what `decode` gives. When it succeeds, the message encodes and the encoding decodes to
//! the same message.

#![no_main]
// An I/O harness, not the sans-IO core: libfuzzer-sys's `fuzz_target!` writes its inputs to files.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wire::{Control, ListRoom};

thread_local! {
    /// Kept across inputs, as a node keeps it across bundles.
    static ROOM: RefCell<ListRoom> = RefCell::new(ListRoom::default());
}

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let plain = Control::decode(&input);
    let roomed = ROOM.with(|room| {
        let mut room = room.borrow_mut();
        let decoded = Control::decode_in(&input, &mut room);
        let result = decoded.as_ref().map(|c| c.clone()).map_err(|_| ());
        // Given back as the node gives them back.
        match decoded {
            Ok(Control::Segments(list)) => room.segments = list,
            Ok(Control::StreamAcks(list)) => room.acks = list,
            _ => {}
        }
        result
    });
    assert_eq!(
        plain.is_ok(),
        roomed.is_ok(),
        "decode and decode_in disagree"
    );
    let Ok(message) = plain else {
        return;
    };
    assert_eq!(Ok(&message), roomed.as_ref());
    let encoded = message.encode();
    match Control::decode(&encoded) {
        Ok(again) => assert_eq!(again, message),
        Err(e) => panic!("the encoding of {message:?} does not decode: {e}"),
    }
});
