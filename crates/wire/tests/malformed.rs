//! Hostile and broken bundles: each kind of damage gets its own precise error, never a panic, and
//! no length is trusted before it is checked against the input.

use bytes::Bytes;
use wire::DtnTime;
use wire::{Bundle, CrcType, CreationTimestamp, DecodeErrorKind as K, Eid, PrimaryBlock};

/// The primary block every case starts from: ipn:1.0 → ipn:2.1, created at DTN time 1, living
/// one second, with the default CRC-32C.
fn primary() -> PrimaryBlock {
    PrimaryBlock::new(
        Eid::ipn(2, 1),
        Eid::ipn(1, 0),
        CreationTimestamp {
            time: DtnTime::from_millis(1),
            sequence: 0,
        },
        1000,
    )
}

/// A minimal bundle with no CRCs, so that hand edits need no CRC fix-ups:
/// `9f | 88 07 00 00 [2,[2,1]] [2,[1,0]] [2,[1,0]] [1,0] 1000 | 85 01 01 00 00 43 "abc" | ff`.
fn plain() -> Vec<u8> {
    let mut primary = primary();
    primary.crc_type = CrcType::None;
    let mut b = Bundle::new(primary, Bytes::from_static(b"abc"));
    b.payload.crc_type = CrcType::None;
    b.encode().to_bytes().to_vec()
}

/// Offset of the payload block's header (0x85) in `plain()`.
const PAYLOAD_BLOCK_AT: usize = 26;

fn decode(bytes: Vec<u8>) -> Result<Bundle, wire::DecodeError> {
    Bundle::decode(Bytes::from(bytes))
}

fn kind(bytes: Vec<u8>) -> K {
    decode(bytes).expect_err("must not decode").kind
}

#[test]
fn the_fixture_is_what_the_comments_say() {
    let b = plain();
    assert_eq!(b[PAYLOAD_BLOCK_AT], 0x85);
    assert_eq!(&b[PAYLOAD_BLOCK_AT + 5..PAYLOAD_BLOCK_AT + 9], b"\x43abc");
    assert!(decode(b).is_ok());
}

#[test]
fn huge_payload_length_is_refused_without_allocating() {
    // The payload byte string claims 2^64 - 1 bytes.
    let mut b = plain();
    b.truncate(PAYLOAD_BLOCK_AT + 5);
    b.extend_from_slice(&[
        0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, b'a', 0xff,
    ]);
    let err = decode(b).unwrap_err();
    assert_eq!(err.kind, K::LengthExceedsInput { declared: u64::MAX });
    assert_eq!(err.offset, PAYLOAD_BLOCK_AT + 5);
}

#[test]
fn huge_array_count_is_refused() {
    // The primary block claims 2^32 items; nothing may be reserved for them.
    let mut b = plain();
    b.splice(1..2, [0x9a, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(
        kind(b),
        K::LengthExceedsInput {
            declared: 0xffff_ffff
        }
    );
}

#[test]
fn bad_cbor_is_named() {
    // Reserved additional information (0x1c) where the version should be.
    let mut b = plain();
    b[2] = 0x1c;
    assert!(matches!(kind(b), K::InvalidCbor(_)));

    // The version as a text string.
    let mut b = plain();
    b[2] = 0x61;
    assert!(matches!(
        kind(b),
        K::UnexpectedType {
            expected: "unsigned integer"
        }
    ));

    // The version 7 in two bytes (not the shortest form).
    let mut b = plain();
    b.splice(2..3, [0x18, 0x07]);
    assert_eq!(kind(b), K::NotDeterministic);

    // An indefinite-length byte string as the payload.
    let mut b = plain();
    b.splice(
        PAYLOAD_BLOCK_AT + 5..PAYLOAD_BLOCK_AT + 9,
        [0x5f, 0x43, b'a', b'b', b'c', 0xff],
    );
    assert!(matches!(kind(b), K::InvalidCbor(_)));

    // A stray break in place of the primary block.
    let mut b = plain();
    b[1] = 0xff;
    assert!(matches!(
        kind(b),
        K::InvalidBundle(_) | K::UnexpectedType { .. } | K::BadArrayLength { .. }
    ));
}

#[test]
fn wrong_crcs_are_mismatches_with_both_values() {
    let mut primary = primary();
    for crc in [CrcType::Crc16, CrcType::Crc32c] {
        primary.crc_type = crc;
        let mut b = Bundle::new(primary.clone(), Bytes::from_static(b"abc"))
            .encode()
            .to_bytes()
            .to_vec();
        // The lifetime (0x19 0x03 0xe8) is inside the primary block's CRC.
        let at = b.windows(3).position(|w| w == [0x19, 0x03, 0xe8]).unwrap();
        b[at + 2] = 0xe9;
        match kind(b) {
            K::CrcMismatch {
                block: 0,
                carried,
                computed,
            } => assert_ne!(carried, computed),
            other => panic!("{crc:?}: expected a primary block CRC mismatch, got {other:?}"),
        }
    }
}

#[test]
fn crc_of_the_wrong_width_is_refused() {
    let mut primary = primary();
    primary.crc_type = CrcType::None;
    let mut b = Bundle::new(primary, Bytes::from_static(b"abc"));
    b.payload.crc_type = CrcType::Crc16;
    let mut bytes = b.encode().to_bytes().to_vec();
    // Payload block ends: 0x42 crc crc 0xff. Make the CRC a 3-byte string.
    let n = bytes.len();
    assert_eq!(bytes[n - 4], 0x42);
    bytes.splice(n - 4..n - 1, [0x43, 0, 0, 0]);
    assert_eq!(kind(bytes), K::BadCrcLength { block: 1 });
}

#[test]
fn unknown_crc_type_and_version_are_named() {
    let mut b = plain();
    b[4] = 0x03;
    assert_eq!(kind(b), K::UnknownCrcType(3));
    let mut b = plain();
    b[2] = 0x06;
    assert_eq!(kind(b), K::UnsupportedVersion(6));
}

#[test]
fn structure_rules() {
    // No payload block: the primary block then the break.
    let mut b = plain();
    b.drain(PAYLOAD_BLOCK_AT..b.len() - 1);
    assert_eq!(kind(b), K::InvalidBundle("no payload block"));

    // A block after the payload block.
    let mut b = plain();
    let payload_block = b[PAYLOAD_BLOCK_AT..b.len() - 1].to_vec();
    b.splice(b.len() - 1..b.len() - 1, payload_block);
    assert_eq!(
        kind(b),
        K::InvalidBundle("a block follows the payload block")
    );

    // Payload block numbered 2.
    let mut b = plain();
    b[PAYLOAD_BLOCK_AT + 2] = 0x02;
    assert!(matches!(kind(b), K::InvalidBlock { block: 2, .. }));

    // The primary block with 9 items but CRC type 0 (a CRC field that should not be there).
    let mut b = plain();
    b[1] = 0x89;
    b.splice(PAYLOAD_BLOCK_AT..PAYLOAD_BLOCK_AT, [0x40]);
    assert_eq!(
        kind(b),
        K::BadArrayLength {
            what: "primary block",
            len: 9
        }
    );

    // A canonical block with 7 items.
    let mut b = plain();
    b[PAYLOAD_BLOCK_AT] = 0x87;
    assert_eq!(
        kind(b),
        K::BadArrayLength {
            what: "canonical block",
            len: 7
        }
    );

    // Missing final break.
    let mut b = plain();
    b.pop();
    assert_eq!(kind(b), K::Truncated);
}

#[test]
fn indefinite_length_blocks_are_accepted_and_crc_covers_the_break() {
    // RFC 9171 §4.1 allows indefinite-length items; a block CRC then covers the closing break.
    // Build the payload block by hand: [_ 1, 1, 0, 2, h'616263', h'crc32c' ] with the CRC computed
    // over the block with the CRC value zeroed.
    let mut block = vec![
        0x9f, 0x01, 0x01, 0x00, 0x02, 0x43, b'a', b'b', b'c', 0x44, 0, 0, 0, 0, 0xff,
    ];
    let crc = crc32c::crc32c(&block);
    block[10..14].copy_from_slice(&crc.to_be_bytes());
    let mut b = plain();
    b.splice(PAYLOAD_BLOCK_AT..b.len() - 1, block);
    let bundle = decode(b.clone()).expect("indefinite-length block with a correct CRC");
    assert_eq!(&bundle.payload.data[..], b"abc");
    assert_eq!(bundle.payload.crc_type, CrcType::Crc32c);

    // Re-encoding writes the canonical (definite-length) form, which decodes to the same bundle.
    assert_eq!(decode(bundle.encode().to_bytes().to_vec()).unwrap(), bundle);

    // The same block with one payload byte changed fails its CRC.
    let at = b.windows(3).position(|w| w == b"abc").unwrap();
    b[at] = b'A';
    assert!(matches!(kind(b), K::CrcMismatch { block: 1, .. }));
}

#[test]
fn reserved_flag_bits_are_kept_and_ignored() {
    // Bundle flags with reserved bits 3, 4 and 7 set, and unassigned bit 40.
    let mut primary = primary();
    primary.flags = wire::BundleFlags(0x98 | (1 << 40));
    let b = Bundle::new(primary, Bytes::from_static(b"abc"));
    let back = decode(b.encode().to_bytes().to_vec()).unwrap();
    assert_eq!(back.primary.flags.0, 0x98 | (1 << 40));
    assert!(!back.primary.flags.any_report_requested());
}

#[test]
fn known_extension_blocks_must_hold_exactly_their_content() {
    use wire::{ExtensionBlock, ExtensionData};
    // Raw block data written under the known type codes, as a careless or hostile peer would.
    let cases: [(u64, &'static [u8]); 5] = [
        (10, &[0x82, 0x05, 0x00, 0x00]), // hop count [5, 0] and a stray byte
        (10, &[0x81, 0x05]),             // hop count with only a limit
        (7, &[0x61, b'1']),              // bundle age as text
        (7, &[]),                        // bundle age missing
        (6, &[0x82, 0x02, 0x82, 0x01, 0x00, 0x00]), // previous node ipn:1.0 and a stray byte
    ];
    for (block_type, data) in cases {
        let mut b = Bundle::new(primary(), Bytes::from_static(b"abc"));
        b.extensions.push(ExtensionBlock::new(
            2,
            ExtensionData::Unknown {
                block_type,
                data: Bytes::from_static(data),
            },
        ));
        match kind(b.encode().to_bytes().to_vec()) {
            K::InvalidBlock { block: 2, reason } => assert!(reason.contains("exactly"), "{reason}"),
            other => {
                panic!("type {block_type} data {data:02x?}: expected InvalidBlock, got {other:?}")
            }
        }
    }
}
