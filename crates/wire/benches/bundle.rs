//! Bundle codec benchmarks: Ferry's `ferry-wire` against the `bp7` crate, in the same run.
//!
//! Both codecs handle the same bundle: `dtn://node2/incoming` ← `dtn://node1/app` (report-to
//! the source), a hop count block (number 2, limit 32, count 0) and the payload block, with
//! CRC-32C on every block. Before measuring, the setup checks that both encoders produce the
//! same bytes, so the comparison is like for like.
//!
//! Benchmark ids sort side by side: `decode/1KiB/ferry`, `decode/1KiB/bp7`, ...
//!
//! - `decode/*/ferry`: `Bundle::decode` (structure, deterministic CBOR, every CRC, the RFC 9171
//!   rules; the payload stays a slice of the input).
//! - `decode/*/bp7`: `bp7::Bundle::try_from(&[u8])` (serde CBOR; copies the payload; does *not*
//!   check CRCs).
//! - `decode/*/bp7+crc_valid`: the same followed by `crc_valid()`, which is what it takes for bp7
//!   to check the CRCs Ferry checks while decoding.
//! - `decode/1MiB-payload-without-crc/ferry`: the 1 MiB bundle with no CRC on the payload block
//!   only, to show that decoding cost does not depend on the payload size.
//! - `encode/*/ferry`: `Bundle::encode` (header buffer + payload by reference, ready for one
//!   vectored write; the payload CRC is computed over the payload in place).
//! - `encode/*/ferry+to_bytes`: the same, then concatenated into one buffer (copies the payload),
//!   like for like with bp7's `Vec`.
//! - `encode/*/bp7`: `bp7::Bundle::to_cbor` (one `Vec`, CRCs computed).
//!
//! Run: `cargo bench -p ferry-wire --bench bundle -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::time::Duration;
use wire::DtnTime;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wire::{
    Bundle, CrcType, CreationTimestamp, Eid, ExtensionBlock, ExtensionData, HopCount, PrimaryBlock,
};

const DEST: (&str, &str) = ("node2", "incoming");
const SOURCE: (&str, &str) = ("node1", "app");
/// 2025-01-01T00:00:00Z in DTN time (ms since 2000-01-01).
const CREATION_MS: u64 = 788_918_400_000;
const SEQUENCE: u64 = 42;
const LIFETIME_MS: u64 = 3_600_000;
const HOP_LIMIT: u8 = 32;

/// Deterministic, incompressible-looking payload bytes.
fn payload(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x.to_le_bytes()[0]
        })
        .collect()
}

fn ferry_bundle(data: &[u8]) -> Bundle {
    let primary = PrimaryBlock::new(
        Eid::dtn(DEST.0, DEST.1).expect("valid dtn eid"),
        Eid::dtn(SOURCE.0, SOURCE.1).expect("valid dtn eid"),
        CreationTimestamp {
            time: DtnTime::from_millis(CREATION_MS),
            sequence: SEQUENCE,
        },
        LIFETIME_MS,
    );
    assert_eq!(primary.crc_type, CrcType::Crc32c);
    let mut bundle = Bundle::new(primary, Bytes::copy_from_slice(data));
    bundle.payload.crc_type = CrcType::Crc32c;
    bundle.extensions.push(ExtensionBlock {
        crc_type: CrcType::Crc32c,
        ..ExtensionBlock::new(
            2,
            ExtensionData::HopCount(HopCount {
                limit: u64::from(HOP_LIMIT),
                count: 0,
            }),
        )
    });
    bundle
}

fn bp7_bundle(data: &[u8]) -> bp7::Bundle {
    use bp7::flags::BlockControlFlags;
    let dtn = |(node, demux): (&str, &str)| {
        bp7::EndpointID::with_dtn(&format!("//{node}/{demux}")).expect("valid dtn eid")
    };
    let primary = bp7::primary::PrimaryBlockBuilder::default()
        .destination(dtn(DEST))
        .source(dtn(SOURCE))
        .report_to(dtn(SOURCE))
        .creation_timestamp(bp7::CreationTimestamp::with_time_and_seq(
            CREATION_MS,
            SEQUENCE,
        ))
        .lifetime(Duration::from_millis(LIFETIME_MS))
        .build()
        .expect("valid primary block");
    let mut bundle = bp7::Bundle::new(
        primary,
        vec![
            bp7::canonical::new_hop_count_block(2, BlockControlFlags::empty(), HOP_LIMIT),
            bp7::canonical::new_payload_block(BlockControlFlags::empty(), data.to_vec()),
        ],
    );
    bundle.set_crc(bp7::crc::CRC_32);
    bundle.sort_canonicals();
    bundle
}

/// The two bundles for one payload size, and their (identical) encoding.
struct Case {
    label: &'static str,
    ferry: Bundle,
    bp7: bp7::Bundle,
    wire: Bytes,
}

impl Case {
    fn new(label: &'static str, payload_len: usize) -> Self {
        let data = payload(payload_len);
        let ferry = ferry_bundle(&data);
        let mut bp7 = bp7_bundle(&data);
        let wire = ferry.encode().to_bytes();
        let bp7_wire = bp7.to_cbor();
        assert!(
            wire[..] == bp7_wire[..],
            "Ferry and bp7 encode the {label} bundle differently: not a like-for-like comparison"
        );
        // Both decode it, and bp7 finds its CRCs valid.
        assert_eq!(Bundle::decode(wire.clone()).expect("ferry decodes"), ferry);
        let mut back = bp7::Bundle::try_from(&wire[..]).expect("bp7 decodes");
        assert!(back.crc_valid(), "bp7 rejects the CRCs");
        assert_eq!(back.payload().map(Vec::as_slice), Some(&data[..]));
        Self {
            label,
            ferry,
            bp7,
            wire,
        }
    }

    fn throughput(&self) -> Throughput {
        if self.wire.len() < 64 * 1024 {
            Throughput::Elements(1)
        } else {
            Throughput::Bytes(self.wire.len() as u64)
        }
    }
}

fn cases() -> [Case; 2] {
    [Case::new("1KiB", 1024), Case::new("1MiB", 1024 * 1024)]
}

fn decode(c: &mut Criterion) {
    for case in cases() {
        let mut g = c.benchmark_group(format!("decode/{}", case.label));
        g.throughput(case.throughput());
        let wire = &case.wire;
        g.bench_function("ferry", |b| {
            // Cloning `Bytes` is a reference count increment; the decoded payload is a slice of
            // this buffer.
            b.iter(|| Bundle::decode(black_box(wire.clone())).expect("decodes"));
        });
        g.bench_function("bp7", |b| {
            b.iter(|| bp7::Bundle::try_from(black_box(&wire[..])).expect("decodes"));
        });
        g.bench_function("bp7+crc_valid", |b| {
            b.iter(|| {
                let mut bundle = bp7::Bundle::try_from(black_box(&wire[..])).expect("decodes");
                assert!(bundle.crc_valid());
                bundle
            });
        });
        g.finish();
    }

    // The same 1 MiB bundle with CRC-32C on the primary and hop count blocks but none on the
    // payload block (RFC 9171 makes canonical block CRCs optional): decoding then costs the
    // same whatever the payload size, because the payload is neither copied nor read. Compare
    // with `decode/1MiB/bp7`, which reads no CRC either.
    let mut bundle = ferry_bundle(&payload(1024 * 1024));
    bundle.payload.crc_type = CrcType::None;
    let wire = bundle.encode().to_bytes();
    let mut g = c.benchmark_group("decode/1MiB-payload-without-crc");
    g.throughput(Throughput::Bytes(wire.len() as u64));
    g.bench_function("ferry", |b| {
        b.iter(|| Bundle::decode(black_box(wire.clone())).expect("decodes"));
    });
    g.finish();
}

fn encode(c: &mut Criterion) {
    for mut case in cases() {
        let mut g = c.benchmark_group(format!("encode/{}", case.label));
        g.throughput(case.throughput());
        let ferry = &case.ferry;
        g.bench_function("ferry", |b| b.iter(|| black_box(ferry).encode()));
        g.bench_function("ferry+to_bytes", |b| {
            b.iter(|| black_box(ferry).encode().to_bytes());
        });
        let bp7 = &mut case.bp7;
        g.bench_function("bp7", |b| b.iter(|| black_box(&mut *bp7).to_cbor()));
        g.finish();
    }
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
