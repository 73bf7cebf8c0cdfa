//! The engine driven by hand, one node at a time: what it does with messages that are forged,
//! tampered with, replayed or misdirected.

use bytes::Bytes;
use node::{Class, Delivery, Event, Node, NodeConfig};
use rpc::{ParamType, ProcedureSpec, Rpc, RpcConfig, RpcEvent};
use seal::Identity;
use store::MemoryStore;
use wire::rpc::{Call, CallId, CallResult, Message, Mode, Transport, Value};
use wire::{BundleId, CreationTimestamp, DtnTime, Eid};

const NOW: DtnTime = 820_454_400_000;

fn eid(s: &str) -> Eid {
    s.parse().unwrap()
}

fn server() -> (Node, Rpc) {
    let mut node = Node::new(
        NodeConfig::new(eid("dtn://server/")),
        Box::new(MemoryStore::new(1 << 20)),
        NOW,
    );
    let mut config = RpcConfig::default();
    config
        .procedures
        .push(ProcedureSpec::new("echo", vec![ParamType::Text]));
    let rpc = Rpc::new(
        config,
        Identity::from_secret([2; 32]),
        [9; 32],
        &mut node,
        NOW,
    );
    (node, rpc)
}

fn call(id: u8) -> Message {
    Message::Call(Call {
        id: CallId([id; 16]),
        caller: eid("dtn://client/"),
        mode: Mode::Explicit,
        server: Some(eid("dtn://server/")),
        procedure: "echo".into(),
        params: vec![Value::Text("hello".into())],
        requirements: String::new(),
        deadline: NOW + 60_000,
        transport: Transport::Dtn,
    })
}

fn deliver(node: &mut Node, rpc: &mut Rpc, payload: Vec<u8>, seq: u64) {
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid("dtn://client/~rpc"),
            creation: CreationTimestamp {
                time: NOW,
                sequence: seq,
            },
            fragment: None,
        },
        destination: eid("dtn://server/~rpc"),
        class: Class::Dtn,
        created: NOW,
        expiry: NOW + 60_000,
        payload: Bytes::from(payload),
    });
    assert!(
        rpc.handle_node_event(NOW, node, &event),
        "the engine's endpoint"
    );
}

fn executions(rpc: &mut Rpc) -> usize {
    std::iter::from_fn(|| rpc.poll_event())
        .filter(|e| matches!(e, RpcEvent::Execute(_)))
        .count()
}

#[test]
fn tampered_and_forged_calls_are_dropped_and_counted() {
    let (mut node, mut rpc) = server();
    let client = Identity::from_secret([1; 32]);
    let body = call(1).encode().unwrap();
    let to = rpc.public_key();
    let sealed = client.seal(&body, Some(&to), [7; 32]).unwrap();

    // A relay flips one bit of the ciphertext, then of the signature, then of the sender key.
    for (n, at) in [sealed.len() / 2, sealed.len() - 1, 3]
        .into_iter()
        .enumerate()
    {
        let mut bad = sealed.clone();
        bad[at] ^= 0x10;
        deliver(&mut node, &mut rpc, bad, n as u64);
    }
    // (A ciphertext re-signed by another key is the seal crate's test: it does not decrypt.)
    // Garbage.
    deliver(&mut node, &mut rpc, b"not an envelope".to_vec(), 11);
    assert_eq!(rpc.stats().forged, 4);
    assert_eq!(executions(&mut rpc), 0, "nothing forged may run");

    // The genuine call runs, once, however often it arrives.
    deliver(&mut node, &mut rpc, sealed.clone(), 20);
    deliver(&mut node, &mut rpc, sealed.clone(), 21);
    assert_eq!(executions(&mut rpc), 1);
    assert_eq!(rpc.stats().duplicates, 1);
}

#[test]
fn replies_must_be_encrypted_to_us_and_match_a_call() {
    let (mut node, mut rpc) = server();
    let other = Identity::from_secret([4; 32]);
    let result = Message::Result(CallResult {
        id: CallId([5; 16]),
        server: eid("dtn://other/"),
        value: Bytes::from_static(b"x"),
        files: vec![],
        run_ms: 1,
    });
    let body = result.encode().unwrap();
    // Signed but not encrypted: not what a Ferry server sends.
    let plain = other.seal(&body, None, [1; 32]).unwrap();
    deliver(&mut node, &mut rpc, plain, 1);
    assert_eq!(rpc.stats().forged, 1);
    // Encrypted to us but for a call we never made.
    let me = rpc.public_key();
    let sealed = other.seal(&body, Some(&me), [1; 32]).unwrap();
    deliver(&mut node, &mut rpc, sealed, 2);
    assert_eq!(rpc.stats().unmatched, 1);
}

#[test]
fn text_stands_for_a_declared_number_or_flag_only_when_it_is_one() {
    use rpc::{ParamType as T, check_params};
    use wire::rpc::Value as V;
    let text = |s: &str| V::Text(s.into());
    assert_eq!(
        check_params(
            &[T::Int, T::Float, T::Bool, T::Text, T::Float],
            &[text("-42"), text("0.5"), text("true"), text("7"), V::Int(3)]
        ),
        Ok(vec![
            V::Int(-42),
            V::Float(0.5),
            V::Bool(true),
            text("7"),
            V::Int(3)
        ])
    );
    for (ty, bad) in [
        (T::Int, "4.2"),
        (T::Int, " 4"),
        (T::Bool, "yes"),
        (T::Float, ""),
    ] {
        let e = check_params(&[ty], &[text(bad)]).unwrap_err();
        assert!(e.starts_with("parameter 1 must be"), "{e}");
    }
    // Typed values are never converted to text, nor numbers to flags.
    assert!(check_params(&[T::Text], &[V::Int(1)]).is_err());
    assert!(check_params(&[T::Bool], &[V::Int(1)]).is_err());
    assert!(check_params(&[T::Int, T::Int], &[V::Int(1)]).is_err());
    assert!(check_params(&[T::Text], &[text("a\0b")]).is_err());
}

#[test]
fn files_for_a_known_node_travel_sealed_and_open_at_the_server() {
    let server_id = Identity::from_secret([2; 32]);
    let mut client_node = Node::new(
        NodeConfig::new(eid("dtn://client/")),
        Box::new(MemoryStore::new(1 << 24)),
        NOW,
    );
    let mut config = RpcConfig::default();
    config
        .pinned_keys
        .push((eid("dtn://server/"), server_id.public()));
    let mut client = Rpc::new(
        config,
        Identity::from_secret([1; 32]),
        [8; 32],
        &mut client_node,
        NOW,
    );
    let secret = Bytes::from(vec![0x5a; 20_000]);
    let mut request = rpc::CallRequest::new(
        rpc::Target::Node(eid("dtn://server/")),
        "photo",
        vec![rpc::Param::File {
            name: "in.bin".into(),
            content: secret.clone(),
        }],
    );
    request.transport = Transport::Dtn;
    client.call(NOW, &mut client_node, request).unwrap();
    // What waits in the client's store for the data channel is not the file.
    let store = client_node.store();
    let payloads: Vec<Bytes> = store
        .list()
        .unwrap()
        .iter()
        .filter_map(|m| store.get(&m.id).unwrap())
        .filter(|b| b.bundle.primary.destination == eid("dtn://server/~rpc-data"))
        .map(|b| b.bundle.payload.data.clone())
        .collect();
    assert_eq!(payloads.len(), 1);
    let sealed = &payloads[0];
    assert_ne!(sealed, &secret);
    assert!(
        !sealed.windows(64).any(|w| w == &secret[..64]),
        "the file's bytes show through"
    );
    // The server opens it: the file it keeps is the plaintext, by its hash.
    let (mut node, mut rpc) = server();
    let event = Event::Delivered(Delivery {
        id: BundleId {
            source: eid("dtn://client/~rpc-data"),
            creation: CreationTimestamp {
                time: NOW,
                sequence: 1,
            },
            fragment: None,
        },
        destination: eid("dtn://server/~rpc-data"),
        class: Class::Dtn,
        created: NOW,
        expiry: NOW + 60_000,
        payload: sealed.clone(),
    });
    assert!(rpc.handle_node_event(NOW, &mut node, &event));
    let hash = *blake3::hash(&secret).as_bytes();
    assert_eq!(rpc.file(&node, &hash), Some(secret));
}
