//! `docs/protocol.md` checked against the code: its RPC message and control message vectors
//! (the ```` ```vector rpc-* ```` and ```` ```vector control-* ```` blocks, read from the
//! document) decode to the values below and those values encode to exactly their bytes; and a
//! call made through the engine travels as the document's "Where an RPC message travels" says.
//! (The envelope vectors are seal's `tests/vectors.rs`.)

use bytes::Bytes;
use node::{Node, NodeConfig};
use rpc::{CallRequest, Param, Rpc, RpcConfig, Target};
use seal::Identity;
use std::time::Duration;
use store::MemoryStore;
use wire::rpc::{
    Ack, Call, CallId, CallResult, Cancel, FileRef, Hello, Message, Mode, Notice, Reject,
    RejectCode, Transport, Value,
};
use wire::{
    BundleId, Control, CreationTimestamp, DtnTime, Eid, LinkState, StreamAck, StreamSegment,
    Summary,
};

#[path = "../../seal/tests/common/vector_blocks.rs"]
mod vector_blocks;
use vector_blocks::Vectors;

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

/// The documented examples' call id: the bytes 00 to 0f.
fn id() -> CallId {
    CallId(std::array::from_fn(|i| i as u8))
}

const DEADLINE: DtnTime = DtnTime::from_millis(820_454_460_000);

/// The RPC messages of the document's vectors, by block name, with the names of their fields.
fn rpc_messages() -> Vec<(&'static str, Message, &'static [&'static str])> {
    let picture = b"P5 1 1 255\n\x80";
    vec![
        (
            "rpc-call",
            Message::Call(Call {
                id: id(),
                caller: eid("dtn://phone/"),
                mode: Mode::Explicit,
                server: Some(eid("dtn://drone/")),
                procedure: "demo".into(),
                params: vec![
                    Value::Bool(true),
                    Value::Int(-5),
                    Value::Float(1.5),
                    Value::Text("hi".into()),
                    Value::Bytes(Bytes::from_static(&[0x00, 0xff])),
                    Value::File(FileRef {
                        hash: *blake3::hash(picture).as_bytes(),
                        size: picture.len() as u64,
                        name: "p.pgm".into(),
                    }),
                ],
                requirements: "battery >= 50".into(),
                deadline: DEADLINE,
                transport: Transport::Auto,
            }),
            &[
                "array",
                "version",
                "kind",
                "id",
                "caller",
                "mode",
                "server",
                "procedure",
                "params",
                "value",
                "value",
                "value",
                "value",
                "value",
                "value",
                "requirements",
                "deadline",
                "transport",
            ],
        ),
        (
            "rpc-ack",
            Message::Ack(Ack {
                id: id(),
                server: eid("dtn://drone/"),
            }),
            &["array", "version", "kind", "id", "server"],
        ),
        (
            "rpc-result",
            Message::Result(CallResult {
                id: id(),
                server: eid("dtn://drone/"),
                value: Bytes::from_static(b"42"),
                files: vec![FileRef {
                    hash: *blake3::hash(picture).as_bytes(),
                    size: picture.len() as u64,
                    name: "p.pgm".into(),
                }],
                run_ms: 12,
            }),
            &[
                "array", "version", "kind", "id", "server", "value", "files", "file", "run-ms",
            ],
        ),
        (
            "rpc-reject",
            Message::Reject(Reject {
                id: id(),
                server: eid("dtn://drone/"),
                code: RejectCode::ExecutionFailed,
                detail: "exit status 2".into(),
                exit_status: Some(2),
                stderr_tail: Bytes::from_static(b"no camera\n"),
            }),
            &[
                "array",
                "version",
                "kind",
                "id",
                "server",
                "code",
                "detail",
                "exit-status",
                "stderr-tail",
            ],
        ),
        (
            "rpc-started",
            Message::Started(Notice {
                id: id(),
                server: eid("dtn://drone/"),
            }),
            &["array", "version", "kind", "id", "server"],
        ),
        (
            "rpc-done",
            Message::Done(Notice {
                id: id(),
                server: eid("dtn://drone/"),
            }),
            &["array", "version", "kind", "id", "server"],
        ),
        (
            "rpc-cancel",
            Message::Cancel(Cancel {
                id: id(),
                caller: eid("dtn://phone/"),
            }),
            &["array", "version", "kind", "id", "caller"],
        ),
        (
            "rpc-hello",
            Message::Hello(Hello {
                node: eid("dtn://drone/"),
            }),
            &["array", "version", "kind", "node"],
        ),
    ]
}

/// The bundle id of the documented bundle key.
fn keyed_id() -> BundleId {
    BundleId {
        source: eid("dtn://phone/~rpc"),
        creation: CreationTimestamp {
            time: DtnTime::from_millis(820_454_400_000),
            sequence: 3,
        },
        fragment: None,
    }
}

/// The control messages of the document's vectors.
fn control_messages() -> Vec<(&'static str, Control, &'static [&'static str])> {
    let open = StreamSegment::OPEN | StreamSegment::FROM_OPENER;
    vec![
        (
            "control-link-state",
            Control::LinkState(LinkState {
                origin: eid("dtn://drone/"),
                sequence: 820_454_400_000,
                lifetime_ms: 60_000,
                links: vec![(eid("dtn://phone/"), 1), (eid("dtn://tower/"), 3)],
            }),
            &[
                "array",
                "version",
                "kind",
                "origin",
                "sequence",
                "lifetime-ms",
                "links",
                "link",
                "link",
            ],
        ),
        (
            "control-summary",
            Control::Summary(Summary {
                have: vec![7, wire::bundle_key(&keyed_id())],
                purged: vec![1 << 40],
            }),
            &[
                "array", "version", "kind", "have", "key", "key", "purged", "key",
            ],
        ),
        (
            "control-stream",
            Control::Stream(StreamSegment {
                stream: 0x1234,
                flags: open,
                sequence: 0,
                acknowledged: 0,
                data: Bytes::from_static(b"\x00\x00\x00\x03abc"),
            }),
            &[
                "array",
                "version",
                "kind",
                "stream",
                "flags",
                "sequence",
                "acknowledged",
                "data",
            ],
        ),
        (
            "control-stream-acks",
            Control::StreamAcks(vec![
                StreamAck {
                    stream: 0x1234,
                    flags: StreamSegment::ACK,
                    sequence: 1,
                    acknowledged: 2,
                },
                StreamAck {
                    stream: 0x5678,
                    flags: StreamSegment::ACK | StreamSegment::FROM_OPENER,
                    sequence: 4,
                    acknowledged: 1,
                },
            ]),
            &["array", "version", "kind", "acks", "ack", "ack"],
        ),
        (
            "control-segments",
            Control::Segments(vec![
                StreamSegment {
                    stream: 0x1234,
                    flags: StreamSegment::ACK,
                    sequence: 1,
                    acknowledged: 2,
                    data: Bytes::from_static(b"de"),
                },
                StreamSegment {
                    stream: 0x1234,
                    flags: StreamSegment::ACK | StreamSegment::CLOSE,
                    sequence: 3,
                    acknowledged: 2,
                    data: Bytes::new(),
                },
            ]),
            &["array", "version", "kind", "segments", "segment", "segment"],
        ),
    ]
}

#[test]
fn rpc_message_vectors_decode_and_encode_to_their_bytes() {
    let v = Vectors::load();
    for (name, message, fields) in rpc_messages() {
        assert_eq!(v.field_names(name), fields, "{name}: fields");
        let bytes = Bytes::from(v.bytes(name));
        assert_eq!(
            Message::decode(&bytes).as_ref(),
            Ok(&message),
            "{name}: decoded"
        );
        assert_eq!(
            hex::encode(message.encode().unwrap()),
            hex::encode(&bytes),
            "{name}: encoded"
        );
    }
}

#[test]
fn control_message_vectors_decode_and_encode_to_their_bytes() {
    let v = Vectors::load();
    for (name, message, fields) in control_messages() {
        assert_eq!(v.field_names(name), fields, "{name}: fields");
        let bytes = Bytes::from(v.bytes(name));
        assert_eq!(
            Control::decode(&bytes).as_ref(),
            Ok(&message),
            "{name}: decoded"
        );
        assert_eq!(
            hex::encode(message.encode()),
            hex::encode(&bytes),
            "{name}: encoded"
        );
    }
}

/// A summary's bundle key is FNV-1a (64 bits) over the bundle id's source EID, creation time and
/// sequence number (and, for a fragment, offset and length), each coded as CBOR.
#[test]
fn the_bundle_key_is_fnv1a_of_the_documented_bytes() {
    let v = Vectors::load();
    let name = "control-bundle-key";
    assert_eq!(v.field_names(name), ["source", "time", "sequence", "key"]);
    let id = keyed_id();
    // The source as a hello's node field: the EID's CBOR coding, after the array head, version
    // and kind.
    let hello = Message::Hello(Hello {
        node: id.source.clone(),
    });
    assert_eq!(v.field(name, "source"), &hello.encode().unwrap()[3..]);
    let input: Vec<u8> = ["source", "time", "sequence"]
        .iter()
        .flat_map(|f| v.field(name, f).iter().copied())
        .collect();
    let fnv1a = input.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let key = u64::from_be_bytes(v.array::<8>(name, "key"));
    assert_eq!(fnv1a, key);
    assert_eq!(wire::bundle_key(&id), key);
}

/// Every `rpc-*` and `control-*` block of the document is one a test here checks.
#[test]
fn every_rpc_and_control_block_is_checked() {
    let v = Vectors::load();
    let mut known: Vec<&str> = rpc_messages().iter().map(|(name, _, _)| *name).collect();
    known.extend(control_messages().iter().map(|(name, _, _)| *name));
    known.push("control-bundle-key");
    known.sort_unstable();
    let found: Vec<&str> = v
        .names()
        .filter(|n| n.starts_with("rpc-") || n.starts_with("control-"))
        .collect();
    assert_eq!(found, known);
}

const NOW: DtnTime = DtnTime::from_millis(820_454_400_000);

/// The bundles waiting in a node's store for `destination`.
fn stored_for(node: &Node, destination: &str) -> Vec<wire::Bundle> {
    let store = node.store();
    store
        .list()
        .unwrap()
        .iter()
        .filter_map(|m| store.get(&m.id).unwrap())
        .map(|s| s.bundle)
        .filter(|b| b.primary.destination == eid(destination))
        .collect()
}

/// Calls made through the engine by dtn travel as the document says: a call to one node whose
/// key is known from `dtn://<caller>/~rpc` to `dtn://<server>/~rpc` in a pairwise envelope, its
/// file parameter from `~rpc-data` to `~rpc-data` in one too; a call to any node to
/// `dtn://~all/~rpc`, signed; each bundle of class dtn (no class block, or 0), living until the
/// call's deadline.
#[test]
fn calls_travel_as_documented() {
    let client_id = Identity::from_secret([1; 32]);
    let server_id = Identity::from_secret([2; 32]);
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        Box::new(MemoryStore::new(1 << 24)),
        NOW,
    );
    let config = RpcConfig {
        pinned_keys: vec![(eid("dtn://server/"), server_id.public())],
        ..RpcConfig::default()
    };
    let mut rpc = Rpc::new(config, client_id.clone(), [8; 32], &mut node, NOW);
    let file = Bytes::from(vec![0x5a; 3000]);
    let mut request = CallRequest::new(
        Target::Node(eid("dtn://server/")),
        "photo",
        vec![
            Param::Value(Value::Text("hi".into())),
            Param::File {
                name: "in.bin".into(),
                content: file.clone(),
            },
        ],
    );
    request.transport = Transport::Dtn;
    request.deadline = Some(NOW + Duration::from_millis(120_000));
    rpc.call(NOW, &mut node, request.clone()).unwrap();
    request.target = Target::Any;
    rpc.call(NOW, &mut node, request).unwrap();

    let pair = server_id.pair_key(&client_id.public()).unwrap();
    let [call] = &stored_for(&node, "dtn://server/~rpc")[..] else {
        panic!("one call bundle for the server");
    };
    assert_eq!(call.primary.source, eid("dtn://client/~rpc"));
    assert_eq!(node::class_of(call), node::Class::Dtn);
    assert_eq!(call.primary.lifetime_ms, 120_000);
    let sealed = &call.payload.data;
    assert_eq!(&sealed[..2], &[1, 0x03], "version 1, pairwise");
    let opened = pair.open(sealed).unwrap();
    let Message::Call(message) = Message::decode(&Bytes::from(opened.body)).unwrap() else {
        panic!("a call");
    };
    assert_eq!(message.caller, eid("dtn://client/"));
    assert_eq!(message.mode, Mode::Explicit);
    assert_eq!(message.server, Some(eid("dtn://server/")));
    let Some(Value::File(named)) = message.params.get(1) else {
        panic!("the file parameter");
    };
    assert_eq!(named.hash, *blake3::hash(&file).as_bytes());
    assert_eq!(named.size, file.len() as u64);

    // The file on the data channel, sealed pairwise too: it opens to the bytes the hash names.
    let data = stored_for(&node, "dtn://server/~rpc-data");
    assert_eq!(data.len(), 1, "the file goes once, to the one server");
    assert_eq!(data[0].primary.source, eid("dtn://client/~rpc-data"));
    assert_eq!(node::class_of(&data[0]), node::Class::Dtn);
    assert_eq!(pair.open(&data[0].payload.data).unwrap().body, file);

    // The call to any node: to every node, signed, not encrypted.
    let [any] = &stored_for(&node, "dtn://~all/~rpc")[..] else {
        panic!("one broadcast call bundle");
    };
    assert_eq!(any.primary.source, eid("dtn://client/~rpc"));
    assert_eq!(any.primary.lifetime_ms, 120_000);
    let signed = seal::verify(&any.payload.data).unwrap();
    assert_eq!(any.payload.data[..2], [1, 0x00], "version 1, signed only");
    assert_eq!(signed.sender, client_id.public());
    assert_eq!(signed.recipient, None);
    let Message::Call(message) = Message::decode(&Bytes::copy_from_slice(signed.content)).unwrap()
    else {
        panic!("a call");
    };
    assert_eq!((message.mode, message.server), (Mode::Any, None));
}
