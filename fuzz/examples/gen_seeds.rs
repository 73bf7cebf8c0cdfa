//! Writes the seed corpora checked in under `fuzz/corpus/`: valid bundles and TCPCL messages of
//! every kind the codecs know, so that fuzzing starts from inputs that reach deep into them.
//!
//! Run from anywhere: `cargo run --manifest-path fuzz/Cargo.toml --example gen_seeds`. It
//! replaces the `seed-*` files (libFuzzer's own finds, named by their hash, are left alone) and
//! checks every seed decodes before writing it.

// An I/O harness, not the sans-IO core: this tool writes the seed corpora to disk.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use wire::tcpcl::{
    ContactFlags, ContactHeader, ExtensionItem, Message, MsgReject, MsgRejectReason, SegmentFlags,
    SessInit, SessTerm, SessTermFlags, SessTermReason, XferAck, XferRefuse, XferRefuseReason,
    XferSegment,
};
use wire::{
    AdminRecord, BlockFlags, Bundle, BundleFlags, CrcType, CreationTimestamp, Eid, ExtensionBlock,
    ExtensionData, FragmentInfo, HopCount, PrimaryBlock, StatusAssertion, StatusReason,
    StatusReport,
};

/// 2025-06-01T12:00:00Z in DTN time.
const T: u64 = 802_008_000_000;

fn dtn(node: &str, demux: &str) -> Eid {
    Eid::dtn(node, demux).expect("valid dtn eid")
}

/// A bundle with `crc` on the primary and payload blocks.
fn bundle(dest: Eid, source: Eid, crc: CrcType, payload: &[u8]) -> Bundle {
    let mut primary = PrimaryBlock::new(
        dest,
        source,
        CreationTimestamp {
            time: T,
            sequence: 0,
        },
        86_400_000,
    );
    primary.crc_type = crc;
    let mut b = Bundle::new(primary, Bytes::copy_from_slice(payload));
    b.payload.crc_type = crc;
    b
}

fn ext(number: u64, crc: CrcType, data: ExtensionData) -> ExtensionBlock {
    ExtensionBlock {
        crc_type: crc,
        ..ExtensionBlock::new(number, data)
    }
}

fn hop_count(limit: u64, count: u64) -> ExtensionData {
    ExtensionData::HopCount(HopCount { limit, count })
}

fn bundle_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds: Vec<(&'static str, Bundle)> = Vec::new();

    // ipn → ipn, no CRCs, three bytes of payload: the smallest useful bundle.
    seeds.push((
        "ipn-no-crc",
        bundle(Eid::ipn(2, 1), Eid::ipn(1, 0), CrcType::None, b"abc"),
    ));

    // dtn → dtn, CRC-16 on every block, with a hop count block.
    let mut b = bundle(
        dtn("node2", "incoming"),
        dtn("node1", "app"),
        CrcType::Crc16,
        b"hello over CRC-16",
    );
    b.extensions.push(ext(2, CrcType::Crc16, hop_count(30, 1)));
    seeds.push(("dtn-crc16-hop-count", b));

    // CRC-32C on every block and every extension block this crate parses, plus unknown ones.
    let mut b = bundle(
        dtn("gateway.example", "sensors/temp"),
        Eid::ipn(977_000, 1),
        CrcType::Crc32c,
        &[0x5a; 300],
    );
    b.primary.report_to = dtn("ops", "reports");
    b.primary.flags = BundleFlags(
        BundleFlags::REPORT_RECEPTION
            | BundleFlags::REPORT_DELIVERY
            | BundleFlags::STATUS_TIME_REQUESTED,
    );
    b.extensions.push(ext(
        2,
        CrcType::Crc32c,
        ExtensionData::PreviousNode(Eid::ipn(12, 0)),
    ));
    b.extensions
        .push(ext(3, CrcType::Crc32c, ExtensionData::BundleAge(1_500)));
    b.extensions
        .push(ext(4, CrcType::Crc32c, hop_count(255, 7)));
    b.extensions.push(ext(
        5,
        CrcType::Crc32c,
        ExtensionData::Unknown {
            block_type: 192,
            data: Bytes::from_static(b"\x82\x01\x02"),
        },
    ));
    seeds.push(("crc32c-all-extensions", b));

    // Mixed CRC types per block, block flags, an unknown block to discard.
    let mut b = bundle(
        Eid::ipn(u64::MAX, u64::MAX),
        dtn("a", "~group"),
        CrcType::Crc16,
        b"mixed",
    );
    b.payload.crc_type = CrcType::Crc32c;
    b.payload.flags = BlockFlags(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT);
    b.extensions.push(ExtensionBlock {
        flags: BlockFlags(
            BlockFlags::DISCARD_IF_UNPROCESSABLE | BlockFlags::REPORT_IF_UNPROCESSABLE,
        ),
        ..ext(
            9,
            CrcType::None,
            ExtensionData::Unknown {
                block_type: 200,
                data: Bytes::from_static(&[0xde, 0xad, 0xbe, 0xef]),
            },
        )
    });
    b.extensions.push(ExtensionBlock {
        flags: BlockFlags(BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE | 0x40),
        ..ext(
            17,
            CrcType::Crc16,
            ExtensionData::Unknown {
                block_type: 11,
                data: Bytes::new(),
            },
        )
    });
    seeds.push(("mixed-crcs-flags", b));

    // The first and the last fragment of a 100-byte ADU.
    let mut b = bundle(Eid::ipn(5, 2), Eid::ipn(4, 2), CrcType::Crc32c, &[1; 40]);
    b.primary.fragment = Some(FragmentInfo {
        offset: 0,
        total_adu_len: 100,
    });
    b.primary.flags = BundleFlags(BundleFlags::IS_FRAGMENT);
    b.extensions.push(ext(2, CrcType::None, hop_count(16, 2)));
    seeds.push(("fragment-first", b));
    let mut b = bundle(Eid::ipn(5, 2), Eid::ipn(4, 2), CrcType::Crc16, &[2; 40]);
    b.primary.fragment = Some(FragmentInfo {
        offset: 60,
        total_adu_len: 100,
    });
    b.primary.flags = BundleFlags(BundleFlags::IS_FRAGMENT);
    seeds.push(("fragment-last", b));

    // An administrative record: a status report about a fragment, with and without times.
    let report = AdminRecord::StatusReport(StatusReport {
        received: Some(StatusAssertion { time: Some(T - 5) }),
        forwarded: None,
        delivered: Some(StatusAssertion { time: None }),
        deleted: None,
        reason: StatusReason::NoInformation,
        source: Eid::ipn(4, 2),
        creation: CreationTimestamp {
            time: T - 60_000,
            sequence: 9,
        },
        fragment: Some((60, 40)),
    });
    let mut b = bundle(
        Eid::ipn(4, 0),
        Eid::ipn(5, 0),
        CrcType::Crc32c,
        &report.encode(),
    );
    b.primary.flags = BundleFlags(BundleFlags::ADMIN_RECORD);
    seeds.push(("admin-status-report", b));

    // A status report deleting a bundle for its hop limit, and a record of an unknown type.
    let report = AdminRecord::StatusReport(StatusReport {
        received: None,
        forwarded: None,
        delivered: None,
        deleted: Some(StatusAssertion { time: Some(T) }),
        reason: StatusReason::HopLimitExceeded,
        source: dtn("node1", "app"),
        creation: CreationTimestamp {
            time: T,
            sequence: 1,
        },
        fragment: None,
    });
    let mut b = bundle(
        dtn("node1", ""),
        dtn("node3", ""),
        CrcType::Crc16,
        &report.encode(),
    );
    b.primary.flags = BundleFlags(BundleFlags::ADMIN_RECORD);
    seeds.push(("admin-deleted-dtn", b));
    let record = AdminRecord::Unknown {
        record_type: 4,
        content: Bytes::from_static(b"\x82\x01\x63abc"),
    };
    let mut b = bundle(
        Eid::ipn(4, 0),
        Eid::ipn(5, 0),
        CrcType::None,
        &record.encode(),
    );
    b.primary.flags = BundleFlags(BundleFlags::ADMIN_RECORD);
    seeds.push(("admin-unknown-record", b));

    // An anonymous bundle (source dtn:none must not be fragmented).
    let mut b = bundle(Eid::ipn(9, 9), Eid::Null, CrcType::Crc32c, b"anonymous");
    b.primary.report_to = Eid::Null;
    b.primary.flags = BundleFlags(BundleFlags::MUST_NOT_FRAGMENT);
    seeds.push(("anonymous", b));

    // Creation time unknown (0), so a bundle age block is required; an empty payload.
    let mut b = bundle(dtn("node2", "x"), Eid::ipn(1, 1), CrcType::Crc32c, b"");
    b.primary.creation = CreationTimestamp {
        time: 0,
        sequence: 77,
    };
    b.extensions
        .push(ext(2, CrcType::Crc16, ExtensionData::BundleAge(u64::MAX)));
    seeds.push(("no-clock-empty-payload", b));

    // Large integers everywhere and a 1 KiB payload.
    let payload: Vec<u8> = (0..1024u32).map(|i| (i * 31 % 251) as u8).collect();
    let mut b = bundle(
        Eid::ipn(1 << 40, 1 << 20),
        Eid::ipn(65_536, 256),
        CrcType::Crc32c,
        &payload,
    );
    b.primary.creation = CreationTimestamp {
        time: u64::MAX,
        sequence: u64::MAX,
    };
    b.primary.lifetime_ms = u64::MAX;
    b.primary.flags = BundleFlags(BundleFlags::APP_ACK_REQUESTED | (1 << 40));
    seeds.push(("big-numbers-1k", b));

    let mut out: Vec<(&'static str, Vec<u8>)> = seeds
        .into_iter()
        .map(|(name, b)| {
            let wire = b.encode().to_bytes();
            let back = Bundle::decode(wire.clone())
                .unwrap_or_else(|e| panic!("seed {name} does not decode: {e}"));
            assert_eq!(back, b, "seed {name} does not round-trip");
            (name, wire.to_vec())
        })
        .collect();

    // A hand-assembled bundle whose payload block is an indefinite-length array (allowed by
    // RFC 9171 §4.1; re-encoding writes the definite form).
    let mut plain = bundle(Eid::ipn(2, 1), Eid::ipn(1, 0), CrcType::None, b"abc")
        .encode()
        .to_bytes()
        .to_vec();
    let at = plain
        .windows(5)
        .position(|w| w == [0x85, 0x01, 0x01, 0x00, 0x00])
        .expect("payload block header");
    plain[at] = 0x9f;
    plain.insert(plain.len() - 1, 0xff);
    Bundle::decode(Bytes::from(plain.clone())).expect("indefinite-length payload block decodes");
    out.push(("indefinite-payload-block", plain));
    out
}

/// The `tcpcl_decode` input format: a configuration byte (piece size in bits 0-3, contact header
/// first in bit 4, limits in bits 5-6: 0 default, 1 tiny, 2 largest, 3 zero), then the stream.
fn tcpcl_input(
    piece: u8,
    contact: Option<ContactHeader>,
    limits: u8,
    messages: &[Message],
) -> Vec<u8> {
    let mut stream = BytesMut::new();
    if let Some(h) = contact {
        h.encode(&mut stream);
    }
    for m in messages {
        m.encode(&mut stream).expect("encodable seed message");
    }
    let config = (piece & 0x0f) | if contact.is_some() { 0x10 } else { 0 } | ((limits & 3) << 5);
    let mut out = vec![config];
    out.extend_from_slice(&stream);
    out
}

fn tcpcl_seeds(bundles: &[(&'static str, Vec<u8>)]) -> Vec<(&'static str, Vec<u8>)> {
    let init = |node_id: &str, extensions: Vec<ExtensionItem>| {
        Message::SessInit(SessInit {
            keepalive_interval: 30,
            segment_mru: 64 * 1024,
            transfer_mru: 1 << 30,
            node_id: node_id.into(),
            extensions,
        })
    };
    let segment = |flags: SegmentFlags, id: u64, extensions: Vec<ExtensionItem>, data: &[u8]| {
        Message::XferSegment(XferSegment {
            flags,
            transfer_id: id,
            extensions,
            data: Bytes::copy_from_slice(data),
        })
    };
    let ack = |flags: SegmentFlags, id: u64, len: u64| {
        Message::XferAck(XferAck {
            flags,
            transfer_id: id,
            acknowledged_length: len,
        })
    };
    let bundle = &bundles[2].1;
    let (first, rest) = bundle.split_at(bundle.len() / 3);
    let (middle, last) = rest.split_at(rest.len() / 2);
    let critical_unknown = ExtensionItem {
        critical: true,
        item_type: 0x8001,
        value: Bytes::from_static(b"opaque"),
    };
    let no_tls = Some(ContactHeader::new(false));

    vec![
        (
            "session-open",
            tcpcl_input(
                0,
                no_tls,
                0,
                &[init("ipn:2.0", Vec::new()), Message::Keepalive],
            ),
        ),
        (
            "session-open-tls-ext-pieces-of-3",
            tcpcl_input(
                3,
                Some(ContactHeader::new(true)),
                0,
                &[init("dtn://node1/", vec![critical_unknown.clone()])],
            ),
        ),
        (
            "one-segment-bundle",
            tcpcl_input(
                0,
                None,
                0,
                &[
                    segment(
                        SegmentFlags::new(true, true),
                        1,
                        vec![ExtensionItem::transfer_length(bundles[0].1.len() as u64)],
                        &bundles[0].1,
                    ),
                    ack(SegmentFlags::new(true, true), 1, bundles[0].1.len() as u64),
                ],
            ),
        ),
        (
            "three-segment-transfer-pieces-of-7",
            tcpcl_input(
                7,
                no_tls,
                0,
                &[
                    init("ipn:977000.0", Vec::new()),
                    segment(
                        SegmentFlags::new(true, false),
                        u64::MAX,
                        vec![
                            ExtensionItem::transfer_length(bundle.len() as u64),
                            ExtensionItem {
                                critical: false,
                                item_type: 0x0002,
                                value: Bytes::new(),
                            },
                        ],
                        first,
                    ),
                    ack(SegmentFlags::new(true, false), u64::MAX, first.len() as u64),
                    segment(
                        SegmentFlags::new(false, false),
                        u64::MAX,
                        Vec::new(),
                        middle,
                    ),
                    ack(
                        SegmentFlags::new(false, false),
                        u64::MAX,
                        (first.len() + middle.len()) as u64,
                    ),
                    segment(SegmentFlags::new(false, true), u64::MAX, Vec::new(), last),
                    ack(
                        SegmentFlags::new(false, true),
                        u64::MAX,
                        bundle.len() as u64,
                    ),
                ],
            ),
        ),
        (
            "refusals-and-rejects",
            tcpcl_input(
                0,
                None,
                0,
                &[
                    Message::XferRefuse(XferRefuse {
                        reason: XferRefuseReason::Completed,
                        transfer_id: 7,
                    }),
                    Message::XferRefuse(XferRefuse {
                        reason: XferRefuseReason::Other(0xf0),
                        transfer_id: 8,
                    }),
                    Message::MsgReject(MsgReject {
                        reason: MsgRejectReason::MessageTypeUnknown,
                        rejected_header: 0x0a,
                    }),
                    Message::MsgReject(MsgReject {
                        reason: MsgRejectReason::Other(0),
                        rejected_header: 0x01,
                    }),
                ],
            ),
        ),
        (
            "session-term-and-reply",
            tcpcl_input(
                1,
                no_tls,
                0,
                &[
                    init("ipn:1.0", Vec::new()),
                    Message::SessTerm(SessTerm {
                        flags: SessTermFlags(0),
                        reason: SessTermReason::IdleTimeout,
                    }),
                    Message::SessTerm(SessTerm {
                        flags: SessTermFlags(SessTermFlags::REPLY),
                        reason: SessTermReason::VersionMismatch,
                    }),
                ],
            ),
        ),
        (
            "reserved-bits",
            tcpcl_input(
                5,
                Some(ContactHeader {
                    flags: ContactFlags(0xfe),
                }),
                0,
                &[
                    segment(SegmentFlags(0xfc), 3, Vec::new(), b"reserved flag bits"),
                    Message::SessTerm(SessTerm {
                        flags: SessTermFlags(0x80),
                        reason: SessTermReason::Other(200),
                    }),
                ],
            ),
        ),
        (
            "tiny-limits-too-large",
            tcpcl_input(
                2,
                None,
                1,
                &[
                    Message::Keepalive,
                    segment(SegmentFlags::new(true, true), 9, Vec::new(), &[0x55; 64]),
                ],
            ),
        ),
        (
            "largest-limits",
            tcpcl_input(
                0,
                no_tls,
                2,
                &[
                    init("", Vec::new()),
                    segment(SegmentFlags::new(true, false), 0, Vec::new(), b""),
                ],
            ),
        ),
        (
            "zero-limits-keepalives",
            tcpcl_input(
                0,
                None,
                3,
                &[Message::Keepalive, Message::Keepalive, Message::Keepalive],
            ),
        ),
        (
            "single-sess-init-no-framing",
            // Exactly one message, so `Message::decode` of the raw stream sees it too.
            tcpcl_input(
                0,
                None,
                0,
                &[init("dtn://gateway.example/", vec![critical_unknown])],
            ),
        ),
        ("contact-header-only", tcpcl_input(0, no_tls, 0, &[])),
        ("stream-ends-mid-frame", {
            let mut v = tcpcl_input(4, no_tls, 0, &[init("ipn:3.0", Vec::new())]);
            v.truncate(v.len() - 5);
            v
        }),
    ]
}

fn write_seeds(dir: &Path, seeds: &[(&'static str, Vec<u8>)]) {
    fs::create_dir_all(dir).expect("create corpus directory");
    for entry in fs::read_dir(dir).expect("read corpus directory") {
        let path = entry.expect("directory entry").path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("seed-"))
        {
            fs::remove_file(&path).expect("remove old seed");
        }
    }
    for (i, (name, bytes)) in seeds.iter().enumerate() {
        let path = dir.join(format!("seed-{i:02}-{name}"));
        fs::write(&path, bytes).expect("write seed");
        println!("{} ({} bytes)", path.display(), bytes.len());
    }
}

fn main() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let bundles = bundle_seeds();
    write_seeds(&corpus.join("bundle_decode"), &bundles);
    write_seeds(&corpus.join("tcpcl_decode"), &tcpcl_seeds(&bundles));
}
