//! Differential tests of Ferry's BPv7 codec against two independent implementations, the `bp7`
//! crate and `hardy-bpv7`, used purely as test oracles.
//!
//! Every case starts from one Ferry [`Bundle`] value (the "spec") and checks both directions:
//!
//! - Ferry encodes, the oracle decodes: the oracle must accept the bytes (and find its CRCs valid
//!   and, for hardy, the CBOR canonical), and every field it reports must equal the spec's:
//!   destination, source and report-to (as endpoint id text), creation time and sequence number,
//!   lifetime, bundle flags, fragment offset and total ADU length, each block's number, type,
//!   flags and CRC type, the previous node, bundle age and hop count blocks' contents, unknown
//!   blocks' bytes, and the payload bytes.
//! - The oracle encodes the same bundle with its own builder, Ferry decodes: the result must equal
//!   the spec field for field (as a whole `Bundle` value), and Ferry must re-encode it to exactly
//!   the oracle's bytes (both sides claim RFC 9171's deterministic CBOR).
//!
//! Fixed cases cover 1 KiB and 1 MiB payloads, every CRC type, and `dtn:` and `ipn:` endpoint ids;
//! further tests cover fragments, status reports, extreme `ipn` numbers, unrecognized flags and
//! large hop counts; a property test throws random valid bundles at both oracles, in both
//! directions.
//!
//! Where an oracle is stricter or looser than RFC 9171, the generators stay inside what both
//! oracles handle faithfully, and a comment next to the restriction says why:
//!
//! - bp7 keeps block flags and the hop count's limit and count in `u8`s (the RFC allows any
//!   unsigned integer for the flags and the count), refuses reserved flag bits (the RFC says
//!   unrecognized flags MUST be ignored), and reads `ipn:0.n` as `ipn:0.0`. Those cases are
//!   checked against hardy-bpv7 alone.
//! - hardy-bpv7 follows RFC 9758: `ipn` service numbers above 2^32 - 1 are refused, node numbers
//!   above 2^32 - 1 come back as an (allocator, node) pair, and `ipn:0.n` becomes `dtn:none`.
//! - hardy-bpv7 percent-decodes a `dtn` node name and percent-encodes its sub-delimiters
//!   (`!$&'()*+,;=`) when it writes the name again. RFC 3986 §2.2 says a URI whose reserved
//!   character is replaced by its percent-encoding is *not* equivalent, so hardy changes such an
//!   endpoint id when it re-encodes it. Such names are compared percent-decoded, and hardy does
//!   not build bundles carrying them in the property test.
//! - Neither oracle decodes an administrative record without a CBOR crate this crate does not
//!   depend on (`serde_cbor` for bp7, `hardy-cbor` for hardy); status reports are therefore checked
//!   as bp7 → Ferry decoding plus byte-for-byte agreement of the two encoders, and as whole
//!   admin-record bundles from Ferry to both oracles and from bp7's report generator to Ferry.

use std::borrow::Cow;
use std::time::Duration;
use wire::DtnTime;

use bp7::crc::CrcBlock;
use bytes::Bytes;
use hardy_bpv7 as hardy;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use wire::{
    AdminRecord, BlockFlags, Bundle, BundleFlags, CrcType, CreationTimestamp, Eid, ExtensionBlock,
    ExtensionData, FragmentInfo, HopCount, PayloadBlock, PrimaryBlock, StatusAssertion,
    StatusReason, StatusReport,
};

const SIZES: [usize; 2] = [1024, 1024 * 1024];
const CRC_TYPES: [CrcType; 3] = [CrcType::None, CrcType::Crc16, CrcType::Crc32c];

/// Endpoint id schemes of the fixed cases.
#[derive(Debug, Clone, Copy)]
enum Scheme {
    Dtn,
    Ipn,
}

const SCHEMES: [Scheme; 2] = [Scheme::Dtn, Scheme::Ipn];

fn eid(text: &str) -> Eid {
    text.parse()
        .unwrap_or_else(|e| panic!("test endpoint id: {e}"))
}

/// Deterministic payload bytes that are not all alike (so a misplaced slice shows).
fn payload(len: usize) -> Bytes {
    let mut x: u32 = 0x2545_f491;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x.to_le_bytes()[1]
        })
        .collect::<Vec<u8>>()
        .into()
}

/// The fixed-case bundle: every header field set to something other than its default, the three
/// extension blocks RFC 9171 §4.4 defines, and `crc` on every block.
fn sample(scheme: Scheme, crc: CrcType, payload_len: usize) -> Bundle {
    let (destination, source, report_to, previous) = match scheme {
        Scheme::Dtn => (
            "dtn://ground-station.example/telemetry/eps",
            "dtn://cubesat-7/app",
            "dtn://cubesat-7/",
            "dtn://relay_3/",
        ),
        Scheme::Ipn => ("ipn:977.1", "ipn:42.7", "ipn:42.0", "ipn:13.0"),
    };
    let mut primary = PrimaryBlock::new(
        eid(destination),
        eid(source),
        CreationTimestamp {
            time: DtnTime::from_millis(781_000_000_123),
            sequence: 17,
        },
        86_400_000,
    );
    primary.report_to = eid(report_to);
    primary.crc_type = crc;
    primary.flags = BundleFlags(
        BundleFlags::REPORT_DELIVERY
            | BundleFlags::STATUS_TIME_REQUESTED
            | BundleFlags::APP_ACK_REQUESTED,
    );
    let block = |number, flags, data| ExtensionBlock {
        number,
        flags: BlockFlags(flags),
        crc_type: crc,
        data,
    };
    Bundle {
        primary,
        extensions: vec![
            block(2, 0, ExtensionData::PreviousNode(eid(previous))),
            block(
                3,
                BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
                ExtensionData::BundleAge(1_234_567),
            ),
            block(
                4,
                BlockFlags::REPORT_IF_UNPROCESSABLE | BlockFlags::DISCARD_IF_UNPROCESSABLE,
                ExtensionData::HopCount(HopCount {
                    limit: 30,
                    count: 2,
                }),
            ),
        ],
        payload: PayloadBlock {
            flags: BlockFlags(BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE),
            crc_type: crc,
            data: payload(payload_len),
            origin: None,
        },
    }
}

/// Every fixed case: each scheme, payload size and CRC type.
fn fixed_cases() -> impl Iterator<Item = (String, Bundle)> {
    SCHEMES.into_iter().flat_map(|scheme| {
        SIZES.into_iter().flat_map(move |size| {
            CRC_TYPES.into_iter().map(move |crc| {
                (
                    format!("{scheme:?}, {size} bytes, {crc:?}"),
                    sample(scheme, crc, size),
                )
            })
        })
    })
}

/// The spec as Ferry decodes it: the fragment bit follows the fragment information.
fn normalized(mut b: Bundle) -> Bundle {
    b.primary.flags = b.primary.encoded_flags();
    b
}

/// `b` with its extension blocks in block number order (bp7 writes them in descending order).
fn by_number(mut b: Bundle) -> Bundle {
    b.extensions.sort_by_key(|e| e.number);
    b
}

/// Percent-decodes `%XX` sequences (leaving anything else as it is).
fn pct_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Ferry endpoint id as text with the node name percent-decoded, which is how hardy-bpv7 holds
/// `dtn` node names (see the module comment).
fn ferry_eid_decoded(e: &Eid) -> String {
    match e {
        Eid::Dtn(d) => format!("dtn://{}/{}", pct_decode(d.node_name()), d.demux()),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// bp7

fn bp7_eid(e: &Eid) -> bp7::EndpointID {
    match e {
        Eid::Null => bp7::EndpointID::none(),
        // Built from its parts rather than parsed: bp7's parser refuses the node name "none".
        Eid::Dtn(d) => bp7::EndpointID::Dtn(1, bp7::eid::DtnAddress::new(d.node_name(), d.demux())),
        Eid::Ipn { node, service } => bp7::EndpointID::with_ipn(*node, *service)
            .unwrap_or_else(|err| panic!("bp7 refuses ipn:{node}.{service}: {err}")),
    }
}

fn bp7_crc(crc: CrcType) -> bp7::crc::CrcRawType {
    u8::try_from(crc.code()).expect("CRC type codes are small")
}

/// bp7 keeps block flags in a `u8`; the generators only use the defined bits.
fn bp7_block_flags(flags: BlockFlags) -> u8 {
    u8::try_from(flags.0).expect("bp7 holds block flags in a u8")
}

fn bp7_extension_data(data: &ExtensionData) -> bp7::canonical::CanonicalData {
    use bp7::canonical::CanonicalData;
    match data {
        ExtensionData::PreviousNode(e) => CanonicalData::PreviousNode(bp7_eid(e)),
        ExtensionData::BundleAge(ms) => CanonicalData::BundleAge(*ms),
        // bp7 holds hop limit and count in `u8`s (RFC 9171 §4.4.3 bounds only the limit).
        ExtensionData::HopCount(h) => CanonicalData::HopCount(
            u8::try_from(h.limit).expect("hop limit fits bp7's u8"),
            u8::try_from(h.count).expect("hop count fits bp7's u8"),
        ),
        ExtensionData::Unknown { data, .. } => CanonicalData::Unknown(data.to_vec()),
    }
}

/// The spec built with bp7's own builders.
fn to_bp7(b: &Bundle) -> bp7::Bundle {
    let p = &b.primary;
    let (offset, total) = p.fragment.map_or((0, 0), |f| (f.offset, f.total_adu_len));
    let mut primary = bp7::primary::PrimaryBlockBuilder::default()
        .bundle_control_flags(p.encoded_flags().0)
        .destination(bp7_eid(&p.destination))
        .source(bp7_eid(&p.source))
        .report_to(bp7_eid(&p.report_to))
        .creation_timestamp(bp7::CreationTimestamp::with_time_and_seq(
            p.creation.time.as_millis(),
            p.creation.sequence,
        ))
        .lifetime(Duration::from_millis(p.lifetime_ms))
        .fragmentation_offset(offset)
        .total_data_length(total)
        .build()
        .expect("bp7 builds the primary block");
    primary.set_crc_type(bp7_crc(p.crc_type));
    let block = |block_type, number, flags, crc, data| {
        let mut c = bp7::canonical::CanonicalBlockBuilder::default()
            .block_type(block_type)
            .block_number(number)
            .block_control_flags(bp7_block_flags(flags))
            .data(data)
            .build()
            .expect("bp7 builds the block");
        c.set_crc_type(bp7_crc(crc));
        c
    };
    let mut canonicals: Vec<_> = b
        .extensions
        .iter()
        .map(|e| {
            block(
                e.data.block_type(),
                e.number,
                e.flags,
                e.crc_type,
                bp7_extension_data(&e.data),
            )
        })
        .collect();
    canonicals.push(block(
        wire::BLOCK_PAYLOAD,
        wire::PAYLOAD_BLOCK_NUMBER,
        b.payload.flags,
        b.payload.crc_type,
        bp7::canonical::CanonicalData::Data(b.payload.data.to_vec()),
    ));
    bp7::bundle::BundleBuilder::default()
        .primary(primary)
        .canonicals(canonicals)
        .build()
        .expect("bp7 builds the bundle")
}

/// bp7 decodes `wire` (which Ferry encoded from `expected`) and sees what `expected` holds.
fn check_bp7(expected: &Bundle, wire: &[u8]) {
    let mut b =
        bp7::Bundle::try_from(wire).unwrap_or_else(|e| panic!("bp7 refuses Ferry's bundle: {e}"));
    if let Err(errors) = b.validate() {
        panic!("bp7 finds Ferry's bundle invalid: {errors:?}");
    }
    assert!(b.crc_valid(), "bp7 finds a CRC of Ferry's bundle wrong");

    let p = &b.primary;
    let e = &expected.primary;
    assert_eq!(
        p.destination.to_string(),
        e.destination.to_string(),
        "bp7: destination"
    );
    assert_eq!(p.source.to_string(), e.source.to_string(), "bp7: source");
    assert_eq!(
        p.report_to.to_string(),
        e.report_to.to_string(),
        "bp7: report-to"
    );
    assert_eq!(
        p.creation_timestamp.dtntime(),
        e.creation.time.as_millis(),
        "bp7: creation time"
    );
    assert_eq!(
        p.creation_timestamp.seqno(),
        e.creation.sequence,
        "bp7: sequence number"
    );
    assert_eq!(
        p.lifetime.as_millis(),
        u128::from(e.lifetime_ms),
        "bp7: lifetime"
    );
    assert_eq!(
        p.bundle_control_flags,
        e.encoded_flags().0,
        "bp7: bundle flags"
    );
    assert_eq!(
        u64::from(p.crc.to_code()),
        e.crc_type.code(),
        "bp7: primary CRC type"
    );
    match e.fragment {
        Some(f) => {
            assert!(p.has_fragmentation(), "bp7: not a fragment");
            assert_eq!(p.fragmentation_offset, f.offset, "bp7: fragment offset");
            assert_eq!(
                p.total_data_length, f.total_adu_len,
                "bp7: total ADU length"
            );
        }
        None => assert!(!p.has_fragmentation(), "bp7: a fragment"),
    }

    assert_eq!(
        b.canonicals.len(),
        expected.extensions.len() + 1,
        "bp7: number of canonical blocks"
    );
    for ext in &expected.extensions {
        let n = ext.number;
        let c = b
            .canonicals
            .iter()
            .find(|c| c.block_number == n)
            .unwrap_or_else(|| panic!("bp7: no block {n}"));
        assert_eq!(
            c.block_type,
            ext.data.block_type(),
            "bp7: type of block {n}"
        );
        assert_eq!(
            u64::from(c.block_control_flags),
            ext.flags.0,
            "bp7: flags of block {n}"
        );
        assert_eq!(
            u64::from(c.crc.to_code()),
            ext.crc_type.code(),
            "bp7: CRC type of block {n}"
        );
        use bp7::canonical::CanonicalData as C;
        match (&ext.data, c.data()) {
            (ExtensionData::PreviousNode(want), C::PreviousNode(got)) => {
                assert_eq!(got.to_string(), want.to_string(), "bp7: previous node");
            }
            (ExtensionData::BundleAge(want), C::BundleAge(got)) => {
                assert_eq!(got, want, "bp7: bundle age");
            }
            (ExtensionData::HopCount(want), C::HopCount(limit, count)) => {
                assert_eq!(
                    (u64::from(*limit), u64::from(*count)),
                    (want.limit, want.count),
                    "bp7: hop limit and count"
                );
            }
            (ExtensionData::Unknown { data, .. }, C::Unknown(got)) => {
                assert_eq!(got[..], data[..], "bp7: data of unknown block {n}");
            }
            (want, got) => panic!("bp7 reads block {n} as {got:?}, Ferry wrote {want:?}"),
        }
    }
    let payload = b
        .canonicals
        .iter()
        .find(|c| c.block_number == wire::PAYLOAD_BLOCK_NUMBER)
        .expect("bp7: no payload block");
    assert_eq!(
        payload.block_type,
        wire::BLOCK_PAYLOAD,
        "bp7: payload block type"
    );
    assert_eq!(
        u64::from(payload.block_control_flags),
        expected.payload.flags.0,
        "bp7: payload block flags"
    );
    assert_eq!(
        u64::from(payload.crc.to_code()),
        expected.payload.crc_type.code(),
        "bp7: payload CRC type"
    );
    assert!(
        payload.payload_data().map(Vec::as_slice) == Some(&expected.payload.data[..]),
        "bp7: payload bytes differ"
    );
}

// ---------------------------------------------------------------------------------------------
// hardy-bpv7

fn hardy_eid(e: &Eid) -> hardy::eid::Eid {
    e.to_string()
        .parse()
        .unwrap_or_else(|err| panic!("hardy-bpv7 refuses {e}: {err}"))
}

/// A hardy endpoint id in RFC 9171 text form, node names percent-decoded (as hardy holds them)
/// and `ipn` node numbers whole again (hardy splits them into RFC 9758 allocator and node).
fn hardy_eid_text(e: &hardy::eid::Eid) -> String {
    use hardy::eid::Eid as H;
    let fqnn =
        |f: &hardy::eid::IpnNodeId| (u64::from(f.allocator_id) << 32) | u64::from(f.node_number);
    match e {
        H::Null => "dtn:none".to_owned(),
        H::Dtn {
            node_name,
            service_name,
        } => format!("dtn://{}/{service_name}", node_name.node_name),
        H::Ipn {
            fqnn: f,
            service_number,
        }
        | H::LegacyIpn {
            fqnn: f,
            service_number,
        } => format!("ipn:{}.{service_number}", fqnn(f)),
        // hardy's "local node" is the RFC 9758 reading of node number 2^32 - 1.
        H::LocalNode(service) => format!("ipn:{}.{service}", u32::MAX),
        other => panic!("hardy-bpv7 reads an unexpected endpoint id {other:?}"),
    }
}

fn hardy_crc(crc: CrcType) -> hardy::crc::CrcType {
    hardy::crc::CrcType::from(crc.code())
}

/// The block-type-specific data of an extension block. hardy-bpv7 encodes these only through
/// `hardy-cbor`, which is not a dependency here, so bp7's encoder writes them; hardy frames the
/// block and computes its CRC.
fn extension_content(data: &ExtensionData) -> Vec<u8> {
    match data {
        ExtensionData::Unknown { data, .. } => data.to_vec(),
        // bp7 cannot hold a hop count above 255, so the two-integer array is written here.
        ExtensionData::HopCount(h) if h.count > 255 => {
            let mut out = vec![0x82];
            for v in [h.limit, h.count] {
                cbor_uint(&mut out, v);
            }
            out
        }
        known => bp7_extension_data(known).to_cbor(),
    }
}

/// Appends a CBOR unsigned integer in its shortest form.
fn cbor_uint(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=23 => out.push(v as u8),
        24..=0xff => out.extend([0x18, v as u8]),
        0x100..=0xffff => {
            out.push(0x19);
            out.extend((v as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0x1a);
            out.extend((v as u32).to_be_bytes());
        }
        _ => {
            out.push(0x1b);
            out.extend(v.to_be_bytes());
        }
    }
}

/// The spec built with hardy-bpv7's `Builder` (and its `Editor` for fragment information, which
/// the builder leaves to fragmentation). hardy numbers extension blocks from 2 in the order they
/// are added, so the spec's must be numbered that way.
fn to_hardy(b: &Bundle) -> Box<[u8]> {
    let p = &b.primary;
    let mut builder = hardy::builder::Builder::new(hardy_eid(&p.source), hardy_eid(&p.destination))
        .with_report_to(hardy_eid(&p.report_to))
        .with_flags(hardy::bundle::Flags::from(
            p.flags.with(BundleFlags::IS_FRAGMENT, false).0,
        ))
        .with_crc_type(hardy_crc(p.crc_type))
        .with_lifetime(Duration::from_millis(p.lifetime_ms));
    for (i, ext) in b.extensions.iter().enumerate() {
        assert_eq!(
            ext.number,
            i as u64 + 2,
            "hardy numbers extension blocks from 2"
        );
        builder = builder
            .add_extension_block(hardy::block::Type::from(ext.data.block_type()))
            .expect("hardy adds the block")
            .with_flags(hardy::block::Flags::from(ext.flags.0))
            .with_crc_type(hardy_crc(ext.crc_type))
            .build(Cow::Owned(extension_content(&ext.data)));
    }
    builder = builder
        .add_extension_block(hardy::block::Type::Payload)
        .expect("hardy adds the payload block")
        .with_flags(hardy::block::Flags::from(b.payload.flags.0))
        .with_crc_type(hardy_crc(b.payload.crc_type))
        .build(Cow::Borrowed(&b.payload.data[..]));
    let time = p.creation.time;
    let timestamp = hardy::creation_timestamp::CreationTimestamp::from_parts(
        (!time.is_unknown()).then(|| hardy::dtn_time::DtnTime::new(time.as_millis())),
        p.creation.sequence,
    );
    let (bundle, data) = builder.build(timestamp).expect("hardy builds the bundle");
    match p.fragment {
        None => data,
        Some(f) => {
            let chunks = hardy::editor::Editor::new(&bundle, &data)
                .with_fragment_info(Some(hardy::bundle::FragmentInfo {
                    offset: f.offset,
                    total_adu_length: f.total_adu_len,
                }))
                .map_err(|(_, e)| e)
                .expect("hardy sets the fragment information")
                .rebuild()
                .expect("hardy rebuilds the bundle");
            hardy::editor::Chunk::flatten(chunks, &data)
        }
    }
}

/// hardy-bpv7 decodes `wire` (which Ferry encoded from `expected`) and sees what `expected` holds.
fn check_hardy(expected: &Bundle, wire: &[u8]) {
    let parsed =
        hardy::bundle::ParsedBundle::parse_with_keys(wire, &hardy::bpsec::key::KeySet::EMPTY)
            .unwrap_or_else(|e| panic!("hardy-bpv7 refuses Ferry's bundle: {e}"));
    assert!(
        !parsed.non_canonical,
        "hardy-bpv7 finds Ferry's encoding not canonical"
    );
    let report_unsupported = expected.extensions.iter().any(|b| {
        matches!(b.data, ExtensionData::Unknown { .. })
            && b.flags.contains(BlockFlags::REPORT_IF_UNPROCESSABLE)
    });
    assert_eq!(
        parsed.report_unsupported, report_unsupported,
        "hardy: report for an unsupported block"
    );
    let h = &parsed.bundle;
    let e = &expected.primary;
    let text = ferry_eid_decoded;
    assert_eq!(
        hardy_eid_text(&h.destination),
        text(&e.destination),
        "hardy: destination"
    );
    assert_eq!(
        hardy_eid_text(&h.id.source),
        text(&e.source),
        "hardy: source"
    );
    assert_eq!(
        hardy_eid_text(&h.report_to),
        text(&e.report_to),
        "hardy: report-to"
    );
    assert_eq!(
        h.id.timestamp.creation_time().map_or(0, |t| t.millisecs()),
        e.creation.time.as_millis(),
        "hardy: creation time"
    );
    assert_eq!(
        h.id.timestamp.sequence_number(),
        e.creation.sequence,
        "hardy: sequence number"
    );
    assert_eq!(
        h.lifetime,
        Duration::from_millis(e.lifetime_ms),
        "hardy: lifetime"
    );
    assert_eq!(
        u64::from(&h.flags),
        e.encoded_flags().0,
        "hardy: bundle flags"
    );
    assert_eq!(
        u64::from(h.crc_type),
        e.crc_type.code(),
        "hardy: primary CRC type"
    );
    assert_eq!(
        h.id.fragment_info
            .as_ref()
            .map(|f| (f.offset, f.total_adu_length)),
        e.fragment.map(|f| (f.offset, f.total_adu_len)),
        "hardy: fragment offset and total ADU length"
    );

    // The primary block counts as block 0 in hardy's map.
    assert_eq!(
        h.blocks.len(),
        expected.extensions.len() + 2,
        "hardy: number of blocks"
    );
    let expect_block = |n: u64, block_type: u64, flags: BlockFlags, crc: CrcType| {
        let blk = h
            .blocks
            .get(&n)
            .unwrap_or_else(|| panic!("hardy: no block {n}"));
        assert_eq!(
            u64::from(blk.block_type),
            block_type,
            "hardy: type of block {n}"
        );
        assert_eq!(u64::from(&blk.flags), flags.0, "hardy: flags of block {n}");
        assert_eq!(
            u64::from(blk.crc_type),
            crc.code(),
            "hardy: CRC type of block {n}"
        );
        blk.payload(wire)
            .unwrap_or_else(|| panic!("hardy: no data for block {n}"))
    };
    for ext in &expected.extensions {
        let data = expect_block(ext.number, ext.data.block_type(), ext.flags, ext.crc_type);
        if let ExtensionData::Unknown { data: want, .. } = &ext.data {
            assert_eq!(
                data,
                &want[..],
                "hardy: data of unknown block {}",
                ext.number
            );
        }
    }
    let data = expect_block(
        wire::PAYLOAD_BLOCK_NUMBER,
        wire::BLOCK_PAYLOAD,
        expected.payload.flags,
        expected.payload.crc_type,
    );
    assert!(
        data == &expected.payload.data[..],
        "hardy: payload bytes differ"
    );

    assert_eq!(
        h.previous_node.as_ref().map(hardy_eid_text),
        expected.previous_node().map(ferry_eid_decoded),
        "hardy: previous node"
    );
    assert_eq!(
        h.age,
        expected.age_ms().map(Duration::from_millis),
        "hardy: bundle age"
    );
    assert_eq!(
        h.hop_count.as_ref().map(|c| (c.limit, c.count)),
        expected.hop_count().map(|c| (c.limit, c.count)),
        "hardy: hop limit and count"
    );
}

// ---------------------------------------------------------------------------------------------
// Ferry as the decoder

/// Ferry decodes `wire`, which `oracle` built from `expected`, into `expected` (up to the order of
/// extension blocks), and re-encodes it to the same bytes.
fn check_ferry(expected: &Bundle, wire: &[u8], oracle: &str) {
    let wire = Bytes::copy_from_slice(wire);
    let got = Bundle::decode(wire.clone())
        .unwrap_or_else(|e| panic!("Ferry refuses {oracle}'s bundle: {e}"));
    let (read, want) = (
        by_number(got.clone()),
        by_number(normalized(expected.clone())),
    );
    assert_eq!(
        read.primary, want.primary,
        "Ferry reads {oracle}'s primary block differently"
    );
    assert_eq!(
        read.extensions, want.extensions,
        "Ferry reads {oracle}'s extension blocks differently"
    );
    assert_eq!(
        (read.payload.flags, read.payload.crc_type),
        (want.payload.flags, want.payload.crc_type),
        "Ferry reads {oracle}'s payload block differently"
    );
    // Not assert_eq: a failure would print up to a mebibyte.
    assert!(
        read.payload.data == want.payload.data,
        "Ferry reads {oracle}'s payload bytes differently"
    );
    assert!(
        got.encode().to_bytes() == wire,
        "Ferry does not re-encode {oracle}'s bundle byte for byte"
    );
}

// ---------------------------------------------------------------------------------------------
// Fixed cases: 1 KiB and 1 MiB, every CRC type, dtn and ipn

#[test]
fn ferry_to_bp7() {
    for (label, b) in fixed_cases() {
        eprintln!("{label}");
        check_bp7(&b, &b.encode().to_bytes());
    }
}

#[test]
fn bp7_to_ferry() {
    for (label, b) in fixed_cases() {
        eprintln!("{label}");
        check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");
    }
}

#[test]
fn ferry_to_hardy() {
    for (label, b) in fixed_cases() {
        eprintln!("{label}");
        check_hardy(&b, &b.encode().to_bytes());
    }
}

#[test]
fn hardy_to_ferry() {
    for (label, b) in fixed_cases() {
        eprintln!("{label}");
        check_ferry(&b, &to_hardy(&b), "hardy-bpv7");
    }
}

/// Mixed CRC types in one bundle, an empty payload, and the creation time unknown (so a bundle age
/// block is required), with and without the other extension blocks.
#[test]
fn mixed_crcs_empty_payload_unknown_time() {
    let mut b = sample(Scheme::Ipn, CrcType::Crc32c, 0);
    b.primary.crc_type = CrcType::Crc16;
    b.primary.creation.time = DtnTime::UNKNOWN;
    b.extensions[0].crc_type = CrcType::None;
    b.extensions[1].crc_type = CrcType::Crc16;
    b.payload.crc_type = CrcType::None;
    assert_eq!(b.validate(), Ok(()));
    let wire = b.encode().to_bytes();
    check_bp7(&b, &wire);
    check_hardy(&b, &wire);
    check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");
    check_ferry(&b, &to_hardy(&b), "hardy-bpv7");

    let only_payload = Bundle::new(b.primary.clone(), Bytes::new());
    let only_payload = Bundle {
        extensions: vec![b.extensions[1].clone()],
        ..only_payload
    };
    let wire = only_payload.encode().to_bytes();
    check_bp7(&only_payload, &wire);
    check_hardy(&only_payload, &wire);
}

/// Fragments (RFC 9171 §5.8): the primary block carries the fragment offset and the total ADU
/// length, and the fragment flag is set.
#[test]
fn fragments_in_both_directions() {
    for scheme in SCHEMES {
        for crc in CRC_TYPES {
            let mut b = sample(scheme, crc, 1000);
            b.primary.fragment = Some(FragmentInfo {
                offset: 70_000,
                total_adu_len: 1_000_000,
            });
            let b = normalized(b);
            assert_eq!(b.validate(), Ok(()));
            let wire = b.encode().to_bytes();
            check_bp7(&b, &wire);
            check_hardy(&b, &wire);
            check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");
            check_ferry(&b, &to_hardy(&b), "hardy-bpv7");
        }
    }
    // The last fragment, ending exactly at the end of the ADU.
    let mut b = sample(Scheme::Dtn, CrcType::Crc32c, 24);
    b.primary.fragment = Some(FragmentInfo {
        offset: 1000,
        total_adu_len: 1024,
    });
    let b = normalized(b);
    check_bp7(&b, &b.encode().to_bytes());
    check_hardy(&b, &b.encode().to_bytes());
    check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");
    check_ferry(&b, &to_hardy(&b), "hardy-bpv7");
}

/// `ipn` numbers up to 2^64 - 1 (RFC 9171 §4.2.5.1.2: unsigned integers).
#[test]
fn extreme_ipn_numbers() {
    let mut b = sample(Scheme::Ipn, CrcType::Crc32c, 64);
    b.primary.destination = Eid::ipn(u64::MAX, u64::MAX);
    b.primary.source = Eid::ipn(1 << 40, 1 << 33);
    b.primary.report_to = Eid::ipn(u64::from(u32::MAX) + 1, 0);
    b.extensions[0].data = ExtensionData::PreviousNode(Eid::ipn(u64::MAX, 0));
    let wire = b.encode().to_bytes();
    check_bp7(&b, &wire);
    check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");

    // hardy-bpv7 follows RFC 9758, which limits service numbers to 32 bits (it refuses the
    // bundle above); RFC 9171 does not. With 32-bit service numbers, larger node numbers come
    // back as an (allocator, node) pair that hardy_eid_text joins again.
    b.primary.destination = Eid::ipn(u64::MAX, u64::from(u32::MAX));
    b.primary.source = Eid::ipn(1 << 40, 5);
    check_hardy(&b, &b.encode().to_bytes());
}

/// A `dtn` node name with RFC 3986 sub-delimiters, which a reg-name may hold.
#[test]
fn dtn_node_names_with_sub_delimiters() {
    let mut b = sample(Scheme::Dtn, CrcType::Crc32c, 64);
    b.primary.destination = eid("dtn://a!b$c&d'e(f)g*h+i,j;k=l/x");
    b.primary.report_to = eid("dtn://node~1.example_net/~group");
    let wire = b.encode().to_bytes();
    check_bp7(&b, &wire);
    check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");
    // hardy reads the name faithfully ...
    check_hardy(&b, &wire);
    // ... but writes it percent-encoded ("a%21b%24c..."), which RFC 3986 §2.2 says is a different
    // URI. Ferry decodes what hardy wrote; only the percent-decoded name is the original.
    let got = Bundle::decode(Bytes::from(to_hardy(&b).into_vec())).expect("Ferry decodes");
    assert_eq!(
        ferry_eid_decoded(&got.primary.destination),
        b.primary.destination.to_string()
    );
}

/// Unrecognized bundle and block flags "MUST be ignored" (RFC 9171 §4.2.3, §4.2.4), so they
/// must survive decoding, and the hop count is an unsigned integer bounded only by the hop limit
/// (§4.4.3). hardy-bpv7 is the oracle here: bp7 refuses both (its `validate` rejects reserved
/// flag bits, and it holds block flags and the hop count in `u8`s), which RFC 9171 does not allow
/// it to do.
#[test]
fn unrecognized_flags_and_large_hop_counts() {
    for crc in CRC_TYPES {
        let mut b = sample(Scheme::Ipn, crc, 100);
        // Reserved bits 3 and 7, and unassigned bit 40.
        b.primary.flags = BundleFlags(b.primary.flags.0 | 0x08 | 0x80 | 1 << 40);
        // Reserved bit 3, unassigned bits 8 and 50.
        b.extensions[0].flags = BlockFlags(0x08 | 0x100 | 1 << 50);
        b.payload.flags = BlockFlags(b.payload.flags.0 | 0x40);
        b.extensions[2].data = ExtensionData::HopCount(HopCount {
            limit: 255,
            count: 300,
        });
        assert_eq!(b.validate(), Ok(()));
        check_hardy(&b, &b.encode().to_bytes());
        check_ferry(&b, &to_hardy(&b), "hardy-bpv7");
    }
}

/// Ferry bug: RFC 9171 §4.2.5.1.1 makes a `dtn` node name an RFC 3986 reg-name, in which a '%'
/// must begin a pct-encoded octet ("%" HEXDIG HEXDIG). Ferry accepts a '%' followed by anything,
/// as text and on the wire (bp7, which checks nothing here, writes the bundle).
#[test]
fn malformed_percent_encoding_in_node_names_is_refused() {
    for name in ["a%zz", "%", "a%4"] {
        let text = format!("dtn://{name}/x");
        assert!(text.parse::<Eid>().is_err(), "Ferry parses {text}");
        let mut b = to_bp7(&sample(Scheme::Dtn, CrcType::Crc32c, 10));
        b.primary.destination = bp7::EndpointID::Dtn(1, bp7::eid::DtnAddress::new(name, "x"));
        assert!(
            Bundle::decode(Bytes::from(b.to_cbor())).is_err(),
            "Ferry decodes a bundle for {text}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Status reports (RFC 9171 §6.1.1)

fn bp7_status_report(r: &StatusReport) -> bp7::administrative_record::StatusReport {
    use bp7::administrative_record::BundleStatusItem;
    let item = |a: Option<StatusAssertion>| match a {
        None => BundleStatusItem {
            asserted: false,
            time: 0,
            status_requested: false,
        },
        Some(StatusAssertion { time }) => BundleStatusItem {
            asserted: true,
            time: time.unwrap_or(DtnTime::from_millis(0)).as_millis(),
            status_requested: time.is_some(),
        },
    };
    bp7::administrative_record::StatusReport {
        status_information: vec![
            item(r.received),
            item(r.forwarded),
            item(r.delivered),
            item(r.deleted),
        ],
        report_reason: u32::try_from(r.reason.code()).expect("bp7 holds reasons in a u32"),
        source_node: bp7_eid(&r.source),
        timestamp: bp7::CreationTimestamp::with_time_and_seq(
            r.creation.time.as_millis(),
            r.creation.sequence,
        ),
        frag_offset: r.fragment.map_or(0, |f| f.0),
        frag_len: r.fragment.map_or(0, |f| f.1),
    }
}

/// bp7's encoding of a status report as an administrative record (the payload of its report).
fn bp7_record_bytes(r: &StatusReport) -> Vec<u8> {
    bp7::administrative_record::AdministrativeRecord::BundleStatusReport(bp7_status_report(r))
        .to_payload()
        .payload_data()
        .expect("an administrative record payload")
        .clone()
}

fn reports() -> Vec<StatusReport> {
    let at = |time| Some(StatusAssertion { time });
    let base = StatusReport {
        received: None,
        forwarded: None,
        delivered: at(None),
        deleted: None,
        reason: StatusReason::NoInformation,
        source: eid("ipn:42.7"),
        creation: CreationTimestamp {
            time: DtnTime::from_millis(781_000_000_123),
            sequence: 17,
        },
        fragment: None,
    };
    vec![
        base.clone(),
        StatusReport {
            received: at(Some(DtnTime::from_millis(781_000_000_500))),
            forwarded: at(Some(DtnTime::from_millis(781_000_001_000))),
            delivered: at(Some(DtnTime::from_millis(781_000_002_000))),
            deleted: at(Some(DtnTime::from_millis(u64::MAX))),
            reason: StatusReason::HopLimitExceeded,
            source: eid("dtn://cubesat-7/app"),
            ..base.clone()
        },
        StatusReport {
            delivered: None,
            deleted: at(Some(DtnTime::from_millis(781_000_003_000))),
            reason: StatusReason::LifetimeExpired,
            fragment: Some((70_000, 1000)),
            ..base.clone()
        },
        StatusReport {
            delivered: None,
            forwarded: at(None),
            // A BPSec reason code (RFC 9172 §7.1), which Ferry keeps as a number.
            reason: StatusReason::Other(13),
            creation: CreationTimestamp {
                time: DtnTime::UNKNOWN,
                sequence: u64::MAX,
            },
            ..base
        },
    ]
}

/// bp7 encodes status reports, Ferry decodes them; and Ferry's encoder writes exactly bp7's bytes.
#[test]
fn status_reports_bp7_to_ferry_and_byte_agreement() {
    for r in reports() {
        let bytes = bp7_record_bytes(&r);
        let record = AdminRecord::StatusReport(r.clone());
        assert_eq!(
            AdminRecord::decode(&Bytes::from(bytes.clone()))
                .unwrap_or_else(|e| panic!("Ferry refuses bp7's status report: {e}")),
            record,
            "Ferry reads bp7's status report differently"
        );
        assert!(
            record.encode()[..] == bytes[..],
            "Ferry and bp7 encode {r:?} differently"
        );
    }
}

/// Whole status-report bundles made by bp7's report generator, decoded by Ferry.
#[test]
fn status_report_bundles_bp7_to_ferry() {
    use bp7::administrative_record as ar;
    for (crc, fragment) in [
        (bp7::crc::CRC_NO, None),
        (bp7::crc::CRC_16, Some((70_000, 1_000_000))),
        (bp7::crc::CRC_32, Some((0, 5000))),
    ] {
        let mut subject = sample(Scheme::Dtn, CrcType::Crc32c, 1000);
        subject.primary.fragment = fragment.map(|(offset, total_adu_len)| FragmentInfo {
            offset,
            total_adu_len,
        });
        let subject = normalized(subject);
        let reporter = bp7_eid(&eid("dtn://relay_3/"));
        let mut report = ar::new_status_report_bundle(
            &to_bp7(&subject),
            reporter,
            crc,
            ar::DELIVERED_BUNDLE,
            ar::NO_ROUTE_TO_DESTINATION,
        );
        let got = Bundle::decode(Bytes::from(report.to_cbor()))
            .unwrap_or_else(|e| panic!("Ferry refuses bp7's status report bundle: {e}"));
        assert!(got.primary.is_admin_record());
        assert_eq!(got.primary.destination, subject.primary.report_to);
        assert_eq!(got.primary.source, eid("dtn://relay_3/"));
        assert_eq!(got.primary.crc_type.code(), u64::from(crc));
        let record = AdminRecord::decode(&got.payload.data)
            .unwrap_or_else(|e| panic!("Ferry refuses bp7's status report: {e}"));
        // The subject asked for status times, so the delivery assertion carries one; its value is
        // bp7's clock, so only its presence is compared.
        let AdminRecord::StatusReport(r) = record else {
            panic!("not a status report: {record:?}")
        };
        assert!(matches!(
            r.delivered,
            Some(StatusAssertion { time: Some(_) })
        ));
        assert_eq!(
            StatusReport {
                delivered: None,
                ..r
            },
            StatusReport {
                received: None,
                forwarded: None,
                delivered: None,
                deleted: None,
                reason: StatusReason::NoKnownRoute,
                source: subject.primary.source.clone(),
                creation: subject.primary.creation,
                // RFC 9171 §6.1.1: the subject's fragment offset and payload length.
                fragment: fragment.map(|(offset, _)| (offset, 1000)),
            }
        );
    }
}

/// Ferry's status-report bundles decoded by both oracles. Neither exposes a decoder for the record
/// itself without a CBOR crate (see the module comment), so the payload they extract is compared
/// with bp7's own encoding of the same report.
#[test]
fn status_report_bundles_ferry_to_oracles() {
    for (r, crc) in reports().into_iter().zip(CRC_TYPES.into_iter().cycle()) {
        let mut primary = PrimaryBlock::new(
            eid("dtn://cubesat-7/"),
            eid("ipn:13.0"),
            CreationTimestamp {
                time: DtnTime::from_millis(781_000_009_000),
                sequence: 0,
            },
            3_600_000,
        );
        primary.crc_type = crc;
        primary.flags = BundleFlags(BundleFlags::ADMIN_RECORD);
        let mut b = Bundle::new(primary, AdminRecord::StatusReport(r.clone()).encode());
        b.payload.crc_type = crc;
        let wire = b.encode().to_bytes();
        check_bp7(&b, &wire);
        check_hardy(&b, &wire);
        let mut bp7_view = bp7::Bundle::try_from(&wire[..]).expect("bp7 decodes");
        assert!(bp7_view.is_administrative_record());
        assert!(bp7_view.crc_valid());
        assert!(
            bp7_view.payload().map(Vec::as_slice) == Some(&bp7_record_bytes(&r)[..]),
            "bp7 would encode the report in {r:?} differently"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Random bundles

/// The bundle processing control flags RFC 9171 §4.2.3 defines, except "is a fragment", which
/// follows the fragment information.
const BUNDLE_FLAG_BITS: [u64; 8] = [
    BundleFlags::ADMIN_RECORD,
    BundleFlags::MUST_NOT_FRAGMENT,
    BundleFlags::APP_ACK_REQUESTED,
    BundleFlags::STATUS_TIME_REQUESTED,
    BundleFlags::REPORT_RECEPTION,
    BundleFlags::REPORT_FORWARDING,
    BundleFlags::REPORT_DELIVERY,
    BundleFlags::REPORT_DELETION,
];

/// The block processing control flags RFC 9171 §4.2.4 defines.
const BLOCK_FLAG_BITS: [u64; 4] = [
    BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
    BlockFlags::REPORT_IF_UNPROCESSABLE,
    BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE,
    BlockFlags::DISCARD_IF_UNPROCESSABLE,
];

fn bits(set: &'static [u64]) -> impl Strategy<Value = u64> {
    proptest::sample::subsequence(set, 0..=set.len())
        .prop_map(|b| b.into_iter().fold(0, |a, b| a | b))
}

fn crc_type() -> impl Strategy<Value = CrcType> {
    proptest::sample::select(&CRC_TYPES[..])
}

fn dtn_eid() -> impl Strategy<Value = Eid> {
    // reg-name characters (RFC 3986) except '%', and a demux of visible US-ASCII. Never an empty
    // node name: RFC 3986 allows an empty reg-name, and hardy-bpv7 takes one, but Ferry and bp7
    // refuse it.
    ("[A-Za-z0-9._~!$&'()*+,;=-]{1,12}", "[!-~]{0,16}")
        .prop_map(|(node, demux)| Eid::dtn(&node, &demux).expect("generated from the grammar"))
}

fn ipn_eid() -> impl Strategy<Value = Eid> {
    // hardy-bpv7 (RFC 9758) refuses service numbers above 2^32 - 1 and reads node 0 as the null
    // endpoint, as does bp7 for ipn:0.n; RFC 9171 has neither rule.
    (1..=u64::from(u32::MAX), 0..=u64::from(u32::MAX))
        .prop_map(|(node, service)| Eid::ipn(node, service))
}

fn node_eid() -> impl Strategy<Value = Eid> {
    prop_oneof![dtn_eid(), ipn_eid()]
}

fn maybe_null_eid() -> impl Strategy<Value = Eid> {
    prop_oneof![1 => Just(Eid::Null), 5 => node_eid()]
}

/// One extension block without its number: content, flags, CRC type.
type ExtParts = (ExtensionData, u64, CrcType);

prop_compose! {
    fn extensions()(
        previous in proptest::option::of((node_eid(), bits(&BLOCK_FLAG_BITS), crc_type())),
        age in proptest::option::of((any::<u64>(), bits(&BLOCK_FLAG_BITS), crc_type())),
        // bp7 holds hop limit and count in u8s.
        hop in proptest::option::of(((1u64..=255, 0u64..=255), bits(&BLOCK_FLAG_BITS), crc_type())),
        // Types from the private/experimental range, which neither oracle interprets; never
        // "delete the bundle if unprocessable", which hardy (rightly) acts on by refusing it.
        unknown in proptest::collection::vec(
            (192u64..=255, proptest::collection::vec(any::<u8>(), 0..32), bits(&BLOCK_FLAG_BITS), crc_type()),
            0..=2,
        ),
    ) -> Vec<ExtParts> {
        let mut parts: Vec<ExtParts> = Vec::new();
        if let Some((e, f, c)) = previous {
            parts.push((ExtensionData::PreviousNode(e.node_id()), f, c));
        }
        if let Some((ms, f, c)) = age {
            parts.push((ExtensionData::BundleAge(ms), f, c));
        }
        if let Some(((limit, count), f, c)) = hop {
            parts.push((ExtensionData::HopCount(HopCount { limit, count }), f, c));
        }
        for (block_type, data, f, c) in unknown {
            let data = ExtensionData::Unknown { block_type, data: Bytes::from(data) };
            parts.push((data, f & !BlockFlags::DELETE_BUNDLE_IF_UNPROCESSABLE, c));
        }
        parts
    }
}

prop_compose! {
    fn random_bundle()(
        destination in node_eid(),
        source in maybe_null_eid(),
        report_to in maybe_null_eid(),
        time in prop_oneof![Just(0u64), 1u64..],
        sequence in any::<u64>(),
        lifetime_ms in any::<u64>(),
        flag_bits in bits(&BUNDLE_FLAG_BITS),
        primary_crc in crc_type(),
        fragment in proptest::option::of((any::<u32>(), any::<u32>())),
        extensions in extensions().prop_shuffle(),
        payload in proptest::collection::vec(any::<u8>(), 0..4096),
        payload_flags in bits(&BLOCK_FLAG_BITS),
        payload_crc in crc_type(),
        missing_age in any::<u64>(),
    ) -> Bundle {
        let mut flags = BundleFlags(flag_bits);
        let anonymous = source.is_null();
        // RFC 9171 §4.2.3: no status reports for administrative records or anonymous bundles,
        // which must also not be fragmented.
        if anonymous || flags.contains(BundleFlags::ADMIN_RECORD) {
            flags = flags.with(BundleFlags::ANY_REPORT, false);
        }
        let fragment = fragment.filter(|_| !anonymous).map(|(offset, extra)| FragmentInfo {
            offset: u64::from(offset),
            total_adu_len: u64::from(offset) + payload.len() as u64 + u64::from(extra),
        });
        flags = flags.with(BundleFlags::MUST_NOT_FRAGMENT, anonymous || (flags.contains(BundleFlags::MUST_NOT_FRAGMENT) && fragment.is_none()));
        // Nor may their blocks ask for reports (§4.2.4).
        let no_reports = anonymous || flags.contains(BundleFlags::ADMIN_RECORD);
        let block_flags = |f: u64| BlockFlags(if no_reports { f & !BlockFlags::REPORT_IF_UNPROCESSABLE } else { f });
        let mut extensions: Vec<ExtensionBlock> = extensions
            .into_iter()
            .enumerate()
            .map(|(i, (data, f, crc_type))| ExtensionBlock {
                number: i as u64 + 2,
                flags: block_flags(f),
                crc_type,
                data,
            })
            .collect();
        // §4.2.6: an unknown creation time needs a bundle age block.
        if time == 0 && !extensions.iter().any(|b| matches!(b.data, ExtensionData::BundleAge(_))) {
            extensions.push(ExtensionBlock::new(extensions.len() as u64 + 2, ExtensionData::BundleAge(missing_age)));
        }
        let primary = PrimaryBlock {
            flags,
            crc_type: primary_crc,
            destination,
            source,
            report_to,
            creation: CreationTimestamp {
                time: DtnTime::from_millis(time),
                sequence,
            },
            lifetime_ms,
            fragment,
        };
        normalized(Bundle {
            primary,
            extensions,
            payload: PayloadBlock { flags: block_flags(payload_flags), crc_type: payload_crc, data: Bytes::from(payload), origin: None },
        })
    }
}

/// Whether hardy-bpv7 writes the bundle's `dtn` node names as they are (it percent-encodes
/// sub-delimiters; see the module comment).
fn hardy_keeps_node_names(b: &Bundle) -> bool {
    let plain = |e: &Eid| match e {
        Eid::Dtn(d) => d
            .node_name()
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-._~".contains(&c)),
        _ => true,
    };
    let p = &b.primary;
    [&p.destination, &p.source, &p.report_to]
        .into_iter()
        .chain(b.previous_node())
        .all(plain)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // Failures print the shrunk bundle; nothing is written next to the sources.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random valid bundles: Ferry's encoding read by both oracles, and both oracles' encodings
    /// read by Ferry.
    #[test]
    fn random_bundles_agree(b in random_bundle()) {
        prop_assert_eq!(b.validate(), Ok(()));
        let wire = b.encode().to_bytes();
        check_bp7(&b, &wire);
        check_hardy(&b, &wire);
        check_ferry(&b, &to_bp7(&b).to_cbor(), "bp7");
        if hardy_keeps_node_names(&b) {
            check_ferry(&b, &to_hardy(&b), "hardy-bpv7");
        }
    }
}
